//! NetChain's Figs. 9(c)-(f) and 10 (paper 002, section 8) in the simulator: each point is one
//! [`run_sim`] run; the JSON carries the paper's numbers next to ours.
//!
//! What is modelled, and how it differs from the paper's testbed (docs/simulator.md):
//! - the client agent's rate: the paper's DPDK agent does 20.5 M queries/s per server and
//!   sends at that rate whatever the answers (open loop); ours is an open-loop generator at
//!   that rate, with a per-frame CPU cost per host that allows a little more;
//! - the switches: Tofino forwards at line rate, so on the testbed the clients are the
//!   bottleneck; for Fig. 9(f), where the paper simulates larger fabrics, each switch is given
//!   a rate (a per-frame cost), and throughput grows with the switches;
//! - recovery: the paper's controller copies state for ~150 s; ours copies at a per-frame
//!   controller cost, scaled so that failover and recovery fit in a window of milliseconds.

use super::sim::{Fabric, Load, NetchainSimConfig, NetchainSimReport, run_sim};
use onepipe_sim::figures::{Plot, Series};
use onepipe_wire::Duration;
use serde::Serialize;

/// One point: a run's throughput and latencies.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub panel: &'static str,
    pub series: String,
    pub x: f64,
    pub ok_ops_per_s: f64,
    pub read_latency_us_p50: f64,
    pub read_latency_us_p99: f64,
    pub write_latency_us_p50: f64,
    pub write_latency_us_p99: f64,
    pub unknown: u64,
    pub acknowledged_writes_lost: Option<u64>,
    /// The history's linearizability check (`None`: not recorded whole).
    pub linearizable: Option<bool>,
    pub failover_us: Option<f64>,
    pub recovery_ms: Option<f64>,
    /// Fig. 10: one server's mean throughput from failover to the end of recovery, over its
    /// mean before the failure (the paper: 1/2 with one group, 0.995 with 100).
    pub throughput_ratio_in_recovery: Option<f64>,
    pub events: u64,
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct NetchainFigure {
    pub name: &'static str,
    /// The model's parameters.
    pub model: serde_json::Value,
    /// The paper's numbers for the same panels (notes-netchain.md).
    pub paper: serde_json::Value,
    pub rows: Vec<Point>,
    pub plots: Vec<Plot>,
}

#[derive(Clone, Debug)]
pub struct Fig9Options {
    /// The measured window of each run, in virtual time.
    pub duration: Duration,
    pub seed: u64,
    pub keys: usize,
    pub write_ratios: Vec<f64>,
    pub losses: Vec<f64>,
    /// Closed-loop clients, for the latency-throughput panel.
    pub clients: Vec<u32>,
    /// (spines, leaves) of the scaling panel.
    pub fabrics: Vec<(usize, usize)>,
    /// The generator's rate per server (the paper's agent: 20.5 M queries/s).
    pub calls_per_s_per_host: f64,
    /// A switch's time per frame in the scaling panel (its rate).
    pub switch_frame_cost: Duration,
    /// Closed-loop clients per client host in the scaling panel.
    pub clients_per_host_scaling: u32,
}

impl Default for Fig9Options {
    fn default() -> Self {
        Fig9Options {
            duration: Duration::from_millis(1),
            seed: 1,
            keys: 20_000,
            write_ratios: vec![0.0, 0.01, 0.1, 0.5, 1.0],
            losses: vec![1e-5, 1e-4, 1e-3, 1e-2, 1e-1],
            clients: vec![4, 16, 64, 256, 1024],
            fabrics: vec![(2, 4), (4, 8), (8, 16), (16, 32), (32, 64)],
            calls_per_s_per_host: 20.5e6,
            switch_frame_cost: Duration::from_micros(1),
            clients_per_host_scaling: 64,
        }
    }
}

