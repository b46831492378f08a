//! cosy's per-message log: CSV, a header line, then one line per message, all numbers decimal.
//!
//! ```text
//! msg_id,src,dst,bytes,submit_ns,flag,flag_ns
//! 17,3,5,131072,1200,complete,36700
//! 18,3,6,131072,1900,reject,4100
//! ```
//!
//! `flag` is `complete`, `reject` or `failure`; `submit_ns` and `flag_ns` are on the sender's own
//! clock (cosy needs no synchronized clocks), and `flag_ns` is never before `submit_ns`.
//! docs/logs.md describes every field.
//!
//! Reading keeps one line in memory at a time and refuses lines longer than [`LINE_BYTES_MAX`]
//! bytes (configurable per reader), so a corrupt file cannot exhaust memory. Blank lines and
//! repeated header lines are skipped, so the logs of several senders may be concatenated.

use crate::lines::BoundedLines;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The header line, without its newline.
pub const HEADER: &str = "msg_id,src,dst,bytes,submit_ns,flag,flag_ns";

/// Longest line [`LogReader`] accepts by default, newline excluded: seven numbers of at most
/// twenty digits fit in 150 bytes, so 4 KiB leaves room and still bounds a corrupt line.
pub const LINE_BYTES_MAX: usize = 4 << 10;

/// Fields of a line, in order (the names of [`HEADER`]).
const FIELDS: [&str; 7] = ["msg_id", "src", "dst", "bytes", "submit_ns", "flag", "flag_ns"];

/// Longest field text an error keeps, so an error stays small.
const ERROR_TEXT_BYTES_MAX: usize = 64;

/// What the sender's completion queue reported for a message (paper 003, section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Flag {
    /// Delivered to the receiver.
    Complete,
    /// cosy could not promise delta for the message (no free slot or virtual link); nothing was
    /// sent.
    Reject,
    /// Admitted, but its data or a reply went missing (a crash or a link failure).
    Failure,
}

impl Flag {
    /// The name used in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::Complete => "complete",
            Flag::Reject => "reject",
            Flag::Failure => "failure",
        }
    }

    /// Parses the log's name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Flag> {
        [Flag::Complete, Flag::Reject, Flag::Failure]
            .into_iter()
            .find(|flag| flag.as_str() == name)
    }
}

/// One message: a line of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MessageRecord {
    /// Chosen by the sender, unique per sender: `(src, msg_id)` names the message.
    pub msg_id: u64,
    /// The sender, which writes the line.
    pub src: u32,
    pub dst: u32,
    /// The message's size s.
    pub bytes: u64,
    /// When the application submitted the message (a_m), on the sender's clock.
    pub submit_ns: u64,
    pub flag: Flag,
    /// When the flag was set (r_m), on the sender's clock; not before `submit_ns`.
    pub flag_ns: u64,
}

impl MessageRecord {
    /// `flag_ns - submit_ns`, the time the guarantee bounds; `None` if the flag came first.
    pub fn latency_ns(&self) -> Option<u64> {
        self.flag_ns.checked_sub(self.submit_ns)
    }
}

/// The record as its CSV line (without the newline).
impl fmt::Display for MessageRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{},{},{},{}",
            self.msg_id,
            self.src,
            self.dst,
            self.bytes,
            self.submit_ns,
            self.flag.as_str(),
            self.flag_ns
        )
    }
}

/// What is wrong with one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error("{found} fields, expected 7 ({HEADER})")]
    FieldCount { found: usize },
    /// Not a decimal number of the field's type (digits only, no sign, no blanks).
    #[error("field `{field}`: {text:?} is not a number in range")]
    BadNumber { field: &'static str, text: String },
    #[error("unknown flag {0:?}, expected complete, reject or failure")]
    UnknownFlag(String),
    #[error("flag_ns {flag_ns} is before submit_ns {submit_ns}")]
    FlagBeforeSubmit { submit_ns: u64, flag_ns: u64 },
}

