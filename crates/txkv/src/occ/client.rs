//! A client of the OCC baseline: FaRM-style optimistic concurrency control with two-phase
//! commit (paper 7.3.1, FaRM [34]), on endpoints that do not order.
//!
//! Phases, each one round trip to the shards' primaries (the commit to every live replica):
//! - read-only: Read; one shard: done (1 RTT). Several shards: Validate (2 RTTs). FaRM answers
//!   a multi-shard read-only transaction after the reads alone, but two reads at two shards at
//!   two instants are not one snapshot (a write transaction may commit between them), so this
//!   baseline validates to stay serializable, like the store it is compared with.
//! - write-only: Lock the written keys, Commit (2 RTTs).
//! - read-write: Read, Lock (a key also read must still have the version read), Validate the
//!   keys read and not written, Commit (4 RTTs; 3 when every key read is also written).
//!
//! A key found locked, a lock refused or a validation failed aborts the attempt: its locks are
//! released (Abort, answered), it backs off (see [`OccClientConfig::backoff_base_ns`]) and starts
//! again from the top; after `aborts_max` aborts it fails. A message not answered in
//! `timeout_ns` is sent again (every handler is idempotent); after `attempts_max` sends of one
//! phase the transaction ends: unknown if a commit may have been applied, failed otherwise.
//!
//! Process failures: a failed backup is left out of commits and no longer awaited. A failed
//! primary is out of scope (there is no primary election): transactions on its shard fail
//! (unknown if their commit was sent), and locks they held on other shards stay held.
//!
//! Serialization point (`Outcome::Committed::ts`, in the client's `now_ns`): for a write
//! transaction, the instant its last lock grant arrives; for a read-only one, the instant its
//! read phase completes. Each key's lock is held from its grant (before that instant) to the
//! commit's arrival at the primary (after it), so no other transaction changes a written key
//! around that instant. Each key read kept its version, unlocked, from its read (before the
//! instant) to its validation or lock (after it): no write transaction committed to it in
//! between, and one that held its lock at the instant would still have held it at validation.
//! So the values read and written are those of a serial execution in `ts` order. The exception
//! is a one-shard read-only transaction, which skips validation: its reads are atomic at the
//! primary at one instant between `call_ns` and `ts`, not necessarily at `ts`.

mod plan;

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use self::plan::{Plan, backoff_ns};
use super::codec::{
    Abort, Commit, CommitReply, CommitStatus, Lock, LockReply, OccMessage, Read, ReadReply, Validate,
    ValidateReply,
};
use crate::client::{ClientCounters, Outgoing, SubmitError};
use crate::layout::Layout;
use crate::txn::{Completion, OpResult, Outcome, Txn};

#[derive(Clone, Debug)]
pub struct OccClientConfig {
    /// This client's process id.
    pub process: u32,
    pub layout: Layout,
    /// Transactions outstanding at most.
    pub window: usize,
    /// Without every answer this long after a phase's messages, they are sent again.
    pub timeout_ns: u64,
    /// Sends of one phase at most.
    pub attempts_max: u32,
    /// Aborts of one transaction at most: the next one fails it.
    pub aborts_max: u32,
    /// The back-off after the first abort; it doubles with each abort up to `backoff_max_ns`.
    pub backoff_base_ns: u64,
    pub backoff_max_ns: u64,
}

impl OccClientConfig {
    pub fn new(process: u32, layout: Layout) -> OccClientConfig {
        OccClientConfig {
            process,
            layout,
            window: 1,
            timeout_ns: 200_000_000,
            attempts_max: 8,
            aborts_max: 64,
            backoff_base_ns: 20_000,
            backoff_max_ns: 10_000_000,
        }
    }
}