/// The testbed with the paper's default workload (64-byte values, 1% writes) and its clients:
/// open loop at the agent's rate, each retried query a new one.
fn testbed(o: &Fig9Options) -> NetchainSimConfig {
    NetchainSimConfig {
        keys: o.keys,
        load: Load::Open {
            calls_per_s_per_host: o.calls_per_s_per_host,
        },
        duration: o.duration,
        seed: o.seed,
        attempts_max: 1,
        agent_timeout: Duration::from_micros(100),
        // A little more than the generator's 2 frames per query, so the CPU keeps up.
        host_frame_cost: Duration::from_nanos(20),
        ..NetchainSimConfig::default()
    }
}

fn point(panel: &'static str, series: &str, x: f64, c: &NetchainSimConfig) -> Result<Point, String> {
    let began = std::time::Instant::now();
    let r: NetchainSimReport = run_sim(c)?;
    Ok(point_of(
        panel,
        series.into(),
        x,
        &r,
        began.elapsed().as_secs_f64(),
    ))
}

/// A figure's point from a run's report.
fn point_of(panel: &'static str, series: String, x: f64, r: &NetchainSimReport, wall_s: f64) -> Point {
    let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    Point {
        panel,
        series,
        x,
        ok_ops_per_s: r.ok_per_s(),
        read_latency_us_p50: us(&r.report.read_latency_ns, 0.5),
        read_latency_us_p99: us(&r.report.read_latency_ns, 0.99),
        write_latency_us_p50: us(&r.report.write_latency_ns, 0.5),
        write_latency_us_p99: us(&r.report.write_latency_ns, 0.99),
        unknown: r.report.unknown,
        acknowledged_writes_lost: r.report.acknowledged_writes_lost,
        linearizable: linearizable(r),
        failover_us: r.report.failover().map(|d| d.as_micros_f64()),
        recovery_ms: r.report.recovery().map(|d| d.as_nanos() as f64 / 1e6),
        throughput_ratio_in_recovery: None,
        events: r.stats.events,
        wall_s,
    }
}

fn series(
    rows: &[Point],
    panel: &str,
    name: &str,
    y: impl Fn(&Point) -> f64,
    x: impl Fn(&Point) -> f64,
) -> Series {
    Series {
        label: name.into(),
        points: rows
            .iter()
            .filter(|r| r.panel == panel && r.series == name)
            .map(|r| (x(r), y(r)))
            .collect(),
    }
}

const MQPS: f64 = 1e6;

