use super::*;
use crate::codec::Reply;
use bytes::Bytes;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn client(window: usize) -> Client {
    let mut c = ClientConfig::new(6, Layout::new(2, 3).unwrap());
    c.window = window;
    c.timeout_ns = 1_000;
    c.attempts_max = 3;
    Client::new(c)
}

/// The reply replica `src` of `shard` gives to every op of `req`.
fn answer(src: u32, shard: u16, req: &Request, status: Status, ts: u64, checksum: u64) -> Vec<u8> {
    Message::Reply(Reply {
        txn: req.txn,
        attempt: req.attempt,
        shard,
        replica: (src % 3) as u16,
        status,
        ts,
        checksum,
        results: req.ops.iter().map(|(i, _)| (*i, OpResult::Done)).collect(),
    })
    .encode()
}

fn decode(bytes: &[u8]) -> Request {
    match Message::decode(bytes).unwrap() {
        Message::Request(r) => r,
        other => panic!("{other:?}"),
    }
}

fn put(key: &str) -> Op {
    Op::Put {
        key: b(key),
        value: b("v"),
    }
}

#[test]
fn a_write_goes_reliably_to_every_replica_and_commits_when_all_answer() {
    let mut c = client(1);
    let id = c.submit(0, Txn::new(vec![put("a")])).unwrap();
    let out = c.poll_send().unwrap();
    assert!(out.reliable);
    assert_eq!(out.scatter.len(), 3);
    c.on_sent(&out, 0);
    let shard = Layout::new(2, 3).unwrap().shard_of(b"a") as u16;
    for (i, (dst, bytes)) in out.scatter.iter().enumerate() {
        assert!(
            c.poll_completion().is_none(),
            "committed before replica {i} answered"
        );
        c.on_message(
            10,
            *dst,
            &answer(*dst, shard, &decode(bytes), Status::Applied, 5, 77),
        );
        c.invariants();
    }
    let done = c.poll_completion().unwrap();
    assert_eq!(done.id, id);
    assert_eq!(
        done.outcome,
        Outcome::Committed {
            ts: 5,
            results: vec![OpResult::Done]
        }
    );
    assert_eq!(c.counters().checksum_mismatches, 0);
}

#[test]
fn replicas_that_disagree_are_counted() {
    let mut c = client(1);
    c.submit(0, Txn::new(vec![put("a")])).unwrap();
    let out = c.poll_send().unwrap();
    let shard = Layout::new(2, 3).unwrap().shard_of(b"a") as u16;
    for (i, (dst, bytes)) in out.scatter.iter().enumerate() {
        c.on_message(
            10,
            *dst,
            &answer(*dst, shard, &decode(bytes), Status::Applied, 5, i as u64),
        );
    }
    assert_eq!(c.counters().checksum_mismatches, 2);
}

#[test]
fn a_read_goes_best_effort_to_one_replica_per_shard_and_is_retried_whole() {
    let mut c = client(1);
    let get = |k: &str| Op::Get { key: b(k) };
    // Keys on both shards.
    let layout = Layout::new(2, 3).unwrap();
    let key_on = |shard: u32| {
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| layout.shard_of(k.as_bytes()) == shard)
            .unwrap()
    };
    let (k0, k1) = (key_on(0), key_on(1));
    c.submit(0, Txn::new(vec![get(&k0), get(&k1)])).unwrap();
    let out = c.poll_send().unwrap();
    assert!(!out.reliable);
    assert_eq!(out.scatter.len(), 2);
    c.on_sent(&out, 0);
    let (dst, bytes) = &out.scatter[0];
    let req = decode(bytes);
    let shard = layout.role_of(*dst).unwrap().0 as u16;
    c.on_message(1, *dst, &answer(*dst, shard, &req, Status::Applied, 5, 0));
    // The other shard's message was NAKed: both are asked again, at a new position.
    c.on_send_failure(2, 0);
    let again = c.poll_send().unwrap();
    assert_eq!(again.attempt, 1);
    assert_eq!(again.scatter.len(), 2, "a read is retried whole");
    assert_eq!(c.counters().retries, 1);
}

#[test]
fn a_write_whose_answers_never_come_ends_unknown() {
    let mut c = client(1);
    c.submit(0, Txn::new(vec![put("a")])).unwrap();
    for now in [1_000, 2_000, 3_000] {
        assert!(c.poll_send().is_some());
        c.handle_timeout(now);
        c.invariants();
    }
    match c.poll_completion().unwrap().outcome {
        Outcome::Unknown(_) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_replica_is_no_longer_awaited_nor_sent_to() {
    let mut c = client(2);
    c.submit(0, Txn::new(vec![put("a")])).unwrap();
    let out = c.poll_send().unwrap();
    let shard = Layout::new(2, 3).unwrap().shard_of(b"a") as u16;
    for (dst, bytes) in &out.scatter[..2] {
        c.on_message(
            10,
            *dst,
            &answer(*dst, shard, &decode(bytes), Status::Applied, 5, 1),
        );
    }
    let dead = out.scatter[2].0;
    c.on_process_failure(11, dead);
    assert!(matches!(
        c.poll_completion().unwrap().outcome,
        Outcome::Committed { .. }
    ));
    c.submit(12, Txn::new(vec![put("a")])).unwrap();
    let next = c.poll_send().unwrap();
    assert_eq!(next.scatter.len(), 2);
    assert!(next.scatter.iter().all(|(d, _)| *d != dead));
}

#[test]
fn the_window_bounds_outstanding_transactions() {
    let mut c = client(1);
    c.submit(0, Txn::new(vec![put("a")])).unwrap();
    assert_eq!(
        c.submit(0, Txn::new(vec![put("b")])),
        Err(SubmitError::WindowFull(1))
    );
    assert_eq!(client(1).submit(0, Txn::default()), Err(SubmitError::Empty));
}

/// Fuzz finding: a chunk's count came from the network and sized an allocation.
#[test]
fn a_snapshot_chunk_claiming_u32_max_pieces_allocates_nothing_and_never_completes() {
    let mut c = client(1);
    let id = c.snapshot(0).unwrap();
    let out = c.poll_send().unwrap();
    let (dst, _) = out.scatter[0];
    let shard = Layout::new(2, 3).unwrap().role_of(dst).unwrap().0 as u16;
    let chunk = Message::SnapshotChunk(crate::codec::SnapshotChunk {
        id,
        shard,
        replica: 0,
        ts: 5,
        index: 0,
        count: u32::MAX,
        pairs: Vec::new(),
    });
    c.on_message(1, dst, &chunk.encode());
    assert!(c.poll_snapshot().is_none());
    c.invariants();
}
