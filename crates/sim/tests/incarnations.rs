//! The incarnations of paper 6.2 in the simulator: switches whose data plane only forwards,
//! with a CPU agent each, still give total order, and cost what the paper's model says.

mod common;

use common::run_clean;
use onepipe_proto::Incarnation;
use onepipe_sim::SimConfig;
use onepipe_sim::figures::fig9a;
use onepipe_wire::Duration;

fn cpu(delay_us: u64) -> Incarnation {
    Incarnation::SwitchCpu {
        delay: Duration::from_micros(delay_us),
    }
}

/// Best effort (seed `seed`) and reliable (`seed + 1`) pass every check on `incarnation`.
fn keeps_every_check(incarnation: Incarnation, seed: u64) {
    for (seed, reliable) in [(seed, false), (seed + 1, true)] {
        let c = SimConfig {
            seed,
            reliable,
            incarnation,
            ..SimConfig::default()
        };
        let r = run_clean(&c);
        assert!(r.delivered > 1000, "reliable={reliable}: {r:?}");
    }
}

/// Lossy, duplicating links for a while, and still order on `incarnation`.
fn keeps_order_with_faults(incarnation: Incarnation, seed: u64) {
    let c = SimConfig {
        seed,
        incarnation,
        loss: 1e-3,
        duplicate: 1e-3,
        faults_for: Some(Duration::from_micros(300)),
        ..SimConfig::default()
    };
    let r = onepipe_sim::run(&c, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    assert!(r.checks.total_order && r.checks.fifo && r.checks.causality);
    assert!(r.delivered > 1000, "{r:?}");
}

#[test]
fn switch_cpus_keep_every_ordering_check_best_effort_and_reliable() {
    keeps_every_check(cpu(5), 11);
}

#[test]
fn switch_cpus_with_faults_keep_order() {
    keeps_order_with_faults(cpu(2), 13);
}

/// Fig. 9a's shape: on a chip best effort costs half a beacon interval and the skew over
/// unordered; each switch CPU, or each representative's detour, on the longest path adds its
/// delay; the model holds within 15%.
#[test]
fn fig9a_latency_follows_the_model_per_incarnation() {
    let delay = Duration::from_micros(5);
    let fig = fig9a(&[8, 32], delay, &mut |_| {}).unwrap();
    let mean = |series: &str, x: f64| {
        fig.rows
            .iter()
            .find(|r| r.series == series && r.x == x)
            .unwrap_or_else(|| panic!("{series} at {x}"))
            .latency_us
            .mean
    };
    for x in [8.0, 32.0] {
        let (unordered, chip, cpu) = (mean("unordered", x), mean("1pipe-be", x), mean("1pipe-be-cpu", x));
        assert!(unordered < chip && chip < cpu, "x={x}: {unordered} {chip} {cpu}");
        assert!(mean("1pipe-r-cpu", x) > cpu, "reliable adds a round trip");
        let host = mean("1pipe-be-host", x);
        assert!(chip < host, "x={x}: a detour per switch: {chip} {host}");
        assert!(mean("1pipe-r-host", x) > host, "reliable adds a round trip");
    }
    // One switch between two of 8 processes, five on the longest path among 32 on the testbed.
    let added = |x: f64| mean("1pipe-be-cpu", x) - mean("1pipe-be", x);
    assert!(
        added(32.0) > 4.0 * added(8.0),
        "{} vs {}",
        added(32.0),
        added(8.0)
    );
    let detour = |x: f64| mean("1pipe-be-host", x) - mean("1pipe-be", x);
    assert!(
        detour(32.0) > 3.0 * detour(8.0),
        "{} vs {}",
        detour(32.0),
        detour(8.0)
    );
    assert_eq!(fig.model.len(), 6, "{:?}", fig.model);
    for m in &fig.model {
        assert!((0.85..1.15).contains(&m.ratio), "{m:?}");
    }
    let longest: Vec<u32> = fig.model.iter().map(|m| m.switches_on_longest_path).collect();
    assert_eq!(longest, [1, 1, 1, 5, 5, 5]);
    assert!(fig.rows.iter().all(|r| r.violations == 0));
}

/// Host delegation (paper 6.2.3): switches that only route, a representative per switch
/// aggregating the beacons its switch tunnels to it, and still every ordering check holds.
#[test]
fn host_representatives_keep_every_ordering_check_best_effort_and_reliable() {
    keeps_every_check(Incarnation::Host, 21);
}

#[test]
fn host_representatives_with_faults_keep_order() {
    keeps_order_with_faults(Incarnation::Host, 23);
}

/// Paper 6.2.3 under 5.2: a representative that stops is detected as its switch would be (its
/// neighbours' representatives time its links out and report them), and the controller
/// recovers: around a spine's, no process fails; a ToR's takes its rack, as a ToR's failure
/// does. Every scattering is delivered by all its correct receivers or none.
#[test]
fn a_failed_representative_is_detected_like_a_switch_and_recovered() {
    for (name, rack) in [("spine0.0", vec![]), ("tor0.0", (0..8).collect::<Vec<u32>>())] {
        let c = SimConfig {
            incarnation: Incarnation::Host,
            reliable: true,
            controller: true,
            send_for: Duration::from_micros(400),
            failures: vec![format!("representative:{name}@200us").parse().unwrap()],
            ..SimConfig::default()
        };
        let r = onepipe_sim::run(&c, &mut |_, _| {}).unwrap();
        assert_eq!(r.violations, 0, "{name}: {:?}", r.examples);
        assert!(
            r.checks.atomicity && r.checks.total_order && r.checks.liveness,
            "{name}"
        );
        let f = r.failure.as_ref().expect("a failure outcome");
        let timeout_us = c.dead_after_intervals as f64 * c.beacon_interval.as_nanos() as f64 / 1e3;
        let detected = f.detection_us.expect("reported");
        assert!(detected >= timeout_us, "{name}: detected after {detected} us");
        let declared: Vec<u32> = f.failed_processes.iter().map(|p| p.0).collect();
        assert_eq!(declared, rack, "{name}");
        assert_eq!(f.stalled_processes, 0, "{name}: {f:?}");
    }
}

#[test]
fn a_representative_fails_only_with_representatives() {
    let c = SimConfig {
        failures: vec!["representative:core0@100us".parse().unwrap()],
        ..SimConfig::default()
    };
    let e = onepipe_sim::run(&c, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("--incarnation host"), "{e}");
}
