//! `onepipe sim netchain` (one seeded NetChain run in virtual time) and the paper's NetChain
//! figures, `onepipe sim netchain-fig9` and `netchain-fig10`.

use crate::flags::{JsonFlag, SeedFlag};
use crate::sim::time;
use clap::Args;
use onepipe_bench::netchain::history;
use onepipe_bench::netchain::sim::{Fabric, Load, NetchainSimConfig, NetchainSimReport, run_sim};
use onepipe_bench::netchain::sim_figures::{self, Fig9Options, Fig10Options, NetchainFigure, Point};
use onepipe_wire::Duration;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One NetChain run in the simulator; times take a unit (ns, us, ms, s).
#[derive(Args, Debug)]
pub struct NetchainSimArgs {
    /// `testbed` (NetChain's four switches) or `spine-leaf:SPINES,LEAVES`
    #[arg(long, default_value = "testbed")]
    topology: String,
    #[command(flatten)]
    seed: SeedFlag,
    /// Closed-loop clients (one call outstanding each), spread over the client hosts
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<u32>(1..=crate::bounds::CLIENTS_MAX))]
    clients: u32,
    /// Open-loop calls per second per client host instead of closed-loop clients
    #[arg(long, value_parser = crate::bounds::float(1.0, crate::bounds::RATE_PER_S_MAX))]
    open_loop_rate: Option<f64>,
    /// Share of writes among the calls
    #[arg(long, default_value_t = 0.01, value_parser = crate::bounds::probability())]
    write_ratio: f64,
    /// Keys preloaded (16 B each)
    #[arg(long, default_value_t = 20_000, value_parser = crate::bounds::int::<usize>(1..=65_536))]
    keys: usize,
    /// Bytes per value written
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(1..=128))]
    value_bytes: usize,
    /// Virtual seconds of measured traffic
    #[arg(long, default_value_t = 0.01, value_parser = crate::bounds::float(1e-6, crate::bounds::SIM_SECONDS_MAX as f64))]
    seconds: f64,
    /// A switch fails this long after traffic starts: `switch:N@TIME` (not one that hosts hang
    /// from); failover, then recovery
    #[arg(long)]
    fail: Option<String>,
    /// How long after the failure the controller learns of it
    #[arg(long, default_value = "100us", value_parser = time)]
    detection: Duration,
    /// Probability that a frame is lost on a link
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    loss: f64,
    /// Probability that a frame is held back up to 2 us, so that later frames pass it
    #[arg(long, default_value_t = 0.0, value_parser = crate::bounds::probability())]
    reorder: f64,
    /// Virtual nodes per switch on the placement ring
    #[arg(long, default_value_t = 16, value_parser = crate::bounds::int::<usize>(1..=4096))]
    vnodes_per_switch: usize,
    /// How long a client's attempt waits for its answer
    #[arg(long, default_value = "200us", value_parser = time)]
    agent_timeout: Duration,
    /// Time a switch is busy per frame (0: line rate)
    #[arg(long, default_value = "0ns", value_parser = time)]
    switch_frame_cost: Duration,
    /// CPU time of a client host per frame sent or received
    #[arg(long, default_value = "24ns", value_parser = time)]
    host_frame_cost: Duration,
    /// CPU time of the controller per frame (its state copy speed in recovery)
    #[arg(long, default_value = "200ns", value_parser = time)]
    controller_frame_cost: Duration,
    /// Stop a run that takes more events than this
    #[arg(long, default_value_t = 2_000_000_000, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::EVENTS_MAX))]
    events_max: u64,
    /// Write every attempt as JSON Lines to FILE
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    #[command(flatten)]
    output: JsonFlag,
}

impl NetchainSimArgs {
    fn config(&self) -> Result<NetchainSimConfig, String> {
        Ok(NetchainSimConfig {
            fabric: Fabric::parse(&self.topology)?,
            keys: self.keys,
            value_bytes: self.value_bytes,
            write_ratio: self.write_ratio,
            load: match self.open_loop_rate {
                Some(calls_per_s_per_host) => Load::Open { calls_per_s_per_host },
                None => Load::Closed {
                    clients: self.clients,
                },
            },
            duration: Duration::from_nanos((self.seconds * 1e9) as u64),
            vnodes_per_switch: self.vnodes_per_switch,
            failure: self
                .fail
                .as_deref()
                .map(crate::netchain::parse_fail)
                .transpose()?,
            detection: self.detection,
            loss: self.loss,
            reorder: self.reorder,
            seed: self.seed.seed,
            agent_timeout: self.agent_timeout,
            switch_frame_cost: self.switch_frame_cost,
            host_frame_cost: self.host_frame_cost,
            controller_frame_cost: self.controller_frame_cost,
            events_max: self.events_max,
            ..NetchainSimConfig::default()
        })
    }
}

