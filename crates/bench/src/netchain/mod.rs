//! The run behind `onepipe netchain demo`: NetChain's testbed (paper 002, Fig. 8: four switches,
//! the servers under S0), chains of three, the keys preloaded by the controller, closed-loop
//! clients reading and writing uniformly chosen keys; optionally a switch fails in the middle
//! (failover, then recovery). Every attempt is recorded for the linearizability check.

#![allow(clippy::disallowed_methods)] // the run drives real time: it sleeps between progress reports

pub mod bench;
pub mod fabric;
pub mod final_state;
pub mod history;
pub mod nodes;
pub mod processes;
pub mod serve;
pub mod sim;
pub mod sim_figures;

use fabric::{Killable, NetchainRuntime, Running};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use nodes::{ClientHost, ControllerHost, Op, Shared, Workload};
use onepipe_check::{LinearizabilityReport, check_linearizable};
use onepipe_fabric::{Either, Pipeline, Topology, Wiring};
use onepipe_netchain::{Agent, AgentConfig, Event, Key, NetchainSwitch, Ring, SwitchConfig};
use onepipe_runtime::inproc::Clock;
use onepipe_wire::protocol::NETCHAIN;
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

/// The clients' processes are 0..CLIENT_PROCESSES (the servers H0-H3); the controller is the
/// testbed's fifth host.
pub(crate) const CLIENT_PROCESSES: u32 = 4;
pub(crate) const CONTROLLER_PROCESS: u32 = 4;

#[derive(Clone, Debug)]
pub struct NetchainDemoConfig {
    pub keys: usize,
    pub value_bytes: usize,
    pub write_ratio: f64,
    /// Closed-loop clients, spread over the four servers.
    pub clients: u32,
    pub duration: Duration,
    /// Switches per chain (f + 1).
    pub chain_len: usize,
    pub vnodes_per_switch: usize,
    /// A switch that fails this long after the start.
    pub failure: Option<(u16, Duration)>,
    /// How long after a failure the controller learns of it.
    pub detection: Duration,
    pub loss: f64,
    pub seed: u64,
    pub workers: usize,
    pub agent_timeout: Duration,
    /// Attempts recorded for the history, per client process.
    pub record_max: usize,
    pub slots: u32,
    pub runtime: NetchainRuntime,
}

impl Default for NetchainDemoConfig {
    fn default() -> Self {
        NetchainDemoConfig {
            keys: 20_000,
            value_bytes: 64,
            write_ratio: 0.01,
            clients: 64,
            duration: Duration::from_secs(3),
            chain_len: 3,
            vnodes_per_switch: 16,
            failure: None,
            detection: Duration::from_millis(1),
            loss: 0.0,
            seed: 1,
            workers: 2,
            agent_timeout: Duration::from_millis(20),
            record_max: 4_000_000,
            slots: 64 * 1024,
            runtime: NetchainRuntime::Inproc,
        }
    }
}

#[derive(Debug)]
pub struct NetchainReport {
    pub ops: u64,
    pub elapsed: Duration,
    pub read_latency_ns: Histogram<u64>,
    pub write_latency_ns: Histogram<u64>,
    pub unknown: u64,
    pub refused: u64,
    pub retries: u64,
    pub events: Vec<Event>,
    /// When the failed switch failed, on the run's clock.
    pub failed_at: Option<Instant>,
    /// Every recorded attempt, and how many were not recorded.
    pub history: Vec<Op>,
    pub history_unrecorded: u64,
    pub keys: Arc<Vec<Key>>,
    pub switch_counters: Vec<onepipe_netchain::switch::Counters>,
    /// Acknowledged writes the final state does not reflect ([`final_state`]); `None` when the
    /// history was not recorded whole.
    pub acknowledged_writes_lost: Option<u64>,
    /// The linearizability check of the history; `None` when it was not recorded whole.
    pub linearizability: Option<Result<LinearizabilityReport, String>>,
}

impl NetchainReport {
    /// An empty report of a run of `duration`, with what `shared` gathered.
    pub fn new(shared: &Shared, duration: Duration, failed_at: Option<Instant>, keys: Arc<Vec<Key>>) -> Self {
        let histogram = || Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        NetchainReport {
            ops: shared.completed.load(Ordering::Relaxed),
            elapsed: duration,
            read_latency_ns: histogram(),
            write_latency_ns: histogram(),
            unknown: 0,
            refused: 0,
            retries: 0,
            events: shared.events.lock().expect("events").clone(),
            failed_at,
            history: Vec::new(),
            history_unrecorded: 0,
            keys,
            switch_counters: Vec::new(),
            acknowledged_writes_lost: None,
            linearizability: None,
        }
    }

