//! The checks of [`check_all`](crate::check_all) (and [`check_no_loss`](crate::check_no_loss)),
//! run online over logs that arrive in pieces, in memory that does not grow with the run.
//!
//! A long run (`onepipe bench soak`) cannot keep every process's log for the batch checkers.
//! Here each process's events are pushed in program order, in chunks, with the processes'
//! chunks interleaved in any order; every event is judged once and forgotten, except:
//!
//! - per process: its last delivery (total order), its highest delivered timestamp and last send
//!   timestamp (causality), and the timestamps of its last [`SCATTERINGS_KEPT`] scatterings (one
//!   timestamp per scattering);
//! - per (sender, receiver) pair: the sends not yet delivered, plus the last [`HISTORY_SENDS`]
//!   sends behind the pair's FIFO cursor (so that a late or repeated delivery of one of them is
//!   still told apart as a FIFO reorder or a duplicate), and the deliveries whose send has not
//!   been pushed yet (the receiver's chunk came first).
//!
//! Total order, causality and the FIFO, no-creation and no-duplicates rules are those of the
//! batch checks, and a log that breaks one breaks it here too. What is bounded changes only how
//! a few violations are labelled, never whether there is one:
//! - a delivery whose send is more than [`HISTORY_SENDS`] behind its pair's cursor, or was never
//!   pushed within [`GRACE_ROUNDS`] rounds ([`OnlineChecker::end_round`]), is reported as
//!   no_creation (`NoMatchingSend`), where the batch check may call it a FIFO reorder or a
//!   duplicate (it is one of the three either way: a delivery behind the cursor is out of FIFO
//!   order);
//! - a second delivery of a message that matches no send is reported once, as no_creation;
//! - with no_loss on, a send that leaves the history undelivered is a loss at once, even if a
//!   FIFO-breaking delivery of it comes later (then reported as no_creation as well);
//! - two sends of one scattering more than [`SCATTERINGS_KEPT`] scatterings apart are not
//!   compared (the runtimes log a scattering's sends together);
//! - a pair with more than [`SENDS_AHEAD_MAX`] sends undelivered stops tracking the oldest ones
//!   and counts them in [`OnlineStats::sends_given_up`]: a run that reports any is not fully
//!   checked.

use std::collections::VecDeque;

use crate::index::FastMap;
use crate::log::{Event, MsgId, ProcessId};
use crate::report::{CheckResult, Report};
use crate::violation::{Rule, Violation, ViolationKind};

/// Sends kept per pair behind its FIFO cursor.
pub const HISTORY_SENDS: usize = 64;
/// Sends kept per pair ahead of its FIFO cursor (undelivered); past this the oldest are given up.
pub const SENDS_AHEAD_MAX: usize = 1 << 16;
/// Scatterings per sender whose timestamp is remembered for the one-timestamp-per-scattering rule.
pub const SCATTERINGS_KEPT: usize = 1024;
/// Rounds a delivery waits for its send to be pushed before it is judged a creation.
pub const GRACE_ROUNDS: u64 = 3;

/// What the checker has seen, and what it holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OnlineStats {
    pub events: u64,
    pub sends: u64,
    pub deliveries: u64,
    /// Sends that left the checker never delivered (best effort drops them; with no_loss on,
    /// each is also a violation).
    pub sends_undelivered: u64,
    /// Sends no longer tracked because their pair had [`SENDS_AHEAD_MAX`] undelivered.
    pub sends_given_up: u64,
    /// Sends and deliveries held right now (the checker's memory, in records).
    pub records_held: u64,
}

#[derive(Clone, Copy)]
struct SendRecord {
    msg_id: MsgId,
    ts_ns: u64,
    /// The send's index in its sender's log.
    index: usize,
    deliveries: u32,
    first_delivery_index: usize,
}

#[derive(Clone, Copy)]
struct Delivery {
    index: usize,
    ts_ns: u64,
    msg_id: MsgId,
    /// The round it was pushed in.
    round: u64,
}

