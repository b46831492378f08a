//! The Redis front's requests, handed from the connections' threads to a client process
//! running in the fabric, and their answers handed back.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use crate::client::SnapshotResult;
use crate::run::TxnSource;
use crate::txn::{Completion, Outcome, Txn};

/// What a connection asks of the store.
pub enum Job {
    Txn(Txn, Sender<Outcome>),
    Snapshot(Sender<SnapshotResult>),
}

/// Jobs waiting for one front client process. At most one batch per connection waits here (a
/// connection waits for its answers), so the server's connection limit bounds it.
#[derive(Default)]
pub struct Mailbox {
    jobs: Mutex<VecDeque<Job>>,
}

impl Mailbox {
    pub fn push(&self, job: Job) {
        self.jobs.lock().expect("mailbox lock").push_back(job);
    }

    fn pop_if(&self, f: impl Fn(&Job) -> bool) -> Option<Job> {
        let mut jobs = self.jobs.lock().expect("mailbox lock");
        if jobs.front().is_some_and(f) {
            return jobs.pop_front();
        }
        None
    }
}

/// A front client process's source: the jobs of its mailbox.
pub struct FrontSource {
    mailbox: Arc<Mailbox>,
    /// Where each submitted transaction's outcome goes.
    waiting: HashMap<u64, Sender<Outcome>>,
    /// Who waits for the snapshot being taken, and who asked since it started (they get the
    /// next one: a snapshot answers only those who asked before it was taken).
    in_flight: Vec<Sender<SnapshotResult>>,
    queued: Vec<Sender<SnapshotResult>>,
    /// The transaction `next` handed out, until `submitted` names its id.
    handed: Option<Sender<Outcome>>,
}

impl FrontSource {
    pub fn new(mailbox: Arc<Mailbox>) -> FrontSource {
        FrontSource {
            mailbox,
            waiting: HashMap::new(),
            in_flight: Vec::new(),
            queued: Vec::new(),
            handed: None,
        }
    }
}

impl TxnSource for FrontSource {
    fn next(&mut self, _now_ns: u64) -> Option<Txn> {
        match self.mailbox.pop_if(|j| matches!(j, Job::Txn(..)))? {
            Job::Txn(txn, reply) => {
                self.handed = Some(reply);
                Some(txn)
            }
            Job::Snapshot(_) => unreachable!("only transactions are popped here"),
        }
    }

    fn submitted(&mut self, id: u64, _txn: Txn) {
        if let Some(reply) = self.handed.take() {
            self.waiting.insert(id, reply);
        }
    }

    fn completed(&mut self, c: Completion) {
        // Refused at submit: `handed` still holds its sender.
        let reply = self.waiting.remove(&c.id).or_else(|| self.handed.take());
        if let Some(reply) = reply {
            // A connection that went away no longer listens.
            let _ = reply.send(c.outcome);
        }
    }

    fn wants_snapshot(&mut self) -> bool {
        while let Some(Job::Snapshot(reply)) = self.mailbox.pop_if(|j| matches!(j, Job::Snapshot(_))) {
            self.queued.push(reply);
        }
        let start = self.in_flight.is_empty() && !self.queued.is_empty();
        if start {
            self.in_flight = std::mem::take(&mut self.queued);
        }
        start
    }

    fn snapshot_done(&mut self, result: SnapshotResult) {
        for reply in self.in_flight.drain(..) {
            let _ = reply.send(result.clone());
        }
    }
}
