//! cosy's applications in the simulator (paper 003, section 6): the failure detector (6.3)
//! declares a crash within misses T_P + delta(0) and never on a target that answered; the
//! storage client (6.1) never sees a read done before its reply, and leaves the core to the
//! throughput job when it sleeps until the bound.
//!
//! The detection bound takes no slack: the simulator fires the host's deadline timer at its
//! instant, and the detector judges a probe the moment its completion is posted.

use onepipe_bench::cosy::CosyFabric;
use onepipe_bench::cosy::apps::detector::{DetectorConfig, DetectorReport, sweep};
use onepipe_bench::cosy::apps::storage::{Mode, ModeReport, StorageConfig, run, run_mode};
use onepipe_wire::Duration;

fn detector(period_us: u64, load: f64, misses: u32) -> DetectorConfig {
    let fabric = CosyFabric::testbed(100_000_000_000);
    let mut c = DetectorConfig::paper(fabric, Duration::from_micros(period_us), load, 7);
    c.misses = misses;
    c
}

fn assert_detector_sound(r: &DetectorReport, runs: usize) {
    assert_eq!((r.runs, r.detected), (runs, runs), "every crash detected");
    assert!(
        r.detection_within_bound,
        "{:?} > {}",
        r.detection_us, r.detection_bound_us
    );
    assert!(r.detection_us.max <= r.detection_bound_us + 1e-9);
    // A probe sent after the crash reaches no one: a detection is at least its bound's
    // worth after the last probe answered, never instant.
    assert!(r.detection_us.p50 > 0.0);
    assert_eq!(r.answered_while_down, 0, "an rsvp from a crashed host");
    assert_eq!(r.late, 0, "a probe flagged after its bound");
    assert!(
        r.revival_us_max.is_some(),
        "the target answers again once it is back"
    );
    // Every run probes before the crash, during it, and after the recovery.
    for run in &r.run_list {
        assert!(run.probes >= 12 && run.answered >= 8, "{run:?}");
    }
}

/// Paper 6.3, Fig. 8: an unloaded fabric, T_P = 50 us, crashes spread over a period.
#[test]
fn detector_declares_a_crash_within_t_p_plus_delta_and_never_a_live_host() {
    let r = sweep(&detector(50, 0.0, 1), 5, &mut |_| {}).unwrap();
    assert_detector_sound(&r, 5);
    assert_eq!(r.false_positives, 0, "{:?}", r.false_positive_causes);
    assert!((r.detection_bound_us - (50.0 + r.delta_probe_us)).abs() < 1e-9);
    assert_eq!(r.paper_detection_us, Some(85.0));
    let json = serde_json::to_value(&r).unwrap();
    for field in [
        "period_us",
        "delta_probe_us",
        "detection_bound_us",
        "detection_us",
        "false_positives",
        "run_list",
    ] {
        assert!(json.get(field).is_some(), "{field} missing");
    }
    assert!(json["detection_us"]["max"].as_f64().unwrap() <= json["detection_bound_us"].as_f64().unwrap());
}

/// Under background load the bound still holds: no probe to a live target goes unanswered by
/// its deadline (a false positive can only be a reject, which the paper's rule counts as no
/// rsvp), and two misses in a row take at most 2 T_P + delta(0).
#[test]
fn under_load_detection_stays_within_its_bound_and_false_positives_are_rejects() {
    for misses in [1, 2] {
        let r = sweep(&detector(100, 0.3, misses), 3, &mut |_| {}).unwrap();
        assert_detector_sound(&r, 3);
        assert!(r.detection_bound_us > misses as f64 * 100.0);
        assert!(
            r.false_positive_causes.keys().all(|c| c == "Blocked"),
            "{:?}",
            r.false_positive_causes
        );
    }
}

fn storage(load: f64) -> StorageConfig {
    let mut c = StorageConfig::paper(load, 3);
    c.sim.duration = Duration::from_millis(2);
    c.params.slice = Duration::from_micros(200);
    c
}

fn assert_mode_sound(m: &ModeReport) {
    assert!(m.reads > 50, "{m:?}");
    assert_eq!(m.seen_before_reply, 0, "{m:?}");
    assert!(m.latency_us.p50 >= m.reply_latency_us.p50, "{m:?}");
    assert!(m.latency_us.max >= m.reply_latency_us.max, "{m:?}");
    assert!((m.ls_cpu_share + m.tb_cpu_share - 1.0).abs() < 1e-9);
}

/// Paper 6.1: sleeping until the bound gives the throughput job most of the core; polling
/// gives it none (LS first) or half (fair turns).
#[test]
fn wakeup_latency_is_never_below_the_reply_and_leaves_the_core_to_the_throughput_job() {
    let r = run(&storage(0.0)).unwrap();
    for m in [&r.polling, &r.polling_shared, &r.wakeup, &r.wakeup_delivery] {
        assert_mode_sound(m);
    }
    assert_eq!(
        r.polling.tb_cpu_share, 0.0,
        "polling LS never lets go of the core"
    );
    assert!(r.wakeup.tb_cpu_share > r.polling_shared.tb_cpu_share);
    assert!(r.wakeup_delivery.tb_cpu_share > r.polling.tb_cpu_share);
    // Unloaded, nothing is rejected: LS wakes exactly at the bound (after the switch in).
    assert_eq!(r.wakeup.retries, 0);
    let woke = r.wakeup_bound_us + r.wakeup_cost_us;
    assert!(
        (r.wakeup.latency_us.max - woke).abs() < 1e-6,
        "{} vs {woke}",
        r.wakeup.latency_us.max
    );
    assert!(r.wakeup_delivery.latency_us.max < r.wakeup.latency_us.max);
    // Fair turns: a reply arriving in TB's turn waits for LS's.
    assert!(r.polling_shared.latency_us.max > r.polling.latency_us.max);
    let json = serde_json::to_value(&r).unwrap();
    for mode in ["polling", "polling_shared", "wakeup", "wakeup_delivery"] {
        for field in ["latency_us", "reply_latency_us", "tb_cpu_share", "tb_units_per_s"] {
            assert!(json[mode].get(field).is_some(), "{mode}.{field} missing");
        }
        assert!(json[mode]["latency_us"].get("p999").is_some());
    }
}

/// Under load reads are rejected and sent again; LS still never sees one before its reply.
#[test]
fn under_load_a_read_is_never_seen_before_its_reply() {
    let c = storage(0.5);
    for mode in [Mode::Polling, Mode::Wakeup, Mode::WakeupDelivery] {
        let m = run_mode(&c, mode).unwrap();
        assert_mode_sound(&m);
    }
}
