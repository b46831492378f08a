use super::*;
use crate::txn::Op;
use bytes::Bytes;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn request(txn: u64, attempt: u32, read_only: bool, ops: Vec<Op>) -> Vec<u8> {
    Message::Request(Request {
        txn,
        attempt,
        flags: if read_only { FLAG_READ_ONLY } else { 0 },
        ops: ops
            .into_iter()
            .enumerate()
            .map(|(i, op)| (i as u16, op))
            .collect(),
    })
    .encode()
}

fn replies(s: &mut Server) -> Vec<(u32, Reply)> {
    let mut out = Vec::new();
    while let Some((dst, bytes)) = s.pop_send() {
        match Message::decode(&bytes).unwrap() {
            Message::Reply(r) => out.push((dst, r)),
            other => panic!("unexpected {other:?}"),
        }
    }
    s.invariants();
    out
}

fn server() -> Server {
    Server::new(ServerConfig::new(0, 0, Ordering::OnePipe))
}

#[test]
fn a_read_waits_for_the_commit_barrier_and_sees_the_writes_below_it() {
    let mut s = server();
    s.on_delivery(
        Service::BestEffort,
        100,
        7,
        &request(1, 0, true, vec![Op::Get { key: b("x") }]),
    );
    assert!(
        replies(&mut s).is_empty(),
        "served before the commit barrier passed it"
    );
    s.on_delivery(
        Service::Reliable,
        90,
        8,
        &request(
            1,
            0,
            false,
            vec![Op::Put {
                key: b("x"),
                value: b("a"),
            }],
        ),
    );
    let r = replies(&mut s);
    assert_eq!(r.len(), 1, "only the write is answered");
    assert_eq!(r[0].0, 8);
    s.on_commit_barrier(101);
    let r = replies(&mut s);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].1.results, vec![(0, OpResult::Value(Some(b("a"))))]);
    assert_eq!(r[0].1.ts, 100);
}

#[test]
fn a_write_above_a_pending_read_goes_after_it() {
    let mut s = server();
    s.on_delivery(
        Service::BestEffort,
        100,
        7,
        &request(1, 0, true, vec![Op::Get { key: b("x") }]),
    );
    s.on_delivery(
        Service::Reliable,
        110,
        8,
        &request(
            1,
            0,
            false,
            vec![Op::Put {
                key: b("x"),
                value: b("a"),
            }],
        ),
    );
    let r = replies(&mut s);
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].0, 7, "the read at 100 is answered first");
    assert_eq!(r[0].1.results, vec![(0, OpResult::Value(None))]);
}

#[test]
fn a_read_below_an_executed_write_is_late() {
    let mut s = server();
    s.on_delivery(
        Service::Reliable,
        110,
        8,
        &request(
            1,
            0,
            false,
            vec![Op::Put {
                key: b("x"),
                value: b("a"),
            }],
        ),
    );
    s.on_delivery(
        Service::BestEffort,
        100,
        7,
        &request(1, 0, true, vec![Op::Get { key: b("x") }]),
    );
    let r = replies(&mut s);
    assert_eq!(r[1].1.status, Status::Late);
    assert_eq!(s.counters().late_reads, 1);
}

#[test]
fn a_retried_write_is_answered_not_executed_again() {
    let mut s = server();
    let incr = |attempt| {
        request(
            5,
            attempt,
            false,
            vec![Op::IncrBy {
                key: b("n"),
                delta: 1,
            }],
        )
    };
    s.on_delivery(Service::Reliable, 10, 3, &incr(0));
    s.on_delivery(Service::Reliable, 20, 3, &incr(1));
    let r = replies(&mut s);
    assert_eq!(r[0].1.results, vec![(0, OpResult::Integer(1))]);
    assert_eq!(r[1].1.status, Status::Duplicate);
    assert_eq!(r[1].1.results, vec![(0, OpResult::Integer(1))]);
    assert_eq!(r[1].1.ts, 10, "the first execution's position");
    assert_eq!(s.state().writes(), 1);
}

#[test]
fn a_retry_older_than_what_is_remembered_is_forgotten() {
    let mut config = ServerConfig::new(0, 0, Ordering::OnePipe);
    config.remembered_per_client = 2;
    let mut s = Server::new(config);
    for txn in 1..=3 {
        let put = request(
            txn,
            0,
            false,
            vec![Op::Put {
                key: b("k"),
                value: b("v"),
            }],
        );
        s.on_delivery(Service::Reliable, txn * 10, 3, &put);
    }
    let retry = request(
        1,
        1,
        false,
        vec![Op::Put {
            key: b("k"),
            value: b("v"),
        }],
    );
    s.on_delivery(Service::Reliable, 40, 3, &retry);
    let r = replies(&mut s);
    assert_eq!(r.last().unwrap().1.status, Status::Forgotten);
    assert_eq!(s.state().writes(), 3);
}

