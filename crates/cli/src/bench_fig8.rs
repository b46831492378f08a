//! `onepipe bench fig8`: paper Fig. 8 on a real runtime ([`onepipe_bench::fig8`]), parsed and
//! printed.

use crate::flags::{BarrierFlags, JsonFlag, RuntimeFlags, SeedFlag};
use crate::udp_limit;
use clap::Args;
use onepipe_bench::fig8::{Fig8Options, Fig8Report, per_process};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Clone, Debug)]
pub struct Fig8Args {
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32", value_parser = crate::bounds::int::<usize>(1..=crate::bounds::PROCESSES_MAX))]
    processes: Vec<usize>,
    /// Systems to run (default all): 1pipe-be, 1pipe-r, unordered, host-seq, switch-seq, token,
    /// lamport
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
    /// Length of each run
    #[arg(long, default_value_t = 1.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Own broadcasts a process may have undelivered back to itself: every system runs this
    /// closed loop [default: 2048 messages' worth, ceil(2048 / processes) broadcasts]
    #[arg(long, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::PACKETS_MAX))]
    window: Option<usize>,
    /// More runs of 1pipe-be and unordered at the most processes, in pairs alternating which
    /// goes first: this machine's speed drifts by tens of percent within a minute, so
    /// ordered over unordered is the median over the table's pair and these (single pairs of
    /// one build spread 0.6-1.4 on a bad day; a median of three still swung 0.8-1.0)
    #[arg(long, default_value_t = 4, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::REPEATS_MAX))]
    ratio_pairs: usize,
    /// udp runtime: pairs of 1pipe-be runs at the most processes with and without
    /// authentication, alternating which goes first: what authentication costs (0 skips them)
    #[arg(long, default_value_t = 0, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::REPEATS_MAX))]
    auth_pairs: usize,
    /// udp runtime: seconds of the raw datagram measurement run alongside (0 skips it)
    #[arg(long, default_value_t = 1.0, value_parser = crate::bounds::seconds())]
    limit_seconds: f64,
    /// Also draw throughput per process and p50 latency against processes into this PNG
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    rt: RuntimeFlags,
    #[command(flatten)]
    barrier: BarrierFlags,
    #[command(flatten)]
    incarnation: crate::flags::IncarnationFlags,
    #[command(flatten)]
    rng: SeedFlag,
    #[command(flatten)]
    out: JsonFlag,
}

pub fn run(args: Fig8Args) -> Result<ExitCode, String> {
    let incarnation = args.incarnation.incarnation();
    if incarnation == onepipe_proto::Incarnation::Host {
        return Err(
            "--incarnation host runs in the simulator (`onepipe sim --incarnation host`); \
             the benchmark's runtimes do not host representatives yet"
                .into(),
        );
    }
    let options = Fig8Options {
        runtime: args.rt.runtime.into(),
        processes: args.processes.clone(),
        systems: args.systems.clone(),
        seconds: args.seconds,
        window: args.window,
        seed: args.rng.seed,
        datagram_bytes: args.rt.datagram_bytes,
        udp_threads: args.rt.udp_threads,
        udp_window_datagrams: args.rt.udp_window_datagrams,
        insecure_no_auth: args.rt.insecure_no_auth,
        auth_pairs: args.auth_pairs,
        ratio_pairs: args.ratio_pairs,
        limit_seconds: args.limit_seconds,
        beacon_interval_us: args.barrier.beacon_interval_us,
        promise_lead_us: args.barrier.promise_lead_us,
        incarnation,
    };
    let bar = crate::bench::runs_bar(args.out.json, "[{bar:30}] {pos}/{len} {elapsed} {msg}");
    let report = onepipe_bench::fig8::run(&options, &bar)?;
    if let Some(path) = &args.plot {
        onepipe_bench::plot::write_png(&onepipe_bench::fig8::plots(&report), path)?;
    }
    if args.out.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_report(&report);
    }
    let sound = report.rows.iter().all(|r| r.checks_ok != Some(false));
    Ok(if sound {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(r: &Fig8Report) {
    let threads = match r.udp_threads {
        None => String::new(),
        Some(0) => " (a thread per node)".into(),
        Some(n) => format!(" (nodes on {n} threads)"),
    };
    println!(
        "{}-byte all-to-all broadcast over {}{threads}, {}, barriers on the switch {}, {} s per run",
        r.message_bytes, r.runtime, r.topology, r.incarnation, r.seconds
    );
    println!(
        "  {:<10} {:>9} {:>12} {:>14} {:>10} {:>10} {:>7}",
        "system", "processes", "M msg/s", "K msg/s/proc", "p50 us", "p99 us", "checks"
    );
    for row in &r.rows {
        println!(
            "  {:<10} {:>9} {:>12.3} {:>14.1} {:>10.1} {:>10.1} {:>7}",
            row.system,
            row.processes,
            row.throughput_msgs_per_s / 1e6,
            per_process(row) / 1e3,
            row.latency_us.p50,
            row.latency_us.p99,
            match row.checks_ok {
                Some(true) => "ok",
                Some(false) => "FAILED",
                None => "-",
            }
        );
    }
    for f in &r.flatness {
        println!(
            "  {:<10} at {} over at {} processes: per process x{:.2}, total x{:.2}",
            f.system, f.to_processes, f.from_processes, f.per_process_ratio, f.total_ratio
        );
    }
    if let Some(l) = &r.udp_limit {
        udp_limit::print(l);
    }
    if let Some(u) = &r.udp_ratios {
        println!(
            "  at {} processes: unordered / raw datagrams x{:.2}, unordered / raw packed x{:.2}",
            u.processes, u.unordered_to_raw_datagrams, u.unordered_to_raw_packed
        );
    }
    if let Some(c) = &r.auth_cost {
        let pairs: Vec<String> = c.ratios.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "  1pipe-be authenticated / not at {} processes: throughput x{:.2}, the median of {} pairs ({}); p50 latency x{:.2}",
            c.processes,
            c.median,
            c.ratios.len(),
            pairs.join(", "),
            c.latency_p50_median
        );
    }
    if let Some(c) = &r.ordering_cost {
        let pairs: Vec<String> = c.ratios.iter().map(|x| format!("{x:.2}")).collect();
        println!(
            "  1pipe-be / unordered at {} processes: x{:.2}, the median of {} pairs ({})",
            c.processes,
            c.median,
            c.ratios.len(),
            pairs.join(", ")
        );
    }
}
