//! The fast-mode learner: "learners maintain a queue of messages for each interface. [...] At
//! each iteration of the protocol, learners compare the values of the messages at the top of
//! their queues. If the head of a quorum with three queues contain the same message, then
//! consensus has been established through the fast mode."

use super::{FAST_QUORUM, Instance, MINIONS, Msg, NodeId, Numbering, Transmit, Value};
use onepipe_wire::{Duration, Instant};
use std::collections::{BTreeMap, HashSet, VecDeque};

/// A learner's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LearnerConfig {
    pub id: u16,
    pub numbering: Numbering,
    /// Ask for recovery on a conflict or a stall; without it the learner stops at the first
    /// instance it cannot decide on the fast path.
    pub recovery: bool,
    /// How long the next instance may hold some votes but no fast quorum before recovery.
    pub stall_timeout: Duration,
    /// Votes held per minion queue, and recovered decisions held, beyond the next instance;
    /// more are dropped.
    pub votes_buffered_max: usize,
}

/// How an instance was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionPath {
    /// Three of the four queue heads agreed.
    Fast,
    /// The recovery coordinator's classic round.
    Recovered,
}

/// One decided instance, in instance order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub instance: Instance,
    pub value: Value,
    pub path: DecisionPath,
    /// The value was delivered at an earlier instance: this one delivers nothing.
    pub noop: bool,
}

/// What a learner counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnerStats {
    pub fast_decisions: u64,
    pub recovered_decisions: u64,
    pub noops: u64,
    /// Instances where the four heads cannot reach a fast quorum any more.
    pub conflicts: u64,
    /// Instances that stalled past `stall_timeout`.
    pub stall_timeouts: u64,
    pub recovery_requests: u64,
    /// Votes for instances already decided (arrived after the decision).
    pub stale_votes: u64,
    /// Votes (or recovered decisions) dropped because `votes_buffered_max` were held.
    pub dropped_full: u64,
    /// Recovered decisions that differ from this learner's own earlier decision.
    pub recovery_contradictions: u64,
}

/// A learner with one queue per minion.
#[derive(Debug)]
pub struct FastLearner {
    config: LearnerConfig,
    /// Votes received per minion: the next position under [`Numbering::QueuePosition`].
    arrivals: [Instance; MINIONS],
    /// Votes not yet consumed, per minion, by instance (the queues' heads are at `next`).
    queues: [BTreeMap<Instance, Value>; MINIONS],
    /// Recovered decisions for instances not yet reached.
    recovered: BTreeMap<Instance, Value>,
    next: Instance,
    /// Every decided value by instance (the run is bounded; a real learner trims at a checkpoint).
    decided: Vec<Value>,
    delivered: HashSet<Value>,
    /// Since when `next` has held votes without a fast quorum.
    stall_since: Option<Instant>,
    /// `next` conflicted or stalled: it waits for recovery, or forever without it.
    blocked: bool,
    stats: LearnerStats,
    outbox: VecDeque<Transmit>,
    decisions: VecDeque<Decision>,
}

impl FastLearner {
    pub fn new(config: LearnerConfig) -> FastLearner {
        assert!(config.votes_buffered_max > 0, "a queue holds at least its head");
        FastLearner {
            config,
            arrivals: [0; MINIONS],
            queues: Default::default(),
            recovered: BTreeMap::new(),
            next: 0,
            decided: Vec::new(),
            delivered: HashSet::new(),
            stall_since: None,
            blocked: false,
            stats: LearnerStats::default(),
            outbox: VecDeque::new(),
            decisions: VecDeque::new(),
        }
    }

    /// A minion's vote (on the NIC of that minion) or the coordinator's recovered decision.
    pub fn handle(&mut self, now: Instant, msg: Msg) {
        match msg {
            Msg::Vote { minion, stamp, value } => self.handle_vote(minion, stamp, value),
            Msg::Decided { instance, value } => self.handle_decided(instance, value),
            _ => return,
        }
        self.advance(now);
        self.invariants();
    }

    fn handle_vote(&mut self, minion: u8, stamp: Option<Instance>, value: Value) {
        let m = minion as usize;
        if m >= MINIONS {
            return;
        }
        let instance = match (self.config.numbering, stamp) {
            (Numbering::QueuePosition, _) => self.arrivals[m],
            (Numbering::MinionStamp, Some(stamp)) => stamp,
            (Numbering::MinionStamp, None) => return,
        };
        self.arrivals[m] += 1;
        if instance < self.next {
            self.stats.stale_votes += 1;
            return;
        }
        if self.queues[m].len() >= self.config.votes_buffered_max {
            self.stats.dropped_full += 1;
            return;
        }
        self.queues[m].entry(instance).or_insert(value);
    }

