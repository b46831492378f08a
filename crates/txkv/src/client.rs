//! A client of the 1Pipe store (and of the non-transactional baseline): turns a transaction
//! into one scattering, gathers the replicas' answers, and retries what was lost.
//!
//! - Read-only: one message to one replica of each shard the transaction reads, on the
//!   best-effort service; lost (a NAK, a timeout) or late, it is sent again as a new scattering.
//! - Otherwise: one message to every live replica of each shard it touches, on the reliable
//!   service (1-RTT replication, paper 2.2.2). It is done when every live replica has answered;
//!   their checksums must agree. An answer that does not come is asked for again (the server
//!   answers a retry from memory, without executing it twice), and after `attempts_max` the
//!   outcome is unknown.
//! - A process the controller declares failed is left out of every later scattering, and
//!   answers from it are no longer awaited (paper 5.2).

use std::collections::{BTreeMap, HashMap, VecDeque};

mod snapshots;

pub use snapshots::SnapshotResult;

use crate::codec::{FLAG_READ_ONLY, Message, Reply, Request, SnapshotRequest, Status};
use crate::layout::Layout;
use crate::txn::{Completion, Op, OpResult, Outcome, Txn};

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// This client's process id.
    pub process: u32,
    pub layout: Layout,
    /// Transactions outstanding at most.
    pub window: usize,
    /// Without every answer this long after a scattering, it is sent again.
    pub timeout_ns: u64,
    /// Scatterings per transaction at most.
    pub attempts_max: u32,
    /// The non-transactional baseline: every transaction on the best-effort service.
    pub best_effort_only: bool,
}

impl ClientConfig {
    pub fn new(process: u32, layout: Layout) -> ClientConfig {
        ClientConfig {
            process,
            layout,
            window: 1,
            timeout_ns: 200_000_000,
            attempts_max: 8,
            best_effort_only: false,
        }
    }
}

/// Why a transaction was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("{0} transactions are outstanding already, the most this client keeps")]
    WindowFull(usize),
    #[error("a transaction needs at least one operation")]
    Empty,
    #[error("{0} operations are more than one transaction takes ({max})", max = crate::codec::OPS_MAX)]
    TooLarge(usize),
    #[error("{0} snapshots are being taken already, the most this client takes at once")]
    SnapshotsFull(usize),
    #[error("this store does not take snapshots")]
    SnapshotsUnsupported,
}

impl SubmitError {
    /// Whether a client with `outstanding` of `window` transactions takes `txn`.
    pub fn check(outstanding: usize, window: usize, txn: &Txn) -> Result<(), SubmitError> {
        if outstanding >= window {
            return Err(SubmitError::WindowFull(outstanding));
        }
        if txn.ops.is_empty() {
            return Err(SubmitError::Empty);
        }
        if txn.ops.len() > crate::codec::OPS_MAX {
            return Err(SubmitError::TooLarge(txn.ops.len()));
        }
        Ok(())
    }
}

/// A client's scatterings waiting for the runtime, and which transaction attempt each one
/// that left was, by message id (what a send failure names). Both clients keep one.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: VecDeque<Outgoing>,
    sent: HashMap<u64, (u64, u32)>,
}

impl Outbox {
    pub fn push(&mut self, out: Outgoing) {
        self.queue.push_back(out);
    }
    pub fn pop(&mut self) -> Option<Outgoing> {
        self.queue.pop_front()
    }
    /// `out` could not be sent now: it goes first next time.
    pub fn unsend(&mut self, out: Outgoing) {
        self.queue.push_front(out);
    }
    pub fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        self.sent.insert(msg_id, (out.txn, out.attempt));
    }
    /// The transaction and attempt message `msg_id` was, once.
    pub fn take_sent(&mut self, msg_id: u64) -> Option<(u64, u32)> {
        self.sent.remove(&msg_id)
    }
    /// A finished transaction's message ids are no longer needed (a window's worth stay).
    pub fn forget(&mut self, txn: u64) {
        self.sent.retain(|_, (t, _)| *t != txn);
    }
}

