//! The run behind `onepipe paxos demo`: the paxos testbed (a ToR, a coordinator switch, three
//! acceptor switches), three replicas applying the agreed log to their durable stores, closed-
//! loop clients sending SETs and GETs through the proposer library; then the same with the
//! coordinator and acceptors as host processes (the software baseline). Optionally a
//! coordinator, an acceptor or a replica fails in the middle. Every call is recorded for the
//! linearizability check; every replica's decided log for the agreement check.

#![allow(clippy::disallowed_methods)] // the run drives real time: it sleeps between progress reports

pub mod bench;
pub mod checks;
pub mod nodes;
pub mod processes;
pub mod replica;
pub mod serve;
pub mod sim;
pub mod sim_campaign;
pub mod sim_figures;
pub mod workers;

use crate::netchain::fabric::{Killable, NetchainRuntime, Running};
use checks::Checks;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use nodes::{ClientHost, Shared, Workload};
use onepipe_check::HistoryRecord;
use onepipe_fabric::{Either, Pipeline, Topology, Wiring};
use onepipe_kv::replicated::{ReplicaConfig, SyncMode};
use onepipe_paxos::deployment::ACCEPTOR_SWITCHES;
use onepipe_paxos::{Deployment, PaxosSwitch, Placement, Proposer, RoleHost, Tuning};
use onepipe_runtime::inproc::Clock;
use onepipe_wire::paxos::Addr;
use onepipe_wire::protocol::PAXOS;
use onepipe_wire::{Duration, Instant};
use replica::{Decided, ReplicaHost};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What fails, and when after the measured window starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Coordinator(Duration),
    /// Acceptor 0, 1 or 2.
    Acceptor(usize, Duration),
    /// Replica 0, 1 or 2.
    Replica(usize, Duration),
}

impl std::str::FromStr for Failure {
    type Err = String;
    /// `coordinator@T`, `acceptor:N@T`, `replica:N@T`; T with its unit (`500ms`, `1s`).
    fn from_str(s: &str) -> Result<Failure, String> {
        let (what, at) = s
            .split_once('@')
            .ok_or_else(|| format!("`{s}`: expected coordinator@T, acceptor:N@T or replica:N@T"))?;
        let at = onepipe_sim::config::parse_time(at)?;
        let index = |n: &str| -> Result<usize, String> {
            n.parse::<usize>()
                .ok()
                .filter(|&i| i < 3)
                .ok_or_else(|| format!("`{n}`: expected 0, 1 or 2"))
        };
        match what.split_once(':') {
            None if what == "coordinator" => Ok(Failure::Coordinator(at)),
            Some(("acceptor", n)) => Ok(Failure::Acceptor(index(n)?, at)),
            Some(("replica", n)) => Ok(Failure::Replica(index(n)?, at)),
            _ => Err(format!("`{what}`: expected coordinator, acceptor:N or replica:N")),
        }
    }
}

impl Failure {
    /// How long after the measured window opens the role fails.
    pub fn at(self) -> Duration {
        match self {
            Failure::Coordinator(t) | Failure::Acceptor(_, t) | Failure::Replica(_, t) => t,
        }
    }
}

#[derive(Clone, Debug)]
pub struct PaxosDemoConfig {
    pub placement: Placement,
    pub runtime: NetchainRuntime,
    pub client_hosts: usize,
    /// Closed-loop clients, spread over the client hosts.
    pub clients: usize,
    pub duration: Duration,
    pub keys: usize,
    pub value_bytes: usize,
    pub write_ratio: f64,
    pub tuning: Tuning,
    pub failure: Option<Failure>,
    /// A failed replica restarts from its store this long after it failed.
    pub restart_after: Option<Duration>,
    pub loss: f64,
    pub seed: u64,
    pub workers: usize,
    /// Where the replicas keep their stores; a fresh temporary directory if `None` (removed
    /// after the run).
    pub data_dir: Option<PathBuf>,
    pub sync: SyncMode,
    /// Each replica applies each partition on a worker thread of its own (thesis 6.1); else on
    /// the replica's node (the default: on this 2-core machine the extra threads cost more than
    /// they give, docs/performance.md).
    pub replica_workers: bool,
    /// Calls recorded per client host, decided instances per replica.
    pub record_max: usize,
}

