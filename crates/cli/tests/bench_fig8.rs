//! `onepipe bench fig8` and `bench udp-limit`: every system's row, checked, over both runtimes.

mod common;

use common::run_json;

fn rows_are_sound(report: &serde_json::Value, processes: &[u64]) {
    let rows = report["rows"].as_array().unwrap();
    let systems = [
        "1pipe-be",
        "1pipe-r",
        "unordered",
        "host-seq",
        "switch-seq",
        "token",
        "lamport",
    ];
    assert_eq!(rows.len(), systems.len() * processes.len(), "{report}");
    for &p in processes {
        for s in systems {
            let row = rows
                .iter()
                .find(|r| r["system"] == s && r["processes"] == p)
                .unwrap_or_else(|| panic!("no row for {s} at {p}: {report}"));
            assert!(row["throughput_msgs_per_s"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{row}");
            // 2048 messages' worth of broadcasts by default, the same for every system.
            assert_eq!(row["window_broadcasts"], 2048u64.div_ceil(p), "{row}");
            let checked = row.get("checks_ok").and_then(|c| c.as_bool());
            assert_eq!(checked, (s != "unordered").then_some(true), "{row}");
        }
    }
}

#[test]
fn fig8_over_inproc_has_every_row_and_the_flatness_ratios() {
    let args = [
        "bench",
        "fig8",
        "--processes",
        "2,4",
        "--seconds",
        "0.2",
        "--json",
    ];
    let report = run_json(&args, None);
    rows_are_sound(&report, &[2, 4]);
    assert_eq!(report["runtime"], "inproc");
    assert_eq!(report["flatness"].as_array().unwrap().len(), 7, "{report}");
    assert!(report.get("udp_limit").is_none());
    assert_eq!(report["ordering_cost"]["processes"], 4, "{report}");
    assert_eq!(
        report["ordering_cost"]["ratios"].as_array().unwrap().len(),
        5,
        "{report}"
    );
}

#[test]
fn fig8_over_udp_compares_with_the_raw_datagram_rate() {
    let args = [
        "bench",
        "fig8",
        "--runtime",
        "udp",
        "--processes",
        "3",
        "--seconds",
        "0.2",
        "--limit-seconds",
        "0.2",
        "--json",
    ];
    let report = run_json(&args, None);
    rows_are_sound(&report, &[3]);
    assert!(
        report["udp_limit"]["datagrams_per_s"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let ratios = &report["udp_ratios"];
    assert_eq!(ratios["processes"], 3);
    // Ordered over unordered: the table's pair and four more (the default), their median.
    let cost = &report["ordering_cost"];
    let pairs: Vec<f64> = cost["ratios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect();
    assert_eq!(pairs.len(), 5, "{report}");
    assert!(pairs.iter().all(|r| *r > 0.0), "{report}");
    let mut sorted = pairs.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(cost["median"].as_f64().unwrap(), sorted[2], "{report}");
    assert_eq!(ratios["ordered_to_unordered"], cost["median"], "{report}");
    // By default the nodes share one thread per core.
    assert!(report["udp_threads"].as_u64().unwrap() >= 1, "{report}");
}

#[test]
fn fig8_over_udp_runs_a_thread_per_node_when_asked() {
    let args = [
        "bench",
        "fig8",
        "--runtime",
        "udp",
        "--udp-threads",
        "0",
        "--processes",
        "3",
        "--systems",
        "1pipe-be,token",
        "--seconds",
        "0.2",
        "--limit-seconds",
        "0",
        "--json",
    ];
    let report = run_json(&args, None);
    assert_eq!(report["udp_threads"], 0, "{report}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report}");
    for row in rows {
        assert!(row["throughput_msgs_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["checks_ok"], true, "{row}");
    }
}

#[test]
fn udp_limit_alone_and_bad_arguments() {
    let report = run_json(&["bench", "udp-limit", "--seconds", "0.1", "--json"], None);
    assert!(report["packed_msgs_per_s"].as_f64().unwrap() > report["datagrams_per_s"].as_f64().unwrap());
    for bad in [
        &["bench", "fig8", "--processes", "1"][..],
        &["bench", "fig8", "--systems", "paxos"],
        &["bench", "fig8", "--seconds", "0"],
        &["bench", "fig8", "--runtime", "udp", "--udp-window-datagrams", "1"],
        &["bench", "udp-limit", "--datagram-bytes", "70000"],
    ] {
        let out = common::onepipe().args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("error"), "{bad:?}");
    }
}