#[test]
fn replicas_fed_the_same_writes_agree_on_checksum_and_digest() {
    let mut a = server();
    let mut c = Server::new(ServerConfig::new(0, 1, Ordering::OnePipe));
    for (ts, txn) in [(10, 1), (20, 2), (30, 3)] {
        let put = request(
            txn,
            0,
            false,
            vec![Op::Put {
                key: b(&format!("k{txn}")),
                value: b("v"),
            }],
        );
        a.on_delivery(Service::Reliable, ts, 4, &put);
        c.on_delivery(Service::Reliable, ts, 4, &put);
    }
    let (ra, rc) = (replies(&mut a), replies(&mut c));
    assert_eq!(ra.last().unwrap().1.checksum, rc.last().unwrap().1.checksum);
    assert_eq!(a.state().digest(), c.state().digest());
}

#[test]
fn a_snapshot_is_the_state_at_its_position() {
    let mut s = server();
    s.on_delivery(
        Service::Reliable,
        10,
        3,
        &request(
            1,
            0,
            false,
            vec![Op::Put {
                key: b("a"),
                value: b("1"),
            }],
        ),
    );
    let snap = Message::SnapshotRequest(SnapshotRequest {
        id: 9,
        chunk_pairs: 1,
    })
    .encode();
    s.on_delivery(Service::Reliable, 20, 4, &snap);
    s.on_delivery(
        Service::Reliable,
        30,
        3,
        &request(
            2,
            0,
            false,
            vec![Op::Put {
                key: b("b"),
                value: b("2"),
            }],
        ),
    );
    let mut chunks = Vec::new();
    while let Some((_, bytes)) = s.pop_send() {
        if let Message::SnapshotChunk(c) = Message::decode(&bytes).unwrap() {
            chunks.push(c);
        }
    }
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].pairs, vec![(b("a"), b("1"))]);
    assert_eq!(chunks[0].ts, 20);
}

#[test]
fn garbage_is_counted_and_dropped() {
    let mut s = server();
    s.on_delivery(Service::BestEffort, 1, 1, &[0xff, 1, 2]);
    s.on_delivery(
        Service::BestEffort,
        2,
        1,
        &request(
            1,
            0,
            false,
            vec![Op::Put {
                key: b("k"),
                value: b("v"),
            }],
        ),
    );
    assert_eq!(s.counters().malformed, 2);
    assert!(s.pop_send().is_none());
}

#[test]
fn unordered_servers_execute_on_arrival() {
    let mut s = Server::new(ServerConfig::new(0, 0, Ordering::Unordered));
    s.on_delivery(
        Service::BestEffort,
        100,
        7,
        &request(1, 0, true, vec![Op::Get { key: b("x") }]),
    );
    assert_eq!(replies(&mut s).len(), 1);
}

/// Fuzz finding: a request flagged read-only that writes would change this replica outside
/// the total order.
#[test]
fn a_read_only_request_that_writes_is_dropped() {
    let mut s = server();
    let put = request(
        1,
        0,
        true,
        vec![Op::Put {
            key: b("x"),
            value: b("v"),
        }],
    );
    s.on_delivery(Service::BestEffort, 10, 3, &put);
    s.on_delivery(Service::Reliable, 20, 3, &put);
    s.on_commit_barrier(30);
    assert!(s.pop_send().is_none());
    assert_eq!((s.state().len(), s.counters().malformed), (0, 2));
}

/// Fuzz finding: a snapshot taken at a best-effort position moved the executed position above
/// reads still waiting for the commit barrier.
#[test]
fn a_best_effort_snapshot_request_is_dropped() {
    let mut s = server();
    s.on_delivery(
        Service::BestEffort,
        100,
        7,
        &request(1, 0, true, vec![Op::Get { key: b("x") }]),
    );
    let snap = Message::SnapshotRequest(SnapshotRequest {
        id: 9,
        chunk_pairs: 4,
    })
    .encode();
    s.on_delivery(Service::BestEffort, 120, 4, &snap);
    s.invariants();
    assert_eq!(s.counters().malformed, 1);
    s.on_commit_barrier(130);
    assert_eq!(replies(&mut s)[0].1.status, Status::Applied);
}
