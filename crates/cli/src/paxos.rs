//! `onepipe paxos ...`: in-network Paxos (thesis 004, chapters 5 and 6): the coordinator and the
//! acceptors in the switches, a replicated key-value store on the learners, next to the same
//! Paxos with its roles on hosts.

use crate::flags::{JsonFlag, SeedFlag};
use clap::{Args, Subcommand};
use onepipe_bench::paxos::replica::Decided;
use onepipe_bench::paxos::{Failure, PaxosDemoConfig, PaxosReport};
use onepipe_kv::replicated::SyncMode;
use onepipe_paxos::{Placement, Tuning};
use onepipe_wire::Duration;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum PaxosCommand {
    /// The paxos testbed (a coordinator switch, three acceptor switches, three replicas with
    /// durable stores) under closed-loop clients, then the same with the coordinator and
    /// acceptors as host processes; every decision and operation checked
    Demo(DemoArgs),
    /// Writes from 1 to 64 closed-loop clients against the store with its roles in the
    /// switches and on hosts (udp), then against etcd in the same run (started on loopback if
    /// installed); and the in-network store with 1, 2 and 4 partitions
    Bench(BenchArgs),
    /// A Redis-protocol server (RESP2) over the replicated store: GET, SET [NX|XX], DEL, MGET,
    /// CAS, CASNX, CAD, DBSIZE, every command through the agreed log; over a deployment of its
    /// own in this process, or one `paxos up` started (--topology)
    Serve(crate::paxos_procs::ServeArgs),
    /// Start every switch, the three replicas and the backup coordinator of a topology as
    /// processes of their own over UDP; Ctrl-C stops them
    Up(crate::paxos_procs::UpArgs),
    /// Run one switch or process of a deployment over UDP (what `up` starts)
    Node(crate::paxos_procs::NodeArgs),
    /// Read a key, as a client process of a deployment `up` started
    Get(crate::paxos_procs::CallArgs),
    /// Write a key, as a client process of a deployment `up` started
    Set(crate::paxos_procs::CallArgs),
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Closed-loop clients of each point
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::CLIENTS_MAX))]
    clients: Vec<u32>,
    /// Partitions of the partition points (at the most clients)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4", value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: Vec<u16>,
    /// Length of each point
    #[arg(long, default_value_t = 1.0, value_parser = crate::bounds::seconds())]
    seconds_per_point: f64,
    /// inproc or udp
    #[arg(long, default_value = "udp", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// Do not measure etcd even if it is installed
    #[arg(long)]
    skip_etcd: bool,
    #[command(flatten)]
    json: JsonFlag,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Closed-loop clients (one call outstanding each), spread over the client hosts
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::CLIENTS_MAX))]
    clients: usize,
    /// Client hosts (processes with a proposer each)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=64))]
    client_hosts: usize,
    /// Fraction of calls that are SETs (the others are GETs, also ordered by Paxos)
    #[arg(long, default_value_t = 0.5, value_parser = crate::bounds::probability())]
    write_ratio: f64,
    /// Keys the clients draw from
    #[arg(long, default_value_t = 1000, value_parser = crate::bounds::int::<usize>(1..=1_000_000))]
    keys: usize,
    /// Bytes of every written value
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(1..=160))]
    value_bytes: usize,
    /// Length of each measured run
    #[arg(long, default_value_t = 3.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Partitions: independent Paxos instance spaces, keys hashed to them (Partitioned Paxos)
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: u16,
    /// Fail a role during the run: coordinator@T, acceptor:N@T or replica:N@T (N = 0, 1, 2; T
    /// like 1s or 500ms after the start)
    #[arg(long)]
    fail: Option<String>,
    /// With --fail replica:N@T: the replica restarts from its store this long after it failed
    /// (like 500ms), and catches up from its peers
    #[arg(long)]
    restart_after: Option<String>,
    /// Probability that a frame is lost on any link (inproc runtime)
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Where the roles run: both (in-network, then software), in-network, software
    #[arg(long, default_value = "both", value_parser = ["both", "in-network", "software"])]
    placement: String,
    /// Worker threads (default: 2)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    workers: usize,
    /// inproc (worker threads, frames through rings) or udp (every node its own socket on
    /// loopback)
    #[arg(long, default_value = "inproc", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// fsync each replica's journal before it answers (default: written, not fsynced)
    #[arg(long)]
    sync: bool,
    /// Each replica applies each partition on a worker thread of its own (thesis 6.1; default:
    /// on the replica's node)
    #[arg(long)]
    replica_workers: bool,
    /// Keep the replicas' stores in DIR (default: a temporary directory, removed)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Write every operation to FILE as JSON Lines (client, op, key, value, expect, outcome,
    /// call_ns, return_ns); the software run's to FILE with `-software` before its extension
    #[arg(long)]
    history: Option<PathBuf>,
    /// Write each replica's decided log (`inst,pid,value-hash` per line) to
    /// DIR/<placement>/replica-N.log, for an outside agreement check
    #[arg(long)]
    decisions_dir: Option<PathBuf>,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    json: JsonFlag,
}

