//! The controller's durable state: the log of what it was told and when its timers fired.
//!
//! The [`Controller`] is deterministic, so replaying its input log rebuilds every decision it
//! made. [`Service`] writes each input to the log before the controller acts on it
//! (write-ahead): a decision announced to anyone is always in the log. A controller restarted
//! on the same log, or a standby reading it, decides exactly the same and finishes what was in
//! progress ([`Controller::take_over`]).
//!
//! The log stays bounded: once [`Service::compact_after_records`] records follow the last
//! snapshot, the service asks the store to replace the whole log with one
//! [`Event::Snapshot`] of the controller's state ([`Store::compact`]); replaying a snapshot
//! and the records after it gives the same controller as replaying everything. An input that
//! changes nothing (a registration repeated by a process already registered) is answered
//! without being written ([`Controller::is_noop`]): processes repeat their registration
//! until it is confirmed and on every Hello, and each would otherwise cost a synced write.
//!
//! Backends: [`MemoryStore`] (tests, a single run) here; the file log (`onepipe::file_store`,
//! the embedded default: one JSON record per line, appended and synced, compacted by writing
//! a new file and renaming it over the old) and etcd (the `onepipe-etcd` crate, whose appends
//! and compactions are fenced by a leader election, [`StoreError::NotLeader`]) where the
//! runtimes are.

use super::{Controller, ControllerError, Input, Output, Snapshot};
use onepipe_wire::Instant;
use serde::{Deserialize, Serialize};

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
    /// The controller's whole state: replaces what the records before it built.
    Snapshot(Box<Snapshot>),
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
    /// Replaces every record with `snapshot` (an [`Event::Snapshot`]), durably and atomically:
    /// a crash in the middle leaves the old log or the new one, and either replays to the same
    /// controller. On an error the old log is intact.
    fn compact(&mut self, snapshot: &Record) -> Result<(), StoreError>;
}

/// The log in memory. `writes` counts appends and compactions (each a synced write in a
/// durable store).
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    pub records: Vec<Record>,
    pub writes: u64,
}

impl Store for MemoryStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.records.push(record.clone());
        self.writes += 1;
        Ok(())
    }
    fn load(&mut self) -> Result<Vec<Record>, StoreError> {
        Ok(self.records.clone())
    }
    fn compact(&mut self, snapshot: &Record) -> Result<(), StoreError> {
        self.records = vec![snapshot.clone()];
        self.writes += 1;
        Ok(())
    }
}

/// Records that may follow the last snapshot before the log is compacted. A snapshot is about
/// 30 bytes of JSON per process and link (125 KB for 4,096 processes, restored in about 1 ms),
/// about as much as this many records: a compaction writes about as much as the log held.
pub const COMPACT_AFTER_RECORDS_DEFAULT: u64 = 4096;

/// What the service did with its log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    /// Records appended (inputs and ticks).
    pub appended: u64,
    /// Inputs answered without a record because they change nothing ([`Controller::is_noop`]).
    pub unchanged: u64,
    /// Snapshots that replaced the log.
    pub compactions: u64,
    /// Compactions the store refused; the log stays whole and the next record tries again.
    pub compactions_failed: u64,
}

