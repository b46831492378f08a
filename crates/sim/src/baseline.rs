//! The total-order baselines of paper Fig. 8 (host sequencer, switch sequencer, token, Lamport
//! exchange; `crates/baselines`) in the simulator, on the same fabric model as 1Pipe: the same
//! links, queues, switch delay, NIC delay and host CPU cost per frame.
#![allow(clippy::disallowed_methods)] // wall-clock time only measures the simulator's own speed

use crate::config::SimConfig;
use crate::engine::{Budget, Engine, Role};
use crate::run::{LatencyUs, START, SimError, WARMUP_INTERVALS, links_for, model_for};
use onepipe_baselines::{BaselineConfig, BaselineNode, Kind, Schedule, collect_logs, totals};
use onepipe_check::check_all;
use onepipe_fabric::Wiring;
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct BaselineReport {
    pub system: &'static str,
    pub processes: usize,
    pub delivered: u64,
    pub throughput_msgs_per_s: f64,
    pub latency_us: LatencyUs,
    /// Total order, FIFO, causality, duplicates, creation over every recorded message.
    pub violations: u64,
    /// Frames and messages a node dropped.
    pub dropped: u64,
    pub events: u64,
    pub events_per_s: f64,
    pub wall_s: f64,
}

/// How often a draining baseline run checks whether every broadcast came back.
const DRAIN_STEP: Duration = Duration::from_micros(20);

/// Runs baseline `kind` with `config`'s fabric, placement, seed and times: every process
/// broadcasts `config.message_bytes_min`-byte messages to all, saturated if `config.gap` is
/// zero, with at most `window` of its own broadcasts undelivered back to itself.
pub fn run_baseline(config: &SimConfig, kind: Kind, window: usize) -> Result<BaselineReport, SimError> {
    config.validate()?;
    let wiring = Wiring::new(config.topology.clone(), config.processes_per_host)
        .map_err(|e| SimError::Wiring(e.to_string()))?;
    let send_from = START + config.beacon_interval.saturating_mul(WARMUP_INTERVALS);
    let send_until = send_from + config.send_for;
    let mut bc = BaselineConfig::new(
        kind,
        Schedule {
            send_from,
            send_until,
            measure_from: send_from + config.measure_after,
            send_gap: config.gap,
            record_until: send_from + config.record_for,
            seed: config.seed,
        },
    );
    bc.message_bytes = config.message_bytes_min;
    bc.window = window;
    bc.exchange_interval = config.beacon_interval;
    let nodes = onepipe_baselines::build(&wiring, &bc, START).map_err(|e| SimError::Wiring(e.to_string()))?;
    let nodes: Vec<(BaselineNode, Role)> = nodes
        .into_iter()
        .map(|n| {
            let role = if n.is_switch() { Role::Switch } else { Role::Host };
            (n, role)
        })
        .collect();
    let mut engine = Engine::new(
        nodes,
        &links_for(&wiring, config),
        model_for(config, send_from),
        config.seed,
        START,
    )?;
    let budget = Budget {
        events_max: config.events_max,
        memory_bytes_max: config.memory_bytes_max,
    };
    let wall = std::time::Instant::now();
    engine.run_until(send_until, &budget)?;
    // Drain until every process has its own broadcasts back (a saturated sequencer or token
    // run holds milliseconds of queue, and latency is recorded at delivery), then a little
    // longer for the other receivers; `config.drain` bounds it.
    let drain_until = send_until + config.drain;
    while engine.now() < drain_until && engine.nodes().any(|n| n.outstanding() > 0) {
        engine.run_until((engine.now() + DRAIN_STEP).min(drain_until), &budget)?;
    }
    engine.run_until((engine.now() + DRAIN_STEP).min(drain_until), &budget)?;
    let wall_s = wall.elapsed().as_secs_f64();
    let events = engine.stats().events;
    let nodes = engine.into_nodes();
    let t = totals(&nodes);
    let logs = collect_logs(&nodes);
    let report = check_all(&logs);
    let violations = [
        &report.total_order,
        &report.fifo,
        &report.causality,
        &report.no_duplicates,
        &report.no_creation,
    ]
    .iter()
    .map(|r| r.count)
    .sum();
    let us = |ns: u64| ns as f64 / 1000.0;
    Ok(BaselineReport {
        system: kind.name(),
        processes: wiring.process_count(),
        delivered: t.delivered,
        throughput_msgs_per_s: t.delivered_in_window as f64
            / ((config.send_for.as_nanos() - config.measure_after.as_nanos()) as f64 / 1e9),
        latency_us: LatencyUs {
            p50: us(t.latency_ns.value_at_quantile(0.5)),
            p99: us(t.latency_ns.value_at_quantile(0.99)),
            max: us(t.latency_ns.max()),
            mean: t.latency_ns.mean() / 1000.0,
        },
        violations,
        dropped: t.dropped,
        events,
        events_per_s: events as f64 / wall_s.max(1e-9),
        wall_s,
    })
}
