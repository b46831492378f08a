//! The paper's Fig. 4 (right) in the simulator: message slowdown against load for several
//! message sizes, cosy at one K next to 1Pipe's reliable service (DCTCP windows, ECN at the
//! switches) on the same fabric and the same Poisson all-to-all workload.
//!
//! Slowdown is completion time over the ideal hRTT + s/B for both, but the two systems end a
//! message at different places: cosy's completion is the flag at the *sender* (the receiver's
//! complete has come back, half an hRTT after the last frame), 1Pipe's is the delivery at the
//! *receiver* (what its simulator measures), which favours 1Pipe by about hRTT/2. 1Pipe's
//! reliable service delivers in timestamp order behind a commit barrier; the same service
//! delivering on arrival (`ordering: false`, DCTCP alone) is the third series. cosy's slowdown
//! counts completed messages only: the rejected share is reported next to it.

use super::CosyFabric;
use super::figures::{CosyFigure, us};
use super::report::Slowdown;
use super::sim::{CosySimConfig, run};
use onepipe_cosy::theory;
use onepipe_sim::figures::{Plot, Series};
use onepipe_sim::traffic::Pattern;
use onepipe_sim::{SimConfig, SimReport};
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct SlowdownOptions {
    pub fabric: CosyFabric,
    pub k: u8,
    pub sizes: Vec<usize>,
    pub loads: Vec<f64>,
    /// Submissions during this long, per run.
    pub duration: Duration,
    pub seed: u64,
    /// Also run 1Pipe's reliable service, ordered and unordered.
    pub one_pipe: bool,
}

impl Default for SlowdownOptions {
    fn default() -> SlowdownOptions {
        SlowdownOptions {
            fabric: CosyFabric::paper(),
            k: 4,
            sizes: vec![8 << 10, 32 << 10, 128 << 10, 512 << 10],
            loads: vec![0.2, 0.5, 0.8],
            duration: Duration::from_micros(300),
            seed: 1,
            one_pipe: true,
        }
    }
}

/// The systems of the figure, as the rows name them.
pub const SYSTEMS: [&str; 3] = ["cosy", "1pipe", "1pipe-unordered"];

#[derive(Clone, Debug, Serialize)]
pub struct SlowdownRow {
    pub system: &'static str,
    pub message_bytes: usize,
    pub load: f64,
    /// hRTT + s/B.
    pub ideal_us: f64,
    pub slowdown: Slowdown,
    pub submitted: u64,
    /// cosy: completed; 1Pipe: delivered.
    pub completed: u64,
    /// cosy: rejected or failed; 1Pipe: refused by a full send buffer.
    pub not_completed: u64,
    pub not_completed_fraction: f64,
    /// cosy only: its bound, and the largest completion over it.
    pub delta_us: Option<f64>,
    pub max_completion_over_delta: Option<f64>,
    /// 1Pipe only: retransmitted packets, ECN marks, checker violations.
    pub retransmissions: Option<u64>,
    pub ecn_marked: Option<u64>,
    pub violations: Option<u64>,
}

fn cosy_row(o: &SlowdownOptions, s: usize, load: f64, ideal_us: f64) -> Result<SlowdownRow, String> {
    let r = run(&CosySimConfig {
        fabric: o.fabric.clone(),
        k: o.k,
        load,
        message_bytes: s,
        duration: o.duration,
        seed: o.seed,
        ..CosySimConfig::default()
    })?;
    let not_completed = r.rejected + r.failed;
    Ok(SlowdownRow {
        system: SYSTEMS[0],
        message_bytes: s,
        load,
        ideal_us,
        slowdown: r.slowdown,
        submitted: r.submitted,
        completed: r.completed,
        not_completed,
        not_completed_fraction: fraction(not_completed, r.submitted),
        delta_us: Some(r.delta_us),
        max_completion_over_delta: Some(r.max_completion_over_delta),
        retransmissions: None,
        ecn_marked: None,
        violations: None,
    })
}

/// 1Pipe's simulator on the cosy fabric: the same links, delays and buffers, hosts as fast
/// as cosy's (no NIC delay, no CPU cost per frame), each process one host sending reliable
/// messages to one uniformly drawn process at Poisson gaps that make `load`.
pub fn one_pipe_config(
    o: &SlowdownOptions,
    s: usize,
    load: f64,
    ordering: bool,
) -> Result<SimConfig, String> {
    let f = &o.fabric;
    let gap_ns = (s as f64 * 8.0 * 1e9 / (f.link_bits_per_s as f64 * load)).round() as u64;
    Ok(SimConfig {
        seed: o.seed,
        topology: f.topology()?,
        link_bits_per_s: f.link_bits_per_s,
        link_delay: f.link_delay,
        switch_delay: f.switch_delay,
        host_nic_delay: Duration::ZERO,
        host_frame_cost: Duration::ZERO,
        queue_capacity_bytes: f.buffer_bytes,
        mtu_bytes: f.frame_bytes,
        pattern: Pattern::Random { fanout: 1 },
        gap: Duration::from_nanos(gap_ns.max(1)),
        message_bytes_min: s,
        message_bytes_max: s,
        reliable: true,
        ordering,
        send_for: o.duration,
        // Long enough for a backlog to drain; the run ends earlier once every process is idle.
        drain: Duration::from_millis(50),
        drain_max: Duration::from_millis(50),
        ..SimConfig::default()
    })
}

