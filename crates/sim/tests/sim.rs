//! End-to-end simulator runs: checks pass, a seed replays exactly, faults are survived.

use onepipe_sim::{SimConfig, run};

fn quiet(config: &SimConfig) -> onepipe_sim::SimReport {
    let report = run(config, &mut |_, _| {}).unwrap_or_else(|e| panic!("seed={}: {e}", config.seed));
    assert_eq!(
        report.violations, 0,
        "seed={}: {:?}",
        config.seed, report.examples
    );
    report
}

#[test]
fn default_run_is_ordered_and_complete() {
    let r = quiet(&SimConfig::default());
    assert!(r.delivered > 1000, "{r:?}");
    assert!(r.liveness_messages > 100);
    assert!(r.checks.total_order && r.checks.liveness);
    // Paper profile: best-effort latency is a few microseconds over 5 hops.
    assert!(
        r.latency_us.p50 > 2.0 && r.latency_us.p50 < 30.0,
        "{:?}",
        r.latency_us
    );
}

#[test]
fn same_seed_same_trace() {
    let mut c = SimConfig {
        seed: 7,
        send_for: onepipe_wire::Duration::from_micros(100),
        ..SimConfig::default()
    };
    let a = quiet(&c);
    let b = quiet(&c);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.events, b.events);
    c.seed = 8;
    let d = quiet(&c);
    assert_ne!(a.trace_hash, d.trace_hash);
}
