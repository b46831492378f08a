//! The controller's whole state as one value, for compacting its log ([`super::store`]).
//!
//! The log of inputs grows with every registration, report and tick; replaying it all on
//! every start costs time and the log costs space without end. A [`Snapshot`] is everything
//! the controller would rebuild from the records before it, so a log may replace those
//! records with it: replaying the snapshot and then the records after it gives the same
//! controller as replaying everything ([`tests::replaying_a_compacted_log_gives_the_same_controller`]).
//! The graph and the configuration are not in it: a restarted controller is built from the
//! same topology and configuration, and [`Controller::restore`] checks that the snapshot fits
//! its graph, since a log is a file that may be damaged.
//!
//! Outputs waiting to be polled are not in it either: a controller opened on a log sends what
//! a controller taking over must send ([`Controller::take_over`]), and drops the rest.

use super::forward::Forwards;
use super::graph::End;
use super::implausible::ImplausibleLinks;
use super::recovery::Recoveries;
use super::{Controller, ControllerCounters, Epoch};
use onepipe_wire::Instant;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Everything a [`Controller`] decides from (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    registered: Vec<bool>,
    #[serde(with = "ns::vec_pair")]
    reports: Vec<[Option<Instant>; 2]>,
    down: Vec<bool>,
    undecided: BTreeSet<usize>,
    #[serde(with = "ns::vec_opt")]
    failed: Vec<Option<Instant>>,
    #[serde(with = "ns::map")]
    cuts: BTreeMap<usize, Instant>,
    #[serde(with = "ns::map", default)]
    cuts_sent: BTreeMap<usize, Instant>,
    #[serde(default)]
    switches_failed: BTreeSet<usize>,
    epochs: Vec<Epoch>,
    #[serde(with = "ns::opt")]
    decide_at: Option<Instant>,
    reroute: bool,
    sourceless: BTreeSet<End>,
    counters: ControllerCounters,
    recovery: Recoveries,
    forwards: Forwards,
    #[serde(with = "ns::entries")]
    implausible: ImplausibleLinks,
}

/// Why a snapshot cannot be restored into a controller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("controller snapshot does not fit the topology: {0}")]
pub struct SnapshotError(pub String);

impl Controller {
    /// The controller's state now (see the module documentation).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            registered: self.registered.clone(),
            reports: self.reports.clone(),
            down: self.down.clone(),
            undecided: self.undecided.clone(),
            failed: self.failed.clone(),
            cuts: self.cuts.clone(),
            cuts_sent: self.cuts_sent.clone(),
            switches_failed: self.switches_failed.clone(),
            epochs: self.epochs.clone(),
            decide_at: self.decide_at,
            reroute: self.reroute,
            sourceless: self.sourceless.clone(),
            counters: self.counters.clone(),
            recovery: self.recovery.clone(),
            forwards: self.forwards.clone(),
            implausible: self.implausible.clone(),
        }
    }

    /// Takes the state of `snapshot`, dropping outputs not yet polled. A snapshot that names
    /// links, processes or switches this controller's graph lacks is refused and nothing
    /// changes: indexing by them later would panic.
    pub fn restore(&mut self, snapshot: Snapshot) -> Result<(), SnapshotError> {
        self.check_snapshot(&snapshot)?;
        let s = snapshot;
        self.registered = s.registered;
        self.reports = s.reports;
        self.down = s.down;
        self.undecided = s.undecided;
        self.failed = s.failed;
        self.cuts = s.cuts;
        // A snapshot written before resends were kept: each cut counts as sent when asked.
        self.cuts_sent = match s.cuts_sent.keys().eq(self.cuts.keys()) {
            true => s.cuts_sent,
            false => self.cuts.clone(),
        };
        self.switches_failed = s.switches_failed;
        self.epochs = s.epochs;
        self.decide_at = s.decide_at;
        self.reroute = s.reroute;
        self.sourceless = s.sourceless;
        self.counters = s.counters;
        self.recovery = s.recovery;
        self.forwards = s.forwards;
        self.implausible = s.implausible;
        self.outputs.clear();
        self.invariants();
        Ok(())
    }

    fn check_snapshot(&self, s: &Snapshot) -> Result<(), SnapshotError> {
        let (links, processes) = (self.graph.link_count(), self.graph.process_count());
        let switches = self.graph.switch_count();
        let bad = |why: String| Err(SnapshotError(why));
        for (what, len, expected) in [
            ("registered", s.registered.len(), processes),
            ("failed", s.failed.len(), processes),
            ("reports", s.reports.len(), links),
            ("down", s.down.len(), links),
        ] {
            if len != expected {
                return bad(format!("{len} entries in `{what}`, {expected} expected"));
            }
        }
        if let Some(&l) = s.undecided.iter().find(|&&l| l >= links || !s.down[l]) {
            return bad(format!("undecided link {l} is not a link down"));
        }
        if let Some(&l) = s.cuts.keys().find(|&&l| l >= links) {
            return bad(format!("cut of link {l}, of {links}"));
        }
        if let Some(&sw) = s.switches_failed.iter().find(|&&sw| sw >= switches) {
            return bad(format!("failed switch {sw}, of {switches} switches"));
        }
        if let Some(e) = s.sourceless.iter().find(|e| e.node >= switches) {
            return bad(format!(
                "sourceless input at node {}, of {switches} switches",
                e.node
            ));
        }
        for (i, e) in s.epochs.iter().enumerate() {
            let process_ok = |p: u32| (p as usize) < processes;
            let ok = e.failures.iter().all(|f| process_ok(f.process))
                && e.awaiting.iter().all(|&p| process_ok(p))
                && e.inputs.keys().all(|&sw| sw < switches);
            if !ok {
                return bad(format!("epoch {i} names a process or switch that does not exist"));
            }
        }
        if let Some(&(l, e)) = s.implausible.keys().find(|&&(l, e)| l >= links || e > 1) {
            return bad(format!(
                "implausible-time report of end {e} of link {l}, of {links}"
            ));
        }
        s.recovery
            .check(processes, s.epochs.len())
            .and_then(|()| s.forwards.check(processes))
            .map_err(SnapshotError)
    }
}