#[derive(Default)]
struct Pair {
    /// Sends in send order; `sends[i]` has FIFO rank `front_rank + i`.
    sends: VecDeque<SendRecord>,
    front_rank: u64,
    /// Rank just after the last matched delivery (as the batch check's cursor).
    cursor: u64,
    /// `(event index, msg_id, rank)` of the receiver's last matched delivery from this sender.
    last: Option<(usize, MsgId, u64)>,
    /// Deliveries not matched yet, in delivery order: while any waits, later ones wait behind it.
    waiting: VecDeque<Delivery>,
}

impl Pair {
    /// How many sends past the cursor to look at before scanning everything held.
    const NEAR: usize = 16;

    /// The rank of the first held send of `msg_id`, looking near the cursor first.
    fn find(&self, msg_id: MsgId) -> Option<u64> {
        let cursor = self.cursor.saturating_sub(self.front_rank) as usize;
        let near =
            (cursor..self.sends.len().min(cursor + Self::NEAR)).find(|&i| self.sends[i].msg_id == msg_id);
        let at = near.or_else(|| self.sends.iter().position(|s| s.msg_id == msg_id))?;
        Some(self.front_rank + at as u64)
    }
}

#[derive(Default)]
struct Process {
    /// Events pushed so far: the next event's index.
    next_index: usize,
    /// `(index, ts_ns, src, msg_id)` of the last delivery.
    last_delivery: Option<(usize, u64, ProcessId, MsgId)>,
    max_delivered: Option<(usize, u64)>,
    last_send: Option<(usize, u64)>,
    /// msg_id -> (first send index, ts_ns) of recent scatterings, oldest first in `scatter_order`.
    scatterings: FastMap<MsgId, (usize, u64)>,
    scatter_order: VecDeque<MsgId>,
}

/// The online checker: push each process's events in order, call
/// [`end_round`](OnlineChecker::end_round) now and then (a delivery waits [`GRACE_ROUNDS`]
/// rounds for its send), and [`finish`](OnlineChecker::finish) at the end.
pub struct OnlineChecker {
    processes: u32,
    no_loss: bool,
    process: Vec<Process>,
    /// Indexed `src * processes + dst`.
    pairs: Vec<Pair>,
    round: u64,
    report: Report,
    no_loss_result: CheckResult,
    stats: OnlineStats,
}

impl OnlineChecker {
    /// Processes `0..processes` each have a log; `no_loss` checks every send is delivered once
    /// (the reliable service).
    pub fn new(processes: u32, no_loss: bool) -> OnlineChecker {
        let n = processes as usize;
        OnlineChecker {
            processes,
            no_loss,
            process: (0..n).map(|_| Process::default()).collect(),
            pairs: (0..n * n).map(|_| Pair::default()).collect(),
            round: 0,
            report: Report::default(),
            no_loss_result: CheckResult::default(),
            stats: OnlineStats::default(),
        }
    }

    /// The five checks of `check_all` so far.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// no_loss so far (`None` when off).
    pub fn no_loss(&self) -> Option<&CheckResult> {
        self.no_loss.then_some(&self.no_loss_result)
    }

    /// Violations of every check so far.
    pub fn violations(&self) -> u64 {
        let r = &self.report;
        [
            &r.total_order,
            &r.fifo,
            &r.causality,
            &r.no_duplicates,
            &r.no_creation,
            &self.no_loss_result,
        ]
        .iter()
        .map(|c| c.count)
        .sum()
    }

    pub fn stats(&self) -> OnlineStats {
        let held: usize = self.pairs.iter().map(|p| p.sends.len() + p.waiting.len()).sum();
        OnlineStats {
            records_held: held as u64,
            ..self.stats
        }
    }

    fn sink(&mut self, v: Violation) {
        let r = &mut self.report;
        match v.rule() {
            Rule::TotalOrder => r.total_order.push(v),
            Rule::Fifo => r.fifo.push(v),
            Rule::Causality => r.causality.push(v),
            Rule::NoDuplicates => r.no_duplicates.push(v),
            Rule::NoCreation => r.no_creation.push(v),
            Rule::NoLoss => self.no_loss_result.push(v),
            Rule::Atomicity => unreachable!("the online checker does not check atomicity"),
        }
    }

