//! The coordinator (thesis Fig. 5.3, corrected; Phase 1 in the switch as in Partitioned Paxos):
//! per partition, the next instance and the round it won in Phase 1. A request becomes a 2A
//! stamped with both, one copy per acceptor.
//!
//! Phase 1 is pre-run on ranges of instances (module `phase1`): when the coordinator starts (or a
//! backup takes over), for the acceptors' whole window from the floor; then, as TRIM moves the
//! floor, for each next range before the prepared instances run out. A range's votes are
//! proposed again at the coordinator's round (re-running a decided instance cannot change its
//! value), and the instances below the highest vote that have none get a no-op (an empty
//! value), so that learners, who deliver in instance order, are never stuck behind a hole the
//! old coordinator left. A learner's REINIT runs one instance again the same way.
//!
//! The thesis's coordinator stamps round 0 and increments before it writes (so its first
//! instance is `reg_inst + 1`); ours stamps the round it won and starts at the floor.

mod phase1;
#[cfg(test)]
mod tests;

use crate::acceptor::quorum_floor;
use onepipe_wire::paxos::{Addr, Message, MsgType, flags};
use onepipe_wire::{Duration, Instant};
use phase1::{Attempt, Kind, Progress};
use std::collections::VecDeque;

/// Rounds are `counter << 8 | owner`: coordinators with distinct owners never use one round.
pub const OWNER_BITS: u32 = 8;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorConfig {
    pub me: Addr,
    /// The low byte of this coordinator's rounds; distinct per coordinator.
    pub owner: u8,
    pub acceptors: Vec<Addr>,
    /// Who may TRIM (learner `swid` is its index here) and REINIT.
    pub learners: Vec<Addr>,
    pub trim_quorum: usize,
    pub partitions: u16,
    /// The acceptors' slots per partition.
    pub window: u32,
    /// Instances per Phase 1 range.
    pub range: u32,
    pub phase1_timeout: Duration,
    /// Requests held per partition while Phase 1 runs; more are dropped (the proposer retries).
    pub held_max: usize,
    /// REINITs running at once per partition.
    pub reinits_max: usize,
    /// A backup starts inactive and takes over on its first request (thesis 6.x: proposers
    /// turn to it after their retries to the primary fail).
    pub active: bool,
}

