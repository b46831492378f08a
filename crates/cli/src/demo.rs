//! `onepipe demo`: the paper-testbed fat-tree, all-to-all broadcast, ordered and unordered in
//! one run, every check on the ordered run's event logs.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use onepipe_bench::demo::{DemoConfig, FailTarget, PhaseResult, PlannedFailure, run_phase};
use onepipe_bench::runtimes::{beacon_interval, promise_lead, udp_config, udp_threads};
use onepipe_check::{Checks, Report, check_all};
use onepipe_fabric::Topology;
use onepipe_runtime::inproc::LinkFaults;
use onepipe_wire::{Duration, Instant};
use serde::Serialize;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Topology preset (testbed, single:HOSTS, leaf-spine:L,S,H, three-layer:P,T,S,C,H, fat-tree:K)
    #[arg(long, default_value = "testbed", conflicts_with = "topology_file")]
    topology: String,
    /// Topology from a TOML file (docs/topology.md)
    #[arg(long, value_name = "FILE")]
    topology_file: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    processes_per_host: u32,
    #[arg(long, default_value_t = 64)]
    message_bytes: usize,
    /// How often hosts and idle links send beacons [default: each runtime's own: 50 inproc,
    /// 500 udp (`onepipe up`'s)]
    #[arg(long)]
    beacon_interval_us: Option<f64>,
    /// Hosts promise their barrier this far ahead of their clock at the end of each visit of
    /// their thread; 0 turns promises off (docs/ordering.md, "Promises") [default: each
    /// runtime's own: off inproc, 5000 udp]
    #[arg(long)]
    promise_lead_us: Option<f64>,
    /// Largest clock offset of a host from the shared clock; each host draws uniformly in ±skew
    #[arg(long, default_value_t = 0.3)]
    skew_us: f64,
    /// Extra one-way delay on every link
    #[arg(long, default_value_t = 0.0)]
    link_delay_us: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Broadcasts per second per process (open loop, Poisson arrivals); 0 sends as fast as the fabric takes them
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Length of each phase (ordered, then unordered)
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Worker threads (default: one per core)
    #[arg(long)]
    workers: Option<usize>,
    /// An input link silent for this many beacon intervals is removed. The paper uses 10 at 3 us
    /// with a core per switch; here switches share two cores with everything else and a worker
    /// can be descheduled for milliseconds, so the default allows 25 ms at the default interval
    #[arg(long, default_value_t = 500)]
    dead_after_beacons: u32,
    /// Capacity of every link's queue in bytes (a 64-byte message is a 122-byte frame)
    #[arg(long, default_value_t = 2048)]
    link_capacity_bytes: usize,
    /// inproc: hosts are visited once in this many passes of their worker thread (or sooner
    /// when half a ring waits for them); switches every pass. 1 visits every node every pass;
    /// 0 chooses 2 where there are several switches, 1 behind a single switch
    #[arg(long, default_value_t = 0)]
    edge_visit_interval_passes: u32,
    /// Start the shared clock this many ns before the 48-bit wire timestamps wrap
    #[arg(long)]
    start_before_wrap_ns: Option<u64>,
    /// Skip the unordered baseline phase
    #[arg(long)]
    no_baseline: bool,
    /// Print one JSON object instead of the summary
    #[arg(long)]
    json: bool,
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
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Probability that a link delivers a frame twice
    #[arg(long, default_value_t = 0.0)]
    dup: f64,
    /// Probability that a link holds a frame back until the next one has passed it (links stop
    /// being FIFO: best effort drops what arrives below the barrier and NAKs it)
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Extra delay per frame, uniform up to this; links stay FIFO
    #[arg(long, default_value_t = 0.0)]
    jitter_us: f64,
    /// Serialization rate of every link in Gbit/s (queues build and switches mark ECN past
    /// --ecn-threshold-bytes); 0 is as fast as the workers go
    #[arg(long, default_value_t = 0.0)]
    link_gbps: f64,
    #[arg(long, default_value_t = 1024)]
    ecn_threshold_bytes: usize,
    /// inproc: every link a ring in memory; udp: every node on a thread with its own UDP
    /// socket on loopback (link faults and rates then do not apply)
    #[arg(long, value_enum, default_value_t = RuntimeKind::Inproc)]
    runtime: RuntimeKind,
    /// udp runtime: largest datagram, header included
    #[arg(long, default_value_t = 8_972)]
    datagram_bytes: usize,
    /// udp runtime: OS threads that run the nodes, each node keeping its own socket; 0 is a
    /// thread per node, as `onepipe up` runs them [default: one per core]
    #[arg(long)]
    udp_threads: Option<usize>,
    /// udp runtime: most datagrams in flight on a link (its credit window, at least 2)
    #[arg(long, default_value_t = 16)]
    udp_window_datagrams: usize,
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

