//! The learner (thesis 5.2, corrected; Partitioned Paxos 6.1): decides an instance when a
//! quorum (f + 1) of acceptors report the same value for the same round, counting votes per
//! (instance, round) rather than per (instance, switch) as the thesis's learner does (votes of
//! different rounds may carry different values; only one round's quorum decides). It delivers
//! in instance order, one partition at a time, and TRIMs the acceptors once the replica has
//! applied (`applied`).
//!
//! An instance that stays undecided while later ones are decided is a hole: first the learner
//! asks a peer learner for it (CATCHUP, answered with DECIDED from the peer's recent values),
//! then it asks the coordinators to run it again (REINIT), which decides the value an acceptor
//! holds or a no-op.

use onepipe_wire::paxos::{Addr, Message, MsgType};
use onepipe_wire::{Duration, Instant};
use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnerConfig {
    pub me: Addr,
    /// This learner's index among the learners: its `swid` in TRIM.
    pub index: u16,
    pub acceptors: Vec<Addr>,
    /// Where TRIM and REINIT go: the coordinator and its backups.
    pub coordinators: Vec<Addr>,
    /// The other learners, asked for holes.
    pub peers: Vec<Addr>,
    pub partitions: u16,
    /// Instances past the next undelivered one whose votes are kept (the acceptors' window).
    pub window: u32,
    /// Delivered values kept per partition to answer peers' catch-ups.
    pub retain: usize,
    /// TRIM after this many applied instances, and at least every `trim_interval`.
    pub trim_every: u64,
    pub trim_interval: Duration,
    /// How long a hole waits before a catch-up, and twice that before a REINIT.
    pub gap_timeout: Duration,
    /// Most DECIDED messages one CATCHUP is answered with.
    pub catchup_max: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnerCounters {
    pub votes: u64,
    pub decided: u64,
    pub delivered: u64,
    pub noops: u64,
    /// Votes for instances already delivered or decided, or beyond the window.
    pub late_votes: u64,
    pub out_of_window: u64,
    /// Votes whose value differs from the decided one, or from another vote of the same round:
    /// impossible unless a participant misbehaves.
    pub conflicts: u64,
    pub catchups_sent: u64,
    pub catchups_served: u64,
    pub reinits_sent: u64,
    pub trims_sent: u64,
    pub refused_sender: u64,
}

/// One round's votes for an instance.
struct Round {
    rnd: u32,
    /// Bit per acceptor.
    voters: u64,
    value: Vec<u8>,
}

/// A round a vote is kept for; an instance sees few rounds (one per coordinator change).
const ROUNDS_MAX: usize = 4;

struct Partition {
    /// The next instance to deliver.
    next: u64,
    tallies: HashMap<u64, Vec<Round>>,
    decided: BTreeMap<u64, Vec<u8>>,
    retained: VecDeque<(u64, Vec<u8>)>,
    /// Everything below is applied by the replica (its word, through `applied`).
    applied: u64,
    trimmed: u64,
    last_trim: Instant,
    /// Since when `next` has been a hole, and how many times it was chased.
    hole_since: Option<Instant>,
    chased: u32,
    /// Votes arrived for instances past the window: this learner is far behind (restarted, or
    /// cut off), and only a catch-up can bring it back.
    behind: bool,
    /// The end of the last catch-up asked for; reaching it with the hole still there asks for
    /// the next one at once (a catch-up runs at the speed of its answers, not of the timer).
    catchup_end: u64,
    catchup_due: bool,
}

/// A decided value, delivered in instance order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub pid: u16,
    pub inst: u64,
    /// Empty: a no-op.
    pub value: Vec<u8>,
}

pub struct Learner {
    config: LearnerConfig,
    parts: Vec<Partition>,
    /// The partition delivery looks at first (round robin, so none starves).
    cursor: usize,
    peer_cursor: usize,
    counters: LearnerCounters,
}

impl Learner {
    /// A learner whose partitions start at `next[pid]` (0, or where a restarted replica's
    /// store says it is).
    pub fn new(config: LearnerConfig, next: &[u64]) -> Learner {
        assert!(config.acceptors.len() <= 64 && !config.acceptors.is_empty());
        assert_eq!(next.len(), config.partitions as usize);
        let parts = next
            .iter()
            .map(|&n| Partition {
                next: n,
                tallies: HashMap::new(),
                decided: BTreeMap::new(),
                retained: VecDeque::new(),
                applied: n,
                trimmed: 0,
                last_trim: Instant::ZERO,
                hole_since: None,
                chased: 0,
                behind: false,
                catchup_end: 0,
                catchup_due: false,
            })
            .collect();
        Learner {
            config,
            parts,
            cursor: 0,
            peer_cursor: 0,
            counters: LearnerCounters::default(),
        }
    }

    pub fn config(&self) -> &LearnerConfig {
        &self.config
    }