/// What only the OCC baseline counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OccCounters {
    pub aborts: u64,
    /// Aborts because a read found a key locked, a lock was refused, a validation failed.
    pub read_conflicts: u64,
    pub lock_conflicts: u64,
    pub validation_failures: u64,
    /// Transactions failed after `aborts_max` aborts.
    pub aborts_exhausted: u64,
    /// Aborts not answered after `attempts_max` sends: their locks may stay held.
    pub locks_abandoned: u64,
    /// Phases started (one round trip each without loss).
    pub phases: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Read,
    Lock,
    Validate,
    Commit,
    Abort,
    Backoff,
}

struct Pending {
    plan: Plan,
    call_ns: u64,
    /// The try every message carries: one per abort, from 0.
    attempt: u32,
    aborts: u32,
    /// Sends again after a timeout or a send failure, over every phase and try.
    resends: u32,
    phase: Phase,
    /// The current phase's messages not answered yet, by destination.
    awaiting: BTreeMap<u32, Vec<u8>>,
    /// Sends of the current phase; the scattering number of the last one.
    sends: u32,
    round: u32,
    deadline_ns: u64,
    /// This attempt's reads (value, version) and locked keys' versions.
    read: HashMap<Bytes, (Option<Bytes>, u64)>,
    bases: HashMap<Bytes, u64>,
    locked_shards: Vec<u32>,
    results: Vec<Option<OpResult>>,
    ts: u64,
    /// Ends the transaction failed once the abort is answered, instead of starting again.
    give_up: Option<String>,
}

pub struct OccClient {
    config: OccClientConfig,
    next_txn: u64,
    pending: BTreeMap<u64, Pending>,
    outbox: VecDeque<Outgoing>,
    /// Scatterings sent, by message id: which transaction and round.
    sent: HashMap<u64, (u64, u32)>,
    failed: Vec<bool>,
    completions: VecDeque<Completion>,
    counters: ClientCounters,
    occ: OccCounters,
}

impl OccClient {
    pub fn new(config: OccClientConfig) -> OccClient {
        let servers = config.layout.servers() as usize;
        OccClient {
            config,
            next_txn: 1,
            pending: BTreeMap::new(),
            outbox: VecDeque::new(),
            sent: HashMap::new(),
            failed: vec![false; servers],
            completions: VecDeque::new(),
            counters: ClientCounters::default(),
            occ: OccCounters::default(),
        }
    }

    pub fn config(&self) -> &OccClientConfig {
        &self.config
    }

    pub fn counters(&self) -> &ClientCounters {
        &self.counters
    }

    pub fn occ_counters(&self) -> &OccCounters {
        &self.occ
    }

    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    pub fn has_room(&self) -> bool {
        self.pending.len() < self.config.window
    }

    /// Starts `txn` at `now_ns`; returns its id.
    pub fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError> {
        if !self.has_room() {
            return Err(SubmitError::WindowFull(self.pending.len()));
        }
        if txn.ops.is_empty() {
            return Err(SubmitError::Empty);
        }
        if txn.ops.len() > crate::codec::OPS_MAX {
            return Err(SubmitError::TooLarge(txn.ops.len()));
        }
        let id = self.next_txn;
        self.next_txn += 1;
        let plan = Plan::new(&self.config.layout, &txn);
        let pending = Pending {
            results: vec![None; plan.ops],
            plan,
            call_ns: now_ns,
            attempt: 0,
            aborts: 0,
            resends: 0,
            phase: Phase::Backoff,
            awaiting: BTreeMap::new(),
            sends: 0,
            round: 0,
            deadline_ns: now_ns,
            read: HashMap::new(),
            bases: HashMap::new(),
            locked_shards: Vec::new(),
            ts: 0,
            give_up: None,
        };
        self.pending.insert(id, pending);
        self.counters.submitted += 1;
        self.start(now_ns, id);
        Ok(id)
    }

    fn primary(&self, shard: u32) -> u32 {
        self.config.layout.process(shard, 0)
    }