pub fn run(args: &NetchainSimArgs) -> Result<ExitCode, String> {
    let c = args.config()?;
    let r = run_sim(&c)?;
    if let Some(path) = &args.history {
        let file = std::fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        let records = history::records(&r.report.history, &r.report.keys);
        history::write(&mut std::io::BufWriter::new(file), &records)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if args.output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&r.json(&c)).expect("serializable")
        );
    } else {
        print_text(&c, &r);
    }
    if !r.passed() {
        eprintln!(
            "FAILED seed={}: {} acknowledged writes lost, linearizable: {:?}, recovered: {}; replay \
             with the same flags",
            c.seed,
            r.report.acknowledged_writes_lost.unwrap_or(0),
            r.report
                .linearizability
                .as_ref()
                .map(|l| l.as_ref().map(|l| l.verdict.to_string())),
            r.recovered
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(c: &NetchainSimConfig, r: &NetchainSimReport) {
    let us = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
    let rep = &r.report;
    println!(
        "simulated {:.3} ms of NetChain on {}, seed {}: {} events, trace {:016x}",
        c.duration.as_nanos() as f64 / 1e6,
        c.fabric.name(),
        c.seed,
        r.stats.events,
        r.stats.trace_hash
    );
    println!(
        "throughput      {:.0} ops/s ({:.0} ok), {} unknown, {} retries",
        rep.ops_per_s(),
        r.ok_per_s(),
        rep.unknown,
        rep.retries
    );
    println!(
        "latency         read p50 {:.2} us p99 {:.2} us; write p50 {:.2} us p99 {:.2} us",
        us(&rep.read_latency_ns, 0.5),
        us(&rep.read_latency_ns, 0.99),
        us(&rep.write_latency_ns, 0.5),
        us(&rep.write_latency_ns, 0.99)
    );
    println!(
        "faults          {} frames lost, {} reordered",
        r.stats.dropped_loss, r.stats.reordered
    );
    if let Some(f) = rep.failover() {
        let recovery = rep.recovery().map_or("not finished".to_string(), |d| {
            format!("{:.2} ms", d.as_nanos() as f64 / 1e6)
        });
        println!(
            "failure         failover {:.0} us, recovery {recovery}",
            f.as_micros_f64()
        );
    }
    match rep.acknowledged_writes_lost {
        Some(lost) => println!(
            "checks          {} attempts recorded; acknowledged writes lost: {lost}; linearizable: {}",
            rep.history.len(),
            match &rep.linearizability {
                Some(Ok(l)) => format!("{} ({} keys)", l.verdict, l.keys),
                Some(Err(e)) => format!("the history is malformed: {e}"),
                None => "not checked".into(),
            }
        ),
        None => println!(
            "checks          history incomplete ({} attempts not recorded): no final-state check",
            rep.history_unrecorded
        ),
    }
}

/// A NetChain figure's flags.
#[derive(Args, Debug)]
pub struct NetchainFigureArgs {
    /// Virtual seconds of measured traffic per run [default: fig9 0.001, fig10 0.3]
    #[arg(long, value_parser = crate::bounds::float(1e-6, crate::bounds::SIM_SECONDS_MAX as f64))]
    seconds: Option<f64>,
    /// Keys preloaded
    #[arg(long, default_value_t = 20_000, value_parser = crate::bounds::int::<usize>(1..=65_536))]
    keys: usize,
    #[command(flatten)]
    seed: SeedFlag,
    /// Directory for NAME.json and NAME.png
    #[arg(long, default_value = "figures")]
    out: PathBuf,
    #[command(flatten)]
    output: JsonFlag,
}

pub fn figure(args: &NetchainFigureArgs, name: &str) -> Result<ExitCode, String> {
    let bar = crate::sim::progress_bar(args.output.json);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} runs, {elapsed} elapsed {msg}")
            .expect("valid template"),
    );
    let mut progress = |p: &Point| {
        bar.set_message(format!("{} {} at {}", p.panel, p.series, p.x));
        bar.inc(1);
    };
    let seconds = |s: f64| Duration::from_nanos((args.seconds.unwrap_or(s) * 1e9) as u64);
    let fig = if name == "netchain-fig9" {
        let o = Fig9Options {
            duration: seconds(0.001),
            seed: args.seed.seed,
            keys: args.keys,
            ..Fig9Options::default()
        };
        sim_figures::fig9(&o, &mut progress)?
    } else {
        let d = Fig10Options::default();
        let duration = seconds(d.duration.as_nanos() as f64 / 1e9);
        // The failure and its detection keep their share of the window.
        let scale =
            |t: Duration| Duration::from_nanos(t.as_nanos() * duration.as_nanos() / d.duration.as_nanos());
        let o = Fig10Options {
            duration,
            fail_at: scale(d.fail_at),
            detection: scale(d.detection),
            seed: args.seed.seed,
            keys: args.keys,
            ..d
        };
        sim_figures::fig10(&o, &mut progress)?
    };
    bar.finish_and_clear();
    write(&fig, &args.out, args.output.json)
}

fn write(fig: &NetchainFigure, out: &Path, json: bool) -> Result<ExitCode, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let text = serde_json::to_string_pretty(fig).expect("serializable");
    let json_path = out.join(format!("{}.json", fig.name));
    std::fs::write(&json_path, &text).map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    let png_path = out.join(format!("{}.png", fig.name));
    onepipe_bench::plot::write_png(&fig.plots, &png_path)?;
    if json {
        println!("{text}");
    } else {
        println!(
            "{:<6} {:<18} {:>10} {:>12} {:>10} {:>10} {:>10} {:>12} {:>8}",
            "panel", "series", "x", "MQPS", "rd p50 us", "wr p50 us", "unknown", "recovery ms", "wall s"
        );
        let ratio = |r: &Point| {
            r.throughput_ratio_in_recovery
                .map_or(String::new(), |x| format!("  (in recovery: {:.3} of before)", x))
        };
        for r in &fig.rows {
            println!(
                "{:<6} {:<18} {:>10} {:>12.3} {:>10.2} {:>10.2} {:>10} {:>12} {:>8.1}{}",
                r.panel,
                r.series,
                r.x,
                r.ok_ops_per_s / 1e6,
                r.read_latency_us_p50,
                r.write_latency_us_p50,
                r.unknown,
                r.recovery_ms.map_or("-".into(), |m| format!("{m:.1}")),
                r.wall_s,
                ratio(r)
            );
        }
        println!("wrote {} and {}", json_path.display(), png_path.display());
    }
    let lost: u64 = fig.rows.iter().filter_map(|r| r.acknowledged_writes_lost).sum();
    if lost > 0 {
        eprintln!("{lost} acknowledged writes lost: see {}", json_path.display());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