/// One scattering for the runtime to send; report its message id back with
/// [`Client::on_sent`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub txn: u64,
    pub attempt: u32,
    pub reliable: bool,
    pub scatter: Vec<(u32, Vec<u8>)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    pub submitted: u64,
    pub committed: u64,
    pub failed: u64,
    pub unknown: u64,
    pub retries: u64,
    /// Why: an answer that did not come in time, a read that reached its replica late, a
    /// scattering the fabric reported undelivered.
    pub timeouts: u64,
    pub late_reads: u64,
    pub send_failures: u64,
    /// Answers of two replicas of one shard whose checksums differ (replica divergence).
    pub checksum_mismatches: u64,
    pub stale_answers: u64,
    pub malformed: u64,
    /// Processes the controller declared failed.
    pub processes_failed: u64,
}

/// What one shard owes a pending transaction.
struct ShardWait {
    shard: u32,
    ops: Vec<(u16, Op)>,
    /// Replicas (processes) whose answer has not come.
    awaiting: Vec<u32>,
    /// The first answer's checksum.
    checksum: Option<u64>,
    answered: bool,
}

struct Pending {
    read_only: bool,
    attempt: u32,
    call_ns: u64,
    deadline_ns: u64,
    shards: Vec<ShardWait>,
    results: Vec<Option<OpResult>>,
    ts: Option<u64>,
}

pub struct Client {
    config: ClientConfig,
    next_txn: u64,
    pending: BTreeMap<u64, Pending>,
    outbox: Outbox,
    failed: Vec<bool>,
    completions: VecDeque<Completion>,
    snapshots: BTreeMap<u64, snapshots::Gather>,
    snapshots_done: VecDeque<SnapshotResult>,
    counters: ClientCounters,
}

/// Snapshots one client takes at once at most (each holds a copy of the store while it comes in).
pub const SNAPSHOTS_MAX: usize = 4;
/// Pairs per chunk of a snapshot's answer: far below a message's limit for ETC-sized values.
pub const SNAPSHOT_CHUNK_PAIRS: u32 = 256;

impl Client {
    pub fn new(config: ClientConfig) -> Client {
        let servers = config.layout.servers() as usize;
        Client {
            config,
            next_txn: 1,
            pending: BTreeMap::new(),
            outbox: Outbox::default(),
            failed: vec![false; servers],
            completions: VecDeque::new(),
            snapshots: BTreeMap::new(),
            snapshots_done: VecDeque::new(),
            counters: ClientCounters::default(),
        }
    }

    pub fn counters(&self) -> &ClientCounters {
        &self.counters
    }

    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    pub fn has_room(&self) -> bool {
        self.pending.len() < self.config.window
    }

    /// Starts `txn` at `now_ns`; returns its id.
    pub fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError> {
        SubmitError::check(self.pending.len(), self.config.window, &txn)?;
        let id = self.next_txn;
        self.next_txn += 1;
        let read_only = txn.is_read_only();
        let mut by_shard: BTreeMap<u32, Vec<(u16, Op)>> = BTreeMap::new();
        let n = txn.ops.len();
        for (i, op) in txn.ops.into_iter().enumerate() {
            let shard = self.config.layout.shard_of(op.key());
            by_shard.entry(shard).or_default().push((i as u16, op));
        }
        let shards = by_shard
            .into_iter()
            .map(|(shard, ops)| ShardWait {
                shard,
                ops,
                awaiting: Vec::new(),
                checksum: None,
                answered: false,
            })
            .collect();
        let pending = Pending {
            read_only,
            attempt: 0,
            call_ns: now_ns,
            deadline_ns: now_ns,
            shards,
            results: vec![None; n],
            ts: None,
        };
        self.pending.insert(id, pending);
        self.counters.submitted += 1;
        self.scatter(now_ns, id, 0);
        Ok(id)
    }

