//! `onepipe netchain ...`: NetChain (paper 002), a key-value store chain-replicated in the
//! switches.

use crate::flags::{JsonFlag, SeedFlag};
use clap::{Args, Subcommand};
use onepipe_bench::netchain::{NetchainDemoConfig, NetchainReport, history};
use onepipe_wire::Duration;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum NetchainCommand {
    /// NetChain's testbed (4 switches, chains of 3) with closed-loop clients reading and
    /// writing 20,000 keys, every operation checked for linearizability
    Demo(DemoArgs),
    /// A Redis-protocol server (RESP2) over a NetChain of its own in this process: GET, SET
    /// [NX], DEL, MGET, CAS, CASNX, CAD (docs/redis.md); redis-cli and redis-benchmark work
    /// unchanged. Runs until Ctrl-C
    Serve(ServeArgs),
    /// The same workload against NetChain (over udp) and, in the same run, etcd (started on
    /// loopback if installed): write ratios 0, 1 and 100%, 1 to 64 clients
    Bench(BenchArgs),
    /// Start every switch of a topology and the controller as processes of their own over UDP
    /// (default: the NetChain testbed); Ctrl-C stops them
    Up(crate::netchain_procs::UpArgs),
    /// Run one switch of a topology over UDP (what `up` starts)
    Switch(crate::netchain_procs::SwitchArgs),
    /// Run the controller of a topology over UDP as its last process (what `up` starts)
    Controller(crate::netchain_procs::ControllerArgs),
    /// Read KEY from a NetChain started by `up`
    Get(crate::netchain_procs::CallArgs),
    /// Write KEY VALUE (installing the key through the controller if needed)
    Put(crate::netchain_procs::CallArgs),
    /// Delete KEY
    Del(crate::netchain_procs::CallArgs),
    /// Compare-and-swap: KEY EXPECT NEW
    Cas(crate::netchain_procs::CallArgs),
    /// Acquire the lock KEY for OWNER (compare-and-swap from absent; paper 8.5)
    Lock(crate::netchain_procs::CallArgs),
    /// Release the lock KEY held by OWNER (compare-and-delete)
    Unlock(crate::netchain_procs::CallArgs),
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Closed-loop clients of each point
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::CLIENTS_MAX))]
    clients: Vec<u32>,
    /// Write ratios of each point
    #[arg(long, value_delimiter = ',', default_value = "0,0.01,1", value_parser = crate::bounds::probability())]
    write_ratios: Vec<f64>,
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
pub struct ServeArgs {
    #[command(flatten)]
    listen: crate::flags::ListenFlags,
    /// Worker threads of the fabric (default: 2)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    workers: usize,
    /// inproc or udp (every node of the fabric its own socket on loopback)
    #[arg(long, default_value = "inproc", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// Serve a NetChain that `onepipe netchain up --topology T` started (a file or preset),
    /// instead of one of the server's own
    #[arg(long)]
    topology: Option<String>,
    /// With --topology: the processes of the topology the server joins as, one client agent
    /// each
    #[arg(long, value_delimiter = ',', default_value = "0", value_parser = crate::bounds::int::<u32>(0..=crate::bounds::PROCESSES_MAX))]
    processes: Vec<u32>,
    #[command(flatten)]
    keys: crate::flags::KeyFlags,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Closed-loop clients (one call outstanding each), spread over the four servers
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<u32>(1..=crate::bounds::CLIENTS_MAX))]
    clients: u32,
    /// Fraction of calls that are writes
    #[arg(long, default_value_t = 0.01, value_parser = crate::bounds::probability())]
    write_ratio: f64,
    /// Keys in the store (16 bytes each)
    #[arg(long, default_value_t = 20_000, value_parser = crate::bounds::int::<usize>(1..=65_536))]
    keys: usize,
    /// Bytes of every written value (at most a slot, 128)
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(1..=128))]
    value_bytes: usize,
    /// Length of the measured run
    #[arg(long, default_value_t = 3.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Fail a switch during the run: `switch:N@T` (N = 1, 2 or 3; T like 1s or 500ms after
    /// the start); failover, then recovery
    #[arg(long)]
    fail: Option<String>,
    /// Probability that a frame is lost on any link
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Virtual nodes per switch on the placement ring (virtual groups = 4 x this)
    #[arg(long, default_value_t = 16, value_parser = crate::bounds::int::<usize>(1..=4096))]
    vnodes_per_switch: usize,
    /// Worker threads (default: 2)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    workers: usize,
    /// inproc (worker threads, frames through rings) or udp (every node its own socket on
    /// loopback)
    #[arg(long, default_value = "inproc", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// Write every operation to FILE as JSON Lines (client, op, key, value, expect, outcome,
    /// call_ns, return_ns)
    #[arg(long)]
    history: Option<PathBuf>,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    json: JsonFlag,
}