fn one_pipe_row(
    o: &SlowdownOptions,
    s: usize,
    load: f64,
    ideal_us: f64,
    ordering: bool,
) -> Result<SlowdownRow, String> {
    let c = one_pipe_config(o, s, load, ordering)?;
    let r: SimReport = onepipe_sim::run(&c, &mut |_, _| {}).map_err(|e| e.to_string())?;
    let lat = &r.latency_us;
    let submitted = r.scatterings_sent + r.scatterings_refused;
    Ok(SlowdownRow {
        system: if ordering { SYSTEMS[1] } else { SYSTEMS[2] },
        message_bytes: s,
        load,
        ideal_us,
        slowdown: Slowdown {
            p50: lat.p50 / ideal_us,
            p99: lat.p99 / ideal_us,
            max: lat.max / ideal_us,
        },
        submitted,
        completed: r.delivered,
        not_completed: r.scatterings_refused,
        not_completed_fraction: fraction(r.scatterings_refused, submitted),
        delta_us: None,
        max_completion_over_delta: None,
        retransmissions: Some(r.retransmissions),
        ecn_marked: Some(r.engine.ecn_marked),
        violations: Some(r.violations),
    })
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Runs of the figure, for a progress bar.
pub fn runs(o: &SlowdownOptions) -> u64 {
    let systems = if o.one_pipe { 3 } else { 1 };
    (o.sizes.len() * o.loads.len() * systems) as u64
}

/// `cosy-slowdown`: one plot per message size, slowdown p50 and p99 against load.
pub fn slowdown_figure(
    o: &SlowdownOptions,
    progress: &mut dyn FnMut(&SlowdownRow),
) -> Result<CosyFigure<SlowdownRow>, String> {
    if let Some(bad) = o.loads.iter().find(|l| !(**l > 0.0 && **l <= 1.0)) {
        return Err(format!("load {bad} is not in (0, 1]"));
    }
    let hrtt = o.fabric.modelled_hrtt();
    let mut rows = Vec::new();
    for &s in &o.sizes {
        let ideal_us = us(hrtt + theory::transmission_time(s as u64, o.fabric.link_bits_per_s));
        for &load in &o.loads {
            let mut push = |row: SlowdownRow| {
                progress(&row);
                rows.push(row);
            };
            push(cosy_row(o, s, load, ideal_us)?);
            if o.one_pipe {
                push(one_pipe_row(o, s, load, ideal_us, true)?);
                push(one_pipe_row(o, s, load, ideal_us, false)?);
            }
        }
    }
    let plots = o.sizes.iter().map(|&s| size_plot(&rows, s, o.k)).collect();
    Ok(CosyFigure {
        name: "cosy-slowdown",
        model: serde_json::json!({
            "hosts": o.fabric.hosts(),
            "spines_c": o.fabric.spines,
            "link_gbps": o.fabric.link_bits_per_s as f64 / 1e9,
            "hrtt_us": us(hrtt),
            "k": o.k,
            "virtual_seconds_per_run": o.duration.as_nanos() as f64 / 1e9,
            "seed": o.seed,
            "slowdown": "completion time / (hRTT + s/B); cosy: submission to the sender's flag, completed \
                messages only; 1pipe: send to delivery at the receiver",
            "one_pipe": "the simulator's reliable service (DCTCP windows, ECN at 100 KB, microsecond timers), \
                ordered (1pipe) and delivering on arrival (1pipe-unordered)",
        }),
        paper: serde_json::json!({
            "figure": "4 (right)",
            "finding": "8 KB RPCs sustain about 0.65 load with maximum slowdown 40; larger RPCs sustain more",
        }),
        rows,
        plots,
    })
}

fn size_plot(rows: &[SlowdownRow], s: usize, k: u8) -> Plot {
    let mut series = Vec::new();
    for system in SYSTEMS {
        let of = rows.iter().filter(|r| r.system == system && r.message_bytes == s);
        if of.clone().next().is_none() {
            continue;
        }
        let name = if system == "cosy" {
            format!("cosy K={k}")
        } else {
            system.into()
        };
        series.push(Series {
            label: format!("{name} p50"),
            points: of.clone().map(|r| (r.load, r.slowdown.p50)).collect(),
        });
        series.push(Series {
            label: format!("{name} p99"),
            points: of.map(|r| (r.load, r.slowdown.p99)).collect(),
        });
    }
    let mut plot = Plot::new(
        &format!("slowdown vs load, {} KB", s as f64 / 1024.0),
        "load",
        "slowdown",
        false,
        series,
    );
    plot.y_log = true;
    plot
}
