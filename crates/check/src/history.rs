//! Client histories of a key-value store: one JSON object per operation, one per line.
//!
//! ```text
//! {"client":3,"op":"write","key":"k17","value":"v1","expect":null,"outcome":"ok","call_ns":120,"return_ns":450}
//! {"client":4,"op":"read","key":"k17","value":"v1","expect":null,"outcome":"ok","call_ns":300,"return_ns":610}
//! ```
//!
//! A producer serializes [`HistoryRecord`]s with [`write_record`]; a checker reads them back with
//! [`HistoryReader`] (streaming) or [`read_history`]. docs/histories.md describes every field.
//! `value` and `expect` may be omitted when null; fields the format does not name are ignored,
//! so a producer may add its own (a session number, a retry count).
//!
//! Reading keeps one line in memory at a time and refuses lines longer than
//! [`LINE_BYTES_MAX`] bytes (configurable per reader), so a corrupt file cannot exhaust memory.

use crate::lines::BoundedLines;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest line [`HistoryReader`] accepts by default, newline excluded: 1 MiB, far above any
/// record of a store with bounded values (NetChain's are at most a few hundred bytes).
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// Longest unknown `op`/`outcome` text an error keeps, so an error stays small.
const ERROR_TEXT_BYTES_MAX: usize = 64;

/// What an operation does to the key's register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// `value` is what the read returned, null if the key was absent.
    Read,
    /// Sets the key to `value`.
    Write,
    /// Sets the key to `value` (the model does not distinguish it from a write).
    Insert,
    /// If the key's value is `expect` (null: absent), sets it to `value`.
    Cas,
    /// Makes the key absent.
    Delete,
}

impl OpKind {
    /// The name used in the JSON format.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Insert => "insert",
            OpKind::Cas => "cas",
            OpKind::Delete => "delete",
        }
    }

    /// Parses the JSON name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<OpKind> {
        [
            OpKind::Read,
            OpKind::Write,
            OpKind::Insert,
            OpKind::Cas,
            OpKind::Delete,
        ]
        .into_iter()
        .find(|op| op.as_str() == name)
    }
}

/// What the client learned about its operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Took effect once between `call_ns` and `return_ns`.
    Ok,
    /// Did not take effect; for a cas: the compare failed, an observation that the key's value
    /// was not `expect` at some point between `call_ns` and `return_ns`.
    Fail,
    /// May have taken effect once at any point after `call_ns`, or never (a timeout);
    /// `return_ns` is when the client gave up.
    Unknown,
}

impl Outcome {
    /// The name used in the JSON format.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Unknown => "unknown",
        }
    }

    /// Parses the JSON name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Outcome> {
        [Outcome::Ok, Outcome::Fail, Outcome::Unknown]
            .into_iter()
            .find(|outcome| outcome.as_str() == name)
    }
}

/// One operation of one client: a line of a history file.
///
/// Serializes to the line format (with `value` and `expect` always present, null when `None`;
/// `txn` and `ts` only when set, so a history without transactions reads as before);
/// deserializing checks the same rules as [`HistoryRecord::check`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawRecord")]
pub struct HistoryRecord {
    /// The client that issued the operation; a client has at most one operation outstanding.
    pub client: u64,
    pub op: OpKind,
    pub key: String,
    /// read: the value returned (`None`: absent); write, insert: the value written; cas: the
    /// new value; delete: always `None`.
    pub value: Option<String>,
    /// cas only: the compared value (`None`: "expected absent"); `None` for every other op.
    pub expect: Option<String>,
    pub outcome: Outcome,
    /// When the client issued the operation.
    pub call_ns: u64,
    /// When the client learned the outcome (or gave up, for [`Outcome::Unknown`]); not before
    /// `call_ns`.
    pub return_ns: u64,
    /// The transaction the operation belongs to, unique per client; `None`: a transaction of
    /// its own. All operations of one transaction share `client`, `txn`, `outcome`, `call_ns`,
    /// `return_ns` and `ts`, and appear in the order the transaction executes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn: Option<u64>,
    /// The transaction's claimed serialization point (the store's commit timestamp):
    /// transactions claim to take effect in `(ts, client, txn)` order. `None`: not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
}

