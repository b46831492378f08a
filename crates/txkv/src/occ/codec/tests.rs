use super::*;
use proptest::prelude::*;

use crate::codec::tests::{key, op, result};

fn keys() -> impl Strategy<Value = Vec<Bytes>> {
    proptest::collection::vec(key(), 0..5)
}

fn read_item() -> impl Strategy<Value = ReadItem> {
    (proptest::option::of(key()), any::<u64>(), any::<bool>()).prop_map(|(value, version, locked)| ReadItem {
        value,
        version,
        locked,
    })
}

fn key_versions() -> impl Strategy<Value = Vec<(Bytes, u64)>> {
    proptest::collection::vec((key(), any::<u64>()), 0..5)
}

fn message() -> impl Strategy<Value = OccMessage> {
    let ids = (any::<u64>(), any::<u32>());
    prop_oneof![
        (ids, keys()).prop_map(|((txn, attempt), keys)| OccMessage::Read(Read { txn, attempt, keys })),
        (ids, any::<u16>(), proptest::collection::vec(read_item(), 0..5)).prop_map(
            |((txn, attempt), shard, items)| OccMessage::ReadReply(ReadReply {
                txn,
                attempt,
                shard,
                read_ns: txn ^ 7,
                items
            })
        ),
        (
            ids,
            proptest::collection::vec((key(), proptest::option::of(any::<u64>())), 0..5)
        )
            .prop_map(|((txn, attempt), items)| OccMessage::Lock(Lock { txn, attempt, items })),
        (
            ids,
            any::<u16>(),
            any::<bool>(),
            proptest::collection::vec(any::<u64>(), 0..5)
        )
            .prop_map(
                |((txn, attempt), shard, ok, versions)| OccMessage::LockReply(LockReply {
                    txn,
                    attempt,
                    shard,
                    ok,
                    versions
                })
            ),
        (ids, key_versions()).prop_map(|((txn, attempt), items)| OccMessage::Validate(Validate {
            txn,
            attempt,
            items
        })),
        (ids, any::<u16>(), any::<bool>()).prop_map(|((txn, attempt), shard, ok)| {
            OccMessage::ValidateReply(ValidateReply {
                txn,
                attempt,
                shard,
                ok,
            })
        }),
        (
            ids,
            proptest::collection::vec((any::<u16>(), op()), 0..5),
            key_versions()
        )
            .prop_map(|((txn, attempt), ops, bases)| OccMessage::Commit(Commit {
                txn,
                attempt,
                ops,
                bases
            })),
        (
            ids,
            any::<u16>(),
            0..4u8,
            proptest::collection::vec((any::<u16>(), result()), 0..5)
        )
            .prop_map(
                |((txn, attempt), shard, status, results)| OccMessage::CommitReply(CommitReply {
                    txn,
                    attempt,
                    shard,
                    replica: shard ^ 1,
                    status: CommitStatus::from_u8(status).unwrap(),
                    results,
                })
            ),
        (ids, keys()).prop_map(|((txn, attempt), keys)| OccMessage::Abort(Abort { txn, attempt, keys })),
        (ids, any::<u16>()).prop_map(|((txn, attempt), shard)| OccMessage::AbortReply(AbortReply {
            txn,
            attempt,
            shard
        })),
    ]
}

proptest! {
    #[test]
    fn every_message_round_trips(m in message()) {
        prop_assert_eq!(OccMessage::decode(&m.encode()), Ok(m));
    }

    #[test]
    fn any_bytes_decode_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = OccMessage::decode(&bytes);
    }

    /// The tag alone is chosen among ours, so the body's checks are reached.
    #[test]
    fn any_body_decodes_or_fails_without_panic(
        tag in TAG_READ..=TAG_ABORT_REPLY,
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![tag];
        bytes.extend(body);
        let _ = OccMessage::decode(&bytes);
    }

    #[test]
    fn every_cut_of_a_message_is_refused(m in message(), cut in any::<prop::sample::Index>()) {
        let bytes = m.encode();
        let at = cut.index(bytes.len());
        prop_assert!(OccMessage::decode(&bytes[..at]).is_err());
    }
}

#[test]
fn the_stores_messages_and_trailing_bytes_are_refused() {
    assert_eq!(
        OccMessage::decode(&[1]),
        Err(DecodeError::UnknownTag {
            what: "occ message",
            tag: 1
        })
    );
    assert_eq!(OccMessage::decode(&[]), Err(DecodeError::Empty));
    let mut bytes = OccMessage::AbortReply(AbortReply {
        txn: 1,
        attempt: 2,
        shard: 3,
    })
    .encode();
    bytes.push(0);
    assert_eq!(
        OccMessage::decode(&bytes),
        Err(DecodeError::Trailing { bytes: 1 })
    );
}

#[test]
fn a_forged_count_or_flag_is_refused() {
    let mut w = head(TAG_COMMIT, 1, 0);
    w.u16(u16::MAX);
    assert!(matches!(
        OccMessage::decode(&w.buf),
        Err(DecodeError::Truncated { what: "ops", .. })
    ));
    let mut w = head(TAG_VALIDATE_REPLY, 1, 0);
    w.u16(0);
    w.u8(2);
    assert_eq!(
        OccMessage::decode(&w.buf),
        Err(DecodeError::UnknownTag { what: "ok", tag: 2 })
    );
}
