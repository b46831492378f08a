//! The paper's Fig. 14 (section 7.3.1) in the simulator: each point is one [`run_sim`] run;
//! the JSON carries the paper's findings next to ours.
//!
//! - `a`: transactions/s against processes (half of them servers, half clients), uniform and
//!   Zipf (YCSB) keys, 1Pipe, OCC and the non-transactional store; 50% read-only, 2 keys;
//! - `b`: latency of read-only, write-only and read-write transactions against the share of
//!   writes among operations, 1Pipe and OCC, Zipf keys;
//! - `c`: key-value operations/s against keys per transaction, 95% read-only, the three
//!   systems, Zipf keys.
//!
//! The cost model is the one of [`super::sim`]: links and switches at line rate, each process
//! a CPU charged per frame.

use onepipe_fabric::Topology;
use onepipe_sim::figures::{Plot, Series};
use onepipe_wire::Duration;
use serde::Serialize;

use super::System;
use super::sim::{ClassLatencyUs, KvSimConfig, KvSimError, TxnClass, run_sim};
use super::workload::{Distribution, WorkloadConfig};

/// One point: one run's throughput, latency per class and aborts.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub series: String,
    pub system: System,
    pub distribution: &'static str,
    pub x: f64,
    pub processes: u32,
    pub txn_per_s: f64,
    pub kv_ops_per_s: f64,
    pub latency_us: Vec<ClassLatencyUs>,
    pub abort_rate: f64,
    pub committed: i64,
    pub failed: i64,
    pub unknown: i64,
    pub events: u64,
    pub trace_hash: String,
    pub wall_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct KvFigure {
    pub name: &'static str,
    /// The model's parameters.
    pub model: serde_json::Value,
    /// The paper's findings (7.3.1; the figure's own numbers are not in its text).
    pub paper: serde_json::Value,
    pub rows: Vec<Point>,
    pub plots: Vec<Plot>,
}

#[derive(Clone, Debug)]
pub struct Fig14Options {
    /// The measured window of each run, in virtual time, and the warm-up before it.
    pub duration: Duration,
    pub warmup: Duration,
    pub seed: u64,
    pub keys: u64,
    /// YCSB's Zipf constant.
    pub zipf: f64,
    /// Closed-loop transactions outstanding per client, in figures a and c (saturation) and b
    /// (a lighter load: latency, not queueing).
    pub window: usize,
    pub latency_window: usize,
    /// Figure a's process counts (multiples of 4: the testbed's shape, four racks).
    pub processes: Vec<u32>,
    /// Processes of figures b and c.
    pub processes_bc: u32,
    /// Figure b's shares of writes among operations, in percent.
    pub write_percents: Vec<u32>,
    /// Figure c's keys per transaction.
    pub keys_per_txn: Vec<usize>,
    /// The model's CPU costs per frame ([`KvSimConfig`]).
    pub frame_cost: Duration,
    pub control_frame_cost: Duration,
}

impl Default for Fig14Options {
    fn default() -> Fig14Options {
        let c = KvSimConfig::default();
        Fig14Options {
            duration: Duration::from_millis(4),
            warmup: Duration::from_millis(1),
            seed: 1,
            keys: 100_000,
            zipf: 0.99,
            window: 64,
            latency_window: 1,
            processes: vec![8, 16, 32, 64],
            processes_bc: 32,
            write_percents: vec![0, 25, 50, 75, 100],
            keys_per_txn: vec![1, 2, 4, 8],
            frame_cost: c.frame_cost,
            control_frame_cost: c.control_frame_cost,
        }
    }
}

/// The figures `onepipe sim kv-fig14 --figure` knows.
pub const FIGURES: [&str; 3] = ["a", "b", "c"];

/// `processes` processes on the testbed's shape (2 pods of 2 ToRs, 2 spines per pod, 2 cores):
/// `processes / 4` hosts per ToR, one process each; half the processes are servers (one
/// replica per shard, as the paper's store), half clients.
fn config(
    o: &Fig14Options,
    processes: u32,
    system: System,
    distribution: Distribution,
) -> Result<KvSimConfig, KvSimError> {
    if processes < 4 || processes % 4 != 0 {
        return Err(KvSimError::Processes(processes));
    }
    let topology = Topology::three_layer(2, 2, 2, 2, processes as usize / 4)
        .map_err(|e| KvSimError::Wiring(e.to_string()))?;
    Ok(KvSimConfig {
        topology,
        shards: processes / 2,
        replicas: 1,
        system,
        distribution,
        workload: WorkloadConfig {
            keys: o.keys,
            ..WorkloadConfig::default()
        },
        window: o.window,
        warmup: o.warmup,
        duration: o.duration,
        frame_cost: o.frame_cost,
        control_frame_cost: o.control_frame_cost,
        seed: o.seed,
        ..KvSimConfig::default()
    })
}

