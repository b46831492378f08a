//! In-network Paxos in the deterministic simulator: the demo's nodes (the `PaxosSwitch` program
//! in a pipeline per switch, client hosts, replicas with their stores, role hosts) on
//! `onepipe_sim::Engine` in virtual time, so that a seed fixes the whole run: loss, duplication
//! and reordering drawn per frame and link, one role stopped at a time (the engine's node fault),
//! and the checks of `onepipe paxos demo` on what the run left.
//!
//! Phases in virtual time: Phase 1 runs in the coordinator at start (`WARMUP`); the measured
//! window follows, in which the clients call and the failure (if any) falls; after it the clients
//! stop calling and the calls in flight finish or give up (`drain`).
//!
//! The cost model (docs/simulator.md, "In-network Paxos"): a switch is busy a tiny time per frame
//! it consumes or originates (line rate); every host has a CPU that is busy a fixed time per frame
//! it receives or sends, and that time depends on what the host runs. The engine's host cost is
//! one nanosecond per unit of work, and each host tells the engine ([`Hints::work_units`]) how
//! many nanoseconds a frame costs it:
//! - a client host or a replica runs the proposer or learner library (DPDK in the thesis):
//!   `library_frame_cost`;
//! - a host running the coordinator or an acceptor in software (libpaxos in the thesis, the
//!   backup coordinator here too): `role_frame_cost`;
//! - a replica with `replica_workers` workers (Partitioned Paxos: one per partition) is one node
//!   here, one learner applying every partition; it is charged `library_frame_cost /
//!   replica_workers` per frame, as if its frames were spread evenly over that many cores. That
//!   is a model of the thesis's replicas, not what `ReplicaHost` does (it has no threads).

use super::nodes::{ClientHost, Shared, Workload};
use super::replica::ReplicaHost;
use super::{Failure, PaxosReport};
use onepipe_check::{HistoryRecord, Outcome};
use onepipe_fabric::{Either, Hints, Node, Pipeline, PortId, Route, Topology, Wiring};
use onepipe_kv::replicated::{ReplicaConfig, SyncMode};
use onepipe_paxos::{Deployment, PaxosSwitch, Placement, Proposer, RoleHost, Tuning};
use onepipe_sim::{Budget, Engine, Fault, FaultTarget, Model, Role, Stats};
use onepipe_wire::paxos::Addr;
use onepipe_wire::protocol::PAXOS;
use onepipe_wire::{Duration, Instant};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Virtual time at which a run starts.
const START: Instant = Instant::from_nanos(1_000_000_000);
/// Frames a switch program or a role host holds per port.
const QUEUE_FRAMES_MAX: usize = 1 << 16;

#[derive(Clone, Debug)]
pub struct PaxosSimConfig {
    pub placement: Placement,
    pub client_hosts: usize,
    /// Closed-loop clients, spread over the client hosts.
    pub clients: usize,
    /// The measured window, in virtual time.
    pub duration: Duration,
    /// Before the window: Phase 1 in the coordinator.
    pub warmup: Duration,
    /// After the window: calls in flight finish or give up.
    pub drain: Duration,
    pub keys: usize,
    pub value_bytes: usize,
    pub write_ratio: f64,
    pub tuning: Tuning,
    /// A role that stops (fail-stop, never back) this long after the window opens.
    pub failure: Option<Failure>,
    /// Per frame and link: lost, arriving twice, held back up to `reorder_delay`.
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub reorder_delay: Duration,
    pub seed: u64,
    /// Every link's rate (the thesis's testbed: 10 Gbit/s).
    pub link_bits_per_s: u64,
    /// Propagation delay between switches, and of a host's link (its NIC included).
    pub link_delay: Duration,
    pub host_link_delay: Duration,
    /// A switch's pipeline delay per frame, and the time it is busy per frame its program
    /// consumes or originates.
    pub switch_delay: Duration,
    pub switch_frame_cost: Duration,
    /// CPU time per frame of a host running the proposer or learner library.
    pub library_frame_cost: Duration,
    /// CPU time per frame of a host running the coordinator or an acceptor in software.
    pub role_frame_cost: Duration,
    /// Workers a replica's CPU time is spread over (see the module's documentation).
    pub replica_workers: u32,
    /// Calls recorded per client host, decided instances per replica.
    pub record_max: usize,
    pub events_max: u64,
}

