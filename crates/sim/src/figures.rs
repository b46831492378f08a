//! The paper's figures, reproduced in the simulator with the paper's parameters (100 Gbps
//! links, 3 us beacons, 0.3 us mean skew): each sweep runs the same code as every other run
//! and returns rows (for JSON) and a plot description (the CLI draws it).

use crate::config::SimConfig;
use crate::run::{SimError, SimReport, run};
use crate::traffic::Pattern;
use onepipe_fabric::Topology;
use onepipe_proto::Incarnation;
use onepipe_wire::Duration;
use serde::Serialize;

/// One line of a plot.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// What to draw; the CLI renders it as PNG.
#[derive(Clone, Debug, Serialize)]
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_log: bool,
    pub y_log: bool,
    pub series: Vec<Series>,
}

impl Plot {
    /// A plot with a linear y axis (the x axis logarithmic if `x_log`).
    pub fn new(title: &str, x_label: &str, y_label: &str, x_log: bool, series: Vec<Series>) -> Plot {
        Plot {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_log,
            y_log: false,
            series,
        }
    }
}

/// One simulated point of a figure.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub series: String,
    /// The swept value (processes, loss probability, beacon interval in us, hosts).
    pub x: f64,
    pub processes: usize,
    pub throughput_msgs_per_s: f64,
    pub latency_us: crate::run::LatencyUs,
    pub barrier_lag_us: crate::run::LagUs,
    /// Share of link capacity spent on beacons.
    pub beacon_overhead: f64,
    pub events: u64,
    pub events_per_s: f64,
    pub wall_s: f64,
    pub peak_memory_bytes: u64,
    pub violations: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: &'static str,
    pub x_name: &'static str,
    pub rows: Vec<Row>,
    /// The paper's latency model next to the measured points (fig9a).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<crate::latency_model::ModelPoint>,
    #[serde(skip)]
    pub plots: Vec<Plot>,
}

/// The service a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    BestEffort,
    Reliable,
    Unordered,
}

impl Service {
    pub fn label(self) -> &'static str {
        match self {
            Service::BestEffort => "1pipe-be",
            Service::Reliable => "1pipe-r",
            Service::Unordered => "unordered",
        }
    }

    fn apply(self, c: &mut SimConfig) {
        c.reliable = self == Service::Reliable;
        c.ordering = self != Service::Unordered;
    }
}

/// The paper's placement (7.2): up to 8 processes in one rack, 16 in two racks, 32 and more
/// on the 32-host testbed with several processes per host.
pub fn paper_placement(processes: u32) -> (Topology, u32) {
    match processes {
        0..=8 => (
            Topology::single_switch(processes.max(1) as usize).expect("valid"),
            1,
        ),
        9..=16 => (
            Topology::leaf_spine(2, 1, processes.div_ceil(2) as usize).expect("valid"),
            1,
        ),
        _ => (Topology::paper_testbed(), processes.div_ceil(32)),
    }
}

/// An idle system's latency: each process sends a message to one random process every
/// `gap` (the paper's Fig. 9a load), on switching chips.
pub(crate) fn light(processes: u32, service: Service) -> SimConfig {
    let (topology, processes_per_host) = paper_placement(processes);
    let mut c = SimConfig {
        topology,
        processes_per_host,
        pattern: Pattern::Random { fanout: 1 },
        gap: Duration::from_micros(20),
        send_for: Duration::from_micros(300),
        drain: Duration::from_micros(300),
        ..SimConfig::default()
    };
    service.apply(&mut c);
    c
}

pub(crate) fn row(series: &str, x: f64, r: &SimReport) -> Row {
    Row {
        series: series.to_string(),
        x,
        processes: r.processes,
        throughput_msgs_per_s: r.throughput_msgs_per_s,
        latency_us: r.latency_us.clone(),
        barrier_lag_us: r.barrier_lag_us.clone(),
        beacon_overhead: r.beacon_overhead,
        events: r.events,
        events_per_s: r.events_per_s,
        wall_s: r.wall_s,
        peak_memory_bytes: r.peak_memory_bytes,
        violations: r.violations,
    }
}