/// Figs. 9(c)-(f); `progress` hears of each point as it finishes.
pub fn fig9(o: &Fig9Options, progress: &mut dyn FnMut(&Point)) -> Result<NetchainFigure, String> {
    let mut rows = Vec::new();
    let mut add = |p: Point, rows: &mut Vec<Point>| {
        progress(&p);
        rows.push(p);
    };
    for &w in &o.write_ratios {
        let c = NetchainSimConfig {
            write_ratio: w,
            ..testbed(o)
        };
        add(point("c", "netchain", w * 100.0, &c)?, &mut rows);
    }
    for &loss in &o.losses {
        let c = NetchainSimConfig { loss, ..testbed(o) };
        add(point("d", "netchain", loss * 100.0, &c)?, &mut rows);
    }
    for &clients in &o.clients {
        let c = NetchainSimConfig {
            load: Load::Closed { clients },
            attempts_max: 3,
            ..testbed(o)
        };
        add(point("e", "netchain", clients as f64, &c)?, &mut rows);
    }
    for &(spines, leaves) in &o.fabrics {
        for (name, write_ratio) in [("read-only", 0.0), ("write-only", 1.0)] {
            let c = NetchainSimConfig {
                fabric: Fabric::SpineLeaf { spines, leaves },
                write_ratio,
                load: Load::Closed {
                    clients: o.clients_per_host_scaling * (leaves as u32 - 1),
                },
                host_frame_cost: Duration::ZERO,
                switch_frame_cost: o.switch_frame_cost,
                // Queues at the busiest switches; a timeout would only add retries.
                agent_timeout: Duration::from_millis(1),
                attempts_max: 3,
                ..testbed(o)
            };
            add(point("f", name, (spines + leaves) as f64, &c)?, &mut rows);
        }
    }
    let mqps = |r: &Point| r.ok_ops_per_s / MQPS;
    let x = |r: &Point| r.x;
    let plots = vec![
        Plot::new(
            "Fig. 9(c): throughput vs write ratio",
            "write ratio (%)",
            "throughput (MQPS)",
            false,
            vec![series(&rows, "c", "netchain", mqps, x)],
        ),
        Plot::new(
            "Fig. 9(d): throughput vs loss",
            "packet loss rate (%)",
            "throughput (MQPS)",
            true,
            vec![series(&rows, "d", "netchain", mqps, x)],
        ),
        Plot::new(
            "Fig. 9(e): latency vs throughput",
            "throughput (MQPS)",
            "p50 latency (us)",
            false,
            vec![
                Series {
                    label: "read".into(),
                    ..series(&rows, "e", "netchain", |r| r.read_latency_us_p50, mqps)
                },
                Series {
                    label: "write".into(),
                    ..series(&rows, "e", "netchain", |r| r.write_latency_us_p50, mqps)
                },
            ],
        ),
        Plot::new(
            "Fig. 9(f): scaling (spine-leaf)",
            "switches",
            "throughput (MQPS)",
            false,
            vec![
                series(&rows, "f", "read-only", mqps, x),
                series(&rows, "f", "write-only", mqps, x),
            ],
        ),
    ];
    Ok(NetchainFigure {
        name: "netchain-fig9",
        model: serde_json::json!({
            "virtual_seconds_per_point": o.duration.as_nanos() as f64 / 1e9,
            "seed": o.seed,
            "keys": o.keys,
            "value_bytes": 64,
            "write_ratio_default": 0.01,
            "testbed_clients": format!("open loop, {} queries/s per server, 4 servers", o.calls_per_s_per_host),
            "testbed_switches": "no per-frame cost (line rate), 500 ns pipeline delay",
            "scaling_switch_frame_ns": o.switch_frame_cost.as_nanos(),
            "scaling_clients_per_host": o.clients_per_host_scaling,
            "x": {"c": "write ratio (%)", "d": "loss (%)", "e": "closed-loop clients", "f": "switches"},
        }),
        paper: serde_json::json!({
            "c": {"netchain_mqps": 82.0, "zookeeper_kqps": {"read_only": 230, "writes_1%": 140, "writes_100%": 27}},
            "d": {"netchain_mqps": {"0.001%..1%": 82.0, "10%": 48.0}, "zookeeper_kqps": {"1%": 50, "10%": 3}},
            "e": {"netchain_latency_us": 9.7, "flat_up_to_mqps": 82.0, "zookeeper_latency_us": {"read": 170, "write": 2350}},
            "f": "read and write throughput grow linearly with the switches (6 to 96), in the paper's simulation",
        }),
        rows,
        plots,
    })
}

#[derive(Clone, Debug)]
pub struct Fig10Options {
    pub duration: Duration,
    /// When S1 fails after the window opens, and how long the controller takes to learn it.
    pub fail_at: Duration,
    pub detection: Duration,
    pub groups: Vec<usize>,
    pub keys: usize,
    pub calls_per_s_per_host: f64,
    /// The controller's time per frame: its state copy speed.
    pub controller_frame_cost: Duration,
    pub intervals: u64,
    pub seed: u64,
}

impl Default for Fig10Options {
    fn default() -> Self {
        Fig10Options {
            duration: Duration::from_millis(300),
            fail_at: Duration::from_millis(40),
            detection: Duration::from_millis(20),
            groups: vec![1, 100],
            keys: 20_000,
            calls_per_s_per_host: 2e6,
            controller_frame_cost: Duration::from_nanos(500),
            intervals: 100,
            seed: 1,
        }
    }
}

