//! `onepipe sim cosy-tradeoff`, `cosy-theta` and `cosy-slowdown`: cosy's figures (paper 003,
//! Figs. 2, 4 and 5) in the simulator. How the sustainable load is searched for is in
//! `onepipe_bench::cosy::figures`; docs/simulator.md has the numbers.

use crate::bounds::{GBPS_MAX, MESSAGE_BYTES_MAX, REPEATS_MAX, SIM_SECONDS_MAX, float, int, probability};
use crate::flags::{JsonFlag, SeedFlag};
use clap::Args;
use onepipe_bench::cosy::CosyFabric;
use onepipe_bench::cosy::figures::{self, CosyFigure, SearchOptions, SustainableRow};
use onepipe_bench::cosy::slowdown::{self, SlowdownOptions, SlowdownRow};
use onepipe_wire::Duration;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The two-tier leaf-spine: by default the paper's simulation (section 5.3).
#[derive(Args, Debug)]
pub struct CosyFabricArgs {
    /// Leaf (ToR) switches
    #[arg(long, default_value_t = 9, value_parser = int::<usize>(1..=4096))]
    leaves: usize,
    /// Spine switches, each linked to every leaf (the theorem's C)
    #[arg(long, default_value_t = 16, value_parser = int::<usize>(1..=4096))]
    spines: usize,
    /// Hosts under each leaf
    #[arg(long, default_value_t = 16, value_parser = int::<usize>(1..=4096))]
    hosts_per_leaf: usize,
    /// Rate of every link
    #[arg(long, default_value_t = 100.0, value_parser = float(0.001, GBPS_MAX))]
    link_gbps: f64,
}

impl CosyFabricArgs {
    fn fabric(&self) -> CosyFabric {
        CosyFabric {
            leaves: self.leaves,
            spines: self.spines,
            hosts_per_leaf: self.hosts_per_leaf,
            link_bits_per_s: (self.link_gbps * 1e9).round() as u64,
            ..CosyFabric::paper()
        }
    }
}

fn seconds(s: f64) -> Duration {
    Duration::from_nanos((s * 1e9).round() as u64)
}

/// cosy's bound and maximum sustainable load against K (`cosy-tradeoff`), or that load over
/// Theta* against Theorem 3.4's f(K, C) (`cosy-theta`)
#[derive(Args, Debug)]
pub struct CosySearchArgs {
    /// Virtual links per link, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [1u8, 2, 4, 8, 16], value_parser = int::<u8>(1..=16))]
    ks: Vec<u8>,
    /// Size of every message
    #[arg(long, default_value_t = 131_072, value_parser = int::<usize>(1..=MESSAGE_BYTES_MAX))]
    message_bytes: usize,
    /// Virtual seconds of submissions per run
    #[arg(long, default_value_t = 0.001, value_parser = float(1e-6, SIM_SECONDS_MAX as f64))]
    seconds: f64,
    /// Seeds every load is run with (--seed, --seed + 1, ...)
    #[arg(long, default_value_t = 1, value_parser = int::<u64>(1..=REPEATS_MAX))]
    seeds: u64,
    /// Bisection steps after the probe at load 1 (the answer is within 2^-steps)
    #[arg(long, default_value_t = 6, value_parser = int::<u32>(0..=20))]
    steps: u32,
    /// A load is sustained with at most this share of messages rejected (0: none, the paper's
    /// definition)
    #[arg(long, default_value_t = 0.0, value_parser = probability())]
    reject_fraction_max: f64,
    /// How long a receiver holds a request for a slot (delta^E; default one hRTT)
    #[arg(long, value_parser = crate::sim::time)]
    hold: Option<Duration>,
    /// Slots a receiver gives one message at most (default K/2; 1: every message at B/K)
    #[arg(long, value_parser = int::<u8>(1..=16))]
    slots_max: Option<u8>,
    #[command(flatten)]
    fabric: CosyFabricArgs,
    #[command(flatten)]
    seed: SeedFlag,
    /// Write NAME.png into DIR
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
    #[command(flatten)]
    output: JsonFlag,
}

