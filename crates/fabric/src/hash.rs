//! Small deterministic mixing for ECMP choices and seeded draws (no global RNG anywhere): one
//! generator for nodes, runtimes and the simulator.

use onepipe_wire::Duration;

/// SplitMix64 finalizer: a good 64-bit mix of `x`.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A seeded SplitMix64 stream, for configuration draws (clock offsets) made outside the
/// state machines.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    /// Uniform in [-bound, bound].
    pub fn symmetric(&mut self, bound: u64) -> i64 {
        if bound == 0 {
            return 0;
        }
        let span = 2 * bound as u128 + 1;
        ((self.next_u64() as u128 % span) as i128 - bound as i128) as i64
    }

    /// True with probability `p` (53 random bits; nothing is drawn when `p` is zero).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// An exponentially distributed gap with the given mean (zero stays zero): Poisson
    /// arrivals for paced workloads.
    pub fn exponential(&mut self, mean: Duration) -> Duration {
        if mean == Duration::ZERO {
            return Duration::ZERO;
        }
        // Uniform in (0, 1]: 53 random bits, shifted off zero so the log is finite.
        let u = ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        Duration::from_nanos((-u.ln() * mean.as_nanos() as f64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paced_gaps_average_the_configured_gap() {
        let mut rng = SplitMix::new(7);
        let mean = Duration::from_micros(100);
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| rng.exponential(mean).as_nanos()).sum();
        let avg = sum as f64 / n as f64;
        assert!((avg - 100_000.0).abs() < 3_000.0, "mean gap {avg} ns");
        assert_eq!(rng.exponential(Duration::ZERO), Duration::ZERO);
    }
}