    /// The next events of `process`'s log, in program order.
    ///
    /// # Panics
    /// If `process` is not below the count given to [`OnlineChecker::new`].
    pub fn push(&mut self, process: ProcessId, events: &[Event]) {
        assert!(process < self.processes, "process {process} has no log here");
        for &event in events {
            let index = self.process[process as usize].next_index;
            self.process[process as usize].next_index += 1;
            self.stats.events += 1;
            match event {
                Event::Send { ts_ns, dst, msg_id } => self.on_send(process, index, ts_ns, dst, msg_id),
                Event::Deliver { ts_ns, src, msg_id } => self.on_deliver(process, index, ts_ns, src, msg_id),
            }
        }
    }

    fn on_send(&mut self, process: ProcessId, index: usize, ts_ns: u64, dst: ProcessId, msg_id: MsgId) {
        self.stats.sends += 1;
        let mut found = Vec::new();
        let p = &mut self.process[process as usize];
        if let Some((delivered_index, delivered_ts_ns)) = p.max_delivered
            && ts_ns <= delivered_ts_ns
        {
            found.push(ViolationKind::SendNotAfterDelivery {
                dst,
                msg_id,
                ts_ns,
                delivered_index,
                delivered_ts_ns,
            });
        }
        if let Some((prev_index, prev_ts_ns)) = p.last_send
            && ts_ns < prev_ts_ns
        {
            found.push(ViolationKind::SendTsDecreased {
                dst,
                msg_id,
                ts_ns,
                prev_index,
                prev_ts_ns,
            });
        }
        p.last_send = Some((index, ts_ns));
        match p.scatterings.get(&msg_id) {
            Some(&(first_index, first_ts_ns)) if first_ts_ns != ts_ns => {
                found.push(ViolationKind::ScatterTsMismatch {
                    dst,
                    msg_id,
                    ts_ns,
                    first_index,
                    first_ts_ns,
                });
            }
            Some(_) => {}
            None => {
                p.scatterings.insert(msg_id, (index, ts_ns));
                p.scatter_order.push_back(msg_id);
                if p.scatter_order.len() > SCATTERINGS_KEPT
                    && let Some(old) = p.scatter_order.pop_front()
                {
                    p.scatterings.remove(&old);
                }
            }
        }
        for kind in found {
            self.sink(Violation { process, index, kind });
        }
        if dst >= self.processes {
            // No log to deliver it: the batch no_loss counts it undelivered.
            self.stats.sends_undelivered += 1;
            if self.no_loss {
                let kind = ViolationKind::NotDeliveredOnce {
                    dst,
                    msg_id,
                    deliveries: 0,
                };
                self.sink(Violation { process, index, kind });
            }
            return;
        }
        let pair = self.pair_index(process, dst);
        self.pairs[pair].sends.push_back(SendRecord {
            msg_id,
            ts_ns,
            index,
            deliveries: 0,
            first_delivery_index: 0,
        });
        self.match_waiting(pair, false);
        self.trim(pair);
    }

    fn on_deliver(&mut self, process: ProcessId, index: usize, ts_ns: u64, src: ProcessId, msg_id: MsgId) {
        self.stats.deliveries += 1;
        let p = &mut self.process[process as usize];
        let found = p
            .last_delivery
            .and_then(|prev| crate::order::out_of_order(prev, ts_ns, src, msg_id));
        p.last_delivery = Some((index, ts_ns, src, msg_id));
        if p.max_delivered.is_none_or(|(_, max)| ts_ns > max) {
            p.max_delivered = Some((index, ts_ns));
        }
        if let Some(kind) = found {
            self.sink(Violation { process, index, kind });
        }
        if src >= self.processes {
            let kind = ViolationKind::NoSenderLog { src, msg_id };
            self.sink(Violation { process, index, kind });
            return;
        }
        let pair = self.pair_index(src, process);
        self.pairs[pair].waiting.push_back(Delivery {
            index,
            ts_ns,
            msg_id,
            round: self.round,
        });
        self.match_waiting(pair, false);
        self.trim(pair);
    }

