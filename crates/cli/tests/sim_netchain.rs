//! `onepipe sim netchain` and its figures end to end: a seeded run with a failure replays
//! exactly and writes its history; the figures write JSON and PNG; bad input is refused.

mod common;

use std::path::PathBuf;
use std::process::Output;

/// A fresh directory of this test process.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("onepipe-test-sim-netchain-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn onepipe(args: &[&str]) -> Output {
    common::onepipe().args(args).output().expect("run onepipe")
}

#[test]
fn a_seeded_run_with_a_failure_reports_and_replays_exactly() {
    let dir = temp_dir("history");
    let history = dir.join("history.jsonl");
    let args = [
        "sim",
        "netchain",
        "--seed",
        "3",
        "--seconds",
        "0.005",
        "--keys",
        "1000",
        "--fail",
        "switch:1@1ms",
        "--loss",
        "0.01",
        "--reorder",
        "0.05",
        "--json",
        "--history",
    ];
    let mut with_history = args.to_vec();
    with_history.push(history.to_str().unwrap());
    let a = common::run_json(&with_history, None);
    for field in [
        "ops_per_s",
        "read_latency_us",
        "write_latency_us",
        "failover_us",
        "recovery_ms",
        "trace_hash",
    ] {
        assert!(a.get(field).is_some_and(|v| !v.is_null()), "missing {field}: {a}");
    }
    assert_eq!(a["acknowledged_writes_lost"], 0, "{a}");
    assert_eq!(a["recovered"], true, "{a}");
    let lines = std::fs::read_to_string(&history).unwrap();
    assert_eq!(lines.lines().count() as u64, a["history_ops"].as_u64().unwrap());
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    for field in ["client", "op", "key", "value", "outcome", "call_ns", "return_ns"] {
        assert!(first.get(field).is_some(), "history line lacks {field}: {first}");
    }
    let b = common::run_json(&with_history, None);
    assert_eq!(a["trace_hash"], b["trace_hash"], "same seed, same run");
    assert_eq!(a["ops_per_s"], b["ops_per_s"]);
}

#[test]
fn the_figures_write_json_and_png() {
    let dir = temp_dir("figures");
    let out = dir.to_str().unwrap();
    for (name, seconds) in [("netchain-fig9", "0.0001"), ("netchain-fig10", "0.01")] {
        let o = onepipe(&["sim", name, "--seconds", seconds, "--keys", "1000", "--out", out]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.json"))).unwrap()).unwrap();
        assert!(!json["rows"].as_array().unwrap().is_empty(), "{json}");
        assert!(json["paper"].is_object());
        assert!(std::fs::metadata(dir.join(format!("{name}.png"))).unwrap().len() > 1000);
    }
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    for (args, why) in [
        (&["sim", "netchain", "--fail", "switch:0@1ms"][..], "cannot fail"),
        (&["sim", "netchain", "--fail", "switch:9@1ms"], "cannot fail"),
        (&["sim", "netchain", "--fail", "s1"], "switch:N@TIME"),
        (&["sim", "netchain", "--topology", "ring:4"], "spine-leaf"),
        (&["sim", "netchain", "--topology", "spine-leaf:2,1"], "leaves"),
        (&["sim", "netchain", "--clients", "2"], "clients"),
    ] {
        let o = onepipe(args);
        assert!(!o.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
