//! Event model and the per-process text log format.
//!
//! One file per process, `DIR/<process-id>.log`, one event per line in program order:
//!
//! ```text
//! S,<ts_ns>,<dst>,<msg_id>
//! D,<ts_ns>,<src>,<msg_id>
//! ```
//!
//! All numbers are decimal. Blank lines are ignored.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

/// Identifies a process (host endpoint).
pub type ProcessId = u32;

/// Message id, unique per sender (sender-local sequence), not globally unique.
pub type MsgId = u64;

/// One entry of a process log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The process sent message `msg_id` with timestamp `ts_ns` to `dst` (one event per destination
    /// of a scattering; all destinations of one scattering share ts and msg_id).
    Send {
        ts_ns: u64,
        dst: ProcessId,
        msg_id: MsgId,
    },
    /// The process delivered message `msg_id` sent by `src` with timestamp `ts_ns`.
    Deliver {
        ts_ns: u64,
        src: ProcessId,
        msg_id: MsgId,
    },
}

/// One process's events in program order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessLog {
    pub process: ProcessId,
    pub events: Vec<Event>,
}

/// What is wrong with one line of a log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("unknown tag {0:?}, expected \"S\" or \"D\"")]
    BadTag(String),
    #[error("expected 4 comma-separated fields, found {0}")]
    FieldCount(usize),
    #[error("{field} is not a decimal number: {text:?}")]
    NotANumber { field: &'static str, text: String },
}

/// Failure to read or parse logs.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `line` is 1-based.
    #[error("line {line}: {error}")]
    Line { line: usize, error: LineError },
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    /// A log file that could not be parsed.
    #[error("{}: {error}", path.display())]
    File { path: PathBuf, error: Box<LogError> },
    /// Two file names map to the same process id (e.g. `1.log` and `01.log`).
    #[error("{} and {} both hold the log of process {process}", first.display(), second.display())]
    DuplicateProcess {
        process: ProcessId,
        first: PathBuf,
        second: PathBuf,
    },
}

/// Parses the text of one process log.
pub fn parse_log(process: ProcessId, text: &str) -> Result<ProcessLog, LogError> {
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        events.push(parse_line(line).map_err(|error| LogError::Line { line: i + 1, error })?);
    }
    Ok(ProcessLog { process, events })
}

fn parse_line(line: &str) -> Result<Event, LineError> {
    let mut fields = line.split(',');
    let tag = fields.next().unwrap_or_default();
    if tag != "S" && tag != "D" {
        return Err(LineError::BadTag(tag.to_owned()));
    }
    let (Some(ts), Some(peer), Some(id), None) = (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(LineError::FieldCount(line.split(',').count()));
    };
    let ts_ns = number(ts, "ts_ns")?;
    let msg_id = number(id, "msg_id")?;
    Ok(if tag == "S" {
        Event::Send {
            ts_ns,
            dst: number(peer, "dst")?,
            msg_id,
        }
    } else {
        Event::Deliver {
            ts_ns,
            src: number(peer, "src")?,
            msg_id,
        }
    })
}

fn number<T: std::str::FromStr>(text: &str, field: &'static str) -> Result<T, LineError> {
    // `FromStr` for integers accepts a leading '+'; the format is plain digits only.
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let parsed = if digits { text.parse().ok() } else { None };
    parsed.ok_or_else(|| LineError::NotANumber {
        field,
        text: text.to_owned(),
    })
}

/// Writes `e` as one line of the log format (including the trailing newline).
pub fn write_event(w: &mut impl io::Write, e: &Event) -> io::Result<()> {
    match *e {
        Event::Send { ts_ns, dst, msg_id } => writeln!(w, "S,{ts_ns},{dst},{msg_id}"),
        Event::Deliver { ts_ns, src, msg_id } => writeln!(w, "D,{ts_ns},{src},{msg_id}"),
    }
}

/// Reads every regular file named `<number>.log` in `dir`, sorted by process id.
///
/// Other files are ignored, as are names whose number does not fit a [`ProcessId`].
pub fn read_dir(dir: &Path) -> Result<Vec<ProcessLog>, LogError> {
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |error| LogError::Io { path, error }
    };
    let mut paths: HashMap<ProcessId, PathBuf> = HashMap::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        let Some(process) = log_file_process(&path) else {
            continue;
        };
        if !path.is_file() {
            continue;
        }
        if let Some(first) = paths.insert(process, path.clone()) {
            let (first, second) = if first < path {
                (first, path)
            } else {
                (path, first)
            };
            return Err(LogError::DuplicateProcess {
                process,
                first,
                second,
            });
        }
    }
    let mut paths: Vec<_> = paths.into_iter().collect();
    paths.sort_unstable_by_key(|&(process, _)| process);
    paths
        .into_iter()
        .map(|(process, path)| {
            let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
            parse_log(process, &text).map_err(|e| LogError::File {
                path,
                error: Box::new(e),
            })
        })
        .collect()
}

fn log_file_process(path: &Path) -> Option<ProcessId> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".log")?;
    number(stem, "process").ok()
}