fn point(series: String, x: f64, c: &KvSimConfig) -> Result<Point, KvSimError> {
    #[allow(clippy::disallowed_methods)] // the wall time a point took, for the table
    let began = std::time::Instant::now();
    let r = run_sim(c)?;
    Ok(Point {
        series,
        system: r.system,
        distribution: r.distribution,
        x,
        processes: r.processes,
        txn_per_s: r.txn_per_s,
        kv_ops_per_s: r.kv_ops_per_s,
        latency_us: r.latency_us.clone(),
        abort_rate: r.abort_rate,
        committed: r.committed,
        failed: r.failed,
        unknown: r.unknown,
        events: r.events,
        trace_hash: r.trace_hash.clone(),
        wall_s: began.elapsed().as_secs_f64(),
    })
}

impl Point {
    pub fn class(&self, class: TxnClass) -> &ClassLatencyUs {
        self.latency_us
            .iter()
            .find(|l| l.class == class)
            .expect("every class is reported")
    }
}

fn series(rows: &[Point], name: &str, y: impl Fn(&Point) -> Option<f64>) -> Series {
    Series {
        label: name.into(),
        points: rows
            .iter()
            .filter(|r| r.series == name)
            .filter_map(|r| y(r).map(|y| (r.x, y)))
            .collect(),
    }
}

fn model_json(o: &Fig14Options) -> serde_json::Value {
    let c = KvSimConfig::default();
    serde_json::json!({
        "virtual_seconds_per_point": o.duration.as_nanos() as f64 / 1e9,
        "warmup_us": o.warmup.as_micros_f64(),
        "seed": o.seed,
        "keys": o.keys,
        "zipf": o.zipf,
        "window": o.window,
        "topology": "three-layer:2,2,2,2,processes/4 (the testbed's shape)",
        "servers": "half the processes, one replica per shard",
        "value_bytes": "ETC (generalized Pareto), at most 1024",
        "link_gbps": c.link_bits_per_s as f64 / 1e9,
        "host_link_delay_us": c.host_link_delay.as_micros_f64(),
        "switch_delay_ns": c.switch_delay.as_nanos(),
        "beacon_interval_us": c.beacon_interval.as_micros_f64(),
        "host_data_frame_ns": o.frame_cost.as_nanos(),
        "host_control_frame_ns": o.control_frame_cost.as_nanos(),
    })
}

fn system_label(system: System, distribution: Distribution) -> String {
    format!("{} {}", system.name(), distribution.name())
}

/// Figure a: transactions/s against processes.
pub fn figure_a(o: &Fig14Options, progress: &mut dyn FnMut(&Point)) -> Result<KvFigure, KvSimError> {
    let mut rows = Vec::new();
    let mut names = Vec::new();
    for distribution in [Distribution::Uniform, Distribution::Zipf(o.zipf)] {
        for system in System::ALL {
            let name = system_label(system, distribution);
            for &n in &o.processes {
                let p = point(name.clone(), f64::from(n), &config(o, n, system, distribution)?)?;
                progress(&p);
                rows.push(p);
            }
            names.push(name);
        }
    }
    let plots = vec![Plot::new(
        "Fig. 14a: throughput vs processes (50% read-only, 2 keys)",
        "processes",
        "transactions/s (millions)",
        true,
        names
            .iter()
            .map(|n| series(&rows, n, |r| Some(r.txn_per_s / 1e6)))
            .collect(),
    )];
    Ok(KvFigure {
        name: "kv-fig14a",
        model: model_json(o),
        paper: serde_json::json!({
            "one_pipe_of_non_transactional": 0.9,
            "occ_of_one_pipe_uniform": 0.5,
            "ycsb_of_uniform_at_512_processes": 0.7,
            "occ_ycsb": "does not scale (hot keys locked for 2 RTTs)",
            "setup": "512 processes at most, no replication",
        }),
        rows,
        plots,
    })
}

/// The workload of a share `w` of writes among the operations of `keys` independent ones:
/// read-only with the chance that none writes, `(1 - w)^keys`; the others write each
/// operation with chance `w` (and one at least, as [`super::workload::Workload`] draws them).
fn write_share(keys: usize, w: f64) -> WorkloadConfig {
    WorkloadConfig {
        keys_per_txn: keys,
        read_only_fraction: (1.0 - w).powi(keys as i32),
        write_fraction: w,
        ..WorkloadConfig::default()
    }
}

