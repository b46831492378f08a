//! Receiver Recovery (paper 5.2): a process declared failed that comes back.
//!
//! "The controller notifies process of its own failure. Then, the process contacts controller
//! to get host failure notifications since its failure and undeliverable recall messages.
//! After delivering buffered messages, the recovered process needs to join 1Pipe as a new
//! process." Here:
//! - **Heard again.** Its ToR quarantined its input at Resume and tells the controller when a
//!   frame comes in on it ([`Input::Heard`]); or the process registers again (a restart, or
//!   a controller's Hello). Either way it gets [`Output::OwnFailure`].
//! - **Undeliverable recalls.** A correct sender that aborts a scattering with a message to a
//!   failed receiver cannot recall it there, and reports it ([`Input::RecallLost`]) before it
//!   answers the announcement. The controller keeps these per failed receiver, at most
//!   [`LOST_RECALLS_MAX`], until that receiver rejoins. They are inputs, so the log keeps them.
//! - **The answer** ([`Input::Recover`], then [`Output::LostRecalls`] and [`Output::Recovery`])
//!   waits until the epoch that declared the process failed is resumed: every correct process
//!   has finished its Recall for it by then, and has no scattering left open that names it,
//!   so no recall for it can come later.
//! - **Rejoining** ([`Input::Rejoin`]) is a new incarnation: the controller forgets the
//!   failure and its records, its ToR takes the input again ([`Output::Readmit`]), and every
//!   correct process restarts its connections to it ([`Output::Rejoined`]). Recording one
//!   failure per incarnation is what the paper's rejoining "as a new process" saves.
//!
//! Inputs for another incarnation, or about a process not failed, are counted and ignored, so
//! repeats and late arrivals change nothing.

use super::{Controller, Failure, Member, Output};
use onepipe_wire::Instant;
use std::collections::{BTreeMap, BTreeSet};

/// Undeliverable recalls kept per failed receiver. A correct sender has at most its send
/// buffer's scatterings open to one receiver, so this is far above what a few senders leave.
pub const LOST_RECALLS_MAX: usize = 1 << 16;

/// Recalls per [`Output::LostRecalls`], so that one fits a management frame.
pub const RECALLS_PER_OUTPUT: usize = 128;

/// A recall a failed receiver could not take: its message (sender, timestamp, id) was
/// aborted and must not be delivered when the receiver recovers. Serialized as
/// `[sender, ts_ns, msg_id]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(into = "(u32, u64, u64)", from = "(u32, u64, u64)")]
pub struct LostRecall {
    pub sender: u32,
    pub ts: Instant,
    pub msg_id: u64,
}

impl From<LostRecall> for (u32, u64, u64) {
    fn from(r: LostRecall) -> (u32, u64, u64) {
        (r.sender, r.ts.as_nanos(), r.msg_id)
    }
}

