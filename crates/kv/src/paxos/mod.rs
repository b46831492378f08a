//! The in-network Paxos store behind the [`Store`] trait: the commands of a connection's batch
//! become requests of a Paxos proposer that runs as a process of the fabric ([`ServiceHost`], a
//! node of whichever runtime drives it), and the replicas' answers become replies.
//!
//! Every command, reads too, is a value of the agreed log ([`Envelope`]): the replicas run the
//! log in order, so the store is linearizable. A batch's commands go into the log one after
//! another (the next is proposed when the previous one is answered), so a pipeline runs in
//! order even when a request is lost and retried. With several partitions, a command whose keys
//! are in more than one partition is answered `CROSSSLOT` without being proposed.
//!
//! Each command in flight holds a client slot of its service host: the slot's client id
//! (`process << 32 | slot`) is the replicas' session key, and its request ids only grow (from
//! [`ServiceConfig::first_request`]), so a retried request runs once (exactly-once sessions)
//! and a request given up on that arrives later is refused as stale.

mod host;
#[cfg(test)]
mod tests;

pub use host::{ServiceConfig, ServiceCounters, ServiceHost};

use crate::replicated::{KEY_BYTES_MAX, VALUE_BYTES_MAX};
use crate::{Command, Reply, Store, StoreError, StoreInfo};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

/// One result per command of a batch, in order.
pub type Results = Vec<Result<Reply, StoreError>>;

/// Bytes an envelope adds to a SET's key and value, at most: version, two 10-byte varints,
/// tag, condition, two 2-byte length varints (keys and values are under 16 KiB).
pub const ENVELOPE_OVERHEAD_BYTES_MAX: usize = 1 + 10 + 10 + 1 + 1 + 2 + 2;

/// Requests from the connections' threads to one [`ServiceHost`]: each a batch and where its
/// results go. At most one batch per connection waits here (a connection waits for its
/// batch), so the server's connection limit bounds it.
#[derive(Default)]
pub struct Mailbox {
    requests: Mutex<VecDeque<(Vec<Command>, Sender<Results>)>>,
}

impl Mailbox {
    /// Hands `batch` to the service host; its results go to `reply`.
    pub fn push(&self, batch: Vec<Command>, reply: Sender<Results>) {
        self.requests
            .lock()
            .expect("mailbox lock")
            .push_back((batch, reply));
    }

    fn drain(&self) -> Vec<(Vec<Command>, Sender<Results>)> {
        self.requests.lock().expect("mailbox lock").drain(..).collect()
    }
}

/// The key and value limits a store whose log carries values of up to `log_value_bytes_max`
/// bytes announces: a SET of a key and a value within them always fits one log value.
pub fn limits(log_value_bytes_max: usize) -> (usize, usize) {
    let key = (log_value_bytes_max / 4).min(KEY_BYTES_MAX);
    let value = log_value_bytes_max
        .saturating_sub(key + ENVELOPE_OVERHEAD_BYTES_MAX)
        .min(VALUE_BYTES_MAX);
    (key, value)
}

/// The store the RESP server calls: hands each batch to a service host, in turn, and waits.
pub struct PaxosStore {
    mailboxes: Vec<Arc<Mailbox>>,
    next: AtomicUsize,
    partitions: u16,
    log_value_bytes_max: usize,
    /// Longest one command may take (every try of its request); a batch waits this long per
    /// command, then answers what is left `UNKNOWN`.
    command_wait: std::time::Duration,
}

impl PaxosStore {
    /// A store over `mailboxes` (one per service host) of a deployment with `partitions`
    /// partitions whose acceptors hold values of up to `log_value_bytes_max` bytes.
    pub fn new(
        mailboxes: Vec<Arc<Mailbox>>,
        partitions: u16,
        log_value_bytes_max: usize,
        command_wait: std::time::Duration,
    ) -> PaxosStore {
        assert!(!mailboxes.is_empty(), "a store needs a service host");
        assert!(partitions >= 1);
        assert!(log_value_bytes_max > ENVELOPE_OVERHEAD_BYTES_MAX);
        PaxosStore {
            mailboxes,
            next: AtomicUsize::new(0),
            partitions,
            log_value_bytes_max,
            command_wait,
        }
    }
}

impl Store for PaxosStore {
    fn execute(&self, batch: &[Command]) -> Results {
        if batch.is_empty() {
            return Vec::new();
        }
        let (tx, rx) = channel();
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.mailboxes.len();
        self.mailboxes[i].push(batch.to_vec(), tx);
        let wait = self.command_wait.saturating_mul(batch.len() as u32 + 1);
        match rx.recv_timeout(wait) {
            Ok(results) => {
                assert_eq!(results.len(), batch.len(), "one result per command");
                results
            }
            // The service host is gone or stuck: what it did is not known.
            Err(_) => batch
                .iter()
                .map(|_| {
                    Err(StoreError::OutcomeUnknown(format!(
                        "no answer from the Paxos service host within {wait:?}"
                    )))
                })
                .collect(),
        }
    }

    fn describe(&self) -> StoreInfo {
        let (key_bytes_max, value_bytes_max) = limits(self.log_value_bytes_max);
        StoreInfo {
            name: "paxos".into(),
            key_bytes_max,
            value_bytes_max,
            fields: vec![
                ("paxos_service_hosts".into(), self.mailboxes.len().to_string()),
                ("paxos_partitions".into(), self.partitions.to_string()),
                (
                    "paxos_log_value_bytes_max".into(),
                    self.log_value_bytes_max.to_string(),
                ),
                (
                    "paxos_consistency".into(),
                    "linearizable (every command through the agreed log)".into(),
                ),
            ],
        }
    }
}