/// The protocol's timers scaled to the simulated fabric (round trips of tens of microseconds,
/// not the milliseconds of threads on a loaded machine): a coordinator that stops is left after
/// `failover_after` retries of 2 ms.
pub fn sim_tuning(partitions: u16) -> Tuning {
    Tuning {
        partitions,
        retry_timeout: Duration::from_millis(2),
        phase1_timeout: Duration::from_millis(1),
        gap_timeout: Duration::from_micros(500),
        trim_interval: Duration::from_millis(1),
        tries_max: 20,
        ..Tuning::default()
    }
}

impl Default for PaxosSimConfig {
    fn default() -> Self {
        PaxosSimConfig {
            placement: Placement::InNetwork,
            client_hosts: 2,
            clients: 16,
            duration: Duration::from_millis(20),
            warmup: Duration::from_millis(5),
            drain: Duration::from_millis(50),
            keys: 1000,
            value_bytes: 64,
            write_ratio: 0.5,
            tuning: sim_tuning(1),
            failure: None,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(5),
            seed: 1,
            link_bits_per_s: 10_000_000_000,
            link_delay: Duration::from_nanos(200),
            host_link_delay: Duration::from_micros(2),
            switch_delay: Duration::from_nanos(500),
            switch_frame_cost: Duration::from_nanos(10),
            library_frame_cost: Duration::from_nanos(500),
            role_frame_cost: Duration::from_nanos(3_800),
            replica_workers: 1,
            record_max: 4_000_000,
            events_max: 2_000_000_000,
        }
    }
}

/// What a simulated run measured: the demo's report, plus what only the simulator knows.
#[derive(Debug)]
pub struct PaxosSimReport {
    pub report: PaxosReport,
    /// Calls answered per second in the steady part of the window: its last four fifths (the
    /// first is the clients' ramp). Unlike `report.values_per_s()` (calls made in the window
    /// and answered, whenever), it does not count the calls in flight when the window closes,
    /// which inflate a short window's rate by `clients / window`.
    pub steady_values_per_s: f64,
    pub stats: Stats,
}

/// Calls answered `Ok` in the last four fifths of `[start, end)`, per second.
fn steady_rate(history: &[HistoryRecord], start: Instant, end: Instant) -> f64 {
    let from = start.as_nanos() + (end.as_nanos() - start.as_nanos()) / 5;
    let answered = history
        .iter()
        .filter(|h| h.outcome == Outcome::Ok && (from..end.as_nanos()).contains(&h.return_ns))
        .count();
    answered as f64 * 1e9 / (end.as_nanos() - from).max(1) as f64
}

impl PaxosSimReport {
    /// One JSON object, with the demo's fields where they mean the same.
    pub fn json(&self, c: &PaxosSimConfig) -> serde_json::Value {
        let r = &self.report;
        serde_json::json!({
            "seed": c.seed,
            "placement": placement_name(c.placement),
            "virtual_seconds": c.duration.as_nanos() as f64 / 1e9,
            "clients": c.clients,
            "client_hosts": c.client_hosts,
            "partitions": c.tuning.partitions,
            "values_per_s": r.values_per_s(),
            "steady_values_per_s": self.steady_values_per_s,
            "latency_us": {"p50": r.latency_us(0.5), "p99": r.latency_us(0.99)},
            "ok": r.ok,
            "unknown": r.unknown,
            "retries": r.retries,
            "failovers": r.failovers,
            "failed_at_us": r.failed_at.map(|t| t.saturating_since(START).as_micros_f64()),
            "roles": r.roles,
            "checks": r.checks,
            "history_ops": r.history.len(),
            "loss": c.loss,
            "duplicate": c.duplicate,
            "reorder": c.reorder,
            "events": self.stats.events,
            "trace_hash": format!("{:016x}", self.stats.trace_hash),
            "frames_lost": self.stats.dropped_loss,
            "frames_duplicated": self.stats.duplicated,
            "frames_reordered": self.stats.reordered,
        })
    }
}

pub fn placement_name(p: Placement) -> &'static str {
    match p {
        Placement::InNetwork => "in-network",
        Placement::Software => "software",
    }
}

/// What a host runs.
pub enum HostKind {
    Client(ClientHost),
    Replica(ReplicaHost),
    Roles(RoleHost),
}

/// A host and its CPU time per frame, in nanoseconds (the engine's unit of work).
pub struct SimHost {
    pub kind: HostKind,
    frame_cost_ns: u32,
}

impl SimHost {
    fn new(kind: HostKind, cost: Duration) -> SimHost {
        SimHost {
            kind,
            frame_cost_ns: cost.as_nanos().clamp(1, u32::MAX as u64) as u32,
        }
    }

