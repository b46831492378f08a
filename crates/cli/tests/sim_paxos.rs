//! `onepipe sim paxos`, its campaign, its figures and `sim netpaxos` end to end: a seeded run
//! with a coordinator failure passes its checks and replays exactly; a campaign passes; a figure
//! writes its PNG; NetPaxos loses agreement with queue numbering and minion-to-learner
//! reordering, and keeps it with stamped votes.

mod common;

use std::process::Output;

fn onepipe(args: &[&str]) -> Output {
    common::onepipe().args(args).output().expect("run onepipe")
}

#[test]
fn a_seeded_run_with_a_coordinator_failure_passes_and_replays_exactly() {
    let args = [
        "sim",
        "paxos",
        "--seed",
        "3",
        "--seconds",
        "0.02",
        "--clients",
        "8",
        "--fail",
        "coordinator@2ms",
        "--loss",
        "0.005",
        "--duplicate",
        "0.005",
        "--reorder",
        "0.01",
        "--json",
    ];
    let a = common::run_json(&args, None);
    for check in ["agreement", "validity", "linearizable"] {
        assert_eq!(a["checks"][check], true, "{check}: {a}");
    }
    assert!(a["failovers"].as_u64().unwrap() > 0, "{a}");
    assert!(a["ok"].as_u64().unwrap() > 0, "{a}");
    let b = common::run_json(&args, None);
    assert_eq!(a["trace_hash"], b["trace_hash"], "same seed, same run");
    assert_eq!(a["ok"], b["ok"]);
}

#[test]
fn a_campaign_passes_and_bad_input_is_refused() {
    let out = common::run_json(
        &["sim", "paxos-campaign", "--runs", "2", "--seed", "5", "--json"],
        None,
    );
    assert_eq!(out["runs"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(out["failing_seeds"], serde_json::json!([]), "{out}");
    let bad = onepipe(&["sim", "paxos", "--fail", "acceptor:7@1ms"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected 0, 1 or 2"));
}

#[test]
fn a_figure_writes_its_png() {
    let png = std::env::temp_dir().join(format!(
        "onepipe-test-paxos-partitions-{}.png",
        std::process::id()
    ));
    let fig = common::run_json(
        &[
            "sim",
            "paxos-partitions",
            "--seconds",
            "0.0005",
            "--json",
            "--png",
            png.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(fig["name"], "paxos-partitions");
    assert_eq!(fig["rows"].as_array().unwrap().len(), 6, "{fig}");
    assert!(std::fs::metadata(&png).unwrap().len() > 0);
    let _ = std::fs::remove_file(&png);
}

/// Thesis 4: with queue positions, reordering between the minions and the learners makes some
/// seed's learners disagree (exit 1); stamped votes keep every one of those seeds in agreement.
#[test]
fn netpaxos_loses_agreement_with_queue_numbering_only() {
    let run = |seed: u64, numbering: &str| {
        let seed = seed.to_string();
        let args = [
            "sim",
            "netpaxos",
            "--seed",
            &seed,
            "--faulty",
            "minion-learner",
            "--numbering",
            numbering,
            "--json",
        ];
        let out = onepipe(&args);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(json["agreement"], out.status.success(), "{json}");
        out.status.success()
    };
    let disagreeing: Vec<u64> = (1..=10).filter(|&s| !run(s, "queue")).collect();
    assert!(!disagreeing.is_empty(), "no seed of 1..=10 lost agreement");
    for seed in disagreeing {
        assert!(run(seed, "stamp"), "seed={seed} with stamped votes");
    }
}
