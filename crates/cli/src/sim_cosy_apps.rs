//! `onepipe sim cosy-detector` and `onepipe sim cosy-storage`: cosy's applications (paper 003,
//! 6.3 and 6.1) in the simulator. docs/cosy-apps.md says what each shows.

use crate::flags::{JsonFlag, SeedFlag};
use clap::Args;
use onepipe_bench::cosy::CosyFabric;
use onepipe_bench::cosy::apps::detector::{self, DetectorConfig, DetectorReport};
use onepipe_bench::cosy::apps::storage::{self, ModeReport, StorageConfig, StorageReport};
use onepipe_wire::Duration;
use std::process::ExitCode;

/// The fabric of a run: the paper's 144 hosts, or the 8-host testbed shape.
fn fabric(name: &str) -> CosyFabric {
    match name {
        "testbed" => CosyFabric::testbed(100_000_000_000),
        _ => CosyFabric::paper(),
    }
}

/// Paper 6.3: a failure detector probing one host every T_P; detection time over crash
/// times spread across a period, and false positives under background load
#[derive(Args, Debug)]
pub struct DetectorArgs {
    /// T_P, in microseconds
    #[arg(long, default_value_t = 100, value_parser = crate::bounds::int::<u64>(1..=100_000))]
    period_us: u64,
    /// Background load of the other hosts (Poisson all-to-all), 0 for none
    #[arg(long, default_value_t = 0.3, value_parser = crate::bounds::float(0.0, 1.0))]
    load: f64,
    /// Runs, their crash times spread evenly over one period (seed, seed + 1, ...)
    #[arg(long, default_value_t = 10, value_parser = crate::bounds::int::<u32>(1..=10_000))]
    runs: u32,
    /// Misses in a row that declare the target crashed
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u32>(1..=100))]
    misses: u32,
    /// paper (144 hosts, section 5.3) or testbed (8 hosts, section 5.2)
    #[arg(long, default_value = "paper", value_parser = ["paper", "testbed"])]
    fabric: String,
    /// K: virtual links per physical link
    #[arg(long, default_value_t = 4, value_parser = crate::bounds::int::<u8>(1..=16))]
    k: u8,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn detector(args: &DetectorArgs) -> Result<ExitCode, String> {
    let period = Duration::from_micros(args.period_us);
    let mut config = DetectorConfig::paper(fabric(&args.fabric), period, args.load, args.seed.seed);
    config.sim.k = args.k;
    config.misses = args.misses;
    let bar = crate::sim::progress_bar(args.output.json);
    bar.set_length(args.runs as u64);
    let report = detector::sweep(&config, args.runs, &mut |r| {
        bar.set_message(format!("seed {}", r.seed));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_detector(&report);
    }
    let ok = report.detection_within_bound && report.answered_while_down == 0 && report.late == 0;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_detector(r: &DetectorReport) {
    println!(
        "failure detector: {} hosts, K = {}, load {}, T_P = {} us, {} miss(es) declare",
        r.hosts, r.k, r.load, r.period_us, r.misses
    );
    println!(
        "delta(0) = {:.2} us; detection bound {} x T_P + delta(0) = {:.2} us{}",
        r.delta_probe_us,
        r.misses,
        r.detection_bound_us,
        r.paper_detection_us
            .map_or(String::new(), |p| format!(" (paper's testbed: ~{p} us)"))
    );
    let d = &r.detection_us;
    println!(
        "detected {}/{}: detection median {:.2} us, max {:.2} us, within the bound: {}",
        r.detected, r.runs, d.p50, d.max, r.detection_within_bound
    );
    println!(
        "probes {}, missed while up {} {:?} ({} false declarations), answered while down {}, past the bound {}, revival max {}",
        r.probes,
        r.false_positives,
        r.false_positive_causes,
        r.false_declarations,
        r.answered_while_down,
        r.late,
        r.revival_us_max.map_or("-".into(), |v| format!("{v:.2} us"))
    );
}

/// Paper 6.1: a storage client polling for its replies vs sleeping until their bound, next
/// to a CPU-bound job on the same core
#[derive(Args, Debug)]
pub struct StorageArgs {
    /// Background load of the other hosts (Poisson all-to-all), 0 for none
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, 1.0))]
    load: f64,
    /// The client's window, in microseconds of virtual time
    #[arg(long, default_value_t = 10_000, value_parser = crate::bounds::int::<u64>(100..=10_000_000))]
    window_us: u64,
    /// Reads outstanding (the paper's I/O depth)
    #[arg(long, default_value_t = 8, value_parser = crate::bounds::int::<usize>(1..=256))]
    depth: usize,
    /// The server's time per read
    #[arg(long, default_value = "2us", value_parser = crate::sim::time)]
    service: Duration,
    /// LS's CPU time per read (submit it, take its reply), charged in wakeup mode
    #[arg(long, default_value = "500ns", value_parser = crate::sim::time)]
    issue_cost: Duration,
    /// LS's CPU time per wakeup (switching in and out)
    #[arg(long, default_value = "2us", value_parser = crate::sim::time)]
    wakeup_cost: Duration,
    /// A turn of LS or TB on the core they share fairly (polling-shared)
    #[arg(long, default_value = "750us", value_parser = crate::sim::time)]
    slice: Duration,
    /// K: virtual links per physical link
    #[arg(long, default_value_t = 8, value_parser = crate::bounds::int::<u8>(1..=16))]
    k: u8,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn storage(args: &StorageArgs) -> Result<ExitCode, String> {
    let mut config = StorageConfig::paper(args.load, args.seed.seed);
    config.sim.k = args.k;
    config.sim.duration = Duration::from_micros(args.window_us);
    config.params.depth = args.depth;
    config.params.service = args.service;
    config.params.issue_cost = args.issue_cost;
    config.params.wakeup_cost = args.wakeup_cost;
    config.params.slice = args.slice;
    let report = storage::run(&config)?;
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_storage(&report);
    }
    let ok = [
        &report.polling,
        &report.polling_shared,
        &report.wakeup,
        &report.wakeup_delivery,
    ]
    .iter()
    .all(|m| m.seen_before_reply == 0);
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_storage(r: &StorageReport) {
    println!(
        "storage: {} hosts, K = {}, load {}, depth {}, {} B reads of {} B, service {} us, turns of {} us",
        r.hosts, r.k, r.load, r.depth, r.request_bytes, r.reply_bytes, r.service_us, r.slice_us
    );
    println!(
        "bound of a read: delta(request) {:.2} + service {:.2} + delta(reply) {:.2} = {:.2} us",
        r.delta_request_us, r.service_us, r.delta_reply_us, r.wakeup_bound_us
    );
    println!(
        "wakeup on the deliveries' bound instead: {:.2} us",
        r.wakeup_delivery_bound_us
    );
    println!(
        "{:<15} {:>7} {:>9} {:>9} {:>9} {:>11} {:>9} {:>8} {:>13}",
        "mode", "reads", "p50 us", "p99 us", "p99.9 us", "reply p99.9", "LS cpu", "TB cpu", "TB units/s"
    );
    for m in [&r.polling, &r.polling_shared, &r.wakeup, &r.wakeup_delivery] {
        print_mode(m);
    }
}

fn print_mode(m: &ModeReport) {
    println!(
        "{:<15} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>11.2} {:>9.3} {:>8.3} {:>13.0}",
        m.mode.name(),
        m.reads,
        m.latency_us.p50,
        m.latency_us.p99,
        m.latency_us.p999,
        m.reply_latency_us.p999,
        m.ls_cpu_share,
        m.tb_cpu_share,
        m.tb_units_per_s
    );
    if m.retries + m.request_rejects + m.reply_rejects + m.seen_before_reply > 0 {
        println!(
            "                retries {}, request rejects {}, reply rejects {}, seen before reply {}",
            m.retries, m.request_rejects, m.reply_rejects, m.seen_before_reply
        );
    }
}
