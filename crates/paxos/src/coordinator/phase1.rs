//! One Phase 1 attempt over a range of instances: the 1As it sent, the answers it has, and the
//! votes they reported.

use super::CoordinatorConfig;
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Message, MsgType, flags};
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Prepares a range of instances for new requests (and finds an old coordinator's votes).
    Extend,
    /// Runs one instance again, for a learner that waited too long for it.
    Reinit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    Waiting,
    /// A quorum has promised and every vote they announced has arrived.
    Done,
    /// An acceptor had promised this round or a higher one (carried).
    Refused(u32),
}

#[derive(Default)]
struct Answer {
    /// Votes the acceptor's summary announced; `None` before the summary.
    announced: Option<u64>,
    /// Instances whose votes have arrived from it (network duplicates count once).
    arrived: HashSet<u64>,
}

pub(super) struct Attempt {
    pub kind: Kind,
    pub pid: u16,
    pub lo: u64,
    pub hi: u64,
    pub rnd: u32,
    pub deadline: Instant,
    /// Per instance, the vote with the highest round reported.
    pub votes: BTreeMap<u64, (u32, Vec<u8>)>,
    answers: Vec<Answer>,
}

impl Attempt {
    pub fn new(
        kind: Kind,
        pid: u16,
        lo: u64,
        hi: u64,
        rnd: u32,
        deadline: Instant,
        config: &CoordinatorConfig,
    ) -> Attempt {
        debug_assert!(lo < hi);
        Attempt {
            kind,
            pid,
            lo,
            hi,
            rnd,
            deadline,
            votes: BTreeMap::new(),
            answers: config.acceptors.iter().map(|_| Answer::default()).collect(),
        }
    }

    /// Starts over on `lo .. hi` at a new round.
    pub fn restart(&mut self, lo: u64, rnd: u32, deadline: Instant, config: &CoordinatorConfig) {
        *self = Attempt::new(self.kind, self.pid, lo, self.hi, rnd, deadline, config);
    }

    pub fn send_1a(&self, config: &CoordinatorConfig, out: &mut dyn FnMut(&Message<'_>)) {
        for &acceptor in &config.acceptors {
            out(&Message {
                inst: self.lo,
                rnd: self.rnd,
                a: self.hi - self.lo,
                ..Message::new(MsgType::P1a, self.pid, config.me, acceptor)
            });
        }
    }

    /// Whether a 1B answers this attempt (its round, within its range).
    pub fn matches(&self, msg: &Message<'_>) -> bool {
        let rnd = if msg.flags & flags::REFUSED != 0 {
            msg.vrnd
        } else {
            msg.rnd
        };
        rnd == self.rnd && msg.pid == self.pid && (self.lo..self.hi).contains(&msg.inst)
    }

    /// Takes a matching 1B from acceptor number `acceptor`.
    pub fn record(&mut self, acceptor: usize, msg: &Message<'_>, quorum: usize) -> Progress {
        let answer = &mut self.answers[acceptor];
        if msg.flags & flags::REFUSED != 0 {
            return Progress::Refused(msg.rnd);
        }
        if msg.flags & flags::OUT_OF_WINDOW != 0 {
            // That acceptor cannot promise this range; others may still make a quorum.
            return Progress::Waiting;
        }
        if msg.flags & flags::RANGE != 0 {
            if msg.inst == self.lo && msg.a == self.hi - self.lo {
                answer.announced = Some(msg.b);
            }
        } else if answer.arrived.insert(msg.inst) {
            let better = self.votes.get(&msg.inst).is_none_or(|&(vrnd, _)| msg.vrnd > vrnd);
            if better && msg.vrnd > 0 {
                self.votes.insert(msg.inst, (msg.vrnd, msg.value.to_vec()));
            }
        }
        let complete = self
            .answers
            .iter()
            .filter(|a| a.announced == Some(a.arrived.len() as u64))
            .count();
        if complete >= quorum {
            Progress::Done
        } else {
            Progress::Waiting
        }
    }
}
