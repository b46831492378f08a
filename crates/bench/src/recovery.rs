//! `onepipe bench recovery`: paper Fig. 10, failure recovery time of reliable 1Pipe for host,
//! ToR, core-link and core-switch failures as hosts grow, in the simulator with the paper's
//! timing and on the inproc runtime with this machine's.

use crate::demo::{DemoConfig, FailTarget, PlannedFailure, run_phase};
use indicatif::ProgressBar;
use onepipe_check::{check_all, check_atomicity};
use onepipe_fabric::Topology;
use onepipe_sim::recovery::{FailureKind, RecoveryRow, recovery, recovery_topology};
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// Host counts (2 or multiples of 4; the paper's are 2, 8, 16, 32)
    pub hosts: Vec<u32>,
    /// Simulated runs per point (the failure's phase against the beacons moves with the seed)
    pub seeds: u32,
    /// Where to run: sim, inproc or both
    pub runtime: Where,
    /// Host counts for the inproc runtime (each point is a real run of --inproc-seconds)
    pub inproc_hosts: Vec<u32>,
    /// Length of each inproc run; the failure comes at 40% of it
    pub inproc_seconds: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    Sim,
    Inproc,
    Both,
}

/// An inproc point: the controller's timeline, and the barrier stall of correct processes (from
/// the failure to their first delivery of a message stamped after it).
#[derive(Clone, Debug, Serialize)]
pub struct InprocRow {
    pub kind: FailureKind,
    pub hosts: u32,
    pub detection_us: Option<f64>,
    pub resume_us: Option<f64>,
    pub recovery_us: Option<f64>,
    pub stalled_processes: u64,
    pub failed_processes: usize,
    pub aborted: u64,
    /// Ordering checks and atomicity over every process's log.
    pub checks_pass: bool,
}

#[derive(Serialize)]
pub struct Report {
    pub sim: Option<SimPart>,
    pub inproc: Option<InprocPart>,
}

#[derive(Serialize)]
pub struct SimPart {
    pub beacon_interval_us: f64,
    pub dead_after_intervals: u32,
    pub control_delay_us: f64,
    /// Controller CPU per control frame and per failure notification.
    pub controller_frame_cost_us: f64,
    pub rows: Vec<RecoveryRow>,
}

#[derive(Serialize)]
pub struct InprocPart {
    pub beacon_interval_us: f64,
    pub dead_after_intervals: u32,
    pub rows: Vec<InprocRow>,
}

/// Runs every point, counting them on `bar` (cleared at the end).
pub fn run(args: &RecoveryOptions, bar: &ProgressBar) -> Result<Report, String> {
    for &h in args.hosts.iter().chain(&args.inproc_hosts) {
        recovery_topology(h).map_err(|e| format!("--hosts: {e}"))?;
    }
    if args.seeds == 0 || args.inproc_seconds.is_nan() || args.inproc_seconds <= 0.0 {
        return Err("--seeds and --inproc-seconds must be positive".into());
    }
    let sim_on = args.runtime != Where::Inproc;
    let inproc_on = args.runtime != Where::Sim;
    let points = sim_on as u64 * args.hosts.len() as u64 + inproc_on as u64 * args.inproc_hosts.len() as u64;
    bar.set_length(points * FailureKind::ALL.len() as u64);
    let sim = if sim_on {
        bar.set_message("simulator");
        let rows = recovery(&args.hosts, args.seeds, &mut |_| bar.inc(1)).map_err(|e| e.to_string())?;
        let d = onepipe_sim::SimConfig::default();
        Some(SimPart {
            beacon_interval_us: d.beacon_interval.as_nanos() as f64 / 1e3,
            dead_after_intervals: d.dead_after_intervals,
            control_delay_us: d.control_delay.as_nanos() as f64 / 1e3,
            controller_frame_cost_us: d.controller_frame_cost.as_nanos() as f64 / 1e3,
            rows,
        })
    } else {
        None
    };
    let inproc = if inproc_on {
        let mut rows = Vec::new();
        for &h in &args.inproc_hosts {
            for kind in FailureKind::ALL {
                bar.set_message(format!("inproc {} at {h} hosts", kind.label()));
                rows.push(inproc_point(kind, h, args.inproc_seconds)?);
                bar.inc(1);
            }
        }
        let d = DemoConfig::default();
        Some(InprocPart {
            beacon_interval_us: d.beacon_interval.as_nanos() as f64 / 1e3,
            dead_after_intervals: d.dead_after_intervals,
            rows,
        })
    } else {
        None
    };
    bar.finish_and_clear();
    Ok(Report { sim, inproc })
}

fn switch_named(topology: &Topology, name: &str) -> Result<usize, String> {
    topology
        .switches
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| format!("no switch {name} in {}", topology.name))
}

fn inproc_point(kind: FailureKind, hosts: u32, seconds: f64) -> Result<InprocRow, String> {
    let topology = recovery_topology(hosts)?;
    let target = match kind {
        FailureKind::Host => FailTarget::Host(topology.hosts.len() - 1),
        FailureKind::Tor => {
            let tor = topology.switches.iter().rposition(|s| s.layer == 1);
            FailTarget::Switch(tor.ok_or("a ToR")?)
        }
        FailureKind::CoreLink => FailTarget::Link(
            switch_named(&topology, "spine0.0")?,
            switch_named(&topology, "core0")?,
        ),
        FailureKind::CoreSwitch => FailTarget::Switch(switch_named(&topology, "core0")?),
    };
    let duration = Duration::from_nanos((seconds * 1e9) as u64);
    let config = DemoConfig {
        topology,
        reliable: true,
        duration,
        // Paced, so that workers are not so busy that the dead-link timeout fires on a live
        // link (a false detection).
        rate_per_process: 500.0,
        failures: vec![PlannedFailure {
            target,
            at: Duration::from_nanos(duration.as_nanos() * 2 / 5),
        }],
        ..DemoConfig::default()
    };
    let r = run_phase(&config, true, &mut |_, _| {}).map_err(|e| e.to_string())?;
    let outcome = r.failure.clone().unwrap_or_default();
    let failed: Vec<u32> = outcome.failed_processes.iter().map(|f| f.0).collect();
    let checks_pass = check_all(&r.logs).ok() && check_atomicity(&r.logs, &failed).is_empty();
    Ok(InprocRow {
        kind,
        hosts,
        detection_us: outcome.detection_us,
        resume_us: outcome.resume_us,
        recovery_us: outcome.recovery_us,
        stalled_processes: outcome.stalled_processes,
        failed_processes: failed.len(),
        aborted: outcome.aborted,
        checks_pass,
    })
}
