//! A client (1Pipe's or OCC's) fed submissions, snapshots, answers built from the requests it
//! sent, stray messages, timers, send failures and process failures.

use super::{CLIENT, REPLICAS, SHARDS, STEPS_MAX, advance_ns, key, op, sender, value};
use crate::frames::{Draw, damage};
use onepipe_txkv::codec::{Message, Reply, SnapshotChunk, Status};
use onepipe_txkv::occ::OccMessage;
use onepipe_txkv::occ::codec::{
    AbortReply, CommitReply, CommitStatus, LockReply, ReadItem, ReadReply, ValidateReply,
};
use onepipe_txkv::{ClientEngine, Op, OpResult, Outcome, Txn};
use std::collections::{HashMap, HashSet, VecDeque};

/// Requests remembered to answer, and message ids to fail, at most.
const RECENT_MAX: usize = 16;

pub fn onepipe(d: &mut Draw, mut client: onepipe_txkv::Client) {
    drive(d, &mut client, onepipe_answer_to, check_onepipe);
}

pub fn occ(d: &mut Draw, mut client: onepipe_txkv::OccClient) {
    drive(d, &mut client, occ_answer_to, check_occ);
}

/// What the runtime and the servers did so far, as the client sees it.
#[derive(Default)]
struct World {
    now_ns: u64,
    /// Recent requests: (destination, bytes).
    sent: VecDeque<(u32, Vec<u8>)>,
    msg_ids: VecDeque<u64>,
    next_msg_id: u64,
    /// Outstanding transactions: their operation counts.
    submitted: HashMap<u64, usize>,
    snapshots: HashSet<u64>,
}

type Answer = fn(&mut Draw, u32, &[u8]) -> Vec<u8>;

/// How a client is driven: the answers its requests get, and the check of what it sends.
struct Driver {
    answer: Answer,
    check: fn(&[u8]),
}

fn drive<C: ClientEngine>(d: &mut Draw, client: &mut C, answer: Answer, check: fn(&[u8])) {
    let driver = Driver { answer, check };
    let mut w = World::default();
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        w.now_ns = advance_ns(d, w.now_ns);
        step(d, client, &mut w, &driver);
        flush(d, client, &mut w, driver.check);
        collect(client, &mut w);
        client.invariants();
    }
}

fn step<C: ClientEngine>(d: &mut Draw, client: &mut C, w: &mut World, driver: &Driver) {
    let answer = driver.answer;
    let now = w.now_ns;
    match d.u8() % 16 {
        0..=6 => {
            let Some((dst, request)) = w.sent.get(d.below(w.sent.len())).cloned() else {
                return;
            };
            let src = if d.u8() % 8 == 0 { sender(d) } else { dst };
            let payload = match d.u8() % 8 {
                0 => d.bytes(64),
                1 => {
                    let mut p = answer(d, dst, &request);
                    damage(d, &mut p);
                    p
                }
                _ => answer(d, dst, &request),
            };
            client.on_message(now, src, &payload);
        }
        7 => {
            let payload = if d.bool() {
                d.bytes(64)
            } else {
                w.sent.front().map(|s| s.1.clone()).unwrap_or_default()
            };
            client.on_message(now, sender(d), &payload);
        }
        8 | 9 => {
            let txn = Txn::new((0..d.below(5)).map(|_| op(d)).collect());
            let ops = txn.ops.len();
            if let Ok(id) = client.submit(now, txn) {
                assert!(
                    w.submitted.insert(id, ops).is_none(),
                    "transaction id {id} given twice"
                );
            }
        }
        10 => {
            if let Ok(id) = client.snapshot(now) {
                assert!(w.snapshots.insert(id), "snapshot id {id} given twice");
            }
        }
        11 | 12 => {
            if client.poll_timeout().is_some_and(|t| t <= now) || d.bool() {
                client.handle_timeout(now);
            }
        }
        13 | 14 => {
            let id = match w.msg_ids.get(d.below(w.msg_ids.len())) {
                Some(&id) if d.u8() % 8 != 0 => id,
                _ => d.number(16),
            };
            client.on_send_failure(now, id);
        }
        _ => client.on_process_failure(now, d.number(u64::from(CLIENT) + 2) as u32),
    }
}

