//! Paper 5.2 in the simulator: the controller on management links recovers the reliable service
//! from host, ToR, core-switch and core-link failures on the paper's testbed, with every
//! scattering delivered by all of its correct receivers or by none; detection takes the
//! configured number of beacon intervals.

use onepipe_sim::{Failure, SimConfig, SimReport};

fn config(fail: &str) -> SimConfig {
    SimConfig {
        reliable: true,
        controller: true,
        send_for: onepipe_wire::Duration::from_micros(400),
        failures: vec![fail.parse::<Failure>().unwrap()],
        ..SimConfig::default()
    }
}

fn run(config: &SimConfig) -> SimReport {
    let r = onepipe_sim::run(config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "seed={}: {:?}", r.seed, r.examples);
    assert!(r.checks.atomicity && r.checks.total_order && r.checks.causality);
    r
}

/// Detection (paper 7.2): a failure is reported once beacons have been missing for the
/// configured number of intervals, plus the way to the controller.
fn assert_detected_in_time(r: &SimReport, c: &SimConfig) {
    let f = r.failure.as_ref().unwrap();
    let detection = f.detection_us.unwrap();
    let timeout_us = c.dead_after_intervals as f64 * c.beacon_interval.as_nanos() as f64 / 1e3;
    let slack_us = 2.0 * c.beacon_interval.as_nanos() as f64 / 1e3 + c.control_delay.as_nanos() as f64 / 1e3;
    assert!(
        detection >= timeout_us && detection <= timeout_us + slack_us,
        "detected after {detection} us; timeout {timeout_us} us"
    );
}

fn failed(r: &SimReport) -> Vec<u32> {
    r.failure
        .as_ref()
        .unwrap()
        .failed_processes
        .iter()
        .map(|f| f.0)
        .collect()
}

fn recovered(r: &SimReport) -> f64 {
    let f = r.failure.as_ref().unwrap();
    assert_eq!(f.stalled_processes, 0, "{f:?}");
    let stall = f.recovery_us.as_ref().expect("correct processes recovered");
    // The mean is not bound by the percentiles (an outlier can pull it past p95), and equal
    // stalls sum with rounding: only the percentiles' order is exact.
    assert!(
        stall.p5 <= stall.p95 && stall.mean.is_finite() && stall.mean > 0.0,
        "{stall:?}"
    );
    stall.mean
}

#[test]
fn a_failed_host_is_declared_failed_and_the_rest_recover() {
    let c = config("host:5@100us");
    let r = run(&c);
    assert_eq!(failed(&r), vec![5]);
    assert_detected_in_time(&r, &c);
    let stall = recovered(&r);
    // Detection, then the procedure's rounds: more than the timeout, and well under a
    // millisecond (the answer timeout would show as 2 ms).
    assert!((30.0..500.0).contains(&stall), "recovery {stall} us");
    // Broadcast traffic was in flight to process 5: some scatterings were recalled.
    assert!(r.failure.as_ref().unwrap().aborted > 0);
}

#[test]
fn a_failed_tor_takes_its_rack() {
    let c = config("switch:tor0.1@100us");
    let r = run(&c);
    assert_eq!(failed(&r), (8..16).collect::<Vec<u32>>());
    assert_detected_in_time(&r, &c);
    recovered(&r);
}

#[test]
fn core_failures_fail_no_process() {
    for fail in ["switch:core0@100us", "link:spine0.0-core0@100us"] {
        let c = config(fail);
        let r = run(&c);
        assert!(failed(&r).is_empty(), "{fail}: {:?}", failed(&r));
        assert_detected_in_time(&r, &c);
        recovered(&r);
        assert_eq!(r.failure.as_ref().unwrap().aborted, 0, "{fail}");
    }
}

#[test]
fn a_controller_run_replays_exactly() {
    let c = config("host:3@80us");
    assert_eq!(run(&c).trace_hash, run(&c).trace_hash);
}

#[test]
fn controller_needs_the_reliable_service_and_permanent_failures() {
    let mut c = config("host:1@100us");
    c.reliable = false;
    let e = onepipe_sim::run(&c, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("controller"), "{e}");
    let c = config("host:1@100us+50us");
    let e = onepipe_sim::run(&c, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("permanent"), "{e}");
}

/// Paper Fig. 10's sweep: every kind recovers, with no violation, and the recovery takes
/// longer than detection and stays within twice the paper's either way.
#[test]
fn the_recovery_sweep_recovers_from_every_kind() {
    use onepipe_sim::recovery::{FailureKind, recovery};
    let rows = recovery(&[2, 8, 16, 32], 1, &mut |_| {}).unwrap();
    assert_eq!(rows.len(), 4 * FailureKind::ALL.len());
    for r in &rows {
        assert_eq!(r.violations, 0, "{r:?}");
        assert_eq!(r.stalled_processes, 0, "{r:?}");
        assert!(r.recovery_us.mean > r.detection_us_mean, "{r:?}");
        // Virtual time, so exact: with the paper's timing, the controller's CPU included.
        if let Some(ratio) = r.ratio_to_paper {
            assert!((0.5..2.0).contains(&ratio), "{r:?}");
        }
        let expect_failed = match (r.kind, r.hosts) {
            (FailureKind::Host, _) => 1,
            (FailureKind::Tor, 2) => 1,
            (FailureKind::Tor, h) => h as usize / 4,
            _ => 0,
        };
        assert_eq!(r.failed_processes, expect_failed, "{r:?}");
    }
    // The paper's jump for a ToR: the controller notifies every correct process of every
    // process in the rack.
    let at_32 = |kind| rows.iter().find(|r| r.kind == kind && r.hosts == 32).unwrap();
    let (tor, host) = (at_32(FailureKind::Tor), at_32(FailureKind::Host));
    assert!(
        tor.recovery_us.mean > 1.5 * host.recovery_us.mean,
        "{tor:?} {host:?}"
    );
}
