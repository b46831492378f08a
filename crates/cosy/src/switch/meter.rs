//! A per-port meter of the data that comes in, to check from the switch that no link carries
//! more than its bandwidth B (paper 3.3's second invariant: the rates of the messages on a link
//! sum to at most B). A link that serializes at B cannot exceed it, so this check bites where a
//! runtime does not model the rate (udp) or where a sender does not pace.
//!
//! Time is cut into windows of `window`; a window may carry B x window plus a burst allowance
//! (Lemma 3.3's transient queue, #H (K-1) p: packets of K messages bunched by the hops before).

use onepipe_fabric::PortId;
use onepipe_wire::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct RateMeter {
    window_ns: u64,
    /// Bytes a window may carry.
    capacity_bytes: u64,
    /// Per port: the window being counted and its bytes.
    current: Vec<(u64, u64)>,
    /// Per port: the largest window's bytes.
    peak_bytes: Vec<u64>,
}

impl RateMeter {
    pub fn new(ports: usize, window: Duration, link_bits_per_s: u64, burst_bytes: u64) -> RateMeter {
        let window_ns = window.as_nanos().max(1);
        let line_bytes = (link_bits_per_s as u128 * window_ns as u128 / 8_000_000_000) as u64;
        RateMeter {
            window_ns,
            capacity_bytes: line_bytes.saturating_add(burst_bytes).max(1),
            current: vec![(0, 0); ports],
            peak_bytes: vec![0; ports],
        }
    }

    pub fn add(&mut self, now: Instant, port: PortId, bytes: usize) {
        let p = port as usize;
        let (Some(cur), Some(peak)) = (self.current.get_mut(p), self.peak_bytes.get_mut(p)) else {
            return;
        };
        let window = now.as_nanos() / self.window_ns;
        if cur.0 != window {
            *cur = (window, 0);
        }
        cur.1 += bytes as u64;
        *peak = (*peak).max(cur.1);
    }

    /// Per port: the busiest window's bytes over what a window may carry (at most 1 if the
    /// link never carried more than B).
    pub fn peak_over_capacity(&self) -> impl Iterator<Item = f64> + '_ {
        self.peak_bytes
            .iter()
            .map(|&b| b as f64 / self.capacity_bytes as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_past_the_line_rate_is_seen() {
        // 8 Gbit/s = 1 byte/ns; windows of 1000 ns carry 1000 bytes plus a burst of 100.
        let mut m = RateMeter::new(2, Duration::from_nanos(1000), 8_000_000_000, 100);
        m.add(Instant::from_nanos(0), 0, 600);
        m.add(Instant::from_nanos(999), 0, 500);
        m.add(Instant::from_nanos(1000), 0, 100);
        m.add(Instant::from_nanos(10), 1, 1100);
        m.add(Instant::from_nanos(10), 9, 1100); // no such port: ignored
        let peaks: Vec<f64> = m.peak_over_capacity().collect();
        assert_eq!(peaks, vec![1.0, 1.0]);
        m.add(Instant::from_nanos(1500), 0, 1001);
        assert!(m.peak_over_capacity().next().unwrap() > 1.0);
    }
}
