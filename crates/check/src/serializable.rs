//! Serializability of a transactional key-value history: is there one order of the committed
//! transactions, each applied whole, in which every key behaves as a register and every
//! committed read returns what the register held?
//!
//! Operations carrying the same `client` and `txn` form one transaction (see
//! [`HistoryRecord::txn`]); a record without `txn` is a transaction of its own. Outcomes apply to
//! whole transactions: `ok` took effect, `fail` did not, `unknown` took effect exactly when a
//! committed read saw one of its values (then all of it did). Reads of transactions that are not
//! `ok` constrain nothing. A cas is a read of `expect` then a write of `value`; a delete writes
//! absent. Written values must be unique per key, so that a value names its writer.
//!
//! Two ways to decide, chosen by the history:
//! - Every applied transaction carries `ts` (the store's claimed serialization point): the
//!   check replays them in `(ts, client, txn)` order on one register per key, initially absent,
//!   and compares every committed read with the register; when `strict`, it also checks that the
//!   claimed order respects real time. Passing proves the history serializable (strictly so when
//!   `strict`). Failing means the history is not serializable *or* the store's claimed order is
//!   wrong: both are bugs of the store, and the violation names the read or pair that shows it.
//! - Otherwise: the check builds the dependency graph of what the history makes certain (module
//!   `graph`) and looks for a cycle. A cycle or a bad read proves the history not serializable;
//!   without one the verdict stays [`SerializabilityVerdict::Unknown`], since the graph misses
//!   some orders (see docs/histories.md).
//!
//! Time and memory are linear in the operations, plus a sort (n log n).
//!
//! ```
//! use onepipe_check::{HistoryRecord, OpKind, Outcome, SerializabilityVerdict, check_serializable};
//!
//! let op = |client, txn, op, key: &str, value: Option<&str>, ts| HistoryRecord {
//!     client,
//!     op,
//!     key: key.to_owned(),
//!     value: value.map(str::to_owned),
//!     expect: None,
//!     outcome: Outcome::Ok,
//!     call_ns: 0,
//!     return_ns: 10,
//!     txn: Some(txn),
//!     ts: Some(ts),
//! };
//! // Transaction 1 writes x and y; transaction 2, serialized after it, sees only half of it.
//! let history = [
//!     op(1, 1, OpKind::Write, "x", Some("x1"), 5),
//!     op(1, 1, OpKind::Write, "y", Some("y1"), 5),
//!     op(2, 1, OpKind::Read, "x", Some("x1"), 7),
//!     op(2, 1, OpKind::Read, "y", None, 7),
//! ];
//! let report = check_serializable(&history)?;
//! assert_eq!(report.verdict, SerializabilityVerdict::NotSerializable);
//! # Ok::<(), onepipe_check::SerializabilityError>(())
//! ```

mod graph;
mod replay;
mod txns;
mod writes;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

use crate::history::{HistoryError, HistoryRecord, Outcome};
use txns::Txns;
use writes::Writes;

/// Default [`SerializabilityConfig::violations_max`].
pub const VIOLATIONS_MAX: usize = 16;

/// Most transactions a [`TxnViolation::Cycle`] lists.
pub const CYCLE_STEPS_MAX: usize = 32;

/// How to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SerializabilityConfig {
    /// Strict serializability: a committed transaction that returned before another was called
    /// also comes before it.
    pub strict: bool,
    /// Violations the report keeps; the rest are only counted.
    pub violations_max: usize,
}

impl Default for SerializabilityConfig {
    fn default() -> Self {
        SerializabilityConfig {
            strict: true,
            violations_max: VIOLATIONS_MAX,
        }
    }
}

/// The verdict over a whole history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SerializabilityVerdict {
    /// The replay in the claimed order explains every committed read.
    Serializable,
    /// A violation proves that no order (or: not the claimed order) explains the history.
    NotSerializable,
    /// No violation found, but nothing proves the history serializable either; `reason` says why.
    Unknown,
}

