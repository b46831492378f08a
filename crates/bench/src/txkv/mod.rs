//! The run behind `onepipe kv demo`: the transactional key-value store of paper 7.3.1 on the
//! testbed fabric (inproc runtime), 1Pipe against the OCC + two-phase-commit baseline and the
//! non-transactional upper bound, under uniform and Zipf keys; every operation optionally
//! recorded for the serializability check; every replica's content compared at the end.

#![allow(clippy::disallowed_methods)] // the run drives real time: it sleeps between progress reports

pub mod redis_bench;
pub mod sim;
pub mod sim_figures;
pub mod workload;

use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use onepipe::Topology;
use onepipe::embed::{EmbedError, EmbedOptions, Embedded};
use onepipe_check::HistoryRecord;
use onepipe_txkv::occ::{OccClient, OccClientConfig, OccServer, OccServerConfig};
use onepipe_txkv::run::{ClientApp, ServerApp, StoreProcess};
use onepipe_txkv::{
    Client, ClientConfig, ClientEngine, Layout, LayoutError, Ordering, Server, ServerConfig, ServerEngine,
};
use onepipe_wire::Duration;
use serde::Serialize;
use workload::{Distribution, Recorder, Workload, WorkloadConfig, Zipf};

/// The systems the demo compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum System {
    #[serde(rename = "1pipe")]
    OnePipe,
    #[serde(rename = "occ")]
    Occ,
    #[serde(rename = "non-transactional")]
    NonTransactional,
}

impl System {
    pub const ALL: [System; 3] = [System::OnePipe, System::Occ, System::NonTransactional];

    pub fn name(self) -> &'static str {
        match self {
            System::OnePipe => "1pipe",
            System::Occ => "occ",
            System::NonTransactional => "non-transactional",
        }
    }

    /// Whether its transactions are meant to be serializable (the checks judge only these).
    pub fn transactional(self) -> bool {
        self != System::NonTransactional
    }
}

/// A replica to crash, and when after its run's window opens (`--fail replica:N@T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaFailure {
    /// Server process: shard `N / replicas`, replica `N % replicas`.
    pub server: u32,
    pub at: Duration,
}

impl std::str::FromStr for ReplicaFailure {
    type Err = String;
    fn from_str(s: &str) -> Result<ReplicaFailure, String> {
        let rest = s
            .strip_prefix("replica:")
            .ok_or_else(|| format!("`{s}`: expected replica:N@T (e.g. replica:1@1s)"))?;
        let (n, at) = rest
            .split_once('@')
            .ok_or_else(|| format!("`{s}`: expected replica:N@T (e.g. replica:1@1s)"))?;
        let server = n.parse().map_err(|_| format!("`{n}` is not a server number"))?;
        let at = onepipe_sim::config::parse_time(at)?;
        Ok(ReplicaFailure { server, at })
    }
}

#[derive(Clone, Debug)]
pub struct KvDemoConfig {
    pub topology: Topology,
    pub shards: u32,
    pub replicas: u32,
    /// Closed-loop transactions outstanding per client process.
    pub window: usize,
    pub duration: Duration,
    /// Before the measured window: warm-up, not counted.
    pub warmup: Duration,
    pub systems: Vec<System>,
    pub distributions: Vec<Distribution>,
    pub workload: WorkloadConfig,
    pub failure: Option<ReplicaFailure>,
    pub record_history: bool,
    pub beacon_interval: Duration,
    pub seed: u64,
}

impl Default for KvDemoConfig {
    fn default() -> KvDemoConfig {
        KvDemoConfig {
            topology: Topology::paper_testbed(),
            shards: 4,
            replicas: 3,
            // Enough to saturate the fabric: the paper compares the stores' peak throughputs.
            window: 16,
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(200),
            systems: System::ALL.to_vec(),
            distributions: vec![Distribution::Uniform, Distribution::Zipf(0.99)],
            workload: WorkloadConfig::default(),
            failure: None,
            record_history: true,
            beacon_interval: Duration::from_micros(50),
            seed: 1,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KvDemoError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error(
        "the topology has {processes} processes: {servers} servers ({layout}) and at least one client need more"
    )]
    TooFewProcesses {
        processes: usize,
        servers: u32,
        layout: Layout,
    },
    #[error("--fail names server {server}, but there are {servers} (0..{servers})")]
    NoSuchServer { server: u32, servers: u32 },
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("the Zipf constant must be in [0, 1) (YCSB's is 0.99), not {0}")]
    ZipfConstant(f64),
}

/// Latency percentiles, microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyUs {
    pub p50: f64,
    pub p99: f64,
}

/// One system under one key distribution.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub system: System,
    pub distribution: &'static str,
    pub txn_per_s: f64,
    pub latency_us: LatencyUs,
    /// Aborts per transaction started (OCC; 0 for the others).
    pub abort_rate: f64,
    pub committed: i64,
    pub failed: i64,
    pub unknown: i64,
    /// Replica answers whose checksums disagreed (1Pipe's divergence detection).
    pub checksum_mismatches: u64,
    /// Shards whose replicas ended with different content.
    pub shards_diverged: u32,
    pub retries: u64,
    /// The serializability check of this run's history (transactional systems, with a history).
    pub serializable: Option<bool>,
    /// What the check found or why it could not decide, when it did not pass.
    pub serializability_note: Option<String>,
    #[serde(skip)]
    pub history: Vec<HistoryRecord>,
}

