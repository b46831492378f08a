//! Shared helpers: a fast hasher for integer keys and event iterators.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::log::{Event, MsgId, ProcessId, ProcessLog};

/// Multiply-rotate hasher for small integer keys: std's SipHash is slower, and its DoS
/// resistance buys nothing for logs we produced ourselves.
#[derive(Clone, Copy, Default)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;

    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::K).rotate_left(26);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // Final avalanche (murmur3 fmix64) so both the low bits (bucket) and the top bits
        // (hashbrown's tag byte) depend on every input bit.
        let mut z = self.0;
        z ^= z >> 33;
        z = z.wrapping_mul(0xff51_afd7_ed55_8ccd);
        z ^= z >> 33;
        z = z.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// Calls `f(index, ts_ns, dst, msg_id, rank)` for every send of `log`, where `rank` counts the
/// earlier sends to the same `dst`.
pub(crate) fn for_each_ranked_send(log: &ProcessLog, mut f: impl FnMut(usize, u64, ProcessId, MsgId, u64)) {
    let mut next_rank: FastMap<ProcessId, u64> = FastMap::default();
    for (index, event) in log.events.iter().enumerate() {
        if let Event::Send { ts_ns, dst, msg_id } = *event {
            let rank = next_rank.entry(dst).or_insert(0);
            f(index, ts_ns, dst, msg_id, *rank);
            *rank += 1;
        }
    }
}

/// Calls `f(index, ts_ns, src, msg_id)` for every delivery of `log`.
pub(crate) fn for_each_delivery(log: &ProcessLog, mut f: impl FnMut(usize, u64, ProcessId, MsgId)) {
    for (index, event) in log.events.iter().enumerate() {
        if let Event::Deliver { ts_ns, src, msg_id } = *event {
            f(index, ts_ns, src, msg_id);
        }
    }
}