/// What is wrong with one record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not JSON, not an object, a field of the wrong type, or invalid UTF-8.
    #[error("malformed record: {0}")]
    Json(#[source] serde_json::Error),
    /// A required field is absent or null.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    #[error("unknown op {0:?}, expected read, write, insert, cas or delete")]
    UnknownOp(String),
    #[error("unknown outcome {0:?}, expected ok, fail or unknown")]
    UnknownOutcome(String),
    #[error("return_ns {return_ns} is before call_ns {call_ns}")]
    ReturnBeforeCall { call_ns: u64, return_ns: u64 },
    /// A write, insert or cas without the value it writes.
    #[error("a {} needs a value", .0.as_str())]
    MissingValue(OpKind),
    /// A delete with a value.
    #[error("a {} has no value", .0.as_str())]
    UnexpectedValue(OpKind),
    /// An `expect` on an operation other than cas.
    #[error("a {} has no expect (only cas does)", .0.as_str())]
    UnexpectedExpect(OpKind),
}

impl HistoryRecord {
    /// Checks the rules a record obeys on its own: `return_ns >= call_ns`, and the `value` and
    /// `expect` that its op calls for.
    pub fn check(&self) -> Result<(), RecordError> {
        if self.return_ns < self.call_ns {
            return Err(RecordError::ReturnBeforeCall {
                call_ns: self.call_ns,
                return_ns: self.return_ns,
            });
        }
        if self.op != OpKind::Cas && self.expect.is_some() {
            return Err(RecordError::UnexpectedExpect(self.op));
        }
        match self.op {
            OpKind::Write | OpKind::Insert | OpKind::Cas if self.value.is_none() => {
                Err(RecordError::MissingValue(self.op))
            }
            OpKind::Delete if self.value.is_some() => Err(RecordError::UnexpectedValue(self.op)),
            _ => Ok(()),
        }
    }
}

/// The record as its JSON line (without the newline).
impl fmt::Display for HistoryRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&line)
    }
}

/// The fields as they come, so that each problem becomes its own [`RecordError`].
#[derive(Deserialize)]
struct RawRecord {
    client: Option<u64>,
    op: Option<String>,
    key: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    expect: Option<String>,
    outcome: Option<String>,
    call_ns: Option<u64>,
    return_ns: Option<u64>,
    #[serde(default)]
    txn: Option<u64>,
    #[serde(default)]
    ts: Option<u64>,
}

impl TryFrom<RawRecord> for HistoryRecord {
    type Error = RecordError;

    fn try_from(raw: RawRecord) -> Result<Self, RecordError> {
        let op = raw.op.ok_or(RecordError::MissingField("op"))?;
        let outcome = raw.outcome.ok_or(RecordError::MissingField("outcome"))?;
        let record = HistoryRecord {
            client: raw.client.ok_or(RecordError::MissingField("client"))?,
            op: OpKind::from_name(&op).ok_or_else(|| RecordError::UnknownOp(clip(op)))?,
            key: raw.key.ok_or(RecordError::MissingField("key"))?,
            value: raw.value,
            expect: raw.expect,
            outcome: Outcome::from_name(&outcome)
                .ok_or_else(|| RecordError::UnknownOutcome(clip(outcome)))?,
            call_ns: raw.call_ns.ok_or(RecordError::MissingField("call_ns"))?,
            return_ns: raw.return_ns.ok_or(RecordError::MissingField("return_ns"))?,
            txn: raw.txn,
            ts: raw.ts,
        };
        record.check()?;
        Ok(record)
    }
}

