//! Background traffic for the simulator: long-lived DCTCP flows between hosts (paper Fig. 12,
//! "the impact of queuing delay on 1Pipe latency"). They are simulator traffic, not 1Pipe
//! messages: their frames share the links and output queues with 1Pipe's data and beacons, so
//! they add queueing delay, and the switches' ECN marks above the queue's threshold (the
//! engine's `ecn_threshold_bytes`) keep those queues near it.
//!
//! - [`flow`]: one flow's sender (window, alpha, ECN reaction, go-back-N) and receiver;
//! - [`host`]: a host's flows to random other hosts, and the ACKs it owes;
//! - [`node`]: the node wrapper that takes background frames before the node inside sees
//!   them: a switch forwards them by ECMP over the fabric's routes, a host runs its flows;
//! - [`frame`]: their header.
//!
//! A "host" here is a simulated process node: each has its own link to its ToR (with one
//! process per host, as in Fig. 12's runs, the two are the same).

pub mod flow;
pub mod frame;
pub mod host;
pub mod node;
#[cfg(test)]
mod tests;

pub use flow::FlowCounters;
pub use host::Flows;
pub use node::{Router, WithBackground};

use onepipe_wire::Duration;

/// The background flows of a run; `flows_per_host == 0` runs none.
#[derive(Clone, Debug, PartialEq)]
pub struct DctcpConfig {
    /// Flows each host opens, each to a host drawn at random among the others.
    pub flows_per_host: u32,
    /// Size of a data frame (an MTU); ACKs are 64 bytes.
    pub frame_bytes: usize,
    /// DCTCP's gain for alpha (the paper's 1/16).
    pub g: f64,
    pub initial_window_frames: u32,
    /// The receive window: no flow has more frames in flight.
    pub window_frames_max: u32,
    pub rto: Duration,
    /// ACKs a host holds while its link is busy; one that finds it full is dropped (a later,
    /// cumulative ACK covers it).
    pub acks_queued_max: usize,
    /// Flows start this long after the run does, before 1Pipe's traffic, so that their windows
    /// have settled when latency is measured (see `SimConfig::measure_after`).
    pub start_after: Duration,
}

impl Default for DctcpConfig {
    fn default() -> DctcpConfig {
        DctcpConfig {
            flows_per_host: 0,
            frame_bytes: 1500,
            g: 1.0 / 16.0,
            initial_window_frames: 10,
            window_frames_max: 1024,
            rto: flow::RTO_DEFAULT,
            acks_queued_max: 4096,
            start_after: Duration::ZERO,
        }
    }
}

impl DctcpConfig {
    pub fn enabled(&self) -> bool {
        self.flows_per_host > 0
    }

    /// What is wrong with it, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.flows_per_host > FLOWS_PER_HOST_MAX {
            return Err(format!("at most {FLOWS_PER_HOST_MAX} flows per host"));
        }
        if !(frame::HEADER_BYTES..=onepipe_fabric::node::FRAME_MAX).contains(&self.frame_bytes) {
            return Err(format!(
                "frame_bytes must be {} to {}",
                frame::HEADER_BYTES,
                onepipe_fabric::node::FRAME_MAX
            ));
        }
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err("g must be in (0, 1]".into());
        }
        if self.initial_window_frames == 0 || self.window_frames_max == 0 || self.acks_queued_max == 0 {
            return Err("windows and the ACK queue must be at least 1".into());
        }
        if self.rto == Duration::ZERO {
            return Err("rto must be positive".into());
        }
        Ok(())
    }
}

/// Flows a host may open (the flow index is 16 bits on the wire; far fewer are sensible).
pub const FLOWS_PER_HOST_MAX: u32 = 1024;

/// What a run's background flows carried.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BackgroundReport {
    pub flows: u64,
    /// Data acknowledged per host per second of the whole run, in Gbit/s.
    pub goodput_gbps_per_host: f64,
    pub sent: FlowCounters,
    /// Share of acknowledged frames that carried an ECN echo.
    pub marked_fraction: f64,
    pub hosts: host::HostFlowCounters,
}

/// The background flows' totals over the hosts of a run that had them, over `elapsed`.
pub fn report(
    config: &crate::SimConfig,
    engine: &crate::Engine<crate::run::SimNode>,
    wiring: &onepipe_fabric::Wiring,
    elapsed: Duration,
) -> Option<BackgroundReport> {
    if !config.background.enabled() {
        return None;
    }
    let mut sent = FlowCounters::default();
    let mut hosts = host::HostFlowCounters::default();
    let mut flows = 0;
    let mut count = 0u64;
    for f in (wiring.switch_count()..engine.node_count()).filter_map(|i| engine.node(i).background_flows()) {
        let s = f.sent();
        flows += f.senders().len() as u64;
        count += 1;
        sent.frames_sent += s.frames_sent;
        sent.frames_acked += s.frames_acked;
        sent.frames_marked += s.frames_marked;
        sent.retransmits += s.retransmits;
        sent.timeouts += s.timeouts;
        sent.window_cuts += s.window_cuts;
        hosts.data_frames_received += f.counters.data_frames_received;
        hosts.acks_dropped += f.counters.acks_dropped;
        hosts.frames_refused += f.counters.frames_refused;
    }
    let seconds = elapsed
        .as_nanos()
        .saturating_sub(config.background.start_after.as_nanos()) as f64
        / 1e9;
    let bits = sent.frames_acked as f64 * config.background.frame_bytes as f64 * 8.0;
    Some(BackgroundReport {
        flows,
        goodput_gbps_per_host: bits / seconds.max(1e-12) / count.max(1) as f64 / 1e9,
        marked_fraction: sent.frames_marked as f64 / sent.frames_acked.max(1) as f64,
        sent,
        hosts,
    })
}
