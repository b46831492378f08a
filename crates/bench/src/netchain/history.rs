//! The client history of a run in the check crate's format (docs/histories.md): one record per
//! attempt, `{"client", "op", "key", "value", "expect", "outcome": "ok|fail|unknown",
//! "call_ns", "return_ns"}`, written as JSON Lines for an outside checker and judged here by
//! `onepipe_check::check_linearizable`.

use super::nodes::Op;
use onepipe_check::{HistoryRecord, OpKind, Outcome as RecordOutcome, write_record};
use onepipe_netchain::{Key, Outcome};
use std::io::Write;

/// Bytes as a JSON string: UTF-8 as is (the demo's keys and values are ASCII), anything else
/// lossily.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A refusal changed nothing: `fail`. (The demo makes no compare-and-swap, whose `fail` would
/// mean a compare that found another value.)
fn outcome(o: &Outcome) -> RecordOutcome {
    match o {
        Outcome::Ok(_) => RecordOutcome::Ok,
        Outcome::CasFailed(_) | Outcome::Refused(_) => RecordOutcome::Fail,
        Outcome::Unknown => RecordOutcome::Unknown,
    }
}

/// One attempt as a record. A read that did not answer `ok` carries no value.
pub fn record(op: &Op, keys: &[Key]) -> HistoryRecord {
    let outcome = outcome(&op.outcome);
    let value = match (op.write, outcome) {
        (true, _) | (false, RecordOutcome::Ok) => op.value.as_deref().map(text),
        (false, _) => None,
    };
    HistoryRecord {
        client: op.client as u64,
        op: if op.write { OpKind::Write } else { OpKind::Read },
        key: text(keys[op.key as usize].as_bytes()),
        value,
        expect: None,
        outcome,
        call_ns: op.call_ns,
        return_ns: op.return_ns,
        txn: None,
        ts: None,
    }
}

pub fn records(ops: &[Op], keys: &[Key]) -> Vec<HistoryRecord> {
    ops.iter().map(|op| record(op, keys)).collect()
}

pub fn write(out: &mut impl Write, records: &[HistoryRecord]) -> std::io::Result<()> {
    for r in records {
        write_record(out, r)?;
    }
    out.flush()
}
