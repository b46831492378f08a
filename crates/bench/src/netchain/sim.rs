//! NetChain in the deterministic simulator: the demo's nodes (switch program, controller host,
//! client hosts) on `onepipe_sim::Engine` in virtual time, so that a seed fixes the whole run:
//! link loss and reordering drawn per frame, a switch killed at a time (the engine's node
//! fault), the controller told of it after a detection delay, then failover and recovery.
//!
//! The run has fixed phases in virtual time: the controller preloads the keys; the measured
//! window opens 1 ms after the preload is acknowledged; the failure (if any) falls inside it;
//! after the window, calls in flight finish or time out, and a recovery under way finishes.
//! Every attempt is recorded ([`NetchainReport::history`]) for the linearizability check.

use super::nodes::{ClientHost, ControllerHost, Shared, Workload};
use super::{NetchainReport, demo_keys};
use hdrhistogram::Histogram;
use onepipe_fabric::{Either, Hints, Node, Pipeline, PortId, Route, Topology, Wiring};
use onepipe_netchain::ring::RingError;
use onepipe_netchain::{Agent, AgentConfig, Event, NetchainSwitch, Ring, SwitchConfig};
use onepipe_sim::{Budget, Engine, Fault, FaultTarget, Model, Role, Stats};
use onepipe_wire::netchain::Chain;
use onepipe_wire::protocol::NETCHAIN;
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Virtual time at which a run starts.
const START: Instant = Instant::from_nanos(1_000_000_000);
/// How long the controller may take to preload the keys, in virtual time.
const PRELOAD_MAX: Duration = Duration::from_secs(60);
/// Open-loop calls per client host, at most: host p's calls are history clients
/// `(p + 1) * OPEN_LOOP_CALLS_MAX` and up.
const OPEN_LOOP_CALLS_MAX: u32 = 1 << 24;
/// Open-loop calls one timer firing may issue at most (bounds a step after a long pause).
const OPEN_LOOP_BURST_MAX: u32 = 1024;

/// The fabric of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fabric {
    /// NetChain's testbed (paper 002, Fig. 8): S0..S3, the servers and the controller under S0.
    Testbed,
    /// Every leaf linked to every spine, one host per leaf (the last one the controller's).
    SpineLeaf { spines: usize, leaves: usize },
}

impl Fabric {
    /// `testbed` or `spine-leaf:SPINES,LEAVES`.
    pub fn parse(spec: &str) -> Result<Fabric, String> {
        let bad = || format!("topology `{spec}`: expected testbed or spine-leaf:SPINES,LEAVES");
        if spec == "testbed" || spec == "netchain-testbed" {
            return Ok(Fabric::Testbed);
        }
        let args = spec.strip_prefix("spine-leaf:").ok_or_else(bad)?;
        let (s, l) = args.split_once(',').ok_or_else(bad)?;
        let spines = s.trim().parse().map_err(|_| bad())?;
        let leaves = l.trim().parse().map_err(|_| bad())?;
        if !(1..=256).contains(&spines) || !(2..=256).contains(&leaves) {
            return Err(format!("topology `{spec}`: 1 to 256 spines and 2 to 256 leaves"));
        }
        Ok(Fabric::SpineLeaf { spines, leaves })
    }

    pub fn name(&self) -> String {
        match self {
            Fabric::Testbed => "testbed".into(),
            Fabric::SpineLeaf { spines, leaves } => format!("spine-leaf:{spines},{leaves}"),
        }
    }

    fn topology(&self) -> Result<Topology, String> {
        match *self {
            Fabric::Testbed => Ok(Topology::netchain_testbed()),
            Fabric::SpineLeaf { spines, leaves } => {
                Topology::leaf_spine(leaves, spines, 1).map_err(|e| e.to_string())
            }
        }
    }
}

