//! A deterministic discrete-event simulation of Figure 4.1: one proposer, the serializer, four
//! minions with their storage servers, the learners and a recovery coordinator. One seed
//! reproduces a run exactly.
//!
//! Links have a latency plus a uniform jitter and are FIFO; on the faulty links (chosen by
//! [`FaultyLinks`]) a message is lost with `loss_probability`, or with `reorder_probability`
//! held back by `reorder_delay` so that the messages behind it overtake it. The minion-to-storage
//! links and the recovery links (learners, coordinator, storage servers) are never faulty.

use super::report::{NetpaxosReport, build_report};
use super::{
    FastLearner, LearnerConfig, MINIONS, Minion, Msg, NodeId, Numbering, Proposer, ProposerConfig,
    RecoveryCoordinator, Serializer, Storage, Transmit,
};
use onepipe_fabric::hash::SplitMix;
use onepipe_wire::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Which links lose and reorder messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultyLinks {
    /// Serializer to minions: breaks the thesis's assumption 1 (performance).
    SerializerToMinion,
    /// Minions to learners: breaks assumption 2 (correctness under queue positions).
    MinionToLearner,
    Both,
}

/// A simulation's knobs; [`NetpaxosConfig::new`] gives a clean network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetpaxosConfig {
    pub seed: u64,
    /// Values proposed, `0..values`.
    pub values: u64,
    /// Learners, at least 2 (agreement needs two to disagree).
    pub learners: u16,
    pub numbering: Numbering,
    /// Learners ask for recovery mode; without it they stop at the first undecidable instance.
    pub recovery: bool,
    /// Gap between two proposals.
    pub send_interval: Duration,
    pub link_latency: Duration,
    /// Extra latency, uniform in `[0, link_jitter]`, per message.
    pub link_jitter: Duration,
    /// Chance that a message on a faulty link is held back by `reorder_delay`.
    pub reorder_probability: f64,
    pub reorder_delay: Duration,
    /// Chance that a message on a faulty link is lost.
    pub loss_probability: f64,
    pub faulty_links: FaultyLinks,
    pub stall_timeout: Duration,
    pub retry_timeout: Duration,
    /// Submissions per value, the first included.
    pub attempts_max: u32,
    /// Virtual time after which the run stops.
    pub time_max: Duration,
}

/// A configuration the simulation refuses.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("learners must be in 2..={LEARNERS_MAX}, not {0}")]
    Learners(u16),
    #[error("values must be in 1..={VALUES_MAX}, not {0}")]
    Values(u64),
    #[error("probabilities must be in [0, 1], not {0}")]
    Probability(f64),
    #[error("attempts_max must be at least 1")]
    Attempts,
}

const LEARNERS_MAX: u16 = 64;
const VALUES_MAX: u64 = 100_000;

impl NetpaxosConfig {
    /// 100 values, 3 learners, queue positions, recovery on, no loss or reordering.
    pub fn new(seed: u64) -> NetpaxosConfig {
        NetpaxosConfig {
            seed,
            values: 100,
            learners: 3,
            numbering: Numbering::QueuePosition,
            recovery: true,
            send_interval: Duration::from_micros(2),
            link_latency: Duration::from_micros(5),
            link_jitter: Duration::from_micros(1),
            reorder_probability: 0.0,
            reorder_delay: Duration::from_micros(5),
            loss_probability: 0.0,
            faulty_links: FaultyLinks::Both,
            stall_timeout: Duration::from_micros(100),
            retry_timeout: Duration::from_millis(2),
            attempts_max: 5,
            time_max: Duration::from_secs(1),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(2..=LEARNERS_MAX).contains(&self.learners) {
            return Err(ConfigError::Learners(self.learners));
        }
        if !(1..=VALUES_MAX).contains(&self.values) {
            return Err(ConfigError::Values(self.values));
        }
        for p in [self.reorder_probability, self.loss_probability] {
            if !(0.0..=1.0).contains(&p) {
                return Err(ConfigError::Probability(p));
            }
        }
        if self.attempts_max == 0 {
            return Err(ConfigError::Attempts);
        }
        Ok(())
    }

    /// Instances a storage server, the coordinator or a learner's queue may hold: every
    /// submission of every value.
    fn instances_max(&self) -> usize {
        (self.values * u64::from(self.attempts_max)) as usize
    }
}

/// Runs one simulation.
pub fn simulate(config: &NetpaxosConfig) -> Result<NetpaxosReport, ConfigError> {
    config.validate()?;
    let mut sim = Sim::new(config);
    sim.run();
    Ok(build_report(
        config,
        &sim.nodes,
        sim.counters,
        sim.now,
        sim.truncated,
    ))
}

/// Every participant of one run.
pub(super) struct Nodes {
    pub proposer: Proposer,
    pub serializer: Serializer,
    pub minions: Vec<Minion>,
    pub storages: Vec<Storage>,
    pub learners: Vec<FastLearner>,
    pub coordinator: RecoveryCoordinator,
}

/// Messages counted by the network.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Counters {
    pub sent: u64,
    pub lost: u64,
    pub reordered: u64,
}

