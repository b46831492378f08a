//! `onepipe sim kv-fig14`: the paper's Fig. 14 (the transactional key-value store, 7.3.1) in
//! the simulator, panels a, b and c.

use crate::flags::{JsonFlag, SeedFlag};
use clap::Args;
use indicatif::ProgressStyle;
use onepipe_bench::txkv::sim::TxnClass;
use onepipe_bench::txkv::sim_figures::{self, FIGURES, Fig14Options, KvFigure, Point};
use onepipe_wire::Duration;
use std::path::PathBuf;
use std::process::ExitCode;

/// Paper Fig. 14 in the simulator: 1Pipe, OCC and the non-transactional store
#[derive(Args, Debug)]
pub struct KvFig14Args {
    /// Which panel: a (transactions/s vs processes), b (latency vs write share), c (KV
    /// operations/s vs keys per transaction), or all
    #[arg(long, default_value = "all", value_parser = ["a", "b", "c", "all"])]
    figure: String,
    /// Virtual seconds measured per run (after a warm-up of a quarter of it)
    #[arg(long, default_value_t = 0.004, value_parser = crate::bounds::float(1e-6, crate::bounds::SIM_SECONDS_MAX as f64))]
    seconds: f64,
    /// Panel a's process counts, comma-separated (multiples of 4; half are servers)
    #[arg(long, value_delimiter = ',', default_values_t = [8u32, 16, 32, 64], value_parser = crate::bounds::int::<u32>(4..=4096))]
    processes: Vec<u32>,
    /// Processes of panels b and c (a multiple of 4; half are servers)
    #[arg(long, default_value_t = 32, value_parser = crate::bounds::int::<u32>(4..=4096))]
    processes_bc: u32,
    /// Panel b's shares of writes among operations, in percent, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [0u32, 25, 50, 75, 100], value_parser = crate::bounds::int::<u32>(0..=100))]
    write_percents: Vec<u32>,
    /// Panel c's keys per transaction, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2, 4, 8], value_parser = crate::bounds::int::<usize>(1..=64))]
    keys_per_txn: Vec<usize>,
    /// Keys the transactions draw from
    #[arg(long, default_value_t = 100_000, value_parser = crate::bounds::int::<u64>(1..=100_000_000))]
    keys: u64,
    /// YCSB's Zipf constant, below 1
    #[arg(long, default_value_t = 0.99, value_parser = crate::bounds::float(0.0, 1.0))]
    zipf: f64,
    /// Transactions outstanding per client in panels a and c (saturation)
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(1..=1024))]
    window: usize,
    /// Transactions outstanding per client in panel b (latency, not queueing)
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<usize>(1..=1024))]
    latency_window: usize,
    /// CPU time of a process per frame with a payload
    #[arg(long, default_value = "1us", value_parser = crate::sim::time)]
    frame_cost: Duration,
    /// CPU time of a process per frame of the header alone (beacons, ACKs)
    #[arg(long, default_value = "100ns", value_parser = crate::sim::time)]
    control_frame_cost: Duration,
    #[command(flatten)]
    seed: SeedFlag,
    /// Write kv-fig14a.png (b, c) into DIR
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
    #[command(flatten)]
    output: JsonFlag,
}

impl KvFig14Args {
    fn options(&self) -> Fig14Options {
        let duration = Duration::from_nanos((self.seconds * 1e9) as u64);
        Fig14Options {
            duration,
            warmup: Duration::from_nanos(duration.as_nanos() / 4),
            seed: self.seed.seed,
            keys: self.keys,
            zipf: self.zipf,
            window: self.window,
            latency_window: self.latency_window,
            processes: self.processes.clone(),
            processes_bc: self.processes_bc,
            write_percents: self.write_percents.clone(),
            keys_per_txn: self.keys_per_txn.clone(),
            frame_cost: self.frame_cost,
            control_frame_cost: self.control_frame_cost,
        }
    }

    fn figures(&self) -> Vec<&'static str> {
        FIGURES
            .into_iter()
            .filter(|f| self.figure == "all" || self.figure == *f)
            .collect()
    }

    /// Runs of the chosen panels, for the progress bar.
    fn runs(&self) -> u64 {
        self.figures()
            .iter()
            .map(|f| match *f {
                "a" => 6 * self.processes.len(),
                "b" => 2 * self.write_percents.len(),
                _ => 3 * self.keys_per_txn.len(),
            })
            .sum::<usize>() as u64
    }
}

pub fn fig14(args: &KvFig14Args) -> Result<ExitCode, String> {
    let o = args.options();
    let bar = crate::sim::progress_bar(args.output.json);
    bar.set_length(args.runs());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed {msg}")
            .expect("valid template"),
    );
    let mut figures = Vec::new();
    for name in args.figures() {
        let mut progress = |p: &Point| {
            bar.set_message(format!("fig. 14{name}: {} at {}", p.series, p.x));
            bar.inc(1);
        };
        let fig = sim_figures::figure(name, &o, &mut progress).map_err(|e| e.to_string())?;
        if let Some(dir) = &args.png {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            onepipe_bench::plot::write_png(&fig.plots, &dir.join(format!("{}.png", fig.name)))?;
        }
        figures.push(fig);
    }
    bar.finish_and_clear();
    if args.output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&figures).expect("serializable")
        );
    } else {
        for fig in &figures {
            print_figure(fig);
        }
        if let Some(dir) = &args.png {
            println!("wrote {}/kv-fig14*.png", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn print_figure(fig: &KvFigure) {
    println!("{}: {}", fig.name, fig.paper);
    println!(
        "{:<26} {:>6} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "series",
        "x",
        "txn/s",
        "kv ops/s",
        "RO mean",
        "RO p99",
        "WO mean",
        "WO p99",
        "WR mean",
        "WR p99",
        "aborts"
    );
    for p in &fig.rows {
        let (ro, wo, wr) = (
            p.class(TxnClass::ReadOnly),
            p.class(TxnClass::WriteOnly),
            p.class(TxnClass::ReadWrite),
        );
        println!(
            "{:<26} {:>6} {:>12.0} {:>12.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7.3}",
            p.series,
            p.x,
            p.txn_per_s,
            p.kv_ops_per_s,
            us(ro.mean),
            us(ro.p99),
            us(wo.mean),
            us(wo.p99),
            us(wr.mean),
            us(wr.p99),
            p.abort_rate
        );
    }
    println!();
}