#[derive(Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
}

#[derive(Serialize)]
struct Summary {
    topology: String,
    processes: usize,
    seconds: f64,
    message_bytes: usize,
    delivered: u64,
    messages_sent: u64,
    throughput_msgs_per_s: f64,
    throughput_per_process_msgs_per_s: f64,
    unordered_throughput_msgs_per_s: Option<f64>,
    ordered_to_unordered_throughput_ratio: Option<f64>,
    latency_us: Percentiles,
    unordered_latency_us: Option<Percentiles>,
    beacon_interval_us: f64,
    /// How far ahead hosts promised their barriers; absent: no promises.
    #[serde(skip_serializing_if = "Option::is_none")]
    promise_lead_us: Option<f64>,
    /// Beacons sent per second by hosts and switches together (the cost of the barrier), over
    /// the whole phase: the sending window and the drain after it (see `run_seconds`).
    beacons_per_s: f64,
    /// Of those, hosts' promises (`--promise-lead-us`).
    promises_per_s: f64,
    /// How long the ordered phase's fabric ran, drain included.
    run_seconds: f64,
    /// Beacons among all frames put on links (data frames are counted once per hop), over the
    /// whole phase.
    beacon_share_of_frames: f64,
    skew_us: f64,
    send_failures: u64,
    late_drops: u64,
    incomplete_drops: u64,
    reorder_full_drops: u64,
    links_removed: u64,
    malformed: u64,
    reorder_bytes_peak: usize,
    reorder_messages_peak: usize,
    events_checked: usize,
    service: &'static str,
    retransmissions: u64,
    /// Reliable runs: why packets went again.
    #[serde(skip_serializing_if = "Option::is_none")]
    retransmit_causes: Option<RetransmitCauses>,
    link_drops: u64,
    link_duplicates: u64,
    link_reordered: u64,
    ecn_marked: u64,
    /// Over the udp runtime: datagrams and frames the sockets carried and lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    udp: Option<onepipe_runtime::udp::local::UdpTotals>,
    checks: AllChecks,
    /// Runs with --fail: the processes the controller declared failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_processes: Option<Vec<u32>>,
    /// Runs with --fail: from the first failure to the first report reaching the controller,
    /// and to the controller's first and last Resume (a later Resume than the failure's own
    /// answers a later event, such as a link declared dead on a stalled worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    detection_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_resume_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resume_us: Option<f64>,
    /// Runs with --fail: the barrier stall correct processes saw, from the failure to their
    /// first delivery of a message stamped after it (mean over them).
    #[serde(skip_serializing_if = "Option::is_none")]
    recovery_us: Option<f64>,
    /// Runs with --fail: reliable scatterings aborted because a receiver failed (Recall).
    #[serde(skip_serializing_if = "Option::is_none")]
    aborted: Option<u64>,
    /// Reliable runs: recorded scatterings accepted but never released from the send buffer
    /// nor reported failed (lost without a trace in the logs; counted by `checks.no_loss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    never_released: Option<u64>,
}

#[derive(Serialize)]
struct RetransmitCauses {
    /// Retransmission timeouts, one per connection and expiry (each resends every packet of
    /// it that was due).
    timeouts: u64,
    /// Packets resent because later ones on their connection were acknowledged first.
    fast_retransmits: u64,
    /// Timeouts an ACK of the first copy showed were spurious (the packet was late, not lost).
    spurious_timeouts: u64,
}

#[derive(Serialize)]
struct AllChecks {
    #[serde(flatten)]
    order: Checks,
    /// Reliable runs where no process failed: every message sent was delivered exactly once
    /// by its destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_loss: Option<bool>,
    /// Runs with --fail: every scattering was delivered by all of its correct receivers or by
    /// none (paper 2.1, restricted failure atomicity).
    #[serde(skip_serializing_if = "Option::is_none")]
    atomicity: Option<bool>,
}

