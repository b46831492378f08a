//! The transactional key-value store (paper 7.3.1, Fig. 14) in the deterministic simulator:
//! the processes of `onepipe kv demo` ([`super::build`]: replicas and clients of 1Pipe, OCC or
//! the non-transactional store) on the real endpoint, behind the 1Pipe switches of a topology,
//! on `onepipe_sim::Engine` in virtual time, so that a seed fixes the whole run.
//!
//! Phases in virtual time: the clients call from the start; the first `warmup` is not counted
//! (barriers start to flow, the clients' windows fill); the measured window follows; then the
//! clients stop calling and the transactions in flight finish (`drain_max` at most).
//!
//! The cost model (docs/simulator.md, "Transactional key-value store"): links serialize at
//! `link_bits_per_s`, switches forward at line rate after `switch_delay`, and every process
//! has one CPU that is busy a fixed time per frame it receives or sends: `frame_cost` for a
//! frame with a payload (a message of the store), `control_frame_cost` for a frame of the
//! header alone (beacons, ACKs). The engine's host cost is one nanosecond per unit of work and
//! each host says how many a frame is ([`node::KvNode`]'s `work_units`), so that throughput is
//! bounded by the processes' frame rate, as in the paper, where each process is a CPU core.

mod classes;
mod node;

pub use classes::{ClassLatency, ClassedWorkload, TxnClass};
pub use node::{FrameCost, KvNode, SimProcess};

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};

use onepipe::host::HostNode;
use onepipe_check::HistoryRecord;
use onepipe_fabric::{Topology, Wiring, routing};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_sim::{Budget, Engine, Model, Role, Stats};
use onepipe_txkv::Layout;
use onepipe_txkv::run::{ClientApp, StoreProcess};
use onepipe_wire::packet::HEADER_LEN;
use onepipe_wire::{Duration, Instant};
use serde::Serialize;

use super::workload::{Distribution, Recorder, WorkloadConfig, Zipf};
use super::{KvDemoConfig, System};

/// Virtual time at which a run starts.
const START: Instant = Instant::from_nanos(1_000_000);
/// How often the drain looks whether every transaction has finished.
const DRAIN_STEP: Duration = Duration::from_micros(50);
/// The largest message a process sends (as `onepipe::embed`'s default).
const MESSAGE_BYTES_MAX: usize = 1 << 20;
/// Best-effort send buffer per endpoint, in packets (the reliable one is 4 times larger).
const SEND_BUFFER_PACKETS: usize = 1024;

#[derive(Clone, Debug)]
pub struct KvSimConfig {
    pub topology: Topology,
    pub processes_per_host: u32,
    /// The servers are processes `0..shards * replicas`; the others are clients.
    pub shards: u32,
    pub replicas: u32,
    pub system: System,
    /// Keys and transactions (its `distribution` and `seed` are this config's).
    pub workload: WorkloadConfig,
    pub distribution: Distribution,
    /// Closed-loop transactions outstanding per client process.
    pub window: usize,
    pub warmup: Duration,
    /// The measured window, in virtual time.
    pub duration: Duration,
    /// After the window: transactions in flight finish, for this long at most.
    pub drain_max: Duration,
    pub beacon_interval: Duration,
    /// Every link's rate (the paper's testbed: 100 Gbit/s).
    pub link_bits_per_s: u64,
    /// Propagation delay between switches, and of a host's link (its NIC included).
    pub link_delay: Duration,
    pub host_link_delay: Duration,
    pub switch_delay: Duration,
    /// CPU time per frame of a process (see the module's documentation).
    pub frame_cost: Duration,
    pub control_frame_cost: Duration,
    /// Record every operation for the serializability check (memory grows with the run).
    pub record_history: bool,
    pub seed: u64,
    pub events_max: u64,
}

