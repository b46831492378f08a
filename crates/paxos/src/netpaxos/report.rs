//! What a simulation run ends with, in plain fields (the CLI prints them).

use super::sim::{Counters, NetpaxosConfig, Nodes};
use super::{Instance, Value};
use onepipe_wire::Instant;
use std::collections::HashSet;

/// The result of [`simulate`](super::simulate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetpaxosReport {
    pub seed: u64,
    /// Values proposed, `0..values`.
    pub values: u64,
    /// Per learner, the decided value of each instance, in instance order.
    pub decided: Vec<Vec<Value>>,
    /// Per learner, the values delivered: `decided` without the no-ops (repeated values).
    pub delivered: Vec<Vec<Value>>,
    /// Instances for which two learners decided different values.
    pub disagreements: u64,
    /// Decisions taken on the fast path, summed over learners.
    pub fast_decisions: u64,
    /// Decisions delivered from recovery, summed over learners.
    pub recovered_decisions: u64,
    /// Instances the recovery coordinator recovered.
    pub recoveries: u64,
    /// Instances still in recovery at the end (storage servers that never got a vote).
    pub recoveries_unfinished: u64,
    /// Decided instances whose value was delivered before, summed over learners.
    pub noops: u64,
    /// (learner, value) pairs with the value never delivered by that learner.
    pub undecided: u64,
    /// Instances where a learner's heads could not reach a fast quorum, summed over learners.
    pub conflicts: u64,
    /// Instances that stalled past the learner's timeout, summed over learners.
    pub stall_timeouts: u64,
    /// Recovered decisions contradicting a learner's own earlier decision.
    pub recovery_contradictions: u64,
    /// Proposer submissions after the first, and values it gave up.
    pub resubmitted: u64,
    pub abandoned: u64,
    pub messages_sent: u64,
    pub messages_lost: u64,
    pub messages_reordered: u64,
    /// Virtual time of the last event.
    pub end_time: Instant,
    /// The run hit `time_max` with events left.
    pub truncated: bool,
}

/// Two learners decided different values for one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instance {instance}: learner {learner_a} decided {value_a}, learner {learner_b} decided {value_b}")]
pub struct Disagreement {
    pub instance: Instance,
    pub learner_a: u16,
    pub value_a: Value,
    pub learner_b: u16,
    pub value_b: Value,
}

impl NetpaxosReport {
    /// The first instance where two learners decided differently.
    pub fn check_agreement(&self) -> Result<(), Disagreement> {
        match disagreements(&self.decided).next() {
            Some(d) => Err(d),
            None => Ok(()),
        }
    }

    /// Every learner delivered every value.
    pub fn all_delivered(&self) -> bool {
        self.undecided == 0
    }
}

/// For each instance with two different decisions, the first pair found.
fn disagreements(decided: &[Vec<Value>]) -> impl Iterator<Item = Disagreement> + '_ {
    let instances = decided.iter().map(Vec::len).max().unwrap_or(0);
    (0..instances).filter_map(move |i| {
        let mut by_learner = decided
            .iter()
            .enumerate()
            .filter_map(|(l, log)| log.get(i).map(|v| (l, *v)));
        let (learner_a, value_a) = by_learner.next()?;
        let (learner_b, value_b) = by_learner.find(|(_, v)| *v != value_a)?;
        Some(Disagreement {
            instance: i as Instance,
            learner_a: learner_a as u16,
            value_a,
            learner_b: learner_b as u16,
            value_b,
        })
    })
}

pub(super) fn build_report(
    config: &NetpaxosConfig,
    nodes: &Nodes,
    counters: Counters,
    end_time: Instant,
    truncated: bool,
) -> NetpaxosReport {
    let decided: Vec<Vec<Value>> = nodes.learners.iter().map(|l| l.decided().to_vec()).collect();
    let delivered: Vec<Vec<Value>> = decided.iter().map(|log| without_repeats(log)).collect();
    let undecided = delivered
        .iter()
        .map(|log| {
            let got: HashSet<Value> = log.iter().copied().collect();
            (0..config.values).filter(|v| !got.contains(v)).count() as u64
        })
        .sum();
    let stats: Vec<_> = nodes.learners.iter().map(|l| l.stats()).collect();
    let sum = |f: fn(&super::LearnerStats) -> u64| stats.iter().map(f).sum::<u64>();
    NetpaxosReport {
        seed: config.seed,
        values: config.values,
        disagreements: disagreements(&decided).count() as u64,
        fast_decisions: sum(|s| s.fast_decisions),
        recovered_decisions: sum(|s| s.recovered_decisions),
        recoveries: nodes.coordinator.recoveries(),
        recoveries_unfinished: nodes.coordinator.in_progress() as u64,
        noops: sum(|s| s.noops),
        undecided,
        conflicts: sum(|s| s.conflicts),
        stall_timeouts: sum(|s| s.stall_timeouts),
        recovery_contradictions: sum(|s| s.recovery_contradictions),
        resubmitted: nodes.proposer.resubmitted(),
        abandoned: nodes.proposer.abandoned(),
        messages_sent: counters.sent,
        messages_lost: counters.lost,
        messages_reordered: counters.reordered,
        end_time,
        truncated,
        decided,
        delivered,
    }
}

fn without_repeats(log: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    log.iter().copied().filter(|v| seen.insert(*v)).collect()
}