pub fn run(cmd: NetchainCommand) -> Result<ExitCode, String> {
    match cmd {
        NetchainCommand::Demo(args) => demo(args),
        NetchainCommand::Serve(args) => serve(args),
        NetchainCommand::Bench(args) => bench(args),
        NetchainCommand::Up(args) => crate::netchain_procs::up(args),
        NetchainCommand::Switch(args) => crate::netchain_procs::switch(args),
        NetchainCommand::Controller(args) => crate::netchain_procs::controller(args),
        NetchainCommand::Get(args) => crate::netchain_procs::call("get", args),
        NetchainCommand::Put(args) => crate::netchain_procs::call("put", args),
        NetchainCommand::Del(args) => crate::netchain_procs::call("del", args),
        NetchainCommand::Cas(args) => crate::netchain_procs::call("cas", args),
        NetchainCommand::Lock(args) => crate::netchain_procs::call("lock", args),
        NetchainCommand::Unlock(args) => crate::netchain_procs::call("unlock", args),
    }
}

fn bench(args: BenchArgs) -> Result<ExitCode, String> {
    use onepipe_bench::netchain::bench::{NetchainBenchOptions, run};
    let options = NetchainBenchOptions {
        clients: args.clients,
        write_ratios: args.write_ratios,
        seconds_per_point: args.seconds_per_point,
        runtime: args.runtime.parse()?,
        skip_etcd: args.skip_etcd,
        ..NetchainBenchOptions::default()
    };
    let bar = crate::progress::points(args.json.json);
    let report = run(&options, &bar)?;
    bar.finish_and_clear();
    if args.json.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<9} {:>7} {:>11} {:>12} {:>9} {:>9}",
        "system", "clients", "write_ratio", "ops/s", "p50 us", "p99 us"
    );
    for r in &report.rows {
        println!(
            "{:<9} {:>7} {:>11} {:>12.0} {:>9.1} {:>9.1}",
            r.system, r.clients, r.write_ratio, r.ops_per_s, r.p50_us, r.p99_us
        );
    }
    match &report.etcd_skipped {
        Some(why) => println!("etcd not measured: {why}"),
        None => {
            for (c, w, ratio) in &report.ratios {
                println!("netchain / etcd at {c} clients, write ratio {w}: x{ratio:.1}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = args.listen.listener()?;
    let config = onepipe_bench::netchain::serve::NetchainServeConfig {
        workers: args.workers,
        runtime: args.runtime.parse()?,
        ..Default::default()
    };
    let serving = match &args.topology {
        None => onepipe_bench::netchain::serve::start(&config, listener)?,
        Some(t) => {
            let d = crate::netchain_procs::deployment(t, &args.keys)?;
            onepipe_bench::netchain::serve::start_joined(&d, &args.processes, &config, listener)?
        }
    };
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).map_err(|e| e.to_string())?;
    println!(
        "netchain: serving the Redis protocol on {} ({}); Ctrl-C stops",
        serving.server.local_addr(),
        match &args.topology {
            Some(t) => format!("the NetChain of {t}, as processes {:?}", args.processes),
            None => "a NetChain of its own: 4 switches, chains of 3".into(),
        }
    );
    while !stop.load(Ordering::Relaxed) {
        #[allow(clippy::disallowed_methods)] // the CLI waits for Ctrl-C
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    serving.stop();
    Ok(ExitCode::SUCCESS)
}

/// `switch:N@T`.
pub(crate) fn parse_fail(spec: &str) -> Result<(u16, Duration), String> {
    let (n, at) = crate::flags::parse_fail_spec(spec, "switch")?;
    let n = u16::try_from(n).map_err(|_| format!("--fail `{spec}`: no switch {n}"))?;
    Ok((n, at))
}

fn demo(args: DemoArgs) -> Result<ExitCode, String> {
    let config = NetchainDemoConfig {
        keys: args.keys,
        value_bytes: args.value_bytes,
        write_ratio: args.write_ratio,
        clients: args.clients,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        failure: args.fail.as_deref().map(parse_fail).transpose()?,
        loss: args.loss,
        seed: args.seed.seed,
        workers: args.workers,
        vnodes_per_switch: args.vnodes_per_switch,
        runtime: args.runtime.parse()?,
        ..NetchainDemoConfig::default()
    };
    let bar = crate::progress::percent(args.json.json);
    let report = onepipe_bench::netchain::run(&config, &bar)?;
    bar.finish_and_clear();
    if let Some(path) = &args.history {
        let file =
            std::fs::File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let records = history::records(&report.history, &report.keys);
        history::write(&mut std::io::BufWriter::new(file), &records)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if args.json.json {
        println!("{}", json(&config, &report));
    } else {
        print_text(&config, &report);
    }
    Ok(ExitCode::SUCCESS)
}

fn us(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e3
}

fn json(c: &NetchainDemoConfig, r: &NetchainReport) -> serde_json::Value {
    r.with_checks(serde_json::json!({
        "ops_per_s": r.ops_per_s(),
        "ops": r.ops,
        "read_latency_us": {"p50": us(&r.read_latency_ns, 0.5), "p99": us(&r.read_latency_ns, 0.99)},
        "write_latency_us": {"p50": us(&r.write_latency_ns, 0.5), "p99": us(&r.write_latency_ns, 0.99)},
        "clients": c.clients,
        "write_ratio": c.write_ratio,
        "keys": c.keys,
        "value_bytes": c.value_bytes,
        "unknown": r.unknown,
        "refused": r.refused,
        "retries": r.retries,
        "failover_us": r.failover().map(|d| d.as_micros_f64()),
        "recovery_ms": r.recovery().map(|d| d.as_micros_f64() / 1e3),
        "history_ops": r.history.len(),
        "acknowledged_writes_lost": r.acknowledged_writes_lost,
    }))
}

fn print_text(c: &NetchainDemoConfig, r: &NetchainReport) {
    println!(
        "topology        netchain-testbed (4 switches, chains of {}, {} virtual groups), {:?} runtime",
        c.chain_len,
        4 * c.vnodes_per_switch,
        c.runtime
    );
    println!(
        "workload        {} keys, {}-byte values, {}% writes, {} closed-loop clients, {:.2} s",
        c.keys,
        c.value_bytes,
        c.write_ratio * 100.0,
        c.clients,
        c.duration.as_micros_f64() / 1e6
    );
    println!(
        "throughput      {:.0} ops/s ({} operations)",
        r.ops_per_s(),
        r.ops
    );
    let line = |name: &str, h: &hdrhistogram::Histogram<u64>| {
        if h.is_empty() {
            println!("{name:<16}none");
        } else {
            println!("{name:<16}p50 {:.1} us, p99 {:.1} us", us(h, 0.5), us(h, 0.99));
        }
    };
    line("read latency", &r.read_latency_ns);
    line("write latency", &r.write_latency_ns);
    println!(
        "outcomes        {} unknown (timed out), {} refused, {} retries",
        r.unknown, r.refused, r.retries
    );
    let mut drops = onepipe_netchain::switch::Counters::default();
    for c in &r.switch_counters {
        drops.queue_full += c.queue_full;
        drops.stale_writes += c.stale_writes;
        drops.stopped += c.stopped;
        drops.no_route += c.no_route;
        drops.malformed += c.malformed;
        drops.chain_exhausted += c.chain_exhausted;
        drops.unknown_at_replica += c.unknown_at_replica;
    }
    println!(
        "switch drops    {} queue full, {} stale writes, {} stopped, {} no route, {} chain exhausted, {} unknown at replica, {} malformed",
        drops.queue_full,
        drops.stale_writes,
        drops.stopped,
        drops.no_route,
        drops.chain_exhausted,
        drops.unknown_at_replica,
        drops.malformed
    );
    if let Some(f) = r.failover() {
        let recovery = r.recovery().map_or("not finished".to_string(), |d| {
            format!("{:.1} ms", d.as_micros_f64() / 1e3)
        });
        println!(
            "failure         failover {:.0} us, recovery {recovery}",
            f.as_micros_f64()
        );
    }
    println!("checks          over {} operations", r.history.len());
    match (&r.acknowledged_writes_lost, &r.linearizability) {
        (Some(n), Some(l)) => {
            println!("  acknowledged writes lost  {n}");
            match l {
                Ok(l) => println!(
                    "  linearizable              {} ({} keys; {} not linearizable, {} undecided)",
                    l.verdict, l.keys, l.keys_not_linearizable, l.keys_undecided
                ),
                Err(e) => println!("  linearizable              the history is malformed: {e}"),
            }
            if let Ok(l) = l {
                for v in l.violations.iter().take(3) {
                    println!("    key {}: blocked at {}", v.key, v.blocked);
                }
            }
        }
        _ => println!("  not checked: {} operations not recorded", r.history_unrecorded),
    }
}
