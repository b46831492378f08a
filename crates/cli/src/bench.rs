//! `onepipe bench`: benchmarks that print numbers, compared as ratios within one run.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use onepipe_bench::demo::{DemoConfig, PhaseResult, run_phase};
use onepipe_runtime::inproc::LinkFaults;
use onepipe_wire::Duration;
use serde::Serialize;
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
}

#[derive(Args, Debug)]
pub struct ModesArgs {
    /// Length of each saturated run
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Saturated best-effort and reliable runs, in pairs alternating which goes first: this
    /// machine's speed drifts by tens of percent within a minute, so the reliable-to-best-effort
    /// ratio is the median over pairs, and the rows show the median pair. Five: single pairs
    /// range 0.55-1.0 on a noisy day, and a median of three still swung 0.64-0.84 run to run
    #[arg(long, default_value_t = 5)]
    pairs: usize,
    /// Length of each run of the loss table
    #[arg(long, default_value_t = 1.0)]
    loss_seconds: f64,
    /// Broadcasts per second per process in the loss table (paced, Poisson)
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    /// End-to-end loss probabilities of a packet for the loss table, as in paper Fig. 9b; each
    /// link drops with 1-(1-p)^(1/6), the six links of the testbed's longest path
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.000001,0.00001,0.0001,0.001,0.01,0.1"
    )]
    losses: Vec<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of tables
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone, Copy)]
struct Percentiles {
    p50: f64,
    p99: f64,
}

#[derive(Serialize)]
struct ModeRow {
    system: &'static str,
    loss: f64,
    throughput_msgs_per_s: f64,
    latency_us: Percentiles,
    retransmissions: u64,
    acks_sent: u64,
    acks_piggybacked: u64,
    send_failures: u64,
    /// Reliable rows: every message delivered exactly once.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_loss: Option<bool>,
    /// Reliable rows: the most any process held (its buffers are bounded by configuration).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_peak: Option<ReliableMemory>,
}

#[derive(Serialize)]
struct ReliableMemory {
    /// Packets sent and not yet acknowledged (bounded by the send buffer).
    send_unacked_packets: usize,
    /// Packets kept, acknowledged or not, until every older scattering is acknowledged.
    send_retained_packets: usize,
    /// Prepared messages waiting for the commit barrier at a receiver.
    receive_prepared_bytes: usize,
}

/// Links on the testbed's longest path (host, ToR, spine, core, spine, ToR, host).
const PATH_LINKS: f64 = 6.0;

#[derive(Serialize)]
struct LossRow {
    /// End-to-end loss probability of a packet.
    loss: f64,
    per_link_loss: f64,
    best_effort_latency_us: Percentiles,
    reliable_latency_us: Percentiles,
    unordered_latency_us: Percentiles,
    reliable_retransmissions: u64,
    reliable_send_failures: u64,
    reliable_no_loss: bool,
    /// Best-effort messages lost to the link faults (never delivered).
    best_effort_delivered_fraction: f64,
}