    /// Starts attempt `p.attempt` from the top.
    fn start(&mut self, now_ns: u64, id: u64) {
        let failed_primary = {
            let p = &self.pending[&id];
            p.plan.shards().any(|s| self.failed[self.primary(s) as usize])
        };
        if failed_primary {
            let why = "the primary of a shard it touches has failed".to_string();
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        let p = self
            .pending
            .get_mut(&id)
            .expect("started transactions are pending");
        p.read.clear();
        p.bases.clear();
        p.locked_shards.clear();
        p.results.iter_mut().for_each(|r| *r = None);
        if p.plan.reads.is_empty() {
            return self.start_lock(now_ns, id);
        }
        let messages = p
            .plan
            .reads
            .iter()
            .map(|(&shard, keys)| {
                let m = OccMessage::Read(Read {
                    txn: id,
                    attempt: p.attempt,
                    keys: keys.clone(),
                });
                (self.config.layout.process(shard, 0), m.encode())
            })
            .collect();
        self.send_phase(now_ns, id, Phase::Read, messages);
    }

    fn start_lock(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("locking transactions are pending");
        p.locked_shards = p.plan.writes.keys().copied().collect();
        let messages = p
            .plan
            .writes
            .iter()
            .map(|(&shard, w)| {
                let items = w
                    .keys
                    .iter()
                    .map(|k| (k.clone(), p.read.get(k).map(|(_, version)| *version)))
                    .collect();
                let m = OccMessage::Lock(Lock {
                    txn: id,
                    attempt: p.attempt,
                    items,
                });
                (self.config.layout.process(shard, 0), m.encode())
            })
            .collect();
        self.send_phase(now_ns, id, Phase::Lock, messages);
    }

    /// Validates the keys read and not written (those written were checked by their lock);
    /// with none, goes on to commit.
    fn start_validate(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("validating transactions are pending");
        let mut messages = Vec::new();
        for (&shard, keys) in &p.plan.reads {
            let items: Vec<(Bytes, u64)> = keys
                .iter()
                .filter(|k| !p.plan.is_written(k))
                .map(|k| (k.clone(), p.read[k].1))
                .collect();
            if items.is_empty() {
                continue;
            }
            let m = OccMessage::Validate(Validate {
                txn: id,
                attempt: p.attempt,
                items,
            });
            messages.push((self.config.layout.process(shard, 0), m.encode()));
        }
        if messages.is_empty() {
            return self.start_commit(now_ns, id);
        }
        self.send_phase(now_ns, id, Phase::Validate, messages);
    }

    fn start_commit(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("committing transactions are pending");
        let mut messages = Vec::new();
        for (&shard, w) in &p.plan.writes {
            let bases = w.keys.iter().map(|k| (k.clone(), p.bases[k])).collect();
            let m = OccMessage::Commit(Commit {
                txn: id,
                attempt: p.attempt,
                ops: w.ops.clone(),
                bases,
            })
            .encode();
            let live = self
                .config
                .layout
                .replicas_of(shard)
                .filter(|&r| !self.failed[r as usize]);
            messages.extend(live.map(|r| (r, m.clone())));
        }
        self.send_phase(now_ns, id, Phase::Commit, messages);
    }

    /// Releases the attempt's locks, if it may hold any, then backs off (or gives up).
    fn abort(&mut self, now_ns: u64, id: u64, give_up: Option<String>) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("aborting transactions are pending");
        if give_up.is_none() {
            p.aborts += 1;
            self.occ.aborts += 1;
        }
        p.give_up = give_up;
        let attempt = p.attempt;
        let messages: Vec<(u32, Vec<u8>)> = p
            .locked_shards
            .iter()
            .map(|shard| {
                let m = OccMessage::Abort(Abort {
                    txn: id,
                    attempt,
                    keys: p.plan.writes[shard].keys.clone(),
                });
                (self.config.layout.process(*shard, 0), m.encode())
            })
            .collect();
        if messages.is_empty() {
            return self.after_abort(now_ns, id);
        }
        self.send_phase(now_ns, id, Phase::Abort, messages);
    }