impl Controller {
    /// Whether `input` leaves the controller's state exactly as it is and only gets an answer:
    /// a registration from a process registered and not failed (its answer, `Registered`,
    /// is built from state already logged). Such an input is not logged.
    pub fn is_noop(&self, input: &Input) -> bool {
        match *input {
            Input::Register { process } => {
                self.registered.get(process as usize) == Some(&true) && self.failure_of(process).is_none()
            }
            _ => false,
        }
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
    /// Records in the log after its last snapshot (or after the last compaction the store
    /// refused).
    records_since_snapshot: u64,
    compact_after_records: u64,
    counters: LogCounters,
}

/// Replays `records` into `controller` (fresh, built from the same graph and config); returns
/// how many records follow the last snapshot.
pub fn replay(controller: &mut Controller, records: Vec<Record>) -> Result<u64, StoreError> {
    let mut since_snapshot = 0;
    for (i, r) in records.into_iter().enumerate() {
        let at = Instant::from_nanos(r.at_ns);
        since_snapshot += 1;
        match r.event {
            // Inputs were checked before they were logged; one failing now fails the same
            // way it did then, harmlessly.
            Event::Input(input) => {
                let _ = controller.handle_input(at, input);
            }
            Event::Tick => controller.handle_timeout(at),
            Event::Snapshot(s) => {
                controller.restore(*s).map_err(|e| StoreError::Corrupt {
                    path: "controller log".to_string(),
                    line: i + 1,
                    reason: e.to_string(),
                })?;
                since_snapshot = 0;
            }
        }
    }
    Ok(since_snapshot)
}

impl<S: Store> Service<S> {
    /// Replays `store` into `controller` (fresh, built from the same graph and config), then
    /// queues what a controller taking over must send.
    pub fn open(mut controller: Controller, mut store: S, now: Instant) -> Result<Service<S>, StoreError> {
        let records_since_snapshot = replay(&mut controller, store.load()?)?;
        controller.take_over(now);
        Ok(Service {
            controller,
            store,
            records_since_snapshot,
            compact_after_records: COMPACT_AFTER_RECORDS_DEFAULT,
            counters: LogCounters::default(),
        })
    }

    /// Compacts the log once `records` follow its last snapshot (at least 1).
    pub fn compact_after_records(mut self, records: u64) -> Service<S> {
        self.compact_after_records = records.max(1);
        self
    }

    pub fn log_counters(&self) -> &LogCounters {
        &self.counters
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// The log, for a controller that takes over from it ([`Service::open`]).
    pub fn into_store(self) -> S {
        self.store
    }

    pub fn handle_input(&mut self, now: Instant, input: Input) -> Result<(), ServiceError> {
        // Bad input is refused before it reaches the log.
        self.controller.check(&input)?;
        if self.controller.is_noop(&input) {
            self.counters.unchanged += 1;
            return Ok(self.controller.handle_input(now, input)?);
        }
        self.append(now, Event::Input(input.clone()))?;
        self.controller.handle_input(now, input)?;
        self.compact_if_due(now);
        Ok(())
    }

    fn append(&mut self, now: Instant, event: Event) -> Result<(), StoreError> {
        self.store.append(&Record {
            at_ns: now.as_nanos(),
            event,
        })?;
        self.counters.appended += 1;
        self.records_since_snapshot += 1;
        Ok(())
    }

    /// Replaces the log with a snapshot once it is long enough. Done after the record's input
    /// was acted on, so the snapshot holds it; a refusal leaves the log whole and is counted
    /// (a deposed leader finds out at its next append).
    fn compact_if_due(&mut self, now: Instant) {
        if self.records_since_snapshot < self.compact_after_records {
            return;
        }
        let snapshot = Record {
            at_ns: now.as_nanos(),
            event: Event::Snapshot(Box::new(self.controller.snapshot())),
        };
        match self.store.compact(&snapshot) {
            Ok(()) => {
                self.counters.compactions += 1;
                self.records_since_snapshot = 0;
            }
            // Tried again once as many records more have come, not at every record.
            Err(_) => {
                self.counters.compactions_failed += 1;
                self.records_since_snapshot = 0;
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.controller.poll_timeout()
    }

    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), ServiceError> {
        if self.controller.poll_timeout().is_none_or(|t| t > now) {
            return Ok(());
        }
        self.append(now, Event::Tick)?;
        self.controller.handle_timeout(now);
        self.compact_if_due(now);
        Ok(())
    }

    pub fn poll_event(&mut self) -> Option<Output> {
        self.controller.poll_event()
    }

    pub fn take_reroute(&mut self) -> Option<Vec<(usize, u16)>> {
        self.controller.take_reroute()
    }
}
