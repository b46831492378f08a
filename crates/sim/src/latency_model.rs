//! The paper's latency model of the incarnations (6.2): base delay + per-switch delay x hops +
//! beacon interval / 2 + clock skew. The per-switch delay is nothing on a chip, the CPU delay
//! on a switch CPU, and the detour on a host representative (6.2.3: "RTT between switch and
//! host + host processing delay"). A receiver delivers a message once
//! the barrier of every sender has passed it, and the last barrier to come is the farthest
//! sender's: base and hops are those of the fabric's longest path, whatever the message's own.
//! The base is measured, as the unordered run's largest latency on the same idle fabric.

use crate::SimConfig;
use crate::figures::Row;
use onepipe_fabric::routing::{self, NextHops};
use onepipe_fabric::{Peer, Topology, Wiring};
use onepipe_proto::Incarnation;
use onepipe_wire::Duration;
use serde::Serialize;

/// The model's latency next to what was measured, for one point of a best-effort series.
#[derive(Clone, Debug, Serialize)]
pub struct ModelPoint {
    pub series: String,
    pub x: f64,
    /// Switches on the longest path between two processes.
    pub switches_on_longest_path: u32,
    /// Unordered latency over the longest path + CPU delay x its switches + beacon
    /// interval / 2 + mean skew.
    pub model_latency_us: f64,
    pub measured_latency_us: f64,
    /// Measured over model.
    pub ratio: f64,
}

/// Switches on the longest path between two processes, following each switch's first route
/// choice (all equal-cost paths are as long).
pub fn switches_on_longest_path(topology: &Topology, processes_per_host: u32) -> u32 {
    let Ok(wiring) = Wiring::new(topology.clone(), processes_per_host) else {
        return 0;
    };
    let Ok(routes) = routing::build(&wiring) else {
        return 0;
    };
    let count = wiring.process_count() as u32;
    let mut longest = 0;
    for src in 0..count {
        for dst in (0..count).filter(|&d| d != src) {
            longest = longest.max(switches_between(&wiring, &routes, src, dst));
        }
    }
    longest
}

fn switches_between(wiring: &Wiring, routes: &[routing::Routes], src: u32, dst: u32) -> u32 {
    let mut switch = wiring.processes[src as usize].tor;
    // A path is loop-free, so no longer than the switches there are.
    for hops in 1..=wiring.switch_count() as u32 {
        let Ok(next) = routes[switch].next_hops(dst) else {
            return hops;
        };
        if matches!(next, NextHops::Local(_)) {
            return hops;
        }
        match wiring.switch_ports[switch][next.pick(0) as usize].peer {
            Peer::Switch { switch: s, .. } => switch = s,
            Peer::Process(_) => return hops,
        }
    }
    wiring.switch_count() as u32
}

/// What aggregating a beacon adds at each switch it crosses, on the simulator's links and
/// nodes of `c`. A representative's detour: the switch-to-host link both ways, the host's work
/// on the beacon in and out, and the switch's pipeline a second time.
pub fn per_switch_delay(incarnation: Incarnation, c: &SimConfig) -> Duration {
    match incarnation {
        Incarnation::Chip | Incarnation::SwitchCpu { .. } => incarnation.cpu_delay(),
        Incarnation::Host => {
            (c.link_delay + c.host_nic_delay + c.representative_frame_cost).saturating_mul(2) + c.switch_delay
        }
    }
}

/// The model's best-effort latency given the unordered latency of the longest path measured
/// on the same fabric.
pub fn best_effort_latency_us(
    unordered_us: f64,
    per_switch: Duration,
    switches_on_path: u32,
    beacon_interval: Duration,
    skew_mean: Duration,
) -> f64 {
    let us = |d: Duration| d.as_nanos() as f64 / 1e3;
    unordered_us + us(per_switch) * switches_on_path as f64 + us(beacon_interval) / 2.0 + us(skew_mean)
}

/// A model point for every best-effort row of `rows` that has an unordered row at its x.
pub fn model_points(
    rows: &[Row],
    series: &[(String, Incarnation)],
    switches_at: impl Fn(f64) -> u32,
    config: &SimConfig,
) -> Vec<ModelPoint> {
    let mut out = Vec::new();
    for r in rows {
        let Some(&(_, incarnation)) = series.iter().find(|(s, _)| *s == r.series) else {
            continue;
        };
        let Some(unordered) = rows.iter().find(|u| u.series == "unordered" && u.x == r.x) else {
            continue;
        };
        let switches = switches_at(r.x);
        let model = best_effort_latency_us(
            unordered.latency_us.max,
            per_switch_delay(incarnation, config),
            switches,
            config.beacon_interval,
            config.skew_mean,
        );
        out.push(ModelPoint {
            series: r.series.clone(),
            x: r.x,
            switches_on_longest_path: switches,
            model_latency_us: model,
            measured_latency_us: r.latency_us.mean,
            ratio: r.latency_us.mean / model,
        });
    }
    out
}
