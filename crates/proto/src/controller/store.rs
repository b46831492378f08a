//! The controller's durable state: the log of what it was told and when its timers fired.
//!
//! The [`Controller`] is deterministic, so replaying its input log rebuilds every decision it
//! made. [`Service`] writes each input to the log before the controller acts on it
//! (write-ahead): a decision announced to anyone is always in the log. A controller restarted
//! on the same log, or a standby reading it, decides exactly the same and finishes what was in
//! progress ([`Controller::take_over`]).
//!
//! Backends: [`MemoryStore`] (tests, a single run) here; the file log (`onepipe::file_store`,
//! the embedded default: one JSON record per line, appended and synced) and etcd (the
//! `onepipe-etcd` crate, whose appends are fenced by a leader election,
//! [`StoreError::NotLeader`]) where the runtimes are.

use super::{Controller, ControllerError, Input, Output};
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
                    let _ = controller.handle_input(at, input);
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

    /// The log, for a controller that takes over from it ([`Service::open`]).
    pub fn into_store(self) -> S {
        self.store
    }

    pub fn handle_input(&mut self, now: Instant, input: Input) -> Result<(), ServiceError> {
        // Bad input is refused before it reaches the log.
        self.controller.check(&input)?;
        self.store.append(&Record {
            at_ns: now.as_nanos(),
            event: Event::Input(input.clone()),
        })?;
        Ok(self.controller.handle_input(now, input)?)
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

    pub fn poll_event(&mut self) -> Option<Output> {
        self.controller.poll_event()
    }

    pub fn take_reroute(&mut self) -> Option<Vec<(usize, u16)>> {
        self.controller.take_reroute()
    }
}