#[derive(Debug)]
enum Event {
    Deliver { to: NodeId, msg: Msg },
    Timer { node: NodeId },
}

struct Sim<'a> {
    config: &'a NetpaxosConfig,
    now: Instant,
    rng: SplitMix,
    /// (time, sequence) keys; the sequence makes ties deterministic.
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Event>,
    sequence: u64,
    /// The last delivery time per link, which keeps a link FIFO.
    link_busy_until: HashMap<(NodeId, NodeId), Instant>,
    armed: HashMap<NodeId, Instant>,
    nodes: Nodes,
    counters: Counters,
    truncated: bool,
}

impl<'a> Sim<'a> {
    fn new(config: &'a NetpaxosConfig) -> Sim<'a> {
        let instances_max = config.instances_max();
        let learner = |id| LearnerConfig {
            id,
            numbering: config.numbering,
            recovery: config.recovery,
            stall_timeout: config.stall_timeout,
            votes_buffered_max: instances_max,
        };
        let proposer = ProposerConfig {
            values: config.values,
            learners: config.learners,
            send_interval: config.send_interval,
            retry_timeout: config.retry_timeout,
            attempts_max: config.attempts_max,
        };
        let nodes = Nodes {
            proposer: Proposer::new(proposer, Instant::ZERO),
            serializer: Serializer::new(),
            minions: (0..MINIONS as u8)
                .map(|m| Minion::new(m, config.learners, config.numbering))
                .collect(),
            storages: (0..MINIONS as u8)
                .map(|m| Storage::new(m, config.numbering, instances_max))
                .collect(),
            learners: (0..config.learners)
                .map(|l| FastLearner::new(learner(l)))
                .collect(),
            coordinator: RecoveryCoordinator::new(config.learners, instances_max),
        };
        let mut sim = Sim {
            config,
            now: Instant::ZERO,
            rng: SplitMix::new(config.seed),
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            sequence: 0,
            link_busy_until: HashMap::new(),
            armed: HashMap::new(),
            nodes,
            counters: Counters::default(),
            truncated: false,
        };
        sim.rearm(NodeId::Proposer);
        sim
    }

    fn run(&mut self) {
        let end = Instant::ZERO + self.config.time_max;
        while let Some(Reverse((at_ns, sequence))) = self.queue.pop() {
            let event = self.events.remove(&sequence).expect("every key has its event");
            let at = Instant::from_nanos(at_ns);
            if at > end {
                self.truncated = true;
                return;
            }
            assert!(at >= self.now, "time goes forward");
            self.now = at;
            match event {
                Event::Deliver { to, msg } => self.deliver(to, msg),
                Event::Timer { node } => self.fire(node, at),
            }
        }
    }

    fn deliver(&mut self, to: NodeId, msg: Msg) {
        let now = self.now;
        let nodes = &mut self.nodes;
        match to {
            NodeId::Proposer => nodes.proposer.handle(msg),
            NodeId::Serializer => nodes.serializer.handle(msg),
            NodeId::Minion(m) => nodes.minions[m as usize].handle(msg),
            NodeId::Storage(m) => nodes.storages[m as usize].handle(msg),
            NodeId::Learner(l) => {
                let learner = &mut nodes.learners[l as usize];
                learner.handle(now, msg);
                // The report reads `decided()`; the events are drained to keep memory bounded.
                while learner.poll_decision().is_some() {}
            }
            NodeId::RecoveryCoordinator => nodes.coordinator.handle(msg),
        }
        self.flush(to);
        self.rearm(to);
    }

    fn fire(&mut self, node: NodeId, at: Instant) {
        if self.armed.get(&node) != Some(&at) {
            return; // Re-armed since: this timer is stale.
        }
        self.armed.remove(&node);
        match node {
            NodeId::Proposer => self.nodes.proposer.handle_timeout(at),
            NodeId::Learner(l) => self.nodes.learners[l as usize].handle_timeout(at),
            _ => {}
        }
        self.flush(node);
        self.rearm(node);
    }

    /// Sends everything `node` has to send.
    fn flush(&mut self, node: NodeId) {
        while let Some(transmit) = self.poll_transmit(node) {
            self.send(node, transmit);
        }
    }

    fn poll_transmit(&mut self, node: NodeId) -> Option<Transmit> {
        let nodes = &mut self.nodes;
        match node {
            NodeId::Proposer => nodes.proposer.poll_transmit(),
            NodeId::Serializer => nodes.serializer.poll_transmit(),
            NodeId::Minion(m) => nodes.minions[m as usize].poll_transmit(),
            NodeId::Storage(m) => nodes.storages[m as usize].poll_transmit(),
            NodeId::Learner(l) => nodes.learners[l as usize].poll_transmit(),
            NodeId::RecoveryCoordinator => nodes.coordinator.poll_transmit(),
        }
    }

    fn rearm(&mut self, node: NodeId) {
        let deadline = match node {
            NodeId::Proposer => self.nodes.proposer.poll_timeout(),
            NodeId::Learner(l) => self.nodes.learners[l as usize].poll_timeout(),
            _ => None,
        };
        let Some(deadline) = deadline else {
            self.armed.remove(&node);
            return;
        };
        if self.armed.get(&node) == Some(&deadline) {
            return;
        }
        self.armed.insert(node, deadline);
        self.schedule(deadline.max(self.now), Event::Timer { node });
    }

    fn send(&mut self, from: NodeId, transmit: Transmit) {
        self.counters.sent += 1;
        let faulty = self.is_faulty(from, transmit.to);
        if faulty && self.rng.chance(self.config.loss_probability) {
            self.counters.lost += 1;
            return;
        }
        let jitter_ns = self.rng.next_u64() % (self.config.link_jitter.as_nanos() + 1);
        let mut at = self.now + self.config.link_latency + Duration::from_nanos(jitter_ns);
        if faulty && self.rng.chance(self.config.reorder_probability) {
            // Held back and not counted in the link's FIFO order: later messages overtake it.
            self.counters.reordered += 1;
            at += self.config.reorder_delay;
        } else {
            let busy = self
                .link_busy_until
                .entry((from, transmit.to))
                .or_insert(Instant::ZERO);
            at = at.max(*busy);
            *busy = at;
        }
        self.schedule(
            at,
            Event::Deliver {
                to: transmit.to,
                msg: transmit.msg,
            },
        );
    }

    fn is_faulty(&self, from: NodeId, to: NodeId) -> bool {
        let serializer_minion = matches!((from, to), (NodeId::Serializer, NodeId::Minion(_)));
        let minion_learner = matches!((from, to), (NodeId::Minion(_), NodeId::Learner(_)));
        match self.config.faulty_links {
            FaultyLinks::SerializerToMinion => serializer_minion,
            FaultyLinks::MinionToLearner => minion_learner,
            FaultyLinks::Both => serializer_minion || minion_learner,
        }
    }

    fn schedule(&mut self, at: Instant, event: Event) {
        self.sequence += 1;
        self.queue.push(Reverse((at.as_nanos(), self.sequence)));
        self.events.insert(self.sequence, event);
    }
}