impl Default for KvSimConfig {
    fn default() -> KvSimConfig {
        KvSimConfig {
            topology: Topology::paper_testbed(),
            processes_per_host: 1,
            shards: 16,
            replicas: 1,
            system: System::OnePipe,
            workload: WorkloadConfig::default(),
            distribution: Distribution::Uniform,
            window: 8,
            warmup: Duration::from_millis(1),
            duration: Duration::from_millis(5),
            drain_max: Duration::from_millis(20),
            beacon_interval: Duration::from_micros(10),
            link_bits_per_s: 100_000_000_000,
            link_delay: Duration::from_nanos(200),
            host_link_delay: Duration::from_micros(1),
            switch_delay: Duration::from_nanos(500),
            frame_cost: Duration::from_nanos(1_000),
            control_frame_cost: Duration::from_nanos(100),
            record_history: false,
            seed: 1,
            events_max: 2_000_000_000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KvSimError {
    #[error(transparent)]
    Layout(#[from] onepipe_txkv::LayoutError),
    #[error("the topology: {0}")]
    Wiring(String),
    #[error("{processes} processes: {servers} servers and at least one client need more")]
    TooFewProcesses { processes: usize, servers: u32 },
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("the Zipf constant must be in [0, 1), not {0}")]
    ZipfConstant(f64),
    #[error("{name} must be in [0, 1], not {value}")]
    Fraction { name: &'static str, value: f64 },
    #[error("{0} processes: a multiple of 4, at least 4 (the testbed's four racks)")]
    Processes(u32),
    #[error("no figure `{0}` (a, b or c)")]
    Figure(String),
    #[error("seed={seed}: {source}")]
    Engine {
        seed: u64,
        source: onepipe_sim::EngineError,
    },
}

/// Latency percentiles of one class, microseconds (`None`: no transaction of it committed in
/// the window).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClassLatencyUs {
    pub class: TxnClass,
    pub committed: u64,
    /// The paper's Fig. 14b plots the mean.
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KvSimReport {
    pub system: System,
    pub distribution: &'static str,
    pub processes: u32,
    pub servers: u32,
    pub clients: u32,
    pub keys_per_txn: usize,
    /// Transactions committed in the measured window, per virtual second.
    pub txn_per_s: f64,
    /// Key-value operations of those, per virtual second.
    pub kv_ops_per_s: f64,
    pub latency_us: Vec<ClassLatencyUs>,
    /// Aborts per transaction attempt (OCC; 0 for the others).
    pub abort_rate: f64,
    pub committed: i64,
    pub failed: i64,
    pub unknown: i64,
    /// Transactions still in flight when the drain ended.
    pub outstanding_at_end: i64,
    /// The serializability check of the history (transactional systems, with a history).
    pub serializable: Option<bool>,
    pub serializability_note: Option<String>,
    pub events: u64,
    pub trace_hash: String,
    #[serde(skip)]
    pub history: Vec<HistoryRecord>,
    #[serde(skip)]
    pub stats: Stats,
}

impl KvSimReport {
    pub fn class(&self, class: TxnClass) -> &ClassLatencyUs {
        self.latency_us
            .iter()
            .find(|l| l.class == class)
            .expect("every class is reported")
    }
}

fn validate(c: &KvSimConfig, processes: usize, layout: Layout) -> Result<(), KvSimError> {
    if processes <= layout.servers() as usize {
        return Err(KvSimError::TooFewProcesses {
            processes,
            servers: layout.servers(),
        });
    }
    let positive = [
        ("duration", c.duration == Duration::ZERO),
        ("window", c.window == 0),
        ("keys", c.workload.keys == 0),
        ("keys per transaction", c.workload.keys_per_txn == 0),
        ("beacon interval", c.beacon_interval == Duration::ZERO),
        ("frame cost", c.frame_cost == Duration::ZERO),
    ];
    if let Some((name, _)) = positive.iter().find(|(_, zero)| *zero) {
        return Err(KvSimError::NotPositive(name));
    }
    for (name, value) in [
        ("read-only fraction", c.workload.read_only_fraction),
        ("write fraction", c.workload.write_fraction),
    ] {
        if !(0.0..=1.0).contains(&value) {
            return Err(KvSimError::Fraction { name, value });
        }
    }
    if let Distribution::Zipf(theta) = c.distribution
        && !(0.0..1.0).contains(&theta)
    {
        return Err(KvSimError::ZipfConstant(theta));
    }
    Ok(())
}

/// The endpoints as `onepipe::embed` configures them; ordering only for 1Pipe.
fn endpoint_config(c: &KvSimConfig, wiring: &Wiring, process: u32) -> EndpointConfig {
    let count = wiring.process_count() as u32;
    let mut e = EndpointConfig::new(process, count, wiring.processes[process as usize].tor_port);
    e.beacon_interval = c.beacon_interval;
    e.ordering = c.system == System::OnePipe;
    e.message_bytes_max = MESSAGE_BYTES_MAX;
    let packets_per_message = MESSAGE_BYTES_MAX.div_ceil(e.mtu_bytes - HEADER_LEN).max(1);
    e.send_buffer_packets_max = SEND_BUFFER_PACKETS.max(packets_per_message);
    e.reliable.send_buffer_packets_max = 4 * e.send_buffer_packets_max;
    e.fit_recv_window_to(MESSAGE_BYTES_MAX);
    e
}

fn frame_cost(c: &KvSimConfig) -> FrameCost {
    let ns = |d: Duration| d.as_nanos().clamp(1, u64::from(u32::MAX)) as u32;
    FrameCost {
        data_ns: ns(c.frame_cost),
        control_ns: ns(c.control_frame_cost),
    }
}

/// The demo's processes (`super::build`), each client's workload wrapped to record latency
/// per class.
fn processes(
    c: &KvSimConfig,
    layout: Layout,
    count: usize,
    recorder: &Arc<Recorder>,
    latency: &Arc<Mutex<ClassLatency>>,
) -> Vec<SimProcess> {
    let zipf = match c.distribution {
        Distribution::Zipf(theta) => Some(Arc::new(Zipf::new(c.workload.keys, theta))),
        Distribution::Uniform => None,
    };
    let demo = KvDemoConfig {
        topology: c.topology.clone(),
        shards: c.shards,
        replicas: c.replicas,
        window: c.window,
        workload: c.workload.clone(),
        seed: c.seed,
        record_history: c.record_history,
        ..KvDemoConfig::default()
    };
    super::build(&demo, layout, count, c.system, c.distribution, zipf, recorder)
        .into_iter()
        .map(|p| match p {
            StoreProcess::Server(s) => StoreProcess::Server(s),
            StoreProcess::Client(app) => StoreProcess::Client(ClientApp::new(
                app.engine,
                ClassedWorkload::new(app.source, latency.clone()),
            )),
        })
        .collect()
}

fn nodes(c: &KvSimConfig, wiring: &Wiring, apps: Vec<SimProcess>) -> Result<Vec<(KvNode, Role)>, KvSimError> {
    let tables = routing::build(wiring).map_err(|e| KvSimError::Wiring(e.to_string()))?;
    let switch_config = SwitchConfig {
        beacon_interval: c.beacon_interval,
        // Nothing fails in these runs: a link is never declared dead.
        dead_after_intervals: 1_000_000,
        ecmp_seed: c.seed,
        promise_lead: Duration::ZERO,
        time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
        incarnation: onepipe_proto::Incarnation::Chip,
    };
    let mut nodes = Vec::with_capacity(wiring.switch_count() + apps.len());
    for (s, routes) in tables.into_iter().enumerate() {
        let switch = Switch::new(s, wiring, routes, switch_config.clone(), START).into_node();
        nodes.push((KvNode::Switch(Box::new(switch)), Role::Switch));
    }
    let cost = frame_cost(c);
    for (p, app) in apps.into_iter().enumerate() {
        let endpoint = Endpoint::new(endpoint_config(c, wiring, p as u32), START);
        let host = HostNode { endpoint, app };
        nodes.push((KvNode::Host(Box::new(host), cost), Role::Host));
    }
    Ok(nodes)
}

fn model(c: &KvSimConfig) -> Model {
    Model {
        link_bits_per_s: c.link_bits_per_s,
        fabric_link_bits_per_s: c.link_bits_per_s,
        switch_delay: c.switch_delay,
        // One unit of work: each host says how many a frame is (`KvNode::work_units`).
        host_frame_cost: Duration::from_nanos(1),
        ..Model::default()
    }
}

/// Runs one system under one workload in the simulator; the same configuration and seed give
/// the same report and trace.
pub fn run_sim(c: &KvSimConfig) -> Result<KvSimReport, KvSimError> {
    let layout = Layout::new(c.shards, c.replicas)?;
    let wiring = Wiring::new(c.topology.clone(), c.processes_per_host)
        .map_err(|e| KvSimError::Wiring(e.to_string()))?;
    let count = wiring.process_count();
    validate(c, count, layout)?;
    let from = START + c.warmup;
    let until = from + c.duration;
    let recorder = Arc::new(Recorder::new(c.record_history));
    *recorder.window_ns.lock().expect("window lock") = (from.as_nanos(), until.as_nanos());
    let latency = Arc::new(Mutex::new(ClassLatency::new((from.as_nanos(), until.as_nanos()))));
    let apps = processes(c, layout, count, &recorder, &latency);
    let mut links = wiring.directed_links(c.link_delay);
    let switches = wiring.switch_count();
    for l in &mut links {
        if l.from.0 >= switches || l.to.0 >= switches {
            l.delay = c.host_link_delay;
        }
    }
    let nodes = nodes(c, &wiring, apps)?;
    let mut engine = Engine::new(nodes, &links, model(c), c.seed, START)
        .map_err(|source| KvSimError::Engine { seed: c.seed, source })?;
    let budget = Budget {
        events_max: c.events_max,
        ..Budget::default()
    };
    let step = |engine: &mut Engine<KvNode>, t: Instant| {
        engine
            .run_until(t, &budget)
            .map_err(|source| KvSimError::Engine { seed: c.seed, source })
    };
    // Idle clients submit from `poll_transmit`, which the engine asks when a node is kicked.
    for p in 0..count {
        engine.wake(wiring.node_of_process(p as u32));
    }
    step(&mut engine, until)?;
    recorder.stop.store(true, AtomicOrdering::Relaxed);
    let drain_end = until + c.drain_max;
    while recorder.outstanding.load(AtomicOrdering::Relaxed) > 0 && engine.now() < drain_end {
        let t = (engine.now() + DRAIN_STEP).min(drain_end);
        step(&mut engine, t)?;
    }
    let stats = engine.stats().clone();
    let latency = latency.lock().expect("latency lock");
    Ok(summarize(c, layout, count, &recorder, &latency, stats))
}

fn summarize(
    c: &KvSimConfig,
    layout: Layout,
    count: usize,
    recorder: &Recorder,
    latency: &ClassLatency,
    stats: Stats,
) -> KvSimReport {
    let seconds = c.duration.as_nanos() as f64 / 1e9;
    let in_window = recorder.in_window.load(AtomicOrdering::Relaxed);
    let committed = recorder.committed.load(AtomicOrdering::Relaxed);
    let aborts = recorder.aborts.load(AtomicOrdering::Relaxed);
    let us = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
    };
    let latency_us = TxnClass::ALL
        .iter()
        .map(|&class| {
            let h = latency.of(class);
            ClassLatencyUs {
                class,
                committed: h.len(),
                mean: (!h.is_empty()).then(|| h.mean() / 1e3),
                p50: us(h, 0.5),
                p99: us(h, 0.99),
            }
        })
        .collect();
    let history = recorder
        .history
        .as_ref()
        .map(|h| h.lock().expect("history lock").take())
        .unwrap_or_default();
    let check =
        (c.record_history && c.system.transactional()).then(|| onepipe_check::check_serializable(&history));
    let serializable = check.as_ref().map(|r| r.as_ref().is_ok_and(|r| r.ok()));
    let serializability_note = match &check {
        Some(Ok(r)) if !r.ok() => Some(r.to_string()),
        Some(Err(e)) => Some(format!("the history is malformed: {e}")),
        _ => None,
    };
    let txn_per_s = in_window as f64 / seconds;
    KvSimReport {
        system: c.system,
        distribution: c.distribution.name(),
        processes: count as u32,
        servers: layout.servers(),
        clients: count as u32 - layout.servers(),
        keys_per_txn: c.workload.keys_per_txn,
        txn_per_s,
        kv_ops_per_s: txn_per_s * c.workload.keys_per_txn as f64,
        latency_us,
        abort_rate: if committed + aborts > 0 {
            aborts as f64 / (committed + aborts) as f64
        } else {
            0.0
        },
        committed,
        failed: recorder.failed.load(AtomicOrdering::Relaxed),
        unknown: recorder.unknown.load(AtomicOrdering::Relaxed),
        outstanding_at_end: recorder.outstanding.load(AtomicOrdering::Relaxed),
        serializable,
        serializability_note,
        events: stats.events,
        trace_hash: format!("{:016x}", stats.trace_hash),
        history,
        stats,
    }
}

#[cfg(test)]
mod tests;
