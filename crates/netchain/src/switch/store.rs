//! The switch's state for NetChain (paper Fig. 3): a match table from key to slot, installed by
//! the control plane, and register arrays indexed by slot: `value[]` and `sequence[]` (here a
//! version: session and sequence in one u64). Sizes are fixed at start, as a switch's memory is:
//! the prototype's 8 stages x 64K slots of 16 B are 64K slots of 128 B.

use crate::key::Key;
use std::collections::HashMap;

/// What a slot holds: a value, or none (never written, or deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot<'a> {
    pub value: Option<&'a [u8]>,
    pub version: u64,
}

/// Why a slot cannot be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// Every slot is taken.
    Full,
    /// The value is longer than a slot.
    TooLarge,
}

/// Marks a slot whose value is absent in `lengths`.
const ABSENT: u16 = u16::MAX;

pub struct Store {
    index: HashMap<Key, u32>,
    free: Vec<u32>,
    value_bytes_max: usize,
    values: Vec<u8>,
    lengths: Vec<u16>,
    versions: Vec<u64>,
}

impl Store {
    /// `slots` slots of `value_bytes_max` bytes each.
    pub fn new(slots: u32, value_bytes_max: usize) -> Store {
        assert!(
            value_bytes_max < ABSENT as usize,
            "slot lengths fit below the absent mark"
        );
        let n = slots as usize;
        Store {
            index: HashMap::with_capacity(n),
            free: (0..slots).rev().collect(),
            value_bytes_max,
            values: vec![0; n * value_bytes_max],
            lengths: vec![ABSENT; n],
            versions: vec![0; n],
        }
    }

    pub fn value_bytes_max(&self) -> usize {
        self.value_bytes_max
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn slot_of(&self, key: &Key) -> Option<u32> {
        self.index.get(key).copied()
    }

    /// Installs `key` with an absent value at version 0 (a no-op if it is there).
    pub fn install(&mut self, key: Key) -> Result<u32, StoreError> {
        if let Some(&s) = self.index.get(&key) {
            return Ok(s);
        }
        let s = self.free.pop().ok_or(StoreError::Full)?;
        self.lengths[s as usize] = ABSENT;
        self.versions[s as usize] = 0;
        self.index.insert(key, s);
        Ok(s)
    }

    /// Frees the slot of `key`; `false` if it had none.
    pub fn remove(&mut self, key: &Key) -> bool {
        match self.index.remove(key) {
            Some(s) => {
                self.free.push(s);
                true
            }
            None => false,
        }
    }

    pub fn read(&self, slot: u32) -> Slot<'_> {
        let s = slot as usize;
        let len = self.lengths[s];
        let start = s * self.value_bytes_max;
        Slot {
            value: (len != ABSENT).then(|| &self.values[start..start + len as usize]),
            version: self.versions[s],
        }
    }

    /// Sets `slot` (one write of each register).
    pub fn write(&mut self, slot: u32, value: Option<&[u8]>, version: u64) -> Result<(), StoreError> {
        let s = slot as usize;
        if value.is_some_and(|v| v.len() > self.value_bytes_max) {
            return Err(StoreError::TooLarge);
        }
        let start = s * self.value_bytes_max;
        self.lengths[s] = match value {
            Some(v) => {
                self.values[start..start + v.len()].copy_from_slice(v);
                v.len() as u16
            }
            None => ABSENT,
        };
        self.versions[s] = version;
        Ok(())
    }

    pub fn invariants(&self) {
        assert_eq!(
            self.index.len() + self.free.len(),
            self.lengths.len(),
            "every slot is indexed or free"
        );
        assert!(
            self.lengths
                .iter()
                .all(|&l| l == ABSENT || (l as usize) <= self.value_bytes_max)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_installed_written_and_freed_within_their_bounds() {
        let mut s = Store::new(2, 4);
        let a = Key::new(b"a").unwrap();
        let slot = s.install(a).unwrap();
        assert_eq!(s.install(a), Ok(slot), "installing twice is a no-op");
        assert_eq!(
            s.read(slot),
            Slot {
                value: None,
                version: 0
            }
        );
        s.write(slot, Some(b"xyz"), 3).unwrap();
        assert_eq!(
            s.read(slot),
            Slot {
                value: Some(b"xyz"),
                version: 3
            }
        );
        assert_eq!(s.write(slot, Some(b"12345"), 4), Err(StoreError::TooLarge));
        s.install(Key::new(b"b").unwrap()).unwrap();
        assert_eq!(s.install(Key::new(b"c").unwrap()), Err(StoreError::Full));
        assert!(s.remove(&a));
        assert!(!s.remove(&a));
        let c = s.install(Key::new(b"c").unwrap()).unwrap();
        assert_eq!(
            s.read(c),
            Slot {
                value: None,
                version: 0
            },
            "a reused slot starts empty"
        );
        s.invariants();
    }
}
