//! fifo, no_creation and no_loss: matching each delivery to the send it came from.
//!
//! Sends are grouped per (sender, receiver) pair in send order, and each pair keeps a cursor just
//! past its last matched delivery. Deliveries normally follow send order, so a match is found by
//! a short forward scan over memory read sequentially; only deliveries outside that window fall
//! back to a per-pair hash map, built on first need. A single global map keyed by
//! `(sender, receiver, msg_id)` was ~10x slower on tens of millions of events (a cache and TLB
//! miss per lookup).

use crate::index::{FastMap, FastSet, for_each_delivery, for_each_ranked_send};
use crate::log::{Event, MsgId, ProcessId, ProcessLog};
use crate::violation::{Violation, ViolationKind};

/// The sends of one sender to one receiver.
#[derive(Default)]
struct Pair {
    /// `(msg_id, ts_ns)` per send in send order; the position is the send's FIFO rank.
    sends: Vec<(MsgId, u64)>,
    /// Rank just after the last matched delivery, where the next one most likely is.
    cursor: usize,
    /// msg_id -> rank of its first send; built only when a delivery is not found near `cursor`.
    by_id: Option<FastMap<MsgId, usize>>,
    /// `(event index, msg_id, rank)` of the receiver's last matched delivery from this sender.
    last: Option<(usize, MsgId, usize)>,
    /// Deliveries per rank; only allocated by no_loss.
    deliveries: Vec<u32>,
}

impl Pair {
    /// How many sends past the cursor to scan before consulting the map (covers short bursts
    /// of loss; longer ones cost one hash lookup).
    const WINDOW: usize = 16;

    /// The rank of the send `msg_id` matches. The model assumes a sender logs each
    /// `(dst, msg_id)` once; if it logs it twice, matching is best-effort.
    fn find(&mut self, msg_id: MsgId) -> Option<usize> {
        let end = self.sends.len().min(self.cursor + Self::WINDOW);
        let near = self.sends[self.cursor..end]
            .iter()
            .position(|&(id, _)| id == msg_id);
        let rank = match near {
            Some(offset) => self.cursor + offset,
            None => {
                let sends = &self.sends;
                let by_id = self.by_id.get_or_insert_with(|| {
                    let mut map = FastMap::with_capacity_and_hasher(sends.len(), Default::default());
                    for (rank, &(id, _)) in sends.iter().enumerate() {
                        map.entry(id).or_insert(rank);
                    }
                    map
                });
                *by_id.get(&msg_id)?
            }
        };
        self.cursor = rank + 1;
        Some(rank)
    }
}

struct SendIndex {
    /// Keyed by `(sender, receiver)`.
    pairs: FastMap<(ProcessId, ProcessId), Pair>,
    /// Processes that have a log, even an empty one.
    processes: FastSet<ProcessId>,
}

impl SendIndex {
    fn build(logs: &[ProcessLog]) -> Self {
        let mut pairs: FastMap<(ProcessId, ProcessId), Pair> = FastMap::default();
        let mut processes = FastSet::default();
        let mut per_dst: FastMap<ProcessId, usize> = FastMap::default();
        for log in logs {
            processes.insert(log.process);
            // Reserve exactly: doubling growth would briefly hold 1.5-3x the sends.
            per_dst.clear();
            for event in &log.events {
                if let Event::Send { dst, .. } = *event {
                    *per_dst.entry(dst).or_insert(0) += 1;
                }
            }
            for (&dst, &n) in &per_dst {
                pairs
                    .entry((log.process, dst))
                    .or_default()
                    .sends
                    .reserve_exact(n);
            }
            for event in &log.events {
                if let Event::Send { ts_ns, dst, msg_id } = *event {
                    if let Some(pair) = pairs.get_mut(&(log.process, dst)) {
                        pair.sends.push((msg_id, ts_ns));
                    }
                }
            }
        }
        SendIndex { pairs, processes }
    }
}

/// fifo: for each (sender, receiver) pair, the receiver delivers the sender's messages in the
/// order the sender logged its sends to that receiver. Undelivered (lost) messages may be
/// skipped; deliveries with no matching send are left to no_creation, and a repeat of the
/// previous delivery to no_duplicates.
pub fn check_fifo(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut out = Vec::new();
    fifo_and_creation(logs, &mut |v| out.push(v), &mut |_| {});
    out
}

/// no_creation: every delivery of `(src, msg_id)` at `p` matches a send of `msg_id` to `p` in
/// `src`'s log with the same `ts_ns`; a `src` without a log is a violation too.
pub fn check_no_creation(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut out = Vec::new();
    fifo_and_creation(logs, &mut |_| {}, &mut |v| out.push(v));
    out
}

/// Both checks in one pass, since both need each delivery's matching send.
pub(crate) fn fifo_and_creation(
    logs: &[ProcessLog],
    fifo: &mut impl FnMut(Violation),
    creation: &mut impl FnMut(Violation),
) {
    let mut index = SendIndex::build(logs);
    for log in logs {
        let process = log.process;
        for_each_delivery(log, |at, ts_ns, src, msg_id| {
            let violation = |kind| Violation {
                process,
                index: at,
                kind,
            };
            let Some(pair) = index.pairs.get_mut(&(src, process)) else {
                creation(violation(if index.processes.contains(&src) {
                    ViolationKind::NoMatchingSend { src, msg_id, ts_ns }
                } else {
                    ViolationKind::NoSenderLog { src, msg_id }
                }));
                return;
            };
            let Some(rank) = pair.find(msg_id) else {
                creation(violation(ViolationKind::NoMatchingSend { src, msg_id, ts_ns }));
                return;
            };
            let sent_ts_ns = pair.sends[rank].1;
            if sent_ts_ns != ts_ns {
                creation(violation(ViolationKind::TsMismatch {
                    src,
                    msg_id,
                    ts_ns,
                    sent_ts_ns,
                }));
            }
            if let Some((prev_index, prev_msg_id, prev_rank)) = pair.last {
                if rank < prev_rank {
                    fifo(violation(ViolationKind::FifoReorder {
                        src,
                        msg_id,
                        send_rank: rank as u64,
                        prev_index,
                        prev_msg_id,
                        prev_send_rank: prev_rank as u64,
                    }));
                }
            }
            pair.last = Some((at, msg_id, rank));
        });
    }
}

/// no_loss: every send is delivered by its `dst` exactly once. Violations sit at the sender's
/// send event. Meant for the reliable service, so it is not part of [`check_all`](crate::check_all).
pub fn check_no_loss(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut index = SendIndex::build(logs);
    for pair in index.pairs.values_mut() {
        pair.deliveries = vec![0; pair.sends.len()];
    }
    for log in logs {
        for_each_delivery(log, |_, _, src, msg_id| {
            let Some(pair) = index.pairs.get_mut(&(src, log.process)) else {
                return;
            };
            if let Some(rank) = pair.find(msg_id) {
                pair.deliveries[rank] = pair.deliveries[rank].saturating_add(1);
            }
        });
    }
    let mut out = Vec::new();
    for log in logs {
        let process = log.process;
        for_each_ranked_send(log, |at, _, dst, msg_id, rank| {
            let Some(pair) = index.pairs.get(&(process, dst)) else {
                return;
            };
            let deliveries = pair.deliveries[rank as usize];
            if deliveries != 1 {
                let kind = ViolationKind::NotDeliveredOnce {
                    dst,
                    msg_id,
                    deliveries,
                };
                out.push(Violation {
                    process,
                    index: at,
                    kind,
                });
            }
        });
    }
    out
}
