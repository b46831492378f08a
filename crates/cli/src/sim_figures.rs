//! `onepipe sim fig10|fig11|fig12|large-message`: paper Figs. 10, 11 and 12 and the 1 MB
//! message (section 7.2), parsed and printed; the sweeps are in `onepipe_sim::{fig10, fig11,
//! fig12, large_message}` and `onepipe_bench::{fig11, reorder_cost}`.

use crate::flags::JsonFlag;
use onepipe_bench::reorder_cost::{DELAY_US_MAX, ReorderCostOptions};
use onepipe_sim::figures::Plot;
use onepipe_wire::Duration;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Fig10Args {
    /// Host counts (2 or multiples of 4; the paper's are 2, 8, 16, 32)
    #[arg(long, value_delimiter = ',', default_value = "2,8,16,32", value_parser = crate::bounds::int::<u32>(1..=crate::bounds::PROCESSES_MAX))]
    points: Vec<u32>,
    /// Runs per point (the failure's phase against the beacons moves with the seed)
    #[arg(long, default_value_t = 5, value_parser = crate::bounds::int::<u32>(1..=crate::bounds::REPEATS_MAX))]
    seeds: u32,
    /// Directory for fig10.json and fig10.png
    #[arg(long, default_value = "figures")]
    out: PathBuf,
    #[command(flatten)]
    output: JsonFlag,
}

#[derive(clap::Args, Debug)]
pub struct Fig11Args {
    /// Reordering delays in us (the paper's: 1, 10, 100, 1000)
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000", value_parser = crate::bounds::float(0.001, DELAY_US_MAX))]
    points: Vec<f64>,
    /// Messages through the real receive path per delay (at least four buffers' worth are
    /// sent); 0 skips the CPU measurement
    #[arg(long, default_value_t = 2_000_000, value_parser = crate::bounds::int::<u64>(0..=crate::bounds::MESSAGES_MAX))]
    host_messages: u64,
    /// Payload of the CPU measurement's messages (the paper's Fig. 8 and 11 use 64)
    #[arg(long, default_value_t = 64, value_parser = crate::bounds::int::<usize>(8..=1400))]
    host_message_bytes: usize,
    /// Directory for fig11.json and fig11.png
    #[arg(long, default_value = "figures")]
    out: PathBuf,
    #[command(flatten)]
    output: JsonFlag,
}

#[derive(clap::Args, Debug)]
pub struct Fig12Args {
    /// Panel (a): background DCTCP flows per host, on a fabric without oversubscription
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,5,10", value_parser = crate::bounds::int::<u32>(0..=onepipe_sim::dctcp::FLOWS_PER_HOST_MAX as u64))]
    flows: Vec<u32>,
    /// Panel (b): oversubscription of the ToRs' uplinks (1: none)
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8", value_parser = crate::bounds::float(1.0, 64.0))]
    ratios: Vec<f64>,
    /// Panel (b): background flows per host
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<u32>(0..=onepipe_sim::dctcp::FLOWS_PER_HOST_MAX as u64))]
    ratio_flows: u32,
    /// Processes, placed as in Fig. 9a (16: two racks; 32 and more: the testbed)
    #[arg(long, default_value_t = 32, value_parser = crate::bounds::int::<u32>(2..=512))]
    processes: u32,
    /// Directory for fig12.json and fig12.png
    #[arg(long, default_value = "figures")]
    out: PathBuf,
    #[command(flatten)]
    output: JsonFlag,
}

#[derive(clap::Args, Debug)]
pub struct LargeMessageArgs {
    /// Size of the large message (the paper's: 1 MB)
    #[arg(long, default_value_t = onepipe_sim::large_message::LARGE_MESSAGE_BYTES, value_parser = crate::bounds::int::<usize>(8..=crate::bounds::MESSAGE_BYTES_MAX))]
    bytes: usize,
    /// How long after the large message the measured small messages are sent
    #[arg(long, default_value = "100us", value_parser = crate::sim::time)]
    window: Duration,
    #[command(flatten)]
    output: JsonFlag,
}