/// `--fail TARGET@TIME` against the topology.
fn parse_failure(spec: &str, topology: &Topology) -> Result<PlannedFailure, String> {
    let (what, when) = spec
        .split_once('@')
        .ok_or_else(|| format!("--fail `{spec}`: expected TARGET@TIME, like host:5@1s"))?;
    let at = onepipe_sim::config::parse_time(when).map_err(|e| format!("--fail `{spec}`: {e}"))?;
    let switch = |name: &str| -> Result<usize, String> {
        let by_layer = |layer: u8, n: &str| {
            let n: usize = n
                .parse()
                .map_err(|_| format!("--fail `{spec}`: `{n}` is not a number"))?;
            let mut of_layer = (0..topology.switches.len()).filter(|&s| topology.switches[s].layer == layer);
            of_layer
                .nth(n)
                .ok_or_else(|| format!("--fail `{spec}`: the topology has no {name}"))
        };
        match name.split_once(':') {
            Some(("tor", n)) => by_layer(1, n),
            Some(("spine", n)) => by_layer(2, n),
            Some(("core", n)) => by_layer(3, n),
            _ => topology
                .switches
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| {
                    format!(
                        "--fail `{spec}`: no switch named `{name}` ({})",
                        topology.switch_names_hint()
                    )
                }),
        }
    };
    let target = match what.split_once(':') {
        Some(("host", h)) => {
            let h: usize = h
                .parse()
                .map_err(|_| format!("--fail `{spec}`: host:H takes a host number"))?;
            if h >= topology.hosts.len() {
                return Err(format!(
                    "--fail `{spec}`: the topology has {} hosts",
                    topology.hosts.len()
                ));
            }
            FailTarget::Host(h)
        }
        Some(("switch", name)) => FailTarget::Switch(switch(name)?),
        Some(("link", ends)) => {
            let (a, b) = ends
                .split_once('-')
                .ok_or_else(|| format!("--fail `{spec}`: a link is named A-B"))?;
            FailTarget::Link(switch(a)?, switch(b)?)
        }
        Some(("tor" | "spine" | "core", _)) => FailTarget::Switch(switch(what)?),
        _ => {
            return Err(format!(
                "--fail `{spec}`: expected host:H, tor:N, spine:N, core:N, switch:NAME or link:A-B"
            ));
        }
    };
    Ok(PlannedFailure { target, at })
}

fn us(v: f64) -> Duration {
    Duration::from_nanos((v * 1_000.0).round().max(0.0) as u64)
}

