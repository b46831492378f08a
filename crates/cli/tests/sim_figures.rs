//! `onepipe sim fig10|fig11|fig12|large-message` end to end, each on a small point: the
//! JSON's shape, the PNG, and what the models predict (paper 7.2).

mod common;

fn json(args: &[&str]) -> serde_json::Value {
    common::run_json(args, None)
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("onepipe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn assert_png(path: &std::path::Path) {
    let png = std::fs::read(path).unwrap();
    assert_eq!(&png[..4], b"\x89PNG", "{}", path.display());
}

/// Paper Fig. 10: every failure kind at one host count; recovery takes at least the detection
/// time (10 missing beacon intervals of 3 us).
#[test]
fn fig10_writes_rows_per_failure_kind_and_a_png() {
    let dir = out_dir("fig10");
    let v = json(&[
        "sim",
        "fig10",
        "--points",
        "2",
        "--seeds",
        "1",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["host", "tor", "core-link", "core-switch"], "{v}");
    for r in rows {
        assert_eq!(r["hosts"], 2);
        assert_eq!(r["violations"], 0, "{r}");
        let mean = r["recovery_us"]["mean"].as_f64().unwrap();
        assert!((30.0..1000.0).contains(&mean), "{r}");
    }
    assert_eq!(rows[0]["paper_us"], 51.0);
    assert!(dir.join("fig10.json").exists());
    assert_png(&dir.join("fig10.png"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Paper Fig. 11: the reorder buffer holds the stream's rate times the reordering delay, in
/// the simulator and on the real receive path.
#[test]
fn fig11_buffer_grows_with_the_delay() {
    let dir = out_dir("fig11");
    let v = json(&[
        "sim",
        "fig11",
        "--points",
        "1,100",
        "--host-messages",
        "20000",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let (sim, host) = (v["sim"].as_array().unwrap(), v["host"].as_array().unwrap());
    assert_eq!((sim.len(), host.len()), (2, 2), "{v}");
    assert_eq!(v["paper"].as_array().unwrap().len(), 4);
    let peak = |r: &serde_json::Value| r["reorder_bytes_peak"].as_f64().unwrap();
    for rows in [sim, host] {
        assert!(peak(&rows[1]) > 10.0 * peak(&rows[0]), "{v}");
        // At 100 us the delay dominates the barrier's own lag: about the link's BDP.
        let bdp = rows[1]["link_bdp_bytes"].as_f64().unwrap();
        assert!((peak(&rows[1]) - bdp).abs() < 0.3 * bdp, "{v}");
    }
    for r in sim {
        assert_eq!(r["violations"], 0, "{r}");
        assert!(r["throughput_msgs_per_s"].as_f64().unwrap() > 1e6, "{r}");
    }
    for r in host {
        assert_eq!(r["delivered"], r["messages"], "{r}");
        assert_eq!(r["late"], 0, "{r}");
    }
    assert_png(&dir.join("fig11.png"));
    assert!(dir.join("fig11.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Paper 7.2: a 1 MB message holds the barrier for its serialization time at 100 Gbps, so it
/// adds about that (80 us) to the latency of messages sent while it crosses.
#[test]
fn a_large_message_delays_others_by_its_serialization_time() {
    let v = json(&["sim", "large-message", "--json"]);
    let serialization = v["serialization_us"].as_f64().unwrap();
    assert!((80.0..85.0).contains(&serialization), "{v}");
    let added = v["added_us_max"].as_f64().unwrap();
    assert!(added > 0.8 * serialization && added < serialization + 20.0, "{v}");
    assert!(v["without"]["max"].as_f64().unwrap() < 20.0, "{v}");
    assert_eq!(v["violations"], 0, "{v}");
    // A tenth of the size, a tenth of the delay.
    let small = json(&["sim", "large-message", "--bytes", "100000", "--json"]);
    let added_small = small["added_us_max"].as_f64().unwrap();
    assert!(added_small < added / 4.0, "{small}");
}

/// Paper Fig. 12 on two racks: rows for both panels and every service, the paper's inflation
/// beside them, and background flows that add latency over the idle point.
#[test]
fn fig12_background_flows_and_oversubscription_add_latency() {
    let dir = out_dir("fig12");
    let v = json(&[
        "sim",
        "fig12",
        "--processes",
        "16",
        "--flows",
        "0,4",
        "--ratios",
        "4",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 9, "{v}");
    let at = |panel: &str, series: &str, flows: u64| {
        rows.iter()
            .find(|r| r["panel"] == panel && r["series"] == series && r["flows_per_host"] == flows)
            .unwrap_or_else(|| panic!("no {panel} {series} {flows} in {v}"))
    };
    for series in ["1pipe-be", "1pipe-r", "unordered"] {
        assert_eq!(at("a", series, 0)["inflation_us_mean"], 0.0);
        let busy = at("a", series, 4);
        assert!(busy["inflation_us_mean"].as_f64().unwrap() > 1.0, "{busy}");
        assert!(
            busy["background_goodput_gbps_per_host"].as_f64().unwrap() > 10.0,
            "{busy}"
        );
        assert_eq!(at("b", series, 2)["oversubscription"], 4.0);
    }
    for r in rows {
        assert_eq!(r["violations"], 0, "{r}");
    }
    assert_eq!(v["paper_inflation_us"][0][1], 30.0);
    assert!(dir.join("fig12.json").exists());
    assert_png(&dir.join("fig12.png"));
    let _ = std::fs::remove_dir_all(&dir);
}
