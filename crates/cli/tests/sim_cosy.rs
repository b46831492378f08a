//! `onepipe sim cosy-tradeoff`, `cosy-theta` and `cosy-slowdown` end to end on a small
//! fabric: the JSON has the promised fields, and what must hold does (delta grows with K,
//! sustainable loads in [0, 1] bracketed by a failing load, f(K, C) grows with K, slowdowns
//! ordered, every check held). No timing is asserted.

mod common;

use serde_json::Value;

/// 4 leaves of 2 hosts, 2 spines, 10 Gbps: the paper's testbed shape.
const SMALL: [&str; 8] = [
    "--leaves",
    "4",
    "--spines",
    "2",
    "--hosts-per-leaf",
    "2",
    "--link-gbps",
    "10",
];

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn search(name: &str, png: Option<&str>) -> Value {
    let mut args = vec![
        "sim",
        name,
        "--ks",
        "1,4",
        "--seconds",
        "0.002",
        "--steps",
        "3",
        "--json",
    ];
    args.extend_from_slice(&SMALL);
    if let Some(dir) = png {
        args.extend_from_slice(&["--png", dir]);
    }
    common::run_json(&args, None)
}

fn check_search_rows(fig: &Value) {
    assert!(fig["model"].is_object() && fig["paper"].is_object(), "{fig}");
    assert!(fig["plots"].as_array().is_some_and(|p| !p.is_empty()), "{fig}");
    let rows = fig["rows"].as_array().expect("rows");
    assert_eq!(
        rows.iter().map(|r| r["k"].as_u64().unwrap()).collect::<Vec<_>>(),
        [1, 4]
    );
    for r in rows {
        let load = num(&r["sustainable_load"]);
        assert!((0.0..=1.0).contains(&load), "{r}");
        if let Some(failed) = r["unsustained_load"].as_f64() {
            assert!(failed > load && failed - load <= 1.0 / 8.0 + 1e-9, "{r}");
        }
        assert_eq!(r["max_completion_over_delta"].is_null(), load == 0.0, "{r}");
        if let Some(c) = r["max_completion_over_delta"].as_f64() {
            assert!(c > 0.0 && c <= 1.0, "completions within delta: {r}");
        }
        assert_eq!(r["checks_held"], true, "{r}");
        let probes = r["probes"].as_array().unwrap();
        assert_eq!(num(&probes[0]["load"]), 1.0, "{r}");
        for p in probes {
            assert!(p["submitted"].as_u64().unwrap() > 0, "{p}");
            let rejected = p["rejected"].as_u64().unwrap();
            let causes: u64 = [
                "rejected_receiver_busy",
                "rejected_blocked",
                "rejected_sender_busy",
            ]
            .iter()
            .map(|c| p[c].as_u64().unwrap())
            .sum();
            assert!(causes <= rejected, "{p}");
            assert_eq!(
                p["passed"],
                rejected == 0 && p["failed"] == 0,
                "the strict default: {p}"
            );
        }
        let theta = num(&r["theta_star"]);
        assert!(theta > 0.0 && theta <= 0.5, "{r}");
        let f = num(&r["f_k_c"]);
        assert!((num(&r["theorem_load"]) - f * theta).abs() < 1e-9, "{r}");
        assert!(num(&r["theorem_delta_cosy_us"]) < num(&r["delta_us"]), "{r}");
    }
    assert!(
        num(&rows[1]["delta_us"]) > num(&rows[0]["delta_us"]),
        "delta grows with K"
    );
    assert!(num(&rows[1]["f_k_c"]) > num(&rows[0]["f_k_c"]), "f grows with K");
}

#[test]
fn tradeoff_and_theta_report_delta_and_a_bracketed_sustainable_load_per_k() {
    let png = std::env::temp_dir().join(format!("onepipe-test-cosy-{}", std::process::id()));
    let tradeoff = search("cosy-tradeoff", Some(png.to_str().unwrap()));
    assert_eq!(tradeoff["name"], "cosy-tradeoff");
    check_search_rows(&tradeoff);
    assert!(std::fs::metadata(png.join("cosy-tradeoff.png")).unwrap().len() > 0);
    let _ = std::fs::remove_dir_all(&png);

    // The same search, the same seed: the same loads, with Theorem 3.4 beside them.
    let theta = search("cosy-theta", None);
    assert_eq!(theta["name"], "cosy-theta");
    check_search_rows(&theta);
    for (a, b) in tradeoff["rows"]
        .as_array()
        .unwrap()
        .iter()
        .zip(theta["rows"].as_array().unwrap())
    {
        assert_eq!(a["sustainable_load"], b["sustainable_load"], "a seed replays");
        let ratio = num(&b["measured_over_theorem"]);
        let expected = num(&b["sustainable_load"]) / num(&b["theorem_load"]);
        assert!((ratio - expected).abs() < 1e-9, "{b}");
        assert_eq!(b["within_10_percent"], (ratio - 1.0).abs() <= 0.1, "{b}");
    }
}

#[test]
fn slowdown_puts_cosy_next_to_one_pipe_per_size_and_load() {
    let mut args = vec![
        "sim",
        "cosy-slowdown",
        "--sizes",
        "8192,65536",
        "--loads",
        "0.3",
        "--seconds",
        "0.001",
        "--json",
    ];
    args.extend_from_slice(&SMALL);
    let fig = common::run_json(&args, None);
    assert_eq!(fig["name"], "cosy-slowdown");
    assert_eq!(fig["plots"].as_array().unwrap().len(), 2, "one plot per size");
    let rows = fig["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "2 sizes x 1 load x 3 systems");
    for r in rows {
        let s = &r["slowdown"];
        let (p50, p99, max) = (num(&s["p50"]), num(&s["p99"]), num(&s["max"]));
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{r}");
        assert!(r["completed"].as_u64().unwrap() > 0, "{r}");
        let frac = num(&r["not_completed_fraction"]);
        assert!((0.0..1.0).contains(&frac), "{r}");
        match r["system"].as_str().unwrap() {
            "cosy" => {
                // The sender's flag comes a round trip after the last byte left: never
                // faster than hRTT + s/B; and never later than the bound.
                assert!(p50 >= 1.0, "{r}");
                assert!(num(&r["max_completion_over_delta"]) <= 1.0, "{r}");
                assert!(r["retransmissions"].is_null(), "{r}");
            }
            "1pipe" | "1pipe-unordered" => {
                assert_eq!(r["violations"], 0, "{r}");
                assert!(r["delta_us"].is_null(), "{r}");
            }
            other => panic!("unknown system {other}"),
        }
    }
}
