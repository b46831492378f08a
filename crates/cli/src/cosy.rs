//! `onepipe cosy ...`: cosy (paper 003), messages completed within a bound known at
//! submission, through reservations on virtual links.

use crate::flags::{JsonFlag, SeedFlag};
use clap::{Args, Subcommand};
use onepipe_bench::cosy::CosyFabric;
use onepipe_bench::cosy::demo::{Calibration, CosyDemoConfig};
use onepipe_bench::cosy::report::CosyReport;
use onepipe_wire::Duration;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum CosyCommand {
    /// A two-tier leaf-spine (8 hosts), Poisson all-to-all messages of 128 KB at load 0.5,
    /// K = 4, for 3 s: every message flagged within the bound it got at submission, checked
    Demo(DemoArgs),
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Virtual links per link (and slots per host)
    #[arg(long, default_value_t = 4, value_parser = crate::bounds::int::<u8>(1..=16))]
    k: u8,
    /// Offered load: the messages' bytes over the hosts' link bandwidth
    #[arg(long, default_value_t = 0.5, value_parser = crate::bounds::float(0.001, 1.0))]
    load: f64,
    /// Size of every message
    #[arg(long, default_value_t = 131_072, value_parser = crate::bounds::int::<usize>(1..=1 << 24))]
    message_bytes: usize,
    /// Length of the workload (after a calibration of 0.3 s)
    #[arg(long, default_value_t = 3.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// The emulated rate of every link, in Mbit/s: low, so that this machine's scheduling
    /// jitter is small against the bound's terms
    #[arg(long, default_value_t = 20, value_parser = crate::bounds::int::<u64>(1..=100_000))]
    link_mbps: u64,
    /// How long a receiver holds a request for a free slot (delta^E), in us (default: one hRTT)
    #[arg(long, value_parser = crate::bounds::int::<u64>(0..=10_000_000))]
    hold_us: Option<u64>,
    /// Crash a host during the workload: host:N@T (T like 1s or 500ms after it starts)
    #[arg(long)]
    fail: Option<String>,
    /// inproc (worker threads, links emulated at --link-mbps) or udp (every node its own
    /// socket on loopback; hosts pace at --link-mbps, switches forward as datagrams come)
    #[arg(long, default_value = "inproc", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// Threads of the runtime
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    threads: usize,
    /// Write one line per message to FILE (CSV: msg_id,src,dst,bytes,submit_ns,flag,flag_ns;
    /// times on the sender's clock), checkable with docs/logs.md's cosy checks
    #[arg(long)]
    log: Option<PathBuf>,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    json: JsonFlag,
}

pub fn run(cmd: CosyCommand) -> Result<ExitCode, String> {
    match cmd {
        CosyCommand::Demo(args) => demo(args),
    }
}

fn demo(args: DemoArgs) -> Result<ExitCode, String> {
    let config = CosyDemoConfig {
        fabric: CosyFabric::testbed(args.link_mbps * 1_000_000),
        k: args.k,
        load: args.load,
        message_bytes: args.message_bytes,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        hold: args.hold_us.map(Duration::from_micros),
        fail: args
            .fail
            .as_deref()
            .map(|f| crate::flags::parse_fail_spec(f, "host"))
            .transpose()?,
        runtime: args.runtime.parse()?,
        threads: args.threads,
        seed: args.seed.seed,
        ..CosyDemoConfig::default()
    };
    let bar = crate::progress::points(args.json.json);
    let (report, calibration) = onepipe_bench::cosy::demo::run(&config, &bar)?;
    bar.finish_and_clear();
    if let Some(path) = &args.log {
        write_log(path, &report)?;
    }
    if args.json.json {
        println!("{}", json(&report, &calibration));
    } else {
        print_text(&report, &calibration);
    }
    let held =
        report.checks.bound_held && report.checks.link_capacity && report.checks.queue_bound != Some(false);
    Ok(if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn write_log(path: &PathBuf, r: &CosyReport) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(fail)?;
    let mut w = std::io::BufWriter::new(file);
    onepipe_check::cosy::write_header(&mut w).map_err(fail)?;
    for record in &r.records {
        onepipe_check::cosy::write_record(&mut w, record).map_err(fail)?;
    }
    w.flush().map_err(fail)
}

fn json(r: &CosyReport, calibration: &Calibration) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("a report serializes");
    v["calibration"] = serde_json::to_value(calibration).expect("serializes");
    v
}

fn print_text(r: &CosyReport, cal: &Calibration) {
    println!(
        "fabric          leaf-spine, {} hosts, {} Gbit/s links, {} runtime",
        r.hosts, r.link_gbps, r.runtime
    );
    println!(
        "calibration     {} round trips to the rsvp: min {:.1}, median {:.1}, max {:.1} us; hRTT {:.1} us, processing {:.1} us",
        cal.samples, cal.rtt_min_us, cal.rtt_p50_us, cal.rtt_max_us, cal.hrtt_us, cal.processing_us
    );
    println!(
        "bound           delta {:.1} us for {} B messages at K = {} (Theorem 3.5's delta_cosy: {:.1} us)",
        r.delta_us, r.message_bytes, r.k, r.theorem_delta_cosy_us
    );
    println!(
        "messages        {} submitted at load {}: {} completed, {} rejected, {} failed ({} by the sender's own deadline)",
        r.submitted, r.load, r.completed, r.rejected, r.failed, r.timed_out
    );
    println!(
        "completion      largest {:.3} of delta; slowdown p50 {:.2}, p99 {:.2}, max {:.2}",
        r.max_completion_over_delta, r.slowdown.p50, r.slowdown.p99, r.slowdown.max
    );
    let verdict = |b: bool| if b { "held" } else { "BROKEN" };
    println!(
        "checks          bound {}, link capacity {}, queue bound {}",
        verdict(r.checks.bound_held),
        verdict(r.checks.link_capacity),
        match r.checks.queue_bound {
            Some(b) => verdict(b),
            None => "not measured (udp)",
        }
    );
}