    fn after_abort(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("aborted transactions are pending");
        if let Some(why) = p.give_up.take() {
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        if p.aborts >= self.config.aborts_max {
            self.occ.aborts_exhausted += 1;
            let why = format!("aborted {} times by conflicting transactions", p.aborts);
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        let c = &self.config;
        let wait_ns = backoff_ns(c.backoff_base_ns, c.backoff_max_ns, c.process, id, p.aborts);
        p.phase = Phase::Backoff;
        p.awaiting.clear();
        p.locked_shards.clear();
        p.deadline_ns = now_ns.saturating_add(wait_ns);
    }

    fn send_phase(&mut self, now_ns: u64, id: u64, phase: Phase, messages: Vec<(u32, Vec<u8>)>) {
        assert!(!messages.is_empty(), "a phase without messages");
        let p = self
            .pending
            .get_mut(&id)
            .expect("a phase of a pending transaction");
        p.phase = phase;
        p.awaiting = messages.into_iter().collect();
        p.sends = 0;
        self.occ.phases += 1;
        self.send(now_ns, id);
    }

    /// Sends (again) the current phase's messages not answered yet.
    fn send(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("sending for a pending transaction");
        p.sends += 1;
        p.round += 1;
        p.deadline_ns = now_ns.saturating_add(self.config.timeout_ns);
        let scatter = p.awaiting.iter().map(|(&dst, m)| (dst, m.clone())).collect();
        self.outbox.push_back(Outgoing {
            txn: id,
            attempt: p.round,
            reliable: false,
            scatter,
        });
    }

    pub fn poll_send(&mut self) -> Option<Outgoing> {
        self.outbox.pop_front()
    }

    /// The runtime could not send `out` now: it is offered again first.
    pub fn unsend(&mut self, out: Outgoing) {
        self.outbox.push_front(out);
    }

    /// `out` left as message `msg_id` (what a send failure will name).
    pub fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        self.sent.insert(msg_id, (out.txn, out.attempt));
    }

    /// The scattering `msg_id` was not delivered: its phase is sent again now.
    pub fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        let Some((id, round)) = self.sent.remove(&msg_id) else {
            return;
        };
        let current = self
            .pending
            .get(&id)
            .is_some_and(|p| p.round == round && p.phase != Phase::Backoff);
        if current {
            self.retry(now_ns, id);
        }
    }

