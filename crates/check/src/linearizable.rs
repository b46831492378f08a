//! Linearizability of a key-value history: is there one order of the operations, consistent
//! with their real-time order, in which every key behaves as a register?
//!
//! The model is a register per key, initially absent: write and insert set a value, delete
//! makes the key absent, a cas with outcome ok needs the value to be `expect` and sets the new
//! one, a cas with outcome fail needs the value not to be `expect`, a read needs the value it
//! returned. Operations with outcome ok (and failed cas) took effect between their call and
//! return; operations with outcome unknown took effect at some point after their call, or never;
//! failed writes, inserts and deletes, and reads that did not succeed, constrain nothing.
//!
//! Keys are independent registers, so each is checked alone (Herlihy and Wing's locality),
//! with Wing and Gong's search and Lowe's memo (`search`). Each key has a budget of search steps
//! and of memo memory; a key that exhausts it is undecided, so the check always ends.
//!
//! ```
//! use onepipe_check::{HistoryRecord, OpKind, Outcome, Verdict, check_linearizable};
//!
//! let op = |client, op, value: Option<&str>, call_ns, return_ns| HistoryRecord {
//!     client,
//!     op,
//!     key: "k17".to_owned(),
//!     value: value.map(str::to_owned),
//!     expect: None,
//!     outcome: Outcome::Ok,
//!     call_ns,
//!     return_ns,
//!     txn: None,
//!     ts: None,
//! };
//! // A write returns, then a read that starts later still finds the key absent.
//! let history = [op(1, OpKind::Write, Some("v1"), 0, 10), op(2, OpKind::Read, None, 20, 30)];
//! let report = check_linearizable(&history)?;
//! assert_eq!(report.verdict, Verdict::NotLinearizable);
//! assert_eq!(report.violations[0].key, "k17");
//! assert_eq!(report.violations[0].window, history);
//!
//! // Had the read overlapped the write, it could have come first.
//! let history = [op(1, OpKind::Write, Some("v1"), 0, 10), op(2, OpKind::Read, None, 5, 30)];
//! assert_eq!(check_linearizable(&history)?.verdict, Verdict::Linearizable);
//! # Ok::<(), onepipe_check::HistoryError>(())
//! ```

mod cache;
mod list;
mod model;
mod search;
mod set;

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use crate::history::{HistoryError, HistoryRecord, check_history};
use crate::report::MAX_EXAMPLES;
use model::{KeyOps, Op, OpsBuilder};
use search::{KeyVerdict, Limits, Searcher};

/// Default search steps per key: at most about half a second and 150 MB of memo per key on
/// the project's 2-core machine (docs/histories.md).
pub const STEPS_PER_KEY_MAX: u64 = 5_000_000;

/// Default memory for one key's memo.
pub const CACHE_BYTES_PER_KEY_MAX: usize = 256 << 20;

/// Most operations a [`KeyViolation`] shows.
pub const WINDOW_OPS_MAX: usize = 32;

/// The budget of the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearizabilityConfig {
    /// Search steps (roughly: one operation tried, or one backtrack) after which a key is
    /// undecided. The searches that look for a violation's `blocked` share the same budget.
    pub steps_per_key_max: u64,
    /// Bytes of memo (and of the search's own lists) after which a key is undecided.
    pub cache_bytes_per_key_max: usize,
}

impl Default for LinearizabilityConfig {
    fn default() -> Self {
        LinearizabilityConfig {
            steps_per_key_max: STEPS_PER_KEY_MAX,
            cache_bytes_per_key_max: CACHE_BYTES_PER_KEY_MAX,
        }
    }
}

/// The verdict over a whole history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every key has a linearization.
    Linearizable,
    /// Some key has none (whatever the undecided keys would give).
    NotLinearizable,
    /// No key was found without a linearization, but some ran out of budget.
    Unknown,
}

impl Verdict {
    /// The snake_case name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable => "not_linearizable",
            Verdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A key without a linearization, and the operations that show why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyViolation {
    pub key: String,
    /// The operation whose return ends the shortest prefix of the key's history that has no
    /// linearization: up to its return everything could still be explained.
    pub blocked: HistoryRecord,
    /// The operations around `blocked`, by call time: those whose interval overlaps the span
    /// from the call of the last one that returned before `blocked` was called to the return of
    /// `blocked` (for an unknown outcome, the interval up to when the client gave up). Records
    /// that constrain nothing are left out.
    pub window: Vec<HistoryRecord>,
    /// Operations of the window beyond [`WINDOW_OPS_MAX`], left out (the earliest ones, but
    /// never `blocked`).
    pub window_ops_omitted: usize,
}

/// What [`check_linearizable`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinearizabilityReport {
    pub verdict: Verdict,
    /// Distinct keys.
    pub keys: u64,
    /// Records in the history (those that constrain nothing included).
    pub operations: u64,
    pub keys_not_linearizable: u64,
    /// Keys whose search ran out of budget.
    pub keys_undecided: u64,
    /// Search steps over all keys.
    pub steps: u64,
    /// The first (at most [`MAX_EXAMPLES`]) keys without a linearization, in order of first
    /// appearance in the history.
    pub violations: Vec<KeyViolation>,
    /// The first (at most [`MAX_EXAMPLES`]) undecided keys.
    pub undecided_keys: Vec<String>,
}

impl LinearizabilityReport {
    /// True when the verdict is [`Verdict::Linearizable`].
    pub fn ok(&self) -> bool {
        self.verdict == Verdict::Linearizable
    }
}