impl SerializabilityVerdict {
    /// The snake_case name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            SerializabilityVerdict::Serializable => "serializable",
            SerializabilityVerdict::NotSerializable => "not_serializable",
            SerializabilityVerdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for SerializabilityVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which way the check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SerializabilityMethod {
    /// Replay in the claimed `(ts, client, txn)` order: every applied transaction carries `ts`.
    TimestampReplay,
    /// Cycles in the dependency graph: some applied transaction has no `ts`.
    DependencyGraph,
    /// Neither: the history cannot be judged (a value written twice to one key).
    None,
}

/// A transaction, as a report names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TxnRef {
    pub client: u64,
    /// `None`: a record without `txn`, a transaction of its own.
    pub txn: Option<u64>,
    pub ts: Option<u64>,
    pub outcome: Outcome,
    /// Index of its first record in the history.
    pub record: usize,
}

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client {} txn ", self.client)?;
        match self.txn {
            Some(txn) => write!(f, "{txn}")?,
            None => write!(f, "-")?,
        }
        if let Some(ts) = self.ts {
            write!(f, " ts {ts}")?;
        }
        write!(f, " ({}, record {})", self.outcome.as_str(), self.record)
    }
}

/// How one transaction depends on the next in a cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dependency {
    /// The next one read a value this one wrote.
    WriteRead,
    /// The next one overwrote the version of `key` this one read.
    ReadWrite,
    /// Both wrote `key`, this one first (it read the initial state).
    WriteWrite,
    /// This one, committed, returned before the next one was called.
    RealTime,
}

/// One transaction of a cycle and its dependency on the next (the last one's on the first).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CycleStep {
    pub txn: TxnRef,
    pub dependency: Dependency,
    /// The key of the dependency; `None` for real time.
    pub key: Option<String>,
}

/// Something no serialization explains. Values are `None` for absent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TxnViolation {
    /// A committed read of a value no transaction wrote.
    GarbageRead {
        reader: TxnRef,
        key: String,
        value: String,
    },
    /// A committed read of a value only a failed transaction wrote.
    AbortedRead {
        reader: TxnRef,
        writer: TxnRef,
        key: String,
        value: String,
    },
    /// A committed read of a value its writer overwrote itself before it ended.
    IntermediateRead {
        reader: TxnRef,
        writer: TxnRef,
        key: String,
        value: String,
    },
    /// A read of a value its own transaction writes only later.
    FutureRead {
        reader: TxnRef,
        key: String,
        value: String,
    },
    /// A read after its own transaction wrote the key that does not return that write.
    InternalRead {
        reader: TxnRef,
        key: String,
        value: Option<String>,
        own_write: Option<String>,
    },
    /// A committed read that differs from the replay in the claimed order, which held
    /// `replayed`.
    ReplayMismatch {
        reader: TxnRef,
        key: String,
        value: Option<String>,
        replayed: Option<String>,
    },
    /// `earlier` (committed) returned before `later` was called, but the claimed order puts
    /// `later` first.
    RealTime { earlier: TxnRef, later: TxnRef },
    /// Transactions each of which must precede the next. `length` transactions; `steps` lists
    /// at most [`CYCLE_STEPS_MAX`].
    Cycle { steps: Vec<CycleStep>, length: usize },
}

impl fmt::Display for TxnViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&line)
    }
}

/// The violations found: the first `max` kept, all counted.
#[derive(Debug)]
struct Violations {
    list: Vec<TxnViolation>,
    total: u64,
    max: usize,
}

/// What [`check_serializable`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SerializabilityReport {
    pub verdict: SerializabilityVerdict,
    pub method: SerializabilityMethod,
    pub transactions: u64,
    /// Transactions that took effect: the committed ones and `unknown_applied`.
    pub applied: u64,
    /// Transactions with outcome `fail`.
    pub failed: u64,
    /// Transactions of unknown outcome that a committed read shows took effect.
    pub unknown_applied: u64,
    /// Reads (cas compares included) of committed transactions that were checked.
    pub reads_checked: u64,
    /// The first violations (at most `violations_max`), in the order found.
    pub violations: Vec<TxnViolation>,
    pub violations_total: u64,
    /// Why the verdict is [`SerializabilityVerdict::Unknown`].
    pub reason: Option<String>,
}

impl SerializabilityReport {
    /// True when the verdict is [`SerializabilityVerdict::Serializable`].
    pub fn ok(&self) -> bool {
        self.verdict == SerializabilityVerdict::Serializable
    }
}

impl fmt::Display for SerializabilityReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "serializability: {} ({} transactions, {} applied, {} failed, {} unknown applied, {} reads checked, {} violations)",
            self.verdict,
            self.transactions,
            self.applied,
            self.failed,
            self.unknown_applied,
            self.reads_checked,
            self.violations_total
        )?;
        if let Some(reason) = &self.reason {
            writeln!(f, "  {reason}")?;
        }
        for violation in &self.violations {
            writeln!(f, "  {violation}")?;
        }
        Ok(())
    }
}

/// What one transaction's records disagree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnField {
    CallNs,
    ReturnNs,
    Outcome,
    Ts,
}

