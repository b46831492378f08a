//! A replica (1Pipe's or OCC's) fed deliveries, commit barriers and clock ticks.

use super::{STEPS_MAX, advance_ns, indexed_ops, key, op, sender};
use crate::frames::{Draw, hostile};
use bytes::Bytes;
use onepipe_txkv::codec::{FLAG_READ_ONLY, Message, Request, SnapshotRequest};
use onepipe_txkv::occ::OccMessage;
use onepipe_txkv::occ::codec::{Abort, Commit, Lock, Read, Validate};
use onepipe_txkv::{ServerEngine, Service};

/// Positions in 1Pipe's total order handed out as the runtime would: each service delivers in
/// (timestamp, sender) order, and a reliable message comes at or above the commit barrier.
#[derive(Default)]
struct Order {
    reliable: (u64, u32),
    best_effort: (u64, u32),
    barrier: u64,
}

impl Order {
    /// The timestamp of the next delivery from `src`, or `None` if `src` cannot send one now
    /// (its last was at the end of time).
    fn next(&mut self, d: &mut Draw, service: Service, src: u32) -> Option<u64> {
        let (last, floor) = match service {
            Service::Reliable => (&mut self.reliable, self.barrier),
            Service::BestEffort => (&mut self.best_effort, 0),
        };
        let floor = floor.max(last.0);
        let gap = match d.u8() % 8 {
            0..=3 => 0,
            4 => d.u16() as u64,
            _ => d.below(4) as u64,
        };
        let mut ts = floor.saturating_add(gap);
        if (ts, src) <= *last {
            ts = last.0.checked_add(1)?;
        }
        *last = (ts, src);
        Some(ts)
    }

    /// A commit barrier: never back, near what either service delivered last (the next
    /// reliable message comes at or above it).
    fn barrier(&mut self, d: &mut Draw) -> u64 {
        let ahead = match d.u8() % 4 {
            0 => d.u16() as u64,
            _ => d.below(8) as u64,
        };
        let base = if d.bool() {
            self.reliable.0
        } else {
            self.best_effort.0
        };
        self.barrier = self.barrier.max(base.saturating_add(ahead));
        self.barrier
    }
}

/// A 1Pipe replica. Ordered, nothing but reliable deliveries changes its content: reads
/// execute where they are delivered, a commit barrier only releases reads.
pub fn onepipe(d: &mut Draw, mut server: onepipe_txkv::Server) {
    let ordered = server.config().ordering == onepipe_txkv::Ordering::OnePipe;
    serve(d, &mut server, onepipe_message, check_onepipe, ordered);
}

pub fn occ(d: &mut Draw, mut server: onepipe_txkv::OccServer) {
    serve(d, &mut server, occ_message, check_occ, false);
}

fn serve<S: ServerEngine>(
    d: &mut Draw,
    server: &mut S,
    message: fn(&mut Draw) -> Vec<u8>,
    check: fn(&[u8]),
    reliable_writes_only: bool,
) {
    let mut order = Order::default();
    let mut now_ns = 0;
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now_ns = advance_ns(d, now_ns);
        server.set_now(now_ns);
        let digest = server.digest();
        let changes_nothing = match d.u8() % 8 {
            0..=5 => {
                let service = if d.bool() {
                    Service::Reliable
                } else {
                    Service::BestEffort
                };
                let src = sender(d);
                let payload = hostile(d, message);
                if let Some(ts) = order.next(d, service, src) {
                    server.on_delivery(service, ts, src, &payload);
                }
                service == Service::BestEffort
            }
            _ => {
                server.on_commit_barrier(order.barrier(d));
                true
            }
        };
        if reliable_writes_only && changes_nothing {
            assert_eq!(
                server.digest(),
                digest,
                "the content changed outside a reliable delivery"
            );
        }
        drain(server, check);
        server.invariants();
    }
}

