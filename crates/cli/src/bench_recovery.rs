//! `onepipe bench recovery`: paper Fig. 10, failure recovery time
//! ([`onepipe_bench::recovery`]), parsed and printed.

use crate::flags::JsonFlag;
use clap::Args;
use onepipe_bench::recovery::{RecoveryOptions, Report};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct RecoveryArgs {
    /// Host counts (2 or multiples of 4; the paper's are 2, 8, 16, 32)
    #[arg(long, value_delimiter = ',', default_value = "2,8,16,32", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::PROCESSES_MAX))]
    hosts: Vec<u32>,
    /// Simulated runs per point (the failure's phase against the beacons moves with the seed)
    #[arg(long, default_value_t = 5, value_parser = crate::bounds::int::<u32>(1..=crate::bounds::REPEATS_MAX))]
    seeds: u32,
    /// Where to run: sim, inproc or both
    #[arg(long, default_value = "both")]
    runtime: Where,
    /// Host counts for the inproc runtime (each point is a real run of --inproc-seconds)
    #[arg(long, value_delimiter = ',', default_value = "4,16,32", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::PROCESSES_MAX))]
    inproc_hosts: Vec<u32>,
    /// Length of each inproc run; the failure comes at 40% of it
    #[arg(long, default_value_t = 1.2, value_parser = crate::bounds::seconds())]
    inproc_seconds: f64,
    #[command(flatten)]
    out: JsonFlag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Where {
    Sim,
    Inproc,
    Both,
}

impl From<Where> for onepipe_bench::recovery::Where {
    fn from(w: Where) -> Self {
        match w {
            Where::Sim => Self::Sim,
            Where::Inproc => Self::Inproc,
            Where::Both => Self::Both,
        }
    }
}

pub fn run(args: RecoveryArgs) -> Result<ExitCode, String> {
    let options = RecoveryOptions {
        hosts: args.hosts,
        seeds: args.seeds,
        runtime: args.runtime.into(),
        inproc_hosts: args.inproc_hosts,
        inproc_seconds: args.inproc_seconds,
    };
    let bar = crate::bench::runs_bar(args.out.json, "{bar:40} {pos}/{len} {msg}");
    let report = onepipe_bench::recovery::run(&options, &bar)?;
    if args.out.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print_report(&report);
    }
    let failed_sim = report.sim.iter().flat_map(|s| &s.rows).any(|r| r.violations > 0);
    let failed_inproc = report.inproc.iter().flat_map(|s| &s.rows).any(|r| !r.checks_pass);
    if failed_sim || failed_inproc {
        eprintln!("FAILED: a run broke ordering or atomicity (see violations and checks_pass)");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &Report) {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    if let Some(s) = &r.sim {
        println!(
            "simulator: {} us beacons, dead after {} intervals, controller {} us away and {} us per \
             frame or notification; recovery = commit-barrier stall of correct processes (us)",
            s.beacon_interval_us, s.dead_after_intervals, s.control_delay_us, s.controller_frame_cost_us
        );
        println!(
            "{:<12} {:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6} {:>7} {:>6} {:>5}",
            "failure", "hosts", "mean", "p5", "p95", "detect", "resume", "failed", "paper", "ratio", "viol"
        );
        for row in &s.rows {
            println!(
                "{:<12} {:>5} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>7.1} {:>6} {:>7} {:>6} {:>5}",
                row.kind.label(),
                row.hosts,
                row.recovery_us.mean,
                row.recovery_us.p5,
                row.recovery_us.p95,
                row.detection_us_mean,
                row.resume_us_mean,
                row.failed_processes,
                opt(row.paper_us),
                row.ratio_to_paper.map_or("-".into(), |v| format!("{v:.2}")),
                row.violations
            );
        }
    }
    if let Some(s) = &r.inproc {
        println!(
            "inproc: {} us beacons, dead after {} intervals; times from the failure (us)",
            s.beacon_interval_us, s.dead_after_intervals
        );
        println!(
            "{:<12} {:>5} {:>10} {:>10} {:>10} {:>6} {:>7} {:>6}",
            "failure", "hosts", "detect", "resume", "recovery", "failed", "aborted", "checks"
        );
        for row in &s.rows {
            println!(
                "{:<12} {:>5} {:>10} {:>10} {:>10} {:>6} {:>7} {:>6}",
                row.kind.label(),
                row.hosts,
                opt(row.detection_us),
                opt(row.resume_us),
                opt(row.recovery_us),
                row.failed_processes,
                row.aborted,
                if row.checks_pass { "pass" } else { "FAIL" }
            );
        }
    }
}
