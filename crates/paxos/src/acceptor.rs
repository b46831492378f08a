//! The acceptor (thesis Fig. 5.4, corrected; Partitioned Paxos's TRIM, 6.1): registers `rnds[]`,
//! `vrnds[]` and `values[]` per partition, a ring of `window` slots indexed by `inst mod window`.
//!
//! The corrections to the published pseudo-code (../shared/papers/notes-innetwork-paxos.md):
//! a 1A is accepted when its round is *above* the promised one, a 2A when it is *at least* the
//! promised one (the thesis compares strictly for both, so nothing would ever be accepted); and
//! no index is ever out of range: a slot is reused for instance `i + window` only once instance
//! `i` is below the partition's floor, which TRIM moves.
//!
//! The floor is the highest instance below which a majority of learners (`trim_quorum`) have
//! applied every instance: a value acknowledged to a client then survives the loss of one
//! replica, since another has it and the acceptors forget it only then. An acceptor takes 1As
//! and 2As only for instances in `[floor, floor + window)`; outside, it counts and drops (a 2A)
//! or answers with its floor (a 1A). Phase 1 runs on ranges (`inst .. inst + a`) so that a
//! coordinator pre-runs it for many instances with one message; the answer is one 1B per
//! instance that holds a vote, then a summary that counts them.

use onepipe_wire::paxos::{Addr, Message, MsgType, flags};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptorConfig {
    /// This acceptor's index in the acceptor list: the `swid` of its votes.
    pub swid: u16,
    pub me: Addr,
    pub partitions: u16,
    /// Slots per partition: instances an acceptor holds between trims.
    pub window: u32,
    /// Bytes per slot: the largest value.
    pub value_bytes_max: usize,
    /// Who may send 1As and 2As (the coordinator and its backups).
    pub coordinators: Vec<Addr>,
    /// Who receives 2Bs and may TRIM (a learner's `swid` in TRIM is its index here).
    pub learners: Vec<Addr>,
    /// Learners that must have applied an instance before it is trimmed.
    pub trim_quorum: usize,
}

/// What the acceptor did, by reason for drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptorCounters {
    pub promises: u64,
    pub votes: u64,
    pub trims: u64,
    /// 1As refused because a round at least theirs was promised.
    pub refused_1a: u64,
    /// 2As whose round was below the promised one.
    pub stale_2a: u64,
    /// 1As and 2As outside `[floor, floor + window)`.
    pub out_of_window: u64,
    pub value_too_large: u64,
    /// Messages from an address not in the role lists, of a type an acceptor does not take,
    /// or of a partition it does not have.
    pub refused_sender: u64,
    pub malformed: u64,
}

#[derive(Clone, Debug, Default)]
struct Slot {
    /// The instance this slot holds; a slot whose instance is not the asked one is stale
    /// (trimmed) and reads as fresh.
    inst: u64,
    rnd: u32,
    vrnd: u32,
    value: Vec<u8>,
}

struct Log {
    slots: Vec<Slot>,
    floor: u64,
    /// Per learner, the instance below which it has applied everything.
    applied: Vec<u64>,
}

impl Log {
    fn slot_index(&self, inst: u64) -> usize {
        (inst % self.slots.len() as u64) as usize
    }

    fn in_window(&self, inst: u64, window: u32) -> bool {
        inst >= self.floor && inst - self.floor < window as u64
    }

    /// The slot of `inst`, reset first if it still holds a trimmed instance.
    fn slot_mut(&mut self, inst: u64) -> &mut Slot {
        let i = self.slot_index(inst);
        let slot = &mut self.slots[i];
        if slot.inst != inst {
            *slot = Slot {
                inst,
                value: std::mem::take(&mut slot.value),
                ..Slot::default()
            };
            slot.value.clear();
        }
        slot
    }

    /// The promised round of `inst`, 0 for a fresh or stale slot.
    fn promised(&self, inst: u64) -> u32 {
        let slot = &self.slots[self.slot_index(inst)];
        if slot.inst == inst { slot.rnd } else { 0 }
    }
}

pub struct Acceptor {
    config: AcceptorConfig,
    logs: Vec<Log>,
    counters: AcceptorCounters,
}

impl Acceptor {
    pub fn new(config: AcceptorConfig) -> Acceptor {
        assert!(config.window > 0 && config.partitions > 0);
        assert!(config.trim_quorum >= 1 && config.trim_quorum <= config.learners.len());
        let logs = (0..config.partitions)
            .map(|_| Log {
                // Slot i starts holding instance i (fresh: round 0, no vote).
                slots: (0..config.window as u64)
                    .map(|inst| Slot {
                        inst,
                        ..Slot::default()
                    })
                    .collect(),
                floor: 0,
                applied: vec![0; config.learners.len()],
            })
            .collect();
        Acceptor {
            config,
            logs,
            counters: AcceptorCounters::default(),
        }
    }

    pub fn config(&self) -> &AcceptorConfig {
        &self.config
    }
    pub fn counters(&self) -> &AcceptorCounters {
        &self.counters
    }
    pub fn floor(&self, pid: u16) -> Option<u64> {
        self.logs.get(pid as usize).map(|l| l.floor)
    }

    /// The vote this acceptor holds for `inst`: `(vrnd, value)`; `None` if none or trimmed.
    pub fn vote(&self, pid: u16, inst: u64) -> Option<(u32, &[u8])> {
        let log = self.logs.get(pid as usize)?;
        let slot = &log.slots[log.slot_index(inst)];
        (slot.inst == inst && slot.vrnd > 0 && inst >= log.floor).then_some((slot.vrnd, &slot.value[..]))
    }