/// Takes every answer the server queued and checks it decodes.
fn drain<S: ServerEngine>(server: &mut S, check: fn(&[u8])) {
    while let Some(peeked) = server.peek_send().cloned() {
        let sent = server.pop_send().expect("peek_send saw it");
        assert_eq!(peeked, sent, "pop_send gave another message than peek_send");
        check(&sent.1);
    }
}

fn check_onepipe(bytes: &[u8]) {
    if let Err(e) = Message::decode(bytes) {
        panic!("a 1Pipe replica sent a message that does not decode: {e}: {bytes:?}");
    }
}

fn check_occ(bytes: &[u8]) {
    if let Err(e) = OccMessage::decode(bytes) {
        panic!("an OCC replica sent a message that does not decode: {e}: {bytes:?}");
    }
}

/// What a client sends a 1Pipe replica, mostly; now and then what only a replica sends.
fn onepipe_message(d: &mut Draw) -> Vec<u8> {
    let m = match d.u8() % 8 {
        0..=5 => Message::Request(Request {
            txn: d.number(4),
            attempt: d.number(3) as u32,
            flags: if d.bool() { FLAG_READ_ONLY } else { d.u8() % 4 },
            ops: indexed_ops(d, 4),
        }),
        6 => Message::SnapshotRequest(SnapshotRequest {
            id: d.number(4),
            chunk_pairs: d.number(4) as u32,
        }),
        _ => {
            let request = Message::Request(request(d)).encode();
            return super::clients::onepipe_answer_to(d, 0, &request);
        }
    };
    m.encode()
}

fn request(d: &mut Draw) -> Request {
    Request {
        txn: d.number(4),
        attempt: d.number(3) as u32,
        flags: 0,
        ops: indexed_ops(d, 3),
    }
}

/// A version as a client read or locked it: small, as the store's are after a few commits.
fn version(d: &mut Draw) -> u64 {
    d.number(4)
}

fn keys(d: &mut Draw) -> Vec<Bytes> {
    (0..d.below(4)).map(|_| key(d)).collect()
}

/// What an OCC client sends a replica, mostly; now and then what only a replica sends.
fn occ_message(d: &mut Draw) -> Vec<u8> {
    let txn = d.number(4);
    let attempt = d.number(3) as u32;
    let m = match d.u8() % 12 {
        0 | 1 => OccMessage::Read(Read {
            txn,
            attempt,
            keys: keys(d),
        }),
        2 | 3 => OccMessage::Lock(Lock {
            txn,
            attempt,
            items: (0..d.below(4))
                .map(|_| (key(d), d.bool().then(|| version(d))))
                .collect(),
        }),
        4 => OccMessage::Validate(Validate {
            txn,
            attempt,
            items: (0..d.below(4)).map(|_| (key(d), version(d))).collect(),
        }),
        5..=8 => OccMessage::Commit(commit(d, txn, attempt)),
        9 | 10 => OccMessage::Abort(Abort {
            txn,
            attempt,
            keys: keys(d),
        }),
        _ => {
            let read = OccMessage::Read(Read {
                txn,
                attempt,
                keys: keys(d),
            });
            let read = read.encode();
            return super::clients::occ_answer_to(d, 0, &read);
        }
    };
    m.encode()
}

/// A commit whose bases name its written keys, mostly (each write's key once per write, so a
/// key written twice is based twice), at versions near the replica's.
fn commit(d: &mut Draw, txn: u64, attempt: u32) -> Commit {
    let ops: Vec<_> = (0..1 + d.below(3)).map(|i| (i as u16, op(d))).collect();
    let mut bases: Vec<(Bytes, u64)> = ops
        .iter()
        .filter(|(_, op)| op.is_write())
        .map(|(_, op)| (op.key().clone(), version(d)))
        .collect();
    match d.u8() % 8 {
        0 => bases.push((key(d), version(d))),
        1 => bases.dedup_by(|a, b| a.0 == b.0),
        _ => {}
    }
    Commit {
        txn,
        attempt,
        ops,
        bases,
    }
}