    /// After a restart: asks a peer at once for what was decided past where this learner
    /// starts, in every partition (nothing else would tell it that it is behind until votes
    /// arrive, and none come when the system is idle).
    pub fn rejoin(&mut self, now: Instant) {
        for p in &mut self.parts {
            p.behind = true;
            p.hole_since = Some(now);
            p.catchup_due = true;
        }
    }
    pub fn counters(&self) -> &LearnerCounters {
        &self.counters
    }
    pub fn next_instance(&self, pid: u16) -> Option<u64> {
        self.parts.get(pid as usize).map(|p| p.next)
    }

    fn quorum(&self) -> usize {
        self.config.acceptors.len() / 2 + 1
    }

    pub fn invariants(&self) {
        let window = self.config.window as u64;
        for p in &self.parts {
            assert!(p.tallies.keys().all(|&i| i >= p.next && i - p.next < window));
            assert!(p.decided.keys().all(|&i| i >= p.next && i - p.next < window));
            assert!(p.tallies.keys().all(|i| !p.decided.contains_key(i)));
            assert!(p.tallies.values().all(|r| r.len() <= ROUNDS_MAX));
            assert!(p.retained.len() <= self.config.retain);
        }
    }

    /// Handles a 2B, a peer's CATCHUP or a peer's DECIDED.
    pub fn handle(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        if msg.pid >= self.config.partitions {
            self.counters.refused_sender += 1;
            return;
        }
        match msg.msgtype {
            MsgType::P2b => self.vote(now, msg),
            MsgType::Catchup if self.config.peers.contains(&msg.from) => self.serve_catchup(msg, out),
            MsgType::Decided if self.config.peers.contains(&msg.from) => {
                self.decide(now, msg.pid, msg.inst, msg.value)
            }
            _ => self.counters.refused_sender += 1,
        }
    }

    fn vote(&mut self, now: Instant, msg: &Message<'_>) {
        let acceptor = msg.swid as usize;
        if self.config.acceptors.get(acceptor) != Some(&msg.from) {
            self.counters.refused_sender += 1;
            return;
        }
        self.counters.votes += 1;
        let quorum = self.quorum();
        let window = self.config.window as u64;
        let p = &mut self.parts[msg.pid as usize];
        if msg.inst < p.next {
            self.counters.late_votes += 1;
            return;
        }
        if msg.inst - p.next >= window {
            self.counters.out_of_window += 1;
            p.behind = true;
            self.note_hole(now, msg.pid);
            return;
        }
        if let Some(v) = p.decided.get(&msg.inst) {
            self.counters.late_votes += 1;
            if v[..] != *msg.value {
                self.counters.conflicts += 1;
            }
            return;
        }
        let rounds = p.tallies.entry(msg.inst).or_default();
        let round = match rounds.iter().position(|r| r.rnd == msg.rnd) {
            Some(i) => &mut rounds[i],
            None => {
                if rounds.len() == ROUNDS_MAX {
                    // Keep the highest rounds: a lower one can no longer gather a quorum once
                    // acceptors have promised higher.
                    let lowest = (0..rounds.len()).min_by_key(|&i| rounds[i].rnd).expect("full");
                    if rounds[lowest].rnd > msg.rnd {
                        return;
                    }
                    rounds.swap_remove(lowest);
                }
                rounds.push(Round {
                    rnd: msg.rnd,
                    voters: 0,
                    value: msg.value.to_vec(),
                });
                rounds.last_mut().expect("pushed")
            }
        };
        if round.value[..] != *msg.value {
            self.counters.conflicts += 1;
            return;
        }
        round.voters |= 1 << acceptor;
        if round.voters.count_ones() as usize >= quorum {
            let value = std::mem::take(&mut round.value);
            self.decide(now, msg.pid, msg.inst, &value);
        } else {
            self.note_hole(now, msg.pid);
        }
    }

    /// `inst` of `pid` is decided (by a quorum here, or by a peer).
    fn decide(&mut self, now: Instant, pid: u16, inst: u64, value: &[u8]) {
        let window = self.config.window as u64;
        let p = &mut self.parts[pid as usize];
        if inst < p.next || inst - p.next >= window {
            return;
        }
        if let Some(v) = p.decided.get(&inst) {
            if v[..] != *value {
                self.counters.conflicts += 1;
            }
            return;
        }
        p.tallies.remove(&inst);
        p.decided.insert(inst, value.to_vec());
        self.counters.decided += 1;
        self.note_hole(now, pid);
    }

    /// Starts the hole's clock if `next` is undecided while something after it is known.
    fn note_hole(&mut self, now: Instant, pid: u16) {
        let p = &mut self.parts[pid as usize];
        let hole =
            !p.decided.contains_key(&p.next) && (p.behind || !p.decided.is_empty() || !p.tallies.is_empty());
        if !hole {
            p.hole_since = None;
            p.chased = 0;
        } else if p.hole_since.is_none() {
            p.hole_since = Some(now);
        }
    }

