//! The proposer: sends values `0..values` to the serializer at a fixed pace and re-submits a
//! value until every learner reported it delivered. The thesis leaves lost values to the
//! application ("the application (or proposer) detects and re-initiates lost instances", as
//! chapter 5 puts it); with position-numbered instances a lost or twice-chosen value is common
//! after recovery, so the model needs it to end with every value decided.

use super::{Msg, NodeId, Transmit, Value};
use onepipe_wire::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};

/// A proposer's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProposerConfig {
    /// Values to propose: `0..values`.
    pub values: u64,
    pub learners: u16,
    /// Gap between two first submissions.
    pub send_interval: Duration,
    /// How long a value may stay undelivered by some learner before it is submitted again.
    pub retry_timeout: Duration,
    /// Submissions per value, the first included.
    pub attempts_max: u32,
}

#[derive(Clone, Debug)]
struct Pending {
    deadline: Instant,
    attempts: u32,
    delivered_by: Vec<bool>,
}

/// The proposer of every value.
#[derive(Debug)]
pub struct Proposer {
    config: ProposerConfig,
    next_value: Value,
    next_send_at: Instant,
    pending: BTreeMap<Value, Pending>,
    resubmitted: u64,
    abandoned: u64,
    outbox: VecDeque<Transmit>,
}

impl Proposer {
    /// The first value goes out at `start`.
    pub fn new(config: ProposerConfig, start: Instant) -> Proposer {
        assert!(config.attempts_max > 0 && config.learners > 0, "{config:?}");
        Proposer {
            config,
            next_value: 0,
            next_send_at: start,
            pending: BTreeMap::new(),
            resubmitted: 0,
            abandoned: 0,
            outbox: VecDeque::new(),
        }
    }

    /// A learner's `Delivered`; anything else is ignored.
    pub fn handle(&mut self, msg: Msg) {
        let Msg::Delivered { learner, value } = msg else {
            return;
        };
        let Some(pending) = self.pending.get_mut(&value) else {
            return;
        };
        let Some(flag) = pending.delivered_by.get_mut(learner as usize) else {
            return;
        };
        *flag = true;
        if pending.delivered_by.iter().all(|d| *d) {
            self.pending.remove(&value);
        }
    }

    /// Sends what is due: new values at their pace, re-submissions past their deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        while self.next_value < self.config.values && self.next_send_at <= now {
            let value = self.next_value;
            self.next_value += 1;
            self.next_send_at += self.config.send_interval;
            let delivered_by = vec![false; self.config.learners as usize];
            self.pending.insert(
                value,
                Pending {
                    deadline: now + self.config.retry_timeout,
                    attempts: 1,
                    delivered_by,
                },
            );
            self.submit(value);
        }
        let due: Vec<Value> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(v, _)| *v)
            .collect();
        for value in due {
            let Some(pending) = self.pending.get_mut(&value) else {
                continue;
            };
            if pending.attempts >= self.config.attempts_max {
                self.pending.remove(&value);
                self.abandoned += 1;
                continue;
            }
            pending.attempts += 1;
            pending.deadline = now + self.config.retry_timeout;
            self.resubmitted += 1;
            self.submit(value);
        }
    }

    fn submit(&mut self, value: Value) {
        self.outbox.push_back(Transmit {
            to: NodeId::Serializer,
            msg: Msg::Request { value },
        });
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let next_send = (self.next_value < self.config.values).then_some(self.next_send_at);
        let next_retry = self.pending.values().map(|p| p.deadline).min();
        next_send.into_iter().chain(next_retry).min()
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// Submissions after the first.
    pub fn resubmitted(&self) -> u64 {
        self.resubmitted
    }

    /// Values given up after `attempts_max` submissions.
    pub fn abandoned(&self) -> u64 {
        self.abandoned
    }
}
