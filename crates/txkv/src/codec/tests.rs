use super::*;
use proptest::prelude::*;

pub(crate) fn key() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from)
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        key().prop_map(|key| Op::Get { key }),
        (key(), key()).prop_map(|(key, value)| Op::Put { key, value }),
        key().prop_map(|key| Op::Del { key }),
        (key(), any::<i64>()).prop_map(|(key, delta)| Op::IncrBy { key, delta }),
    ]
}

pub(crate) fn result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        proptest::option::of(key()).prop_map(OpResult::Value),
        Just(OpResult::Done),
        any::<bool>().prop_map(OpResult::Deleted),
        any::<i64>().prop_map(OpResult::Integer),
        Just(OpResult::NotAnInteger),
        Just(OpResult::Overflow),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u32>(),
            any::<u8>(),
            proptest::collection::vec((any::<u16>(), op()), 0..6)
        )
            .prop_map(|(txn, attempt, flags, ops)| Message::Request(Request {
                txn,
                attempt,
                flags,
                ops
            })),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u16>(),
            0..4u8,
            any::<u64>(),
            proptest::collection::vec((any::<u16>(), result()), 0..6)
        )
            .prop_map(
                |(txn, attempt, shard, status, ts, results)| Message::Reply(Reply {
                    txn,
                    attempt,
                    shard,
                    replica: shard ^ 1,
                    status: Status::from_u8(status).unwrap(),
                    ts,
                    checksum: ts.rotate_left(7),
                    results,
                })
            ),
        (any::<u64>(), any::<u32>())
            .prop_map(|(id, chunk_pairs)| Message::SnapshotRequest(SnapshotRequest { id, chunk_pairs })),
        (
            any::<u64>(),
            any::<u32>(),
            proptest::collection::vec((key(), key()), 0..5)
        )
            .prop_map(|(id, index, pairs)| Message::SnapshotChunk(SnapshotChunk {
                id,
                shard: 3,
                replica: 1,
                ts: id ^ 5,
                index,
                count: index.saturating_add(1),
                pairs,
            })),
    ]
}

proptest! {
    #[test]
    fn every_message_round_trips(m in message()) {
        prop_assert_eq!(Message::decode(&m.encode()), Ok(m));
    }

    #[test]
    fn any_bytes_decode_or_fail_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Message::decode(&bytes);
    }

    #[test]
    fn every_cut_of_a_message_is_refused(m in message(), cut in any::<prop::sample::Index>()) {
        let bytes = m.encode();
        let at = cut.index(bytes.len());
        prop_assert!(Message::decode(&bytes[..at]).is_err());
    }
}

#[test]
fn a_forged_count_is_refused_before_allocating() {
    let mut w = Writer::with_tag(TAG_REQUEST);
    w.u64(1);
    w.u32(0);
    w.u8(0);
    w.u16(u16::MAX);
    assert!(matches!(
        Message::decode(&w.buf),
        Err(DecodeError::Truncated { what: "ops", .. })
    ));
}

#[test]
fn trailing_bytes_and_unknown_tags_are_refused() {
    let mut bytes = Message::SnapshotRequest(SnapshotRequest {
        id: 1,
        chunk_pairs: 2,
    })
    .encode();
    bytes.push(0);
    assert_eq!(Message::decode(&bytes), Err(DecodeError::Trailing { bytes: 1 }));
    assert_eq!(
        Message::decode(&[99]),
        Err(DecodeError::UnknownTag {
            what: "message",
            tag: 99
        })
    );
    assert_eq!(Message::decode(&[]), Err(DecodeError::Empty));
}
