//! `onepipe bench modes`: best-effort, reliable and unordered 1Pipe side by side on the paper
//! testbed, saturated and compared as ratios within one run; then latency against link loss
//! (paper Fig. 9b) at a light paced load. The modes run on the inproc runtime, where nothing
//! is authenticated; `auth_pairs` adds saturated best-effort and reliable runs over udp (the
//! same testbed, every node on a loopback socket) with and without datagram tags.

use crate::demo::{DemoConfig, PhaseResult, run_phase};
use crate::pairs::{self, AuthCost, Measured};
use crate::runtimes::{self, RuntimeKind};
use indicatif::ProgressBar;
use onepipe_runtime::inproc::LinkFaults;
use onepipe_wire::Duration;
use serde::Serialize;

/// What `onepipe bench modes` runs.
#[derive(Clone, Debug)]
pub struct ModesOptions {
    /// Length of each saturated run, seconds.
    pub seconds: f64,
    /// Saturated best-effort and reliable runs, in pairs alternating which goes first.
    pub pairs: usize,
    /// Length of each run of the loss table, seconds.
    pub loss_seconds: f64,
    /// Broadcasts per second per process in the loss table (paced, Poisson).
    pub rate: f64,
    /// End-to-end loss probabilities of a packet for the loss table.
    pub losses: Vec<f64>,
    pub seed: u64,
    /// Pairs of saturated best-effort and of reliable runs over udp with and without
    /// authentication, alternating which goes first (0 skips them).
    pub auth_pairs: usize,
}

#[derive(Serialize, Clone, Copy)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

#[derive(Serialize)]
pub struct ModeRow {
    pub system: &'static str,
    pub loss: f64,
    pub throughput_msgs_per_s: f64,
    pub latency_us: Percentiles,
    pub retransmissions: u64,
    pub acks_sent: u64,
    pub acks_piggybacked: u64,
    pub send_failures: u64,
    /// Reliable rows: every message delivered exactly once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_loss: Option<bool>,
    /// Reliable rows: the most any process held (its buffers are bounded by configuration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<ReliableMemory>,
}

#[derive(Serialize)]
pub struct ReliableMemory {
    /// Packets sent and not yet acknowledged (bounded by the send buffer).
    pub send_unacked_packets: usize,
    /// Packets kept, acknowledged or not, until every older scattering is acknowledged.
    pub send_retained_packets: usize,
    /// Prepared messages waiting for the commit barrier at a receiver.
    pub receive_prepared_bytes: usize,
}

/// Links on the testbed's longest path (host, ToR, spine, core, spine, ToR, host).
const PATH_LINKS: f64 = 6.0;

#[derive(Serialize)]
pub struct LossRow {
    /// End-to-end loss probability of a packet.
    pub loss: f64,
    pub per_link_loss: f64,
    pub best_effort_latency_us: Percentiles,
    pub reliable_latency_us: Percentiles,
    pub unordered_latency_us: Percentiles,
    pub reliable_retransmissions: u64,
    pub reliable_send_failures: u64,
    pub reliable_no_loss: bool,
    /// Best-effort messages lost to the link faults (never delivered).
    pub best_effort_delivered_fraction: f64,
}

#[derive(Serialize)]
pub struct ModesReport {
    pub processes: usize,
    pub message_bytes: usize,
    pub beacon_interval_us: f64,
    pub modes: Vec<ModeRow>,
    /// The median of `reliable_to_best_effort_throughput_pairs`.
    pub reliable_to_best_effort_throughput: f64,
    /// Reliable over best-effort throughput of each pair of saturated runs, in run order.
    pub reliable_to_best_effort_throughput_pairs: Vec<f64>,
    /// The mean of the pairs, and its standard error (`None` for a single pair). On a shared
    /// machine single pairs spread by +-20%; the error says how far one run's figure can be
    /// trusted, and more `--pairs` narrow it.
    pub reliable_to_best_effort_throughput_mean: f64,
    pub reliable_to_best_effort_throughput_stderr: Option<f64>,
    /// At the paced load of the loss table, lowest loss: what reliability adds to the median.
    pub reliable_minus_best_effort_latency_us: f64,
    /// Saturated reliable throughput at 1% loss on every link over loss-free: the median of
    /// `reliable_throughput_at_1pct_loss_pairs`.
    pub reliable_throughput_at_1pct_loss_ratio: f64,
    /// Each pair's lossy reliable run over its loss-free one (run next to it), in run order.
    pub reliable_throughput_at_1pct_loss_pairs: Vec<f64>,
    pub loss_table: Vec<LossRow>,
    /// Over udp, per mode: throughput and p50 latency with authentication over without
    /// (`auth_pairs`; absent without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auth_cost: Vec<ModeAuthCost>,
    /// Every reliable run delivered every message exactly once.
    #[serde(skip)]
    pub all_delivered: bool,
}

