//! cosy's guarantee (paper 003, section 2): the flag of a message submitted at a_m is set at
//! r_m with r_m - a_m <= delta, whatever the flag.

use std::fmt;

use serde::Serialize;

use super::record::{Flag, MessageRecord};
use crate::index::FastMap;
use crate::report::MAX_EXAMPLES;

/// One line that breaks the guarantee; `index` is its 0-based position in the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BoundViolation {
    /// The flag came more than delta after the submission.
    Late {
        index: usize,
        src: u32,
        msg_id: u64,
        flag: Flag,
        latency_ns: u64,
    },
    /// A second line for the message `(src, msg_id)`, first logged at `first_index`: a message
    /// gets one flag, and a resubmission takes a fresh id.
    Duplicate {
        index: usize,
        first_index: usize,
        src: u32,
        msg_id: u64,
    },
    /// The flag is dated before the submission (a record built without [`super::parse_record`],
    /// which refuses it).
    FlagBeforeSubmit {
        index: usize,
        src: u32,
        msg_id: u64,
        submit_ns: u64,
        flag_ns: u64,
    },
}

/// What [`check_bound`] found; serializes to JSON for a run's summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BoundReport {
    /// The bound checked against.
    pub delta_ns: u64,
    /// Lines (duplicates included).
    pub messages: u64,
    pub completed: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Longest time to a complete flag; 0 without any.
    pub max_completion_ns: u64,
    /// Longest time to any flag; 0 without any.
    pub max_flag_ns: u64,
    /// `max_completion_ns / delta_ns`: how much of the bound completions used (infinite, null
    /// in JSON, for a positive time against a zero delta).
    pub max_completion_over_delta: f64,
    /// Every flag within delta of its submission, and no message logged twice.
    pub held: bool,
    /// Number of violations.
    pub violations: u64,
    /// The first (at most [`MAX_EXAMPLES`]) violations, in log order.
    pub violators: Vec<BoundViolation>,
}

impl BoundReport {
    fn push(&mut self, violation: BoundViolation) {
        self.violations += 1;
        if self.violators.len() < MAX_EXAMPLES {
            self.violators.push(violation);
        }
    }

    /// Counts `record`'s flag and its latency; `None` if its flag came before its submission.
    fn count(&mut self, record: &MessageRecord) -> Option<u64> {
        self.messages += 1;
        match record.flag {
            Flag::Complete => self.completed += 1,
            Flag::Reject => self.rejected += 1,
            Flag::Failure => self.failed += 1,
        }
        let latency_ns = record.latency_ns()?;
        self.max_flag_ns = self.max_flag_ns.max(latency_ns);
        if record.flag == Flag::Complete {
            self.max_completion_ns = self.max_completion_ns.max(latency_ns);
        }
        Some(latency_ns)
    }
}

/// Checks every record of a run against `delta_ns`: each flag, complete, reject or failure,
/// must come within delta of the submission (r_m - a_m <= delta), and each `(src, msg_id)`
/// appear once. Time and memory linear in the number of records.
pub fn check_bound(records: &[MessageRecord], delta_ns: u64) -> BoundReport {
    let mut report = BoundReport {
        delta_ns,
        messages: 0,
        completed: 0,
        rejected: 0,
        failed: 0,
        max_completion_ns: 0,
        max_flag_ns: 0,
        max_completion_over_delta: 0.0,
        held: true,
        violations: 0,
        violators: Vec::new(),
    };
    let mut first_index: FastMap<(u32, u64), usize> = FastMap::default();
    for (index, record) in records.iter().enumerate() {
        let (src, msg_id) = (record.src, record.msg_id);
        if let Some(&first_index) = first_index.get(&(src, msg_id)) {
            report.push(BoundViolation::Duplicate {
                index,
                first_index,
                src,
                msg_id,
            });
        } else {
            first_index.insert((src, msg_id), index);
        }
        match report.count(record) {
            Some(latency_ns) if latency_ns > delta_ns => report.push(BoundViolation::Late {
                index,
                src,
                msg_id,
                flag: record.flag,
                latency_ns,
            }),
            Some(_) => {}
            None => report.push(BoundViolation::FlagBeforeSubmit {
                index,
                src,
                msg_id,
                submit_ns: record.submit_ns,
                flag_ns: record.flag_ns,
            }),
        }
    }
    report.max_completion_over_delta = ratio(report.max_completion_ns, delta_ns);
    report.held = report.violations == 0;
    report
}

/// `numerator / denominator`, with 0 / 0 = 0 rather than NaN.
fn ratio(numerator: u64, denominator: u64) -> f64 {
    match (numerator, denominator) {
        (0, _) => 0.0,
        (_, 0) => f64::INFINITY,
        _ => numerator as f64 / denominator as f64,
    }
}

/// One line of totals, then one per violation kept.
impl fmt::Display for BoundReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cosy bound {}: {} messages ({} complete, {} reject, {} failure) against delta {} ns; \
             max completion {} ns ({:.3} delta), max flag {} ns, {} violations",
            if self.held { "held" } else { "BROKEN" },
            self.messages,
            self.completed,
            self.rejected,
            self.failed,
            self.delta_ns,
            self.max_completion_ns,
            self.max_completion_over_delta,
            self.max_flag_ns,
            self.violations
        )?;
        for violation in &self.violators {
            writeln!(f, "  {violation:?}")?;
        }
        Ok(())
    }
}