/// Figure b: latency per class against the share of writes, 1Pipe and OCC, Zipf keys.
pub fn figure_b(o: &Fig14Options, progress: &mut dyn FnMut(&Point)) -> Result<KvFigure, KvSimError> {
    let distribution = Distribution::Zipf(o.zipf);
    let mut rows = Vec::new();
    for system in [System::OnePipe, System::Occ] {
        for &percent in &o.write_percents {
            let mut c = config(o, o.processes_bc, system, distribution)?;
            c.window = o.latency_window;
            c.workload = WorkloadConfig {
                keys: o.keys,
                ..write_share(2, f64::from(percent) / 100.0)
            };
            let p = point(system.name().into(), f64::from(percent), &c)?;
            progress(&p);
            rows.push(p);
        }
    }
    let mut series_all = Vec::new();
    for system in [System::OnePipe, System::Occ] {
        for class in TxnClass::ALL {
            let mut s = series(&rows, system.name(), |r| r.class(class).mean);
            s.label = format!("{} {}", system.name(), class.name());
            series_all.push(s);
        }
    }
    let mut model = model_json(o);
    model["processes"] = o.processes_bc.into();
    model["window"] = o.latency_window.into();
    let plots = vec![Plot::new(
        "Fig. 14b: latency vs write share (Zipf)",
        "writes among operations (%)",
        "mean latency (us)",
        false,
        series_all,
    )];
    Ok(KvFigure {
        name: "kv-fig14b",
        model,
        paper: serde_json::json!({
            "one_pipe": "almost constant; WO and WR (reliable) above RO (best effort)",
            "occ_read_only": "below 1Pipe (1 RTT, no reorder wait)",
            "occ_uncontended_wo_wr": "3 and 4 RTTs, slightly above 1Pipe",
            "occ_high_write_share": "skyrockets (lock contention on hot keys, aborts)",
            "setup": "512 processes",
        }),
        rows,
        plots,
    })
}

/// Figure c: key-value operations/s against keys per transaction, 95% read-only, Zipf keys.
pub fn figure_c(o: &Fig14Options, progress: &mut dyn FnMut(&Point)) -> Result<KvFigure, KvSimError> {
    let distribution = Distribution::Zipf(o.zipf);
    let mut rows = Vec::new();
    for system in System::ALL {
        for &keys in &o.keys_per_txn {
            let mut c = config(o, o.processes_bc, system, distribution)?;
            c.workload = WorkloadConfig {
                keys: o.keys,
                keys_per_txn: keys,
                read_only_fraction: 0.95,
                ..WorkloadConfig::default()
            };
            let p = point(system.name().into(), keys as f64, &c)?;
            progress(&p);
            rows.push(p);
        }
    }
    let mut model = model_json(o);
    model["processes"] = o.processes_bc.into();
    let plots = vec![Plot::new(
        "Fig. 14c: KV operations/s vs keys per transaction (95% read-only, Zipf)",
        "keys per transaction",
        "KV operations/s (millions)",
        true,
        System::ALL
            .iter()
            .map(|s| series(&rows, s.name(), |r| Some(r.kv_ops_per_s / 1e6)))
            .collect(),
    )];
    Ok(KvFigure {
        name: "kv-fig14c",
        model,
        paper: serde_json::json!({
            "one_pipe_and_non_transactional": "agnostic of transaction size",
            "occ_ycsb_of_one_pipe_at_2_keys": 0.4,
            "occ_ycsb": "plummets with more keys (aborts grow)",
            "setup": "512 processes, 95% read-only",
        }),
        rows,
        plots,
    })
}

/// Figure `name` (`a`, `b` or `c`).
pub fn figure(
    name: &str,
    o: &Fig14Options,
    progress: &mut dyn FnMut(&Point),
) -> Result<KvFigure, KvSimError> {
    match name {
        "a" => figure_a(o, progress),
        "b" => figure_b(o, progress),
        "c" => figure_c(o, progress),
        other => Err(KvSimError::Figure(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_share_reads_only_as_often_as_no_operation_writes() {
        let w = write_share(2, 0.5);
        assert!((w.read_only_fraction - 0.25).abs() < 1e-12);
        assert_eq!(write_share(2, 0.0).read_only_fraction, 1.0);
        assert_eq!(write_share(2, 1.0).read_only_fraction, 0.0);
    }

    #[test]
    fn process_counts_must_fill_the_four_racks() {
        let o = Fig14Options::default();
        for bad in [0, 2, 6] {
            assert!(matches!(
                config(&o, bad, System::OnePipe, Distribution::Uniform),
                Err(KvSimError::Processes(_))
            ));
        }
        let c = config(&o, 8, System::OnePipe, Distribution::Uniform).expect("valid");
        assert_eq!(c.shards, 4);
    }
}
