//! `onepipe sim`: the deterministic simulator. One run from a seed (`onepipe sim --seed S`),
//! replayable exactly; campaigns and paper figures are subcommands.

use crate::flags::{DeadAfterFlag, JsonFlag, MessageBytesFlag, SeedFlag, TimeAheadFlag, TopologyFlags};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use onepipe_sim::config::parse_time;
use onepipe_sim::traffic::Pattern;
use onepipe_sim::{ClockStep, Failure, SimConfig, SimReport};
use onepipe_wire::Duration;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    command: Option<SimCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum SimCommand {
    /// Many seeds, each drawing its own fabric, workload, clocks and faults; reports failing seeds
    Campaign(CampaignArgs),
    /// Paper Fig. 8: saturated all-to-all broadcast, 1Pipe vs sequencers, token, Lamport
    Fig8(FigureArgs),
    /// Paper Fig. 9a: idle latency vs processes (best effort, reliable, unordered)
    Fig9a(FigureArgs),
    /// Paper Fig. 9b: latency vs packet loss probability
    Fig9b(FigureArgs),
    /// Paper Fig. 10: reliable 1Pipe's failure recovery time vs hosts (host, ToR, core link,
    /// core switch)
    Fig10(crate::sim_figures::Fig10Args),
    /// Paper Fig. 11: reorder overhead vs reordering delay: the buffer in the simulator, the
    /// delivery rate of the real receive path on this CPU
    Fig11(crate::sim_figures::Fig11Args),
    /// Paper Fig. 12: latency vs background DCTCP flows per host (a) and vs the ToRs'
    /// oversubscription (b)
    Fig12(crate::sim_figures::Fig12Args),
    /// Paper 7.2: what one 1 MB message adds to the latency of small messages
    LargeMessage(crate::sim_figures::LargeMessageArgs),
    /// Paper Fig. 13: beacon bandwidth overhead (and latency) vs beacon interval
    Fig13(FigureArgs),
    /// Best-effort latency and barrier lag vs hosts, up to 32,768
    Scale(FigureArgs),
    /// NetChain on its testbed or a spine-leaf, seeded: loss, reordering, a switch's failure
    Netchain(Box<crate::sim_netchain::NetchainSimArgs>),
    /// NetChain paper Fig. 9(c)-(f): throughput vs write ratio and loss, latency vs
    /// throughput, scaling from 6 to 96 switches
    NetchainFig9(crate::sim_netchain::NetchainFigureArgs),
    /// NetChain paper Fig. 10: throughput over time as a middle switch fails and is replaced,
    /// 1 and 100 virtual groups
    NetchainFig10(crate::sim_netchain::NetchainFigureArgs),
    /// In-network (or software) Paxos on its testbed, seeded: loss, duplication, reordering, a
    /// role's failure; agreement, validity and linearizability checked
    Paxos(Box<crate::sim_paxos::PaxosSimArgs>),
    /// Many seeded Paxos runs, each with random link faults and one failure; fails if any check
    /// fails
    PaxosCampaign(crate::sim_paxos::PaxosCampaignArgs),
    /// Thesis 004's end-to-end figure: values/s and latency vs clients, in-network vs software
    PaxosThroughput(crate::sim_paxos::PaxosFigureArgs),
    /// Thesis 004 chapter 6: values/s vs partitions (1, 2, 4), in-network
    PaxosPartitions(crate::sim_paxos::PaxosFigureArgs),
    /// NetPaxos's fast mode (thesis 004 chapter 4); fails if the learners disagree
    Netpaxos(crate::sim_paxos::NetpaxosArgs),
    /// Paper Fig. 14: the transactional key-value store, 1Pipe vs OCC vs non-transactional:
    /// throughput vs processes (a), latency vs write share (b), KV ops/s vs keys per txn (c)
    KvFig14(Box<crate::sim_kv::KvFig14Args>),
    /// cosy paper 6.3: a failure detector's detection time and false positives
    CosyDetector(crate::sim_cosy_apps::DetectorArgs),
    /// cosy paper 6.1: a storage client polling vs sleeping until the bound, next to a
    /// CPU-bound job
    CosyStorage(crate::sim_cosy_apps::StorageArgs),
    /// cosy (paper 003, Figs. 4 and 5): the bound delta and the maximum sustainable load vs K
    CosyTradeoff(Box<crate::sim_cosy::CosySearchArgs>),
    /// cosy (paper 003, Theorem 3.4): sustainable load / Theta* vs f(K, C)
    CosyTheta(Box<crate::sim_cosy::CosySearchArgs>),
    /// cosy (paper 003, Fig. 4 right): slowdown vs load per message size, cosy vs 1Pipe
    CosySlowdown(Box<crate::sim_cosy::CosySlowdownArgs>),
}

