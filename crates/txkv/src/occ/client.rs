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

mod answers;
mod phases;
mod plan;

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;

use self::plan::Plan;
use crate::client::{ClientCounters, Outbox, Outgoing, SubmitError};
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
    /// The latest primary clock among this attempt's read answers.
    read_ns: u64,
    /// Ends the transaction failed once the abort is answered, instead of starting again.
    give_up: Option<String>,
}

pub struct OccClient {
    config: OccClientConfig,
    next_txn: u64,
    pending: BTreeMap<u64, Pending>,
    outbox: Outbox,
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
            outbox: Outbox::default(),
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
        SubmitError::check(self.pending.len(), self.config.window, &txn)?;
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
            read_ns: 0,
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

    pub fn poll_send(&mut self) -> Option<Outgoing> {
        self.outbox.pop()
    }

    /// The runtime could not send `out` now: it is offered again first.
    pub fn unsend(&mut self, out: Outgoing) {
        self.outbox.unsend(out);
    }

    /// `out` left as message `msg_id` (what a send failure will name).
    pub fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        self.outbox.on_sent(out, msg_id);
    }

    /// The scattering `msg_id` was not delivered: its phase is sent again now.
    pub fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        let Some((id, round)) = self.outbox.take_sent(msg_id) else {
            return;
        };
        let current = self
            .pending
            .get(&id)
            .is_some_and(|p| p.round == round && p.phase != Phase::Backoff);
        if current {
            self.counters.send_failures += 1;
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

    fn finish(&mut self, now_ns: u64, id: u64, outcome: Outcome) {
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        // An unknown outcome comes from the commit phase, after the locks were granted at `ts`.
        let ts = match &outcome {
            Outcome::Committed { ts, .. } => Some(*ts),
            Outcome::Unknown(_) => Some(p.ts),
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
            attempts: 1 + p.resends,
            aborts: p.aborts,
            ts,
        });
        self.outbox.forget(id);
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
                self.counters.timeouts += 1;
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
            // With `aborts_max` 0 the first abort still runs (and then gives up).
            assert!(
                p.aborts <= self.config.aborts_max.max(1),
                "aborts past their limit"
            );
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
