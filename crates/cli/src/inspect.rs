//! `onepipe inspect FILE`: what the switches of a running `onepipe up FILE` report, per input
//! link (barrier lag, silence, state) and per socket (loss, overrun, backpressure), and which
//! link holds delivery back when barriers stop.

#![allow(clippy::disallowed_methods)] // compares report times with the system clock

use crate::flags::JsonFlag;
use clap::Args;
use onepipe::status::{CpuReport, Skew, Stall, SwitchStatus, holding_back, lagging_cpu, skew};
use onepipe::supervise::status_dir;
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// A report older than this means the switch is not running (it reports every 200 ms).
const STALE_AFTER_MS: f64 = 2_000.0;

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The topology file given to `onepipe up`
    topology: PathBuf,
    /// A barrier lagging its switch's clock by more than this counts as stalled
    #[arg(long, default_value_t = 100.0, value_parser = crate::bounds::float(0.0, crate::bounds::MILLIS_MAX as f64))]
    stall_ms: f64,
    /// With `switch_cpu_delay_us` in the file: a switch CPU whose last beacon waited this much
    /// longer than that delay is named as falling behind
    #[arg(long, default_value_t = 1000.0, value_parser = crate::bounds::float(0.0, crate::bounds::MICROS_MAX))]
    cpu_lag_us: f64,
    /// Read `DIR/NAME.json` for each switch instead of what `onepipe up` started: the files
    /// that switches run by hand write with `onepipe switch --status-file` (across machines,
    /// collect them in one directory)
    #[arg(long, value_name = "DIR")]
    status_dir: Option<PathBuf>,
    #[command(flatten)]
    out: JsonFlag,
}

#[derive(Serialize)]
struct Inspection {
    switches: Vec<SwitchStatus>,
    /// Switches of the topology with no fresh report (not running, or just starting).
    not_reporting: Vec<String>,
    /// The link holding best-effort delivery back, if any barrier lags more than `stall_ms`.
    holding_back: Option<Stall>,
    /// The clock skew between processes, as measured by the switches of one machine, or of
    /// several joined through links between them (`onepipe::status::skew`).
    skew: Option<Skew>,
    /// The switch CPU furthest behind, if one waits past `--cpu-lag-us` (paper 6.2.2).
    lagging_cpu: Option<LaggingCpu>,
}

#[derive(Serialize)]
struct LaggingCpu {
    switch: String,
    #[serde(flatten)]
    cpu: CpuReport,
}

pub fn run(args: InspectArgs) -> Result<ExitCode, String> {
    if !(args.stall_ms.is_finite() && args.stall_ms > 0.0) {
        return Err("--stall-ms must be positive".into());
    }
    let topology = Topology::from_file(&args.topology).map_err(|e| e.to_string())?;
    let dir = match &args.status_dir {
        Some(d) => d.clone(),
        None => status_dir(&args.topology).map_err(|e| e.to_string())?,
    };
    if !dir.is_dir() {
        return Err(match args.status_dir {
            Some(_) => format!("--status-dir {} is not a directory", dir.display()),
            None => format!(
                "{} is not up (no status in {}); start it with `onepipe up {}`",
                args.topology.display(),
                dir.display(),
                args.topology.display()
            ),
        });
    }
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut switches = Vec::new();
    let mut not_reporting = Vec::new();
    for s in &topology.switches {
        let path = dir.join(format!("{}.json", s.name));
        let status = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<SwitchStatus>(&bytes).ok())
            .filter(|st| (now_ns.saturating_sub(st.at_ns) as f64 / 1e6) < STALE_AFTER_MS);
        match status {
            Some(st) => switches.push(st),
            None => not_reporting.push(s.name.clone()),
        }
    }
    let threshold = Duration::from_nanos((args.stall_ms * 1e6) as u64);
    let cpu_threshold =
        Duration::from_nanos(topology.switch_cpu_delay_ns.unwrap_or(0) + (args.cpu_lag_us * 1e3) as u64);
    let inspection = Inspection {
        lagging_cpu: lagging_cpu(&switches, cpu_threshold).map(|(name, cpu)| LaggingCpu {
            switch: name.to_string(),
            cpu: cpu.clone(),
        }),
        holding_back: holding_back(&switches, threshold),
        skew: skew(&switches),
        switches,
        not_reporting,
    };
    if args.out.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&inspection).expect("serializable")
        );
    } else {
        print(&inspection, args.stall_ms);
    }
    Ok(ExitCode::SUCCESS)
}

