//! `onepipe sim paxos` (one seeded run of in-network or software Paxos in virtual time), its
//! campaign `sim paxos-campaign`, the thesis's end-to-end figures `sim paxos-throughput` and
//! `sim paxos-partitions`, and NetPaxos's fast mode `sim netpaxos`.

use crate::flags::{JsonFlag, SeedFlag};
use clap::Args;
use indicatif::ProgressStyle;
use onepipe_bench::paxos::Failure;
use onepipe_bench::paxos::sim::{PaxosSimConfig, PaxosSimReport, placement_name, run_sim, sim_tuning};
use onepipe_bench::paxos::sim_campaign::{self, CampaignRun, failure_name};
use onepipe_bench::paxos::sim_figures::{self, FigureOptions, PaxosFigure, Point};
use onepipe_paxos::Placement;
use onepipe_paxos::netpaxos::{FaultyLinks, NetpaxosConfig, NetpaxosReport, Numbering, simulate};
use onepipe_wire::Duration;
use std::path::PathBuf;
use std::process::ExitCode;

fn placement(s: &str) -> Placement {
    if s == "software" {
        Placement::Software
    } else {
        Placement::InNetwork
    }
}

/// One Paxos run in the simulator: the paxos testbed, 3 replicas, closed-loop clients.
#[derive(Args, Debug)]
pub struct PaxosSimArgs {
    /// Where the coordinator and the acceptors run
    #[arg(long, default_value = "in-network", value_parser = ["in-network", "software"])]
    placement: String,
    /// Closed-loop clients (one call outstanding each), spread over the client hosts
    #[arg(long, default_value_t = 16, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::CLIENTS_MAX))]
    clients: usize,
    /// Client hosts (processes with a proposer each)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=64))]
    client_hosts: usize,
    /// Virtual seconds of measured traffic
    #[arg(long, default_value_t = 0.02, value_parser = crate::bounds::float(1e-6, crate::bounds::SIM_SECONDS_MAX as f64))]
    seconds: f64,
    /// Partitions: independent instance spaces, one replica worker each
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: u16,
    /// Fraction of calls that are SETs
    #[arg(long, default_value_t = 0.5, value_parser = crate::bounds::probability())]
    write_ratio: f64,
    /// Keys the clients draw from
    #[arg(long, default_value_t = 1000, value_parser = crate::bounds::int::<usize>(1..=1_000_000))]
    keys: usize,
    /// Probability that a frame is lost on a link
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Probability that a frame arrives twice
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    duplicate: f64,
    /// Probability that a frame is held back up to 5 us, so that later frames pass it
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    reorder: f64,
    /// A role stops this long after traffic starts: coordinator@T, acceptor:N@T or replica:N@T
    /// (N = 0, 1, 2; T like 5ms)
    #[arg(long)]
    fail: Option<String>,
    /// CPU time per frame of a client host or a replica (the proposer and learner libraries)
    #[arg(long, default_value = "500ns", value_parser = crate::sim::time)]
    library_frame_cost: Duration,
    /// CPU time per frame of a host running the coordinator or an acceptor in software
    #[arg(long, default_value = "3800ns", value_parser = crate::sim::time)]
    role_frame_cost: Duration,
    /// Stop a run that takes more events than this
    #[arg(long, default_value_t = 2_000_000_000, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::EVENTS_MAX))]
    events_max: u64,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    output: JsonFlag,
}

impl PaxosSimArgs {
    fn config(&self) -> Result<PaxosSimConfig, String> {
        let failure: Option<Failure> = self
            .fail
            .as_deref()
            .map(|f| f.parse().map_err(|e| format!("--fail: {e}")))
            .transpose()?;
        Ok(PaxosSimConfig {
            placement: placement(&self.placement),
            clients: self.clients,
            client_hosts: self.client_hosts,
            duration: Duration::from_nanos((self.seconds * 1e9) as u64),
            tuning: sim_tuning(self.partitions),
            replica_workers: self.partitions as u32,
            write_ratio: self.write_ratio,
            keys: self.keys,
            loss: self.loss,
            duplicate: self.duplicate,
            reorder: self.reorder,
            failure,
            library_frame_cost: self.library_frame_cost,
            role_frame_cost: self.role_frame_cost,
            events_max: self.events_max,
            seed: self.seed.seed,
            ..PaxosSimConfig::default()
        })
    }
}