pub fn run(cmd: PaxosCommand) -> Result<ExitCode, String> {
    match cmd {
        PaxosCommand::Demo(args) => demo(args),
        PaxosCommand::Bench(args) => bench(args),
        PaxosCommand::Serve(args) => crate::paxos_procs::serve(args),
        PaxosCommand::Up(args) => crate::paxos_procs::up(args),
        PaxosCommand::Node(args) => crate::paxos_procs::node(args),
        PaxosCommand::Get(args) => crate::paxos_procs::call("get", args),
        PaxosCommand::Set(args) => crate::paxos_procs::call("set", args),
    }
}

fn bench(args: BenchArgs) -> Result<ExitCode, String> {
    use onepipe_bench::paxos::bench::{PaxosBenchOptions, bench};
    let options = PaxosBenchOptions {
        clients: args.clients,
        partitions: args.partitions,
        seconds_per_point: args.seconds_per_point,
        runtime: args.runtime.parse()?,
        skip_etcd: args.skip_etcd,
        ..PaxosBenchOptions::default()
    };
    let bar = crate::progress::points(args.json.json);
    let report = bench(&options, &bar)?;
    bar.finish_and_clear();
    if args.json.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<28} {:>7} {:>12} {:>9} {:>9}",
        "system", "clients", "writes/s", "p50 us", "p99 us"
    );
    for r in &report.rows {
        println!(
            "{:<28} {:>7} {:>12.0} {:>9.1} {:>9.1}",
            r.system, r.clients, r.ops_per_s, r.p50_us, r.p99_us
        );
    }
    for (c, x) in &report.in_network_over_software {
        println!("in-network / software at {c} clients: x{x:.2}");
    }
    match &report.etcd_skipped {
        Some(why) => println!("etcd not measured: {why}"),
        None => {
            for (c, x) in &report.in_network_over_etcd {
                println!("in-network / etcd at {c} clients: x{x:.1}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn placements(spec: &str) -> Vec<Placement> {
    match spec {
        "in-network" => vec![Placement::InNetwork],
        "software" => vec![Placement::Software],
        _ => vec![Placement::InNetwork, Placement::Software],
    }
}

fn name(p: Placement) -> &'static str {
    match p {
        Placement::InNetwork => "in-network",
        Placement::Software => "software",
    }
}

fn demo(args: DemoArgs) -> Result<ExitCode, String> {
    let failure: Option<Failure> = args
        .fail
        .as_deref()
        .map(|f| f.parse().map_err(|e| format!("--fail: {e}")))
        .transpose()?;
    let restart_after = args
        .restart_after
        .as_deref()
        .map(|t| onepipe_sim::config::parse_time(t).map_err(|e| format!("--restart-after: {e}")))
        .transpose()?;
    if restart_after.is_some() && !matches!(failure, Some(Failure::Replica(..))) {
        return Err("--restart-after needs --fail replica:N@T".into());
    }
    let base = PaxosDemoConfig {
        runtime: args.runtime.parse()?,
        client_hosts: args.client_hosts,
        clients: args.clients,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        keys: args.keys,
        value_bytes: args.value_bytes,
        write_ratio: args.write_ratio,
        tuning: Tuning {
            partitions: args.partitions,
            ..Tuning::default()
        },
        failure,
        restart_after,
        loss: args.loss,
        seed: args.seed.seed,
        workers: args.workers,
        sync: if args.sync {
            SyncMode::EveryBatch
        } else {
            SyncMode::Buffered
        },
        ..PaxosDemoConfig::default()
    };
    let mut reports = Vec::new();
    for placement in placements(&args.placement) {
        let bar = crate::progress::percent(args.json.json);
        let config = PaxosDemoConfig {
            placement,
            data_dir: args.data_dir.as_ref().map(|d| d.join(name(placement))),
            ..base.clone()
        };
        let report = onepipe_bench::paxos::run(&config, &bar)?;
        bar.finish_and_clear();
        write_outputs(&args, &report)?;
        reports.push(report);
    }
    if args.json.json {
        println!("{}", json(&base, &reports));
    } else {
        print_text(&base, &reports);
    }
    let ok = reports.iter().all(|r| r.checks.ok());
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// FILE, or FILE with `-software` before its extension for the software run.
fn history_path(path: &Path, p: Placement) -> PathBuf {
    if p == Placement::InNetwork {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-software.{}", ext.to_string_lossy()),
        None => format!("{stem}-software"),
    };
    path.with_file_name(name)
}

fn write_outputs(args: &DemoArgs, r: &PaxosReport) -> Result<(), String> {
    fn io(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
        move |e| format!("cannot write {}: {e}", p.display())
    }
    if let Some(path) = &args.history {
        let path = history_path(path, r.placement);
        let file = std::fs::File::create(&path).map_err(io(&path))?;
        let mut out = std::io::BufWriter::new(file);
        for rec in &r.history {
            onepipe_check::write_record(&mut out, rec).map_err(io(&path))?;
        }
        out.flush().map_err(io(&path))?;
    }
    if let Some(dir) = &args.decisions_dir {
        let dir = dir.join(name(r.placement));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for (i, log) in r.decided.iter().enumerate() {
            let path = dir.join(format!("replica-{i}.log"));
            write_decided(&path, log).map_err(io(&path))?;
        }
    }
    Ok(())
}

fn write_decided(path: &Path, log: &[Decided]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for d in log {
        writeln!(out, "{},{},{:016x}", d.inst, d.pid, d.hash)?;
    }
    out.flush()
}

fn json(c: &PaxosDemoConfig, reports: &[PaxosReport]) -> serde_json::Value {
    let of = |p| reports.iter().find(|r| r.placement == p);
    let latency = |r: Option<&PaxosReport>| {
        r.map(|r| serde_json::json!({"p50": r.latency_us(0.5), "p99": r.latency_us(0.99)}))
    };
    let all = |f: fn(&onepipe_bench::paxos::checks::Checks) -> Option<bool>| {
        let v: Vec<Option<bool>> = reports.iter().map(|r| f(&r.checks)).collect();
        if v.contains(&Some(false)) {
            Some(false)
        } else if v.iter().all(Option::is_some) {
            Some(true)
        } else {
            None
        }
    };
    let (net, soft) = (of(Placement::InNetwork), of(Placement::Software));
    serde_json::json!({
        "values_per_s": net.map(PaxosReport::values_per_s),
        "latency_us": latency(net),
        "software_values_per_s": soft.map(PaxosReport::values_per_s),
        "software_latency_us": latency(soft),
        "speedup": net.zip(soft).map(|(n, s)| n.values_per_s() / s.values_per_s().max(1e-9)),
        "checks": {
            "agreement": all(|c| c.agreement),
            "validity": all(|c| c.validity),
            "linearizable": all(|c| c.linearizable),
            "replicas_converged": all(|c| c.converged),
        },
        "runs": reports.iter().map(|r| serde_json::json!({
            "placement": name(r.placement),
            "values_per_s": r.values_per_s(),
            "latency_us": latency(Some(r)),
            "ok": r.ok,
            "unknown": r.unknown,
            "retries": r.retries,
            "failovers": r.failovers,
            "history_ops": r.history.len(),
            "roles": r.roles,
            "checks": r.checks,
        })).collect::<Vec<_>>(),
        "clients": c.clients,
        "write_ratio": c.write_ratio,
        "value_bytes": c.value_bytes,
        "partitions": c.tuning.partitions,
        "runtime": format!("{:?}", c.runtime).to_lowercase(),
    })
}

fn print_text(c: &PaxosDemoConfig, reports: &[PaxosReport]) {
    println!(
        "topology        paxos testbed (ToR, coordinator s1, acceptors s2-s4), 3 replicas, {:?} runtime",
        c.runtime
    );
    println!(
        "workload        {} keys, {}-byte values, {}% SETs, {} closed-loop clients, {} partition(s), {:.2} s",
        c.keys,
        c.value_bytes,
        c.write_ratio * 100.0,
        c.clients,
        c.tuning.partitions,
        c.duration.as_micros_f64() / 1e6
    );
    for r in reports {
        println!(
            "{:<16}{:.0} values/s, latency p50 {:.1} us, p99 {:.1} us ({} unknown, {} retries, {} failovers)",
            name(r.placement),
            r.values_per_s(),
            r.latency_us(0.5),
            r.latency_us(0.99),
            r.unknown,
            r.retries,
            r.failovers
        );
        let x = &r.roles;
        println!(
            "  roles         {} takeovers, {} Phase 1 ranges ({} retried), {} reinits, {} no-ops, {} requests dropped not ready, {} stale 2As, {} out of window, {} queue full",
            x.takeovers,
            x.phase1_ranges,
            x.phase1_retries,
            x.reinits,
            x.noops,
            x.not_ready,
            x.stale_2a,
            x.out_of_window,
            x.queue_full
        );
    }
    if let [net, soft] = reports {
        println!(
            "in-network / software  x{:.2}",
            net.values_per_s() / soft.values_per_s().max(1e-9)
        );
    }
    for r in reports {
        let show = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "not checked",
        };
        println!(
            "checks ({})  agreement {}, validity {}, linearizable {} over {} operations, replicas converged {}, {} instances decided ({} no-ops)",
            name(r.placement),
            show(r.checks.agreement),
            show(r.checks.validity),
            show(r.checks.linearizable),
            r.history.len(),
            show(r.checks.converged),
            r.checks.decided_max,
            r.checks.noops
        );
        if let Some(p) = &r.checks.problem {
            println!("  problem: {p}");
        }
    }
}
