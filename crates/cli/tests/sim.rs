//! `onepipe sim` end to end: a seeded run and its replay, a campaign, a figure, bad input.

mod common;

use std::process::Output;

fn onepipe(args: &[&str]) -> Output {
    common::onepipe().args(args).output().expect("run onepipe")
}

fn json(args: &[&str]) -> serde_json::Value {
    common::run_json(args, None)
}

#[test]
fn seeded_run_reports_and_replays_exactly() {
    let args = [
        "sim", "--seed", "5", "--send", "100us", "--loss", "0.01", "--json",
    ];
    let a = json(&args);
    for field in [
        "trace_hash",
        "events",
        "events_per_s",
        "hosts",
        "violations",
        "checks",
    ] {
        assert!(a.get(field).is_some(), "missing {field}: {a}");
    }
    assert_eq!(a["hosts"], 32);
    assert_eq!(a["violations"], 0);
    assert!(a["events"].as_u64().unwrap() > 10_000);
    assert!(
        a["checks"].as_object().unwrap().values().all(|v| v == true),
        "{a}"
    );
    let b = json(&args);
    assert_eq!(a["trace_hash"], b["trace_hash"], "same seed, same trace");
    assert_eq!(a["events"], b["events"]);
}

/// Every incarnation of paper 6.2 runs from the command line and keeps every check; the
/// demo's runtimes refuse host representatives, which only the simulator has.
#[test]
fn each_incarnation_runs_and_keeps_every_check() {
    for incarnation in ["chip", "cpu", "host"] {
        let v = json(&["sim", "--send", "100us", "--incarnation", incarnation, "--json"]);
        assert_eq!(v["violations"], 0, "{incarnation}: {v}");
        assert!(v["delivered"].as_u64().unwrap() > 100, "{incarnation}: {v}");
    }
    let out = onepipe(&["demo", "--incarnation", "host"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("onepipe sim --incarnation host"));
}

#[test]
fn campaign_reports_seeds_and_failing_seeds() {
    let v = json(&["sim", "campaign", "--seeds", "4", "--first-seed", "11", "--json"]);
    assert_eq!(v["seeds"], 4);
    assert_eq!(v["violations"], 0, "{v}");
    assert_eq!(v["failing_seeds"].as_array().unwrap().len(), 0);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    assert!(
        runs[0]["replay"]
            .as_str()
            .unwrap()
            .starts_with("onepipe sim --seed 11 ")
    );
}

#[test]
fn figure_writes_json_and_png() {
    let dir = std::env::temp_dir().join(format!("onepipe-fig-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let v = json(&[
        "sim",
        "fig13",
        "--points",
        "3,30",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    // Beacon overhead falls as the interval grows (paper Fig. 13).
    assert!(
        rows[0]["beacon_overhead"].as_f64().unwrap() > 5.0 * rows[1]["beacon_overhead"].as_f64().unwrap()
    );
    let png = std::fs::read(dir.join("fig13.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    assert!(dir.join("fig13.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_config_names_the_field_and_budgets_stop_runs() {
    let out = onepipe(&["sim", "--loss", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--loss") && err.contains("0..=1"), "{err}");
    let out = onepipe(&["sim", "--fail", "switch:nowhere@10us"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no switch named `nowhere`"), "{err}");
    // The names it could have been (the testbed's switches, 10 in all).
    assert!(
        err.contains("switches: core0, core1,") && err.contains("(10 in all)"),
        "{err}"
    );
    let out = onepipe(&["sim", "--events-max", "5000"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("event budget") && err.contains("seed=1"), "{err}");
}