/// How the clients load the store.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// Closed-loop clients (one call outstanding each), spread over the client hosts.
    Closed { clients: u32 },
    /// Each client host issues calls at this rate whatever the answers (the paper's client,
    /// which sends at line rate); every call is a client of its own in the history.
    Open { calls_per_s_per_host: f64 },
}

#[derive(Clone, Debug)]
pub struct NetchainSimConfig {
    pub fabric: Fabric,
    pub keys: usize,
    pub value_bytes: usize,
    pub write_ratio: f64,
    pub load: Load,
    /// The measured window, in virtual time.
    pub duration: Duration,
    /// Switches per chain (f + 1).
    pub chain_len: usize,
    pub vnodes_per_switch: usize,
    /// Every virtual group on this chain, head first, with this many groups (paper Fig. 10's
    /// chain [S0, S1, S2]); `None`: the consistent-hashing ring.
    pub pinned_chain: Option<(Vec<u16>, usize)>,
    /// A switch that fails this long after the window opens.
    pub failure: Option<(u16, Duration)>,
    /// How long after a failure the controller learns of it.
    pub detection: Duration,
    /// Per frame and link: loss, and being held back up to `reorder_delay` (links stop being
    /// FIFO).
    pub loss: f64,
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Per frame and link: arriving twice.
    pub duplicate: f64,
    pub seed: u64,
    pub agent_timeout: Duration,
    pub attempts_max: u32,
    /// Attempts recorded for the history, per client host.
    pub record_max: usize,
    pub slots: u32,
    /// Propagation delay of a link between switches, and of a host's link (its NIC and stack
    /// included).
    pub link_delay: Duration,
    pub host_link_delay: Duration,
    /// A switch's pipeline delay per frame, and the time it is busy per frame (its rate).
    pub switch_delay: Duration,
    pub switch_frame_cost: Duration,
    /// CPU time of a client host per frame sent or received (the agent's rate).
    pub host_frame_cost: Duration,
    /// CPU time of the controller per frame: what bounds its state copy during recovery.
    pub controller_frame_cost: Duration,
    /// Completions counted per interval of this length (a time series; zero: none).
    pub interval: Duration,
    /// Whether the history is checked for linearizability (`onepipe_check`), key by key.
    pub check_linearizable: bool,
    /// After the window, how long a recovery may still take before the run gives up on it.
    pub recovery_max: Duration,
    pub events_max: u64,
}

impl Default for NetchainSimConfig {
    fn default() -> Self {
        NetchainSimConfig {
            fabric: Fabric::Testbed,
            keys: 20_000,
            value_bytes: 64,
            write_ratio: 0.01,
            load: Load::Closed { clients: 64 },
            duration: Duration::from_millis(10),
            chain_len: 3,
            vnodes_per_switch: 16,
            pinned_chain: None,
            failure: None,
            detection: Duration::from_micros(100),
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(2),
            duplicate: 0.0,
            seed: 1,
            agent_timeout: Duration::from_micros(200),
            attempts_max: 3,
            record_max: 4_000_000,
            slots: 64 * 1024,
            link_delay: Duration::from_nanos(200),
            host_link_delay: Duration::from_micros(2),
            switch_delay: Duration::from_nanos(500),
            switch_frame_cost: Duration::ZERO,
            host_frame_cost: Duration::from_nanos(24),
            controller_frame_cost: Duration::from_nanos(200),
            interval: Duration::ZERO,
            check_linearizable: true,
            recovery_max: Duration::from_secs(30),
            events_max: 2_000_000_000,
        }
    }
}

/// What a simulated run measured: the demo's report, plus what only the simulator knows.
#[derive(Debug)]
pub struct NetchainSimReport {
    pub report: NetchainReport,
    /// Calls completed `Ok` in the window (the throughput the figures plot).
    pub ok_ops: u64,
    /// Per client host, `Ok` completions per `interval` of the window.
    pub ok_per_interval: Vec<Vec<u64>>,
    /// Whether every group of the failed switch was recovered (true without a failure).
    pub recovered: bool,
    pub stats: Stats,
}

