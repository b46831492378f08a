//! NetChain in the simulator: a seed reproduces a run exactly; seeded faults (loss, reordering,
//! a switch's failure in the middle of traffic) never lose an acknowledged write, and the
//! recovery completes (paper 002, section 5).

use onepipe_bench::netchain::sim::{Fabric, Load, NetchainSimConfig, NetchainSimReport, run_sim};
use onepipe_wire::Duration;

fn small(seed: u64) -> NetchainSimConfig {
    NetchainSimConfig {
        keys: 200,
        write_ratio: 0.3,
        load: Load::Closed { clients: 16 },
        duration: Duration::from_millis(2),
        seed,
        ..NetchainSimConfig::default()
    }
}

fn summary(r: &NetchainSimReport) -> String {
    format!(
        "ops={} ok={} unknown={} lost={:?} recovered={} events={} hash={:x} failover={:?} recovery={:?}",
        r.report.ops,
        r.ok_ops,
        r.report.unknown,
        r.report.acknowledged_writes_lost,
        r.recovered,
        r.stats.events,
        r.stats.trace_hash,
        r.report.failover(),
        r.report.recovery()
    )
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let c = NetchainSimConfig {
        loss: 0.01,
        reorder: 0.01,
        failure: Some((1, Duration::from_millis(1))),
        ..small(7)
    };
    let a = run_sim(&c).unwrap();
    let b = run_sim(&c).unwrap();
    eprintln!("{}", summary(&a));
    assert_eq!(a.stats, b.stats);
    assert_eq!(a.report.history, b.report.history);
    assert_eq!(a.ok_ops, b.ok_ops);
    assert!(a.ok_ops > 0);
    let other = run_sim(&NetchainSimConfig { seed: 8, ..c }).unwrap();
    assert_ne!(a.stats.trace_hash, other.stats.trace_hash, "the seed matters");
}

#[test]
#[ignore]
fn debug_seed() {
    let seed: u64 = std::env::var("SEED").unwrap().parse().unwrap();
    let events_max: u64 = std::env::var("EVENTS").unwrap().parse().unwrap();
    let c = NetchainSimConfig {
        loss: 0.01,
        reorder: 0.01,
        failure: Some((1, Duration::from_millis(1))),
        events_max,
        ..small(seed)
    };
    match run_sim(&c) {
        Ok(r) => eprintln!("{} {:?}", summary(&r), r.report.events),
        Err(e) => eprintln!("{e}"),
    }
}