impl Default for PaxosDemoConfig {
    fn default() -> Self {
        PaxosDemoConfig {
            placement: Placement::InNetwork,
            runtime: NetchainRuntime::Inproc,
            client_hosts: 2,
            clients: 64,
            duration: Duration::from_secs(3),
            keys: 1000,
            value_bytes: 64,
            write_ratio: 0.5,
            tuning: Tuning::default(),
            failure: None,
            restart_after: None,
            loss: 0.0,
            seed: 1,
            workers: 2,
            data_dir: None,
            sync: SyncMode::Buffered,
            replica_workers: false,
            record_max: 4_000_000,
        }
    }
}

#[derive(Debug)]
pub struct PaxosReport {
    pub placement: Placement,
    /// Calls answered in the measured window.
    pub ok: u64,
    pub unknown: u64,
    pub elapsed: Duration,
    pub latency_ns: Histogram<u64>,
    pub retries: u64,
    pub failovers: u64,
    pub history: Vec<HistoryRecord>,
    pub history_unrecorded: u64,
    /// Per replica, its decided log.
    pub decided: Vec<Vec<Decided>>,
    pub checks: Checks,
    pub failed_at: Option<Instant>,
    pub roles: RoleSummary,
    /// Replicas restarted from their stores.
    pub restarts: u64,
}

/// What the coordinators and acceptors counted, summed over every switch and host.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct RoleSummary {
    pub takeovers: u64,
    pub phase1_ranges: u64,
    pub phase1_retries: u64,
    pub reinits: u64,
    pub noops: u64,
    /// Requests a coordinator dropped (no prepared instance, hold full).
    pub not_ready: u64,
    pub stale_2a: u64,
    pub out_of_window: u64,
    pub queue_full: u64,
}

impl RoleSummary {
    fn add(&mut self, roles: &onepipe_paxos::Roles) {
        if let Some(c) = &roles.coordinator {
            let c = c.counters();
            self.takeovers += c.takeovers;
            self.phase1_ranges += c.phase1_ranges;
            self.phase1_retries += c.phase1_retries;
            self.reinits += c.reinits;
            self.noops += c.noops;
            self.not_ready += c.not_ready;
        }
        if let Some(a) = &roles.acceptor {
            self.stale_2a += a.counters().stale_2a;
            self.out_of_window += a.counters().out_of_window;
        }
    }
}

impl PaxosReport {
    /// An empty report of a run of `duration`: the demo and the simulator fill it node by node.
    pub fn new(placement: Placement, duration: Duration, failed_at: Option<Instant>) -> PaxosReport {
        PaxosReport {
            placement,
            ok: 0,
            unknown: 0,
            elapsed: duration,
            latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
            retries: 0,
            failovers: 0,
            history: Vec::new(),
            history_unrecorded: 0,
            decided: Vec::new(),
            checks: Checks::default(),
            failed_at,
            roles: RoleSummary::default(),
            restarts: 0,
        }
    }

    /// Takes in what a client host measured and recorded.
    pub fn add_client(&mut self, host: ClientHost) {
        self.ok += host.ok;
        self.unknown += host.unknown;
        self.latency_ns.add(&host.latency_ns).expect("same bounds");
        self.retries += host.proposer.counters().retries;
        self.failovers += host.proposer.counters().failovers;
        self.history_unrecorded += host.unrecorded;
        self.history.extend(host.history);
    }

    /// Takes in the counters of the roles a switch or a host ran.
    pub fn add_roles(&mut self, roles: &onepipe_paxos::Roles, queue_full: u64) {
        roles.invariants();
        self.roles.add(roles);
        self.roles.queue_full += queue_full;
    }

    /// Judges the run from the history and the replicas (`alive[i]`: replica i was up at the
    /// end), and keeps their decided logs.
    pub fn judge(&mut self, replicas: Vec<ReplicaHost>, alive: &[bool]) {
        self.restarts = replicas.iter().map(|h| h.restarts).sum();
        self.checks = Checks::judge(&self.history, self.history_unrecorded, &replicas, alive);
        self.decided = replicas.into_iter().map(|h| h.decided).collect();
    }

    pub fn values_per_s(&self) -> f64 {
        self.ok as f64 / (self.elapsed.as_nanos() as f64 / 1e9).max(1e-9)
    }

    pub fn latency_us(&self, q: f64) -> f64 {
        self.latency_ns.value_at_quantile(q) as f64 / 1e3
    }
}

type HostNode = Either<ClientHost, Killable<ReplicaHost>>;
type DemoNode = Either<Killable<Pipeline<PaxosSwitch>>, Either<Killable<RoleHost>, HostNode>>;

