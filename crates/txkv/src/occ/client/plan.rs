//! What a transaction asks of each shard, worked out once at submission.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::layout::{Layout, fnv1a};
use crate::txn::{Op, Txn};

/// The operations of one shard on keys the transaction writes.
#[derive(Debug)]
pub(super) struct ShardWrites {
    /// Every operation on a written key, reads included, in the transaction's order: they run
    /// under the lock at commit, so a read after a write of the same key sees it.
    pub ops: Vec<(u16, Op)>,
    /// The distinct written keys.
    pub keys: Vec<Bytes>,
}

#[derive(Debug)]
pub(super) struct Plan {
    pub ops: usize,
    /// Distinct keys read (by a `Get`), by shard.
    pub reads: BTreeMap<u32, Vec<Bytes>>,
    pub writes: BTreeMap<u32, ShardWrites>,
    /// `Get`s of keys not written: their results come from the read phase.
    pub read_results: Vec<(u16, Bytes)>,
}

impl Plan {
    pub fn new(layout: &Layout, txn: &Txn) -> Plan {
        let written: Vec<&Bytes> = txn.ops.iter().filter(|op| op.is_write()).map(Op::key).collect();
        let mut reads: BTreeMap<u32, Vec<Bytes>> = BTreeMap::new();
        let mut writes: BTreeMap<u32, ShardWrites> = BTreeMap::new();
        let mut read_results = Vec::new();
        for (i, op) in txn.ops.iter().enumerate() {
            let (key, index) = (op.key(), i as u16);
            let shard = layout.shard_of(key);
            if matches!(op, Op::Get { .. }) {
                let keys = reads.entry(shard).or_default();
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
            if !written.contains(&key) {
                read_results.push((index, key.clone()));
                continue;
            }
            let w = writes.entry(shard).or_insert_with(|| ShardWrites {
                ops: Vec::new(),
                keys: Vec::new(),
            });
            w.ops.push((index, op.clone()));
            if !w.keys.contains(key) {
                w.keys.push(key.clone());
            }
        }
        Plan {
            ops: txn.ops.len(),
            reads,
            writes,
            read_results,
        }
    }

    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
    }

    pub fn is_written(&self, key: &Bytes) -> bool {
        self.writes.values().any(|w| w.keys.contains(key))
    }

    /// Every shard the transaction touches.
    pub fn shards(&self) -> impl Iterator<Item = u32> + '_ {
        self.reads.keys().chain(self.writes.keys()).copied()
    }
}

/// How long to wait after the `aborts`-th abort before trying again: a window that doubles with
/// each abort up to `max_ns`, and a point in its upper half drawn from a hash of who retries
/// what, so that two clients that collided do not collide again in lockstep (no RNG: the same
/// run backs off the same way).
pub(super) fn backoff_ns(base_ns: u64, max_ns: u64, client: u32, txn: u64, aborts: u32) -> u64 {
    let doublings = aborts.saturating_sub(1).min(32);
    let window = base_ns.saturating_mul(1u64 << doublings).min(max_ns).max(1);
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&client.to_le_bytes());
    bytes[4..12].copy_from_slice(&txn.to_le_bytes());
    bytes[12..].copy_from_slice(&aborts.to_le_bytes());
    let half = window / 2;
    half + fnv1a(&bytes) % (window - half + 1)
}
