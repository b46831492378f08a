//! `onepipe kv ...`: the sharded, replicated, transactional key-value store on 1Pipe (paper
//! 7.3.1), next to an OCC + two-phase-commit store and a non-transactional one on the same
//! fabric.

use crate::flags::{JsonFlag, SeedFlag};
use clap::{Args, Subcommand};
use onepipe_bench::txkv::workload::{Distribution, WorkloadConfig};
use onepipe_bench::txkv::{KvDemoConfig, KvReport, ReplicaFailure, System};
use onepipe_wire::Duration;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum KvCommand {
    /// The testbed fabric, 4 shards x 3 replicas, closed-loop clients running YCSB-like
    /// transactions under uniform and Zipf keys: 1Pipe, OCC and non-transactional side by side,
    /// every transaction checked for serializability and every replica compared
    Demo(DemoArgs),
    /// A Redis-protocol server (RESP2) over the store: GET, SET, DEL, MGET, MSET, INCRBY (and
    /// INCR, DECR, DECRBY), MULTI/EXEC as one transaction, DBSIZE, SNAPSHOT [DUMP]; over a
    /// deployment of its own in this process (inproc runtime)
    Serve(ServeArgs),
    /// redis-benchmark's SET and GET (pipelining 1 and 16) against `kv serve`'s front and
    /// against a real redis-server on this machine (if installed), side by side
    Bench(BenchArgs),
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Requests per test (redis-benchmark -n)
    #[arg(long, default_value_t = 100_000, value_parser = crate::bounds::int::<u32>(1..=100_000_000))]
    requests: u32,
    /// Connections (redis-benchmark -c)
    #[arg(long, default_value_t = 50, value_parser = crate::bounds::int::<u32>(1..=10_000))]
    connections: u32,
    /// Pipelining depths (redis-benchmark -P)
    #[arg(long, value_delimiter = ',', default_value = "1,16", value_parser = crate::bounds::int::<u32>(1..=1024))]
    pipelines: Vec<u32>,
    /// Do not measure redis-server even if it is installed
    #[arg(long)]
    skip_redis: bool,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    listen: crate::flags::ListenFlags,
    /// Serve over the udp fabric that `onepipe up FILE` runs (a topology file), joining every
    /// process of it from this OS process, instead of a deployment of the server's own (the
    /// testbed on the inproc runtime). Every process after the servers is a front client that
    /// connections share
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// With --topology: what the fabric's participants agree on (as given to `onepipe up`)
    #[command(flatten)]
    fabric: crate::fabric::FabricArgs,
    #[arg(long, default_value_t = 4, value_parser = crate::bounds::int::<u32>(1..=4096))]
    shards: u32,
    #[arg(long, default_value_t = 3, value_parser = crate::bounds::int::<u32>(1..=16))]
    replicas: u32,
    /// Open connections at most
    #[arg(long, default_value_t = 1024, value_parser = crate::bounds::int::<usize>(1..=65_536))]
    connections_max: usize,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// A topology file or preset (docs/topology.md); every process after the servers is a client
    #[arg(long, default_value = "testbed")]
    topology: String,
    #[arg(long, default_value_t = 4, value_parser = crate::bounds::int::<u32>(1..=4096))]
    shards: u32,
    #[arg(long, default_value_t = 3, value_parser = crate::bounds::int::<u32>(1..=16))]
    replicas: u32,
    /// Transactions outstanding per client process (16 saturates the testbed: the runs compare
    /// peak throughputs, as the paper does)
    #[arg(long, default_value_t = 16, value_parser = crate::bounds::int::<usize>(1..=1024))]
    window: usize,
    /// Measured seconds per system and distribution
    #[arg(long, default_value_t = 3.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Systems to run, among 1pipe, occ, non-transactional
    #[arg(long, value_delimiter = ',', default_value = "1pipe,occ,non-transactional", value_parser = ["1pipe", "occ", "non-transactional"])]
    systems: Vec<String>,
    /// Key distributions, among uniform and zipf
    #[arg(long, value_delimiter = ',', default_value = "uniform,zipf", value_parser = ["uniform", "zipf"])]
    distributions: Vec<String>,
    /// Zipf constant of the zipf distribution, below 1
    #[arg(long, default_value_t = 0.99, value_parser = crate::bounds::probability())]
    zipf: f64,
    /// Keys the clients draw from
    #[arg(long, default_value_t = 100_000, value_parser = crate::bounds::int::<u64>(1..=100_000_000))]
    keys: u64,
    /// Keys per transaction
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=64))]
    keys_per_txn: usize,
    /// Share of transactions that only read
    #[arg(long, default_value_t = 0.5, value_parser = crate::bounds::probability())]
    read_only: f64,
    /// Largest value, in bytes (sizes follow Facebook's ETC pool up to it)
    #[arg(long, default_value_t = 1024, value_parser = crate::bounds::int::<usize>(16..=65_536))]
    value_bytes_max: usize,
    /// Crash server N (shard N / replicas, replica N % replicas) T into the 1Pipe runs (like
    /// replica:1@1s)
    #[arg(long)]
    fail: Option<String>,
    /// Write every operation to FILE as JSON Lines (client, op, key, value, expect, outcome,
    /// call_ns, return_ns, txn, ts), every run one after the other, each line with its `system`
    /// and `distribution`
    #[arg(long)]
    history: Option<PathBuf>,
    /// Skip recording and checking the histories (the serializability check is then not run)
    #[arg(long)]
    no_check: bool,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    json: JsonFlag,
}

