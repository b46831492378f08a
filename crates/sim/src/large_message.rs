//! "An 1 MB message will increase 80 us latency of other messages" (paper 7.2): at 100 Gbps a
//! 1 MB message takes 80 us to cross a link, and its fragments all carry its timestamp, so the
//! barrier of its sender's link cannot pass that timestamp until the last fragment is through.
//! Every message stamped later, from anyone to anyone, waits for it.
//!
//! Light traffic on one rack of 8 processes (each sends a 64-byte message to a random process
//! every 2 us on average); `at` after traffic starts, process 0 sends one 1 MB message to
//! process 1. Latency is measured over the small messages sent from just after the large one
//! for `window`, and compared with the same seed's run without it.

use crate::config::SimConfig;
use crate::run::{LatencyUs, SimError, run};
use crate::traffic::{LargeMessage, Pattern};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;

/// The paper's 1 MB (10^6 bytes: 80 us at 100 Gbps).
pub const LARGE_MESSAGE_BYTES: usize = 1_000_000;

/// What the large message does to the others.
#[derive(Clone, Debug, Serialize)]
pub struct LargeMessageReport {
    pub large_message_bytes: usize,
    pub link_gbps: f64,
    /// Its serialization time on one link: bytes on the wire (headers included) over the rate.
    pub serialization_us: f64,
    pub processes: usize,
    /// How long after the large message the measured small messages were sent.
    pub window_us: f64,
    /// Small messages sent in the window, without and with the large message.
    pub without: LatencyUs,
    pub with: LatencyUs,
    /// How much the large message added to the small messages' latency.
    pub added_us_max: f64,
    pub added_us_mean: f64,
    /// The paper's figure for it.
    pub paper_added_us: f64,
    pub violations: u64,
}

const AT: Duration = Duration::from_micros(50);

/// The run, with the large message or without (`bytes` 0).
pub fn config(bytes: usize, window: Duration) -> SimConfig {
    SimConfig {
        topology: Topology::single_switch(8).expect("a valid preset"),
        pattern: Pattern::Random { fanout: 1 },
        gap: Duration::from_micros(2),
        large_message: (bytes > 0).then_some(LargeMessage {
            from: 0,
            to: 1,
            at: AT,
            bytes,
        }),
        // Only messages sent after the large one count for latency (it is not one of them).
        measure_after: AT + Duration::from_nanos(1),
        send_for: AT + window,
        drain: Duration::from_micros(300),
        ..SimConfig::default()
    }
}

/// Runs both and compares them.
pub fn large_message(bytes: usize, window: Duration) -> Result<LargeMessageReport, SimError> {
    let without = run(&config(0, window), &mut |_, _| {})?;
    let c = config(bytes, window);
    let with = run(&c, &mut |_, _| {})?;
    let payload_bytes = c.mtu_bytes - onepipe_wire::packet::HEADER_LEN;
    let wire_bytes = bytes + bytes.div_ceil(payload_bytes) * onepipe_wire::packet::HEADER_LEN;
    Ok(LargeMessageReport {
        large_message_bytes: bytes,
        link_gbps: c.link_bits_per_s as f64 / 1e9,
        serialization_us: wire_bytes as f64 * 8.0 / c.link_bits_per_s as f64 * 1e6,
        processes: with.processes,
        window_us: window.as_nanos() as f64 / 1e3,
        added_us_max: with.latency_us.max - without.latency_us.max,
        added_us_mean: with.latency_us.mean - without.latency_us.mean,
        without: without.latency_us,
        with: with.latency_us,
        paper_added_us: 80.0,
        violations: without.violations + with.violations,
    })
}
