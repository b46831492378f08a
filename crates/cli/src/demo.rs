//! `onepipe demo`: the paper-testbed fat-tree, all-to-all broadcast, ordered and unordered in
//! one run, every check on the ordered run's event logs.

use crate::flags::{
    BarrierFlags, DeadAfterFlag, JsonFlag, MessageBytesFlag, RuntimeFlags, SeedFlag, TimeAheadFlag,
    TopologyFlags,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use onepipe_bench::demo::{DemoConfig, PhaseResult, parse_failure, run_phase};
use onepipe_bench::demo_summary::{Summary, summarize, write_logs};
use onepipe_bench::runtimes::{beacon_interval, promise_lead, udp_config, udp_threads};
use onepipe_check::Report;
use onepipe_runtime::inproc::LinkFaults;
use onepipe_wire::{Duration, Instant};
use std::path::PathBuf;
use std::process::ExitCode;

/// The demo's `--dead-after-intervals`: the paper uses 10 at 3 us with a core per switch;
/// here switches share two cores with everything else and a worker can be descheduled for
/// milliseconds, so this allows 25 ms at the default interval.
const DEAD_AFTER_INTERVALS: u32 = 500;

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    fabric: TopologyFlags,
    /// Largest clock offset of a host from the shared clock; each host draws uniformly in ±skew
    #[arg(long, default_value_t = 0.3, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    skew_us: f64,
    /// Extra one-way delay on every link
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    link_delay_us: f64,
    /// Broadcasts per second per process (open loop, Poisson arrivals); 0 sends as fast as the fabric takes them
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, crate::bounds::RATE_PER_S_MAX))]
    rate: f64,
    /// Length of each phase (ordered, then unordered)
    #[arg(long, default_value_t = 3.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Worker threads (default: one per core)
    #[arg(long, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    workers: Option<usize>,
    /// Capacity of every link's queue in bytes (a 64-byte message is a 122-byte frame)
    #[arg(long, default_value_t = 2048, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::BYTES_MAX))]
    link_capacity_bytes: usize,
    /// inproc: hosts are visited once in this many passes of their worker thread (or sooner
    /// when half a ring waits for them); switches every pass. 1 visits every node every pass;
    /// 0 chooses 2 where there are several switches, 1 behind a single switch
    #[arg(long, default_value_t = 0, value_parser = crate::bounds::int::<u32>(0..=crate::bounds::INTERVALS_MAX))]
    edge_visit_interval_passes: u32,
    /// Start the shared clock this many ns before the 48-bit wire timestamps wrap
    #[arg(long, value_parser = crate::bounds::int::<u64>(0..=crate::bounds::BEFORE_WRAP_NS_MAX))]
    start_before_wrap_ns: Option<u64>,
    /// Skip the unordered baseline phase
    #[arg(long)]
    no_baseline: bool,
    /// Write DIR/<process-id>.log with S and D lines (docs/logs.md)
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Use reliable 1Pipe (2PC with commit barriers, retransmission) instead of best effort
    #[arg(long)]
    reliable: bool,
    /// Fail a component during the run (reliable, inproc; repeatable): host:H, tor:N, spine:N,
    /// core:N, switch:NAME or link:A-B (switch names or kind:N), then @TIME after sending
    /// starts, like host:5@1s. A controller runs the failure procedure (paper 5.2)
    #[arg(long, value_name = "TARGET@TIME")]
    fail: Vec<String>,
    /// Probability that a link drops a frame (every link, seeded by --seed)
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Probability that a link delivers a frame twice
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    dup: f64,
    /// Probability that a link holds a frame back until the next one has passed it (links stop
    /// being FIFO: best effort drops what arrives below the barrier and NAKs it)
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    reorder: f64,
    /// Extra delay per frame, uniform up to this; links stay FIFO
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    jitter_us: f64,
    /// Serialization rate of every link in Gbit/s (queues build and switches mark ECN past
    /// --ecn-threshold-bytes); 0 is as fast as the workers go
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, crate::bounds::GBPS_MAX))]
    link_gbps: f64,
    #[arg(long, default_value_t = 1024, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::BYTES_MAX))]
    ecn_threshold_bytes: usize,
    #[command(flatten)]
    msg: MessageBytesFlag,
    #[command(flatten)]
    barrier: BarrierFlags,
    #[command(flatten)]
    dead: DeadAfterFlag,
    #[command(flatten)]
    time_ahead: TimeAheadFlag,
    #[command(flatten)]
    incarnation: crate::flags::IncarnationFlags,
    #[command(flatten)]
    rt: RuntimeFlags,
    #[command(flatten)]
    rng: SeedFlag,
    #[command(flatten)]
    out: JsonFlag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeKind {
    Inproc,
    Udp,
}

impl From<RuntimeKind> for onepipe_bench::runtimes::RuntimeKind {
    fn from(r: RuntimeKind) -> Self {
        match r {
            RuntimeKind::Inproc => Self::Inproc,
            RuntimeKind::Udp => Self::Udp,
        }
    }
}