impl NetchainSimReport {
    /// The run's verdict: no acknowledged write lost, the history linearizable (when checked
    /// and recorded whole), and the recovery finished.
    pub fn passed(&self) -> bool {
        let r = &self.report;
        let linearizable = r
            .linearizability
            .as_ref()
            .is_none_or(|l| l.as_ref().is_ok_and(|l| l.ok()));
        r.acknowledged_writes_lost.unwrap_or(0) == 0 && linearizable && self.recovered
    }

    pub fn ok_per_s(&self) -> f64 {
        self.ok_ops as f64 / (self.report.elapsed.as_nanos() as f64 / 1e9).max(1e-9)
    }

    /// One JSON object, with the demo's fields where they mean the same.
    pub fn json(&self, c: &NetchainSimConfig) -> serde_json::Value {
        let r = &self.report;
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
        r.with_checks(serde_json::json!({
            "seed": c.seed,
            "topology": c.fabric.name(),
            "virtual_seconds": c.duration.as_nanos() as f64 / 1e9,
            "ops_per_s": r.ops_per_s(),
            "ok_ops_per_s": self.ok_per_s(),
            "read_latency_us": {"p50": us(&r.read_latency_ns, 0.5), "p99": us(&r.read_latency_ns, 0.99)},
            "write_latency_us": {"p50": us(&r.write_latency_ns, 0.5), "p99": us(&r.write_latency_ns, 0.99)},
            "clients": match c.load { Load::Closed { clients } => Some(clients), Load::Open { .. } => None },
            "write_ratio": c.write_ratio,
            "loss": c.loss,
            "reorder": c.reorder,
            "unknown": r.unknown,
            "refused": r.refused,
            "retries": r.retries,
            "failover_us": r.failover().map(|d| d.as_micros_f64()),
            "recovery_ms": r.recovery().map(|d| d.as_nanos() as f64 / 1e6),
            "recovered": self.recovered,
            "acknowledged_writes_lost": r.acknowledged_writes_lost,
            "history_ops": r.history.len(),
            "history_unrecorded": r.history_unrecorded,
            "events": self.stats.events,
            "trace_hash": format!("{:016x}", self.stats.trace_hash),
            "frames_lost": self.stats.dropped_loss,
            "frames_reordered": self.stats.reordered,
        }))
    }
}

/// A client host in the simulator: the demo's, plus an open-loop generator's timer.
pub struct SimClient {
    pub host: ClientHost,
    /// Picoseconds between open-loop calls (0: closed loop), the next one's time (exact, so a
    /// rate that is no whole number of nanoseconds apart holds), and the first history id of
    /// this host's open-loop calls.
    open_interval_ps: u64,
    open_next_ps: u64,
    open_client_first: u32,
}

impl SimClient {
    fn generate(&mut self, now: Instant) {
        let mut issued = 0;
        let now_ps = now.as_nanos().saturating_mul(1000);
        while self.open_next_ps <= now_ps && issued < OPEN_LOOP_BURST_MAX {
            self.host.submit_open(now, self.open_client_first);
            self.open_next_ps += self.open_interval_ps;
            issued += 1;
        }
        if issued == OPEN_LOOP_BURST_MAX {
            self.open_next_ps = now_ps + self.open_interval_ps;
        }
    }
}

impl Node for SimClient {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        self.host.classify(now, port, frame)
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        self.host.handle_frame(now, port, frame, route);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.host.poll_transmit(now, port, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let open = (self.open_interval_ps > 0 && self.open_next_ps != u64::MAX)
            .then(|| Instant::from_nanos(self.open_next_ps.div_ceil(1000)));
        [self.host.poll_timeout(), open].into_iter().flatten().min()
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.open_interval_ps > 0 {
            self.generate(now);
        }
        self.host.handle_timeout(now);
    }
}

impl Hints for SimClient {}