fn clip(mut text: String) -> String {
    if text.len() > ERROR_TEXT_BYTES_MAX {
        let mut end = ERROR_TEXT_BYTES_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Parses one line (without its newline) into a record.
pub fn parse_record(line: &[u8]) -> Result<HistoryRecord, RecordError> {
    let raw: RawRecord = serde_json::from_slice(line).map_err(RecordError::Json)?;
    HistoryRecord::try_from(raw)
}

/// Writes `record` as one line of the format, newline included.
pub fn write_record(w: &mut impl Write, record: &HistoryRecord) -> io::Result<()> {
    serde_json::to_writer(&mut *w, record)?;
    w.write_all(b"\n")
}

/// Failure to read a history.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// `line` is 1-based.
    #[error("line {line}: {error}")]
    Record { line: u64, error: RecordError },
    #[error("line {line}: longer than {bytes_max} bytes")]
    LineTooLong { line: u64, bytes_max: usize },
    #[error("line {line}: {error}")]
    Io { line: u64, error: io::Error },
    #[error("{}: {error}", path.display())]
    Open { path: PathBuf, error: io::Error },
}

/// Streams the records of a JSON Lines history. Blank lines are skipped. The first error ends
/// the stream (the iterator returns `None` after it), since a reader cannot tell where a corrupt
/// line ends.
pub struct HistoryReader<R> {
    lines: BoundedLines<R>,
    failed: bool,
}

impl<R: BufRead> HistoryReader<R> {
    pub fn new(reader: R) -> Self {
        HistoryReader {
            lines: BoundedLines::new(reader, LINE_BYTES_MAX),
            failed: false,
        }
    }

    /// Refuses lines longer than `bytes_max` bytes (newline excluded) instead of
    /// [`LINE_BYTES_MAX`].
    pub fn with_line_bytes_max(mut self, bytes_max: usize) -> Self {
        self.lines.line_bytes_max = bytes_max;
        self
    }

    /// The number of lines read so far.
    pub fn line(&self) -> u64 {
        self.lines.line()
    }

    fn next_record(&mut self) -> Option<Result<HistoryRecord, ReadError>> {
        loop {
            match self.lines.next_line().map_err(ReadError::from) {
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
                Ok(true) if self.lines.buf.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(true) => {
                    let line = self.lines.line();
                    return Some(
                        parse_record(&self.lines.buf).map_err(|error| ReadError::Record { line, error }),
                    );
                }
            }
        }
    }
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<HistoryRecord, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_record();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Reads a whole history into memory.
pub fn read_history(reader: impl BufRead) -> Result<Vec<HistoryRecord>, ReadError> {
    HistoryReader::new(reader).collect()
}

/// Reads the history file at `path`.
pub fn read_history_file(path: &Path) -> Result<Vec<HistoryRecord>, ReadError> {
    let file = File::open(path).map_err(|error| ReadError::Open {
        path: path.to_owned(),
        error,
    })?;
    read_history(BufReader::new(file))
}

/// A history that breaks a rule spanning several records.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// `index` is the 0-based position in the slice.
    #[error("record {index}: {error}")]
    Record { index: usize, error: RecordError },
    /// Record `second` was called before record `first`, of the same client, returned.
    #[error("client {client} has records {first} and {second} outstanding at once")]
    ClientOverlap {
        client: u64,
        first: usize,
        second: usize,
    },
    /// More records than the checker indexes (`u32::MAX`).
    #[error("{0} records, more than the checker indexes")]
    TooManyRecords(usize),
}

/// Checks every record ([`HistoryRecord::check`]) and that no client has two operations
/// outstanding at once: each of its calls comes at or after its previous return. Operations of
/// one transaction (same client, same `Some` txn) are one: they may share their interval.
pub fn check_history(records: &[HistoryRecord]) -> Result<(), HistoryError> {
    check_records(records)?;
    check_client_overlap(records)
}

/// Every record on its own, and a count the checkers can index with `u32`.
pub(crate) fn check_records(records: &[HistoryRecord]) -> Result<(), HistoryError> {
    if u32::try_from(records.len()).is_err() {
        return Err(HistoryError::TooManyRecords(records.len()));
    }
    for (index, record) in records.iter().enumerate() {
        record
            .check()
            .map_err(|error| HistoryError::Record { index, error })?;
    }
    Ok(())
}

/// No client calls before its previous operation (or transaction) returned.
pub(crate) fn check_client_overlap(records: &[HistoryRecord]) -> Result<(), HistoryError> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    // `txn` in the key keeps the operations of one transaction next to each other when their
    // intervals agree; when they do not, some pair overlaps a neighbour and is reported.
    order.sort_unstable_by_key(|&i| {
        let r = &records[i];
        (r.client, r.call_ns, r.return_ns, r.txn, i)
    });
    for pair in order.windows(2) {
        let (a, b) = (&records[pair[0]], &records[pair[1]]);
        let same_txn = a.txn.is_some() && a.txn == b.txn;
        if a.client == b.client && b.call_ns < a.return_ns && !same_txn {
            let (first, second) = (pair[0], pair[1]);
            return Err(HistoryError::ClientOverlap {
                client: a.client,
                first,
                second,
            });
        }
    }
    Ok(())
}

impl From<crate::lines::LineError> for ReadError {
    fn from(e: crate::lines::LineError) -> ReadError {
        match e {
            crate::lines::LineError::Io { line, error } => ReadError::Io { line, error },
            crate::lines::LineError::TooLong { line, bytes_max } => {
                ReadError::LineTooLong { line, bytes_max }
            }
        }
    }
}