    /// Builds attempt `attempt` of `txn` into the outbox: for a read, one live replica per
    /// shard not answered yet; for a write, every live replica that has not answered.
    fn scatter(&mut self, now_ns: u64, id: u64, attempt: u32) {
        let best_effort_only = self.config.best_effort_only;
        let layout = self.config.layout;
        let client = self.config.process;
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        p.attempt = attempt;
        p.deadline_ns = now_ns.saturating_add(self.config.timeout_ns);
        let mut scatter = Vec::new();
        let mut unreachable = false;
        for w in &mut p.shards {
            if w.answered && w.awaiting.is_empty() {
                continue;
            }
            let live: Vec<u32> = layout
                .replicas_of(w.shard)
                .filter(|&r| !self.failed[r as usize])
                .collect();
            let targets: Vec<u32> = if p.read_only {
                let pick = (u64::from(client) + id + u64::from(attempt)) as usize;
                live.get(pick % live.len().max(1)).into_iter().copied().collect()
            } else if attempt == 0 {
                live
            } else {
                w.awaiting.retain(|r| live.contains(r));
                w.awaiting.clone()
            };
            if targets.is_empty() && !w.answered {
                unreachable = true;
                continue;
            }
            if p.read_only || attempt == 0 {
                w.awaiting = targets.clone();
            }
            let flags = if p.read_only { FLAG_READ_ONLY } else { 0 };
            let bytes = Message::Request(Request {
                txn: id,
                attempt,
                flags,
                ops: w.ops.clone(),
            })
            .encode();
            scatter.extend(targets.into_iter().map(|r| (r, bytes.clone())));
        }
        if unreachable {
            let read_only = p.read_only;
            let why = "every replica of a shard it touches has failed".to_string();
            let outcome = if read_only || attempt == 0 {
                Outcome::Failed(why)
            } else {
                Outcome::Unknown(why)
            };
            return self.finish(now_ns, id, outcome);
        }
        if scatter.is_empty() {
            return self.try_complete(now_ns, id);
        }
        let reliable = !p.read_only && !best_effort_only;
        self.outbox.push(Outgoing {
            txn: id,
            attempt,
            reliable,
            scatter,
        });
    }

    pub fn poll_send(&mut self) -> Option<Outgoing> {
        self.outbox.pop()
    }

    /// The runtime could not send `out` now (its buffer is full): it is offered again first.
    pub fn unsend(&mut self, out: Outgoing) {
        self.outbox.unsend(out);
    }

