//! Where keys live: shards, their replicas, and the processes that play them.

use std::fmt;

/// The store's placement: `shards` shards of `replicas` replicas each, played by server
/// processes `0 .. shards * replicas` (shard `s`, replica `r` is process `s * replicas + r`);
/// clients are the processes after them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shards: u32,
    pub replicas: u32,
}

/// A layout that cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("a store needs at least one shard and one replica (got {shards} x {replicas})")]
    Empty { shards: u32, replicas: u32 },
    #[error("{shards} shards x {replicas} replicas is more than {max} server processes")]
    TooMany { shards: u32, replicas: u32, max: u32 },
}

/// Server processes at most: shard ids and replica indices travel as `u16` on the wire.
pub const SERVERS_MAX: u32 = 1 << 16;

impl Layout {
    pub fn new(shards: u32, replicas: u32) -> Result<Layout, LayoutError> {
        if shards == 0 || replicas == 0 {
            return Err(LayoutError::Empty { shards, replicas });
        }
        if u64::from(shards) * u64::from(replicas) > u64::from(SERVERS_MAX) {
            return Err(LayoutError::TooMany {
                shards,
                replicas,
                max: SERVERS_MAX,
            });
        }
        Ok(Layout { shards, replicas })
    }

    /// Server processes: every replica of every shard.
    pub fn servers(&self) -> u32 {
        self.shards * self.replicas
    }

    /// The shard holding `key`: a stable hash, the same on every process and run.
    pub fn shard_of(&self, key: &[u8]) -> u32 {
        (fnv1a(key) % u64::from(self.shards)) as u32
    }

    /// The process playing replica `replica` of `shard`.
    pub fn process(&self, shard: u32, replica: u32) -> u32 {
        shard * self.replicas + replica
    }

    /// The processes playing the replicas of `shard`.
    pub fn replicas_of(&self, shard: u32) -> impl Iterator<Item = u32> + '_ {
        (0..self.replicas).map(move |r| self.process(shard, r))
    }

    /// Which shard and replica server process `process` plays; `None` for a client.
    pub fn role_of(&self, process: u32) -> Option<(u32, u32)> {
        (process < self.servers()).then(|| (process / self.replicas, process % self.replicas))
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} shards x {} replicas", self.shards, self.replicas)
    }
}

/// 64-bit FNV-1a, the hash of the stores' formats: keys are spread by it, so it never changes.
pub use onepipe_kv::fnv1a;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_and_roles_are_inverse() {
        let l = Layout::new(4, 3).unwrap();
        for s in 0..4 {
            for r in 0..3 {
                assert_eq!(l.role_of(l.process(s, r)), Some((s, r)));
            }
        }
        assert_eq!(l.role_of(12), None);
    }

    #[test]
    fn keys_spread_over_every_shard() {
        let l = Layout::new(4, 1).unwrap();
        let mut seen = [0u32; 4];
        for i in 0..1000 {
            seen[l.shard_of(format!("key:{i}").as_bytes()) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }

    #[test]
    fn empty_and_huge_layouts_are_refused() {
        assert!(Layout::new(0, 3).is_err());
        assert!(Layout::new(1 << 16, 2).is_err());
    }
}