    fn handle_decided(&mut self, instance: Instance, value: Value) {
        if let Some(&mine) = self.decided.get(instance as usize) {
            if mine != value {
                self.stats.recovery_contradictions += 1;
            }
            return;
        }
        // The next instance's decision is used at once, so it never waits for room.
        if instance > self.next && self.recovered.len() >= self.config.votes_buffered_max {
            self.stats.dropped_full += 1;
            return;
        }
        self.recovered.insert(instance, value);
    }

    /// Decides as many instances as the queues and recovered decisions allow.
    fn advance(&mut self, now: Instant) {
        loop {
            if let Some(value) = self.recovered.remove(&self.next) {
                self.decide(value, DecisionPath::Recovered);
                continue;
            }
            let heads: Vec<Value> = self
                .queues
                .iter()
                .filter_map(|q| q.get(&self.next).copied())
                .collect();
            let count = |v: Value| heads.iter().filter(|h| **h == v).count();
            let best = heads.iter().map(|v| (count(*v), *v)).max();
            if let Some((votes, value)) = best
                && votes >= FAST_QUORUM
            {
                self.decide(value, DecisionPath::Fast);
                continue;
            }
            if self.blocked {
                return;
            }
            let votes = best.map_or(0, |(votes, _)| votes);
            let missing = MINIONS - heads.len();
            if votes + missing < FAST_QUORUM {
                self.stats.conflicts += 1;
                self.block();
            } else if !heads.is_empty() && self.stall_since.is_none() {
                self.stall_since = Some(now);
            }
            return;
        }
    }

    fn decide(&mut self, value: Value, path: DecisionPath) {
        let instance = self.next;
        assert_eq!(
            self.decided.len() as u64,
            instance,
            "instances are decided in order"
        );
        let noop = !self.delivered.insert(value);
        match path {
            DecisionPath::Fast => self.stats.fast_decisions += 1,
            DecisionPath::Recovered => self.stats.recovered_decisions += 1,
        }
        if noop {
            self.stats.noops += 1;
        } else {
            let msg = Msg::Delivered {
                learner: self.config.id,
                value,
            };
            self.outbox.push_back(Transmit {
                to: NodeId::Proposer,
                msg,
            });
        }
        self.decided.push(value);
        self.decisions.push_back(Decision {
            instance,
            value,
            path,
            noop,
        });
        self.next += 1;
        for queue in &mut self.queues {
            queue.remove(&instance);
        }
        self.stall_since = None;
        self.blocked = false;
    }

    /// `next` cannot be decided on the fast path: ask for recovery if enabled.
    fn block(&mut self) {
        self.blocked = true;
        self.stall_since = None;
        if self.config.recovery {
            self.stats.recovery_requests += 1;
            let msg = Msg::RecoveryRequest {
                learner: self.config.id,
                instance: self.next,
            };
            self.outbox.push_back(Transmit {
                to: NodeId::RecoveryCoordinator,
                msg,
            });
        }
    }

    /// The stall timer: extra calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(deadline) = self.poll_timeout() else {
            return;
        };
        if now < deadline {
            return;
        }
        self.stats.stall_timeouts += 1;
        self.block();
        self.invariants();
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.blocked {
            return None;
        }
        self.stall_since.map(|since| since + self.config.stall_timeout)
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// The next decision, in instance order.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// Every decided value, indexed by instance.
    pub fn decided(&self) -> &[Value] {
        &self.decided
    }

    /// The first undecided instance.
    pub fn next_instance(&self) -> Instance {
        self.next
    }

    pub fn stats(&self) -> LearnerStats {
        self.stats
    }

    /// Holds after every input.
    fn invariants(&self) {
        assert_eq!(self.decided.len() as u64, self.next);
        for queue in &self.queues {
            assert!(
                queue.keys().all(|instance| *instance >= self.next),
                "a consumed vote left in a queue"
            );
            assert!(queue.len() <= self.config.votes_buffered_max);
        }
        assert!(self.recovered.keys().all(|instance| *instance >= self.next));
        assert!(
            !self.recovered.contains_key(&self.next),
            "the next decision is used at once"
        );
        assert!(self.recovered.len() <= self.config.votes_buffered_max);
        assert!(
            !(self.blocked && self.stall_since.is_some()),
            "a blocked instance has no stall timer"
        );
        assert_eq!(
            self.stats.fast_decisions + self.stats.recovered_decisions,
            self.next,
            "every instance decided once"
        );
    }
}