/// Fig. 10: the chain [S0, S1, S2], S1 fails, S3 replaces it; 50% writes; the throughput of
/// one client server over time, with each number of virtual groups.
pub fn fig10(o: &Fig10Options, progress: &mut dyn FnMut(&Point)) -> Result<NetchainFigure, String> {
    let interval = Duration::from_nanos((o.duration.as_nanos() / o.intervals.max(1)).max(1));
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for &groups in &o.groups {
        let c = NetchainSimConfig {
            keys: o.keys,
            write_ratio: 0.5,
            load: Load::Open {
                calls_per_s_per_host: o.calls_per_s_per_host,
            },
            duration: o.duration,
            pinned_chain: Some((vec![0, 1, 2], groups)),
            failure: Some((1, o.fail_at)),
            detection: o.detection,
            seed: o.seed,
            attempts_max: 1,
            agent_timeout: Duration::from_micros(100),
            host_frame_cost: Duration::ZERO,
            controller_frame_cost: o.controller_frame_cost,
            interval,
            ..NetchainSimConfig::default()
        };
        let began = std::time::Instant::now();
        let r = run_sim(&c)?;
        let label = format!("{groups} virtual group{}", if groups == 1 { "" } else { "s" });
        let per_s = 1e9 / interval.as_nanos() as f64;
        let host0 = r.ok_per_interval.first().cloned().unwrap_or_default();
        lines.push(Series {
            label: label.clone(),
            points: (0..o.intervals as usize)
                .map(|i| {
                    let t_ms = (i as u64 * interval.as_nanos()) as f64 / 1e6;
                    (t_ms, host0.get(i).copied().unwrap_or(0) as f64 * per_s / MQPS)
                })
                .collect(),
        });
        let p = Point {
            throughput_ratio_in_recovery: ratio_in_recovery(&r, &host0, o.fail_at, interval),
            ..point_of("10", label, groups as f64, &r, began.elapsed().as_secs_f64())
        };
        progress(&p);
        rows.push(p);
    }
    Ok(NetchainFigure {
        name: "netchain-fig10",
        model: serde_json::json!({
            "virtual_seconds": o.duration.as_nanos() as f64 / 1e9,
            "fail_s1_at_ms": o.fail_at.as_nanos() as f64 / 1e6,
            "detection_ms": o.detection.as_nanos() as f64 / 1e6,
            "keys": o.keys,
            "write_ratio": 0.5,
            "clients": format!("open loop, {} queries/s per server, 4 servers; server 0 plotted", o.calls_per_s_per_host),
            "controller_frame_ns": o.controller_frame_cost.as_nanos(),
            "interval_ms": interval.as_nanos() as f64 / 1e6,
        }),
        paper: serde_json::json!({
            "client_mqps": 20.5,
            "failover": "throughput restored at once after a 1 s detection delay",
            "one_group": "throughput halves for the ~150 s recovery (writes of the group stopped)",
            "hundred_groups": "a 0.5% drop during recovery (1% of the queries x 50% writes)",
        }),
        rows,
        plots: vec![Plot::new(
            "Fig. 10: S1 of [S0, S1, S2] fails, S3 replaces it",
            "time (ms)",
            "throughput of one server (MQPS)",
            false,
            lines,
        )],
    })
}

/// One server's mean throughput between failover and recovery over its mean before the
/// failure, in whole intervals; `None` if either span holds none.
fn ratio_in_recovery(
    r: &NetchainSimReport,
    counts: &[u64],
    fail_at: Duration,
    interval: Duration,
) -> Option<f64> {
    let step = interval.as_nanos().max(1);
    let mean = |from: u64, to: u64| {
        let (from, to) = (from as usize, (to as usize).min(counts.len()));
        (from < to).then(|| counts[from..to].iter().sum::<u64>() as f64 / (to - from) as f64)
    };
    let before = mean(0, fail_at.as_nanos() / step)?;
    let failover_ns = fail_at.as_nanos() + r.report.failover()?.as_nanos();
    let recovered_ns = fail_at.as_nanos() + r.report.recovery()?.as_nanos();
    let during = mean(failover_ns.div_ceil(step), recovered_ns / step)?;
    Some(during / before.max(1e-9))
}

fn linearizable(r: &NetchainSimReport) -> Option<bool> {
    r.report
        .linearizability
        .as_ref()
        .map(|l| l.as_ref().is_ok_and(|l| l.ok()))
}
