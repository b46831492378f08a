//! A cosy run in the deterministic simulator: the same switch program and host library as on
//! the runtimes, on `onepipe_sim::Engine` in virtual time, with link rates, finite switch
//! buffers (tail drop) and per-port priority classes modelled, so that a seed fixes the run.

use super::CosyFabric;
use super::NodeSpec;
use super::nodes::{CosyNode, Progress, Workload};
use super::report::{CosyReport, RunFacts, build};
use onepipe_cosy::{SwitchConfig, Timing};
use onepipe_fabric::Either;
use onepipe_sim::{Budget, Engine, Fault, FaultTarget, Role};
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;

/// Virtual time at which a run starts.
const START: Instant = Instant::from_nanos(1_000_000);

#[derive(Clone, Debug)]
pub struct CosySimConfig {
    pub fabric: CosyFabric,
    pub k: u8,
    pub load: f64,
    pub message_bytes: usize,
    /// Submissions during this long; the run goes on until every bound has passed.
    pub duration: Duration,
    /// How long a receiver holds a request for a slot (delta^E); `None`: one hRTT.
    pub hold: Option<Duration>,
    /// Slots a receiver gives one message at most; `None`: the host library's default (K/2).
    pub slots_max: Option<u8>,
    pub seed: u64,
    /// A host that crashes this long after the start.
    pub fail: Option<(u32, Duration)>,
    /// A switch (by index: leaves, then spines) that fails this long after the start, for good.
    pub switch_fail: Option<(usize, Duration)>,
    /// Message records kept per host, at most.
    pub records_max: usize,
    pub events_max: u64,
}

impl Default for CosySimConfig {
    fn default() -> Self {
        CosySimConfig {
            fabric: CosyFabric::paper(),
            k: 4,
            load: 0.5,
            message_bytes: 128 * 1024,
            duration: Duration::from_millis(2),
            hold: None,
            slots_max: None,
            seed: 1,
            fail: None,
            switch_fail: None,
            records_max: 1 << 20,
            events_max: 2_000_000_000,
        }
    }
}

impl CosySimConfig {
    /// The hosts' timing: hRTT as the simulator models it, no host processing time (the
    /// simulated hosts are infinitely fast), control before data at every port.
    pub fn timing(&self) -> Timing {
        let hrtt = self.fabric.modelled_hrtt();
        self.fabric
            .timing(self.k, hrtt, self.hold.unwrap_or(hrtt), Duration::ZERO, true)
    }
}

pub fn run(config: &CosySimConfig) -> Result<CosyReport, String> {
    let timing = config.timing();
    timing.validate().map_err(|e| e.to_string())?;
    if !(config.load > 0.0 && config.load <= 1.0) {
        return Err(format!("load {} is not in (0, 1]", config.load));
    }
    if config.message_bytes == 0 {
        return Err("messages must have at least 1 byte: the load is counted in bytes".into());
    }
    let wiring = config.fabric.wiring()?;
    let processes = wiring.process_count() as u32;
    let delta = timing.delta(config.message_bytes);
    let workload = Workload {
        message_bytes: config.message_bytes,
        mean_gap: Workload::mean_gap_for(config.load, config.message_bytes, timing.link_bits_per_s),
        start: START,
        end: START + config.duration,
        processes,
    };
    if let Some((host, _)) = config.fail
        && host >= processes
    {
        return Err(format!("--fail host:{host}: there are {processes} hosts"));
    }
    let progress = Arc::new(Progress::default());
    let built = NodeSpec {
        timing: &timing,
        workload: &workload,
        seed: config.seed,
        records_max: config.records_max,
        slots_max: config.slots_max,
        crash: config.fail.map(|(h, after)| (h, START + after)),
    }
    .build(&wiring, &progress)?;
    let nodes: Vec<(CosyNode, Role)> = built
        .into_iter()
        .map(|n| {
            let role = if matches!(n, Either::Left(_)) {
                Role::Switch
            } else {
                Role::Host
            };
            (n, role)
        })
        .collect();
    let model = config.fabric.model();
    let links = wiring.directed_links(config.fabric.link_delay);
    let mut engine = Engine::new(nodes, &links, model, config.seed, START).map_err(|e| e.to_string())?;
    let crashed: Vec<u32> = config.fail.map(|f| f.0).into_iter().collect();
    if let Some((switch, after)) = config.switch_fail {
        if switch >= wiring.switch_count() {
            return Err(format!(
                "switch {switch}: there are {} switches",
                wiring.switch_count()
            ));
        }
        engine.schedule_fault(Fault {
            target: FaultTarget::Node(switch as u32),
            at: START + after,
            heal_at: None,
        });
    }
    // Every message submitted in the window is flagged by its deadline; switches clear what
    // a crash left reserved by delta_cosy after it.
    let end = START + config.duration + delta + delta + Duration::from_micros(10);
    let budget = Budget {
        events_max: config.events_max,
        ..Budget::default()
    };
    engine.run_until(end, &budget).map_err(|e| e.to_string())?;
    // The data class: Lemma 3.3 bounds the queue data packets wait in.
    let queue_peak = engine.stats().peak_switch_queue_bytes[onepipe_wire::cosy::class::DATA as usize] as u64;
    let mut nodes = engine.into_nodes();
    for node in &mut nodes {
        match node {
            Either::Left(s) => s.invariants(),
            Either::Right(h) => {
                h.host.invariants();
                h.collect();
            }
        }
    }
    let facts = RunFacts {
        runtime: "sim".into(),
        load: config.load,
        duration: config.duration,
        timing,
        message_bytes: config.message_bytes,
        queue_peak_bytes: Some(queue_peak),
        crashed,
    };
    Ok(build(facts, &nodes))
}

/// The switches' configuration for hosts of `timing` whose largest bound is `delta`.
pub fn switch_config(timing: &Timing, delta: Duration, seed: u64) -> SwitchConfig {
    SwitchConfig {
        k: timing.k,
        cleanup_after: delta,
        seed,
        link_bits_per_s: timing.link_bits_per_s,
        // 64 frames of a slot: long against one frame, short against a message.
        meter_window: Duration::from_nanos(64 * timing.pace_gap(timing.frame_bytes_max, 1).as_nanos()),
        burst_bytes: timing.queue_bytes_max() + timing.frame_bytes_max as u64,
        queue_frames_max: 4096,
    }
}
