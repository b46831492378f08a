//! Recovery mode: "the learner reverts to recovery mode and runs a classic round of Paxos to
//! reach consensus on the value to be learned", over the minions' storage servers. One
//! coordinator runs it for every learner (it deduplicates their requests), with ballot 1.

use super::{Ballot, CLASSIC_QUORUM, FAST_QUORUM, Instance, MINIONS, Msg, NodeId, Transmit, Value};
use std::collections::{BTreeMap, VecDeque};

/// One storage server's Phase 1 answer: its fast vote and its last recovery acceptance.
type Answer = (Option<Value>, Option<(Ballot, Value)>);

#[derive(Clone, Debug)]
enum Phase {
    Prepare { answers: [Option<Answer>; MINIONS] },
    Accept { value: Value, accepted: [bool; MINIONS] },
}

#[derive(Clone, Debug)]
struct Round {
    ballot: Ballot,
    phase: Phase,
}

/// Phase 2's choice from a classic quorum of Phase 1 answers; `None` when no answer carries a
/// value (the coordinator then waits: storage servers answer only once they hold a vote).
///
/// A value accepted in a recovery round wins by ballot (classic Paxos). Otherwise a value that
/// may have been fast-chosen must be kept: chosen means [`FAST_QUORUM`] of the [`MINIONS`]
/// voted for it, so at least `FAST_QUORUM + CLASSIC_QUORUM - MINIONS` (2) of any
/// [`CLASSIC_QUORUM`] answers carry it, and no other value can have as many. With no such
/// value nothing was chosen, and the coordinator takes the most voted, the smallest on a tie.
pub fn choose_value(answers: &[Answer]) -> Option<Value> {
    if let Some((_, value)) = answers
        .iter()
        .filter_map(|(_, accepted)| *accepted)
        .max_by_key(|(b, _)| *b)
    {
        return Some(value);
    }
    let votes = || answers.iter().filter_map(|(vote, _)| *vote);
    let count = |value: Value| votes().filter(|v| *v == value).count();
    let keep_threshold = FAST_QUORUM + CLASSIC_QUORUM - MINIONS;
    if let Some(kept) = votes().find(|v| count(*v) >= keep_threshold) {
        return Some(kept);
    }
    votes().max_by_key(|v| (count(*v), std::cmp::Reverse(*v)))
}

/// The recovery coordinator (a commodity server).
#[derive(Debug)]
pub struct RecoveryCoordinator {
    learners: u16,
    rounds: BTreeMap<Instance, Round>,
    decided: BTreeMap<Instance, Value>,
    /// Instances in recovery or recovered that it keeps at most.
    instances_max: usize,
    /// Requests refused because `instances_max` instances are held.
    dropped_full: u64,
    outbox: VecDeque<Transmit>,
}

impl RecoveryCoordinator {
    pub fn new(learners: u16, instances_max: usize) -> RecoveryCoordinator {
        assert!(learners > 0, "recovery needs a learner to tell");
        RecoveryCoordinator {
            learners,
            rounds: BTreeMap::new(),
            decided: BTreeMap::new(),
            instances_max,
            dropped_full: 0,
            outbox: VecDeque::new(),
        }
    }

    /// A learner's request, or a storage server's Phase 1 or Phase 2 answer.
    pub fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::RecoveryRequest { learner, instance } => self.handle_request(learner, instance),
            Msg::Promise {
                minion,
                instance,
                ballot,
                fast_vote,
                accepted,
            } => self.handle_promise(minion, instance, ballot, (fast_vote, accepted)),
            Msg::Accepted {
                minion,
                instance,
                ballot,
            } => self.handle_accepted(minion, instance, ballot),
            _ => {}
        }
    }

    fn handle_request(&mut self, learner: u16, instance: Instance) {
        if let Some(&value) = self.decided.get(&instance) {
            // The learner missed nothing (links are reliable) but asked before it got the
            // decision; answering again is harmless.
            self.send(NodeId::Learner(learner), Msg::Decided { instance, value });
            return;
        }
        if self.rounds.contains_key(&instance) {
            return;
        }
        if self.rounds.len() + self.decided.len() >= self.instances_max {
            self.dropped_full += 1;
            return;
        }
        let ballot = 1;
        self.rounds.insert(
            instance,
            Round {
                ballot,
                phase: Phase::Prepare {
                    answers: [None; MINIONS],
                },
            },
        );
        for minion in 0..MINIONS as u8 {
            self.send(NodeId::Storage(minion), Msg::Prepare { instance, ballot });
        }
    }

    fn handle_promise(&mut self, minion: u8, instance: Instance, ballot: Ballot, answer: Answer) {
        let Some(round) = self.rounds.get_mut(&instance) else {
            return;
        };
        let Phase::Prepare { answers } = &mut round.phase else {
            return;
        };
        if ballot != round.ballot || minion as usize >= MINIONS {
            return;
        }
        answers[minion as usize] = Some(answer);
        let got: Vec<Answer> = answers.iter().flatten().copied().collect();
        if got.len() < CLASSIC_QUORUM {
            return;
        }
        let Some(value) = choose_value(&got) else {
            return;
        };
        round.phase = Phase::Accept {
            value,
            accepted: [false; MINIONS],
        };
        let ballot = round.ballot;
        for minion in 0..MINIONS as u8 {
            self.send(
                NodeId::Storage(minion),
                Msg::Accept {
                    instance,
                    ballot,
                    value,
                },
            );
        }
    }

    fn handle_accepted(&mut self, minion: u8, instance: Instance, ballot: Ballot) {
        let Some(round) = self.rounds.get_mut(&instance) else {
            return;
        };
        let Phase::Accept { value, accepted } = &mut round.phase else {
            return;
        };
        if ballot != round.ballot || minion as usize >= MINIONS {
            return;
        }
        accepted[minion as usize] = true;
        if accepted.iter().filter(|a| **a).count() < CLASSIC_QUORUM {
            return;
        }
        let value = *value;
        self.rounds.remove(&instance);
        let previous = self.decided.insert(instance, value);
        assert!(previous.is_none(), "instance {instance} recovered twice");
        for learner in 0..self.learners {
            self.send(NodeId::Learner(learner), Msg::Decided { instance, value });
        }
    }

    fn send(&mut self, to: NodeId, msg: Msg) {
        self.outbox.push_back(Transmit { to, msg });
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// Instances recovered so far.
    pub fn recoveries(&self) -> u64 {
        self.decided.len() as u64
    }

    /// Instances still in recovery (waiting for storage servers' answers).
    pub fn in_progress(&self) -> usize {
        self.rounds.len()
    }

    /// The value recovered for `instance`.
    pub fn decided(&self, instance: Instance) -> Option<Value> {
        self.decided.get(&instance).copied()
    }

    /// Requests refused because the coordinator was full.
    pub fn dropped_full(&self) -> u64 {
        self.dropped_full
    }
}