/// A figure: rows as JSON and a PNG plot.
#[derive(Args, Debug)]
pub struct FigureArgs {
    /// Swept values (fig9a: processes; fig9b: end-to-end loss probabilities; fig13: beacon
    /// intervals in us; scale: hosts), comma-separated
    #[arg(long, value_delimiter = ',', value_parser = crate::bounds::float(0.0, crate::bounds::PROCESSES_MAX as f64))]
    points: Vec<f64>,
    /// Processes for fig9b
    #[arg(long, default_value_t = 512, value_parser = crate::bounds::int::<u32>(1..=crate::bounds::PROCESSES_MAX))]
    processes: u32,
    /// Directory for NAME.json and NAME.png
    #[arg(long, default_value = "figures")]
    out: PathBuf,
    /// fig9a: how long a switch CPU takes per beacon in the switch-CPU series (paper 6.2.2;
    /// an assumption, docs/incarnations.md)
    #[arg(long, default_value_t = 5.0, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    cpu_delay_us: f64,
    #[command(flatten)]
    output: JsonFlag,
}

impl FigureArgs {
    fn cpu_delay(&self) -> onepipe_wire::Duration {
        crate::demo::us(self.cpu_delay_us)
    }
}

#[derive(Args, Debug)]
pub struct CampaignArgs {
    /// Number of seeds to run
    #[arg(long, default_value_t = 50, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::SEEDS_MAX))]
    seeds: u64,
    /// The first seed (replay one failing seed S with --first-seed S --seeds 1)
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Worker threads (default: one per core)
    #[arg(long, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    threads: Option<usize>,
    /// Most concurrent faults a seed draws (links, switches, processes, overlapping in
    /// time); 1 draws what campaigns drew before several were possible
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    faults_max: u32,
    #[command(flatten)]
    output: JsonFlag,
}

/// The simulator's `--dead-after-intervals`: the paper's 10.
const DEAD_AFTER_INTERVALS: u32 = 10;

/// A simulated time, at most [`crate::bounds::SIM_SECONDS_MAX`].
pub(crate) fn time(s: &str) -> Result<Duration, String> {
    let t = parse_time(s)?;
    let max = Duration::from_secs(crate::bounds::SIM_SECONDS_MAX);
    if t > max {
        return Err(format!("{s} is not in 0s..={}s", crate::bounds::SIM_SECONDS_MAX));
    }
    Ok(t)
}