impl fmt::Display for LinearizabilityReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "linearizability: {} ({} keys, {} operations, {} keys not linearizable, {} undecided)",
            self.verdict, self.keys, self.operations, self.keys_not_linearizable, self.keys_undecided
        )?;
        for v in &self.violations {
            writeln!(
                f,
                "key {:?}: no order of the operations lets this one return: {}",
                v.key, v.blocked
            )?;
            if v.window_ops_omitted > 0 {
                writeln!(f, "  ... {} earlier operations", v.window_ops_omitted)?;
            }
            for record in &v.window {
                writeln!(f, "  {record}")?;
            }
        }
        for key in &self.undecided_keys {
            writeln!(f, "key {key:?}: undecided (search budget exhausted)")?;
        }
        Ok(())
    }
}

/// Checks `records` with the default budget; see [`check_linearizable_with`].
pub fn check_linearizable(records: &[HistoryRecord]) -> Result<LinearizabilityReport, HistoryError> {
    check_linearizable_with(records, &LinearizabilityConfig::default())
}

/// Checks that the history `records` (in any order) is linearizable, key by key.
///
/// Fails only on a malformed history ([`check_history`]); a history that is not linearizable
/// is a report with [`Verdict::NotLinearizable`].
pub fn check_linearizable_with(
    records: &[HistoryRecord],
    config: &LinearizabilityConfig,
) -> Result<LinearizabilityReport, HistoryError> {
    check_history(records)?;
    let limits = Limits {
        steps_max: config.steps_per_key_max,
        cache_bytes_max: config.cache_bytes_per_key_max,
    };
    let keys = partition_by_key(records);
    let mut report = LinearizabilityReport {
        verdict: Verdict::Linearizable,
        keys: keys.len() as u64,
        operations: records.len() as u64,
        keys_not_linearizable: 0,
        keys_undecided: 0,
        steps: 0,
        violations: Vec::new(),
        undecided_keys: Vec::new(),
    };
    let mut builder = OpsBuilder::default();
    let mut searcher = Searcher::default();
    for indices in &keys {
        let ops = builder.build(records, indices);
        let (verdict, steps) = searcher.check(ops, &limits);
        report.steps += steps;
        let key = &records[indices[0] as usize].key;
        match verdict {
            KeyVerdict::Linearizable => {}
            KeyVerdict::NotLinearizable => {
                report.keys_not_linearizable += 1;
                if report.violations.len() < MAX_EXAMPLES {
                    let blocked = first_failing_return(ops, &mut searcher, &limits);
                    report.violations.push(violation(records, key, ops, blocked));
                }
            }
            KeyVerdict::Unknown => {
                report.keys_undecided += 1;
                if report.undecided_keys.len() < MAX_EXAMPLES {
                    report.undecided_keys.push(key.clone());
                }
            }
        }
    }
    report.verdict = if report.keys_not_linearizable > 0 {
        Verdict::NotLinearizable
    } else if report.keys_undecided > 0 {
        Verdict::Unknown
    } else {
        Verdict::Linearizable
    };
    Ok(report)
}

/// The records of each key, in order of the key's first appearance.
fn partition_by_key(records: &[HistoryRecord]) -> Vec<Vec<u32>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut keys: Vec<Vec<u32>> = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let k = *index.entry(record.key.as_str()).or_insert_with(|| {
            keys.push(Vec::new());
            keys.len() - 1
        });
        // check_history has bounded the count to u32.
        keys[k].push(i as u32);
    }
    keys
}

/// The operation (an index into `ops.required`) whose return ends the shortest prefix of the
/// history that is not linearizable, by binary search over prefixes (`KeyOps::prefix`). The
/// searches share the key's step budget; a prefix whose search runs out of it counts as
/// linearizable, so the answer is always a prefix known to fail.
fn first_failing_return(ops: &KeyOps, searcher: &mut Searcher, limits: &Limits) -> usize {
    let mut by_return: Vec<u32> = (0..ops.required.len() as u32).collect();
    by_return.sort_by_key(|&i| (ops.required[i as usize].return_ns, i));
    let rounds = u64::from(usize::BITS - by_return.len().leading_zeros());
    let limits = &Limits {
        steps_max: limits.steps_max / rounds,
        ..*limits
    };
    let mut prefix = KeyOps::default();
    // The whole history (ending at the last return) fails.
    let (mut lo, mut hi) = (0, by_return.len() - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        ops.prefix(&by_return, mid, &mut prefix);
        match searcher.check(&prefix, limits).0 {
            KeyVerdict::NotLinearizable => hi = mid,
            KeyVerdict::Linearizable | KeyVerdict::Unknown => lo = mid + 1,
        }
    }
    by_return[hi] as usize
}

/// The window of operations around `blocked` (an index into `ops.required`).
fn violation(records: &[HistoryRecord], key: &str, ops: &KeyOps, blocked: usize) -> KeyViolation {
    let b = ops.required[blocked];
    let start_ns = ops
        .required
        .iter()
        .filter(|op| op.return_ns < b.call_ns)
        .max_by_key(|op| op.return_ns)
        .map_or(b.call_ns, |op| op.call_ns);
    let mut window: Vec<&Op> = ops
        .required
        .iter()
        .filter(|op| op.return_ns >= start_ns && op.call_ns <= b.return_ns)
        .chain(
            ops.open
                .iter()
                .filter(|op| op.return_ns >= start_ns && op.call_ns <= b.return_ns),
        )
        .collect();
    window.sort_by_key(|op| (op.call_ns, op.record));
    let omitted = window.len().saturating_sub(WINDOW_OPS_MAX);
    let b_position = window.iter().position(|op| op.record == b.record).unwrap_or(0);
    let first = omitted.min(b_position);
    KeyViolation {
        key: key.to_owned(),
        blocked: records[b.record].clone(),
        window: window[first..first + window.len().min(WINDOW_OPS_MAX)]
            .iter()
            .map(|op| records[op.record].clone())
            .collect(),
        window_ops_omitted: omitted,
    }
}