    /// Takes in what a client host measured and recorded.
    pub fn add_client(&mut self, host: ClientHost) {
        self.read_latency_ns
            .add(&host.read_latency_ns)
            .expect("same bounds");
        self.write_latency_ns
            .add(&host.write_latency_ns)
            .expect("same bounds");
        self.unknown += host.unknown;
        self.refused += host.refused;
        self.retries += host.agent.counters().retries;
        self.history_unrecorded += host.ops_unrecorded;
        self.history.extend(host.ops);
    }

    /// Judges the run from outside: the switches' final state against the history (no
    /// acknowledged write lost) and, if asked, the history's linearizability. Only a history
    /// recorded whole is judged.
    pub fn judge(&mut self, ring: &Ring, switches: &[&NetchainSwitch], linearizability: bool) {
        self.switch_counters = switches.iter().map(|p| *p.counters()).collect();
        if self.history_unrecorded > 0 {
            return;
        }
        let finals = final_state::tail_values(ring, switches, &self.keys);
        self.acknowledged_writes_lost = Some(final_state::acknowledged_writes_lost(&self.history, &finals));
        if linearizability {
            let records = history::records(&self.history, &self.keys);
            self.linearizability = Some(check_linearizable(&records).map_err(|e| e.to_string()));
        }
    }

    /// `object` with the checks added, as the `--json` of every NetChain run gives them.
    pub fn with_checks(&self, mut object: serde_json::Value) -> serde_json::Value {
        let checks = serde_json::json!({
            "linearizable": self.linearizability.as_ref().map(|l| l.as_ref().is_ok_and(|l| l.ok())),
            "acknowledged_writes_lost_zero": self.acknowledged_writes_lost.map(|n| n == 0),
        });
        let linearizability = self.linearizability.as_ref().map(|l| match l {
            Ok(l) => serde_json::to_value(l).unwrap_or_default(),
            Err(e) => serde_json::json!({"error": e}),
        });
        if let Some(o) = object.as_object_mut() {
            o.insert("checks".into(), checks);
            o.insert("linearizability".into(), linearizability.into());
        }
        object
    }

    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / (self.elapsed.as_nanos() as f64 / 1e9).max(1e-9)
    }

    /// From the failure to the moment every neighbour skips the failed switch.
    pub fn failover(&self) -> Option<Duration> {
        let failed = self.failed_at?;
        self.events.iter().find_map(|e| match e {
            Event::FailedOver { at, .. } => Some(at.saturating_since(failed)),
            _ => None,
        })
    }

    /// From the failure to the moment every chain has its full length again.
    pub fn recovery(&self) -> Option<Duration> {
        let failed = self.failed_at?;
        self.events.iter().find_map(|e| match e {
            Event::Recovered { at, .. } => Some(at.saturating_since(failed)),
            _ => None,
        })
    }
}

type DemoNode = Either<Killable<Pipeline<NetchainSwitch>>, Either<ControllerHost, ClientHost>>;

/// The nodes, the keys, and each switch's kill switch.
type Built = (Vec<DemoNode>, Arc<Vec<Key>>, Vec<Arc<AtomicBool>>);

/// The keys of a run: `key:NNNNNNNNNNNN`, 16 bytes each.
pub fn demo_keys(count: usize) -> Vec<Key> {
    (0..count)
        .map(|i| Key::new(format!("key:{i:012}").as_bytes()).expect("16 bytes, no trailing zero"))
        .collect()
}

