//! Checkers that verify the 1Pipe delivery guarantees from per-process event logs, and the
//! linearizability and serializability of key-value histories ([`history`], [`linearizable`],
//! [`serializable`]), and cosy's latency bound and network invariants from its per-message logs
//! ([`cosy`]).
//!
//! Each process records its [`Event`]s in program order (see [`log`] for the text format). The
//! checks look only at these logs, never at the code that produced them, so tests, the demo CLI,
//! the simulator and benchmarks can all judge an execution the same way.
//!
//! A message is identified by `(sender, msg_id)`. Every log check runs in time and memory linear
//! in the number of events, because logs can hold tens of millions of events. A run too long to
//! keep its logs is checked as it goes by [`OnlineChecker`], in memory that does not grow with
//! the run ([`online`] says what it keeps and what that changes). (Linearizability is
//! NP-complete in general: its check has a budget per key instead, see [`linearizable`].)

mod atomicity;
mod causality;
pub mod cosy;
pub mod history;
mod index;
mod integrity;
pub mod linearizable;
mod lines;
pub mod log;
mod matching;
pub mod online;
mod order;
mod report;
pub mod serializable;
mod violation;

pub use atomicity::check_atomicity;
pub use causality::check_causality;
pub use cosy::{
    BoundReport, BoundViolation, Flag, LinkReport, LinkUse, LinkViolation, MessageRecord, QueueReport,
    check_bound, check_link_capacity, check_queue_bound, read_log, read_log_file,
};
pub use history::{
    HistoryError, HistoryReader, HistoryRecord, LINE_BYTES_MAX, OpKind, Outcome, ReadError, RecordError,
    check_history, parse_record, read_history, read_history_file, write_record,
};
pub use integrity::check_no_duplicates;
pub use linearizable::{
    CACHE_BYTES_PER_KEY_MAX, KeyViolation, LinearizabilityConfig, LinearizabilityReport, STEPS_PER_KEY_MAX,
    Verdict, WINDOW_OPS_MAX, check_linearizable, check_linearizable_with,
};
pub use log::{Event, LineError, LogError, MsgId, ProcessId, ProcessLog, parse_log, read_dir, write_event};
pub use matching::{check_fifo, check_no_creation, check_no_loss};
pub use online::{OnlineChecker, OnlineStats};
pub use order::check_total_order;
pub use report::{CheckResult, Checks, MAX_EXAMPLES, Report, check_all};
pub use serializable::{
    CYCLE_STEPS_MAX, CycleStep, Dependency, SerializabilityConfig, SerializabilityError,
    SerializabilityMethod, SerializabilityReport, SerializabilityVerdict, TxnField, TxnRef, TxnViolation,
    VIOLATIONS_MAX, check_serializable, check_serializable_with,
};
pub use violation::{Rule, Violation, ViolationKind};