#[derive(Serialize)]
pub struct ModeAuthCost {
    pub system: &'static str,
    #[serde(flatten)]
    pub cost: AuthCost,
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

/// Runs every phase of `onepipe bench modes`, counting them on `bar` (cleared at the end).
pub fn modes(args: &ModesOptions, bar: &ProgressBar) -> Result<ModesReport, String> {
    if !(args.seconds > 0.0 && args.loss_seconds > 0.0 && args.rate > 0.0) {
        return Err("--seconds, --loss-seconds and --rate must be positive".into());
    }
    if args.pairs == 0 {
        return Err("--pairs must be at least 1".into());
    }
    if let Some(p) = args.losses.iter().find(|p| !(0.0..1.0).contains(*p)) {
        return Err(format!("loss {p} is not a probability in [0, 1)"));
    }
    let udp_runs = 2 * 2 * args.auth_pairs as u64;
    bar.set_length(3 * args.pairs as u64 + 1 + 3 * args.losses.len() as u64 + udp_runs);
    let s = args.seconds;
    let mut pairs = Vec::with_capacity(args.pairs);
    let mut lossy = Vec::with_capacity(args.pairs);
    for k in 0..args.pairs {
        let of = format!("({}/{})", k + 1, args.pairs);
        let run = |reliable: bool, loss: f64, what: &str| {
            let c = config(s, args.seed, reliable, loss, 0.0);
            phase(&c, true, bar, format!("{what} {of}"))
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
        bar,
        "unordered".into(),
    )?;
    let rel_lossy = lossy.swap_remove(lossy_median);
    let mut loss_table = Vec::new();
    for &loss in &args.losses {
        let (ls, seed, rate) = (args.loss_seconds, args.seed, args.rate);
        let link = 1.0 - (1.0 - loss).powf(1.0 / PATH_LINKS);
        let run = |reliable: bool, ordering: bool, what: &str| {
            let c = config(ls, seed, reliable, link, rate);
            phase(&c, ordering, bar, format!("loss {loss}: {what}"))
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
    let auth_cost = auth_costs(args, bar)?;
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
        auth_cost,
        all_delivered: false,
    };
    let all_delivered = every_reliable_run_delivered
        && every_lossy_run_delivered
        && report.modes.iter().all(|m| m.no_loss != Some(false))
        && report.loss_table.iter().all(|l| l.reliable_no_loss);
    Ok(ModesReport {
        all_delivered,
        ..report
    })
}

/// The saturated best-effort and reliable runs over udp with authentication over without,
/// `args.auth_pairs` pairs of each.
fn auth_costs(args: &ModesOptions, bar: &ProgressBar) -> Result<Vec<ModeAuthCost>, String> {
    if args.auth_pairs == 0 {
        return Ok(Vec::new());
    }
    [("1pipe-be", false), ("1pipe-r", true)]
        .into_iter()
        .map(|(system, reliable)| {
            let mut k = 0usize;
            let cost = pairs::auth_cost(args.auth_pairs, processes(), |authenticated| {
                k += 1;
                let what = match authenticated {
                    true => "authenticated",
                    false => "not authenticated",
                };
                let label = format!("udp {system}, {what} ({}/{})", k.div_ceil(2), args.auth_pairs);
                let c = udp_config(args, reliable, authenticated)?;
                let r = phase(&c, true, bar, label)?;
                Ok(Measured {
                    throughput_msgs_per_s: r.throughput_msgs_per_s(),
                    latency_p50_us: r.latency_us(0.5),
                })
            })?;
            Ok(ModeAuthCost { system, cost })
        })
        .collect()
}

fn processes() -> usize {
    DemoConfig::default().topology.hosts.len()
}

/// A saturated run over udp as `onepipe demo --runtime udp` makes it: the runtime's beacon
/// interval and promise lead, its default datagrams and credit window, a thread per core.
fn udp_config(args: &ModesOptions, reliable: bool, authenticated: bool) -> Result<DemoConfig, String> {
    let defaults = onepipe_runtime::udp::UdpConfig {
        auth: onepipe_runtime::udp::auth::Auth::Off,
        ..Default::default()
    };
    let udp = runtimes::udp_config(
        defaults.datagram_bytes_max,
        runtimes::udp_threads(None),
        defaults.window_datagrams_max,
        !authenticated,
    )?;
    Ok(DemoConfig {
        beacon_interval: runtimes::beacon_interval(None, RuntimeKind::Udp),
        promise_lead: runtimes::promise_lead(None, RuntimeKind::Udp),
        udp: Some(udp),
        ..config(args.seconds, args.seed, reliable, 0.0, 0.0)
    })
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