/// One simulated run; times take a unit (ns, us, ms, s).
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    fabric: TopologyFlags,
    #[arg(long, default_value = "3us", value_parser = time)]
    beacon_interval: Duration,
    /// Mean clock offset magnitude of a host (offsets uniform in ±2x this)
    #[arg(long, default_value = "300ns", value_parser = time)]
    skew: Duration,
    /// Largest clock rate error of a host, in parts per million
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::float(0.0, onepipe_proto::clock::DRIFT_PPB_MAX as f64 / 1000.0))]
    drift_ppm: f64,
    /// Rate of every link with a process at one end (0: infinitely fast)
    #[arg(long, default_value_t = 100.0, value_parser = crate::bounds::float(0.0, crate::bounds::GBPS_MAX))]
    link_gbps: f64,
    /// Rate of the links between switches, if not --link-gbps (a bundle of cables as one link)
    #[arg(long, value_parser = crate::bounds::float(0.0, crate::bounds::GBPS_MAX))]
    fabric_gbps: Option<f64>,
    /// Propagation delay of every link
    #[arg(long, default_value = "100ns", value_parser = time)]
    link_delay: Duration,
    /// Processing delay of a switch per frame
    #[arg(long, default_value = "700ns", value_parser = time)]
    switch_delay: Duration,
    /// One-way delay of a process's NIC and stack
    #[arg(long, default_value = "550ns", value_parser = time)]
    host_nic_delay: Duration,
    /// CPU time of a host per frame sent or received (bounds a process's message rate)
    #[arg(long, default_value = "65ns", value_parser = time)]
    host_frame_cost: Duration,
    /// With --incarnation host: CPU time of a switch's representative per beacon in or out
    #[arg(long, default_value = "40ns", value_parser = time)]
    representative_frame_cost: Duration,
    #[arg(long, default_value_t = 1 << 20, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::BYTES_MAX))]
    queue_capacity_bytes: usize,
    #[arg(long, default_value_t = 100 * 1024, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::BYTES_MAX))]
    ecn_threshold_bytes: usize,
    #[arg(long, default_value_t = 1500, value_parser = crate::bounds::int::<usize>(64..=u16::MAX as u64))]
    mtu_bytes: usize,
    /// Send buffer of each process, in packets (best effort; reliable too if given)
    #[arg(long, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::PACKETS_MAX))]
    send_buffer_packets: Option<usize>,
    /// Probability that a link loses a frame
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Probability that a link delivers a frame twice
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    dup: f64,
    /// Probability that a link holds a frame back (up to 2 us) so later frames pass it: links
    /// stop being FIFO, which late drops and NAKs must handle
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    reorder: f64,
    /// Loss, duplication and reordering stop this long after traffic starts (default: never)
    #[arg(long, value_parser = time)]
    faults_for: Option<Duration>,
    /// A failure: link:A-B@T[+D], switch:NAME@T[+D], host:P@T[+D], representative:NAME@T[+D] (the host representative of switch NAME, with --incarnation host; T after traffic starts, D how long); repeatable
    #[arg(long = "fail")]
    failures: Vec<Failure>,
    /// A host's clock steps, as NTP steps a clock: host:P@T+D (forward) or host:P@T-D (back), T
    /// after traffic starts; repeatable. Timestamps and barriers never go back; --time-ahead-max-ms
    /// must cover the steps (the run says by how much)
    #[arg(long = "clock-step")]
    clock_steps: Vec<ClockStep>,
    /// Destinations of each scattering: broadcast, random:K, incast:P, pair:A-B (only A sends, to B)
    #[arg(long, default_value = "broadcast")]
    pattern: Pattern,
    /// Mean gap between a process's scatterings (Poisson); 0ns saturates
    #[arg(long, default_value = "20us", value_parser = time)]
    gap: Duration,
    /// Draw message sizes uniformly from --message-bytes up to this
    #[arg(long, value_parser = crate::bounds::int::<usize>(0..=crate::bounds::MESSAGE_BYTES_MAX))]
    message_bytes_max: Option<usize>,
    #[arg(long)]
    reliable: bool,
    /// Reliable: cap of the retransmission timeout [default: 100us, 2ms with --gap 0ns]. A cap
    /// keeps a packet that keeps being lost from holding everyone's delivery for long; but
    /// saturated, round trips queue for hundreds of us, and below them every packet times out
    /// before its ACK comes (and Karn's rule keeps the estimate from ever learning the RTT).
    #[arg(long, value_parser = time)]
    rto_max: Option<Duration>,
    /// Run the controller (paper 5.2) over management links: processes cut off by a --fail are
    /// declared failed, the rest recover; reports atomicity and the recovery time (needs
    /// --reliable; failures are then permanent)
    #[arg(long)]
    controller: bool,
    /// One-way delay of a management link between the controller and a node
    #[arg(long, default_value = "6us", value_parser = time)]
    control_delay: Duration,
    /// Controller CPU time per control frame, and per failure notification an announcement
    /// carries (0ns: an infinitely fast controller)
    #[arg(long, default_value = "1us", value_parser = time)]
    controller_frame_cost: Duration,
    /// How long traffic runs
    #[arg(long = "send", default_value = "500us", value_parser = time)]
    send_for: Duration,
    /// Measure throughput and latency only from this long after traffic starts (steady state)
    #[arg(long, default_value = "0ns", value_parser = time)]
    measure_after: Duration,
    /// How long the run continues after traffic stops
    #[arg(long, default_value = "200us", value_parser = time)]
    drain: Duration,
    /// After --drain, the run goes on while some process still has messages in flight and they
    /// still move (delivered, acknowledged or failed within 1 ms or four RTO caps), until this
    /// long after traffic stops (saturated traffic leaves a backlog: ~1 ms for all-to-all on the
    /// testbed, ~40 ms for an incast); a value no longer than --drain keeps the drain fixed
    #[arg(long, default_value = "1s", value_parser = time)]
    drain_max: Duration,
    /// Messages sent this long after all faults healed must all be delivered
    #[arg(long, default_value = "100us", value_parser = time)]
    settle: Duration,
    /// Stop with an error after this many events
    #[arg(long, default_value_t = 2_000_000_000, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::EVENTS_MAX))]
    events_max: u64,
    /// Stop with an error when the process uses more memory than this
    #[arg(long, default_value_t = 16 * 1024, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::MEMORY_MB_MAX))]
    memory_mb_max: u64,
    #[command(flatten)]
    msg: MessageBytesFlag,
    #[command(flatten)]
    dead: DeadAfterFlag,
    #[command(flatten)]
    time_ahead: TimeAheadFlag,
    #[command(flatten)]
    rng: SeedFlag,
    #[command(flatten)]
    incarnation: crate::flags::IncarnationFlags,
    #[command(flatten)]
    output: JsonFlag,
}

