//! The set of linearized operations, kept compact for the memo and hashed as it changes.

/// A bitset stored as (leading full words, the words after them up to the last non-zero one):
/// the required operations are numbered in call order and those of the distant past are all
/// linearized, so a memo key holds only the words around the search's frontier.
#[derive(Default)]
pub(super) struct Segment {
    words: Vec<u64>,
    /// Words `..full` are all ones.
    pub(super) full: usize,
    /// Words `used..` are all zero; `full <= used`.
    used: usize,
    /// Zobrist hash of the set: the xor of `mix(bit + salt)` over its bits.
    pub(super) hash: u64,
    salt: u64,
}

impl Segment {
    pub(super) fn reset(&mut self, bits: usize, salt: u64) {
        self.words.clear();
        self.words.resize(bits.div_ceil(64), 0);
        self.full = 0;
        self.used = 0;
        self.hash = 0;
        self.salt = salt;
    }

    pub(super) fn insert(&mut self, bit: usize) {
        let (w, mask) = (bit / 64, 1u64 << (bit % 64));
        debug_assert_eq!(self.words[w] & mask, 0);
        self.words[w] |= mask;
        self.hash ^= mix(bit as u64 + self.salt);
        self.used = self.used.max(w + 1);
        while self.full < self.words.len() && self.words[self.full] == u64::MAX {
            self.full += 1;
        }
    }

    pub(super) fn remove(&mut self, bit: usize) {
        let (w, mask) = (bit / 64, 1u64 << (bit % 64));
        debug_assert_ne!(self.words[w] & mask, 0);
        self.words[w] &= !mask;
        self.hash ^= mix(bit as u64 + self.salt);
        self.full = self.full.min(w);
        while self.used > self.full && self.words[self.used - 1] == 0 {
            self.used -= 1;
        }
    }

    /// How many bits are set.
    pub(super) fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Checks the compact form against the words.
    pub(super) fn invariants(&self) {
        assert!(self.full <= self.used && self.used <= self.words.len());
        assert!(self.words[..self.full].iter().all(|&w| w == u64::MAX));
        assert!(self.full == self.words.len() || self.words[self.full] != u64::MAX);
        assert!(self.words[self.used..].iter().all(|&w| w == 0));
        assert!(self.used == 0 || self.words[self.used - 1] != 0);
    }

    pub(super) fn words(&self) -> &[u64] {
        &self.words[self.full..self.used]
    }
}

/// splitmix64's finalizer: spreads consecutive integers over all 64 bits.
pub(super) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_keeps_full_and_used_words_canonical() {
        let mut s = Segment::default();
        s.reset(200, 0);
        for bit in 0..64 {
            s.insert(bit);
        }
        assert_eq!((s.full, s.used), (1, 1));
        assert!(s.words().is_empty());
        s.insert(130);
        assert_eq!((s.full, s.used), (1, 3));
        assert_eq!(s.words(), [0, 1 << 2]);
        s.remove(130);
        assert_eq!((s.full, s.used), (1, 1));
        s.remove(5);
        assert_eq!((s.full, s.used), (0, 1));
        assert_eq!(s.words(), [!(1 << 5)]);
        s.insert(5);
        assert_eq!((s.full, s.used), (1, 1));
        assert_eq!(s.len(), 64);
        s.invariants();
        let hash = s.hash;
        s.insert(70);
        s.remove(70);
        assert_eq!(s.hash, hash, "the hash depends on the set only");
    }
}