/// Sends what the client queued, as the runtime does (now and then it cannot, and hands one
/// back), checking every message decodes and goes to a server.
fn flush<C: ClientEngine>(d: &mut Draw, client: &mut C, w: &mut World, check: fn(&[u8])) {
    while let Some(out) = client.poll_send() {
        if d.u8() % 16 == 0 {
            client.unsend(out);
            return;
        }
        for (dst, bytes) in &out.scatter {
            assert!(
                *dst < SHARDS * REPLICAS,
                "a request to process {dst}, not a server"
            );
            check(bytes);
            remember(&mut w.sent, (*dst, bytes.clone()));
        }
        w.next_msg_id += 1;
        client.on_sent(&out, w.next_msg_id);
        remember(&mut w.msg_ids, w.next_msg_id);
    }
}

fn remember<T>(recent: &mut VecDeque<T>, item: T) {
    if recent.len() == RECENT_MAX {
        recent.pop_front();
    }
    recent.push_back(item);
}

/// Each completion ends a transaction submitted and not ended yet, with a result per
/// operation if it committed; each snapshot one asked for, its pairs sorted.
fn collect<C: ClientEngine>(client: &mut C, w: &mut World) {
    while let Some(c) = client.poll_completion() {
        let ops = w.submitted.remove(&c.id);
        let ops = ops.unwrap_or_else(|| panic!("completion of {}, not outstanding", c.id));
        if let Outcome::Committed { results, .. } = &c.outcome {
            assert_eq!(results.len(), ops, "a commit's results are not one per operation");
        }
        assert!(
            c.return_ns >= c.call_ns,
            "a transaction returned before it was called"
        );
    }
    while let Some(s) = client.poll_snapshot() {
        assert!(w.snapshots.remove(&s.id), "snapshot {} not asked for", s.id);
        if let Ok((_, pairs)) = &s.outcome {
            assert!(
                pairs.is_sorted_by(|a, b| a.0 <= b.0),
                "a snapshot's pairs out of order"
            );
        }
    }
}

fn check_onepipe(bytes: &[u8]) {
    match Message::decode(bytes) {
        Ok(Message::Request(_) | Message::SnapshotRequest(_)) => {}
        other => panic!("a 1Pipe client sent {other:?}: {bytes:?}"),
    }
}

fn check_occ(bytes: &[u8]) {
    match OccMessage::decode(bytes) {
        Ok(
            OccMessage::Read(_)
            | OccMessage::Lock(_)
            | OccMessage::Validate(_)
            | OccMessage::Commit(_)
            | OccMessage::Abort(_),
        ) => {}
        other => panic!("an OCC client sent {other:?}: {bytes:?}"),
    }
}

/// The shard and replica server `dst` plays, mostly; another sometimes.
fn place(d: &mut Draw, dst: u32) -> (u16, u16) {
    match d.u8() % 16 {
        0 => (
            d.number(SHARDS as u64 + 1) as u16,
            d.number(REPLICAS as u64 + 1) as u16,
        ),
        _ => ((dst / REPLICAS) as u16, (dst % REPLICAS) as u16),
    }
}

/// The attempt an answer names: the request's mostly, a neighbour or anything sometimes.
fn attempt_near(d: &mut Draw, attempt: u32) -> u32 {
    match d.u8() % 8 {
        0 => attempt.wrapping_add(1),
        1 => attempt.wrapping_sub(1),
        2 => d.number(4) as u32,
        _ => attempt,
    }
}

/// A result that fits the operation mostly, any sometimes.
fn result_for(d: &mut Draw, op: &Op) -> OpResult {
    let any = d.u8() % 16 == 0;
    match op {
        Op::Get { .. } if !any => OpResult::Value(d.bool().then(|| value(d))),
        Op::Put { .. } if !any => OpResult::Done,
        Op::Del { .. } if !any => OpResult::Deleted(d.bool()),
        _ => match d.u8() % 4 {
            0 => OpResult::NotAnInteger,
            1 => OpResult::Overflow,
            2 => OpResult::Value(None),
            _ => OpResult::Integer(d.u8() as i64),
        },
    }
}

