//! `onepipe sim kv-fig14` end to end (paper 7.3.1, Fig. 14): a tiny sweep of each panel, its
//! JSON's shape, the PNGs, and what holds robustly in the simulator: under Zipf keys 1Pipe
//! commits more transactions than OCC (whose hot keys abort), 1Pipe never aborts, and a seed
//! replays exactly.

mod common;

use serde_json::Value;

fn fig14(extra: &[&str]) -> Value {
    let mut args = vec![
        "sim",
        "kv-fig14",
        "--seconds",
        "0.001",
        "--processes",
        "8,16",
        "--processes-bc",
        "16",
        "--write-percents",
        "0,50,100",
        "--keys-per-txn",
        "1,4",
        "--window",
        "16",
        "--json",
    ];
    args.extend_from_slice(extra);
    common::run_json(&args, None)
}

fn rows<'a>(fig: &'a Value, series: &str) -> Vec<&'a Value> {
    fig["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["series"] == series)
        .collect()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_three_panels_have_their_shape_and_one_pipe_beats_occ_under_zipf() {
    let png = std::env::temp_dir().join(format!("onepipe-test-kv-fig14-{}", std::process::id()));
    let figs = fig14(&["--png", png.to_str().unwrap()]);
    let figs = figs.as_array().expect("an array of figures");
    let names: Vec<&str> = figs.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["kv-fig14a", "kv-fig14b", "kv-fig14c"]);
    for f in figs {
        assert!(f["paper"].is_object() && f["model"].is_object(), "{f}");
        for r in f["rows"].as_array().unwrap() {
            let classes: Vec<&str> = r["latency_us"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["class"].as_str().unwrap())
                .collect();
            assert_eq!(classes, ["read-only", "write-only", "read-write"], "{r}");
            assert!(num(&r["txn_per_s"]) > 0.0, "{r}");
            assert_eq!(r["failed"], 0, "{r}");
        }
        let file = png.join(format!("{}.png", f["name"].as_str().unwrap()));
        assert!(std::fs::metadata(&file).unwrap().len() > 0, "{}", file.display());
    }
    let _ = std::fs::remove_dir_all(&png);

    // Panel a: 2 distributions x 3 systems x 2 process counts.
    let a = &figs[0];
    assert_eq!(a["rows"].as_array().unwrap().len(), 12);
    let one_pipe = rows(a, "1pipe zipf");
    let occ = rows(a, "occ zipf");
    for (p, o) in one_pipe.iter().zip(&occ) {
        assert_eq!(p["x"], o["x"]);
        assert!(
            num(&p["txn_per_s"]) > 1.5 * num(&o["txn_per_s"]),
            "1Pipe {p}\nOCC {o}"
        );
        assert_eq!(num(&p["abort_rate"]), 0.0, "{p}");
        assert!(num(&o["abort_rate"]) > 0.0, "{o}");
    }
    // Panel b: at 0% writes only read-only transactions, at 100% only write-only ones.
    let b = &figs[1];
    for r in b["rows"].as_array().unwrap() {
        let committed = |i: usize| r["latency_us"][i]["committed"].as_u64().unwrap();
        match num(&r["x"]) as u32 {
            0 => assert!(committed(0) > 0 && committed(1) == 0 && committed(2) == 0, "{r}"),
            100 => assert!(committed(0) == 0 && committed(1) > 0 && committed(2) == 0, "{r}"),
            _ => assert!(committed(0) > 0 && committed(1) > 0 && committed(2) > 0, "{r}"),
        }
    }
    // Panel c: KV operations are transactions times keys.
    for r in figs[2]["rows"].as_array().unwrap() {
        let ops = num(&r["txn_per_s"]) * num(&r["x"]);
        assert!((num(&r["kv_ops_per_s"]) - ops).abs() < 1e-6 * ops.max(1.0), "{r}");
    }
}

#[test]
fn a_seed_replays_exactly_and_another_differs() {
    let run = |seed: &str| fig14(&["--figure", "b", "--seed", seed]);
    let (a, b, c) = (run("5"), run("5"), run("6"));
    let hashes = |v: &Value| -> Vec<String> {
        v[0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["trace_hash"].as_str().unwrap().to_string())
            .collect()
    };
    // Everything but the wall time a run took.
    let measured = |v: &Value| -> Vec<Value> {
        let mut rows = v[0]["rows"].as_array().unwrap().clone();
        for r in &mut rows {
            r.as_object_mut().unwrap().remove("wall_s");
        }
        rows
    };
    assert_eq!(hashes(&a), hashes(&b));
    assert_eq!(measured(&a), measured(&b));
    assert_ne!(hashes(&a), hashes(&c));
}