type SimNode = Either<Pipeline<NetchainSwitch>, Either<ControllerHost, SimClient>>;

/// The nodes with their roles, and the keys.
type Built = (Vec<(SimNode, Role)>, Arc<Vec<onepipe_netchain::Key>>);

/// The ring of a run: consistent hashing over every switch, or every group pinned to a chain.
fn ring(c: &NetchainSimConfig, switches: &[u16]) -> Result<Ring, String> {
    let Some((chain, groups)) = &c.pinned_chain else {
        return Ring::new(switches, c.vnodes_per_switch, c.chain_len).map_err(|e| e.to_string());
    };
    if chain.iter().any(|s| !switches.contains(s)) {
        return Err(format!(
            "the pinned chain {chain:?} names a switch the fabric lacks"
        ));
    }
    let chain = Chain::new(chain).ok_or("a pinned chain has 1 to 8 switches")?;
    // A ring of `groups` virtual nodes, whose chains are then all replaced.
    let mut ring = Ring::new(&[chain.as_slice()[0]], *groups, 1).map_err(|e: RingError| e.to_string())?;
    for g in 0..ring.groups() as u16 {
        ring.set_chain(g, chain);
    }
    Ok(ring)
}

fn validate(c: &NetchainSimConfig, wiring: &Wiring) -> Result<(), String> {
    let hosts = wiring.process_count();
    if hosts < 2 {
        return Err("the fabric needs a client host and the controller's".into());
    }
    if c.keys == 0 || c.keys > c.slots as usize {
        return Err(format!("1 to {} keys (the switches' slots)", c.slots));
    }
    match c.load {
        Load::Closed { clients } if (clients as usize) < hosts - 1 => {
            return Err(format!("at least {} clients (one per client host)", hosts - 1));
        }
        Load::Open { calls_per_s_per_host } if !(1.0..=1e9).contains(&calls_per_s_per_host) => {
            return Err("open-loop rate: 1 to 1e9 calls/s per host".into());
        }
        Load::Open { calls_per_s_per_host }
            if calls_per_s_per_host * c.duration.as_nanos() as f64 / 1e9 >= OPEN_LOOP_CALLS_MAX as f64 =>
        {
            return Err(format!(
                "open loop: at most {OPEN_LOOP_CALLS_MAX} calls per host (each is a client of the history)"
            ));
        }
        _ => {}
    }
    if let Some((s, _)) = c.failure {
        let tor_of_a_host = wiring.processes.iter().any(|p| p.tor == s as usize);
        if s as usize >= wiring.switch_count() || tor_of_a_host {
            return Err(format!(
                "switch {s} cannot fail: it does not exist or hosts hang from it (their only link)"
            ));
        }
    }
    Ok(())
}