pub fn run(cmd: KvCommand) -> Result<ExitCode, String> {
    match cmd {
        KvCommand::Demo(args) => demo(args),
        KvCommand::Serve(args) => serve(args),
        KvCommand::Bench(args) => bench(args),
    }
}

fn bench(args: BenchArgs) -> Result<ExitCode, String> {
    use onepipe_bench::txkv::redis_bench::{RedisBenchOptions, run};
    let options = RedisBenchOptions {
        requests: args.requests,
        connections: args.connections,
        pipelines: args.pipelines,
        skip_redis: args.skip_redis,
        ..RedisBenchOptions::default()
    };
    let quiet = args.json.json;
    let report = run(&options, &mut |what| {
        if !quiet {
            eprintln!("== redis-benchmark against {what}");
        }
    })
    .map_err(|e| e.to_string())?;
    if args.json.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<14} {:<5} {:>3} {:>14} {:>9} {:>9}",
        "server", "test", "-P", "requests/s", "p50 ms", "p99 ms"
    );
    for r in &report.rows {
        println!(
            "{:<14} {:<5} {:>3} {:>14.0} {:>9.3} {:>9.3}",
            r.server, r.test, r.pipeline, r.requests_per_s, r.p50_ms, r.p99_ms
        );
    }
    if let Some(why) = &report.redis_skipped {
        println!("redis-server not measured: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    use onepipe_txkv::front::{Cluster, ClusterOptions, TxStore};
    let listener = args.listen.listener()?;
    let (cluster, runtime) = match &args.topology {
        None => {
            let options = ClusterOptions {
                shards: args.shards,
                replicas: args.replicas,
                ..ClusterOptions::default()
            };
            (
                Cluster::start(&options),
                "the testbed on the inproc runtime".to_string(),
            )
        }
        Some(file) => {
            let udp = args
                .fabric
                .options(crate::fabric::load(file).map_err(|e| e.to_string())?)?;
            let joined = Cluster::join(&udp, args.shards, args.replicas, ClusterOptions::default().window);
            (joined, format!("the udp fabric of {}", file.display()))
        }
    };
    let cluster = cluster.map_err(|e| e.to_string())?;
    let fronts = cluster.mailboxes().len();
    let store = TxStore::new(
        cluster.mailboxes(),
        std::time::Duration::from_secs(5),
        vec![
            ("txkv_layout".into(), cluster.layout().to_string()),
            ("txkv_front_clients".into(), fronts.to_string()),
        ],
    );
    let config = onepipe_kv::ServeConfig {
        connections_max: args.connections_max,
        ..onepipe_kv::ServeConfig::default()
    };
    let server =
        onepipe_kv::serve(listener, std::sync::Arc::new(store), config).map_err(|e| e.to_string())?;
    let stop = crate::paxos_procs::stop_on_signal()?;
    println!(
        "kv: serving the Redis protocol on {} ({}, {fronts} front clients, {runtime}); Ctrl-C stops",
        server.local_addr(),
        cluster.layout()
    );
    crate::paxos_procs::wait_for(&stop);
    server.shutdown();
    drop(cluster);
    Ok(ExitCode::SUCCESS)
}

fn system(name: &str) -> System {
    match name {
        "occ" => System::Occ,
        "non-transactional" => System::NonTransactional,
        _ => System::OnePipe,
    }
}

fn demo(args: DemoArgs) -> Result<ExitCode, String> {
    let failure: Option<ReplicaFailure> = args
        .fail
        .as_deref()
        .map(|f| f.parse().map_err(|e| format!("--fail: {e}")))
        .transpose()?;
    let distributions = args
        .distributions
        .iter()
        .map(|d| match d.as_str() {
            "zipf" => Distribution::Zipf(args.zipf),
            _ => Distribution::Uniform,
        })
        .collect();
    let config = KvDemoConfig {
        topology: crate::paxos_procs::topology(&args.topology)?,
        shards: args.shards,
        replicas: args.replicas,
        window: args.window,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        systems: args.systems.iter().map(|s| system(s)).collect(),
        distributions,
        workload: WorkloadConfig {
            keys: args.keys,
            keys_per_txn: args.keys_per_txn,
            read_only_fraction: args.read_only,
            value_bytes_max: args.value_bytes_max,
            ..WorkloadConfig::default()
        },
        failure,
        record_history: !args.no_check || args.history.is_some(),
        seed: args.seed.seed,
        ..KvDemoConfig::default()
    };
    let bar = crate::progress::percent(args.json.json);
    let report = onepipe_bench::txkv::run(&config, &mut |label, fraction| {
        bar.set_message(label.to_string());
        bar.set_position((fraction * 100.0) as u64);
    })
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    if let Some(path) = &args.history {
        write_history(path, &report)?;
    }
    if args.json.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
    } else {
        print_text(&report);
    }
    let ok = report.checks.serializable != Some(false) && report.checks.replicas_agree;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn write_history(path: &Path, report: &KvReport) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for row in &report.rows {
        for record in &row.history {
            let mut line = serde_json::to_value(record).map_err(|e| e.to_string())?;
            line["system"] = row.system.name().into();
            line["distribution"] = row.distribution.into();
            writeln!(out, "{line}").map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    out.flush().map_err(|e| format!("{}: {e}", path.display()))
}

fn print_text(report: &KvReport) {
    println!(
        "{}, {} client processes x {} transactions outstanding, {:.1} s per run",
        report.layout, report.clients, report.window, report.seconds_per_run
    );
    println!(
        "{:<18} {:<8} {:>10} {:>9} {:>9} {:>7} {:>8} {:>13}",
        "system", "keys", "txn/s", "p50 us", "p99 us", "aborts", "retries", "serializable"
    );
    for r in &report.rows {
        let serializable = match r.serializable {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!(
            "{:<18} {:<8} {:>10.0} {:>9.1} {:>9.1} {:>6.1}% {:>8} {:>13}",
            r.system.name(),
            r.distribution,
            r.txn_per_s,
            r.latency_us.p50,
            r.latency_us.p99,
            r.abort_rate * 100.0,
            r.retries,
            serializable
        );
    }
    for dist in ["uniform", "zipf"] {
        let rate = |s: System| {
            report
                .rows
                .iter()
                .find(|r| r.system == s && r.distribution == dist)
                .map(|r| r.txn_per_s)
        };
        if let (Some(p), Some(n)) = (rate(System::OnePipe), rate(System::NonTransactional)) {
            println!("{dist}: 1pipe / non-transactional x{:.2}", p / n.max(1.0));
        }
        if let (Some(p), Some(o)) = (rate(System::OnePipe), rate(System::Occ)) {
            println!("{dist}: 1pipe / occ x{:.2}", p / o.max(1.0));
        }
    }
    for r in &report.rows {
        if let Some(note) = &r.serializability_note {
            println!("{} {}: {note}", r.system.name(), r.distribution);
        }
    }
    let not_committed: i64 = report.rows.iter().map(|r| r.failed + r.unknown).sum();
    println!(
        "checks: serializable {}, replicas agree {}; transactions failed or unknown: {not_committed}",
        match report.checks.serializable {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "not checked",
        },
        if report.checks.replicas_agree { "yes" } else { "NO" },
    );
}
