//! In-network Paxos in the simulator (thesis 004, chapters 5 and 6): a seed reproduces a run
//! exactly; under seeded loss, duplication and reordering, and with the coordinator, an acceptor
//! or a replica stopped in the middle of traffic, the replicas agree, decide only requests, and
//! the clients' history is linearizable.

use onepipe_bench::paxos::Failure;
use onepipe_bench::paxos::sim::{PaxosSimConfig, PaxosSimReport, run_sim};
use onepipe_paxos::Placement;
use onepipe_wire::Duration;

fn small(seed: u64) -> PaxosSimConfig {
    PaxosSimConfig {
        clients: 8,
        keys: 50,
        duration: Duration::from_millis(10),
        seed,
        ..PaxosSimConfig::default()
    }
}

fn summary(r: &PaxosSimReport) -> String {
    let p = &r.report;
    format!(
        "ok={} unknown={} retries={} failovers={} takeovers={} decided={} events={} hash={:x} checks={:?}",
        p.ok,
        p.unknown,
        p.retries,
        p.failovers,
        p.roles.takeovers,
        p.checks.decided_max,
        r.stats.events,
        r.stats.trace_hash,
        p.checks
    )
}

fn assert_checks_pass(r: &PaxosSimReport) {
    let c = &r.report.checks;
    assert_eq!(c.agreement, Some(true), "{}", summary(r));
    assert_eq!(c.validity, Some(true), "{}", summary(r));
    assert_eq!(c.linearizable, Some(true), "{}", summary(r));
    assert!(c.problem.is_none(), "{}", summary(r));
}

#[test]
fn a_faulty_run_passes_its_checks_and_its_seed_replays_it() {
    let c = PaxosSimConfig {
        loss: 0.01,
        duplicate: 0.01,
        reorder: 0.02,
        ..small(7)
    };
    let a = run_sim(&c).unwrap();
    eprintln!("{}", summary(&a));
    assert_checks_pass(&a);
    assert!(a.report.ok > 100, "{}", summary(&a));
    assert!(a.stats.dropped_loss > 0 && a.stats.duplicated > 0 && a.stats.reordered > 0);
    let b = run_sim(&c).unwrap();
    assert_eq!(a.stats, b.stats, "the same seed, the same trace");
    assert_eq!(a.report.history, b.report.history);
    let other = run_sim(&PaxosSimConfig { seed: 8, ..c }).unwrap();
    assert_ne!(a.stats.trace_hash, other.stats.trace_hash, "the seed matters");
}
