//! The memo of the search: every (set of linearized operations, register state) visited.
//!
//! Keys are variable-length runs of `u64` words in one arena, so that an entry costs no
//! allocation of its own: 16 bytes in the table plus its words.

use hashbrown::HashTable;

#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    start: usize,
    len: usize,
}

#[derive(Default)]
pub(super) struct Cache {
    table: HashTable<Slot>,
    arena: Vec<u64>,
}

/// Capacity a cache keeps between keys; a hot key's larger tables are given back.
const KEPT_ENTRIES_MAX: usize = 1 << 16;

impl Cache {
    /// Forgets every entry (the memo is per key).
    pub(super) fn clear(&mut self) {
        self.table.clear();
        self.arena.clear();
        if self.table.capacity() > KEPT_ENTRIES_MAX {
            self.table.shrink_to(0, |s| s.hash);
        }
        self.arena.shrink_to(KEPT_ENTRIES_MAX);
    }

    /// Adds `key` (with its precomputed `hash`); false if it was there already.
    pub(super) fn insert(&mut self, hash: u64, key: &[u64]) -> bool {
        let arena = &self.arena;
        let found = self
            .table
            .find(hash, |s| {
                s.hash == hash && arena[s.start..s.start + s.len] == *key
            })
            .is_some();
        if found {
            return false;
        }
        let slot = Slot {
            hash,
            start: self.arena.len(),
            len: key.len(),
        };
        self.arena.extend_from_slice(key);
        self.table.insert_unique(hash, slot, |s| s.hash);
        true
    }

    /// Bytes held, to bound the search's memory.
    pub(super) fn bytes(&self) -> usize {
        self.table.allocation_size() + self.arena.capacity() * size_of::<u64>()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.len()
    }
}

/// Open sets kept per (state, required set) in [`Dominance`].
const OPEN_SETS_PER_GROUP_MAX: usize = 8;

/// For keys with open operations: per (state, required set), the last few sets of open
/// operations visited with them. A node that uses a superset of the open operations of a
/// visited node with the same state and required set can do nothing the visited one could not
/// (open operations are optional), so it is pruned.
#[derive(Default)]
pub(super) struct Dominance {
    table: HashTable<Group>,
    keys: Vec<u64>,
    /// Bytes held by the groups' set lists.
    sets_bytes: usize,
}

struct Group {
    hash: u64,
    start: usize,
    len: usize,
    /// Compact open sets one after the other: `[full, len, words...]` each, oldest first.
    sets: Vec<u64>,
    count: usize,
}

impl Dominance {
    pub(super) fn clear(&mut self) {
        self.table.clear();
        self.keys.clear();
        if self.table.capacity() > KEPT_ENTRIES_MAX {
            self.table.shrink_to(0, |g| g.hash);
        }
        self.keys.shrink_to(KEPT_ENTRIES_MAX);
        self.sets_bytes = 0;
    }

    /// Whether the open set (`full` leading full words, then `words`) is a superset of one
    /// kept for `key` (state and required set, with its `hash`); if not, keeps it.
    pub(super) fn dominated(&mut self, hash: u64, key: &[u64], full: usize, words: &[u64]) -> bool {
        let keys = &self.keys;
        let eq = |g: &Group| g.hash == hash && keys[g.start..g.start + g.len] == *key;
        let group = match self.table.find_mut(hash, eq) {
            Some(group) => group,
            None => {
                let start = self.keys.len();
                self.keys.extend_from_slice(key);
                let group = Group {
                    hash,
                    start,
                    len: key.len(),
                    sets: Vec::new(),
                    count: 0,
                };
                self.table.insert_unique(hash, group, |g| g.hash).into_mut()
            }
        };
        let mut at = 0;
        while at < group.sets.len() {
            let (kept_full, kept_len) = (group.sets[at] as usize, group.sets[at + 1] as usize);
            let kept = &group.sets[at + 2..at + 2 + kept_len];
            if subset((kept_full, kept), (full, words)) {
                return true;
            }
            at += 2 + kept_len;
        }
        let before = group.sets.capacity();
        if group.count == OPEN_SETS_PER_GROUP_MAX {
            let oldest = 2 + group.sets[1] as usize;
            group.sets.drain(..oldest);
            group.count -= 1;
        }
        group.sets.extend_from_slice(&[full as u64, words.len() as u64]);
        group.sets.extend_from_slice(words);
        group.count += 1;
        self.sets_bytes += (group.sets.capacity() - before) * size_of::<u64>();
        false
    }

    /// Bytes held, to bound the search's memory.
    pub(super) fn bytes(&self) -> usize {
        self.table.allocation_size() + self.keys.capacity() * size_of::<u64>() + self.sets_bytes
    }
}

/// Whether compact set `a` is a subset of compact set `b` (each: leading full words, then
/// words, then zeros).
fn subset(a: (usize, &[u64]), b: (usize, &[u64])) -> bool {
    let word = |(full, words): (usize, &[u64]), w: usize| {
        if w < full {
            u64::MAX
        } else {
            words.get(w - full).copied().unwrap_or(0)
        }
    };
    (0..a.0 + a.1.len()).all(|w| word(a, w) & !word(b, w) == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_tells_new_from_seen_even_on_equal_hashes() {
        let mut cache = Cache::default();
        assert!(cache.insert(7, &[1, 2]));
        assert!(!cache.insert(7, &[1, 2]));
        assert!(cache.insert(7, &[1, 3]), "same hash, other key");
        assert!(cache.insert(7, &[1]), "a prefix is another key");
        assert!(cache.insert(8, &[1, 2]));
        assert_eq!(cache.len(), 4);
        assert!(cache.bytes() >= 7 * 8);
        cache.clear();
        assert_eq!(cache.len(), 0);
        assert!(cache.insert(7, &[1, 2]));
    }

    #[test]
    fn subset_reads_compact_sets() {
        assert!(subset((0, &[]), (0, &[])));
        assert!(subset((0, &[0b01]), (0, &[0b11])));
        assert!(!subset((0, &[0b11]), (0, &[0b01])));
        assert!(subset((1, &[]), (1, &[5])));
        assert!(!subset((2, &[]), (1, &[5])));
        assert!(subset((0, &[u64::MAX, 1]), (1, &[3])));
        assert!(!subset((0, &[0, 1]), (0, &[1])));
    }

    #[test]
    fn a_superset_of_a_kept_open_set_is_dominated() {
        let mut d = Dominance::default();
        assert!(!d.dominated(1, &[9], 0, &[0b010]));
        assert!(d.dominated(1, &[9], 0, &[0b010]), "equal");
        assert!(d.dominated(1, &[9], 0, &[0b110]), "superset");
        assert!(!d.dominated(1, &[8], 0, &[0b110]), "another required set");
        assert!(!d.dominated(1, &[9], 0, &[0b100]), "not a superset");
        for bit in 0..OPEN_SETS_PER_GROUP_MAX as u64 {
            assert!(!d.dominated(1, &[9], 0, &[0b001, 1 << bit]));
        }
        assert!(!d.dominated(1, &[9], 0, &[0b010]), "the oldest set was let go");
        assert!(d.bytes() > 0);
        d.clear();
        assert_eq!(d.sets_bytes, 0);
    }
}