/// Runs `configs`, reporting each finished point to `progress`.
fn sweep(
    points: Vec<(String, f64, SimConfig)>,
    progress: &mut dyn FnMut(&Row),
) -> Result<Vec<Row>, SimError> {
    let mut rows = Vec::with_capacity(points.len());
    for (series, x, config) in points {
        let r = run(&config, &mut |_, _| {})?;
        let row = row(&series, x, &r);
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

pub(crate) fn series_of(rows: &[Row], y: impl Fn(&Row) -> f64) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let point = (r.x, y(r));
        match out.iter_mut().find(|s| s.label == r.series) {
            Some(s) => s.points.push(point),
            None => out.push(Series {
                label: r.series.clone(),
                points: vec![point],
            }),
        }
    }
    out
}

pub(crate) const SERVICES: [Service; 3] = [Service::BestEffort, Service::Reliable, Service::Unordered];

/// The incarnations Fig. 9a compares (paper 6.2), with the switch CPU's delay.
fn incarnations(cpu_delay: Duration) -> [Incarnation; 3] {
    [
        Incarnation::Chip,
        Incarnation::SwitchCpu { delay: cpu_delay },
        Incarnation::Host,
    ]
}

/// A series' label: the service, and where barriers are aggregated unless on a chip.
fn label(service: Service, incarnation: Incarnation) -> String {
    match (service, incarnation) {
        (Service::Unordered, _) | (_, Incarnation::Chip) => service.label().to_string(),
        _ => format!("{}-{}", service.label(), incarnation.label()),
    }
}

/// Paper Fig. 9a: delivery latency of an idle system against the number of processes, on
/// switching chips and on switch CPUs taking `cpu_delay` per beacon, with the paper's latency
/// model next to every best-effort point (`Figure::model`).
pub fn fig9a(
    processes: &[u32],
    cpu_delay: Duration,
    progress: &mut dyn FnMut(&Row),
) -> Result<Figure, SimError> {
    let mut points = Vec::new();
    let mut best_effort = Vec::new();
    for &n in processes {
        points.push((
            label(Service::Unordered, Incarnation::Chip),
            n as f64,
            light(n, Service::Unordered),
        ));
        for incarnation in incarnations(cpu_delay) {
            for s in [Service::BestEffort, Service::Reliable] {
                let mut c = light(n, s);
                c.incarnation = incarnation;
                points.push((label(s, incarnation), n as f64, c));
            }
            let be = label(Service::BestEffort, incarnation);
            if !best_effort.iter().any(|(l, _)| *l == be) {
                best_effort.push((be, incarnation));
            }
        }
    }
    let rows = sweep(points, progress)?;
    let defaults = SimConfig::default();
    let model = crate::latency_model::model_points(
        &rows,
        &best_effort,
        |x| {
            let (topology, per_host) = paper_placement(x as u32);
            crate::latency_model::switches_on_longest_path(&topology, per_host)
        },
        &defaults,
    );
    let plots = vec![Plot {
        title: "Fig. 9a: idle delivery latency (mean)".into(),
        x_label: "processes".into(),
        y_label: "latency (us)".into(),
        x_log: true,
        y_log: false,
        series: series_of(&rows, |r| r.latency_us.mean),
    }];
    Ok(Figure {
        name: "fig9a",
        x_name: "processes",
        rows,
        model,
        plots,
    })
}

/// Paper Fig. 9b: latency against the end-to-end loss probability of a packet, at
/// `processes` processes. A path crosses `hops + 1` links, each losing with
/// 1 - (1 - p)^(1 / links).
pub fn fig9b(processes: u32, losses: &[f64], progress: &mut dyn FnMut(&Row)) -> Result<Figure, SimError> {
    let mut points = Vec::new();
    for &p in losses {
        for s in SERVICES {
            let mut c = light(processes, s);
            let links = 2.0 * c.topology.layers() as f64;
            c.loss = 1.0 - (1.0 - p).powf(1.0 / links);
            // Reliable messages need time to be repaired after the last send.
            c.drain = Duration::from_millis(3);
            points.push((s.label().to_string(), p, c));
        }
    }
    let rows = sweep(points, progress)?;
    let plots = vec![Plot {
        title: format!("Fig. 9b: latency vs packet loss, {processes} processes (mean)"),
        x_label: "end-to-end loss probability".into(),
        y_label: "latency (us)".into(),
        x_log: true,
        y_log: true,
        series: series_of(&rows, |r| r.latency_us.mean),
    }];
    Ok(Figure {
        name: "fig9b",
        x_name: "loss",
        rows,
        model: Vec::new(),
        plots,
    })
}