/// What `onepipe kv demo --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct KvReport {
    pub layout: String,
    pub clients: u32,
    pub window: usize,
    pub seconds_per_run: f64,
    pub rows: Vec<Row>,
    pub checks: Checks,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Checks {
    /// Every transactional run's history passed the check (`None`: no history recorded).
    pub serializable: Option<bool>,
    /// In every transactional run, replicas ended equal and no answers' checksums disagreed.
    pub replicas_agree: bool,
}

pub(crate) type Process = StoreProcess<Box<dyn ServerEngine>, Box<dyn ClientEngine>, Workload>;

/// Runs every system under every distribution, one after the other.
pub fn run(config: &KvDemoConfig, progress: &mut dyn FnMut(&str, f64)) -> Result<KvReport, KvDemoError> {
    let layout = Layout::new(config.shards, config.replicas)?;
    let processes = onepipe_fabric::Wiring::new(config.topology.clone(), 1)
        .map_err(|e| KvDemoError::Embed(e.into()))?
        .process_count();
    if processes <= layout.servers() as usize {
        return Err(KvDemoError::TooFewProcesses {
            processes,
            servers: layout.servers(),
            layout,
        });
    }
    if let Some(f) = config.failure
        && f.server >= layout.servers()
    {
        return Err(KvDemoError::NoSuchServer {
            server: f.server,
            servers: layout.servers(),
        });
    }
    if config.duration == Duration::ZERO {
        return Err(KvDemoError::NotPositive("duration"));
    }
    if config.window == 0 {
        return Err(KvDemoError::NotPositive("window"));
    }
    for d in &config.distributions {
        if let Distribution::Zipf(theta) = *d
            && !(0.0..1.0).contains(&theta)
        {
            return Err(KvDemoError::ZipfConstant(theta));
        }
    }
    let mut rows = Vec::new();
    for &distribution in &config.distributions {
        let zipf = match distribution {
            Distribution::Zipf(theta) => Some(Arc::new(Zipf::new(config.workload.keys, theta))),
            Distribution::Uniform => None,
        };
        for &system in &config.systems {
            let label = format!("{} {}", system.name(), distribution.name());
            rows.push(run_one(
                config,
                layout,
                processes,
                system,
                distribution,
                zipf.clone(),
                &mut |f| progress(&label, f),
            )?);
        }
    }
    let transactional: Vec<&Row> = rows.iter().filter(|r| r.system.transactional()).collect();
    let serializable = if config.record_history {
        Some(transactional.iter().all(|r| r.serializable == Some(true)))
    } else {
        None
    };
    let replicas_agree = transactional
        .iter()
        .all(|r| r.checksum_mismatches == 0 && r.shards_diverged == 0);
    Ok(KvReport {
        layout: layout.to_string(),
        clients: processes as u32 - layout.servers(),
        window: config.window,
        seconds_per_run: (config.duration.as_nanos() as f64 / 1e9),
        rows,
        checks: Checks {
            serializable,
            replicas_agree,
        },
    })
}

pub(crate) fn build(
    config: &KvDemoConfig,
    layout: Layout,
    processes: usize,
    system: System,
    distribution: Distribution,
    zipf: Option<Arc<Zipf>>,
    recorder: &Arc<Recorder>,
) -> Vec<Process> {
    let ordering = match system {
        System::OnePipe => Ordering::OnePipe,
        _ => Ordering::Unordered,
    };
    (0..processes as u32)
        .map(|p| match layout.role_of(p) {
            Some((shard, replica)) => {
                let engine: Box<dyn ServerEngine> = match system {
                    System::Occ => occ_server(shard, replica),
                    _ => Box::new(Server::new(ServerConfig::new(
                        shard as u16,
                        replica as u16,
                        ordering,
                    ))),
                };
                StoreProcess::Server(ServerApp::new(engine))
            }
            None => {
                let mut c = ClientConfig::new(p, layout);
                c.window = config.window;
                c.best_effort_only = system == System::NonTransactional;
                let engine: Box<dyn ClientEngine> = match system {
                    System::Occ => occ_client(c),
                    _ => Box::new(Client::new(c)),
                };
                let workload = WorkloadConfig {
                    distribution,
                    seed: config.seed,
                    ..config.workload.clone()
                };
                StoreProcess::Client(ClientApp::new(
                    engine,
                    Workload::new(p, workload, zipf.clone(), recorder.clone()),
                ))
            }
        })
        .collect()
}