#[derive(Serialize)]
struct ModesReport {
    processes: usize,
    message_bytes: usize,
    beacon_interval_us: f64,
    modes: Vec<ModeRow>,
    /// The median of `reliable_to_best_effort_throughput_pairs`.
    reliable_to_best_effort_throughput: f64,
    /// Reliable over best-effort throughput of each pair of saturated runs, in run order.
    reliable_to_best_effort_throughput_pairs: Vec<f64>,
    /// The mean of the pairs, and its standard error (`None` for a single pair). On a shared
    /// machine single pairs spread by +-20%; the error says how far one run's figure can be
    /// trusted, and more `--pairs` narrow it.
    reliable_to_best_effort_throughput_mean: f64,
    reliable_to_best_effort_throughput_stderr: Option<f64>,
    /// At the paced load of the loss table, lowest loss: what reliability adds to the median.
    reliable_minus_best_effort_latency_us: f64,
    /// Saturated reliable throughput at 1% loss on every link over loss-free: the median of
    /// `reliable_throughput_at_1pct_loss_pairs`.
    reliable_throughput_at_1pct_loss_ratio: f64,
    /// Each pair's lossy reliable run over its loss-free one (run next to it), in run order.
    reliable_throughput_at_1pct_loss_pairs: Vec<f64>,
    loss_table: Vec<LossRow>,
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode, String> {
    match cmd {
        BenchCommand::Modes(args) => modes(args),
        BenchCommand::Fig8(args) => crate::bench_fig8::run(args),
        BenchCommand::UdpLimit(args) => crate::udp_limit::run(args),
        BenchCommand::Recovery(args) => crate::bench_recovery::run(args),
    }
}

fn percentiles(r: &PhaseResult) -> Percentiles {
    Percentiles {
        p50: r.latency_us(0.5),
        p99: r.latency_us(0.99),
    }
}

/// Where the median of `values` is (the lower of the two middle ones for an even count), so
/// that the run behind it can be shown. `values` is not empty.
fn median_index(values: &[f64]) -> usize {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    order[(order.len() - 1) / 2]
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The standard error of the mean of `values` (sample standard deviation over the square root
/// of the count); `None` below two values.
fn standard_error(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let m = mean(values);
    let variance = values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1) as f64;
    Some((variance / n as f64).sqrt())
}

fn config(seconds: f64, seed: u64, reliable: bool, loss: f64, rate: f64) -> DemoConfig {
    DemoConfig {
        duration: Duration::from_nanos((seconds * 1e9) as u64),
        seed,
        reliable,
        rate_per_process: rate,
        faults: LinkFaults {
            loss,
            seed,
            ..LinkFaults::default()
        },
        ..DemoConfig::default()
    }
}

fn phase(c: &DemoConfig, ordering: bool, bar: &ProgressBar, label: String) -> Result<PhaseResult, String> {
    bar.set_message(label);
    let r = run_phase(c, ordering, &mut |_, _| {}).map_err(|e| e.to_string())?;
    bar.inc(1);
    Ok(r)
}

fn row(system: &'static str, loss: f64, r: &PhaseResult, reliable: bool) -> ModeRow {
    ModeRow {
        system,
        loss,
        throughput_msgs_per_s: r.throughput_msgs_per_s(),
        latency_us: percentiles(r),
        retransmissions: r.retransmissions,
        acks_sent: r.acks_sent,
        acks_piggybacked: r.acks_piggybacked,
        send_failures: r.send_failures,
        no_loss: reliable.then(|| r.lost().is_empty()),
        memory_peak: reliable.then_some(ReliableMemory {
            send_unacked_packets: r.reliable_unacked_packets_peak,
            send_retained_packets: r.reliable_retained_packets_peak,
            receive_prepared_bytes: r.reliable_prepared_bytes_peak,
        }),
    }
}

fn modes(args: ModesArgs) -> Result<ExitCode, String> {
    if !(args.seconds > 0.0 && args.loss_seconds > 0.0 && args.rate > 0.0) {
        return Err("--seconds, --loss-seconds and --rate must be positive".into());
    }
    if args.pairs == 0 {
        return Err("--pairs must be at least 1".into());
    }
    if let Some(p) = args.losses.iter().find(|p| !(0.0..1.0).contains(*p)) {
        return Err(format!("loss {p} is not a probability in [0, 1)"));
    }
    let runs = 3 * args.pairs as u64 + 1 + 3 * args.losses.len() as u64;
    let bar = if args.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(runs)
    };
    bar.set_style(ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}").expect("valid template"));
    let s = args.seconds;
    let mut pairs = Vec::with_capacity(args.pairs);
    let mut lossy = Vec::with_capacity(args.pairs);
    for k in 0..args.pairs {
        let of = format!("({}/{})", k + 1, args.pairs);
        let run = |reliable: bool, loss: f64, what: &str| {
            let c = config(s, args.seed, reliable, loss, 0.0);
            phase(&c, true, &bar, format!("{what} {of}"))
        };
        let be = || run(false, 0.0, "best effort");
        let rel = || run(true, 0.0, "reliable");
        let rel_lossy = || run(true, 0.01, "reliable, 1% loss");
        // Alternating which goes first cancels a steady drift of the machine's speed; the
        // lossy run sits next to the loss-free reliable one it is compared with.
        pairs.push(match k % 2 {
            0 => {
                let b = be()?;
                let r = rel()?;
                lossy.push(rel_lossy()?);
                (b, r)
            }
            _ => {
                lossy.push(rel_lossy()?);
                let r = rel()?;
                (be()?, r)
            }
        });
    }
    let lossy_ratios: Vec<f64> = lossy
        .iter()
        .zip(&pairs)
        .map(|(l, (_, r))| l.throughput_msgs_per_s() / r.throughput_msgs_per_s().max(1.0))
        .collect();
    let lossy_median = median_index(&lossy_ratios);
    let every_lossy_run_delivered = lossy.iter().all(|l| l.lost().is_empty());
    let ratio = |(be, rel): &(PhaseResult, PhaseResult)| {
        rel.throughput_msgs_per_s() / be.throughput_msgs_per_s().max(1.0)
    };
    let ratios: Vec<f64> = pairs.iter().map(ratio).collect();
    let every_reliable_run_delivered = pairs.iter().all(|(_, r)| r.lost().is_empty());
    let (be, rel) = pairs.swap_remove(median_index(&ratios));
    let unordered = phase(
        &config(s, args.seed, false, 0.0, 0.0),
        false,
        &bar,
        "unordered".into(),
    )?;
    let rel_lossy = lossy.swap_remove(lossy_median);
    let mut loss_table = Vec::new();
    for &loss in &args.losses {
        let (ls, seed, rate) = (args.loss_seconds, args.seed, args.rate);
        let link = 1.0 - (1.0 - loss).powf(1.0 / PATH_LINKS);
        let run = |reliable: bool, ordering: bool, what: &str| {
            let c = config(ls, seed, reliable, link, rate);
            phase(&c, ordering, &bar, format!("loss {loss}: {what}"))
        };
        let b = run(false, true, "best effort")?;
        let r = run(true, true, "reliable")?;
        let u = run(false, false, "unordered")?;
        loss_table.push(LossRow {
            loss,
            per_link_loss: link,
            best_effort_latency_us: percentiles(&b),
            reliable_latency_us: percentiles(&r),
            unordered_latency_us: percentiles(&u),
            reliable_retransmissions: r.retransmissions,
            reliable_send_failures: r.send_failures,
            reliable_no_loss: r.lost().is_empty(),
            best_effort_delivered_fraction: b.delivered as f64 / b.messages_sent.max(1) as f64,
        });
    }
    bar.finish_and_clear();
    let lowest = loss_table.first();
    let report = ModesReport {
        processes: be.processes,
        message_bytes: DemoConfig::default().message_bytes,
        beacon_interval_us: DemoConfig::default().beacon_interval.as_micros_f64(),
        reliable_to_best_effort_throughput: rel.throughput_msgs_per_s() / be.throughput_msgs_per_s().max(1.0),
        reliable_to_best_effort_throughput_mean: mean(&ratios),
        reliable_to_best_effort_throughput_stderr: standard_error(&ratios),
        reliable_to_best_effort_throughput_pairs: ratios,
        reliable_minus_best_effort_latency_us: lowest.map_or(f64::NAN, |l| {
            l.reliable_latency_us.p50 - l.best_effort_latency_us.p50
        }),
        reliable_throughput_at_1pct_loss_ratio: lossy_ratios[lossy_median],
        reliable_throughput_at_1pct_loss_pairs: lossy_ratios,
        modes: vec![
            row("1pipe-be", 0.0, &be, false),
            row("1pipe-r", 0.0, &rel, true),
            row("unordered", 0.0, &unordered, false),
            row("1pipe-r", 0.01, &rel_lossy, true),
        ],
        loss_table,
    };
    let all_delivered = every_reliable_run_delivered
        && every_lossy_run_delivered
        && report.modes.iter().all(|m| m.no_loss != Some(false))
        && report.loss_table.iter().all(|l| l.reliable_no_loss);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print_report(&report);
    }
    Ok(if all_delivered {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_error_needs_two_pairs() {
        assert_eq!(standard_error(&[0.7]), None);
        let e = standard_error(&[0.6, 0.7, 0.8]).expect("three pairs");
        assert!((e - 0.1 / 3f64.sqrt()).abs() < 1e-12, "{e}");
        assert_eq!(standard_error(&[0.75, 0.75]), Some(0.0));
    }
}
