//! `onepipe bench`: benchmarks that print numbers, compared as ratios within one run. The
//! runners are in onepipe-bench; this parses their arguments and prints their reports.

use crate::flags::{JsonFlag, SeedFlag};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use onepipe_bench::modes::{ModesOptions, ModesReport};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Best-effort, reliable and unordered side by side on the paper testbed, saturated; then
    /// latency against link loss (paper Fig. 9b) at a light paced load.
    Modes(ModesArgs),
    /// Paper Fig. 8 on a real runtime: all-to-all broadcast, 1Pipe next to unordered delivery and
    /// the total-order baselines (host and switch sequencer, token, Lamport), in one run
    Fig8(crate::bench_fig8::Fig8Args),
    /// The raw loopback UDP datagram rate of this machine: the udp runtime's physical limit
    UdpLimit(crate::udp_limit::UdpLimitArgs),
    /// Paper Fig. 10: recovery time of reliable 1Pipe after host, ToR, core-link and core-switch
    /// failures as hosts grow, in the simulator (paper timing) and on the inproc runtime
    Recovery(crate::bench_recovery::RecoveryArgs),
    /// A long open-loop run at a fraction (--load) of the capacity measured first, checked
    /// online: memory over time (flat), violations (none) and drops
    Soak(crate::bench_soak::SoakArgs),
}

#[derive(Args, Debug)]
pub struct ModesArgs {
    /// Length of each saturated run
    #[arg(long, default_value_t = 2.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Saturated best-effort and reliable runs, in pairs alternating which goes first: this
    /// machine's speed drifts by tens of percent within a minute, so the reliable-to-best-effort
    /// ratio is the median over pairs, and the rows show the median pair. Five: single pairs
    /// range 0.55-1.0 on a noisy day, and a median of three still swung 0.64-0.84 run to run
    #[arg(long, default_value_t = 5, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::REPEATS_MAX))]
    pairs: usize,
    /// Length of each run of the loss table
    #[arg(long, default_value_t = 1.0, value_parser = crate::bounds::seconds())]
    loss_seconds: f64,
    /// Broadcasts per second per process in the loss table (paced, Poisson)
    #[arg(long, default_value_t = 100.0, value_parser = crate::bounds::float(0.0, crate::bounds::RATE_PER_S_MAX))]
    rate: f64,
    /// End-to-end loss probabilities of a packet for the loss table, as in paper Fig. 9b; each
    /// link drops with 1-(1-p)^(1/6), the six links of the testbed's longest path
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.000001,0.00001,0.0001,0.001,0.01,0.1",
        value_parser = crate::bounds::probability()
    )]
    losses: Vec<f64>,
    /// Pairs of saturated best-effort and of reliable runs over udp (the same testbed, every
    /// node on a loopback socket) with and without authentication, alternating which goes
    /// first: what authentication costs each mode (0 skips them; the modes above run inproc,
    /// where nothing is authenticated)
    #[arg(long, default_value_t = 0, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::REPEATS_MAX))]
    auth_pairs: usize,
    #[command(flatten)]
    rng: SeedFlag,
    #[command(flatten)]
    out: JsonFlag,
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode, String> {
    match cmd {
        BenchCommand::Modes(args) => modes(args),
        BenchCommand::Fig8(args) => crate::bench_fig8::run(args),
        BenchCommand::UdpLimit(args) => crate::udp_limit::run(args),
        BenchCommand::Recovery(args) => crate::bench_recovery::run(args),
        BenchCommand::Soak(args) => crate::bench_soak::run(args),
    }
}

/// A bar in `template` counting a runner's runs (the runner sets how many), hidden under
/// `--json`.
pub fn runs_bar(hidden: bool, template: &str) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
    bar
}

fn modes(args: ModesArgs) -> Result<ExitCode, String> {
    let options = ModesOptions {
        seconds: args.seconds,
        pairs: args.pairs,
        loss_seconds: args.loss_seconds,
        rate: args.rate,
        losses: args.losses,
        seed: args.rng.seed,
        auth_pairs: args.auth_pairs,
    };
    let bar = runs_bar(args.out.json, "[{bar:30}] {pos}/{len} {msg}");
    let report = onepipe_bench::modes::modes(&options, &bar)?;
    if args.out.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print_report(&report);
    }
    Ok(if report.all_delivered {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(r: &ModesReport) {
    println!(
        "{} processes, {}-byte all-to-all broadcast, beacon interval {} us",
        r.processes, r.message_bytes, r.beacon_interval_us
    );
    println!("saturated:");
    println!(
        "  {:<10} {:>8} {:>14} {:>10} {:>10} {:>8}",
        "system", "loss", "M msg/s", "p50 us", "p99 us", "retx"
    );
    for m in &r.modes {
        println!(
            "  {:<10} {:>8} {:>14.3} {:>10.1} {:>10.1} {:>8}{}",
            m.system,
            m.loss,
            m.throughput_msgs_per_s / 1e6,
            m.latency_us.p50,
            m.latency_us.p99,
            m.retransmissions,
            match m.no_loss {
                Some(false) => "  LOST MESSAGES",
                _ => "",
            }
        );
    }
    let list = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", ");
    let spread = match r.reliable_to_best_effort_throughput_stderr {
        Some(e) => format!(
            "; mean {:.3} +- {e:.3} standard error",
            r.reliable_to_best_effort_throughput_mean
        ),
        None => String::new(),
    };
    println!(
        "  reliable / best effort throughput x{:.2} (median of pairs {}{spread})",
        r.reliable_to_best_effort_throughput,
        list(&r.reliable_to_best_effort_throughput_pairs),
    );
    println!(
        "  reliable at 1% loss x{:.2} of loss-free (median of pairs {})",
        r.reliable_throughput_at_1pct_loss_ratio,
        list(&r.reliable_throughput_at_1pct_loss_pairs),
    );
    for m in &r.modes {
        if let Some(p) = &m.memory_peak {
            println!(
                "  {} at loss {}: peak per process {} packets unacknowledged, {} retained, {:.1} KiB prepared",
                m.system,
                m.loss,
                p.send_unacked_packets,
                p.send_retained_packets,
                p.receive_prepared_bytes as f64 / 1024.0
            );
        }
    }
    println!("median latency (us) against end-to-end packet loss, paced (paper Fig. 9b):");
    println!(
        "  {:>8} {:>12} {:>12} {:>12} {:>8} {:>10}",
        "loss", "best effort", "reliable", "unordered", "retx", "BE kept"
    );
    for l in &r.loss_table {
        println!(
            "  {:>8} {:>12.1} {:>12.1} {:>12.1} {:>8} {:>9.1}%{}",
            l.loss,
            l.best_effort_latency_us.p50,
            l.reliable_latency_us.p50,
            l.unordered_latency_us.p50,
            l.reliable_retransmissions,
            100.0 * l.best_effort_delivered_fraction,
            if l.reliable_no_loss { "" } else { "  LOST MESSAGES" }
        );
    }
    println!(
        "  reliable adds {:.1} us to the best-effort median at the lowest loss",
        r.reliable_minus_best_effort_latency_us
    );
    for a in &r.auth_cost {
        let c = &a.cost;
        println!(
            "  over udp, {} authenticated / not at {} processes: throughput x{:.2}, the median of {} pairs ({}); p50 latency x{:.2}",
            a.system,
            c.processes,
            c.median,
            c.ratios.len(),
            list(&c.ratios),
            c.latency_p50_median
        );
    }
}