/// A result per operation with its index, mostly; one missing, one more, or a wrong index
/// sometimes.
fn results(d: &mut Draw, ops: &[(u16, Op)]) -> Vec<(u16, OpResult)> {
    let mut out: Vec<(u16, OpResult)> = ops.iter().map(|(i, op)| (*i, result_for(d, op))).collect();
    match d.u8() % 16 {
        0 => {
            out.pop();
        }
        1 => {
            let (index, extra) = (d.number(8) as u16, op(d));
            out.push((index, result_for(d, &extra)));
        }
        2 => {
            if let Some(r) = out.first_mut() {
                r.0 = d.number(8) as u16;
            }
        }
        _ => {}
    }
    out
}

/// A replica's answer to `request` (a 1Pipe request or snapshot request sent to `dst`).
pub fn onepipe_answer_to(d: &mut Draw, dst: u32, request: &[u8]) -> Vec<u8> {
    let (shard, replica) = place(d, dst);
    let m = match Message::decode(request) {
        Ok(Message::Request(req)) => Message::Reply(Reply {
            txn: req.txn,
            attempt: attempt_near(d, req.attempt),
            shard,
            replica,
            status: match d.u8() % 16 {
                0 => Status::Duplicate,
                1 => Status::Late,
                2 => Status::Forgotten,
                _ => Status::Applied,
            },
            ts: d.number(16),
            checksum: d.below(2) as u64,
            results: results(d, &req.ops),
        }),
        Ok(Message::SnapshotRequest(req)) => {
            let count = match d.u8() % 8 {
                0 => d.number(4) as u32,
                _ => 1 + d.below(2) as u32,
            };
            let index = match d.u8() % 8 {
                0 => d.number(4) as u32,
                _ => d.below(count as usize) as u32,
            };
            Message::SnapshotChunk(SnapshotChunk {
                id: req.id,
                shard,
                replica,
                ts: d.number(2).wrapping_add(1),
                index,
                count,
                pairs: (0..d.below(3)).map(|_| (key(d), value(d))).collect(),
            })
        }
        _ => return d.bytes(40),
    };
    m.encode()
}

/// A replica's answer to `request` (an OCC request sent to `dst`).
pub fn occ_answer_to(d: &mut Draw, dst: u32, request: &[u8]) -> Vec<u8> {
    let (shard, replica) = place(d, dst);
    let ok = d.u8() % 8 != 0;
    let Ok(request) = OccMessage::decode(request) else {
        return d.bytes(40);
    };
    let m = match request {
        OccMessage::Read(m) => OccMessage::ReadReply(ReadReply {
            txn: m.txn,
            attempt: attempt_near(d, m.attempt),
            shard,
            read_ns: d.number(1 << 20),
            items: read_items(d, m.keys.len()),
        }),
        OccMessage::Lock(m) => OccMessage::LockReply(LockReply {
            txn: m.txn,
            attempt: attempt_near(d, m.attempt),
            shard,
            ok,
            versions: m.items.iter().map(|_| d.number(4)).collect(),
        }),
        OccMessage::Validate(m) => OccMessage::ValidateReply(ValidateReply {
            txn: m.txn,
            attempt: attempt_near(d, m.attempt),
            shard,
            ok,
        }),
        OccMessage::Commit(m) => OccMessage::CommitReply(CommitReply {
            txn: m.txn,
            attempt: attempt_near(d, m.attempt),
            shard,
            replica,
            status: match d.u8() % 16 {
                0 => CommitStatus::Duplicate,
                1 => CommitStatus::Forgotten,
                2 => CommitStatus::Refused,
                _ => CommitStatus::Applied,
            },
            results: results(d, &m.ops),
        }),
        OccMessage::Abort(m) => OccMessage::AbortReply(AbortReply {
            txn: m.txn,
            attempt: attempt_near(d, m.attempt),
            shard,
        }),
        _ => return d.bytes(40),
    };
    m.encode()
}

/// An item per key read, mostly; one fewer or one more sometimes.
fn read_items(d: &mut Draw, keys: usize) -> Vec<ReadItem> {
    let n = match d.u8() % 16 {
        0 => keys.saturating_sub(1),
        1 => keys + 1,
        _ => keys,
    };
    (0..n)
        .map(|_| ReadItem {
            value: d.bool().then(|| value(d)),
            version: d.number(4),
            locked: d.u8() % 8 == 0,
        })
        .collect()
}