/// The first bytes of a bad field, for its error; a character cut at the limit (or any invalid
/// UTF-8) shows as U+FFFD, harmless in a message.
fn clip(bytes: &[u8]) -> String {
    let end = bytes.len().min(ERROR_TEXT_BYTES_MAX);
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A field of digits only: `str::parse` alone would also take a leading `+`.
fn parse_number<T: std::str::FromStr>(field: &'static str, text: &[u8]) -> Result<T, RecordError> {
    let bad = || RecordError::BadNumber {
        field,
        text: clip(text),
    };
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    // Digits are ASCII, hence UTF-8.
    let digits = std::str::from_utf8(text).map_err(|_| bad())?;
    digits.parse().map_err(|_| bad())
}

/// Parses one line (without its newline) into a record. Never panics, whatever the bytes.
pub fn parse_record(line: &[u8]) -> Result<MessageRecord, RecordError> {
    let found = line.split(|&b| b == b',').count();
    if found != FIELDS.len() {
        return Err(RecordError::FieldCount { found });
    }
    let mut fields = line.split(|&b| b == b',');
    let mut next = || fields.next().unwrap_or_default();
    let msg_id = parse_number(FIELDS[0], next())?;
    let src = parse_number(FIELDS[1], next())?;
    let dst = parse_number(FIELDS[2], next())?;
    let bytes = parse_number(FIELDS[3], next())?;
    let submit_ns = parse_number(FIELDS[4], next())?;
    let flag_text = next();
    let flag = std::str::from_utf8(flag_text)
        .ok()
        .and_then(Flag::from_name)
        .ok_or_else(|| RecordError::UnknownFlag(clip(flag_text)))?;
    let flag_ns = parse_number(FIELDS[6], next())?;
    if flag_ns < submit_ns {
        return Err(RecordError::FlagBeforeSubmit { submit_ns, flag_ns });
    }
    Ok(MessageRecord {
        msg_id,
        src,
        dst,
        bytes,
        submit_ns,
        flag,
        flag_ns,
    })
}

/// Writes [`HEADER`] and its newline; once, before the records.
pub fn write_header(w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "{HEADER}")
}

/// Writes `record` as one line, newline included.
pub fn write_record(w: &mut impl Write, record: &MessageRecord) -> io::Result<()> {
    writeln!(w, "{record}")
}

/// Failure to read a log.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The first line that is not blank is not [`HEADER`]; `line` is 1-based, 0 when the input
    /// ends before any such line (a run that sent nothing still writes the header).
    #[error("line {line}: expected the header {HEADER:?}")]
    Header { line: u64 },
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

/// Streams the records of a log. The first error ends the stream (the iterator returns `None`
/// after it), since a reader cannot tell where a corrupt line ends.
pub struct LogReader<R> {
    lines: BoundedLines<R>,
    header_seen: bool,
    failed: bool,
}

impl<R: BufRead> LogReader<R> {
    pub fn new(reader: R) -> Self {
        LogReader {
            lines: BoundedLines::new(reader, LINE_BYTES_MAX),
            header_seen: false,
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

    fn next_record(&mut self) -> Option<Result<MessageRecord, ReadError>> {
        loop {
            match self.lines.next_line().map_err(ReadError::from) {
                Ok(false) if self.header_seen => return None,
                Ok(false) => return Some(Err(ReadError::Header { line: 0 })),
                Err(e) => return Some(Err(e)),
                Ok(true) if self.lines.buf.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(true) if self.lines.buf == HEADER.as_bytes() => self.header_seen = true,
                Ok(true) if !self.header_seen => {
                    return Some(Err(ReadError::Header {
                        line: self.lines.line(),
                    }));
                }
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

impl<R: BufRead> Iterator for LogReader<R> {
    type Item = Result<MessageRecord, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_record();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Reads a whole log into memory.
pub fn read_log(reader: impl BufRead) -> Result<Vec<MessageRecord>, ReadError> {
    LogReader::new(reader).collect()
}

/// Reads the log file at `path`.
pub fn read_log_file(path: &Path) -> Result<Vec<MessageRecord>, ReadError> {
    let file = File::open(path).map_err(|error| ReadError::Open {
        path: path.to_owned(),
        error,
    })?;
    read_log(BufReader::new(file))
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
