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
            .find(hash, |s| s.hash == hash && arena[s.start..s.start + s.len] == *key)
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
}