/// Writes `fig` as NAME.json and its plots as NAME.png under `out`, then prints the JSON
/// (`json`) or the table `print` makes and where both went; returns the JSON's path.
pub fn publish_figure<T: serde::Serialize>(
    out: &Path,
    json: bool,
    name: &str,
    fig: &T,
    plots: &[Plot],
    print: impl FnOnce(),
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let text = serde_json::to_string_pretty(fig).expect("serializable");
    let json_path = out.join(format!("{name}.json"));
    std::fs::write(&json_path, &text).map_err(|e| format!("writing {}: {e}", json_path.display()))?;
    let png_path = out.join(format!("{name}.png"));
    onepipe_bench::plot::write_png(plots, &png_path)?;
    if json {
        println!("{text}");
    } else {
        print();
        println!("wrote {} and {}", json_path.display(), png_path.display());
    }
    Ok(json_path)
}

fn bar(hidden: bool, points: usize) -> indicatif::ProgressBar {
    let bar = crate::bench::runs_bar(hidden, "{bar:40} {pos}/{len} {msg}, {elapsed} elapsed");
    bar.set_length(points as u64);
    bar
}

pub fn fig10(args: &Fig10Args) -> Result<ExitCode, String> {
    for &h in &args.points {
        onepipe_sim::recovery::recovery_topology(h).map_err(|e| format!("--points: {e}"))?;
    }
    let kinds = onepipe_sim::recovery::FailureKind::ALL.len();
    let bar = bar(args.output.json, args.points.len() * kinds);
    let fig = onepipe_sim::fig10::fig10(&args.points, args.seeds, &mut |r| {
        bar.set_message(format!("{} at {} hosts", r.kind.label(), r.hosts));
        bar.inc(1);
    })
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let json_path = publish_figure(&args.out, args.output.json, fig.name, &fig, &fig.plots, || {
        println!(
            "{:<12} {:>5} {:>8} {:>8} {:>8} {:>8} {:>6} {:>5}",
            "failure", "hosts", "mean us", "p5", "p95", "paper", "ratio", "viol"
        );
        for r in &fig.rows {
            println!(
                "{:<12} {:>5} {:>8.1} {:>8.1} {:>8.1} {:>8} {:>6} {:>5}",
                r.kind.label(),
                r.hosts,
                r.recovery_us.mean,
                r.recovery_us.p5,
                r.recovery_us.p95,
                r.paper_us.map_or("-".into(), |v| format!("{v:.0}")),
                r.ratio_to_paper.map_or("-".into(), |v| format!("{v:.2}")),
                r.violations
            );
        }
    })?;
    Ok(verdict(fig.rows.iter().map(|r| r.violations).sum(), &json_path))
}