fn build(c: &NetchainSimConfig, wiring: &Arc<Wiring>, shared: &Arc<Shared>) -> Result<Built, String> {
    let switches: Vec<u16> = (0..wiring.switch_count() as u16).collect();
    let ring = ring(c, &switches)?;
    let keys = Arc::new(demo_keys(c.keys));
    let controller_process = wiring.process_count() as u32 - 1;
    let switch_config = SwitchConfig {
        slots: c.slots,
        controller: Some(controller_process),
        ..SwitchConfig::default()
    };
    let mut nodes: Vec<(SimNode, Role)> = Vec::new();
    for s in 0..wiring.switch_count() {
        let program = NetchainSwitch::new(s, wiring.clone(), switch_config.clone());
        let pipeline = Pipeline::single(NETCHAIN, program).map_err(|e| e.to_string())?;
        nodes.push((Either::Left(pipeline), Role::Switch));
    }
    let workload = Workload {
        keys: keys.clone(),
        write_ratio: c.write_ratio,
        value_bytes: c.value_bytes,
        record_max: c.record_max,
    };
    let client_hosts = controller_process;
    for p in 0..client_hosts {
        let clients = match c.load {
            Load::Closed { clients } => clients * p / client_hosts..clients * (p + 1) / client_hosts,
            Load::Open { .. } => 0..0,
        };
        let agent = Agent::new(
            AgentConfig {
                timeout: c.agent_timeout,
                attempts_max: c.attempts_max,
                ..AgentConfig::new(p, controller_process)
            },
            ring.clone(),
        );
        let seed = c.seed ^ (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut host = ClientHost::new(agent, clients, seed, workload.clone(), shared.clone());
        host.count_per_interval(c.interval.as_nanos());
        let open_interval_ps = match c.load {
            Load::Open { calls_per_s_per_host } => ((1e12 / calls_per_s_per_host) as u64).max(1),
            Load::Closed { .. } => 0,
        };
        let client = SimClient {
            host,
            open_interval_ps,
            open_next_ps: u64::MAX,
            open_client_first: (p + 1) * OPEN_LOOP_CALLS_MAX,
        };
        nodes.push((Either::Right(Either::Right(client)), Role::Host));
    }
    let failure = c.failure.map(|(s, _)| (s, c.detection.as_nanos()));
    let host = ControllerHost::for_run(
        controller_process,
        c.seed,
        wiring.clone(),
        ring,
        keys.to_vec(),
        failure,
        shared.clone(),
    );
    nodes.push((Either::Right(Either::Left(host)), Role::Controller));
    Ok((nodes, keys))
}

fn model(c: &NetchainSimConfig) -> Model {
    Model {
        switch_delay: c.switch_delay,
        switch_frame_cost: c.switch_frame_cost,
        host_frame_cost: c.host_frame_cost,
        controller_frame_cost: c.controller_frame_cost,
        loss: c.loss,
        reorder: c.reorder,
        reorder_delay: c.reorder_delay,
        duplicate: c.duplicate,
        ..Model::default()
    }
}

/// Runs NetChain in the simulator; the same configuration and seed give the same report.
pub fn run_sim(c: &NetchainSimConfig) -> Result<NetchainSimReport, String> {
    let wiring = Arc::new(Wiring::new(c.fabric.topology()?, 1).map_err(|e| e.to_string())?);
    validate(c, &wiring)?;
    let shared = Arc::new(Shared::default());
    let (nodes, keys) = build(c, &wiring, &shared)?;
    let switches = wiring.switch_count();
    let mut links = wiring.directed_links(c.link_delay);
    for l in &mut links {
        if l.from.0 >= switches || l.to.0 >= switches {
            l.delay = c.host_link_delay;
        }
    }
    let engine = Engine::new(nodes, &links, model(c), c.seed, START).map_err(|e| e.to_string())?;
    let mut run = Run {
        engine,
        budget: Budget {
            events_max: c.events_max,
            ..Budget::default()
        },
        seed: c.seed,
    };
    run.preload(&shared)?;
    let (start, end) = run.start_traffic(&shared, switches, c.duration)?;
    let controller = run.engine.node_count() - 1;
    let failed_at = c.failure.map(|(s, after)| {
        let at = start + after;
        run.engine.schedule_fault(Fault {
            target: FaultTarget::Node(s as u32),
            at,
            heal_at: None,
        });
        shared.failed_at_ns.store(at.as_nanos(), Ordering::Release);
        at
    });
    // The controller learns of the failure (ControllerHost reads `failed_at_ns`) when it next
    // runs: it is woken then, whether that falls inside the window or after it.
    let detect_at = failed_at.map(|at| at + c.detection);
    let stops = [
        detect_at.filter(|&t| t < end),
        Some(end),
        detect_at.filter(|&t| t >= end),
    ];
    for until in stops.into_iter().flatten() {
        run.step(until)?;
        if Some(until) == detect_at {
            run.engine.wake(controller);
        }
    }
    // Calls in flight finish or time out; a recovery under way finishes.
    let drain = c.agent_timeout.saturating_mul(c.attempts_max as u64 + 1) + Duration::from_millis(1);
    let drained = run.engine.now().max(end) + drain;
    run.step(drained)?;
    if failed_at.is_some() {
        let limit = run.engine.now() + c.recovery_max;
        while !recovered(&shared) && run.engine.now() < limit {
            let next = run.engine.now() + Duration::from_millis(1);
            run.step(next)?;
        }
    }
    let stats = run.engine.stats().clone();
    let mut r = collect(run.engine.into_nodes(), &shared, c, failed_at, keys);
    r.recovered = failed_at.is_none() || recovered(&shared);
    r.stats = stats;
    Ok(r)
}

fn recovered(shared: &Shared) -> bool {
    shared
        .events
        .lock()
        .expect("events")
        .iter()
        .any(|e| matches!(e, Event::Recovered { .. }))
}

/// The engine of a run, stepped in phases.
struct Run {
    engine: Engine<SimNode>,
    budget: Budget,
    seed: u64,
}

impl Run {
    fn step(&mut self, until: Instant) -> Result<(), String> {
        self.engine
            .run_until(until, &self.budget)
            .map_err(|e| format!("seed={}: {e}", self.seed))
    }

    /// Until the controller's preload is acknowledged, in 1 ms steps.
    fn preload(&mut self, shared: &Shared) -> Result<(), String> {
        while !shared.ready.load(Ordering::Acquire) {
            if self.engine.now() >= START + PRELOAD_MAX {
                return Err("the controller did not install the keys within 60 s of virtual time".into());
            }
            let next = self.engine.now() + Duration::from_millis(1);
            self.step(next)?;
        }
        Ok(())
    }

    /// Opens the measured window 1 ms from now and wakes the client hosts (nodes `switches` up
    /// to the controller, the last) at its start; returns the window.
    fn start_traffic(
        &mut self,
        shared: &Shared,
        switches: usize,
        duration: Duration,
    ) -> Result<(Instant, Instant), String> {
        let start = self.engine.now() + Duration::from_millis(1);
        let end = start + duration;
        // Nothing runs between this step and the wakes: the clients start exactly at `start`.
        self.step(start)?;
        shared.start_ns.store(start.as_nanos(), Ordering::Release);
        shared.end_ns.store(end.as_nanos(), Ordering::Release);
        for n in switches..self.engine.node_count() - 1 {
            if let Either::Right(Either::Right(client)) = self.engine.node_mut(n) {
                client.open_next_ps = start.as_nanos() * 1000;
            }
            self.engine.wake(n);
        }
        Ok((start, end))
    }
}

fn collect(
    nodes: Vec<SimNode>,
    shared: &Shared,
    c: &NetchainSimConfig,
    failed_at: Option<Instant>,
    keys: Arc<Vec<onepipe_netchain::Key>>,
) -> NetchainSimReport {
    let mut report = NetchainReport::new(shared, c.duration, failed_at, keys);
    let (mut ok_ops, mut ok_per_interval) = (0, Vec::new());
    let mut switches = Vec::new();
    let mut ring = None;
    for node in nodes {
        match node {
            Either::Left(switch) => switches.push(switch),
            Either::Right(Either::Right(SimClient { host, .. })) => {
                ok_ops += host.ok;
                ok_per_interval.push(host.ok_per_interval.clone());
                report.add_client(host);
            }
            Either::Right(Either::Left(host)) => ring = Some(host.controller.ring().clone()),
        }
    }
    let programs: Vec<&NetchainSwitch> = switches
        .iter()
        .map(|s| s.programs().next().expect("one program").1)
        .collect();
    for p in &programs {
        p.invariants();
    }
    report.judge(&ring.expect("a controller"), &programs, c.check_linearizable);
    NetchainSimReport {
        report,
        ok_ops,
        ok_per_interval,
        recovered: false,
        stats: Stats::default(),
    }
}