/// Slowdown against load for several message sizes, cosy next to 1Pipe's reliable service
#[derive(Args, Debug)]
pub struct CosySlowdownArgs {
    /// cosy's virtual links per link
    #[arg(long, default_value_t = 4, value_parser = int::<u8>(1..=16))]
    k: u8,
    /// Message sizes, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [8192usize, 32_768, 131_072, 524_288], value_parser = int::<usize>(1..=MESSAGE_BYTES_MAX))]
    sizes: Vec<usize>,
    /// Loads, comma-separated, each in (0, 1]
    #[arg(long, value_delimiter = ',', default_values_t = [0.2, 0.5, 0.8], value_parser = probability())]
    loads: Vec<f64>,
    /// Virtual seconds of submissions per run
    #[arg(long, default_value_t = 0.0003, value_parser = float(1e-6, SIM_SECONDS_MAX as f64))]
    seconds: f64,
    /// cosy alone, without 1Pipe's runs
    #[arg(long)]
    no_one_pipe: bool,
    #[command(flatten)]
    fabric: CosyFabricArgs,
    #[command(flatten)]
    seed: SeedFlag,
    /// Write cosy-slowdown.png into DIR
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn search(args: &CosySearchArgs, name: &str) -> Result<ExitCode, String> {
    let o = SearchOptions {
        fabric: args.fabric.fabric(),
        ks: args.ks.clone(),
        message_bytes: args.message_bytes,
        duration: seconds(args.seconds),
        seeds: (0..args.seeds).map(|i| args.seed.seed.wrapping_add(i)).collect(),
        steps: args.steps,
        reject_fraction_max: args.reject_fraction_max,
        hold: args.hold,
        slots_max: args.slots_max,
    };
    let bar = crate::progress::points(args.output.json);
    let per_k = args.steps as u64 + 1;
    bar.set_length(args.ks.len() as u64 * per_k);
    let (mut current, mut done_ks) = (None, 0u64);
    let fig = figures::search_figure(name, &o, &mut |k, p| {
        if current != Some(k) {
            bar.set_position(done_ks * per_k);
            current = Some(k);
            done_ks += 1;
        }
        bar.set_message(format!(
            "K={k} load {:.3}: {}",
            p.load,
            if p.passed { "ok" } else { "rejects" }
        ));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    emit(&fig, args.png.as_deref(), args.output.json, print_search)
}

pub fn slowdown(args: &CosySlowdownArgs) -> Result<ExitCode, String> {
    let o = SlowdownOptions {
        fabric: args.fabric.fabric(),
        k: args.k,
        sizes: args.sizes.clone(),
        loads: args.loads.clone(),
        duration: seconds(args.seconds),
        seed: args.seed.seed,
        one_pipe: !args.no_one_pipe,
    };
    let bar = crate::progress::points(args.output.json);
    bar.set_length(slowdown::runs(&o));
    let fig = slowdown::slowdown_figure(&o, &mut |r| {
        bar.set_message(format!("{} {} B at {}", r.system, r.message_bytes, r.load));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    emit(&fig, args.png.as_deref(), args.output.json, print_slowdown)
}

fn emit<R: Serialize>(
    fig: &CosyFigure<R>,
    png: Option<&Path>,
    json: bool,
    print: fn(&CosyFigure<R>),
) -> Result<ExitCode, String> {
    if let Some(dir) = png {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        onepipe_bench::plot::write_png(&fig.plots, &dir.join(format!("{}.png", fig.name)))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(fig).expect("serializable"));
    } else {
        print(fig);
        if let Some(dir) = png {
            println!("wrote {}/{}.png", dir.display(), fig.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn print_search(fig: &CosyFigure<SustainableRow>) {
    println!("{}: {}", fig.name, fig.paper);
    println!(
        "{:>3} {:>10} {:>10} {:>11} {:>11} {:>10} {:>8} {:>7} {:>9} {:>9} {:>7}",
        "K",
        "delta us",
        "thm 3.5 us",
        "sustained",
        "unsustained",
        "max c/d",
        "Theta*",
        "f(K,C)",
        "f Theta*",
        "meas/thm",
        "checks"
    );
    for r in &fig.rows {
        println!(
            "{:>3} {:>10.1} {:>10.1} {:>11.4} {:>11} {:>10} {:>8.3} {:>7.3} {:>9.3} {:>9.2} {:>7}",
            r.k,
            r.delta_us,
            r.theorem_delta_cosy_us,
            r.sustainable_load,
            opt(r.unsustained_load, 4),
            opt(r.max_completion_over_delta, 3),
            r.theta_star,
            r.f_k_c,
            r.theorem_load,
            r.measured_over_theorem,
            if r.checks_held { "held" } else { "FAILED" }
        );
    }
}

fn print_slowdown(fig: &CosyFigure<SlowdownRow>) {
    println!("{}: {}", fig.name, fig.paper);
    println!(
        "{:<16} {:>8} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {:>8}",
        "system", "bytes", "load", "ideal us", "p50", "p99", "max", "done", "not done", "max c/d", "retx"
    );
    for r in &fig.rows {
        println!(
            "{:<16} {:>8} {:>5} {:>8.1} {:>8.2} {:>8.2} {:>8.2} {:>8} {:>10.4} {:>8} {:>8}",
            r.system,
            r.message_bytes,
            r.load,
            r.ideal_us,
            r.slowdown.p50,
            r.slowdown.p99,
            r.slowdown.max,
            r.completed,
            r.not_completed_fraction,
            opt(r.max_completion_over_delta, 3),
            r.retransmissions.map_or("-".into(), |n| n.to_string())
        );
    }
}