impl From<(u32, u64, u64)> for LostRecall {
    fn from((sender, ts_ns, msg_id): (u32, u64, u64)) -> LostRecall {
        LostRecall {
            sender,
            ts: Instant::from_nanos(ts_ns),
            msg_id,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryCounters {
    /// Failed processes told of their own failure (each time they were heard again).
    pub notified: u64,
    pub recalls_recorded: u64,
    /// Recall reports beyond [`LOST_RECALLS_MAX`] for one receiver: its recovery is told that
    /// its record is incomplete.
    pub recalls_dropped: u64,
    pub recoveries_answered: u64,
    /// Recover requests from a process whose switch the controller cannot reach.
    pub unreachable: u64,
    pub rejoined: u64,
    /// Recovery inputs about a process not failed, for another incarnation, repeated, or
    /// `Heard` on an input with no failed process behind it.
    pub stale: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Recoveries {
    /// Rejoins so far, per process (absent: none).
    incarnation: BTreeMap<u32, u64>,
    /// The epoch that declared each failed process failed.
    failed_in: BTreeMap<u32, usize>,
    lost: BTreeMap<u32, BTreeSet<LostRecall>>,
    truncated: BTreeSet<u32>,
    /// Failed processes that asked to recover, and of those, the ones answered.
    asked: BTreeSet<u32>,
    answered: BTreeSet<u32>,
    counters: RecoveryCounters,
}

impl Recoveries {
    /// Whether every process and epoch named exists (a snapshot read from a log).
    pub(super) fn check(&self, processes: usize, epochs: usize) -> Result<(), String> {
        let p = |p: &u32| (*p as usize) < processes;
        let ok = self.incarnation.keys().all(p)
            && self.failed_in.iter().all(|(q, &e)| p(q) && e < epochs)
            && self.lost.keys().all(p)
            && self.truncated.iter().all(p)
            && self.asked.iter().all(p)
            && self.answered.iter().all(p);
        if ok {
            Ok(())
        } else {
            Err("a recovery names a process or epoch that does not exist".to_string())
        }
    }
}

impl Controller {
    pub fn recovery_counters(&self) -> &RecoveryCounters {
        &self.recovery.counters
    }

    /// How many times `process` has rejoined: the incarnation its inputs must name.
    pub fn incarnation(&self, process: u32) -> u64 {
        self.recovery.incarnation.get(&process).copied().unwrap_or(0)
    }

    /// The undeliverable recalls recorded for failed `process`, in (sender, timestamp) order.
    pub fn lost_recalls(&self, process: u32) -> Vec<LostRecall> {
        self.recovery
            .lost
            .get(&process)
            .map(|l| l.iter().copied().collect())
            .unwrap_or_default()
    }

    pub(super) fn on_declared(&mut self, failures: &[Failure], epoch: usize) {
        for f in failures {
            self.recovery.failed_in.insert(f.process, epoch);
        }
    }

    /// Paper 5.2: "The controller notifies process of its own failure."
    pub(super) fn notify_own_failure(&mut self, process: u32) {
        let Some(ts) = self.failure_of(process) else {
            return;
        };
        self.recovery.counters.notified += 1;
        let incarnation = self.incarnation(process);
        self.outputs.push_back(Output::OwnFailure {
            to: process,
            ts,
            incarnation,
        });
    }

    pub(super) fn on_heard(&mut self, member: Member, port: u16) -> Result<(), super::ControllerError> {
        let (link, node) = self.link_of(member, port)?;
        match self.process_of_link(link) {
            Some(p) if self.failure_of(p).is_some() => self.notify_own_failure(p),
            Some(_) => self.recovery.counters.stale += 1,
            None => return self.on_switch_link_heard(link, node),
        }
        Ok(())
    }

    pub(super) fn on_recall_lost(&mut self, sender: u32, receiver: u32, ts: Instant, msg_id: u64) {
        if self.failure_of(receiver).is_none() {
            self.recovery.counters.stale += 1;
            return;
        }
        let r = &mut self.recovery;
        let lost = r.lost.entry(receiver).or_default();
        let recall = LostRecall { sender, ts, msg_id };
        if lost.contains(&recall) {
            r.counters.stale += 1;
        } else if lost.len() >= LOST_RECALLS_MAX {
            r.truncated.insert(receiver);
            r.counters.recalls_dropped += 1;
        } else {
            lost.insert(recall);
            r.counters.recalls_recorded += 1;
        }
    }

    /// Whether `process` is failed in incarnation `incarnation`.
    fn is_failed_incarnation(&self, process: u32, incarnation: u64) -> bool {
        self.failure_of(process).is_some() && self.incarnation(process) == incarnation
    }

    pub(super) fn on_recover(&mut self, process: u32, incarnation: u64) {
        if !self.is_failed_incarnation(process, incarnation) {
            self.recovery.counters.stale += 1;
            return;
        }
        if !self.reachable(process) {
            // Its switch is gone: taking it back would make it a member nobody reaches.
            self.recovery.counters.unreachable += 1;
            return;
        }
        self.recovery.asked.insert(process);
        // Asking again (the answer was lost with a controller that stopped) gets it again.
        self.recovery.answered.remove(&process);
        self.answer_recovery(process);
    }

    /// Whether the switch end of `process`'s link is on the controller's side.
    fn reachable(&self, process: u32) -> bool {
        let node = self.graph.node_of_process(process);
        let Some(link) = self.graph.link_at(node, 0) else {
            return false;
        };
        let component = self.graph.components(|l| !self.down[l]);
        let failed = &self.failed;
        let home = self
            .graph
            .controller_component(&component, |p| failed[p as usize].is_none());
        self.graph
            .link(link)
            .ends
            .iter()
            .any(|e| e.node != node && component[e.node] == home)
    }

    /// Answers `process` if the epoch that declared it failed is resumed (see the module
    /// documentation); else resuming that epoch will.
    fn answer_recovery(&mut self, process: u32) {
        let r = &self.recovery;
        if r.answered.contains(&process) || !r.asked.contains(&process) {
            return;
        }
        let (Some(ts), Some(&epoch)) = (self.failure_of(process), r.failed_in.get(&process)) else {
            return;
        };
        if !self.epochs[epoch].resumed {
            return;
        }
        let incarnation = self.incarnation(process);
        let mut seen = BTreeSet::from([process]);
        let mut failures = Vec::new();
        // The first failure of each process since ours; then those failed before, whose
        // announcements a process that failed may have missed too.
        let earlier = self.failures();
        for f in self.epochs[epoch..]
            .iter()
            .flat_map(|e| &e.failures)
            .chain(&earlier)
        {
            if seen.insert(f.process) {
                failures.push(*f);
            }
        }
        let failed_now: Vec<Failure> = earlier.into_iter().filter(|f| f.process != process).collect();
        let lost = self.lost_recalls(process);
        for chunk in lost.chunks(RECALLS_PER_OUTPUT) {
            self.outputs.push_back(Output::LostRecalls {
                to: process,
                incarnation,
                recalls: chunk.to_vec(),
            });
        }
        self.outputs.push_back(Output::Recovery {
            to: process,
            incarnation,
            ts,
            failures,
            failed_now,
            recalls: lost.len() as u32,
            recalls_truncated: self.recovery.truncated.contains(&process),
        });
        self.recovery.answered.insert(process);
        self.recovery.counters.recoveries_answered += 1;
    }

    pub(super) fn answer_waiting_recoveries(&mut self) {
        let asked: Vec<u32> = self.recovery.asked.iter().copied().collect();
        for p in asked {
            self.answer_recovery(p);
        }
    }

    /// A controller taking over answers again every recovery asked and not yet rejoined.
    /// So does every rejoin (its ToR may have missed the readmission, a process the news;
    /// both ignore a repeat).
    pub(super) fn take_over_recoveries(&mut self) {
        self.recovery.answered.clear();
        self.answer_waiting_recoveries();
        let rejoined: Vec<u32> = self
            .recovery
            .incarnation
            .keys()
            .copied()
            .filter(|&p| self.failure_of(p).is_none())
            .collect();
        for p in rejoined {
            let node = self.graph.node_of_process(p);
            if let Some(link) = self.graph.link_at(node, 0)
                && let Some(end) = self.graph.link(link).ends.into_iter().find(|e| e.node != node)
            {
                self.outputs.push_back(Output::Readmit {
                    switch: end.node,
                    ports: vec![end.port],
                });
            }
            self.announce_rejoined(p);
        }
    }

    /// The recovered process joins as a new one (see the module documentation).
    pub(super) fn on_rejoin(&mut self, process: u32, incarnation: u64) {
        if !self.is_failed_incarnation(process, incarnation) || !self.recovery.answered.contains(&process) {
            self.recovery.counters.stale += 1;
            return;
        }
        self.failed[process as usize] = None;
        self.registered[process as usize] = true;
        let r = &mut self.recovery;
        r.incarnation.insert(process, incarnation + 1);
        r.failed_in.remove(&process);
        r.lost.remove(&process);
        r.truncated.remove(&process);
        r.asked.remove(&process);
        r.answered.remove(&process);
        r.counters.rejoined += 1;
        let node = self.graph.node_of_process(process);
        let mut readmit: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
        if let Some(link) = self.graph.link_at(node, 0) {
            // Its link is in use again: a later failure of it is a new failure.
            self.down[link] = false;
            self.reports[link] = [None; 2];
            self.undecided.remove(&link);
            self.cuts.remove(&link);
            for end in self.graph.link(link).ends {
                if end.node != node {
                    readmit.entry(end.node).or_default().push(end.port);
                }
            }
        }
        // Switches removed from the commit lane because nothing behind them could send: the
        // process sends through them again.
        let (down, failed) = (&self.down, &self.failed);
        let still = self
            .graph
            .sourceless_inputs(|l| !down[l], |p| failed[p as usize].is_none());
        let back: Vec<_> = self
            .sourceless
            .iter()
            .filter(|e| !still.contains(e))
            .copied()
            .collect();
        for end in back {
            self.sourceless.remove(&end);
            readmit.entry(end.node).or_default().push(end.port);
        }
        for (switch, ports) in readmit {
            self.outputs.push_back(Output::Readmit { switch, ports });
        }
        self.announce_rejoined(process);
    }

    fn announce_rejoined(&mut self, process: u32) {
        let incarnation = self.incarnation(process);
        for to in 0..self.graph.process_count() as u32 {
            if to != process && self.registered[to as usize] && self.failed[to as usize].is_none() {
                self.outputs.push_back(Output::Rejoined {
                    to,
                    process,
                    incarnation,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;
