//! The Redis-protocol front (`onepipe_kv::Store`) over the transactional store: every command
//! is one transaction (MSET and DEL of several keys atomic across shards), MULTI/EXEC is one
//! transaction of all its commands, DBSIZE and SNAPSHOT are consistent snapshots. The front's
//! client processes run in the fabric; connections hand them jobs through mailboxes.

mod cluster;
mod commands;
mod source;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use onepipe_kv::{Command, Reply, Store, StoreError, StoreInfo};

pub use cluster::{Cluster, ClusterError, ClusterOptions};
pub use source::{FrontSource, Job, Mailbox};

use crate::client::SnapshotResult;
use crate::txn::{Outcome, Txn};

type Results = Vec<Result<Reply, StoreError>>;

/// The store the RESP server calls.
pub struct TxStore {
    mailboxes: Vec<Arc<Mailbox>>,
    next: AtomicUsize,
    /// How long one command may take, every retry included; then its outcome is unknown.
    command_wait: Duration,
    describe: StoreInfo,
}

/// Longest key and value the front takes (a transaction's message stays far below the
/// fabric's message limit).
pub const KEY_BYTES_MAX: usize = 1024;
pub const VALUE_BYTES_MAX: usize = 256 * 1024;

impl TxStore {
    pub fn new(
        mailboxes: Vec<Arc<Mailbox>>,
        command_wait: Duration,
        fields: Vec<(String, String)>,
    ) -> TxStore {
        assert!(!mailboxes.is_empty(), "a front needs a client process");
        TxStore {
            mailboxes,
            next: AtomicUsize::new(0),
            command_wait,
            describe: StoreInfo {
                name: "1pipe-txkv".into(),
                key_bytes_max: KEY_BYTES_MAX,
                value_bytes_max: VALUE_BYTES_MAX,
                fields,
            },
        }
    }

    fn mailbox(&self) -> &Mailbox {
        &self.mailboxes[self.next.fetch_add(1, Ordering::Relaxed) % self.mailboxes.len()]
    }

    /// Hands `txn` to the front client of `mailbox`; its outcome comes on the receiver.
    fn submit(mailbox: &Mailbox, txn: Txn) -> Receiver<Outcome> {
        let (tx, rx) = channel();
        mailbox.push(Job::Txn(txn, tx));
        rx
    }

    fn snapshot(mailbox: &Mailbox) -> Receiver<SnapshotResult> {
        let (tx, rx) = channel();
        mailbox.push(Job::Snapshot(tx));
        rx
    }

    fn wait_outcome(&self, rx: &Receiver<Outcome>) -> Result<Vec<crate::txn::OpResult>, StoreError> {
        match rx.recv_timeout(self.command_wait) {
            Ok(Outcome::Committed { results, .. }) => Ok(results),
            Ok(Outcome::Failed(why)) => Err(StoreError::Unavailable(why)),
            Ok(Outcome::Unknown(why)) => Err(StoreError::OutcomeUnknown(why)),
            Err(_) => Err(StoreError::OutcomeUnknown(format!(
                "no answer from the store within {:?}",
                self.command_wait
            ))),
        }
    }

    fn wait_snapshot(&self, rx: &Receiver<SnapshotResult>, command: &Command) -> Result<Reply, StoreError> {
        match rx.recv_timeout(self.command_wait) {
            Ok(SnapshotResult {
                outcome: Ok((ts, pairs)),
                ..
            }) => Ok(commands::snapshot_reply(command, ts, pairs)),
            Ok(SnapshotResult {
                outcome: Err(why), ..
            }) => Err(StoreError::Unavailable(why)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "no snapshot within {:?}",
                self.command_wait
            ))),
        }
    }
}

/// A command handed to the fabric, waiting for its answer.
enum Waiting<'a> {
    Txn(&'a Command, Receiver<Outcome>),
    Snapshot(&'a Command, Receiver<SnapshotResult>),
    Done(Result<Reply, StoreError>),
}

impl Store for TxStore {
    /// Every command is its own transaction; they are all handed out at once (one client
    /// process stamps them in order, so each takes effect after the ones before it).
    fn execute(&self, batch: &[Command]) -> Results {
        // One front client for the whole batch: it stamps the commands in the order given.
        let mailbox = self.mailbox();
        let waiting: Vec<Waiting<'_>> = batch
            .iter()
            .map(|command| {
                if commands::is_snapshot(command) {
                    return Waiting::Snapshot(command, Self::snapshot(mailbox));
                }
                match commands::ops_of(command) {
                    Ok(ops) => Waiting::Txn(command, Self::submit(mailbox, Txn::new(ops))),
                    Err(e) => Waiting::Done(Err(e)),
                }
            })
            .collect();
        waiting
            .into_iter()
            .map(|w| match w {
                Waiting::Txn(command, rx) => self
                    .wait_outcome(&rx)
                    .and_then(|results| commands::reply_of(command, &results)),
                Waiting::Snapshot(command, rx) => self.wait_snapshot(&rx, command),
                Waiting::Done(result) => result,
            })
            .collect()
    }

    /// All the commands' operations as one transaction, at one position of the total order.
    fn transaction(&self, batch: &[Command]) -> Result<Results, StoreError> {
        let mut ops = Vec::new();
        let mut spans = Vec::with_capacity(batch.len());
        for command in batch {
            if commands::is_snapshot(command) {
                return Err(StoreError::Unsupported(format!(
                    "{} inside MULTI",
                    command.name()
                )));
            }
            let mut of = commands::ops_of(command)?;
            spans.push(ops.len()..ops.len() + of.len());
            ops.append(&mut of);
        }
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let results = self.wait_outcome(&Self::submit(self.mailbox(), Txn::new(ops)))?;
        Ok(batch
            .iter()
            .zip(spans)
            .map(|(command, span)| commands::reply_of(command, &results[span]))
            .collect())
    }

    fn describe(&self) -> StoreInfo {
        self.describe.clone()
    }
}
