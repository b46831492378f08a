//! One replica's data: the key-value map, the checksum of the writes it executed (paper
//! 2.2.2), and a digest of its content that replicas compare at the end of a run.

use std::collections::HashMap;

use bytes::Bytes;

use crate::layout::fnv1a;
use crate::txn::{Op, OpResult};

#[derive(Debug, Default)]
pub struct ShardState {
    map: HashMap<Bytes, Bytes>,
    checksum: u64,
    writes: u64,
}

impl ShardState {
    /// Executes `op`. Reads change nothing; writes change the map (not the checksum: see
    /// [`ShardState::note_write`]).
    pub fn apply(&mut self, op: &Op) -> OpResult {
        match op {
            Op::Get { key } => OpResult::Value(self.map.get(key).cloned()),
            Op::Put { key, value } => {
                self.map.insert(key.clone(), value.clone());
                OpResult::Done
            }
            Op::Del { key } => OpResult::Deleted(self.map.remove(key).is_some()),
            Op::IncrBy { key, delta } => self.incr_by(key, *delta),
        }
    }

    fn incr_by(&mut self, key: &Bytes, delta: i64) -> OpResult {
        let now = match self.map.get(key) {
            None => 0,
            Some(v) => match parse_i64(v) {
                Some(n) => n,
                None => return OpResult::NotAnInteger,
            },
        };
        match now.checked_add(delta) {
            Some(n) => {
                self.map.insert(key.clone(), Bytes::from(n.to_string()));
                OpResult::Integer(n)
            }
            None => OpResult::Overflow,
        }
    }

    /// Folds one executed write transaction, identified by its position (timestamp, sender)
    /// and the sender's transaction id, into the checksum: two replicas that executed the same
    /// writes in the same order have the same checksum.
    pub fn note_write(&mut self, ts: u64, src: u32, txn: u64) {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&ts.to_le_bytes());
        bytes[8..12].copy_from_slice(&src.to_le_bytes());
        bytes[12..].copy_from_slice(&txn.to_le_bytes());
        self.checksum = fnv1a(&bytes) ^ self.checksum.rotate_left(17);
        self.writes += 1;
    }

    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// Write transactions executed.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// A digest of the content alone, independent of the order keys were inserted in.
    pub fn digest(&self) -> u64 {
        self.map
            .iter()
            .map(|(k, v)| pair_hash(k, v))
            .fold(0u64, u64::wrapping_add)
    }

    /// The content, sorted by key (a snapshot's copy).
    pub fn sorted_pairs(&self) -> Vec<(Bytes, Bytes)> {
        let mut pairs: Vec<(Bytes, Bytes)> = self.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        pairs
    }
}

fn pair_hash(key: &[u8], value: &[u8]) -> u64 {
    let mut buf = Vec::with_capacity(key.len() + value.len() + 8);
    buf.extend_from_slice(&(key.len() as u64).to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    // FNV alone mixes the last bytes weakly; a final avalanche keeps the sum from cancelling.
    let mut h = fnv1a(&buf);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A decimal `i64` as Redis reads one: an optional `-`, digits, no leading zero, no `+`, no
/// spaces.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits[0] != b'0')
        && bytes != b"-0";
    if !canonical {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn incr_by_follows_redis() {
        let mut s = ShardState::default();
        assert_eq!(
            s.apply(&Op::IncrBy {
                key: b("n"),
                delta: 5
            }),
            OpResult::Integer(5)
        );
        assert_eq!(
            s.apply(&Op::IncrBy {
                key: b("n"),
                delta: -7
            }),
            OpResult::Integer(-2)
        );
        s.apply(&Op::Put {
            key: b("x"),
            value: b("abc"),
        });
        assert_eq!(
            s.apply(&Op::IncrBy {
                key: b("x"),
                delta: 1
            }),
            OpResult::NotAnInteger
        );
        s.apply(&Op::Put {
            key: b("m"),
            value: b(&i64::MAX.to_string()),
        });
        assert_eq!(
            s.apply(&Op::IncrBy {
                key: b("m"),
                delta: 1
            }),
            OpResult::Overflow
        );
        assert_eq!(
            s.apply(&Op::Get { key: b("m") }),
            OpResult::Value(Some(b(&i64::MAX.to_string())))
        );
    }

    #[test]
    fn only_canonical_decimals_are_integers() {
        for ok in ["0", "-1", "42", "9223372036854775807", "-9223372036854775808"] {
            assert!(parse_i64(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in [
            "",
            "-",
            "+1",
            "01",
            "-0",
            " 1",
            "1 ",
            "9223372036854775808",
            "1e3",
        ] {
            assert_eq!(parse_i64(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn digest_ignores_insertion_order_and_sees_content() {
        let mut a = ShardState::default();
        let mut c = ShardState::default();
        for i in 0..50 {
            a.apply(&Op::Put {
                key: b(&format!("k{i}")),
                value: b("v"),
            });
            c.apply(&Op::Put {
                key: b(&format!("k{}", 49 - i)),
                value: b("v"),
            });
        }
        assert_eq!(a.digest(), c.digest());
        c.apply(&Op::Put {
            key: b("k3"),
            value: b("w"),
        });
        assert_ne!(a.digest(), c.digest());
    }

    #[test]
    fn checksum_depends_on_order() {
        let (mut a, mut c) = (ShardState::default(), ShardState::default());
        a.note_write(1, 0, 1);
        a.note_write(2, 1, 1);
        c.note_write(2, 1, 1);
        c.note_write(1, 0, 1);
        assert_ne!(a.checksum(), c.checksum());
    }
}