/// A barrier's lag, `never` for a link never heard, `zero` for one heard with no clock behind
/// it yet (its neighbour hears no process).
fn lag(heard: bool, v: Option<f64>) -> String {
    match (heard, v) {
        (_, Some(us)) => format!("{:.1}", us / 1e3),
        (false, None) => "never".into(),
        (true, None) => "zero".into(),
    }
}

fn print(i: &Inspection, stall_ms: f64) {
    for s in &i.switches {
        let k = &s.socket;
        println!(
            "{}: forwarded {}, beacons sent {} received {}, links removed {}, barriers implausibly ahead {}; datagrams in {} out {}, lost {}, reordered {}, overrun {}, waited for credit {}, from strangers {}, malformed {}, of no protocol here {}",
            s.node,
            s.forwarded,
            s.beacons_sent,
            s.beacons_received,
            s.links_removed,
            s.barrier_implausible,
            k.datagrams_in,
            k.datagrams_out,
            k.lost,
            k.reordered,
            k.overrun,
            k.blocked_frames,
            k.unknown_source,
            k.malformed + s.malformed + s.control_malformed,
            s.unknown_protocol
        );
        println!(
            "  authentication: unauthenticated {}, bad tags {}, stale epochs {}, spoofed sources {}; peers restarted {} (their waiting datagrams dropped {})",
            k.unauthenticated, k.bad_tag, k.stale_epoch, s.spoofed_source, k.resyncs, k.restart_dropped
        );
        println!(
            "  {:>4} {:<14} {:<8} {:>14} {:>14} {:>10} {:>14}",
            "port", "peer", "state", "barrier lag ms", "commit lag ms", "silent ms", "clock ahead us"
        );
        for l in &s.inputs {
            println!(
                "  {:>4} {:<14} {:<8} {:>14} {:>14} {:>10.1} {:>14}{}",
                l.port,
                l.peer,
                l.state,
                lag(l.heard, l.barrier_lag_us),
                lag(l.heard, l.commit_lag_us),
                l.silent_us / 1e3,
                l.clock_ahead_us.map_or("-".into(), |us| format!("{us:.1}")),
                if s.lagging_port == Some(l.port) {
                    "  <- lowest"
                } else {
                    ""
                }
            );
        }
    }
    if !i.not_reporting.is_empty() {
        println!("not reporting: {}", i.not_reporting.join(", "));
    }
    let removed: Vec<String> = i
        .switches
        .iter()
        .flat_map(|s| {
            s.inputs
                .iter()
                .filter(|l| l.state == "dead")
                .map(move |l| format!("{} -> {}", l.peer, s.node))
        })
        .collect();
    if !removed.is_empty() {
        println!(
            "removed from the barrier (silent too long): {}",
            removed.join(", ")
        );
    }
    match &i.holding_back {
        Some(st) if st.circular => println!(
            "delivery is held back: every switch waits for another (around {} -> {}); no live process feeds them",
            st.peer, st.switch
        ),
        Some(st) => println!(
            "delivery is held back by {} -> {} (port {}): barrier lag {} ms",
            st.peer,
            st.switch,
            st.port,
            st.barrier_lag_us
                .map_or("- (no process clock behind it yet)".into(), |us| format!(
                    "{:.1}",
                    us / 1e3
                ))
        ),
        None => println!("barriers flow: no barrier lags more than {stall_ms} ms"),
    }
    if let Some(c) = &i.lagging_cpu {
        println!(
            "the switch CPU of {} falls behind: its last beacon waited {:.1} us (longest {:.1} us), {} waiting, {} dropped from a full queue",
            c.switch, c.cpu.lag_last_us, c.cpu.lag_max_us, c.cpu.backlog, c.cpu.overflow_drops
        );
    }
    match &i.skew {
        Some(k) => {
            let across = match k.bridges.is_empty() {
                true => String::new(),
                false => format!(
                    "; {} clocks joined through {}",
                    k.clocks.len(),
                    k.bridges.join(", ")
                ),
            };
            println!(
                "clock skew between processes: {:.1} us as seen by {} ({} at {} furthest behind, {} at {} furthest ahead; differences in one-way delay included{across})",
                k.spread_us,
                k.switches.join(", "),
                k.behind,
                k.behind_at,
                k.ahead,
                k.ahead_at
            )
        }
        None => println!(
            "clock skew between processes: not measured (no switches that can be compared hear two live processes)"
        ),
    }
}