    fn pair_index(&self, src: ProcessId, dst: ProcessId) -> usize {
        src as usize * self.processes as usize + dst as usize
    }

    /// Matches the pair's waiting deliveries in order while their sends are held; with `judge`,
    /// a front delivery whose grace is over (or every one, at the end) is judged a creation.
    fn match_waiting(&mut self, pair: usize, judge: bool) {
        while let Some(&d) = self.pairs[pair].waiting.front() {
            let rank = self.pairs[pair].find(d.msg_id);
            let expired = judge && d.round + GRACE_ROUNDS <= self.round;
            if rank.is_none() && !expired {
                return;
            }
            self.pairs[pair].waiting.pop_front();
            let (src, dst) = self.pair_ends(pair);
            let violation = |kind| Violation {
                process: dst,
                index: d.index,
                kind,
            };
            let Some(rank) = rank else {
                self.sink(violation(ViolationKind::NoMatchingSend {
                    src,
                    msg_id: d.msg_id,
                    ts_ns: d.ts_ns,
                }));
                continue;
            };
            let p = &mut self.pairs[pair];
            let send = &mut p.sends[(rank - p.front_rank) as usize];
            let mut found = Vec::new();
            if send.ts_ns != d.ts_ns {
                found.push(ViolationKind::TsMismatch {
                    src,
                    msg_id: d.msg_id,
                    ts_ns: d.ts_ns,
                    sent_ts_ns: send.ts_ns,
                });
            }
            if send.deliveries == 0 {
                send.first_delivery_index = d.index;
            } else {
                found.push(ViolationKind::Duplicate {
                    src,
                    msg_id: d.msg_id,
                    first_index: send.first_delivery_index,
                });
            }
            send.deliveries = send.deliveries.saturating_add(1);
            if let Some((prev_index, prev_msg_id, prev_rank)) = p.last
                && rank < prev_rank
            {
                found.push(ViolationKind::FifoReorder {
                    src,
                    msg_id: d.msg_id,
                    send_rank: rank,
                    prev_index,
                    prev_msg_id,
                    prev_send_rank: prev_rank,
                });
            }
            p.last = Some((d.index, d.msg_id, rank));
            p.cursor = rank + 1;
            for kind in found {
                self.sink(violation(kind));
            }
        }
    }

    fn pair_ends(&self, pair: usize) -> (ProcessId, ProcessId) {
        let n = self.processes as usize;
        ((pair / n) as ProcessId, (pair % n) as ProcessId)
    }

    /// Forgets sends more than [`HISTORY_SENDS`] behind the cursor, and the oldest past
    /// [`SENDS_AHEAD_MAX`] ahead of it.
    fn trim(&mut self, pair: usize) {
        loop {
            let p = &self.pairs[pair];
            let behind = p.cursor.saturating_sub(p.front_rank) as usize;
            let ahead = p.sends.len().saturating_sub(behind);
            if behind > HISTORY_SENDS && !p.sends.is_empty() {
                self.retire_front(pair);
            } else if ahead > SENDS_AHEAD_MAX {
                self.stats.sends_given_up += 1;
                self.retire_front(pair);
            } else {
                return;
            }
        }
    }

    fn retire_front(&mut self, pair: usize) {
        let (src, dst) = self.pair_ends(pair);
        let p = &mut self.pairs[pair];
        let Some(send) = p.sends.pop_front() else {
            return;
        };
        p.front_rank += 1;
        p.cursor = p.cursor.max(p.front_rank);
        if send.deliveries == 0 {
            self.stats.sends_undelivered += 1;
        }
        if self.no_loss && send.deliveries != 1 {
            let kind = ViolationKind::NotDeliveredOnce {
                dst,
                msg_id: send.msg_id,
                deliveries: send.deliveries,
            };
            self.sink(Violation {
                process: src,
                index: send.index,
                kind,
            });
        }
    }

    /// Ends a round: deliveries pushed [`GRACE_ROUNDS`] rounds ago whose send has not come are
    /// judged creations (call it at a pace at which every send is pushed within that many
    /// rounds of its delivery).
    pub fn end_round(&mut self) {
        self.round += 1;
        for pair in 0..self.pairs.len() {
            if !self.pairs[pair].waiting.is_empty() {
                self.match_waiting(pair, true);
            }
        }
    }