impl TxnField {
    pub fn name(self) -> &'static str {
        match self {
            TxnField::CallNs => "call_ns",
            TxnField::ReturnNs => "return_ns",
            TxnField::Outcome => "outcome",
            TxnField::Ts => "ts",
        }
    }
}

impl fmt::Display for TxnField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A history the check cannot read as transactions.
#[derive(Debug, thiserror::Error)]
pub enum SerializabilityError {
    /// A bad record, too many records, or a client with two transactions outstanding at once.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// Records `first` and `second` (0-based) of one transaction disagree on `field`.
    #[error("client {client} txn {txn}: records {first} and {second} disagree on {field}")]
    TxnMismatch {
        client: u64,
        txn: u64,
        field: TxnField,
        first: usize,
        second: usize,
    },
}

/// Checks `records` with the default configuration; see [`check_serializable_with`].
pub fn check_serializable(records: &[HistoryRecord]) -> Result<SerializabilityReport, SerializabilityError> {
    check_serializable_with(records, &SerializabilityConfig::default())
}

/// Checks that the history `records` (in any order across transactions; in execution order
/// within one) is serializable, strictly so when `config.strict`.
///
/// Fails only on a malformed history; a history that is not serializable is a report with
/// [`SerializabilityVerdict::NotSerializable`].
pub fn check_serializable_with(
    records: &[HistoryRecord],
    config: &SerializabilityConfig,
) -> Result<SerializabilityReport, SerializabilityError> {
    let txns = Txns::build(records)?;
    let writes = Writes::build(&txns);
    let count = |outcome| txns.txns.iter().filter(|t| t.outcome == outcome).count() as u64;
    let mut report = SerializabilityReport {
        verdict: SerializabilityVerdict::Unknown,
        method: SerializabilityMethod::None,
        transactions: txns.txns.len() as u64,
        applied: 0,
        failed: count(Outcome::Fail),
        unknown_applied: 0,
        reads_checked: 0,
        violations: Vec::new(),
        violations_total: 0,
        reason: None,
    };
    if let Some(d) = writes.duplicate {
        report.reason = Some(duplicate_reason(&txns, &writes, d));
        return Ok(report);
    }
    let applied = writes::applied(&txns, &writes);
    report.applied = applied.iter().filter(|&&a| a).count() as u64;
    report.unknown_applied = report.applied - count(Outcome::Ok);
    let mut violations = Violations {
        list: Vec::new(),
        total: 0,
        max: config.violations_max,
    };
    let without_ts = txns
        .txns
        .iter()
        .zip(&applied)
        .filter(|(txn, applied)| **applied && txn.ts.is_none())
        .count();
    if without_ts == 0 {
        report.method = SerializabilityMethod::TimestampReplay;
        let stats = replay::replay(&txns, &writes, &applied, config.strict, &mut violations);
        report.reads_checked = stats.reads_checked;
        report.reason = (stats.reads_ambiguous > 0).then(|| {
            format!(
                "{} reads of absent disagree with the replay on keys that a transaction of unknown \
                 outcome deletes: that delete may have taken effect unseen",
                stats.reads_ambiguous
            )
        });
    } else {
        report.method = SerializabilityMethod::DependencyGraph;
        report.reads_checked = graph::check_graph(&txns, &writes, &applied, config.strict, &mut violations);
        report.reason = Some(format!(
            "no violation found; {without_ts} applied transactions carry no ts, so the history has no \
             serialization order to prove it"
        ));
    }
    report.violations_total = violations.total;
    report.violations = violations.list;
    report.verdict = if report.violations_total > 0 {
        report.reason = None;
        SerializabilityVerdict::NotSerializable
    } else if report.reason.is_some() {
        SerializabilityVerdict::Unknown
    } else {
        SerializabilityVerdict::Serializable
    };
    debug_assert!(report.violations.len() as u64 <= report.violations_total);
    debug_assert_eq!(
        report.verdict == SerializabilityVerdict::Unknown,
        report.reason.is_some()
    );
    Ok(report)
}

fn duplicate_reason(txns: &Txns, writes: &Writes, d: writes::Duplicate) -> String {
    format!(
        "{} writes of a value already written to the same key, the first: {:?} = {:?} by {} and by {}; \
         values must be unique per key to tell which write a read saw",
        writes.duplicates,
        txns.keys[d.key as usize],
        txns.values[d.value as usize],
        txns.txn_ref(d.first),
        txns.txn_ref(d.second),
    )
}