    /// The next decided value in instance order, from any partition (round robin).
    pub fn poll_delivery(&mut self, now: Instant) -> Option<Delivery> {
        let n = self.parts.len();
        for k in 0..n {
            let pid = (self.cursor + k) % n;
            let p = &mut self.parts[pid];
            if let Some(value) = p.decided.remove(&p.next) {
                let inst = p.next;
                p.next += 1;
                if self.config.retain > 0 {
                    if p.retained.len() == self.config.retain {
                        p.retained.pop_front();
                    }
                    p.retained.push_back((inst, value.clone()));
                }
                self.cursor = (pid + 1) % n;
                self.counters.delivered += 1;
                if value.is_empty() {
                    self.counters.noops += 1;
                }
                p.hole_since = None;
                p.chased = 0;
                if p.catchup_end > 0 && p.next >= p.catchup_end {
                    // The peer had all that was asked: there may be more.
                    p.catchup_due = !p.decided.contains_key(&p.next);
                    p.behind = p.catchup_due;
                    p.catchup_end = 0;
                }
                self.note_hole(now, pid as u16);
                return Some(Delivery {
                    pid: pid as u16,
                    inst,
                    value,
                });
            }
        }
        None
    }

    /// The replica has applied (durably) every instance of `pid` below `next`: TRIM when enough
    /// have been since the last one.
    pub fn applied(&mut self, now: Instant, pid: u16, next: u64, out: &mut dyn FnMut(&Message<'_>)) {
        let Some(p) = self.parts.get_mut(pid as usize) else {
            return;
        };
        p.applied = p.applied.max(next);
        if p.applied - p.trimmed >= self.config.trim_every {
            self.send_trim(now, pid, out);
        }
    }

    fn send_trim(&mut self, now: Instant, pid: u16, out: &mut dyn FnMut(&Message<'_>)) {
        let p = &mut self.parts[pid as usize];
        p.trimmed = p.applied;
        p.last_trim = now;
        self.counters.trims_sent += 1;
        for &to in self.config.acceptors.iter().chain(&self.config.coordinators) {
            out(&Message {
                swid: self.config.index,
                inst: p.applied,
                ..Message::new(MsgType::Trim, pid, self.config.me, to)
            });
        }
    }

    fn serve_catchup(&mut self, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        let p = &self.parts[msg.pid as usize];
        let Some(&(first, _)) = p.retained.front() else {
            return;
        };
        // What was asked, clipped to what is retained, at most `catchup_max` of it.
        let from = msg.inst.max(first);
        let end = msg
            .inst
            .saturating_add(msg.a)
            .min(from.saturating_add(self.config.catchup_max));
        for inst in from..end.min(p.next) {
            let (i, value) = &p.retained[(inst - first) as usize];
            debug_assert_eq!(*i, inst);
            self.counters.catchups_served += 1;
            out(&Message {
                inst,
                value,
                ..Message::new(MsgType::Decided, msg.pid, self.config.me, msg.from)
            });
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.parts
            .iter()
            .flat_map(|p| {
                let trim =
                    (p.applied > p.trimmed || p.applied > 0).then(|| p.last_trim + self.config.trim_interval);
                let hole = p
                    .hole_since
                    .map(|s| s + self.config.gap_timeout.saturating_mul(p.chased as u64 + 1));
                let due = p.catchup_due.then_some(Instant::ZERO);
                trim.into_iter().chain(hole).chain(due)
            })
            .min()
    }

    /// Resends TRIM every `trim_interval` (a lost one must not stall the acceptors' window), and
    /// chases holes: a CATCHUP to a peer, then a REINIT to the coordinators, and so on.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut dyn FnMut(&Message<'_>)) {
        for pid in 0..self.config.partitions {
            let p = &self.parts[pid as usize];
            if p.applied > 0 && now >= p.last_trim + self.config.trim_interval {
                self.send_trim(now, pid, out);
            }
            let p = &mut self.parts[pid as usize];
            let due = std::mem::take(&mut p.catchup_due);
            let Some(since) = p.hole_since else { continue };
            if !due && now < since + self.config.gap_timeout.saturating_mul(p.chased as u64 + 1) {
                continue;
            }
            if p.behind && p.decided.is_empty() && p.tallies.is_empty() && p.chased >= 2 {
                // A catch-up and a REINIT found nothing past `next`: level with the peers.
                p.behind = false;
                p.hole_since = None;
                p.chased = 0;
                continue;
            }
            let (inst, chased) = (p.next, if due { 0 } else { p.chased });
            let window = self.config.window as u64;
            let known_end = p
                .decided
                .keys()
                .next_back()
                .map_or(inst, |&i| i)
                .saturating_add(1);
            let ask = if p.behind {
                window
            } else {
                (known_end - inst).min(window)
            };
            if !due {
                p.chased += 1;
            }
            if chased % 2 == 0 && !self.config.peers.is_empty() {
                let peer = self.config.peers[self.peer_cursor % self.config.peers.len()];
                self.peer_cursor += 1;
                self.counters.catchups_sent += 1;
                self.parts[pid as usize].catchup_end = inst + ask.min(self.config.catchup_max);
                out(&Message {
                    inst,
                    a: ask,
                    ..Message::new(MsgType::Catchup, pid, self.config.me, peer)
                });
            } else {
                self.counters.reinits_sent += 1;
                for &to in &self.config.coordinators {
                    out(&Message {
                        inst,
                        ..Message::new(MsgType::Reinit, pid, self.config.me, to)
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
