//! In-network Paxos in the simulator (thesis 004, chapters 5 and 6): a seed reproduces a run
//! exactly; under seeded loss, duplication and reordering, and with the coordinator, an acceptor
//! or a replica stopped in the middle of traffic, the replicas agree, decide only requests, and
//! the clients' history is linearizable.

use onepipe_bench::paxos::Failure;
use onepipe_bench::paxos::sim::{PaxosSimConfig, PaxosSimReport, run_sim};
use onepipe_bench::paxos::sim_campaign;
use onepipe_bench::paxos::sim_figures::{self, FigureOptions};
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

/// Calls made after `t_ns` and answered.
fn answered_after(r: &PaxosSimReport, t_ns: u64) -> usize {
    r.report
        .history
        .iter()
        .filter(|h| h.call_ns > t_ns && h.outcome == onepipe_check::Outcome::Ok)
        .count()
}

/// Thesis 6.x: the coordinator switch stops; the proposers' retries fail over to the backup
/// software coordinator, which runs Phase 1 and serves the rest of the window; no committed
/// value is lost or reordered.
#[test]
fn when_the_coordinator_fails_the_backup_takes_over_and_the_checks_pass() {
    for placement in [Placement::InNetwork, Placement::Software] {
        let c = PaxosSimConfig {
            placement,
            duration: Duration::from_millis(30),
            failure: Some(Failure::Coordinator(Duration::from_millis(3))),
            loss: 0.002,
            ..small(11)
        };
        let r = run_sim(&c).unwrap();
        eprintln!("{placement:?}: {}", summary(&r));
        assert_checks_pass(&r);
        assert!(
            r.report.failovers > 0,
            "the proposers left the coordinator: {}",
            summary(&r)
        );
        assert!(
            r.report.roles.takeovers >= 2,
            "the backup ran Phase 1 after the primary's: {}",
            summary(&r)
        );
        // Failover takes `failover_after` retries; calls after it are answered.
        let failed_at = r.report.failed_at.unwrap().as_nanos();
        let after_failover = failed_at + 15_000_000;
        assert!(answered_after(&r, after_failover) > 50, "{}", summary(&r));
    }
}

/// f = 1: an acceptor or a replica stops in the middle of traffic; the others carry on.
#[test]
fn when_an_acceptor_or_a_replica_fails_the_run_goes_on_and_the_checks_pass() {
    for failure in [
        Failure::Acceptor(1, Duration::from_millis(2)),
        Failure::Replica(0, Duration::from_millis(2)),
    ] {
        let c = PaxosSimConfig {
            failure: Some(failure),
            reorder: 0.01,
            ..small(5)
        };
        let r = run_sim(&c).unwrap();
        eprintln!("{failure:?}: {}", summary(&r));
        assert_checks_pass(&r);
        let failed_at = r.report.failed_at.unwrap().as_nanos();
        assert!(answered_after(&r, failed_at + 1_000_000) > 100, "{}", summary(&r));
    }
}

#[test]
fn campaign_seeds_pass_and_draw_what_they_say() {
    for seed in 1..=3 {
        let run = sim_campaign::run_seed(seed).unwrap();
        assert!(run.passed, "seed={seed}: {run:?}");
        assert_ne!(run.failure, "none");
        assert_eq!(run.trace_hash, sim_campaign::run_seed(seed).unwrap().trace_hash);
    }
}

/// The figures' shape with tiny parameters: in-network above software once the software
/// coordinator saturates, and partitions scaling when each has its replica worker.
#[test]
fn the_figures_run_small() {
    let o = FigureOptions {
        duration: Duration::from_millis(1),
        clients: vec![1, 8],
        partitions: vec![1, 2],
        partition_clients: 32,
        partition_client_hosts: 4,
        ..FigureOptions::default()
    };
    let t = sim_figures::throughput(&o, &mut |_| {}).unwrap();
    assert_eq!(t.rows.len(), 4);
    assert!(t.checks_ok());
    let at = |fig: &sim_figures::PaxosFigure, series: &str, x: f64| {
        fig.rows
            .iter()
            .find(|r| r.series == series && r.x == x)
            .unwrap()
            .values_per_s
    };
    assert!(
        at(&t, "in-network", 8.0) > 3.0 * at(&t, "software", 8.0),
        "{:?}",
        t.rows
    );
    assert!(
        t.plots
            .iter()
            .all(|p| p.series.iter().all(|s| s.points.len() == 2))
    );
    let p = sim_figures::partitions(&o, &mut |_| {}).unwrap();
    assert_eq!(p.rows.len(), 4);
    assert!(p.checks_ok());
    let (one, two) = (
        at(&p, "worker per partition", 1.0),
        at(&p, "worker per partition", 2.0),
    );
    assert!(two > 1.5 * one, "{:?}", p.rows);
    let png = std::env::temp_dir().join(format!("onepipe-paxos-fig-{}.png", std::process::id()));
    onepipe_bench::plot::write_png(&t.plots, &png).unwrap();
    assert!(std::fs::metadata(&png).unwrap().len() > 0);
    let _ = std::fs::remove_file(&png);
}
