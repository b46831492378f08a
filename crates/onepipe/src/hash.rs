//! Small deterministic mixing for ECMP choices and seeded draws (no global RNG anywhere).

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
}