/// Paper Fig. 13: the share of link bandwidth beacons take, and what the interval costs in
/// latency, on the testbed with light traffic.
pub fn fig13(intervals_us: &[f64], progress: &mut dyn FnMut(&Row)) -> Result<Figure, SimError> {
    let points = intervals_us
        .iter()
        .map(|&i| {
            let mut c = light(32, Service::BestEffort);
            c.beacon_interval = Duration::from_nanos((i * 1000.0).round() as u64);
            ("1pipe-be".to_string(), i, c)
        })
        .collect();
    let rows = sweep(points, progress)?;
    let plots = vec![
        Plot {
            title: "Fig. 13: beacon overhead vs beacon interval".into(),
            x_label: "beacon interval (us)".into(),
            y_label: "share of link bandwidth (%)".into(),
            x_log: true,
            y_log: true,
            series: series_of(&rows, |r| 100.0 * r.beacon_overhead),
        },
        Plot {
            title: "Fig. 13: latency vs beacon interval".into(),
            x_label: "beacon interval (us)".into(),
            y_label: "latency (us, mean)".into(),
            x_log: true,
            y_log: true,
            series: series_of(&rows, |r| r.latency_us.mean),
        },
    ];
    Ok(Figure {
        name: "fig13",
        x_name: "beacon_interval_us",
        rows,
        model: Vec::new(),
        plots,
    })
}

/// Three-layer fat-trees from 32 to 32,768 hosts (paper 6.3, "Scalability to larger
/// networks"), one process per host.
pub fn scale_topology(hosts: u32) -> Topology {
    let (pods, tors, spines, cores, per_tor) = match hosts {
        0..=32 => return Topology::paper_testbed(),
        33..=128 => (4, 4, 2, 2, 8),
        129..=512 => (8, 8, 4, 4, 8),
        513..=2048 => (16, 8, 4, 4, 16),
        2049..=8192 => (16, 16, 4, 4, 32),
        _ => (32, 16, 4, 4, 64),
    };
    Topology::three_layer(pods, tors, spines, cores, per_tor).expect("valid preset")
}

/// Best-effort latency and barrier lag as the fabric grows: they should stay flat, since
/// barriers aggregate hop by hop (paper 6.3).
pub fn scale(hosts: &[u32], progress: &mut dyn FnMut(&Row)) -> Result<Figure, SimError> {
    let points = hosts
        .iter()
        .map(|&h| {
            let c = SimConfig {
                topology: scale_topology(h),
                pattern: Pattern::Random { fanout: 1 },
                gap: Duration::from_micros(100),
                send_for: Duration::from_micros(100),
                drain: Duration::from_micros(50),
                ..SimConfig::default()
            };
            ("1pipe-be".to_string(), c.topology.hosts.len() as f64, c)
        })
        .collect();
    let rows = sweep(points, progress)?;
    let plots = vec![Plot {
        title: "Scale: best-effort latency and barrier lag vs hosts".into(),
        x_label: "hosts".into(),
        y_label: "us".into(),
        x_log: true,
        y_log: false,
        series: [
            series_of(&rows, |r| r.latency_us.mean),
            series_of(&rows, |r| r.barrier_lag_us.mean),
        ]
        .into_iter()
        .zip(["latency (mean)", "barrier lag (mean)"])
        .map(|(mut s, label)| {
            s[0].label = label.to_string();
            s.remove(0)
        })
        .collect(),
    }];
    Ok(Figure {
        name: "scale",
        x_name: "hosts",
        rows,
        model: Vec::new(),
        plots,
    })
}

/// The paper's testbed has no oversubscription (7.1): between switches it bundles as many
/// 100G cables as the hosts below need, 400G for 8 hosts a ToR and 2 uplinks. Our preset has
/// one link per switch pair, 4:1 oversubscribed at 100G; saturated all-to-all traffic then
/// overflows the ToR uplinks, which the paper's fabric never did.
pub(crate) const TESTBED_FABRIC_BITS_PER_S: u64 = 400_000_000_000;