    /// `out` left as message `msg_id` (what a send failure will name).
    pub fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        self.outbox.on_sent(out, msg_id);
    }

    /// The scattering `msg_id` was not delivered (paper Table 1, send-failure callback).
    pub fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        let Some((id, attempt)) = self.outbox.take_sent(msg_id) else {
            return;
        };
        if self.pending.get(&id).is_some_and(|p| p.attempt == attempt) {
            self.counters.send_failures += 1;
            self.retry(now_ns, id);
        }
        if self.snapshots.get(&id).is_some_and(|g| g.attempt == attempt) {
            self.counters.send_failures += 1;
            self.snapshot_attempt(now_ns, id, attempt + 1);
        }
    }

    /// The controller declared `process` failed: it is left out from now on.
    pub fn on_process_failure(&mut self, now_ns: u64, process: u32) {
        let Some(slot) = self.failed.get_mut(process as usize) else {
            return;
        };
        if !*slot {
            self.counters.processes_failed += 1;
        }
        *slot = true;
        let waiting: Vec<(u64, u32)> = self
            .snapshots
            .iter()
            .filter(|(_, g)| g.waits_for(process))
            .map(|(&id, g)| (id, g.attempt))
            .collect();
        for (id, attempt) in waiting {
            self.snapshot_attempt(now_ns, id, attempt + 1);
        }
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            let waited = p.shards.iter().any(|w| w.awaiting.contains(&process));
            for w in &mut p.shards {
                w.awaiting.retain(|&r| r != process);
            }
            if !waited {
                continue;
            }
            if p.read_only || p.shards.iter().any(|w| !w.answered && w.awaiting.is_empty()) {
                self.retry(now_ns, id);
            } else {
                self.try_complete(now_ns, id);
            }
        }
    }

    /// A message delivered to this client.
    pub fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        match Message::decode(payload) {
            Ok(Message::Reply(reply)) => self.on_reply(now_ns, src, reply),
            Ok(Message::SnapshotChunk(chunk)) => self.on_chunk(src, chunk),
            _ => self.counters.malformed += 1,
        }
    }

    fn on_reply(&mut self, now_ns: u64, src: u32, reply: Reply) {
        let id = reply.txn;
        let Some(p) = self.pending.get_mut(&id) else {
            self.counters.stale_answers += 1;
            return;
        };
        let Some(w) = p.shards.iter_mut().find(|w| w.shard == u32::from(reply.shard)) else {
            self.counters.malformed += 1;
            return;
        };
        // A read's answer counts for its own attempt only; a write executes once per
        // replica whatever attempt asked, so any attempt's answer counts.
        if (p.read_only && reply.attempt != p.attempt) || !w.awaiting.contains(&src) {
            self.counters.stale_answers += 1;
            return;
        }
        match reply.status {
            Status::Late => {
                self.counters.late_reads += 1;
                return self.retry(now_ns, id);
            }
            Status::Forgotten => {
                let why = "a replica no longer remembers the write it was asked about".to_string();
                return self.finish(now_ns, id, Outcome::Unknown(why));
            }
            Status::Applied | Status::Duplicate => {}
        }
        w.awaiting.retain(|&r| r != src);
        match w.checksum {
            None => w.checksum = Some(reply.checksum),
            Some(c) if !p.read_only && c != reply.checksum => self.counters.checksum_mismatches += 1,
            Some(_) => {}
        }
        if !w.answered {
            w.answered = true;
            for (i, r) in reply.results {
                if let Some(slot) = p.results.get_mut(usize::from(i)) {
                    *slot = Some(r);
                }
            }
            p.ts = Some(p.ts.map_or(reply.ts, |t: u64| t.max(reply.ts)));
        }
        self.try_complete(now_ns, id);
    }

    fn try_complete(&mut self, now_ns: u64, id: u64) {
        let Some(p) = self.pending.get(&id) else {
            return;
        };
        if !p.shards.iter().all(|w| w.answered && w.awaiting.is_empty()) {
            return;
        }
        if p.results.iter().any(Option::is_none) {
            let why = "a server answered without every result".to_string();
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        let results = p.results.iter().map(|r| r.clone().expect("checked")).collect();
        let ts = p.ts.unwrap_or(0);
        self.finish(now_ns, id, Outcome::Committed { ts, results });
    }

    fn retry(&mut self, now_ns: u64, id: u64) {
        let Some(p) = self.pending.get(&id) else {
            return;
        };
        let attempt = p.attempt + 1;
        if attempt >= self.config.attempts_max {
            let why = format!("no complete answer after {attempt} tries");
            let outcome = if p.read_only {
                Outcome::Failed(why)
            } else {
                Outcome::Unknown(why)
            };
            return self.finish(now_ns, id, outcome);
        }
        self.counters.retries += 1;
        if p.read_only {
            // A read is one snapshot at one position: it is asked again whole.
            let p = self.pending.get_mut(&id).expect("seen above");
            for w in &mut p.shards {
                w.answered = false;
                w.checksum = None;
            }
            p.results.iter_mut().for_each(|r| *r = None);
            p.ts = None;
        }
        self.scatter(now_ns, id, attempt);
    }

    fn finish(&mut self, now_ns: u64, id: u64, outcome: Outcome) {
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        let ts = match &outcome {
            Outcome::Committed { ts, .. } => Some(*ts),
            Outcome::Unknown(_) => p.ts,
            Outcome::Failed(_) => None,
        };
        match outcome {
            Outcome::Committed { .. } => self.counters.committed += 1,
            Outcome::Failed(_) => self.counters.failed += 1,
            Outcome::Unknown(_) => self.counters.unknown += 1,
        }
        self.completions.push_back(Completion {
            id,
            outcome,
            call_ns: p.call_ns,
            return_ns: now_ns,
            attempts: p.attempt + 1,
            aborts: 0,
            ts,
        });
        self.outbox.forget(id);
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// When the earliest outstanding scattering times out.
    pub fn poll_timeout(&self) -> Option<u64> {
        let txns = self.pending.values().map(|p| p.deadline_ns);
        txns.chain(self.snapshots.values().map(|g| g.deadline_ns)).min()
    }

    /// Starts a snapshot of the whole store (paper 2.2.4); its result comes from
    /// [`Client::poll_snapshot`].
    pub fn snapshot(&mut self, now_ns: u64) -> Result<u64, SubmitError> {
        if self.snapshots.len() >= SNAPSHOTS_MAX {
            return Err(SubmitError::SnapshotsFull(self.snapshots.len()));
        }
        let id = self.next_txn;
        self.next_txn += 1;
        self.snapshot_attempt(now_ns, id, 0);
        Ok(id)
    }

    /// Asks one live replica of every shard, as one reliable scattering.
    fn snapshot_attempt(&mut self, now_ns: u64, id: u64, attempt: u32) {
        if attempt >= self.config.attempts_max {
            self.snapshots.remove(&id);
            let why = format!("no complete snapshot after {attempt} tries");
            return self.snapshots_done.push_back(SnapshotResult {
                id,
                outcome: Err(why),
            });
        }
        let layout = self.config.layout;
        let mut targets = Vec::new();
        for shard in 0..layout.shards {
            let live: Vec<u32> = layout
                .replicas_of(shard)
                .filter(|&r| !self.failed[r as usize])
                .collect();
            let Some(&replica) = live.get((id as usize + attempt as usize) % live.len().max(1)) else {
                self.snapshots.remove(&id);
                let why = format!("every replica of shard {shard} has failed");
                return self.snapshots_done.push_back(SnapshotResult {
                    id,
                    outcome: Err(why),
                });
            };
            targets.push((shard as u16, replica));
        }
        let deadline = now_ns.saturating_add(self.config.timeout_ns);
        self.snapshots
            .insert(id, snapshots::Gather::new(attempt, deadline, &targets));
        let bytes = Message::SnapshotRequest(SnapshotRequest {
            id,
            chunk_pairs: SNAPSHOT_CHUNK_PAIRS,
        })
        .encode();
        self.outbox.push(Outgoing {
            txn: id,
            attempt,
            reliable: true,
            scatter: targets.iter().map(|&(_, r)| (r, bytes.clone())).collect(),
        });
    }

    fn on_chunk(&mut self, src: u32, chunk: crate::codec::SnapshotChunk) {
        let id = chunk.id;
        let Some(g) = self.snapshots.get_mut(&id) else {
            self.counters.stale_answers += 1;
            return;
        };
        if !g.take(src, chunk) {
            self.counters.stale_answers += 1;
            return;
        }
        if g.is_complete() {
            let g = self.snapshots.remove(&id).expect("just seen");
            self.snapshots_done.push_back(SnapshotResult {
                id,
                outcome: Ok(g.into_pairs()),
            });
        }
    }

    pub fn poll_snapshot(&mut self) -> Option<SnapshotResult> {
        self.snapshots_done.pop_front()
    }

    pub fn handle_timeout(&mut self, now_ns: u64) {
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline_ns <= now_ns)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.counters.timeouts += 1;
            self.retry(now_ns, id);
        }
        let due: Vec<(u64, u32)> = self
            .snapshots
            .iter()
            .filter(|(_, g)| g.deadline_ns <= now_ns)
            .map(|(&id, g)| (id, g.attempt))
            .collect();
        for (id, attempt) in due {
            self.counters.timeouts += 1;
            self.snapshot_attempt(now_ns, id, attempt + 1);
        }
    }

    /// Checked after every step, in release builds too.
    pub fn invariants(&self) {
        assert!(
            self.pending.len() <= self.config.window,
            "more transactions outstanding than the window"
        );
        for p in self.pending.values() {
            assert!(
                p.attempt < self.config.attempts_max,
                "an attempt past the limit is outstanding"
            );
        }
    }
}

#[cfg(test)]
mod tests;