fn config_from(args: &DemoArgs) -> Result<DemoConfig, String> {
    let topology = match &args.topology_file {
        Some(path) => Topology::from_file(path),
        None => Topology::preset(&args.topology),
    }
    .map_err(|e| e.to_string())?;
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
    if let Some(b) = args.beacon_interval_us {
        positive("beacon-interval-us", b)?;
    }
    non_negative("skew-us", args.skew_us)?;
    if let Some(lead) = args.promise_lead_us {
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
    if args.dead_after_beacons == 0 {
        return Err("--dead-after-beacons must be at least 1".into());
    }
    if args.workers == Some(0) {
        return Err("--workers must be at least 1".into());
    }
    let mut c = DemoConfig {
        topology,
        processes_per_host: args.processes_per_host,
        message_bytes: args.message_bytes,
        beacon_interval: beacon_interval(args.beacon_interval_us, args.runtime.into()),
        promise_lead: promise_lead(args.promise_lead_us, args.runtime.into()),
        skew: us(args.skew_us),
        seed: args.seed,
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        link_delay: us(args.link_delay_us),
        dead_after_intervals: args.dead_after_beacons,
        link_capacity_bytes: args.link_capacity_bytes,
        edge_visit_interval_passes: args.edge_visit_interval_passes,
        rate_per_process: args.rate,
        reliable: args.reliable,
        faults: LinkFaults {
            loss: args.loss,
            duplicate: args.dup,
            jitter: us(args.jitter_us),
            reorder: args.reorder,
            seed: args.seed,
        },
        link_bits_per_s: (args.link_gbps > 0.0).then_some((args.link_gbps * 1e9) as u64),
        ecn_threshold_bytes: args.ecn_threshold_bytes,
        ..DemoConfig::default()
    };
    if let Some(w) = args.workers {
        c.workers = w;
    }
    if !args.fail.is_empty() {
        if !args.reliable || args.runtime == RuntimeKind::Udp {
            return Err("--fail needs --reliable on the inproc runtime".into());
        }
        c.failures = args
            .fail
            .iter()
            .map(|f| parse_failure(f, &c.topology))
            .collect::<Result<_, _>>()?;
    }
    if args.runtime == RuntimeKind::Udp {
        let threads = udp_threads(args.udp_threads);
        let udp = udp_config(args.datagram_bytes, threads, args.udp_window_datagrams)?;
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

fn write_logs(dir: &Path, result: &PhaseResult) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for log in &result.logs {
        let file = std::fs::File::create(dir.join(format!("{}.log", log.process)))?;
        let mut w = BufWriter::new(file);
        for e in &log.events {
            onepipe_check::write_event(&mut w, e)?;
        }
        w.flush()?;
    }
    Ok(())
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let config = config_from(&args)?;
    let quiet = args.json;
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
    let report: Report = check_all(&ordered.logs);
    let failure = ordered.failure.as_ref();
    let failed: Vec<u32> = failure.map_or(Vec::new(), |f| f.failed_processes.iter().map(|p| p.0).collect());
    // With failed processes, messages to and from them and aborted scatterings are not
    // delivered on purpose: atomicity is the check then. With none (a link or a switch with
    // a way around it), nothing may be lost.
    let lost = if args.reliable && failed.is_empty() {
        ordered.lost()
    } else {
        Vec::new()
    };
    let partial = if failure.is_some() {
        onepipe_check::check_atomicity(&ordered.logs, &failed)
    } else {
        Vec::new()
    };
    let events_checked = ordered.logs.iter().map(|l| l.events.len()).sum();
    let percentiles = |r: &PhaseResult| Percentiles {
        p50: r.latency_us(0.5),
        p99: r.latency_us(0.99),
    };
    let beacons = ordered.endpoint.beacons_sent + ordered.switch.beacons_sent;
    let data_frames = ordered.endpoint.packets_sent + ordered.switch.forwarded;
    let summary = Summary {
        topology: config.topology.name.clone(),
        processes: ordered.processes,
        seconds: ordered.seconds,
        message_bytes: config.message_bytes,
        delivered: ordered.delivered,
        messages_sent: ordered.messages_sent,
        throughput_msgs_per_s: ordered.throughput_msgs_per_s(),
        throughput_per_process_msgs_per_s: ordered.throughput_msgs_per_s() / ordered.processes as f64,
        unordered_throughput_msgs_per_s: unordered.as_ref().map(|u| u.throughput_msgs_per_s()),
        ordered_to_unordered_throughput_ratio: unordered
            .as_ref()
            .map(|u| ordered.throughput_msgs_per_s() / u.throughput_msgs_per_s().max(1.0)),
        latency_us: percentiles(&ordered),
        unordered_latency_us: unordered.as_ref().map(percentiles),
        beacon_interval_us: beacon_interval(args.beacon_interval_us, args.runtime.into()).as_micros_f64(),
        promise_lead_us: config.promise_lead.map(|d| d.as_micros_f64()),
        beacons_per_s: beacons as f64 / ordered.run_seconds,
        promises_per_s: ordered.endpoint.promises_sent as f64 / ordered.run_seconds,
        run_seconds: ordered.run_seconds,
        beacon_share_of_frames: beacons as f64 / (beacons + data_frames).max(1) as f64,
        skew_us: args.skew_us,
        send_failures: ordered.send_failures,
        late_drops: ordered.endpoint.late,
        incomplete_drops: ordered.endpoint.incomplete,
        reorder_full_drops: ordered.endpoint.reorder_full,
        links_removed: ordered.switch.links_removed,
        malformed: ordered.endpoint.malformed + ordered.switch.malformed,
        reorder_bytes_peak: ordered.reorder_bytes_peak,
        reorder_messages_peak: ordered.reorder_messages_peak,
        events_checked,
        service: if args.reliable { "reliable" } else { "best-effort" },
        retransmissions: ordered.retransmissions,
        retransmit_causes: args.reliable.then_some(RetransmitCauses {
            timeouts: ordered.timeouts,
            fast_retransmits: ordered.fast_retransmits,
            spurious_timeouts: ordered.spurious_timeouts,
        }),
        link_drops: ordered.link_drops,
        link_duplicates: ordered.link_duplicates,
        link_reordered: ordered.link_reordered,
        ecn_marked: ordered.ecn_marked,
        udp: ordered.udp.clone(),
        checks: AllChecks {
            order: report.checks(),
            no_loss: (args.reliable && failed.is_empty()).then_some(lost.is_empty()),
            atomicity: failure.map(|_| partial.is_empty()),
        },
        failed_processes: failure.map(|_| failed.clone()),
        detection_us: failure.and_then(|f| f.detection_us),
        first_resume_us: failure.and_then(|f| f.first_resume_us),
        resume_us: failure.and_then(|f| f.resume_us),
        recovery_us: failure.and_then(|f| f.recovery_us),
        aborted: failure.map(|f| f.aborted),
        never_released: args.reliable.then_some(ordered.never_released),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("summary serializes")
        );
    } else {
        print_summary(&summary, &report);
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
    Ok(if report.ok() && lost.is_empty() && partial.is_empty() {
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