    fn inner(&self) -> &dyn Node {
        match &self.kind {
            HostKind::Client(h) => h,
            HostKind::Replica(h) => h,
            HostKind::Roles(h) => h,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn Node {
        match &mut self.kind {
            HostKind::Client(h) => h,
            HostKind::Replica(h) => h,
            HostKind::Roles(h) => h,
        }
    }
}

impl Node for SimHost {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        self.inner().classify(now, port, frame)
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        self.inner_mut().handle_frame(now, port, frame, route);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.inner_mut().poll_transmit(now, port, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner().poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner_mut().handle_timeout(now);
    }
}

impl Hints for SimHost {
    fn wants_transmit(&self) -> bool {
        self.inner().wants_transmit()
    }
    fn work_units(&self, _frame: &[u8]) -> u32 {
        self.frame_cost_ns
    }
}

pub type SimNode = Either<Pipeline<PaxosSwitch>, SimHost>;

/// The replicas' stores of one run, removed when the run ends. Named by process and a counter
/// (never by time): what the stores hold does not depend on their path.
struct StoreDir(PathBuf);

impl StoreDir {
    fn new() -> Result<StoreDir, String> {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let name = format!("onepipe-paxos-sim-{}-{run}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(StoreDir(path))
    }
}

impl Drop for StoreDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn validate(c: &PaxosSimConfig) -> Result<(), String> {
    if c.clients == 0 || c.client_hosts == 0 || c.client_hosts > 64 {
        return Err("at least one client, and 1 to 64 client hosts".into());
    }
    if c.keys == 0 || c.keys > 1_000_000 {
        return Err("1 to 1000000 keys".into());
    }
    if c.tuning.partitions == 0 || c.tuning.partitions > 64 {
        return Err("1 to 64 partitions".into());
    }
    if c.replica_workers == 0 {
        return Err("a replica has at least one worker".into());
    }
    for p in [c.loss, c.duplicate, c.reorder, c.write_ratio] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("probability {p} is not in [0, 1]"));
        }
    }
    Ok(())
}

/// The engine's node of an address: switches first, then processes.
fn node_of(wiring: &Wiring, a: Addr) -> usize {
    match a {
        Addr::Switch(s) => s as usize,
        Addr::Process(p) => wiring.node_of_process(p),
    }
}

fn failed_node(f: Failure, d: &Deployment, wiring: &Wiring) -> usize {
    match f {
        Failure::Coordinator(_) => node_of(wiring, d.coordinator),
        Failure::Acceptor(i, _) => node_of(wiring, d.acceptors[i]),
        Failure::Replica(i, _) => wiring.node_of_process(d.replicas[i]),
    }
}

