//! The thesis's end-to-end figures of in-network Paxos (thesis 004, chapters 5 and 6) in the
//! simulator: each point is one [`run_sim`] run; the JSON carries the thesis's numbers next to
//! ours.
//!
//! - `throughput`: values/s and latency against closed-loop clients, in-network against
//!   software (the thesis: 447K against libpaxos's 63K values/s, x7; 19 us at low load);
//! - `partitions`: values/s against partitions (1, 2, 4), in-network, with one replica worker
//!   per partition, and with one worker for every partition.
//!
//! The cost model is the one of [`super::sim`]: switches at line rate, hosts charged per frame
//! by what they run. Its two host costs are inputs taken from the thesis (docs/simulator.md):
//! the ratio of the two placements' peaks follows from them; what the runs add is where each
//! placement saturates, the latency along the way, and how partitions scale.

use super::sim::{PaxosSimConfig, PaxosSimReport, placement_name, run_sim, sim_tuning};
use onepipe_paxos::Placement;
use onepipe_sim::figures::{Plot, Series};
use onepipe_wire::Duration;
use serde::Serialize;

/// One point: a run's throughput, latency and checks.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub series: String,
    pub x: f64,
    /// Calls answered per second in the steady part of the window
    /// ([`PaxosSimReport::steady_values_per_s`]).
    pub values_per_s: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub unknown: u64,
    pub retries: u64,
    /// Every check of the run passed (or was not made: never `false` hidden).
    pub checks_ok: bool,
    pub linearizable: Option<bool>,
    pub events: u64,
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PaxosFigure {
    pub name: &'static str,
    /// The model's parameters.
    pub model: serde_json::Value,
    /// The thesis's numbers (notes-innetwork-paxos.md).
    pub thesis: serde_json::Value,
    pub rows: Vec<Point>,
    pub plots: Vec<Plot>,
}

impl PaxosFigure {
    pub fn checks_ok(&self) -> bool {
        self.rows.iter().all(|r| r.checks_ok)
    }
}

#[derive(Clone, Debug)]
pub struct FigureOptions {
    /// The measured window of each run, in virtual time.
    pub duration: Duration,
    pub seed: u64,
    /// Closed-loop clients of the throughput figure.
    pub clients: Vec<usize>,
    pub client_hosts: usize,
    /// Partitions of the partitions figure, and its clients.
    pub partitions: Vec<u16>,
    pub partition_clients: usize,
    pub partition_client_hosts: usize,
    /// The model's costs ([`PaxosSimConfig`]).
    pub library_frame_cost: Duration,
    pub role_frame_cost: Duration,
    pub switch_frame_cost: Duration,
}

impl Default for FigureOptions {
    fn default() -> Self {
        let c = PaxosSimConfig::default();
        FigureOptions {
            duration: Duration::from_millis(5),
            seed: 1,
            clients: vec![1, 2, 4, 8, 16, 32, 64, 128],
            client_hosts: 4,
            partitions: vec![1, 2, 4],
            partition_clients: 256,
            partition_client_hosts: 8,
            library_frame_cost: c.library_frame_cost,
            role_frame_cost: c.role_frame_cost,
            switch_frame_cost: c.switch_frame_cost,
        }
    }
}

fn base(o: &FigureOptions) -> PaxosSimConfig {
    PaxosSimConfig {
        duration: o.duration,
        seed: o.seed,
        library_frame_cost: o.library_frame_cost,
        role_frame_cost: o.role_frame_cost,
        switch_frame_cost: o.switch_frame_cost,
        // Every call is a SET (the thesis's clients propose values).
        write_ratio: 1.0,
        drain: Duration::from_millis(20),
        ..PaxosSimConfig::default()
    }
}

fn point(series: String, x: f64, c: &PaxosSimConfig) -> Result<Point, String> {
    #[allow(clippy::disallowed_methods)] // the wall time a point took, for the table
    let began = std::time::Instant::now();
    let r: PaxosSimReport = run_sim(c)?;
    let p = &r.report;
    Ok(Point {
        series,
        x,
        values_per_s: r.steady_values_per_s,
        latency_us_p50: p.latency_us(0.5),
        latency_us_p99: p.latency_us(0.99),
        unknown: p.unknown,
        retries: p.retries,
        checks_ok: p.checks.ok() && p.checks.problem.is_none(),
        linearizable: p.checks.linearizable,
        events: r.stats.events,
        wall_s: began.elapsed().as_secs_f64(),
    })
}

fn series(rows: &[Point], name: &str, x: impl Fn(&Point) -> f64, y: impl Fn(&Point) -> f64) -> Series {
    Series {
        label: name.into(),
        points: rows
            .iter()
            .filter(|r| r.series == name)
            .map(|r| (x(r), y(r)))
            .collect(),
    }
}