    /// Every log is complete: judges every waiting delivery and every send still held.
    pub fn finish(&mut self) {
        self.round = u64::MAX;
        for pair in 0..self.pairs.len() {
            self.match_waiting(pair, true);
            while !self.pairs[pair].sends.is_empty() {
                self.retire_front(pair);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(ts_ns: u64, dst: u32, msg_id: u64) -> Event {
        Event::Send { ts_ns, dst, msg_id }
    }
    fn deliver(ts_ns: u64, src: u32, msg_id: u64) -> Event {
        Event::Deliver { ts_ns, src, msg_id }
    }

    /// Process 0 sends `count` messages to 1, which delivers all but every `lose_every`-th.
    fn stream(checker: &mut OnlineChecker, count: u64, lose_every: u64) {
        for k in 0..count {
            checker.push(0, &[send(10 + k, 1, k)]);
            if k % lose_every != lose_every - 1 {
                checker.push(1, &[deliver(10 + k, 0, k)]);
            }
            if k % 1000 == 0 {
                checker.end_round();
            }
        }
    }

    #[test]
    fn a_long_lossy_stream_is_held_in_bounded_memory_and_its_losses_counted() {
        let mut c = OnlineChecker::new(2, false);
        stream(&mut c, 100_000, 10);
        assert!(
            c.stats().records_held <= HISTORY_SENDS as u64 + 1,
            "{:?}",
            c.stats()
        );
        c.finish();
        assert_eq!(c.violations(), 0, "{}", c.report());
        assert_eq!(c.stats().sends_undelivered, 10_000);
        assert_eq!(c.stats().records_held, 0);

        // The same losses break no_loss, each once.
        let mut c = OnlineChecker::new(2, true);
        stream(&mut c, 1_000, 10);
        c.finish();
        assert_eq!(c.no_loss().map(|r| r.count), Some(100));
    }

    #[test]
    fn a_delivery_before_its_send_waits_for_it_and_one_that_never_comes_is_a_creation() {
        let mut c = OnlineChecker::new(2, false);
        c.push(1, &[deliver(5, 0, 7)]);
        c.end_round();
        c.push(0, &[send(5, 1, 7)]);
        assert_eq!((c.violations(), c.stats().records_held), (0, 1));

        c.push(1, &[deliver(6, 0, 8)]);
        for _ in 0..GRACE_ROUNDS - 1 {
            c.end_round();
        }
        assert_eq!(c.violations(), 0, "still within its grace");
        c.end_round();
        assert_eq!(c.report().no_creation.count, 1, "{}", c.report());
        c.finish();
        assert_eq!(c.violations(), 1);
    }

    #[test]
    fn a_delivery_repeated_within_the_history_is_a_duplicate_and_far_behind_still_a_violation() {
        let mut c = OnlineChecker::new(2, false);
        stream(&mut c, 10, 1_000);
        c.push(1, &[deliver(10 + 5, 0, 5)]);
        assert_eq!(c.report().no_duplicates.count, 1);
        assert_eq!(c.report().fifo.count, 1);
        assert_eq!(c.report().total_order.count, 1);

        let mut c = OnlineChecker::new(2, false);
        stream(&mut c, 1_000, 1_000);
        c.push(1, &[deliver(10, 0, 0)]);
        c.finish();
        assert_eq!(c.report().no_creation.count, 1, "{}", c.report());
    }

    #[test]
    fn causality_and_scatter_timestamps_are_checked_as_they_come() {
        let mut c = OnlineChecker::new(3, false);
        c.push(0, &[send(10, 1, 1), send(11, 2, 1)]);
        assert_eq!(c.report().total_order.count, 1, "one scattering, two timestamps");
        c.push(1, &[deliver(10, 0, 1), send(9, 2, 1)]);
        assert_eq!(c.report().causality.count, 1);
        c.push(2, &[deliver(11, 0, 1), deliver(9, 1, 1)]);
        assert_eq!(c.report().total_order.count, 2);
    }
}
