//! Consistent snapshots (paper 2.2.4): one reliable scattering asks one live replica of every
//! shard for its state; each replica answers at the scattering's position in the total order,
//! so the union is the store's state at one timestamp, taken without stopping writes.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::codec::SnapshotChunk;

/// A finished snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotResult {
    pub id: u64,
    /// The timestamp and every pair, sorted by key; or why there is none.
    pub outcome: Result<(u64, Vec<(Bytes, Bytes)>), String>,
}

/// One shard's answer as it comes in: chunks by index, and how many the replica said there are
/// (nothing is allocated by that count, which comes from the network).
struct ShardChunks {
    replica: u32,
    count: Option<u32>,
    chunks: BTreeMap<u32, Vec<(Bytes, Bytes)>>,
}

pub(super) struct Gather {
    pub attempt: u32,
    pub deadline_ns: u64,
    shards: BTreeMap<u16, ShardChunks>,
    ts: Option<u64>,
}

impl Gather {
    /// Waits for the shards of `targets` (shard, replica process).
    pub fn new(attempt: u32, deadline_ns: u64, targets: &[(u16, u32)]) -> Gather {
        Gather {
            attempt,
            deadline_ns,
            shards: targets
                .iter()
                .map(|&(shard, replica)| {
                    (
                        shard,
                        ShardChunks {
                            replica,
                            count: None,
                            chunks: BTreeMap::new(),
                        },
                    )
                })
                .collect(),
            ts: None,
        }
    }

    /// Takes a chunk from `src`; false if it does not belong (another replica, a bad index).
    pub fn take(&mut self, src: u32, chunk: SnapshotChunk) -> bool {
        let Some(s) = self.shards.get_mut(&chunk.shard) else {
            return false;
        };
        let fits = chunk.count > 0 && chunk.index < chunk.count && s.count.is_none_or(|c| c == chunk.count);
        if s.replica != src || !fits || self.ts.is_some_and(|t| t != chunk.ts) {
            return false;
        }
        s.count = Some(chunk.count);
        s.chunks.insert(chunk.index, chunk.pairs);
        self.ts = Some(chunk.ts);
        true
    }

    /// Whether the replica `process` is one this snapshot waits for.
    pub fn waits_for(&self, process: u32) -> bool {
        self.shards.values().any(|s| s.replica == process && !complete(s))
    }

    pub fn is_complete(&self) -> bool {
        self.shards.values().all(complete)
    }

    /// The pairs of every shard, sorted by key.
    pub fn into_pairs(self) -> (u64, Vec<(Bytes, Bytes)>) {
        let mut pairs: Vec<(Bytes, Bytes)> = self
            .shards
            .into_values()
            .flat_map(|s| s.chunks.into_values().flatten())
            .collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        (self.ts.unwrap_or(0), pairs)
    }
}

fn complete(s: &ShardChunks) -> bool {
    s.count.is_some_and(|c| s.chunks.len() == c as usize)
}