fn model_json(o: &FigureOptions, c: &PaxosSimConfig) -> serde_json::Value {
    serde_json::json!({
        "virtual_seconds_per_point": o.duration.as_nanos() as f64 / 1e9,
        "seed": o.seed,
        "value_bytes": c.value_bytes,
        "write_ratio": c.write_ratio,
        "link_gbps": c.link_bits_per_s as f64 / 1e9,
        "host_link_delay_us": c.host_link_delay.as_micros_f64(),
        "switch_delay_ns": c.switch_delay.as_nanos(),
        "switch_frame_ns": o.switch_frame_cost.as_nanos(),
        "library_host_frame_ns": o.library_frame_cost.as_nanos(),
        "software_role_host_frame_ns": o.role_frame_cost.as_nanos(),
        "replicas": 3,
        "acceptors": 3,
    })
}

const KVALUES: f64 = 1e3;

/// Values/s and latency against clients, in-network and software; `progress` hears of each
/// point as it finishes.
pub fn throughput(o: &FigureOptions, progress: &mut dyn FnMut(&Point)) -> Result<PaxosFigure, String> {
    let mut rows = Vec::new();
    for placement in [Placement::InNetwork, Placement::Software] {
        for &clients in &o.clients {
            let c = PaxosSimConfig {
                placement,
                clients,
                client_hosts: o.client_hosts.min(clients),
                ..base(o)
            };
            let p = point(placement_name(placement).into(), clients as f64, &c)?;
            progress(&p);
            rows.push(p);
        }
    }
    let k = |r: &Point| r.values_per_s / KVALUES;
    let names = ["in-network", "software"];
    let plots = vec![
        Plot::new(
            "Throughput vs clients (3 acceptors, 3 replicas)",
            "closed-loop clients",
            "values/s (thousands)",
            true,
            names.iter().map(|n| series(&rows, n, |r| r.x, k)).collect(),
        ),
        Plot {
            y_log: true,
            ..Plot::new(
                "Latency vs throughput",
                "values/s (thousands)",
                "p50 latency (us)",
                false,
                names
                    .iter()
                    .map(|n| series(&rows, n, k, |r| r.latency_us_p50))
                    .collect(),
            )
        },
    ];
    let mut model = model_json(o, &base(o));
    model["client_hosts"] = o.client_hosts.into();
    Ok(PaxosFigure {
        name: "paxos-throughput",
        model,
        thesis: serde_json::json!({
            "in_network_values_per_s": 447_000,
            "libpaxos_values_per_s": 63_000,
            "speedup": 7.1,
            "in_network_latency_us": {"at_63k": 19, "at_max": 147},
            "libpaxos_latency_us": {"min": 183, "max": 773},
            "setup": "1 client, 3 replicas, 10 Gbit/s, no-op application, DPDK learners",
        }),
        rows,
        plots,
    })
}

/// Values/s against partitions, in-network: one replica worker per partition (the thesis's
/// replicas), and one worker for every partition.
pub fn partitions(o: &FigureOptions, progress: &mut dyn FnMut(&Point)) -> Result<PaxosFigure, String> {
    let mut rows = Vec::new();
    for (name, per_partition) in [("worker per partition", true), ("one worker", false)] {
        for &k in &o.partitions {
            let c = PaxosSimConfig {
                clients: o.partition_clients,
                client_hosts: o.partition_client_hosts.min(o.partition_clients),
                tuning: sim_tuning(k),
                replica_workers: if per_partition { k as u32 } else { 1 },
                ..base(o)
            };
            let p = point(name.into(), k as f64, &c)?;
            progress(&p);
            rows.push(p);
        }
    }
    let k = |r: &Point| r.values_per_s / KVALUES;
    let plots = vec![Plot::new(
        "In-network Paxos: throughput vs partitions",
        "partitions",
        "values/s (thousands)",
        false,
        ["worker per partition", "one worker"]
            .iter()
            .map(|n| series(&rows, n, |r| r.x, k))
            .collect(),
    )];
    let mut model = model_json(o, &base(o));
    model["clients"] = o.partition_clients.into();
    model["client_hosts"] = o.partition_client_hosts.into();
    model["replica_worker"] =
        "a replica's CPU time per frame is the library host's divided by its workers".into();
    Ok(PaxosFigure {
        name: "paxos-partitions",
        model,
        thesis: serde_json::json!({
            "rocksdb_wal_values_per_s": {"1_partition": 112_000, "4_partitions_ssd": 576_000, "4_partitions_ramdisk": 747_000},
            "libpaxos_rocksdb_values_per_s": 53_000,
        }),
        rows,
        plots,
    })
}
