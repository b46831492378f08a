//! Aggregated report over all checks.

use std::fmt;

use serde::Serialize;

use crate::log::ProcessLog;
use crate::violation::Violation;
use crate::{causality, integrity, matching, order};

/// How many violations per check a [`Report`] keeps; the rest are only counted, so a badly
/// broken run with millions of violations does not blow up memory.
pub const MAX_EXAMPLES: usize = 10;

/// Outcome of one check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Number of violations found.
    pub count: u64,
    /// The first (at most [`MAX_EXAMPLES`]) violations, in log order.
    pub examples: Vec<Violation>,
}

impl CheckResult {
    pub fn ok(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn push(&mut self, v: Violation) {
        self.count += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(v);
        }
    }
}

/// Result of [`check_all`]; `Display` prints one line per check plus the examples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub total_order: CheckResult,
    pub fifo: CheckResult,
    pub causality: CheckResult,
    pub no_duplicates: CheckResult,
    pub no_creation: CheckResult,
}

/// Pass/fail per check; serializes as `{"total_order":true,"fifo":true,...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Checks {
    pub total_order: bool,
    pub fifo: bool,
    pub causality: bool,
    pub no_duplicates: bool,
    pub no_creation: bool,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.results().iter().all(|(_, r)| r.ok())
    }

    pub fn checks(&self) -> Checks {
        Checks {
            total_order: self.total_order.ok(),
            fifo: self.fifo.ok(),
            causality: self.causality.ok(),
            no_duplicates: self.no_duplicates.ok(),
            no_creation: self.no_creation.ok(),
        }
    }

    fn results(&self) -> [(&'static str, &CheckResult); 5] {
        [
            ("total_order", &self.total_order),
            ("fifo", &self.fifo),
            ("causality", &self.causality),
            ("no_duplicates", &self.no_duplicates),
            ("no_creation", &self.no_creation),
        ]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, result) in self.results() {
            if result.ok() {
                writeln!(f, "{name}: ok")?;
                continue;
            }
            writeln!(f, "{name}: {} violation(s)", result.count)?;
            for v in &result.examples {
                writeln!(f, "  {v}")?;
            }
            let hidden = result.count - result.examples.len() as u64;
            if hidden > 0 {
                writeln!(f, "  ... and {hidden} more")?;
            }
        }
        Ok(())
    }
}

/// Runs total_order, fifo, causality, no_duplicates and no_creation (not no_loss, which only
/// holds for the reliable service).
pub fn check_all(logs: &[ProcessLog]) -> Report {
    let mut r = Report::default();
    order::total_order(logs, &mut |v| r.total_order.push(v));
    matching::fifo_and_creation(logs, &mut |v| r.fifo.push(v), &mut |v| r.no_creation.push(v));
    causality::causality(logs, &mut |v| r.causality.push(v));
    integrity::no_duplicates(logs, &mut |v| r.no_duplicates.push(v));
    r
}