/// A flag's microseconds as a duration (flags are bounded non-negative; a negative is zero).
pub(crate) fn us(v: f64) -> Duration {
    Duration::from_nanos((v * 1_000.0).round().max(0.0) as u64)
}

fn config_from(args: &DemoArgs) -> Result<DemoConfig, String> {
    let topology = args.fabric.load()?;
    let positive = |name: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(format!("--{name} must be a positive number"))
        }
    };
    let non_negative = |name: &str, v: f64| {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(format!("--{name} must be zero or positive"))
        }
    };
    positive("seconds", args.seconds)?;
    if let Some(b) = args.barrier.beacon_interval_us {
        positive("beacon-interval-us", b)?;
    }
    non_negative("skew-us", args.skew_us)?;
    if let Some(lead) = args.barrier.promise_lead_us {
        non_negative("promise-lead-us", lead)?;
    }
    non_negative("rate", args.rate)?;
    non_negative("link-delay-us", args.link_delay_us)?;
    non_negative("jitter-us", args.jitter_us)?;
    non_negative("link-gbps", args.link_gbps)?;
    for (name, p) in [("loss", args.loss), ("dup", args.dup), ("reorder", args.reorder)] {
        if !(0.0..1.0).contains(&p) {
            return Err(format!("--{name} must be a probability in [0, 1)"));
        }
    }
    if (args.loss > 0.0 || args.dup > 0.0) && !args.reliable {
        eprintln!(
            "note: best effort does not recover lost frames; losses show as incomplete drops and send failures"
        );
    }
    let dead_after_intervals = args.dead.dead_after_intervals.unwrap_or(DEAD_AFTER_INTERVALS);
    if dead_after_intervals == 0 {
        return Err("--dead-after-intervals must be at least 1".into());
    }
    if args.workers == Some(0) {
        return Err("--workers must be at least 1".into());
    }
    let mut c = DemoConfig {
        topology,
        processes_per_host: args.fabric.processes_per_host,
        message_bytes: args.msg.message_bytes,
        beacon_interval: beacon_interval(args.barrier.beacon_interval_us, args.rt.runtime.into()),
        promise_lead: promise_lead(args.barrier.promise_lead_us, args.rt.runtime.into()),
        skew: us(args.skew_us),
        seed: args.rng.seed,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        link_delay: us(args.link_delay_us),
        dead_after_intervals,
        link_capacity_bytes: args.link_capacity_bytes,
        edge_visit_interval_passes: args.edge_visit_interval_passes,
        rate_per_process: args.rate,
        reliable: args.reliable,
        faults: LinkFaults {
            loss: args.loss,
            duplicate: args.dup,
            jitter: us(args.jitter_us),
            reorder: args.reorder,
            seed: args.rng.seed,
        },
        link_bits_per_s: (args.link_gbps > 0.0).then_some((args.link_gbps * 1e9) as u64),
        ecn_threshold_bytes: args.ecn_threshold_bytes,
        time_ahead_max: args.time_ahead.duration()?,
        incarnation: args.incarnation.incarnation(),
        ..DemoConfig::default()
    };
    if let Some(w) = args.workers {
        c.workers = w;
    }
    if c.incarnation == onepipe_proto::Incarnation::Host {
        return Err(
            "--incarnation host runs in the simulator (`onepipe sim --incarnation host`); \
             the demo's runtimes do not host representatives yet"
                .into(),
        );
    }
    if !args.fail.is_empty() {
        if !args.reliable || args.rt.runtime == RuntimeKind::Udp {
            return Err("--fail needs --reliable on the inproc runtime".into());
        }
        c.failures = args
            .fail
            .iter()
            .map(|f| parse_failure(f, &c.topology))
            .collect::<Result<_, _>>()?;
    }
    if args.rt.runtime == RuntimeKind::Udp {
        let threads = udp_threads(args.rt.udp_threads);
        let udp = udp_config(
            args.rt.datagram_bytes,
            threads,
            args.rt.udp_window_datagrams,
            args.rt.insecure_no_auth,
        )?;
        let faults = args.loss > 0.0 || args.dup > 0.0 || args.jitter_us > 0.0 || args.reorder > 0.0;
        if faults || args.link_gbps > 0.0 {
            return Err("link faults and rates belong to the inproc runtime; over udp the kernel's sockets are the links".into());
        }
        c.udp = Some(udp);
    }
    if let Some(before) = args.start_before_wrap_ns {
        c.clock_start = Instant::from_nanos((1u64 << 48).saturating_sub(before));
    }
    Ok(c)
}

fn progress_bar(quiet: bool, label: &'static str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1000);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:40}] {percent:>3}% {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(label);
    bar
}