fn build(
    c: &PaxosSimConfig,
    d: &Deployment,
    wiring: &Arc<Wiring>,
    shared: &Arc<Shared>,
    dir: &StoreDir,
) -> Result<Vec<(SimNode, Role)>, String> {
    let mut nodes: Vec<(SimNode, Role)> = Vec::new();
    for s in 0..wiring.switch_count() {
        let program = PaxosSwitch::new(
            s,
            wiring.clone(),
            d.roles_at(Addr::Switch(s as u16)),
            QUEUE_FRAMES_MAX,
        );
        let pipeline = Pipeline::single(PAXOS, program).map_err(|e| e.to_string())?;
        nodes.push((Either::Left(pipeline), Role::Switch));
    }
    let workload = Workload {
        keys: c.keys,
        write_ratio: c.write_ratio,
        value_bytes: c.value_bytes,
        partitions: c.tuning.partitions,
        record_max: c.record_max,
    };
    let replica_cost = Duration::from_nanos(c.library_frame_cost.as_nanos() / c.replica_workers as u64);
    for p in 0..wiring.process_count() as u32 {
        let host = if let Some(i) = d.clients.iter().position(|&x| x == p) {
            let n = d.clients.len();
            let clients = c.clients * (i + 1) / n - c.clients * i / n;
            let seed = c.seed ^ (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let proposer = Proposer::new(d.proposer_config(p));
            let host = ClientHost::new(proposer, p, clients, seed, workload.clone(), shared.clone());
            SimHost::new(HostKind::Client(host), c.library_frame_cost)
        } else if let Some(i) = d.replicas.iter().position(|&x| x == p) {
            let config = ReplicaConfig {
                partitions: c.tuning.partitions,
                sync: SyncMode::Buffered,
                ..ReplicaConfig::default()
            };
            let path = dir.0.join(format!("replica-{i}"));
            // Inline: the simulator is one thread, and stays deterministic.
            let host = ReplicaHost::open(&path, config, d.learner_config(i), c.record_max, false)?;
            SimHost::new(HostKind::Replica(host), replica_cost)
        } else {
            let host = RoleHost::new(p, d.roles_at(Addr::Process(p)), QUEUE_FRAMES_MAX);
            SimHost::new(HostKind::Roles(host), c.role_frame_cost)
        };
        nodes.push((Either::Right(host), Role::Host));
    }
    Ok(nodes)
}

fn model(c: &PaxosSimConfig) -> Model {
    Model {
        link_bits_per_s: c.link_bits_per_s,
        fabric_link_bits_per_s: c.link_bits_per_s,
        switch_delay: c.switch_delay,
        switch_frame_cost: c.switch_frame_cost,
        // One unit of work: each host says how many a frame is (`SimHost::work_units`).
        host_frame_cost: Duration::from_nanos(1),
        loss: c.loss,
        duplicate: c.duplicate,
        reorder: c.reorder,
        reorder_delay: c.reorder_delay,
        ..Model::default()
    }
}

/// Runs Paxos in the simulator; the same configuration and seed give the same report and trace.
pub fn run_sim(c: &PaxosSimConfig) -> Result<PaxosSimReport, String> {
    validate(c)?;
    let d = Deployment::testbed(c.placement, c.client_hosts, c.tuning.clone());
    let topology = Topology::paxos_testbed(Deployment::hosts(c.client_hosts));
    let wiring = Arc::new(Wiring::new(topology, 1).map_err(|e| e.to_string())?);
    let start = START + c.warmup;
    let end = start + c.duration;
    let shared = Arc::new(Shared::default());
    shared.start_ns.store(start.as_nanos(), Ordering::Release);
    shared.end_ns.store(end.as_nanos(), Ordering::Release);
    let dir = StoreDir::new()?;
    let nodes = build(c, &d, &wiring, &shared, &dir)?;
    let switches = wiring.switch_count();
    let mut links = wiring.directed_links(c.link_delay);
    for l in &mut links {
        if l.from.0 >= switches || l.to.0 >= switches {
            l.delay = c.host_link_delay;
        }
    }
    let engine = Engine::new(nodes, &links, model(c), c.seed, START).map_err(|e| e.to_string())?;
    let budget = Budget {
        events_max: c.events_max,
        ..Budget::default()
    };
    let mut run = Run {
        engine,
        budget,
        seed: c.seed,
    };
    run.step(start)?;
    // Idle clients call from `poll_transmit`, which the engine asks when a node is kicked.
    for &p in &d.clients {
        run.engine.wake(wiring.node_of_process(p));
    }
    let failed_at = c.failure.map(|f| {
        let at = start + f.at();
        let node = failed_node(f, &d, &wiring) as u32;
        run.engine.schedule_fault(Fault {
            target: FaultTarget::Node(node),
            at,
            heal_at: None,
        });
        at
    });
    run.step(end)?;
    run.step(end + c.drain)?;
    let stats = run.engine.stats().clone();
    let report = collect(c, &d, run.engine.into_nodes(), failed_at);
    Ok(PaxosSimReport {
        steady_values_per_s: steady_rate(&report.history, start, end),
        report,
        stats,
    })
}

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
}

fn collect(
    c: &PaxosSimConfig,
    d: &Deployment,
    nodes: Vec<SimNode>,
    failed_at: Option<Instant>,
) -> PaxosReport {
    let mut r = PaxosReport::new(c.placement, c.duration, failed_at);
    let mut replicas = Vec::new();
    for node in nodes {
        match node {
            Either::Left(switch) => {
                let program = switch.programs().next().expect("one program").1;
                program.invariants();
                r.add_roles(program.roles(), program.counters().queue_full);
            }
            Either::Right(SimHost { kind, .. }) => match kind {
                HostKind::Client(host) => r.add_client(host),
                HostKind::Replica(host) => replicas.push(host),
                HostKind::Roles(host) => r.add_roles(host.roles(), host.counters().queue_full),
            },
        }
    }
    let alive: Vec<bool> = (0..d.replicas.len())
        .map(|i| !matches!(c.failure, Some(Failure::Replica(f, _)) if f == i))
        .collect();
    r.judge(replicas, &alive);
    r
}
