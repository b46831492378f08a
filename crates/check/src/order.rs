//! total_order.

use std::cmp::Ordering;

use crate::index::{FastMap, for_each_delivery};
use crate::log::{Event, MsgId, ProcessId, ProcessLog};
use crate::violation::{Violation, ViolationKind};

/// total_order: every process delivers in strictly increasing `(ts_ns, src)` order, and all
/// destinations of one scattering (same sender and `msg_id`) carry the same `ts_ns`.
///
/// Why the per-process check suffices for pairwise agreement: the key `(ts_ns, src)` is a
/// function of the message alone — the scatter check here makes the sender use one `ts_ns` per
/// message, and no_creation makes every receiver log that `ts_ns`. So any two processes that both
/// deliver messages `a` and `b` compare the same two keys, and each delivers `a` first iff
/// `key(a) < key(b)`; they cannot disagree. Checking consecutive deliveries is linear, whereas
/// comparing every pair of receivers would be quadratic.
///
/// Equal keys: the same message delivered twice (same `msg_id`) is left to no_duplicates; two
/// different messages with one key are reported here as [`ViolationKind::TiedKey`], since the
/// key no longer decides their order. A duplicate that is not adjacent to its first delivery
/// usually also breaks the order and is then reported by both checks.
pub fn check_total_order(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut out = Vec::new();
    total_order(logs, &mut |v| out.push(v));
    out
}

/// How a delivery of (`ts_ns`, `src`, `msg_id`) breaks the order after the previous delivery
/// (its index, timestamp, source and message), if it does: below it, or tied with another
/// message's key.
pub(crate) fn out_of_order(
    (prev_index, prev_ts_ns, prev_src, prev_msg_id): (usize, u64, ProcessId, MsgId),
    ts_ns: u64,
    src: ProcessId,
    msg_id: MsgId,
) -> Option<ViolationKind> {
    match (ts_ns, src).cmp(&(prev_ts_ns, prev_src)) {
        Ordering::Less => Some(ViolationKind::OutOfOrder {
            ts_ns,
            src,
            msg_id,
            prev_index,
            prev_ts_ns,
            prev_src,
            prev_msg_id,
        }),
        Ordering::Equal if msg_id != prev_msg_id => Some(ViolationKind::TiedKey {
            ts_ns,
            src,
            msg_id,
            prev_index,
            prev_msg_id,
        }),
        _ => None,
    }
}

pub(crate) fn total_order(logs: &[ProcessLog], sink: &mut impl FnMut(Violation)) {
    let mut first_send: FastMap<MsgId, (usize, u64)> = FastMap::default();
    for log in logs {
        let process = log.process;
        let mut prev: Option<(usize, u64, ProcessId, MsgId)> = None;
        for_each_delivery(log, |index, ts_ns, src, msg_id| {
            if let Some(kind) = prev.and_then(|prev| out_of_order(prev, ts_ns, src, msg_id)) {
                sink(Violation { process, index, kind });
            }
            prev = Some((index, ts_ns, src, msg_id));
        });

        first_send.clear();
        for (index, event) in log.events.iter().enumerate() {
            let Event::Send { ts_ns, dst, msg_id } = *event else {
                continue;
            };
            let &mut (first_index, first_ts_ns) = first_send.entry(msg_id).or_insert((index, ts_ns));
            if first_ts_ns != ts_ns {
                let kind = ViolationKind::ScatterTsMismatch {
                    dst,
                    msg_id,
                    ts_ns,
                    first_index,
                    first_ts_ns,
                };
                sink(Violation { process, index, kind });
            }
        }
    }
}
