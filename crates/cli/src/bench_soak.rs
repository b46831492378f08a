//! `onepipe bench soak`: a long open-loop run at a fraction of the measured capacity, checked
//! online ([`onepipe_bench::soak`]), parsed and printed. Progress goes to stderr, one line per
//! sample, so that a half-hour run shows it is alive; the report to stdout.

use crate::flags::{BarrierFlags, JsonFlag, MessageBytesFlag, RuntimeFlags, SeedFlag, TopologyFlags};
use clap::Args;
use onepipe_bench::soak::{Drops, Sample, SoakOptions, SoakReport};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Length of the soak, in minutes (fractions allowed: 0.25 is 15 s)
    #[arg(long, default_value_t = 30.0, value_parser = crate::bounds::float(0.0, 1440.0))]
    minutes: f64,
    /// Fraction of the measured capacity to offer, open loop (Poisson)
    #[arg(long, default_value_t = 0.8, value_parser = crate::bounds::probability())]
    load: f64,
    /// Length of the saturated run that measures capacity first
    #[arg(long, default_value_t = 5.0, value_parser = crate::bounds::seconds())]
    capacity_seconds: f64,
    /// Seconds between samples of memory, deliveries, drops and violations
    #[arg(long, default_value_t = 10.0, value_parser = crate::bounds::seconds())]
    sample_seconds: f64,
    /// Memory is flat when the last sample's resident size is at most (1 + this) times the
    /// first one after warm-up (a fifth of the run, at most a minute). Queues and buffers reach
    /// a new high-water mark after a stall (a thread waiting for a core) and the allocator
    /// keeps it, a few MiB at a time; a leak of one byte per message doubles it in minutes
    #[arg(long, default_value_t = 0.25, value_parser = crate::bounds::float(0.0, 1000.0))]
    flat_tolerance: f64,
    /// Use reliable 1Pipe instead of best effort (then every undelivered message is a violation)
    #[arg(long)]
    reliable: bool,
    #[command(flatten)]
    fabric: TopologyFlags,
    #[command(flatten)]
    msg: MessageBytesFlag,
    #[command(flatten)]
    rt: RuntimeFlags,
    #[command(flatten)]
    barrier: BarrierFlags,
    #[command(flatten)]
    rng: SeedFlag,
    #[command(flatten)]
    out: JsonFlag,
}

pub fn run(args: SoakArgs) -> Result<ExitCode, String> {
    let options = SoakOptions {
        runtime: args.rt.runtime.into(),
        topology: args.fabric.load()?,
        processes_per_host: args.fabric.processes_per_host,
        message_bytes: args.msg.message_bytes,
        reliable: args.reliable,
        load: args.load,
        minutes: args.minutes,
        capacity_seconds: args.capacity_seconds,
        sample_seconds: args.sample_seconds,
        flat_tolerance: args.flat_tolerance,
        seed: args.rng.seed,
        beacon_interval_us: args.barrier.beacon_interval_us,
        promise_lead_us: args.barrier.promise_lead_us,
        datagram_bytes: args.rt.datagram_bytes,
        udp_threads: args.rt.udp_threads,
        udp_window_datagrams: args.rt.udp_window_datagrams,
        insecure_no_auth: args.rt.insecure_no_auth,
    };
    let mut last: Option<(f64, u64)> = None;
    let report = onepipe_bench::soak::run(&options, &mut |phase| eprintln!("soak: {phase}"), &mut |s| {
        eprintln!("{}", progress_line(s, last));
        last = Some((s.seconds, s.delivered));
    })?;
    if args.out.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_report(&report);
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn drops_line(d: &Drops) -> String {
    format!(
        "late {}, incomplete {}, reorder-full {}, NAKs {}, send failures {}, link frames {}, datagrams lost {} / overrun {}, frames for a gone peer {}, undelivered {}",
        d.late,
        d.incomplete,
        d.reorder_full,
        d.naks_sent,
        d.send_failures,
        d.fabric.link_frames,
        d.fabric.lost_datagrams,
        d.fabric.overrun_datagrams,
        d.fabric.peer_gone_frames,
        d.undelivered_messages
    )
}

fn progress_line(s: &Sample, last: Option<(f64, u64)>) -> String {
    let (t0, d0) = last.unwrap_or((0.0, 0));
    let rate = (s.delivered - d0) as f64 / (s.seconds - t0).max(1e-9);
    format!(
        "soak: {:>7.1} s  rss {:.1} MiB  {:.3} M msg/s  {} violations  checker holds {}  drops: {}",
        s.seconds,
        mib(s.rss_bytes),
        rate / 1e6,
        s.violations,
        s.checker_records,
        drops_line(&s.drops)
    )
}

fn print_report(r: &SoakReport) {
    println!(
        "{} ({} processes), {}-byte all-to-all broadcast over {}, {}",
        r.topology, r.processes, r.message_bytes, r.runtime, r.service
    );
    println!(
        "capacity     {:.3} M msg/s saturated over {:.1} s ({} violations)",
        r.capacity.throughput_msgs_per_s / 1e6,
        r.capacity.seconds,
        r.capacity.violations
    );
    println!(
        "offered      {:.0}% = {:.3} M msg/s ({:.1} broadcasts/s per process) for {:.1} s",
        100.0 * r.load,
        r.offered_msgs_per_s / 1e6,
        r.offered_rate_per_process,
        r.seconds
    );
    println!(
        "delivered    {} messages, {:.3} M msg/s (median of samples {:.3}); latency p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        r.delivered,
        r.throughput_msgs_per_s / 1e6,
        r.throughput_median_msgs_per_s / 1e6,
        r.latency_us.p50,
        r.latency_us.p99,
        r.latency_us.max
    );
    let m = &r.memory;
    println!(
        "memory       {}: rss {:.1} MiB after {:.0} s warm-up, {:.1} MiB at the end ({:+.1}%, tolerance {:.0}%), peak {:.1} MiB, slope {:+.2} MiB/min",
        m.verdict,
        mib(m.first_rss_bytes),
        m.warmup_seconds,
        mib(m.last_rss_bytes),
        100.0 * m.growth_fraction,
        100.0 * m.tolerance,
        mib(m.peak_rss_bytes),
        m.slope_bytes_per_minute / (1u64 << 20) as f64
    );
    println!(
        "drops        {}; switches removed {} links, {} frames had no route",
        drops_line(&r.drops),
        r.switch_links_removed,
        r.switch_no_route
    );
    println!(
        "checks       {} violations over {} events checked online ({} sends given up)",
        r.violations, r.checker.events, r.checker.sends_given_up
    );
    if r.violations > 0 {
        print!("{}", r.checks);
        if let Some(l) = &r.no_loss {
            println!("no_loss: {} violation(s)", l.count);
            for v in &l.examples {
                println!("  {v}");
            }
        }
    }
}
