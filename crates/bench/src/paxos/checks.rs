//! The checks of a Paxos run, from outside the protocol: agreement (no two replicas decided
//! different values for one instance), validity (every value decided was a client's request,
//! or a no-op), durability (every answered write is in the state of every live replica that
//! applied past it, which the linearizability check covers) and linearizability of the
//! clients' history.

use super::replica::{Decided, ReplicaHost};
use onepipe_check::{HistoryRecord, check_linearizable};
use onepipe_kv::replicated::Envelope;
use std::collections::HashMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Checks {
    /// `None` when a decided log was not recorded whole.
    pub agreement: Option<bool>,
    pub validity: Option<bool>,
    /// `None` when the history was not recorded whole.
    pub linearizable: Option<bool>,
    /// Every live replica ended at the same instance of every partition with the same state
    /// (digest of keys, values and sessions).
    pub converged: Option<bool>,
    /// The first problem found, for the report.
    pub problem: Option<String>,
    /// Instances decided by the replica that decided most.
    pub decided_max: u64,
    pub noops: u64,
}

impl Checks {
    pub fn ok(&self) -> bool {
        [self.agreement, self.validity, self.linearizable]
            .iter()
            .all(|c| *c != Some(false))
    }

    pub fn judge(
        history: &[HistoryRecord],
        unrecorded: u64,
        replicas: &[ReplicaHost],
        alive: &[bool],
    ) -> Checks {
        let mut c = Checks::default();
        let whole = replicas.iter().all(|r| r.decided_unrecorded == 0);
        if whole {
            match agreement(replicas.iter().map(|r| &r.decided[..])) {
                Ok(()) => c.agreement = Some(true),
                Err(e) => {
                    c.agreement = Some(false);
                    c.problem.get_or_insert(e);
                }
            }
        }
        c.decided_max = replicas.iter().map(|r| r.decided.len() as u64).max().unwrap_or(0);
        c.noops = replicas
            .iter()
            .map(|r| r.learner.counters().noops)
            .max()
            .unwrap_or(0);
        let malformed: u64 = replicas
            .iter()
            .flat_map(|r| r.partitions().iter())
            .map(|p| p.counters().malformed)
            .sum();
        c.validity = Some(malformed == 0);
        if malformed > 0 {
            c.problem
                .get_or_insert(format!("{malformed} decided values were not requests"));
        }
        if let Some((i, e)) = replicas
            .iter()
            .enumerate()
            .find_map(|(i, r)| r.store_error.as_ref().filter(|_| alive[i]).map(|e| (i, e)))
        {
            c.problem
                .get_or_insert(format!("replica {i}'s store failed: {e}"));
        }
        match converged(replicas, alive) {
            Ok(()) => c.converged = Some(true),
            Err(e) => {
                c.converged = Some(false);
                c.problem.get_or_insert(e);
            }
        }
        if unrecorded == 0 {
            match check_linearizable(history) {
                Ok(report) if report.ok() => c.linearizable = Some(true),
                Ok(report) => {
                    c.linearizable = Some(false);
                    c.problem
                        .get_or_insert(format!("history not linearizable: {report:?}"));
                }
                Err(e) => {
                    c.linearizable = Some(false);
                    c.problem.get_or_insert(format!("history unreadable: {e}"));
                }
            }
        }
        c
    }
}

/// The live replicas stand at the same instance with the same state, partition by partition.
fn converged(replicas: &[ReplicaHost], alive: &[bool]) -> Result<(), String> {
    let live: Vec<(usize, &ReplicaHost)> = replicas.iter().enumerate().filter(|(i, _)| alive[*i]).collect();
    let Some(&(first, reference)) = live.first() else {
        return Ok(());
    };
    for (pid, state) in reference.partitions().iter().enumerate() {
        let digest = |s: &onepipe_kv::replicated::PartitionState| s.state_digest().map_err(|e| e.to_string());
        let expected = (state.next_instance(), digest(state)?);
        for &(i, r) in &live[1..] {
            let other = r.partitions().get(pid).ok_or("a replica lacks a partition")?;
            let got = (other.next_instance(), digest(other)?);
            if got != expected {
                return Err(format!(
                    "replicas {first} and {i} differ in partition {pid}: at instance {} (digest {:x}) and {} (digest {:x})",
                    expected.0, expected.1, got.0, got.1
                ));
            }
        }
    }
    Ok(())
}

/// No two logs hold different values for one `(pid, inst)`.
pub fn agreement<'a>(logs: impl Iterator<Item = &'a [Decided]>) -> Result<(), String> {
    let mut chosen: HashMap<(u16, u64), (usize, u64)> = HashMap::new();
    for (replica, log) in logs.enumerate() {
        for d in log {
            if let Some(&(other, hash)) = chosen.get(&(d.pid, d.inst)) {
                if hash != d.hash {
                    return Err(format!(
                        "replicas {other} and {replica} decided different values for instance {} of partition {}",
                        d.inst, d.pid
                    ));
                }
            } else {
                chosen.insert((d.pid, d.inst), (replica, d.hash));
            }
        }
    }
    Ok(())
}

/// Whether decided bytes are a client's request (an envelope) or the no-op.
pub fn is_valid_value(v: &[u8]) -> bool {
    v.is_empty() || Envelope::decode(v).is_ok()
}