impl CoordinatorConfig {
    pub fn quorum(&self) -> usize {
        self.acceptors.len() / 2 + 1
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoordinatorCounters {
    pub requests: u64,
    /// 2As sent for requests (one per request, whatever the acceptor count).
    pub proposed: u64,
    /// Votes found by Phase 1 and proposed again.
    pub reproposed: u64,
    pub noops: u64,
    pub phase1_ranges: u64,
    pub phase1_retries: u64,
    pub reinits: u64,
    pub takeovers: u64,
    /// Requests dropped: Phase 1 not done and the hold full, or the window full.
    pub not_ready: u64,
    pub refused_sender: u64,
    pub malformed: u64,
    /// Rounds ran out (2^24 per coordinator).
    pub rounds_exhausted: u64,
}

/// A held request's value and the partition it is for.
struct Held {
    value: Vec<u8>,
}

struct Partition {
    /// Next instance to stamp.
    next: u64,
    /// Instances below this are prepared (Phase 1 done).
    prepared: u64,
    /// The rounds to stamp: `(end, rnd)` for consecutive prepared ranges above `next`.
    segments: VecDeque<(u64, u32)>,
    /// Every instance below is decided and applied by a quorum of learners.
    floor: u64,
    applied: Vec<u64>,
    extend: Option<Attempt>,
    reinits: Vec<Attempt>,
    held: VecDeque<Held>,
}

impl Partition {
    /// Moves `next` up to `inst` (never down), dropping the rounds of instances passed.
    fn advance(&mut self, inst: u64) {
        self.next = self.next.max(inst);
        self.prepared = self.prepared.max(self.next);
        while self.segments.front().is_some_and(|&(end, _)| end <= self.next) {
            self.segments.pop_front();
        }
    }
}

pub struct Coordinator {
    config: CoordinatorConfig,
    active: bool,
    /// Round counter: the next round is `(counter + 1) << 8 | owner`.
    counter: u32,
    parts: Vec<Partition>,
    counters: CoordinatorCounters,
}

impl Coordinator {
    pub fn new(config: CoordinatorConfig) -> Coordinator {
        assert!(!config.acceptors.is_empty() && config.partitions > 0);
        assert!(config.range > 0 && config.range <= config.window);
        let parts = (0..config.partitions)
            .map(|_| Partition {
                next: 0,
                prepared: 0,
                segments: VecDeque::new(),
                floor: 0,
                applied: vec![0; config.learners.len()],
                extend: None,
                reinits: Vec::new(),
                held: VecDeque::new(),
            })
            .collect();
        Coordinator {
            active: false,
            counter: 0,
            parts,
            counters: CoordinatorCounters::default(),
            config,
        }
    }

    pub fn config(&self) -> &CoordinatorConfig {
        &self.config
    }
    pub fn counters(&self) -> &CoordinatorCounters {
        &self.counters
    }
    pub fn is_active(&self) -> bool {
        self.active
    }
    /// The next instance this coordinator will stamp in `pid`.
    pub fn next_instance(&self, pid: u16) -> Option<u64> {
        self.parts.get(pid as usize).map(|p| p.next)
    }
    pub fn floor(&self, pid: u16) -> Option<u64> {
        self.parts.get(pid as usize).map(|p| p.floor)
    }

    pub fn invariants(&self) {
        for p in &self.parts {
            assert!(p.next <= p.prepared);
            assert!(
                p.segments
                    .iter()
                    .all(|&(end, _)| end > p.next && end <= p.prepared)
            );
            assert!(
                p.segments
                    .iter()
                    .zip(p.segments.iter().skip(1))
                    .all(|(a, b)| a.0 < b.0)
            );
            assert!(p.held.len() <= self.config.held_max);
            assert!(p.reinits.len() <= self.config.reinits_max);
        }
    }

    /// Starts Phase 1 if this coordinator is active from the start (the primary).
    pub fn start(&mut self, now: Instant, out: &mut dyn FnMut(&Message<'_>)) {
        if self.config.active && !self.active {
            self.take_over(now, out);
        }
    }

    fn take_over(&mut self, now: Instant, out: &mut dyn FnMut(&Message<'_>)) {
        self.active = true;
        self.counters.takeovers += 1;
        for pid in 0..self.config.partitions {
            let p = &mut self.parts[pid as usize];
            p.next = p.floor;
            p.prepared = p.floor;
            p.segments.clear();
            p.extend = None;
            self.extend(now, pid, out);
        }
    }

    fn next_round(&mut self, above: u32) -> Option<u32> {
        let counter = self.counter.max(above >> OWNER_BITS) + 1;
        if counter >= 1 << (32 - OWNER_BITS) {
            self.counters.rounds_exhausted += 1;
            return None;
        }
        self.counter = counter;
        Some(counter << OWNER_BITS | self.config.owner as u32)
    }

    /// Starts Phase 1 on the next range if fewer than a range of instances are prepared ahead
    /// and the acceptors' window has room.
    fn extend(&mut self, now: Instant, pid: u16, out: &mut dyn FnMut(&Message<'_>)) {
        let (range, window) = (self.config.range as u64, self.config.window as u64);
        let p = &self.parts[pid as usize];
        if !self.active || p.extend.is_some() || p.prepared - p.next >= range {
            return;
        }
        let lo = p.prepared.max(p.floor);
        // Saturating: a floor comes from the network (a TRIM, an acceptor's answer).
        let hi = lo.saturating_add(range).min(p.floor.saturating_add(window));
        if hi <= lo {
            return;
        }
        let Some(rnd) = self.next_round(0) else { return };
        let attempt = Attempt::new(
            Kind::Extend,
            pid,
            lo,
            hi,
            rnd,
            now + self.config.phase1_timeout,
            &self.config,
        );
        attempt.send_1a(&self.config, out);
        self.counters.phase1_ranges += 1;
        self.parts[pid as usize].extend = Some(attempt);
    }

    /// Handles a message addressed to this coordinator.
    pub fn handle(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        if msg.pid >= self.config.partitions {
            self.counters.malformed += 1;
            return;
        }
        match msg.msgtype {
            MsgType::Request => self.request(now, msg, out),
            MsgType::P1b if self.config.acceptors.contains(&msg.from) => self.phase1b(now, msg, out),
            MsgType::Trim => self.trim(now, msg, out),
            MsgType::Reinit if self.config.learners.contains(&msg.from) => self.reinit(now, msg, out),
            _ => self.counters.refused_sender += 1,
        }
    }

    fn request(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        self.counters.requests += 1;
        if msg.value.is_empty() {
            // The empty value is the no-op; a proposer never sends one.
            self.counters.malformed += 1;
            return;
        }
        if !self.active {
            self.take_over(now, out);
        }
        let pid = msg.pid;
        if !self.propose(pid, msg.value, out) {
            let p = &mut self.parts[pid as usize];
            if p.held.len() < self.config.held_max {
                p.held.push_back(Held {
                    value: msg.value.to_vec(),
                });
            } else {
                self.counters.not_ready += 1;
            }
        }
        self.extend(now, pid, out);
    }

    /// Stamps `value` with the next prepared instance and its round; false if none is prepared.
    fn propose(&mut self, pid: u16, value: &[u8], out: &mut dyn FnMut(&Message<'_>)) -> bool {
        let p = &mut self.parts[pid as usize];
        let Some(&(_, rnd)) = p.segments.front() else {
            return false;
        };
        let inst = p.next;
        p.advance(inst.saturating_add(1));
        self.counters.proposed += 1;
        send_2a(&self.config, pid, inst, rnd, value, out);
        true
    }

    fn phase1b(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        let Some(acceptor) = self.config.acceptors.iter().position(|&a| a == msg.from) else {
            return;
        };
        if msg.flags & flags::OUT_OF_WINDOW != 0 {
            // The acceptor's floor comes from learners' trims: everything below it is applied
            // by a quorum of learners.
            self.raise_floor(msg.pid, msg.b);
        }
        let p = &mut self.parts[msg.pid as usize];
        let quorum = self.config.quorum();
        let mut outcome = None;
        if let Some(a) = p.extend.as_mut().filter(|a| a.matches(msg)) {
            outcome = Some((a.record(acceptor, msg, quorum), None));
        } else if let Some(i) = p.reinits.iter().position(|a| a.matches(msg)) {
            outcome = Some((p.reinits[i].record(acceptor, msg, quorum), Some(i)));
        }
        match outcome {
            Some((Progress::Done, reinit)) => self.finish(now, msg.pid, reinit, out),
            Some((Progress::Refused(highest), reinit)) => self.retry(now, msg.pid, reinit, highest, out),
            Some((Progress::Waiting, _)) | None => {}
        }
    }

    /// A Phase 1 attempt has a quorum: propose what it found.
    fn finish(&mut self, now: Instant, pid: u16, reinit: Option<usize>, out: &mut dyn FnMut(&Message<'_>)) {
        let p = &mut self.parts[pid as usize];
        let attempt = match reinit {
            Some(i) => p.reinits.swap_remove(i),
            None => p.extend.take().expect("matched"),
        };
        match attempt.kind {
            Kind::Extend => self.finish_extend(now, attempt, out),
            Kind::Reinit => {
                let value = attempt.votes.get(&attempt.lo).map_or(&[][..], |(_, v)| &v[..]);
                self.count_proposal(value);
                send_2a(&self.config, pid, attempt.lo, attempt.rnd, value, out);
            }
        }
    }

    /// A range is prepared. Its votes are proposed again at the new round, and every instance
    /// below the highest vote that has none gets a no-op (instances of earlier ranges too), so
    /// that no hole is left behind.
    fn finish_extend(&mut self, now: Instant, attempt: Attempt, out: &mut dyn FnMut(&Message<'_>)) {
        let pid = attempt.pid;
        let p = &mut self.parts[pid as usize];
        // Instances below the floor are decided: never proposed again, not even as no-ops.
        let floor = p.floor;
        p.advance(floor);
        if attempt.hi > p.prepared {
            p.segments.push_back((attempt.hi, attempt.rnd));
            p.prepared = attempt.hi;
        }
        if let Some(&top) = attempt.votes.keys().next_back() {
            while self.parts[pid as usize].next < attempt.lo && self.propose(pid, &[], out) {
                self.counters.noops += 1;
            }
            let p = &mut self.parts[pid as usize];
            let from = p.next.max(attempt.lo);
            p.advance(top + 1);
            for inst in from..=top {
                let value = attempt.votes.get(&inst).map_or(&[][..], |(_, v)| &v[..]);
                self.count_proposal(value);
                send_2a(&self.config, pid, inst, attempt.rnd, value, out);
            }
        }
        while let Some(h) = self.parts[pid as usize].held.pop_front() {
            if !self.propose(pid, &h.value, out) {
                self.parts[pid as usize].held.push_front(h);
                break;
            }
        }
        self.extend(now, pid, out);
    }

    fn count_proposal(&mut self, value: &[u8]) {
        if value.is_empty() {
            self.counters.noops += 1;
        } else {
            self.counters.reproposed += 1;
        }
    }

    /// A Phase 1 attempt was refused (a higher round was promised) or timed out: again, with a
    /// round above what was seen.
    fn retry(
        &mut self,
        now: Instant,
        pid: u16,
        reinit: Option<usize>,
        above: u32,
        out: &mut dyn FnMut(&Message<'_>),
    ) {
        self.counters.phase1_retries += 1;
        let Some(rnd) = self.next_round(above) else { return };
        let deadline = now + self.config.phase1_timeout;
        let floor = self.parts[pid as usize].floor;
        let p = &mut self.parts[pid as usize];
        let attempt = match reinit {
            Some(i) => &mut p.reinits[i],
            None => p.extend.as_mut().expect("retrying an attempt"),
        };
        if attempt.hi <= floor {
            // Trimmed meanwhile: decided, nothing to run.
            match reinit {
                Some(i) => {
                    p.reinits.swap_remove(i);
                }
                None => {
                    p.extend = None;
                    p.advance(floor);
                    self.extend(now, pid, out);
                }
            }
            return;
        }
        let lo = attempt.lo.max(floor);
        attempt.restart(lo, rnd, deadline, &self.config);
        attempt.send_1a(&self.config, out);
    }

    fn raise_floor(&mut self, pid: u16, floor: u64) {
        let p = &mut self.parts[pid as usize];
        p.floor = p.floor.max(floor);
    }

    fn trim(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        let learner = msg.swid as usize;
        if self.config.learners.get(learner) != Some(&msg.from) {
            self.counters.refused_sender += 1;
            return;
        }
        let p = &mut self.parts[msg.pid as usize];
        p.applied[learner] = p.applied[learner].max(msg.inst);
        let floor = quorum_floor(&p.applied, self.config.trim_quorum);
        self.raise_floor(msg.pid, floor);
        self.extend(now, msg.pid, out);
    }

    /// A learner has waited too long for `inst`: run Phase 1 on it alone, at a new round.
    fn reinit(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        let p = &self.parts[msg.pid as usize];
        let inst = msg.inst;
        // Only instances this coordinator has handed out (others: the proposer retries), not
        // trimmed, and not already being run again.
        if !self.active
            || inst >= p.next
            || inst < p.floor
            || p.reinits.len() >= self.config.reinits_max
            || p.reinits.iter().any(|a| a.lo == inst)
        {
            return;
        }
        let Some(rnd) = self.next_round(0) else { return };
        let attempt = Attempt::new(
            Kind::Reinit,
            msg.pid,
            inst,
            inst + 1,
            rnd,
            now + self.config.phase1_timeout,
            &self.config,
        );
        attempt.send_1a(&self.config, out);
        self.counters.reinits += 1;
        self.parts[msg.pid as usize].reinits.push(attempt);
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.parts
            .iter()
            .flat_map(|p| p.extend.iter().chain(p.reinits.iter()))
            .map(|a| a.deadline)
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant, out: &mut dyn FnMut(&Message<'_>)) {
        for pid in 0..self.config.partitions {
            let p = &self.parts[pid as usize];
            if p.extend.as_ref().is_some_and(|a| a.deadline <= now) {
                self.retry(now, pid, None, 0, out);
            }
            let mut i = 0;
            while i < self.parts[pid as usize].reinits.len() {
                if self.parts[pid as usize].reinits[i].deadline <= now {
                    self.retry(now, pid, Some(i), 0, out);
                }
                i += 1;
            }
        }
    }
}

/// One 2A per acceptor (the thesis multicasts; our addresses are unicast).
fn send_2a(
    config: &CoordinatorConfig,
    pid: u16,
    inst: u64,
    rnd: u32,
    value: &[u8],
    out: &mut dyn FnMut(&Message<'_>),
) {
    for &acceptor in &config.acceptors {
        out(&Message {
            inst,
            rnd,
            value,
            ..Message::new(MsgType::P2a, pid, config.me, acceptor)
        });
    }
}