/// Serde for the [`Instant`]s of the snapshot, as nanoseconds (the wire crate has no serde).
mod ns {
    use onepipe_wire::Instant;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    fn to_ns(t: &Option<Instant>) -> Option<u64> {
        t.map(Instant::as_nanos)
    }

    fn of_ns(t: Option<u64>) -> Option<Instant> {
        t.map(Instant::from_nanos)
    }

    pub mod opt {
        use super::*;
        pub fn serialize<S: Serializer>(t: &Option<Instant>, s: S) -> Result<S::Ok, S::Error> {
            to_ns(t).serialize(s)
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Instant>, D::Error> {
            Option::<u64>::deserialize(d).map(of_ns)
        }
    }

    pub mod vec_opt {
        use super::*;
        pub fn serialize<S: Serializer>(v: &[Option<Instant>], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(v.iter().map(to_ns))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Option<Instant>>, D::Error> {
            Vec::<Option<u64>>::deserialize(d).map(|v| v.into_iter().map(of_ns).collect())
        }
    }

    pub mod vec_pair {
        use super::*;
        type Pair = [Option<Instant>; 2];
        pub fn serialize<S: Serializer>(v: &[Pair], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(v.iter().map(|[a, b]| [to_ns(a), to_ns(b)]))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Pair>, D::Error> {
            let v = Vec::<[Option<u64>; 2]>::deserialize(d)?;
            Ok(v.into_iter().map(|[a, b]| [of_ns(a), of_ns(b)]).collect())
        }
    }

    /// A map whose keys are not strings (JSON's only keys), as a list of entries.
    pub mod entries {
        use super::*;
        use serde::de::DeserializeOwned;
        pub fn serialize<K: Serialize, V: Serialize, S: Serializer>(
            m: &BTreeMap<K, V>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_seq(m.iter())
        }
        pub fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
        where
            K: DeserializeOwned + Ord,
            V: DeserializeOwned,
            D: Deserializer<'de>,
        {
            Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
        }
    }

    pub mod map {
        use super::*;
        pub fn serialize<S: Serializer>(m: &BTreeMap<usize, Instant>, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(m.iter().map(|(k, t)| (k, t.as_nanos())))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<usize, Instant>, D::Error> {
            let m = BTreeMap::<usize, u64>::deserialize(d)?;
            Ok(m.into_iter().map(|(k, t)| (k, Instant::from_nanos(t))).collect())
        }
    }
}

#[cfg(test)]
mod tests;