impl RunArgs {
    pub fn config(&self) -> Result<SimConfig, String> {
        let topology = self.fabric.load()?;
        for (name, v) in [
            ("drift-ppm", self.drift_ppm),
            ("link-gbps", self.link_gbps),
            ("fabric-gbps", self.fabric_gbps.unwrap_or(0.0)),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("--{name} must be zero or positive"));
            }
        }
        Ok(SimConfig {
            seed: self.rng.seed,
            topology,
            processes_per_host: self.fabric.processes_per_host,
            beacon_interval: self.beacon_interval,
            skew_mean: self.skew,
            drift_ppb_max: (self.drift_ppm * 1000.0).round() as u32,
            time_ahead_max: self.time_ahead.duration()?,
            link_bits_per_s: (self.link_gbps * 1e9).round() as u64,
            fabric_link_bits_per_s: self.fabric_gbps.map(|g| (g * 1e9).round() as u64),
            link_delay: self.link_delay,
            switch_delay: self.switch_delay,
            host_nic_delay: self.host_nic_delay,
            host_frame_cost: self.host_frame_cost,
            representative_frame_cost: self.representative_frame_cost,
            queue_capacity_bytes: self.queue_capacity_bytes,
            ecn_threshold_bytes: self.ecn_threshold_bytes,
            mtu_bytes: self.mtu_bytes,
            send_buffer_packets: self.send_buffer_packets.unwrap_or(4096),
            reliable_config: onepipe_proto::reliable::ReliableConfig {
                send_buffer_packets_max: self
                    .send_buffer_packets
                    .unwrap_or(onepipe_proto::reliable::ReliableConfig::default().send_buffer_packets_max),
                rto_max: self.rto_max.unwrap_or(if self.gap == Duration::ZERO {
                    onepipe_sim::config::SATURATED_RTO_MAX
                } else {
                    onepipe_sim::config::microsecond_reliable().rto_max
                }),
                ..onepipe_sim::config::microsecond_reliable()
            },
            dead_after_intervals: self.dead.dead_after_intervals.unwrap_or(DEAD_AFTER_INTERVALS),
            loss: self.loss,
            duplicate: self.dup,
            reorder: self.reorder,
            faults_for: self.faults_for,
            failures: self.failures.clone(),
            clock_steps: self.clock_steps.clone(),
            pattern: self.pattern,
            gap: self.gap,
            message_bytes_min: self.msg.message_bytes,
            message_bytes_max: self.message_bytes_max.unwrap_or(self.msg.message_bytes),
            reliable: self.reliable,
            controller: self.controller,
            control_delay: self.control_delay,
            controller_frame_cost: self.controller_frame_cost,
            send_for: self.send_for,
            measure_after: self.measure_after,
            drain: self.drain,
            drain_max: self.drain_max,
            settle: self.settle,
            events_max: self.events_max,
            memory_bytes_max: self.memory_mb_max.saturating_mul(1 << 20),
            incarnation: self.incarnation.incarnation(),
            ..SimConfig::default()
        })
    }
}

