//! The whole store at one point: what `SNAPSHOT` and `SNAPSHOT DUMP` answer.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::fnv::Fnv1a;
use crate::reply::Reply;

/// Every key and value of a store at one point of its history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The point, as the store numbers its history: a 1Pipe timestamp in the transactional store,
    /// the count of changes applied in [`MemStore`](crate::MemStore). Two snapshots of one store
    /// with the same `ts` hold the same pairs.
    pub ts: u64,
    /// The pairs, sorted by key (byte order).
    pub pairs: BTreeMap<Bytes, Bytes>,
}

impl Snapshot {
    /// A 64-bit digest of the pairs, so that replicas or runs compare their states in one line.
    ///
    /// FNV-1a (64 bits: offset basis `0xcbf29ce484222325`, prime `0x100000001b3`) over, for each
    /// pair in key order, the key's length as 8 little-endian bytes, the key, the value's length
    /// as 8 little-endian bytes, the value. The lengths keep `("ab", "c")` and `("a", "bc")`
    /// apart; the key order makes it depend on the contents only, not on the order the pairs
    /// were inserted. `ts` is not part of it. Part of the interface: it never changes.
    pub fn digest(&self) -> u64 {
        let mut hash = Fnv1a::new();
        for (key, value) in &self.pairs {
            hash.write_field(key);
            hash.write_field(value);
        }
        hash.finish()
    }

    /// The reply to `SNAPSHOT` (`dump: false`): `[ts, key count, digest]`, the digest a bulk
    /// string of 16 lower-case hex digits; to `SNAPSHOT DUMP`: `[ts, [k1, v1, k2, v2, ...]]`,
    /// sorted by key.
    pub fn to_reply(&self, dump: bool) -> Reply {
        let ts = Reply::Integer(integer(self.ts));
        if dump {
            let flat = self
                .pairs
                .iter()
                .flat_map(|(key, value)| [Reply::Bulk(key.clone()), Reply::Bulk(value.clone())])
                .collect();
            return Reply::Array(vec![ts, Reply::Array(flat)]);
        }
        let count = Reply::Integer(integer(self.pairs.len() as u64));
        let digest = Reply::Bulk(format!("{:016x}", self.digest()).into());
        Reply::Array(vec![ts, count, digest])
    }
}

/// RESP integers are signed: a `u64` past `i64::MAX` (no store counts that far) saturates.
fn integer(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn snapshot(ts: u64, pairs: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            ts,
            pairs: pairs.iter().map(|(k, v)| (b(k), b(v))).collect(),
        }
    }

    #[test]
    fn digest_golden_value() {
        // The empty store hashes nothing: the offset basis.
        assert_eq!(snapshot(0, &[]).digest(), 0xcbf2_9ce4_8422_2325);
        // One pair ("k", "v"): the bytes 1,0,0,0,0,0,0,0,'k',1,0,0,0,0,0,0,0,'v'.
        let mut fnv = Fnv1a::new();
        fnv.write(&[1, 0, 0, 0, 0, 0, 0, 0, b'k', 1, 0, 0, 0, 0, 0, 0, 0, b'v']);
        assert_eq!(snapshot(0, &[("k", "v")]).digest(), fnv.finish());
        // The example of docs/redis.md.
        assert_eq!(
            snapshot(2, &[("b", "2"), ("a", "1")]).digest(),
            0x4fa0_8d85_903c_5b2b
        );
    }

    #[test]
    fn digest_tells_contents_apart_but_not_ts() {
        let base = snapshot(1, &[("a", "1"), ("b", "2")]);
        assert_eq!(base.digest(), snapshot(9, &[("b", "2"), ("a", "1")]).digest());
        for other in [
            snapshot(1, &[("a", "1")]),
            snapshot(1, &[("a", "1"), ("b", "3")]),
            snapshot(1, &[("a", "1"), ("c", "2")]),
            snapshot(1, &[("a", "1b"), ("", "2")]),
        ] {
            assert_ne!(base.digest(), other.digest(), "{other:?}");
        }
        // Length prefixes: moving a byte from key to value changes the digest.
        assert_ne!(
            snapshot(0, &[("ab", "c")]).digest(),
            snapshot(0, &[("a", "bc")]).digest()
        );
    }

    #[test]
    fn reply_shapes() {
        let s = snapshot(7, &[("b", "2"), ("a", "1")]);
        assert_eq!(
            s.to_reply(false),
            Reply::Array(vec![
                Reply::Integer(7),
                Reply::Integer(2),
                Reply::Bulk(format!("{:016x}", s.digest()).into()),
            ])
        );
        assert_eq!(
            s.to_reply(true),
            Reply::Array(vec![
                Reply::Integer(7),
                Reply::Array(vec![
                    Reply::Bulk(b("a")),
                    Reply::Bulk(b("1")),
                    Reply::Bulk(b("b")),
                    Reply::Bulk(b("2")),
                ]),
            ])
        );
        let Reply::Array(items) = snapshot(0, &[]).to_reply(false) else {
            panic!("an array")
        };
        assert_eq!(items[2], Reply::Bulk(b("cbf29ce484222325")));
    }

    proptest! {
        /// The digest depends on the set of pairs only, whatever the order they were inserted in.
        #[test]
        fn digest_ignores_insertion_order(
            pairs in proptest::collection::vec((".{0,4}", ".{0,4}"), 0..12),
            seed: u64,
        ) {
            let forward: BTreeMap<Bytes, Bytes> =
                pairs.iter().map(|(k, v)| (b(k), b(v))).collect();
            let mut shuffled: Vec<(Bytes, Bytes)> = forward.clone().into_iter().collect();
            let len = shuffled.len();
            for i in 0..len {
                let j = (seed.wrapping_mul(i as u64 + 1) % len as u64) as usize;
                shuffled.swap(i, j);
            }
            let mut backward = BTreeMap::new();
            for (k, v) in shuffled {
                backward.insert(k, v);
            }
            let a = Snapshot { ts: 0, pairs: forward };
            let z = Snapshot { ts: 1, pairs: backward };
            prop_assert_eq!(a.digest(), z.digest());
        }
    }
}