fn run_one(
    config: &KvDemoConfig,
    layout: Layout,
    processes: usize,
    system: System,
    distribution: Distribution,
    zipf: Option<Arc<Zipf>>,
    progress: &mut dyn FnMut(f64),
) -> Result<Row, KvDemoError> {
    let recorder = Arc::new(Recorder::new(config.record_history));
    let apps = build(config, layout, processes, system, distribution, zipf, &recorder);
    let options = EmbedOptions {
        topology: config.topology.clone(),
        beacon_interval: config.beacon_interval,
        ordering: system == System::OnePipe,
        controller: true,
        seed: config.seed,
        ..EmbedOptions::default()
    };
    let embedded = Embedded::start(&options, apps)?;
    let start = embedded.now();
    let from = start + config.warmup;
    let until = from + config.duration;
    *recorder.window_ns.lock().expect("window lock") = (from.as_nanos(), until.as_nanos());
    let total_ns = (until - start).as_nanos() as f64;
    let mut failure = config.failure.filter(|_| system == System::OnePipe);
    loop {
        let now = embedded.now();
        if now >= until {
            break;
        }
        if let Some(f) = failure
            && now >= from + f.at
        {
            embedded.crash_process(f.server);
            failure = None;
        }
        progress(((now - start).as_nanos() as f64 / total_ns).min(1.0));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    progress(1.0);
    recorder.stop.store(true, AtomicOrdering::Relaxed);
    // Transactions in flight finish (or give up after their retries) before the stop.
    let drain_until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while recorder.outstanding.load(AtomicOrdering::Relaxed) > 0 && std::time::Instant::now() < drain_until {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let apps = embedded.stop();
    Ok(summarize(config, layout, system, distribution, &recorder, &apps))
}

fn summarize(
    config: &KvDemoConfig,
    layout: Layout,
    system: System,
    distribution: Distribution,
    recorder: &Recorder,
    apps: &[Process],
) -> Row {
    let crashed = config
        .failure
        .filter(|_| system == System::OnePipe)
        .map(|f| f.server);
    let mut shards_diverged = 0;
    for shard in 0..layout.shards {
        let digests: Vec<u64> = layout
            .replicas_of(shard)
            .filter(|&p| Some(p) != crashed)
            .filter_map(|p| apps[p as usize].server().map(|s| s.engine.digest()))
            .collect();
        if digests.windows(2).any(|w| w[0] != w[1]) {
            shards_diverged += 1;
        }
    }
    let (mut checksum_mismatches, mut retries) = (0, 0);
    for c in apps.iter().filter_map(Process::client) {
        let counters = c.engine.counters();
        checksum_mismatches += counters.checksum_mismatches;
        retries += counters.retries;
    }
    if std::env::var_os("TXKV_DEBUG").is_some() {
        for (i, a) in apps.iter().enumerate() {
            match a {
                StoreProcess::Server(s) => eprintln!(
                    "server {i}: keys {} refused {}",
                    s.engine.keys(),
                    s.counters.refused
                ),
                StoreProcess::Client(c) => {
                    eprintln!(
                        "client {i}: {:?} refused {} send failures (nak, gave up, receiver failed, own) {:?}",
                        c.engine.counters(),
                        c.refused,
                        c.send_failures
                    )
                }
            }
        }
    }
    let latency = recorder.latency_ns.lock().expect("latency lock");
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    let committed = recorder.committed.load(AtomicOrdering::Relaxed);
    let aborts = recorder.aborts.load(AtomicOrdering::Relaxed);
    let history = recorder
        .history
        .as_ref()
        .map(|h| h.lock().expect("history lock").take())
        .unwrap_or_default();
    let check = (config.record_history && system.transactional())
        .then(|| onepipe_check::check_serializable(&history));
    let serializable = check.as_ref().map(|c| c.as_ref().is_ok_and(|r| r.ok()));
    let serializability_note = match &check {
        Some(Ok(r)) if !r.ok() => Some(r.to_string()),
        Some(Err(e)) => Some(format!("the history is malformed: {e}")),
        _ => None,
    };
    Row {
        system,
        distribution: distribution.name(),
        txn_per_s: recorder.in_window.load(AtomicOrdering::Relaxed) as f64
            / (config.duration.as_nanos() as f64 / 1e9),
        latency_us: LatencyUs {
            p50: us(0.5),
            p99: us(0.99),
        },
        abort_rate: if committed + aborts > 0 {
            aborts as f64 / (committed + aborts) as f64
        } else {
            0.0
        },
        committed,
        failed: recorder.failed.load(AtomicOrdering::Relaxed),
        unknown: recorder.unknown.load(AtomicOrdering::Relaxed),
        checksum_mismatches,
        shards_diverged,
        retries,
        serializable,
        serializability_note,
        history,
    }
}

fn occ_server(shard: u32, replica: u32) -> Box<dyn ServerEngine> {
    Box::new(OccServer::new(OccServerConfig::new(shard as u16, replica as u16)))
}

/// The OCC client with the 1Pipe client's window and time-outs.
fn occ_client(config: ClientConfig) -> Box<dyn ClientEngine> {
    let mut occ = OccClientConfig::new(config.process, config.layout);
    occ.window = config.window;
    occ.timeout_ns = config.timeout_ns;
    Box::new(OccClient::new(occ))
}