pub fn run(args: SimArgs) -> Result<ExitCode, String> {
    match args.command {
        None => run_one(&args.run),
        Some(SimCommand::Campaign(a)) => campaign(&a),
        Some(SimCommand::Fig8(a)) => figure(&a, "fig8"),
        Some(SimCommand::Fig9a(a)) => figure(&a, "fig9a"),
        Some(SimCommand::Fig9b(a)) => figure(&a, "fig9b"),
        Some(SimCommand::Fig10(a)) => crate::sim_figures::fig10(&a),
        Some(SimCommand::Fig11(a)) => crate::sim_figures::fig11(&a),
        Some(SimCommand::Fig12(a)) => crate::sim_figures::fig12(&a),
        Some(SimCommand::LargeMessage(a)) => crate::sim_figures::large_message(&a),
        Some(SimCommand::Fig13(a)) => figure(&a, "fig13"),
        Some(SimCommand::Scale(a)) => figure(&a, "scale"),
        Some(SimCommand::Netchain(a)) => crate::sim_netchain::run(&a),
        Some(SimCommand::NetchainFig9(a)) => crate::sim_netchain::figure(&a, "netchain-fig9"),
        Some(SimCommand::NetchainFig10(a)) => crate::sim_netchain::figure(&a, "netchain-fig10"),
        Some(SimCommand::Paxos(a)) => crate::sim_paxos::run(&a),
        Some(SimCommand::PaxosCampaign(a)) => crate::sim_paxos::campaign(&a),
        Some(SimCommand::PaxosThroughput(a)) => crate::sim_paxos::figure(&a, "paxos-throughput"),
        Some(SimCommand::PaxosPartitions(a)) => crate::sim_paxos::figure(&a, "paxos-partitions"),
        Some(SimCommand::Netpaxos(a)) => crate::sim_paxos::netpaxos(&a),
        Some(SimCommand::KvFig14(a)) => crate::sim_kv::fig14(&a),
        Some(SimCommand::CosyDetector(a)) => crate::sim_cosy_apps::detector(&a),
        Some(SimCommand::CosyStorage(a)) => crate::sim_cosy_apps::storage(&a),
        Some(SimCommand::CosyTradeoff(a)) => crate::sim_cosy::search(&a, "cosy-tradeoff"),
        Some(SimCommand::CosyTheta(a)) => crate::sim_cosy::search(&a, "cosy-theta"),
        Some(SimCommand::CosySlowdown(a)) => crate::sim_cosy::slowdown(&a),
    }
}