struct Built {
    nodes: Vec<DemoNode>,
    /// Kill switches of the nodes a failure can name.
    coordinator: Arc<AtomicBool>,
    acceptors: Vec<Arc<AtomicBool>>,
    replicas: Vec<Arc<AtomicBool>>,
    /// Per replica: the flag that makes it restart from its store.
    restarts: Vec<Arc<AtomicBool>>,
}

/// The run's data directory, removed on drop if it was made for the run.
struct DataDir {
    path: PathBuf,
    temporary: bool,
}

impl DataDir {
    fn new(c: &PaxosDemoConfig) -> Result<DataDir, String> {
        let (path, temporary) = match &c.data_dir {
            Some(p) => (p.clone(), false),
            None => {
                let unique = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let name = format!("onepipe-paxos-{}-{unique}", std::process::id());
                (std::env::temp_dir().join(name), true)
            }
        };
        // Fresh acceptors start the log at instance 0, which stores of an earlier run applied.
        processes::check_fresh(&path)?;
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(DataDir { path, temporary })
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn build(
    c: &PaxosDemoConfig,
    d: &Deployment,
    wiring: &Arc<Wiring>,
    shared: &Arc<Shared>,
    data: &DataDir,
) -> Result<Built, String> {
    let mut nodes: Vec<DemoNode> = Vec::new();
    let mut coordinator = None;
    let mut acceptors = vec![None; ACCEPTOR_SWITCHES.len()];
    for s in 0..wiring.switch_count() {
        let addr = Addr::Switch(s as u16);
        let program = PaxosSwitch::new(s, wiring.clone(), d.roles_at(addr), 1 << 16);
        let (node, kill) = Killable::new(Pipeline::single(PAXOS, program).map_err(|e| e.to_string())?);
        note_kill(d, addr, &kill, &mut coordinator, &mut acceptors);
        nodes.push(Either::Left(node));
    }
    let workload = Workload {
        keys: c.keys,
        write_ratio: c.write_ratio,
        value_bytes: c.value_bytes,
        partitions: c.tuning.partitions,
        record_max: c.record_max,
    };
    let mut replicas = Vec::new();
    let mut restarts = Vec::new();
    for p in 0..wiring.process_count() as u32 {
        let addr = Addr::Process(p);
        if let Some(i) = d.clients.iter().position(|&x| x == p) {
            let clients = c.clients * (i + 1) / d.clients.len() - c.clients * i / d.clients.len();
            let seed = c.seed ^ (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let proposer = Proposer::new(d.proposer_config(p));
            let host = ClientHost::new(proposer, p, clients, seed, workload.clone(), shared.clone());
            nodes.push(Either::Right(Either::Right(Either::Left(host))));
        } else if let Some(i) = d.replicas.iter().position(|&x| x == p) {
            let config = ReplicaConfig {
                partitions: c.tuning.partitions,
                sync: c.sync,
                // Peers catch a restarted replica up from this log: a second or more at full
                // speed.
                log_keep_instances: 1 << 20,
                ..ReplicaConfig::default()
            };
            let dir = data.path.join(format!("replica-{i}"));
            let host = ReplicaHost::open(&dir, config, d.learner_config(i), c.record_max, c.replica_workers)?;
            restarts.push(host.restart.clone());
            let (node, kill) = Killable::new(host);
            replicas.push(kill);
            nodes.push(Either::Right(Either::Right(Either::Right(node))));
        } else {
            let (node, kill) = Killable::new(RoleHost::new(p, d.roles_at(addr), 1 << 16));
            note_kill(d, addr, &kill, &mut coordinator, &mut acceptors);
            nodes.push(Either::Right(Either::Left(node)));
        }
    }
    Ok(Built {
        nodes,
        coordinator: coordinator.expect("the deployment has a coordinator"),
        acceptors: acceptors
            .into_iter()
            .map(|a| a.expect("every acceptor placed"))
            .collect(),
        replicas,
        restarts,
    })
}

fn note_kill(
    d: &Deployment,
    addr: Addr,
    kill: &Arc<AtomicBool>,
    coordinator: &mut Option<Arc<AtomicBool>>,
    acceptors: &mut [Option<Arc<AtomicBool>>],
) {
    if addr == d.coordinator {
        *coordinator = Some(kill.clone());
    }
    if let Some(i) = d.acceptors.iter().position(|&a| a == addr) {
        acceptors[i] = Some(kill.clone());
    }
}

/// Runs one placement; `bar` shows the measured window.
pub fn run(c: &PaxosDemoConfig, bar: &ProgressBar) -> Result<PaxosReport, String> {
    validate(c)?;
    let d = Deployment::testbed(c.placement, c.client_hosts, c.tuning.clone());
    let topology = Topology::paxos_testbed(Deployment::hosts(c.client_hosts));
    let wiring = Arc::new(Wiring::new(topology, 1).map_err(|e| e.to_string())?);
    let shared = Arc::new(Shared::default());
    let data = DataDir::new(c)?;
    let built = build(c, &d, &wiring, &shared, &data)?;
    let (kill_coordinator, kill_acceptors, kill_replicas) =
        (built.coordinator, built.acceptors, built.replicas);
    let restart_replicas = built.restarts;
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let rt = Running::start(c.runtime, &wiring, built.nodes, c.workers, c.loss, c.seed, clock)?;
    // Phase 1 at start takes a few round trips; the clients begin after it.
    let start = clock.now() + Duration::from_millis(20);
    let end = start + c.duration;
    shared.start_ns.store(start.as_nanos(), Ordering::Release);
    shared.end_ns.store(end.as_nanos(), Ordering::Release);
    bar.set_message(match c.placement {
        Placement::InNetwork => "in-network",
        Placement::Software => "software",
    });
    let mut failed_at = None;
    while clock.now() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let elapsed = clock.now().saturating_since(start).as_nanos();
        bar.set_position((elapsed * 100 / c.duration.as_nanos().max(1)).min(100));
        if let Some(f) = c.failure
            && failed_at.is_none()
            && clock.now() >= start + f.at()
        {
            let kill = match f {
                Failure::Coordinator(_) => &kill_coordinator,
                Failure::Acceptor(i, _) => &kill_acceptors[i],
                Failure::Replica(i, _) => &kill_replicas[i],
            };
            kill.store(true, Ordering::Release);
            failed_at = Some(clock.now());
        }
        if let (Some(Failure::Replica(i, _)), Some(at), Some(after)) = (c.failure, failed_at, c.restart_after)
            && kill_replicas[i].load(Ordering::Acquire)
            && clock.now() >= at + after
        {
            // Back from its store: the flag first, so that its first call reopens it.
            restart_replicas[i].store(true, Ordering::Release);
            kill_replicas[i].store(false, Ordering::Release);
        }
    }
    // Calls in flight finish (or give up) and the replicas catch up; the learners' timers
    // (holes chased every few ms) and the proposers' retries settle within this.
    let settle = c.tuning.retry_timeout.saturating_mul(4) + Duration::from_millis(200);
    std::thread::sleep(std::time::Duration::from_nanos(settle.as_nanos()));
    let nodes = rt.stop();
    Ok(report(c, nodes, failed_at, &kill_replicas))
}

fn validate(c: &PaxosDemoConfig) -> Result<(), String> {
    if c.clients == 0 || c.client_hosts == 0 {
        return Err("at least one client and one client host".into());
    }
    if c.keys == 0 || c.keys > 1_000_000 {
        return Err("1 to 1000000 keys".into());
    }
    if c.tuning.partitions == 0 || c.tuning.partitions > 64 {
        return Err("1 to 64 partitions".into());
    }
    Ok(())
}

fn report(
    c: &PaxosDemoConfig,
    nodes: Vec<DemoNode>,
    failed_at: Option<Instant>,
    kill_replicas: &[Arc<AtomicBool>],
) -> PaxosReport {
    let mut r = PaxosReport::new(c.placement, c.duration, failed_at);
    let mut replicas = Vec::new();
    for node in nodes {
        match node {
            Either::Right(Either::Right(Either::Left(host))) => r.add_client(host),
            Either::Right(Either::Right(Either::Right(mut host))) => {
                host.inner.stop_workers();
                replicas.push(host.inner);
            }
            Either::Left(switch) => {
                let program = switch.inner.programs().next().expect("one program").1;
                r.add_roles(program.roles(), program.counters().queue_full);
            }
            Either::Right(Either::Left(host)) => {
                r.add_roles(host.inner.roles(), host.inner.counters().queue_full);
            }
        }
    }
    let alive: Vec<bool> = kill_replicas.iter().map(|k| !k.load(Ordering::Acquire)).collect();
    r.judge(replicas, &alive);
    r
}