fn build(c: &NetchainDemoConfig, wiring: &Arc<Wiring>, shared: &Arc<Shared>) -> Result<Built, String> {
    let switches: Vec<u16> = (0..wiring.switch_count() as u16).collect();
    let ring = Ring::new(&switches, c.vnodes_per_switch, c.chain_len).map_err(|e| e.to_string())?;
    let keys = Arc::new(demo_keys(c.keys));
    let switch_config = SwitchConfig {
        slots: c.slots,
        controller: Some(CONTROLLER_PROCESS),
        ..SwitchConfig::default()
    };
    let mut nodes: Vec<DemoNode> = Vec::new();
    let mut kills = Vec::new();
    for s in 0..wiring.switch_count() {
        let program = NetchainSwitch::new(s, wiring.clone(), switch_config.clone());
        let (node, kill) = Killable::new(Pipeline::single(NETCHAIN, program).map_err(|e| e.to_string())?);
        nodes.push(Either::Left(node));
        kills.push(kill);
    }
    let workload = Workload {
        keys: keys.clone(),
        write_ratio: c.write_ratio,
        value_bytes: c.value_bytes,
        record_max: c.record_max,
    };
    for p in 0..CLIENT_PROCESSES {
        let clients = c.clients * p / CLIENT_PROCESSES..c.clients * (p + 1) / CLIENT_PROCESSES;
        let agent = Agent::new(
            AgentConfig {
                timeout: c.agent_timeout,
                ..AgentConfig::new(p, CONTROLLER_PROCESS)
            },
            ring.clone(),
        );
        let seed = c.seed ^ (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let host = ClientHost::new(agent, clients, seed, workload.clone(), shared.clone());
        nodes.push(Either::Right(Either::Right(host)));
    }
    let failure = c.failure.map(|(s, _)| (s, c.detection.as_nanos()));
    let host = ControllerHost::for_run(
        CONTROLLER_PROCESS,
        c.seed,
        wiring.clone(),
        ring,
        keys.to_vec(),
        failure,
        shared.clone(),
    );
    nodes.push(Either::Right(Either::Left(host)));
    Ok((nodes, keys, kills))
}

/// Runs the demo on the inproc runtime; `bar` shows the measured window.
pub fn run(c: &NetchainDemoConfig, bar: &ProgressBar) -> Result<NetchainReport, String> {
    validate(c)?;
    let wiring = Arc::new(Wiring::new(Topology::netchain_testbed(), 1).map_err(|e| e.to_string())?);
    let shared = Arc::new(Shared::default());
    let (nodes, keys, kills) = build(c, &wiring, &shared)?;
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let rt = Running::start(c.runtime, &wiring, nodes, c.workers, c.loss, c.seed, clock)?;
    bar.set_message("preloading keys");
    let loaded = wait_until(std::time::Duration::from_secs(60), || {
        shared.ready.load(Ordering::Acquire)
    });
    if !loaded {
        rt.stop();
        return Err("the controller did not install the keys within 60 s".into());
    }
    let start = clock.now() + Duration::from_millis(1);
    let end = start + c.duration;
    shared.start_ns.store(start.as_nanos(), Ordering::Release);
    shared.end_ns.store(end.as_nanos(), Ordering::Release);
    bar.set_message("measuring");
    let mut failed_at = None;
    while clock.now() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let elapsed = clock.now().saturating_since(start).as_nanos();
        bar.set_position((elapsed * 100 / c.duration.as_nanos().max(1)).min(100));
        if let Some((switch, at)) = c.failure
            && failed_at.is_none()
            && clock.now() >= start + at
        {
            kills[switch as usize].store(true, Ordering::Release);
            let now = clock.now();
            shared.failed_at_ns.store(now.as_nanos(), Ordering::Release);
            failed_at = Some(now);
        }
    }
    bar.set_message("draining");
    // Calls in flight at the end finish or time out; a recovery under way finishes.
    let drain = c.agent_timeout.saturating_mul(4) + Duration::from_millis(50);
    std::thread::sleep(std::time::Duration::from_nanos(drain.as_nanos()));
    if failed_at.is_some() {
        wait_until(std::time::Duration::from_secs(30), || {
            shared
                .events
                .lock()
                .expect("events")
                .iter()
                .any(|e| matches!(e, Event::Recovered { .. }))
        });
    }
    let nodes = rt.stop();
    Ok(report(nodes, &shared, c, failed_at, keys))
}

fn validate(c: &NetchainDemoConfig) -> Result<(), String> {
    if c.clients == 0 {
        return Err("at least one client".into());
    }
    if c.keys == 0 || c.keys > c.slots as usize {
        return Err(format!("1 to {} keys (the switches' slots)", c.slots));
    }
    if let Some((s, _)) = c.failure
        && !(1..=3).contains(&s)
    {
        return Err("the failed switch is 1, 2 or 3 (s0 connects every server)".into());
    }
    Ok(())
}

fn wait_until(limit: std::time::Duration, done: impl Fn() -> bool) -> bool {
    let began = std::time::Instant::now();
    while !done() {
        if began.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

fn report(
    nodes: Vec<DemoNode>,
    shared: &Shared,
    c: &NetchainDemoConfig,
    failed_at: Option<Instant>,
    keys: Arc<Vec<Key>>,
) -> NetchainReport {
    let mut r = NetchainReport::new(shared, c.duration, failed_at, keys);
    let mut switches = Vec::new();
    let mut ring = None;
    for node in nodes {
        match node {
            Either::Left(switch) => switches.push(switch),
            Either::Right(Either::Right(host)) => r.add_client(host),
            Either::Right(Either::Left(host)) => ring = Some(host.controller.ring().clone()),
        }
    }
    let programs: Vec<&NetchainSwitch> = switches
        .iter()
        .map(|s| s.inner.programs().next().expect("one program").1)
        .collect();
    r.judge(&ring.expect("a controller"), &programs, true);
    r
}
