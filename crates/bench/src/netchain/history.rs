//! The client history of a run as JSON Lines, one object per attempt (issue 43's format):
//! `{"client", "op": "read|write", "key", "value", "expect", "outcome": "ok|fail|unknown",
//! "call_ns", "return_ns"}`, so that an outside checker can verify the run.

use super::nodes::Op;
use onepipe_netchain::{Key, Outcome};
use std::io::Write;

/// Bytes as a JSON string: UTF-8 as is (the demo's keys and values are ASCII), anything else
/// lossily.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Ok(_) => "ok",
        Outcome::CasFailed(_) | Outcome::Refused(_) => "fail",
        Outcome::Unknown => "unknown",
    }
}

/// One attempt as a JSON object.
pub fn record(op: &Op, keys: &[Key]) -> serde_json::Value {
    serde_json::json!({
        "client": op.client,
        "op": if op.write { "write" } else { "read" },
        "key": text(keys[op.key as usize].as_bytes()),
        "value": op.value.as_deref().map(text),
        "expect": null,
        "outcome": outcome_name(&op.outcome),
        "call_ns": op.call_ns,
        "return_ns": op.return_ns,
    })
}

pub fn write(out: &mut impl Write, ops: &[Op], keys: &[Key]) -> std::io::Result<()> {
    for op in ops {
        serde_json::to_writer(&mut *out, &record(op, keys))?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