    /// The ring's invariants: each slot holds an instance of its residue, below the window's
    /// end; a vote never has a round above the promise.
    pub fn invariants(&self) {
        let w = self.config.window as u64;
        for log in &self.logs {
            assert_eq!(log.slots.len() as u64, w);
            for (i, s) in log.slots.iter().enumerate() {
                assert_eq!(s.inst % w, i as u64);
                assert!(s.inst < log.floor.saturating_add(w));
                assert!(s.vrnd <= s.rnd);
                assert!(s.value.len() <= self.config.value_bytes_max);
            }
        }
    }

    /// Handles a message addressed to this acceptor; what it sends goes to `out`.
    pub fn handle(&mut self, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        if msg.pid >= self.config.partitions {
            self.counters.refused_sender += 1;
            return;
        }
        match msg.msgtype {
            MsgType::P1a if self.config.coordinators.contains(&msg.from) => self.phase1a(msg, out),
            MsgType::P2a if self.config.coordinators.contains(&msg.from) => self.phase2a(msg, out),
            MsgType::Trim => self.trim(msg),
            _ => self.counters.refused_sender += 1,
        }
    }

    fn answer<'v>(&self, msg: &Message<'_>, flags: u8) -> Message<'v> {
        Message {
            flags,
            swid: self.config.swid,
            inst: msg.inst,
            rnd: msg.rnd,
            a: msg.a,
            ..Message::new(MsgType::P1b, msg.pid, self.config.me, msg.from)
        }
    }

    /// Phase 1A over `inst .. inst + a`: promise `rnd` for the whole range, or for none of it.
    fn phase1a(&mut self, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        let window = self.config.window;
        let log = &self.logs[msg.pid as usize];
        let count = msg.a;
        let Some(end) = msg.inst.checked_add(count) else {
            self.counters.malformed += 1;
            return;
        };
        if count == 0 || count > window as u64 {
            self.counters.malformed += 1;
            return;
        }
        if !log.in_window(msg.inst, window) || !log.in_window(end - 1, window) {
            self.counters.out_of_window += 1;
            let floor = log.floor;
            out(&Message {
                b: floor,
                ..self.answer(msg, flags::OUT_OF_WINDOW)
            });
            return;
        }
        let highest = (msg.inst..end).map(|i| log.promised(i)).max().unwrap_or(0);
        if highest >= msg.rnd {
            self.counters.refused_1a += 1;
            // `vrnd` names the refused round, so the coordinator can tell which attempt.
            out(&Message {
                rnd: highest,
                vrnd: msg.rnd,
                ..self.answer(msg, flags::REFUSED)
            });
            return;
        }
        self.counters.promises += 1;
        let summary = self.answer(msg, flags::RANGE);
        let (swid, me) = (self.config.swid, self.config.me);
        let log = &mut self.logs[msg.pid as usize];
        let mut votes = 0;
        for inst in msg.inst..end {
            let slot = log.slot_mut(inst);
            slot.rnd = msg.rnd;
            if slot.vrnd > 0 {
                votes += 1;
                out(&Message {
                    swid,
                    inst,
                    rnd: msg.rnd,
                    vrnd: slot.vrnd,
                    value: &slot.value,
                    ..Message::new(MsgType::P1b, msg.pid, me, msg.from)
                });
            }
        }
        out(&Message { b: votes, ..summary });
    }

    /// Phase 2A: vote for the value if the round is at least the promised one, and tell every
    /// learner.
    fn phase2a(&mut self, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        if msg.value.len() > self.config.value_bytes_max {
            self.counters.value_too_large += 1;
            return;
        }
        let window = self.config.window;
        let log = &mut self.logs[msg.pid as usize];
        if !log.in_window(msg.inst, window) {
            self.counters.out_of_window += 1;
            return;
        }
        let slot = log.slot_mut(msg.inst);
        if msg.rnd < slot.rnd {
            self.counters.stale_2a += 1;
            return;
        }
        slot.rnd = msg.rnd;
        slot.vrnd = msg.rnd;
        slot.value.clear();
        slot.value.extend_from_slice(msg.value);
        self.counters.votes += 1;
        for &learner in &self.config.learners {
            out(&Message {
                swid: self.config.swid,
                inst: msg.inst,
                rnd: msg.rnd,
                vrnd: msg.rnd,
                value: msg.value,
                ..Message::new(MsgType::P2b, msg.pid, self.config.me, learner)
            });
        }
    }

    /// TRIM from learner `swid`: it has applied every instance below `inst`.
    fn trim(&mut self, msg: &Message<'_>) {
        let learner = msg.swid as usize;
        if self.config.learners.get(learner) != Some(&msg.from) {
            self.counters.refused_sender += 1;
            return;
        }
        self.counters.trims += 1;
        let log = &mut self.logs[msg.pid as usize];
        log.applied[learner] = log.applied[learner].max(msg.inst);
        log.floor = log.floor.max(quorum_floor(&log.applied, self.config.trim_quorum));
    }
}

/// The highest instance below which at least `quorum` of `applied` have applied everything: the
/// `quorum`-th largest.
pub fn quorum_floor(applied: &[u64], quorum: usize) -> u64 {
    let mut sorted = applied.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.get(quorum.saturating_sub(1)).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests;
