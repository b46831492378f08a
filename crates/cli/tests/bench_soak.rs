//! `onepipe bench soak` in short: capacity first, then an open-loop run checked online; the
//! JSON's shape and its verdicts (no timing or throughput is asserted: CI shares its cores).

mod common;

use common::run_json;

/// Soaks measure real time on two cores; side by side they would starve each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn soak(extra: &[&str]) -> serde_json::Value {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut args = vec![
        "bench",
        "soak",
        "--runtime",
        "udp",
        "--topology",
        "single:3",
        "--capacity-seconds",
        "1",
        "--sample-seconds",
        "1",
        // Memory over a few seconds only fails when grossly wrong (twice the size).
        "--flat-tolerance",
        "1.0",
        "--json",
    ];
    args.extend_from_slice(extra);
    run_json(&args, None)
}

fn assert_shape(v: &serde_json::Value) {
    assert_eq!(v["runtime"], "udp");
    assert_eq!(v["processes"], 3);
    assert!(
        v["capacity"]["throughput_msgs_per_s"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert_eq!(v["capacity"]["violations"], 0, "{v}");
    assert!(v["offered_rate_per_process"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["delivered"].as_u64().unwrap() > 0, "{v}");
    let samples = v["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "{v}");
    for s in samples {
        for key in [
            "seconds",
            "rss_bytes",
            "delivered",
            "violations",
            "checker_records",
        ] {
            assert!(s[key].is_number(), "{key} in {s}");
        }
        assert!(
            s["drops"]["late"].is_u64() && s["drops"]["fabric"]["lost_datagrams"].is_u64(),
            "{s}"
        );
    }
    assert!(
        ["flat", "unmeasured"].contains(&v["memory"]["verdict"].as_str().unwrap()),
        "{v}"
    );
    assert!(v["memory"]["growth_fraction"].is_number(), "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    assert!(
        v["checker"]["events"].as_u64().unwrap() >= 2 * v["delivered"].as_u64().unwrap(),
        "{v}"
    );
    assert_eq!(v["checker"]["sends_given_up"], 0, "{v}");
    assert_eq!(
        v["checker"]["records_held"], 0,
        "everything judged at the end: {v}"
    );
    for check in ["total_order", "fifo", "causality", "no_duplicates", "no_creation"] {
        assert_eq!(v["checks"][check]["count"], 0, "{check} in {v}");
    }
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn a_short_best_effort_soak_reports_memory_drops_and_no_violation() {
    let v = soak(&["--minutes", "0.25"]);
    assert_shape(&v);
    assert_eq!(v["service"], "best effort");
    assert!(v["no_loss"].is_null());
}

#[test]
fn a_short_reliable_soak_loses_nothing() {
    let v = soak(&["--minutes", "0.1", "--reliable"]);
    assert_shape(&v);
    assert_eq!(v["service"], "reliable");
    assert_eq!(v["no_loss"]["count"], 0, "{v}");
    assert_eq!(v["drops"]["undelivered_messages"], 0, "{v}");
}
