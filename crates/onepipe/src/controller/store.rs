//! The controller's durable state: the log of what it was told and when its timers fired.
//!
//! The [`Controller`] is deterministic, so replaying its input log rebuilds every decision it
//! made. [`Service`] writes each input to the log before the controller acts on it
//! (write-ahead): a decision announced to anyone is always in the log. A controller restarted
//! on the same log, or a standby reading it, decides exactly the same and finishes what was in
//! progress ([`Controller::take_over`]).
//!
//! Backends: [`MemoryStore`] (tests, a single run), [`FileStore`] (the embedded default: one
//! JSON record per line, appended and synced), and etcd in the `onepipe-etcd` crate, whose
//! appends are fenced by a leader election ([`StoreError::NotLeader`]).

use super::{Controller, ControllerError, Input, Output};
use onepipe_wire::Instant;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Controller time of the event, ns.
    pub at_ns: u64,
    pub event: Event,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    Input(Input),
    /// The controller's timers were run ([`Controller::handle_timeout`]).
    Tick,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("controller log {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("controller log {path}, line {line}: not a record ({reason})")]
    Corrupt {
        path: String,
        line: usize,
        reason: String,
    },
    /// The log takes appends only from the elected controller, and this one no longer is (a
    /// standby took over): the input was not logged and must not be acted on.
    #[error("controller log {store}: append refused, not the leader ({reason})")]
    NotLeader { store: String, reason: String },
}

pub trait Store {
    /// Makes `record` durable before returning.
    fn append(&mut self, record: &Record) -> Result<(), StoreError>;
    /// Every record appended so far, oldest first.
    fn load(&mut self) -> Result<Vec<Record>, StoreError>;
}

#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    pub records: Vec<Record>,
}

impl Store for MemoryStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.records.push(record.clone());
        Ok(())
    }
    fn load(&mut self) -> Result<Vec<Record>, StoreError> {
        Ok(self.records.clone())
    }
}

/// An append-only file of JSON lines.
pub struct FileStore {
    path: PathBuf,
    file: std::fs::File,
    /// A last line cut short (the previous controller stopped mid-write) that `load` skipped.
    pub torn_tail: bool,
}

impl FileStore {
    /// Opens `path` for appending, creating it if absent.
    pub fn open(path: &Path) -> Result<FileStore, StoreError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        Ok(FileStore {
            path: path.to_path_buf(),
            file,
            torn_tail: false,
        })
    }
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

impl Store for FileStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).expect("records always serialize");
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| io_error(&self.path, e))?;
        self.file.sync_data().map_err(|e| io_error(&self.path, e))
    }

    fn load(&mut self) -> Result<Vec<Record>, StoreError> {
        let text = std::fs::read(&self.path).map_err(|e| io_error(&self.path, e))?;
        // Appends are whole lines, so only the last can be cut short, by a crash in the middle
        // of a write that was therefore never acted on: it is cut off, so that later appends
        // start a line of their own.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole < text.len() {
            self.torn_tail = true;
            self.file
                .set_len(whole as u64)
                .map_err(|e| io_error(&self.path, e))?;
        }
        let mut records = Vec::new();
        for (i, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let record = serde_json::from_slice(line).map_err(|e| StoreError::Corrupt {
                path: self.path.display().to_string(),
                line: i + 1,
                reason: e.to_string(),
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Input(#[from] ControllerError),
}

/// A controller whose every input is logged first.
pub struct Service<S: Store> {
    controller: Controller,
    store: S,
}

impl<S: Store> Service<S> {
    /// Replays `store` into `controller` (fresh, built from the same graph and config), then
    /// queues what a controller taking over must send.
    pub fn open(mut controller: Controller, mut store: S, now: Instant) -> Result<Service<S>, StoreError> {
        for r in store.load()? {
            let at = Instant::from_nanos(r.at_ns);
            match r.event {
                // Inputs were checked before they were logged; one failing now fails the same
                // way it did then, harmlessly.
                Event::Input(input) => {
                    let _ = controller.handle(at, input);
                }
                Event::Tick => controller.handle_timeout(at),
            }
        }
        controller.take_over(now);
        Ok(Service { controller, store })
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn handle(&mut self, now: Instant, input: Input) -> Result<(), ServiceError> {
        // Bad input is refused before it reaches the log.
        self.controller.check(&input)?;
        self.store.append(&Record {
            at_ns: now.as_nanos(),
            event: Event::Input(input.clone()),
        })?;
        Ok(self.controller.handle(now, input)?)
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.controller.poll_timeout()
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ServiceError> {
        if self.controller.poll_timeout().is_none_or(|t| t > now) {
            return Ok(());
        }
        self.store.append(&Record {
            at_ns: now.as_nanos(),
            event: Event::Tick,
        })?;
        self.controller.handle_timeout(now);
        Ok(())
    }

    pub fn poll_output(&mut self) -> Option<Output> {
        self.controller.poll_output()
    }

    pub fn take_reroute(&mut self) -> Option<Vec<(usize, u16)>> {
        self.controller.take_reroute()
    }
}
