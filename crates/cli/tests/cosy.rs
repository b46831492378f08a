//! `onepipe cosy demo`: the JSON it promises, and a message log the check crate judges the
//! same way as the run did. Whether the bound held on this (shared, noisy) machine is not
//! asserted here: the simulator's tests assert it (crates/bench/tests/cosy_sim.rs), and the
//! demo's exit code reports it.

mod common;

use common::onepipe;
use onepipe_check::cosy::{check_bound, read_log_file};

fn demo(args: &[&str]) -> (serde_json::Value, bool) {
    let out = onepipe()
        .args(["cosy", "demo", "--json"])
        .args(args)
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
fn the_demo_reports_what_it_promises_and_its_log_checks_the_same() {
    let dir = std::env::temp_dir().join(format!("onepipe-cosy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("messages.csv");
    let (v, success) = demo(&[
        "--seconds",
        "1",
        "--link-mbps",
        "50",
        "--log",
        log.to_str().unwrap(),
    ]);
    for field in [
        "delta_us",
        "k",
        "load",
        "completed",
        "rejected",
        "failed",
        "max_completion_over_delta",
    ] {
        assert!(v[field].is_number(), "{field}: {v}");
    }
    for field in ["p50", "p99", "max"] {
        assert!(v["slowdown"][field].is_number(), "slowdown.{field}");
    }
    for field in ["bound_held", "link_capacity", "queue_bound"] {
        assert!(v["checks"][field].is_boolean(), "checks.{field}: {v}");
    }
    assert_eq!(v["k"], 4);
    let submitted = v["submitted"].as_u64().unwrap();
    let flagged = ["completed", "rejected", "failed"].map(|f| v[f].as_u64().unwrap());
    assert!(submitted > 10, "{submitted}");
    assert_eq!(
        flagged.iter().sum::<u64>(),
        submitted,
        "every message flagged: {v}"
    );
    assert!(v["completed"].as_u64().unwrap() > 0);
    let held = ["bound_held", "link_capacity", "queue_bound"].map(|c| v["checks"][c].as_bool().unwrap());
    assert_eq!(
        success,
        held.iter().all(|&h| h),
        "the exit code says whether every check held"
    );

    let records = read_log_file(&log).unwrap();
    assert_eq!(records.len() as u64, submitted);
    let delta_ns = (v["delta_us"].as_f64().unwrap() * 1e3) as u64;
    let again = check_bound(&records, delta_ns);
    assert_eq!(again.held, v["checks"]["bound_held"].as_bool().unwrap());
    assert_eq!(again.completed, v["completed"].as_u64().unwrap());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_failure_spec_is_a_clear_error() {
    let out = onepipe()
        .args(["cosy", "demo", "--fail", "switch:1@1s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected host:N@TIME"));
    let out = onepipe()
        .args(["cosy", "demo", "--fail", "host:99@1s", "--seconds", "0.1"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("there are 8 hosts"));
}