/// How many of its own broadcasts a process keeps in flight in Fig. 8 (the baselines' window,
/// 1Pipe's send buffer): about 256 messages, enough to fill the pipe at 7 M msg/s per process
/// and a round trip of tens of microseconds. A deeper window only adds queueing delay at
/// saturation, and at 512 processes a window of 16 broadcasts (8,192 messages) is a
/// millisecond of queue.
fn fig8_window_broadcasts(processes: u32) -> usize {
    256usize.div_ceil(processes.max(1) as usize).clamp(1, 16)
}

/// How long Fig. 8 sends; the second half is measured. The measured half is longer than the
/// saturated latencies of 1Pipe (up to 300 us) so that it sees the steady state, and spans
/// token rounds (a round visits every process).
fn fig8_send_for(processes: u32) -> Duration {
    Duration::from_micros(600 + 2 * processes as u64)
}

/// Paper Fig. 8: all-to-all total-order broadcast of 64-byte messages, saturated: throughput
/// and latency of 1Pipe (best effort, reliable) and the four baselines against processes.
pub fn fig8(processes: &[u32], progress: &mut dyn FnMut(&Row)) -> Result<Figure, SimError> {
    let mut rows = Vec::new();
    for &n in processes {
        let (topology, processes_per_host) = paper_placement(n);
        let window = fig8_window_broadcasts(n);
        let send_for = fig8_send_for(n);
        let base = SimConfig {
            topology,
            processes_per_host,
            pattern: Pattern::Broadcast,
            gap: Duration::ZERO,
            send_for,
            measure_after: Duration::from_nanos(send_for.as_nanos() / 2),
            // Reliable at 512 processes holds a millisecond of queue when sending stops.
            drain: Duration::from_millis(3),
            send_buffer_packets: window * n as usize,
            fabric_link_bits_per_s: Some(TESTBED_FABRIC_BITS_PER_S),
            ..SimConfig::default()
        };
        for s in [Service::BestEffort, Service::Reliable] {
            let mut c = base.clone();
            s.apply(&mut c);
            // A reliable packet holds its buffer slot until acknowledged, a round trip more
            // than best effort's: twice the window covers it at saturation (a deeper buffer
            // only queues at the sender's CPU; measured at 32 and 128 processes).
            c.reliable_config.send_buffer_packets_max = 2 * window * n as usize;
            c.reliable_config.rto_max = crate::config::SATURATED_RTO_MAX;
            let r = run(&c, &mut |_, _| {})?;
            let row = row(s.label(), n as f64, &r);
            progress(&row);
            rows.push(row);
        }
        // A saturated sequencer or token holds every process's window in one queue: at 512
        // processes a broadcast waits ~17 ms. The run drains until every broadcast is back.
        let baseline = SimConfig {
            drain: Duration::from_millis(40),
            ..base.clone()
        };
        for kind in onepipe_baselines::Kind::ALL {
            let r = crate::baseline::run_baseline(&baseline, kind, window)?;
            let row = Row {
                series: r.system.to_string(),
                x: n as f64,
                processes: r.processes,
                throughput_msgs_per_s: r.throughput_msgs_per_s,
                latency_us: r.latency_us,
                barrier_lag_us: crate::run::LagUs { mean: 0.0, max: 0.0 },
                beacon_overhead: 0.0,
                events: r.events,
                events_per_s: r.events_per_s,
                wall_s: r.wall_s,
                peak_memory_bytes: crate::memory::peak_resident_bytes(),
                violations: r.violations,
            };
            progress(&row);
            rows.push(row);
        }
    }
    let plots = vec![
        Plot {
            title: "Fig. 8a: all-to-all broadcast throughput".into(),
            x_label: "processes".into(),
            y_label: "M msg/s (whole system)".into(),
            x_log: true,
            y_log: true,
            series: series_of(&rows, |r| r.throughput_msgs_per_s / 1e6),
        },
        Plot {
            title: "Fig. 8b: latency".into(),
            x_label: "processes".into(),
            y_label: "latency (us, mean)".into(),
            x_log: true,
            y_log: true,
            series: series_of(&rows, |r| r.latency_us.mean),
        },
    ];
    Ok(Figure {
        name: "fig8",
        x_name: "processes",
        rows,
        model: Vec::new(),
        plots,
    })
}
