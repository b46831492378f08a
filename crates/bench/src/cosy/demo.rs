//! `onepipe cosy demo`: cosy on the inproc or udp runtime, in real time.
//!
//! The run has two phases on the same fabric shape:
//! 1. Calibration: every host sends empty messages at a low rate; the largest round trip from
//!    a submission to its rsvp, plus the serialization a full frame adds on the path, is hRTT,
//!    and the spread of those round trips (the machine's scheduling jitter) is the processing
//!    allowance of the two legs calibration did not measure (docs/cosy.md, "The bound").
//! 2. The workload: Poisson all-to-all messages at the load, with the bound computed from the
//!    calibration and printed before it starts.
//!
//! Links are emulated at a low rate (20 Mbit/s by default), so that a frame's time on a link
//! (600 us) and Lemma 3.3's queueing term (18 ms at K = 4) are large against the scheduling
//! jitter of a shared 2-core machine (a worker descheduled for a few ms).

#![allow(clippy::disallowed_methods)] // the run drives real time: it sleeps between progress reports

use super::nodes::{CosyNode, Progress, Workload};
use super::report::{CosyReport, RunFacts, build};
use super::{CosyFabric, NodeSpec};
use crate::netchain::fabric::{NetchainRuntime, Running};
use indicatif::ProgressBar;
use onepipe_fabric::{Either, Wiring};
use onepipe_runtime::inproc::{Clock, InprocConfig, Runtime};
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_wire::Duration;
use onepipe_wire::cosy::HEADER_LEN;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[derive(Clone, Debug)]
pub struct CosyDemoConfig {
    pub fabric: CosyFabric,
    pub k: u8,
    pub load: f64,
    pub message_bytes: usize,
    pub duration: Duration,
    /// delta^E; `None`: one hRTT.
    pub hold: Option<Duration>,
    /// A host that crashes this long after the workload starts.
    pub fail: Option<(u32, Duration)>,
    pub runtime: NetchainRuntime,
    pub threads: usize,
    pub calibration: Duration,
    pub seed: u64,
    pub records_max: usize,
}

impl Default for CosyDemoConfig {
    fn default() -> Self {
        CosyDemoConfig {
            fabric: CosyFabric::testbed(20_000_000),
            k: 4,
            load: 0.5,
            message_bytes: 128 * 1024,
            duration: Duration::from_secs(3),
            hold: None,
            fail: None,
            runtime: NetchainRuntime::Inproc,
            threads: 2,
            calibration: Duration::from_millis(300),
            seed: 1,
            records_max: 1 << 20,
        }
    }
}

/// What calibration measured.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Calibration {
    pub samples: usize,
    pub rtt_min_us: f64,
    pub rtt_p50_us: f64,
    pub rtt_max_us: f64,
    /// hRTT: the largest round trip plus what a full frame adds on the path's links.
    pub hrtt_us: f64,
    pub processing_us: f64,
}

impl CosyDemoConfig {
    fn control_priority(&self) -> bool {
        // The runtimes' links are FIFO rings and sockets: no priority classes.
        false
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(self.load > 0.0 && self.load <= 1.0) {
            return Err(format!("--load {} is not in (0, 1]", self.load));
        }
        if self.message_bytes == 0 {
            return Err("--message-bytes must be at least 1: the load is counted in bytes".into());
        }
        if let Some((host, _)) = self.fail
            && host as usize >= self.fabric.hosts()
        {
            return Err(format!(
                "--fail host:{host}: there are {} hosts",
                self.fabric.hosts()
            ));
        }
        Ok(())
    }
}

/// Calibrates, then runs the workload; `bar` shows the workload's progress.
pub fn run(c: &CosyDemoConfig, bar: &ProgressBar) -> Result<(CosyReport, Calibration), String> {
    c.validate()?;
    let wiring = c.fabric.wiring()?;
    bar.set_message("calibrating hRTT");
    let calibration = calibrate(c, &wiring)?;
    let hrtt = Duration::from_nanos((calibration.hrtt_us * 1e3) as u64);
    let processing = Duration::from_nanos((calibration.processing_us * 1e3) as u64);
    let timing = c.fabric.timing(
        c.k,
        hrtt,
        c.hold.unwrap_or(hrtt),
        processing,
        c.control_priority(),
    );
    timing.validate().map_err(|e| e.to_string())?;
    let delta = timing.delta(c.message_bytes);
    bar.println(format!(
        "cosy: hRTT {:.1} us (calibrated), delta {:.1} us for {} B messages, K = {}",
        calibration.hrtt_us,
        delta.as_nanos() as f64 / 1e3,
        c.message_bytes,
        c.k
    ));
    let clock = Clock::from_system_time();
    let start = clock.now() + Duration::from_millis(50);
    let workload = Workload {
        message_bytes: c.message_bytes,
        mean_gap: Workload::mean_gap_for(c.load, c.message_bytes, timing.link_bits_per_s),
        start,
        end: start + c.duration,
        processes: wiring.process_count() as u32,
    };
    let progress = Arc::new(Progress::default());
    let nodes = NodeSpec {
        timing: &timing,
        workload: &workload,
        seed: c.seed,
        records_max: c.records_max,
        slots_max: None,
        crash: c.fail.map(|(h, t)| (h, start + t)),
    }
    .build(&wiring, &progress)?;
    let fabric = start_fabric(c, &wiring, nodes, clock)?;
    bar.set_message("messages flagged");
    let expected = expected_messages(c);
    bar.set_length(expected);
    let end = start + c.duration + delta + delta + Duration::from_millis(20);
    while clock.now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
        bar.set_position(progress.flagged.load(Ordering::Relaxed).min(expected));
    }
    let backlog = match &fabric {
        Running::Inproc(r) => Some(
            r.fault_counters()
                .peak_switch_backlog_bytes
                .load(Ordering::Relaxed),
        ),
        Running::Udp(_) => None,
    };
    let mut nodes = fabric.stop();
    for node in &mut nodes {
        if let Either::Right(h) = node {
            h.collect();
        }
    }
    let facts = RunFacts {
        runtime: runtime_name(c.runtime).into(),
        load: c.load,
        duration: c.duration,
        timing,
        message_bytes: c.message_bytes,
        queue_peak_bytes: backlog,
        crashed: c.fail.map(|f| f.0).into_iter().collect(),
    };
    Ok((build(facts, &nodes), calibration))
}

