//! Paper Fig. 11 in the simulator: what the receiver's reorder buffer holds when barriers lag by
//! a reordering delay. A stream fills one 100 Gbps link (sender 0 to receiver 1, frames of an
//! MTU); a third host, silent, sits `delay` further from the switch, so its beacons, and with
//! them every barrier, arrive `delay` late. Each message then waits about `delay` at the
//! receiver, which holds the stream's rate times the delay: the bandwidth-delay product the
//! paper's memory column is (100 Gbps x 1 ms = 12.5 MB).
//!
//! The simulator charges a fixed CPU cost per frame, so its delivery rate does not fall with
//! the buffer's size; the cost of a larger buffer is measured on this machine's CPU
//! (`onepipe_bench::reorder_cost`).

use crate::config::SimConfig;
use crate::run::{LagUs, LatencyUs, SimError, run};
use crate::traffic::Pattern;
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;

/// The paper's Fig. 11: (reordering delay in us, delivery throughput per process in M msg/s,
/// buffer memory in MB) (../shared/anchors/1pipe-figures.md).
pub const PAPER: [(f64, f64, f64); 4] = [
    (1.0, 5.5, 0.0125),
    (10.0, 5.4, 0.125),
    (100.0, 4.9, 1.25),
    (1000.0, 4.3, 12.5),
];

/// The paper's row at `delay_us`, if it has one.
pub fn paper_at(delay_us: f64) -> Option<(f64, f64, f64)> {
    PAPER.iter().copied().find(|p| (p.0 - delay_us).abs() < 1e-9)
}

/// One simulated point.
#[derive(Clone, Debug, Serialize)]
pub struct ReorderSimRow {
    pub delay_us: f64,
    /// Deliveries per second at the receiver once the buffer is full (steady state).
    pub throughput_msgs_per_s: f64,
    pub message_bytes: usize,
    pub reorder_bytes_peak: u64,
    pub reorder_messages_peak: u64,
    /// The link's bandwidth-delay product at this delay: what the paper's memory column is.
    pub link_bdp_bytes: f64,
    pub barrier_lag_us: LagUs,
    pub latency_us: LatencyUs,
    pub violations: u64,
    pub paper_throughput_msgs_per_s: Option<f64>,
    pub paper_buffer_bytes: Option<f64>,
}

/// A run whose barriers lag by `delay`; see the module's comment.
pub fn config(delay: Duration) -> SimConfig {
    let mut topology = Topology::single_switch(3).expect("a valid preset");
    topology.hosts[2].delay_ns += delay.as_nanos();
    let base = SimConfig::default();
    // A frame of an MTU carries this much payload.
    let message_bytes = base.mtu_bytes - onepipe_wire::packet::HEADER_LEN;
    SimConfig {
        topology,
        pattern: Pattern::Pair { from: 0, to: 1 },
        // Saturating: the stream is bounded by the sender's link. A send buffer of a few
        // microseconds of the link keeps it busy; a deeper one only queues at the sender (4096
        // frames are 490 us), which is not the delay measured here.
        gap: Duration::ZERO,
        send_buffer_packets: 64,
        // The slow host's first beacon takes the delay to reach the switch: a detector shorter
        // than that declares its link dead at the start, and when the link comes back the
        // barrier stalls for a whole delay, a transient instead of the steady lag measured here.
        dead_after_intervals: base
            .dead_after_intervals
            .max(2 * (delay.as_nanos() / base.beacon_interval.as_nanos()) as u32 + 10),
        message_bytes_min: message_bytes,
        message_bytes_max: message_bytes,
        // Measured once the first messages have waited out the delay.
        send_for: delay + Duration::from_micros(300),
        measure_after: delay + Duration::from_micros(100),
        drain: delay + Duration::from_micros(200),
        ..base
    }
}

/// Runs every delay (in us), reporting each point to `progress`.
pub fn reorder_sweep(
    delays_us: &[f64],
    progress: &mut dyn FnMut(&ReorderSimRow),
) -> Result<Vec<ReorderSimRow>, SimError> {
    let mut rows = Vec::new();
    for &delay_us in delays_us {
        let c = config(Duration::from_nanos((delay_us * 1e3).round() as u64));
        let r = run(&c, &mut |_, _| {})?;
        let paper = paper_at(delay_us);
        let row = ReorderSimRow {
            delay_us,
            throughput_msgs_per_s: r.throughput_msgs_per_s,
            message_bytes: c.message_bytes_max,
            reorder_bytes_peak: r.reorder_bytes_peak,
            reorder_messages_peak: r.reorder_messages_peak,
            link_bdp_bytes: c.link_bits_per_s as f64 / 8.0 * delay_us / 1e6,
            barrier_lag_us: r.barrier_lag_us,
            latency_us: r.latency_us,
            violations: r.violations,
            paper_throughput_msgs_per_s: paper.map(|p| p.1 * 1e6),
            paper_buffer_bytes: paper.map(|p| p.2 * 1e6),
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}