fn figure(args: &FigureArgs, name: &str) -> Result<ExitCode, String> {
    use onepipe_sim::figures;
    let defaults: &[f64] = match name {
        "fig8" => &[2.0, 8.0, 32.0, 128.0, 512.0],
        "fig9a" => &[2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
        "fig9b" => &[1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1],
        "fig13" => &[1.0, 3.0, 10.0, 30.0, 100.0],
        _ => &[32.0, 128.0, 512.0, 2048.0, 8192.0, 32768.0],
    };
    let points = if args.points.is_empty() {
        defaults.to_vec()
    } else {
        args.points.clone()
    };
    if points.iter().any(|p| !(p.is_finite() && *p > 0.0)) {
        return Err("--points must be positive numbers".into());
    }
    let counts = || points.iter().map(|&p| p.round() as u32).collect::<Vec<u32>>();
    let bar = progress_bar(args.output.json);
    let runs_per_point = match name {
        "fig8" => 6,
        "fig9a" => 5,
        "fig9b" => 3,
        _ => 1,
    };
    bar.set_length(points.len() as u64 * runs_per_point);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed {msg}")
            .expect("valid template"),
    );
    let mut progress = |r: &figures::Row| {
        bar.set_message(format!("{} at {}", r.series, r.x));
        bar.inc(1);
    };
    let fig = match name {
        "fig8" => figures::fig8(&counts(), &mut progress),
        "fig9a" => figures::fig9a(&counts(), args.cpu_delay(), &mut progress),
        "fig9b" => figures::fig9b(args.processes, &points, &mut progress),
        "fig13" => figures::fig13(&points, &mut progress),
        _ => figures::scale(&counts(), &mut progress),
    }
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let json_path =
        crate::sim_figures::publish_figure(&args.out, args.output.json, name, &fig, &fig.plots, || {
            println!(
                "{:<14} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}",
                "series",
                fig.x_name,
                "p50 us",
                "mean us",
                "p99 us",
                "lag us",
                "beacon %",
                "events/s",
                "violations"
            );
            for r in &fig.rows {
                println!(
                    "{:<14} {:>12} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.3} {:>12.0} {:>10}",
                    r.series,
                    r.x,
                    r.latency_us.p50,
                    r.latency_us.mean,
                    r.latency_us.p99,
                    r.barrier_lag_us.mean,
                    100.0 * r.beacon_overhead,
                    r.events_per_s,
                    r.violations
                );
            }
        })?;
    if fig.rows.iter().any(|r| r.violations > 0) {
        eprintln!("some runs had violations: see {}", json_path.display());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn campaign(args: &CampaignArgs) -> Result<ExitCode, String> {
    if args.seeds == 0 {
        return Err("--seeds must be at least 1".into());
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bar = progress_bar(args.output.json);
    bar.set_length(args.seeds);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {elapsed} elapsed")
            .expect("valid template"),
    );
    let report =
        onepipe_sim::campaign::run_campaign(args.first_seed, args.seeds, threads, args.faults_max, &|r| {
            if r.violations > 0 {
                bar.println(format!(
                    "seed={} FAILED ({} violations): {}",
                    r.seed,
                    r.violations,
                    r.problems.first().map_or("", |p| p.as_str())
                ));
            }
            bar.inc(1);
        });
    bar.finish_and_clear();
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        for r in &report.runs {
            println!(
                "seed {:>4}: {:<22} {:>3} processes {:<8} loss {:<6} dup {:<6} {:<40} {:>9} events {:>7} delivered: {}",
                r.seed,
                r.topology,
                r.processes,
                match (r.reliable, r.controller) {
                    (true, true) => "R+ctl",
                    (true, false) => "reliable",
                    _ => "BE",
                },
                r.loss,
                r.duplicate,
                r.failures.join(","),
                r.events,
                r.delivered,
                if r.violations == 0 {
                    "ok".to_string()
                } else {
                    format!("{} violations", r.violations)
                }
            );
        }
        println!(
            "{} seeds, {} events, {} violations, failing seeds: {:?}",
            report.seeds, report.events, report.violations, report.failing_seeds
        );
    }
    if report.violations > 0 {
        eprintln!(
            "replay a failing seed S with `onepipe sim campaign --first-seed S --seeds 1 --faults-max {}`",
            args.faults_max
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar over virtual time, hidden when printing JSON.
pub fn progress_bar(hidden: bool) -> ProgressBar {
    let bar = if hidden {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(1000)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {percent:>3}% of virtual time, {elapsed} elapsed")
            .expect("valid template"),
    );
    bar
}

fn run_one(args: &RunArgs) -> Result<ExitCode, String> {
    let config = args.config()?;
    let bar = progress_bar(args.output.json);
    let report = onepipe_sim::run(&config, &mut |t, end| {
        bar.set_position(1000 * t.as_nanos().min(end.as_nanos()) / end.as_nanos().max(1));
    })
    .map_err(|e| format!("{e} (seed={})", config.seed))?;
    bar.finish_and_clear();
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_summary(&report);
    }
    if report.violations > 0 {
        eprintln!(
            "FAILED seed={}: replay with `onepipe sim --seed {}` and the same flags",
            report.seed, report.seed
        );
        if report.busy_processes_at_end > 0 {
            eprintln!(
                "{} processes still had messages in flight when the run ended (it stops at \
                 --drain-max, or once nothing moved for 1 ms): some counted lost may only be late",
                report.busy_processes_at_end
            );
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(r: &SimReport) {
    let mode = if r.reliable { "reliable" } else { "best effort" };
    println!(
        "simulated {:.1} us of {} processes ({} switches), {mode}, seed {}",
        r.virtual_us, r.processes, r.switches, r.seed
    );
    println!(
        "  delivered {} messages, {:.2} M msg/s; latency p50 {:.2} us, p99 {:.2} us, max {:.2} us",
        r.delivered,
        r.throughput_msgs_per_s / 1e6,
        r.latency_us.p50,
        r.latency_us.p99,
        r.latency_us.max
    );
    println!(
        "  frames: {} sent, {} lost, {} dropped at full queues, {} at failed parts, {} duplicated; {} beacons",
        r.engine.frames_sent,
        r.engine.dropped_loss,
        r.engine.dropped_queue_full,
        r.engine.dropped_down,
        r.engine.duplicated,
        r.beacons_sent
    );
    println!(
        "  {} events in {:.2} s ({:.2} M events/s), peak memory {} MiB, trace hash {}",
        r.events,
        r.wall_s,
        r.events_per_s / 1e6,
        r.peak_memory_bytes >> 20,
        r.trace_hash
    );
    let c = &r.checks;
    println!(
        "  checks: total_order {} fifo {} causality {} no_duplicates {} no_creation {} no_loss {} liveness {} atomicity {} ({} violations)",
        c.total_order,
        c.fifo,
        c.causality,
        c.no_duplicates,
        c.no_creation,
        c.no_loss,
        c.liveness,
        c.atomicity,
        r.violations
    );
    if let Some(f) = &r.failure {
        let us = |v: Option<f64>| v.map_or("never".to_string(), |v| format!("{v:.1} us"));
        let failed: Vec<u32> = f.failed_processes.iter().map(|p| p.0).collect();
        println!(
            "  controller: declared failed {failed:?}; detected after {}, resumed after {}; {} scatterings aborted",
            us(f.detection_us),
            us(f.resume_us),
            f.aborted
        );
        match &f.recovery_us {
            Some(s) => println!(
                "  recovery (commit barrier stall of correct processes): mean {:.1} us, p5 {:.1} us, p95 {:.1} us; {} never recovered",
                s.mean, s.p5, s.p95, f.stalled_processes
            ),
            None => println!(
                "  recovery: no correct process recovered ({} stalled)",
                f.stalled_processes
            ),
        }
    }
    for e in &r.examples {
        println!("    {e}");
    }
}