fn runtime_name(r: NetchainRuntime) -> &'static str {
    match r {
        NetchainRuntime::Inproc => "inproc",
        NetchainRuntime::Udp => "udp",
    }
}

/// Messages the workload offers on average, for the progress bar.
fn expected_messages(c: &CosyDemoConfig) -> u64 {
    let per_host_per_s = c.load * c.fabric.link_bits_per_s as f64 / (8.0 * c.message_bytes.max(1) as f64);
    (per_host_per_s * c.fabric.hosts() as f64 * c.duration.as_nanos() as f64 / 1e9).max(1.0) as u64
}

fn start_fabric(
    c: &CosyDemoConfig,
    wiring: &Wiring,
    nodes: Vec<CosyNode>,
    clock: Clock,
) -> Result<Running<CosyNode>, String> {
    match c.runtime {
        NetchainRuntime::Inproc => {
            let config = InprocConfig {
                workers: c.threads,
                link_bits_per_s: Some(c.fabric.link_bits_per_s),
                link_capacity_bytes: c.fabric.buffer_bytes,
                frame_max_bytes: c.fabric.frame_bytes,
                ..InprocConfig::default()
            };
            let links = wiring.directed_links(c.fabric.link_delay);
            Runtime::start(nodes, &links, &[], &config, clock)
                .map(Running::Inproc)
                .map_err(|e| e.to_string())
        }
        NetchainRuntime::Udp => {
            let udp = crate::runtimes::udp_config(c.fabric.frame_bytes.max(1500) + 64, c.threads, 16, false)?;
            LocalFabric::start(wiring, nodes, &udp, clock)
                .map(Running::Udp)
                .map_err(|e| e.to_string())
        }
    }
}

/// Empty messages at a low rate from every host; their round trips to the rsvp.
fn calibrate(c: &CosyDemoConfig, wiring: &Wiring) -> Result<Calibration, String> {
    // Generous provisional bounds: nothing may time out while we measure.
    let provisional = c.fabric.timing(
        c.k,
        Duration::from_millis(20),
        Duration::ZERO,
        Duration::from_millis(20),
        c.control_priority(),
    );
    let clock = Clock::from_system_time();
    let start = clock.now() + Duration::from_millis(20);
    let probes = Workload {
        message_bytes: 0,
        mean_gap: Duration::from_millis(5),
        start,
        end: start + c.calibration,
        processes: wiring.process_count() as u32,
    };
    let progress = Arc::new(Progress::default());
    let nodes = NodeSpec {
        timing: &provisional,
        workload: &probes,
        seed: c.seed,
        records_max: c.records_max,
        slots_max: None,
        crash: None,
    }
    .build(wiring, &progress)?;
    let fabric = start_fabric(c, wiring, nodes, clock)?;
    std::thread::sleep(std::time::Duration::from_nanos(
        (c.calibration + Duration::from_millis(100)).as_nanos(),
    ));
    let rtts: Vec<u64> = fabric
        .stop()
        .iter()
        .filter_map(|n| match n {
            Either::Right(h) => Some(h.rsvp_rtts_ns.iter().copied()),
            Either::Left(_) => None,
        })
        .flatten()
        .collect();
    let mut sorted = rtts;
    sorted.sort_unstable();
    let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
        return Err("calibration: no rsvp came back (is the fabric running?)".into());
    };
    // A request and an rsvp are headers alone; a full frame takes longer on each link, both
    // ways (store and forward).
    let links = 2 * (c.fabric.path_switches() as u64 + 1);
    let frame_extra_ns = links
        * ((c.fabric.frame_bytes - HEADER_LEN) as u64 * 8 * 1_000_000_000).div_ceil(c.fabric.link_bits_per_s);
    Ok(Calibration {
        samples: sorted.len(),
        rtt_min_us: min as f64 / 1e3,
        rtt_p50_us: sorted[sorted.len() / 2] as f64 / 1e3,
        rtt_max_us: max as f64 / 1e3,
        hrtt_us: (max + frame_extra_ns) as f64 / 1e3,
        processing_us: 2.0 * (max - min) as f64 / 1e3,
    })
}