fn verdict(violations: u64, json_path: &Path) -> ExitCode {
    if violations > 0 {
        eprintln!("some runs had violations: see {}", json_path.display());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

pub fn fig11(args: &Fig11Args) -> Result<ExitCode, String> {
    let host = (args.host_messages > 0).then(|| ReorderCostOptions {
        messages: args.host_messages,
        message_bytes: args.host_message_bytes,
        ..ReorderCostOptions::default()
    });
    let bar = bar(
        args.output.json,
        args.points.len() * (1 + host.is_some() as usize),
    );
    let fig = onepipe_bench::fig11::fig11(&args.points, host.as_ref(), &mut |p| {
        use onepipe_bench::fig11::Progress;
        bar.set_message(match p {
            Progress::Sim(r) => format!("simulated {} us", r.delay_us),
            Progress::Host(r) => format!("measured {} us on this CPU", r.delay_us),
        });
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let json_path = publish_figure(&args.out, args.output.json, fig.name, &fig, &fig.plots, || {
        print_fig11(&fig);
    })?;
    let late: u64 = fig.host.iter().map(|r| r.late + r.dropped_full).sum();
    if late > 0 {
        eprintln!("the CPU measurement dropped {late} messages (late or buffer full): its setup is wrong");
        return Ok(ExitCode::from(1));
    }
    Ok(verdict(fig.sim.iter().map(|r| r.violations).sum(), &json_path))
}

fn print_fig11(fig: &onepipe_bench::fig11::Fig11) {
    let mb = |b: f64| b / 1e6;
    println!("simulator: one 100 Gbps stream of MTU frames, barriers late by the delay");
    println!(
        "{:>9} {:>10} {:>12} {:>10} {:>10} {:>10}",
        "delay us", "M msg/s", "buffer MB", "BDP MB", "paper MB", "violations"
    );
    for r in &fig.sim {
        println!(
            "{:>9} {:>10.2} {:>12.3} {:>10.3} {:>10} {:>10}",
            r.delay_us,
            r.throughput_msgs_per_s / 1e6,
            mb(r.reorder_bytes_peak as f64),
            mb(r.link_bdp_bytes),
            r.paper_buffer_bytes
                .map_or("-".into(), |v| format!("{:.4}", mb(v))),
            r.violations
        );
    }
    if fig.host.is_empty() {
        return;
    }
    println!(
        "this CPU: the endpoint's receive path, {}-byte messages at 100 Gbps",
        fig.host_message_bytes
    );
    println!(
        "{:>9} {:>14} {:>12} {:>12} {:>10}",
        "delay us", "M msg/CPU-s", "buffer MB", "messages", "paper"
    );
    for r in &fig.host {
        let paper = onepipe_sim::fig11::paper_at(r.delay_us);
        println!(
            "{:>9} {:>14.2} {:>12.3} {:>12} {:>10}",
            r.delay_us,
            r.throughput_msgs_per_cpu_s / 1e6,
            mb(r.reorder_bytes_peak as f64),
            r.messages,
            paper.map_or("-".into(), |p| format!("{:.1}", p.1))
        );
    }
}

pub fn fig12(args: &Fig12Args) -> Result<ExitCode, String> {
    let bar = bar(args.output.json, 3 * (args.flows.len() + args.ratios.len()));
    let fig = onepipe_sim::fig12::fig12(
        args.processes,
        &args.flows,
        &args.ratios,
        args.ratio_flows,
        &mut |r| {
            bar.set_message(format!(
                "{} with {} flows, {}:1",
                r.row.series, r.flows_per_host, r.oversubscription
            ));
            bar.inc(1);
        },
    )
    .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    let json_path = publish_figure(&args.out, args.output.json, fig.name, &fig, &fig.plots, || {
        print_fig12(&fig);
    })?;
    Ok(verdict(
        fig.rows.iter().map(|r| r.row.violations).sum(),
        &json_path,
    ))
}

fn print_fig12(fig: &onepipe_sim::fig12::Fig12) {
    println!(
        "{} processes on {}, ECN threshold {} bytes; paper: +30 us (best effort), +50 us (reliable) at 10 flows",
        fig.processes, fig.topology, fig.ecn_threshold_bytes
    );
    println!(
        "{:<5} {:<10} {:>5} {:>6} {:>9} {:>8} {:>9} {:>8} {:>9} {:>5}",
        "panel", "series", "flows", "ratio", "mean us", "p99 us", "inflation", "bg Gbps", "peak KB", "viol"
    );
    for r in &fig.rows {
        println!(
            "{:<5} {:<10} {:>5} {:>6} {:>9.2} {:>8.2} {:>9} {:>8.1} {:>9.0} {:>5}",
            r.panel,
            r.row.series,
            r.flows_per_host,
            r.oversubscription,
            r.row.latency_us.mean,
            r.row.latency_us.p99,
            r.inflation_us_mean.map_or("-".into(), |v| format!("{v:+.1}")),
            r.background_goodput_gbps_per_host,
            r.peak_queue_bytes as f64 / 1e3,
            r.row.violations
        );
    }
}

pub fn large_message(args: &LargeMessageArgs) -> Result<ExitCode, String> {
    if args.window == Duration::ZERO {
        return Err("--window must be positive".into());
    }
    let r = onepipe_sim::large_message::large_message(args.bytes, args.window).map_err(|e| e.to_string())?;
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&r).expect("serializable"));
    } else {
        println!(
            "{} processes, {} Gbps links: one {}-byte message ({:.1} us on a link); small messages \
             sent in the {} us after it",
            r.processes, r.link_gbps, r.large_message_bytes, r.serialization_us, r.window_us
        );
        for (name, l) in [("without", &r.without), ("with", &r.with)] {
            println!(
                "  {name:<8} latency mean {:.2} us, p99 {:.2} us, max {:.2} us",
                l.mean, l.p99, l.max
            );
        }
        println!(
            "  added: {:.1} us at most, {:.1} us on average (paper: {} us)",
            r.added_us_max, r.added_us_mean, r.paper_added_us
        );
    }
    if r.violations > 0 {
        eprintln!("a run had violations: run with --json to see them");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