pub fn run(args: &PaxosSimArgs) -> Result<ExitCode, String> {
    let c = args.config()?;
    let r = run_sim(&c)?;
    if args.output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r.json(&c)).expect("serializable")
        );
    } else {
        print_text(&c, &r);
    }
    let checks = &r.report.checks;
    if !checks.ok() || checks.problem.is_some() {
        eprintln!(
            "FAILED seed={}: {}; replay with the same flags",
            c.seed,
            checks.problem.as_deref().unwrap_or("a check failed")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(c: &PaxosSimConfig, r: &PaxosSimReport) {
    let p = &r.report;
    let show = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "not checked",
    };
    println!(
        "simulated {:.3} ms of {} Paxos, {} partition(s), seed {}: {} events, trace {:016x}",
        c.duration.as_nanos() as f64 / 1e6,
        placement_name(c.placement),
        c.tuning.partitions,
        c.seed,
        r.stats.events,
        r.stats.trace_hash
    );
    println!(
        "throughput      {:.0} values/s answered in steady state, latency p50 {:.1} us p99 {:.1} us ({} unknown, {} retries, {} failovers)",
        r.steady_values_per_s,
        p.latency_us(0.5),
        p.latency_us(0.99),
        p.unknown,
        p.retries,
        p.failovers
    );
    println!(
        "faults          {} frames lost, {} duplicated, {} reordered; failure: {}",
        r.stats.dropped_loss,
        r.stats.duplicated,
        r.stats.reordered,
        failure_name(c.failure)
    );
    let x = &p.roles;
    println!(
        "roles           {} takeovers, {} Phase 1 ranges ({} retried), {} reinits, {} no-ops, {} stale 2As",
        x.takeovers, x.phase1_ranges, x.phase1_retries, x.reinits, x.noops, x.stale_2a
    );
    println!(
        "checks          agreement {}, validity {}, linearizable {} over {} operations, {} instances decided",
        show(p.checks.agreement),
        show(p.checks.validity),
        show(p.checks.linearizable),
        p.history.len(),
        p.checks.decided_max
    );
    if let Some(problem) = &p.checks.problem {
        println!("  problem: {problem}");
    }
}

/// Many seeds, each drawing placement, partitions, clients, link faults and one failure.
#[derive(Args, Debug)]
pub struct PaxosCampaignArgs {
    /// Number of seeds to run
    #[arg(long, default_value_t = 20, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::SEEDS_MAX))]
    runs: u64,
    /// The first seed (replay a failing seed S with --seed S --runs 1)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn campaign(args: &PaxosCampaignArgs) -> Result<ExitCode, String> {
    let bar = crate::sim::progress_bar(args.output.json);
    bar.set_length(args.runs);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {elapsed} elapsed")
            .expect("valid template"),
    );
    let mut runs: Vec<CampaignRun> = Vec::new();
    for seed in args.seed..args.seed.saturating_add(args.runs) {
        let run = sim_campaign::run_seed(seed)?;
        if !run.passed {
            bar.println(format!(
                "seed={seed} FAILED: {}",
                run.problem.as_deref().unwrap_or("a check failed")
            ));
        }
        bar.inc(1);
        runs.push(run);
    }
    bar.finish_and_clear();
    let failing: Vec<u64> = runs.iter().filter(|r| !r.passed).map(|r| r.seed).collect();
    if args.output.json {
        let out = serde_json::json!({"runs": runs, "failing_seeds": failing});
        println!("{}", serde_json::to_string_pretty(&out).expect("serializable"));
    } else {
        for r in &runs {
            println!(
                "seed {:>4}: {:<10} {} part. {:>2} clients loss {:<5} dup {:<5} reorder {:<5} {:<22} {:>6} ok {:>9} events {}",
                r.seed,
                r.placement,
                r.partitions,
                r.clients,
                r.loss,
                r.duplicate,
                r.reorder,
                r.failure,
                r.ok,
                r.events,
                if r.passed { "ok" } else { "FAILED" }
            );
        }
        println!("{} seeds, failing seeds: {failing:?}", runs.len());
    }
    if !failing.is_empty() {
        eprintln!("replay a failing seed S with `onepipe sim paxos-campaign --seed S --runs 1`");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// A Paxos figure's flags.
#[derive(Args, Debug)]
pub struct PaxosFigureArgs {
    /// Virtual seconds of measured traffic per run
    #[arg(long, default_value_t = 0.005, value_parser = crate::bounds::float(1e-6, crate::bounds::SIM_SECONDS_MAX as f64))]
    seconds: f64,
    #[command(flatten)]
    seed: SeedFlag,
    /// Write the plot to FILE (PNG)
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn figure(args: &PaxosFigureArgs, name: &str) -> Result<ExitCode, String> {
    let bar = crate::sim::progress_bar(args.output.json);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} runs, {elapsed} elapsed {msg}")
            .expect("valid template"),
    );
    let mut progress = |p: &Point| {
        bar.set_message(format!("{} at {}", p.series, p.x));
        bar.inc(1);
    };
    let o = FigureOptions {
        duration: Duration::from_nanos((args.seconds * 1e9) as u64),
        seed: args.seed.seed,
        ..FigureOptions::default()
    };
    let fig = if name == "paxos-throughput" {
        sim_figures::throughput(&o, &mut progress)?
    } else {
        sim_figures::partitions(&o, &mut progress)?
    };
    bar.finish_and_clear();
    if let Some(path) = &args.png {
        onepipe_bench::plot::write_png(&fig.plots, path)?;
    }
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&fig).expect("serializable"));
    } else {
        print_figure(&fig);
        if let Some(path) = &args.png {
            println!("wrote {}", path.display());
        }
    }
    if !fig.checks_ok() {
        eprintln!("a run failed its checks: see the rows with checks_ok false (--json)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_figure(fig: &PaxosFigure) {
    println!(
        "{:<22} {:>8} {:>12} {:>10} {:>10} {:>8} {:>7} {:>7}",
        "series", "x", "values/s", "p50 us", "p99 us", "retries", "checks", "wall s"
    );
    for r in &fig.rows {
        println!(
            "{:<22} {:>8} {:>12.0} {:>10.1} {:>10.1} {:>8} {:>7} {:>7.1}",
            r.series,
            r.x,
            r.values_per_s,
            r.latency_us_p50,
            r.latency_us_p99,
            r.retries,
            if r.checks_ok { "ok" } else { "FAILED" },
            r.wall_s
        );
    }
}

/// NetPaxos's fast mode (thesis chapter 4): a serializer, four minions, learners that decide
/// when 3 of 4 agree, and recovery otherwise.
#[derive(Args, Debug)]
pub struct NetpaxosArgs {
    /// Probability that a message on a faulty link is held back, so that later ones pass it
    #[arg(long, default_value_t = 0.05, value_parser = crate::bounds::probability())]
    reorder: f64,
    /// Probability that a message on a faulty link is lost
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Which links reorder and lose: serializer-minion (the thesis's assumption 1,
    /// performance), minion-learner (assumption 2, correctness), or both
    #[arg(long, default_value = "minion-learner", value_parser = ["serializer-minion", "minion-learner", "both"])]
    faulty: String,
    /// How learners number a minion's votes: queue (the thesis: position in the queue) or
    /// stamp (the minion's own counter)
    #[arg(long, default_value = "queue", value_parser = ["queue", "stamp"])]
    numbering: String,
    /// Whether learners ask for recovery (a classic round) when the fast path cannot decide
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    recovery: String,
    /// Values proposed
    #[arg(long, default_value_t = 100, value_parser = crate::bounds::int::<u64>(1..=100_000))]
    values: u64,
    #[command(flatten)]
    seed: SeedFlag,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn netpaxos(args: &NetpaxosArgs) -> Result<ExitCode, String> {
    let c = NetpaxosConfig {
        reorder_probability: args.reorder,
        loss_probability: args.loss,
        faulty_links: match args.faulty.as_str() {
            "serializer-minion" => FaultyLinks::SerializerToMinion,
            "both" => FaultyLinks::Both,
            _ => FaultyLinks::MinionToLearner,
        },
        numbering: if args.numbering == "stamp" {
            Numbering::MinionStamp
        } else {
            Numbering::QueuePosition
        },
        recovery: args.recovery == "on",
        values: args.values,
        ..NetpaxosConfig::new(args.seed.seed)
    };
    let r = simulate(&c).map_err(|e| e.to_string())?;
    let agreement = r.check_agreement();
    if args.output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&netpaxos_json(args, &r)).expect("serializable")
        );
    } else {
        print_netpaxos(args, &r);
    }
    if let Err(d) = agreement {
        eprintln!("FAILED seed={}: agreement lost: {d}", args.seed.seed);
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn netpaxos_json(args: &NetpaxosArgs, r: &NetpaxosReport) -> serde_json::Value {
    serde_json::json!({
        "seed": r.seed,
        "faulty": args.faulty,
        "numbering": args.numbering,
        "recovery": args.recovery,
        "reorder": args.reorder,
        "loss": args.loss,
        "values": r.values,
        "agreement": r.check_agreement().is_ok(),
        "first_disagreement": r.check_agreement().err().map(|d| d.to_string()),
        "disagreements": r.disagreements,
        "all_delivered": r.all_delivered(),
        "undecided": r.undecided,
        "fast_decisions": r.fast_decisions,
        "recovered_decisions": r.recovered_decisions,
        "recoveries": r.recoveries,
        "recoveries_unfinished": r.recoveries_unfinished,
        "recovery_contradictions": r.recovery_contradictions,
        "conflicts": r.conflicts,
        "stall_timeouts": r.stall_timeouts,
        "noops": r.noops,
        "resubmitted": r.resubmitted,
        "abandoned": r.abandoned,
        "messages_sent": r.messages_sent,
        "messages_lost": r.messages_lost,
        "messages_reordered": r.messages_reordered,
        "truncated": r.truncated,
    })
}

fn print_netpaxos(args: &NetpaxosArgs, r: &NetpaxosReport) {
    println!(
        "NetPaxos fast mode, seed {}: {} values, faults on {} (reorder {}, loss {}), {} numbering, recovery {}",
        r.seed, r.values, args.faulty, args.reorder, args.loss, args.numbering, args.recovery
    );
    println!(
        "messages        {} sent, {} lost, {} reordered",
        r.messages_sent, r.messages_lost, r.messages_reordered
    );
    println!(
        "decisions       {} fast, {} from recovery ({} recoveries, {} unfinished), {} conflicts, {} stalls, {} no-ops",
        r.fast_decisions,
        r.recovered_decisions,
        r.recoveries,
        r.recoveries_unfinished,
        r.conflicts,
        r.stall_timeouts,
        r.noops
    );
    println!(
        "delivery        {} (learner, value) pairs undelivered, {} resubmitted, {} abandoned{}",
        r.undecided,
        r.resubmitted,
        r.abandoned,
        if r.truncated { ", run truncated" } else { "" }
    );
    match r.check_agreement() {
        Ok(()) => println!("agreement       yes"),
        Err(d) => println!(
            "agreement       NO: {} instances disagree, first: {d}; {} recovered decisions contradict a learner's own",
            r.disagreements, r.recovery_contradictions
        ),
    }
}