    /// The controller declared `process` failed: a backup is left out from now on; a primary
    /// ends the transactions on its shard.
    pub fn on_process_failure(&mut self, now_ns: u64, process: u32) {
        let Some(slot) = self.failed.get_mut(process as usize) else {
            return;
        };
        *slot = true;
        let Some((shard, replica)) = self.config.layout.role_of(process) else {
            return;
        };
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            if replica == 0 && p.plan.shards().any(|s| s == shard) {
                let why = format!("the primary of shard {shard} has failed");
                let outcome = match p.phase {
                    Phase::Commit => Outcome::Unknown(why),
                    _ => Outcome::Failed(why),
                };
                self.finish(now_ns, id, outcome);
            } else if p.awaiting.remove(&process).is_some() && p.awaiting.is_empty() {
                self.phase_done(now_ns, id);
            }
        }
    }

    /// A message delivered to this client.
    pub fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        let Some((message, txn, attempt, phase)) = OccMessage::decode(payload).ok().and_then(answer_of)
        else {
            self.counters.malformed += 1;
            return;
        };
        let expected = self
            .pending
            .get(&txn)
            .is_some_and(|p| p.attempt == attempt && p.phase == phase && p.awaiting.contains_key(&src));
        if !expected {
            self.counters.stale_answers += 1;
            return;
        }
        let shard = src / self.config.layout.replicas;
        let accepted = match message {
            OccMessage::ReadReply(m) => self.on_read_reply(now_ns, shard, m),
            OccMessage::LockReply(m) => self.on_lock_reply(now_ns, shard, m),
            OccMessage::ValidateReply(m) => self.on_validate_reply(now_ns, m),
            OccMessage::CommitReply(m) => self.on_commit_reply(now_ns, shard, m),
            _ => Answer::Counted,
        };
        match accepted {
            Answer::Counted => {
                let p = self.pending.get_mut(&txn).expect("checked above");
                p.awaiting.remove(&src);
                if p.awaiting.is_empty() {
                    self.phase_done(now_ns, txn);
                }
            }
            Answer::Ended => {}
            Answer::Malformed => self.counters.malformed += 1,
        }
    }

    fn on_read_reply(&mut self, now_ns: u64, shard: u32, m: ReadReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        let keys = &p.plan.reads[&shard];
        if keys.len() != m.items.len() {
            return Answer::Malformed;
        }
        if m.items.iter().any(|item| item.locked) {
            self.occ.read_conflicts += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        for (key, item) in keys.iter().zip(m.items) {
            p.read.insert(key.clone(), (item.value, item.version));
        }
        Answer::Counted
    }

    fn on_lock_reply(&mut self, now_ns: u64, shard: u32, m: LockReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        if !m.ok {
            self.occ.lock_conflicts += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        let keys = &p.plan.writes[&shard].keys;
        if keys.len() != m.versions.len() {
            return Answer::Malformed;
        }
        for (key, version) in keys.iter().zip(m.versions) {
            p.bases.insert(key.clone(), version);
        }
        Answer::Counted
    }

    fn on_validate_reply(&mut self, now_ns: u64, m: ValidateReply) -> Answer {
        if !m.ok {
            self.occ.validation_failures += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        Answer::Counted
    }

    fn on_commit_reply(&mut self, now_ns: u64, shard: u32, m: CommitReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        match m.status {
            CommitStatus::Applied | CommitStatus::Duplicate => {}
            CommitStatus::Forgotten | CommitStatus::Refused => {
                let why = format!("a replica answered the commit {:?}", m.status);
                self.finish(now_ns, m.txn, Outcome::Unknown(why));
                return Answer::Ended;
            }
        }
        let w = &p.plan.writes[&shard];
        let same_ops =
            m.results.len() == w.ops.len() && m.results.iter().zip(&w.ops).all(|((i, _), (j, _))| i == j);
        if !same_ops {
            return Answer::Malformed;
        }
        for (i, r) in m.results {
            p.results[usize::from(i)] = Some(r);
        }
        Answer::Counted
    }

    /// Every message of the current phase was answered.
    fn phase_done(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("a phase of a pending transaction");
        match p.phase {
            Phase::Read => {
                for (i, key) in &p.plan.read_results {
                    p.results[usize::from(*i)] = Some(OpResult::Value(p.read[key].0.clone()));
                }
                if !p.plan.is_read_only() {
                    return self.start_lock(now_ns, id);
                }
                p.ts = now_ns;
                if p.plan.reads.len() == 1 {
                    return self.commit(now_ns, id);
                }
                self.start_validate(now_ns, id)
            }
            Phase::Lock => {
                p.ts = now_ns;
                self.start_validate(now_ns, id)
            }
            Phase::Validate if p.plan.is_read_only() => self.commit(now_ns, id),
            Phase::Validate => self.start_commit(now_ns, id),
            Phase::Commit => self.commit(now_ns, id),
            Phase::Abort => self.after_abort(now_ns, id),
            Phase::Backoff => unreachable!("a back-off awaits no answer"),
        }
    }

    fn commit(&mut self, now_ns: u64, id: u64) {
        let p = &self.pending[&id];
        let Some(results) = p.results.iter().cloned().collect::<Option<Vec<OpResult>>>() else {
            let why = "a server answered without every result".to_string();
            return self.finish(now_ns, id, Outcome::Failed(why));
        };
        let ts = p.ts;
        self.finish(now_ns, id, Outcome::Committed { ts, results });
    }

    fn retry(&mut self, now_ns: u64, id: u64) {
        let p = &self.pending[&id];
        if p.sends < self.config.attempts_max {
            self.counters.retries += 1;
            self.pending.get_mut(&id).expect("seen above").resends += 1;
            return self.send(now_ns, id);
        }
        let why = format!("no answer to {:?} after {} sends", p.phase, p.sends);
        match p.phase {
            Phase::Read => self.finish(now_ns, id, Outcome::Failed(why)),
            Phase::Lock | Phase::Validate => self.abort(now_ns, id, Some(why)),
            Phase::Commit => self.finish(now_ns, id, Outcome::Unknown(why)),
            Phase::Abort => {
                self.occ.locks_abandoned += 1;
                let why = p.give_up.clone().unwrap_or(why);
                self.finish(now_ns, id, Outcome::Failed(why))
            }
            Phase::Backoff => unreachable!("a back-off is not sent"),
        }
    }

    fn finish(&mut self, now_ns: u64, id: u64, outcome: Outcome) {
        let Some(p) = self.pending.remove(&id) else {
            return;
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
            attempts: 1 + p.resends,
            aborts: p.aborts,
        });
        self.sent.retain(|_, (txn, _)| *txn != id);
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// When the earliest phase times out or back-off ends.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.pending.values().map(|p| p.deadline_ns).min()
    }

    pub fn handle_timeout(&mut self, now_ns: u64) {
        let due: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline_ns <= now_ns)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            let p = self.pending.get_mut(&id).expect("listed just now");
            if p.phase == Phase::Backoff {
                p.attempt += 1;
                self.start(now_ns, id);
            } else {
                self.retry(now_ns, id);
            }
        }
    }

    /// Checked after every step, in release builds too.
    pub fn invariants(&self) {
        assert!(
            self.pending.len() <= self.config.window,
            "more transactions outstanding than the window"
        );
        for p in self.pending.values() {
            assert!(p.sends <= self.config.attempts_max, "a phase sent past the limit");
            assert!(p.aborts <= self.config.aborts_max, "aborts past their limit");
            assert!(
                p.attempt == p.aborts
                    || (matches!(p.phase, Phase::Backoff | Phase::Abort) && p.attempt + 1 == p.aborts),
                "a try that is not the one after the last abort"
            );
            assert_eq!(
                p.phase == Phase::Backoff,
                p.awaiting.is_empty(),
                "a phase awaits nothing, or a back-off awaits answers"
            );
            if p.phase == Phase::Commit {
                assert!(
                    p.plan
                        .writes
                        .values()
                        .flat_map(|w| &w.keys)
                        .all(|k| p.bases.contains_key(k)),
                    "a commit without every lock's version"
                );
            }
        }
    }
}

/// What an answer did to its transaction.
enum Answer {
    /// It answered its destination's message of the phase.
    Counted,
    /// It ended the phase (an abort) or the transaction.
    Ended,
    Malformed,
}

/// An answer's message, transaction, attempt and the phase it answers; `None` for a request.
fn answer_of(m: OccMessage) -> Option<(OccMessage, u64, u32, Phase)> {
    let (txn, attempt, phase) = match &m {
        OccMessage::ReadReply(a) => (a.txn, a.attempt, Phase::Read),
        OccMessage::LockReply(a) => (a.txn, a.attempt, Phase::Lock),
        OccMessage::ValidateReply(a) => (a.txn, a.attempt, Phase::Validate),
        OccMessage::CommitReply(a) => (a.txn, a.attempt, Phase::Commit),
        OccMessage::AbortReply(a) => (a.txn, a.attempt, Phase::Abort),
        _ => return None,
    };
    Some((m, txn, attempt, phase))
}
