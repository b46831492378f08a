//! `onepipe sim cosy-detector` and `onepipe sim cosy-storage`: the JSON fields they promise and
//! their exit codes, on small runs. The invariants themselves are asserted by the simulator's
//! tests (crates/bench/tests/cosy_apps.rs).

mod common;

use common::onepipe;

fn sim(args: &[&str]) -> (serde_json::Value, bool) {
    let out = onepipe()
        .arg("sim")
        .args(args)
        .arg("--json")
        .output()
        .expect("run onepipe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "one JSON object ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.success())
}

#[test]
fn the_detector_reports_its_detections_against_the_bound() {
    let (v, success) = sim(&[
        "cosy-detector",
        "--fabric",
        "testbed",
        "--load",
        "0",
        "--runs",
        "2",
        "--period-us",
        "50",
    ]);
    assert!(success, "{v}");
    assert_eq!(v["runs"], 2);
    assert_eq!(v["detected"], 2);
    assert_eq!(v["detection_within_bound"], true);
    assert_eq!(v["period_us"], 50.0);
    assert!(v["detection_us"]["max"].as_f64().unwrap() <= v["detection_bound_us"].as_f64().unwrap());
    assert_eq!(v["run_list"].as_array().unwrap().len(), 2);
}

#[test]
fn the_storage_run_reports_every_mode() {
    let (v, success) = sim(&["cosy-storage", "--window-us", "500", "--slice", "100us"]);
    assert!(success, "{v}");
    for mode in ["polling", "polling_shared", "wakeup", "wakeup_delivery"] {
        assert!(v[mode]["reads"].as_u64().unwrap() > 0, "{mode}: {v}");
        assert!(v[mode]["latency_us"]["p999"].as_f64().is_some(), "{mode}");
        assert_eq!(v[mode]["seen_before_reply"], 0, "{mode}");
    }
    assert!(v["wakeup"]["tb_cpu_share"].as_f64().unwrap() > v["polling"]["tb_cpu_share"].as_f64().unwrap());
}

#[test]
fn a_zero_turn_is_refused() {
    let out = onepipe()
        .args(["sim", "cosy-storage", "--slice", "0s"])
        .output()
        .expect("run onepipe");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("slice"));
}