fn run_with_bar(config: &DemoConfig, ordering: bool, quiet: bool) -> Result<PhaseResult, String> {
    let bar = progress_bar(quiet, if ordering { "ordered" } else { "unordered" });
    let result = run_phase(config, ordering, &mut |done, delivered| {
        bar.set_position((done * 1000.0) as u64);
        bar.set_message(format!("{delivered} delivered"));
    })
    .map_err(|e| e.to_string());
    bar.finish_and_clear();
    result
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let config = config_from(&args)?;
    let quiet = args.out.json;
    if !quiet {
        eprintln!(
            "onepipe demo: {} ({} switches, {} hosts), {} process(es) per host, {}-byte all-to-all broadcast, {} s per phase",
            config.topology.name,
            config.topology.switches.len(),
            config.topology.hosts.len(),
            config.processes_per_host,
            config.message_bytes,
            args.seconds
        );
    }
    let ordered = run_with_bar(&config, true, quiet)?;
    let unordered = if args.no_baseline {
        None
    } else {
        Some(run_with_bar(&config, false, quiet)?)
    };
    if let Some(dir) = &args.log_dir {
        write_logs(dir, &ordered).map_err(|e| format!("cannot write logs to {}: {e}", dir.display()))?;
    }
    let outcome = summarize(&config, args.skew_us, &ordered, unordered.as_ref());
    let (summary, report, lost, partial) =
        (&outcome.summary, &outcome.report, &outcome.lost, &outcome.partial);
    if args.out.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("summary serializes")
        );
    } else {
        print_summary(summary, report);
        if let Some(first) = lost.first() {
            println!(
                "{} losses (messages not delivered exactly once, scatterings never released); first: {first}",
                lost.len()
            );
        }
        if let Some(first) = partial.first() {
            println!(
                "{} scatterings delivered by some correct receivers only; first: {first}",
                partial.len()
            );
        }
    }
    Ok(if outcome.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_summary(s: &Summary, report: &Report) {
    let m = |v: f64| v / 1e6;
    println!("topology           {} ({} processes)", s.topology, s.processes);
    println!(
        "delivered          {} messages in {:.2} s ({} sent)",
        s.delivered, s.seconds, s.messages_sent
    );
    println!(
        "throughput         {:.2} M msg/s total, {:.3} M msg/s per process",
        m(s.throughput_msgs_per_s),
        m(s.throughput_per_process_msgs_per_s)
    );
    println!(
        "latency            p50 {:.1} us, p99 {:.1} us",
        s.latency_us.p50, s.latency_us.p99
    );
    if let (Some(t), Some(l), Some(r)) = (
        s.unordered_throughput_msgs_per_s,
        &s.unordered_latency_us,
        s.ordered_to_unordered_throughput_ratio,
    ) {
        println!(
            "unordered baseline {:.2} M msg/s, latency p50 {:.1} us, p99 {:.1} us",
            m(t),
            l.p50,
            l.p99
        );
        println!(
            "ordering cost      throughput x{:.2}, median latency +{:.1} us (beacon interval {} us, skew ±{} us)",
            r,
            s.latency_us.p50 - l.p50,
            s.beacon_interval_us,
            s.skew_us
        );
    }
    println!(
        "beacons            {:.2} M/s, {:.1}% of frames on links (over {:.2} s, drain included)",
        m(s.beacons_per_s),
        100.0 * s.beacon_share_of_frames,
        s.run_seconds
    );
    println!(
        "drops              {} late, {} incomplete, {} reorder-full; {} send failures; {} links removed",
        s.late_drops, s.incomplete_drops, s.reorder_full_drops, s.send_failures, s.links_removed
    );
    println!(
        "reorder buffer     peak {:.1} KiB, {} messages (per process)",
        s.reorder_bytes_peak as f64 / 1024.0,
        s.reorder_messages_peak
    );
    if s.service == "reliable" || s.link_drops + s.link_duplicates + s.link_reordered > 0 {
        println!(
            "faults             {} frames dropped, {} duplicated, {} passed by later ones on links; {} retransmissions; {} ECN marks",
            s.link_drops, s.link_duplicates, s.link_reordered, s.retransmissions, s.ecn_marked
        );
    }
    println!(
        "checks             over {} events ({})",
        s.events_checked, s.service
    );
    let c = &s.checks.order;
    for (name, ok) in [
        ("total order", c.total_order),
        ("FIFO", c.fifo),
        ("causality", c.causality),
        ("no duplicates", c.no_duplicates),
        ("no creation", c.no_creation),
    ] {
        println!("  {:<16} {}", name, if ok { "pass" } else { "FAIL" });
    }
    if let Some(ok) = s.checks.no_loss {
        println!("  {:<16} {}", "no loss", if ok { "pass" } else { "FAIL" });
    }
    if let Some(ok) = s.checks.atomicity {
        println!("  {:<16} {}", "atomicity", if ok { "pass" } else { "FAIL" });
    }
    if let Some(failed) = &s.failed_processes {
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} us"));
        println!(
            "failures           processes {:?} declared failed; detected after {}, resumed after {}{}, \
             commit barrier stalled {} on average; {} scatterings aborted",
            failed,
            us(s.detection_us),
            us(s.first_resume_us),
            if s.resume_us == s.first_resume_us {
                String::new()
            } else {
                format!(" (last Resume after {})", us(s.resume_us))
            },
            us(s.recovery_us),
            s.aborted.unwrap_or(0)
        );
    }
    if !report.ok() {
        println!("{report}");
    }
}
