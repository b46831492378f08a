//! A replica of one shard in the OCC baseline: per key a value, a version and a lock.
//!
//! Replica 0 is the shard's primary: it serves reads, locks and validations. A commit goes to
//! every replica; each applies it once its versions of the written keys are the commit's bases
//! (the versions at lock time), so all replicas apply one key's writes in the order the
//! primary's locks serialized them, whatever order the commits arrive in. The primary also
//! releases the transaction's locks when it applies.
//!
//! Messages arrive unordered, may be repeated and may come late, so every handler is idempotent:
//! a repeated Lock from the owner is granted again, a repeated Commit answered from memory, an
//! Abort releases only the locks of its own attempt, and a Lock from an attempt already aborted
//! or a transaction already committed is refused (it would otherwise leak a lock).

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use super::codec::{
    Abort, AbortReply, Commit, CommitReply, CommitStatus, Lock, LockReply, OccMessage, Read, ReadItem,
    ReadReply, Validate, ValidateReply,
};
use crate::server::Service;
use crate::state::ShardState;
use crate::txn::{Op, OpResult};

#[derive(Clone, Debug)]
pub struct OccServerConfig {
    pub shard: u16,
    pub replica: u16,
    /// Transactions remembered per client (committed with their results, or aborted), to answer
    /// retries and refuse late locks.
    pub remembered_per_client: usize,
    /// Commits waiting for an earlier commit of the same keys, at most; more are dropped
    /// (their clients send them again).
    pub parked_commits_max: usize,
}

impl OccServerConfig {
    pub fn new(shard: u16, replica: u16) -> OccServerConfig {
        OccServerConfig {
            shard,
            replica,
            remembered_per_client: 256,
            parked_commits_max: 1024,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OccServerCounters {
    pub reads: u64,
    pub locks_granted: u64,
    pub locks_refused: u64,
    pub validations_ok: u64,
    pub validations_failed: u64,
    pub commits: u64,
    pub duplicates: u64,
    pub forgotten: u64,
    /// Commits that waited for an earlier one, and those dropped because the wait was full.
    pub parked: u64,
    pub parked_dropped: u64,
    pub aborts: u64,
    /// Commits whose operations and bases name different keys: not applied.
    pub refused_commits: u64,
    /// Reads, locks or validations sent to a backup: dropped.
    pub misdirected: u64,
    /// Messages that were not the baseline's, or not meant for a server: dropped.
    pub malformed: u64,
}

/// Who holds a key's lock: one attempt of one client's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockOwner {
    pub client: u32,
    pub txn: u64,
    pub attempt: u32,
}

/// A transaction this replica saw end: committed (with its results) or aborted up to `attempt`.
struct Finished {
    txn: u64,
    attempt: u32,
    results: Option<Vec<(u16, OpResult)>>,
}

/// What a commit can do now.
enum Readiness {
    Apply,
    Wait,
    /// A key is past the commit's base: it was applied and forgotten.
    Past,
    Refuse,
}

pub struct OccServer {
    config: OccServerConfig,
    state: ShardState,
    /// Committed write transactions per key; absent is 0. Kept after a key is deleted, so a
    /// delete and re-create is still a change.
    versions: HashMap<Bytes, u64>,
    locks: HashMap<Bytes, LockOwner>,
    history: HashMap<u32, VecDeque<Finished>>,
    parked: VecDeque<(u32, Commit)>,
    outbox: VecDeque<(u32, Vec<u8>)>,
    counters: OccServerCounters,
    /// The runtime's clock at this visit ([`OccServer::set_now`]).
    now_ns: u64,
}

impl OccServer {
    pub fn new(config: OccServerConfig) -> OccServer {
        OccServer {
            config,
            state: ShardState::default(),
            versions: HashMap::new(),
            locks: HashMap::new(),
            history: HashMap::new(),
            parked: VecDeque::new(),
            outbox: VecDeque::new(),
            counters: OccServerCounters::default(),
            now_ns: 0,
        }
    }

    pub fn config(&self) -> &OccServerConfig {
        &self.config
    }

    pub fn counters(&self) -> &OccServerCounters {
        &self.counters
    }

    /// The content (its digest is comparable with the 1Pipe store's).
    pub fn state(&self) -> &ShardState {
        &self.state
    }

    pub fn version(&self, key: &[u8]) -> u64 {
        self.versions.get(key).copied().unwrap_or(0)
    }

    pub fn lock_owner(&self, key: &[u8]) -> Option<LockOwner> {
        self.locks.get(key).copied()
    }

    pub fn locks_held(&self) -> usize {
        self.locks.len()
    }

    pub fn parked_commits(&self) -> usize {
        self.parked.len()
    }

    fn is_primary(&self) -> bool {
        self.config.replica == 0
    }

    /// A message from process `src`; ordering is off, so the service and timestamp do not matter.
    /// The runtime's clock now: the primary stamps the reads it serves with it.
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
    }

    pub fn on_delivery(&mut self, _service: Service, _ts: u64, src: u32, payload: &[u8]) {
        let message = match OccMessage::decode(payload) {
            Ok(m) => m,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        match message {
            OccMessage::Commit(m) => self.on_commit(src, m),
            OccMessage::Abort(m) => self.on_abort(src, &m),
            OccMessage::Read(_) | OccMessage::Lock(_) | OccMessage::Validate(_) if !self.is_primary() => {
                self.counters.misdirected += 1
            }
            OccMessage::Read(m) => self.on_read(src, &m),
            OccMessage::Lock(m) => self.on_lock(src, &m),
            OccMessage::Validate(m) => self.on_validate(src, &m),
            _ => self.counters.malformed += 1,
        }
    }

    fn on_read(&mut self, src: u32, m: &Read) {
        self.counters.reads += 1;
        let items = m
            .keys
            .iter()
            .map(|key| ReadItem {
                value: self.value(key),
                version: self.version(key),
                locked: self
                    .locks
                    .get(key)
                    .is_some_and(|o| (o.client, o.txn) != (src, m.txn)),
            })
            .collect();
        let reply = ReadReply {
            txn: m.txn,
            attempt: m.attempt,
            shard: self.config.shard,
            read_ns: self.now_ns,
            items,
        };
        self.send(src, OccMessage::ReadReply(reply));
    }

    fn value(&mut self, key: &Bytes) -> Option<Bytes> {
        match self.state.apply(&Op::Get { key: key.clone() }) {
            OpResult::Value(v) => v,
            other => unreachable!("a get returned {other:?}"),
        }
    }

    /// All keys or none: a key locked by another transaction, or changed since it was read,
    /// refuses the whole request.
    fn on_lock(&mut self, src: u32, m: &Lock) {
        let owner = LockOwner {
            client: src,
            txn: m.txn,
            attempt: m.attempt,
        };
        let grantable = !self.is_finished(src, m.txn, m.attempt)
            && m.items.iter().all(|(key, expected)| {
                let free = self.locks.get(key).is_none_or(|o| supersedes(owner, *o));
                free && expected.is_none_or(|v| v == self.version(key))
            });
        let versions = if grantable {
            self.counters.locks_granted += 1;
            for (key, _) in &m.items {
                self.locks.insert(key.clone(), owner);
            }
            m.items.iter().map(|(key, _)| self.version(key)).collect()
        } else {
            self.counters.locks_refused += 1;
            Vec::new()
        };
        let reply = LockReply {
            txn: m.txn,
            attempt: m.attempt,
            shard: self.config.shard,
            ok: grantable,
            versions,
        };
        self.send(src, OccMessage::LockReply(reply));
    }

    /// Whether the transaction committed, or this attempt of it was aborted, or it is older than
    /// anything remembered: a Lock for it is a late copy and must not take a lock.
    fn is_finished(&self, client: u32, txn: u64, attempt: u32) -> bool {
        let Some(recent) = self.history.get(&client) else {
            return false;
        };
        let seen = recent
            .iter()
            .any(|f| f.txn == txn && (f.results.is_some() || f.attempt >= attempt));
        seen || self.is_forgotten(client, txn)
    }

    fn is_forgotten(&self, client: u32, txn: u64) -> bool {
        let Some(recent) = self.history.get(&client) else {
            return false;
        };
        let full = recent.len() >= self.config.remembered_per_client.max(1);
        full && recent.iter().all(|f| txn < f.txn)
    }

    fn on_validate(&mut self, src: u32, m: &Validate) {
        let ok = m.items.iter().all(|(key, version)| {
            let own = |o: &LockOwner| (o.client, o.txn, o.attempt) == (src, m.txn, m.attempt);
            self.version(key) == *version && self.locks.get(key).is_none_or(own)
        });
        if ok {
            self.counters.validations_ok += 1;
        } else {
            self.counters.validations_failed += 1;
        }
        let reply = ValidateReply {
            txn: m.txn,
            attempt: m.attempt,
            shard: self.config.shard,
            ok,
        };
        self.send(src, OccMessage::ValidateReply(reply));
    }

    fn on_commit(&mut self, src: u32, m: Commit) {
        if let Some(results) = self.committed_results(src, m.txn) {
            self.counters.duplicates += 1;
            return self.commit_reply(src, &m, CommitStatus::Duplicate, results);
        }
        if self.parked.iter().any(|(c, p)| *c == src && p.txn == m.txn) {
            return;
        }
        match self.readiness(&m) {
            Readiness::Apply => {
                self.apply(src, &m);
                self.apply_parked();
            }
            Readiness::Wait if self.parked.len() < self.config.parked_commits_max => {
                self.counters.parked += 1;
                self.parked.push_back((src, m));
            }
            Readiness::Wait => self.counters.parked_dropped += 1,
            Readiness::Past => {
                self.counters.forgotten += 1;
                self.commit_reply(src, &m, CommitStatus::Forgotten, Vec::new());
            }
            Readiness::Refuse => {
                self.counters.refused_commits += 1;
                self.commit_reply(src, &m, CommitStatus::Refused, Vec::new());
            }
        }
    }

    fn committed_results(&self, client: u32, txn: u64) -> Option<Vec<(u16, OpResult)>> {
        let recent = self.history.get(&client)?;
        recent.iter().find(|f| f.txn == txn)?.results.clone()
    }

    fn readiness(&self, m: &Commit) -> Readiness {
        let based = |key: &Bytes| m.bases.iter().any(|(k, _)| k == key);
        let written = |key: &Bytes| m.ops.iter().any(|(_, op)| op.key() == key && op.is_write());
        // One base per key: a key named twice would be bumped twice by one commit.
        let mut named = std::collections::HashSet::new();
        let distinct = m.bases.iter().all(|(k, _)| named.insert(k));
        if !distinct
            || !m.ops.iter().all(|(_, op)| based(op.key()))
            || !m.bases.iter().all(|(k, _)| written(k))
        {
            return Readiness::Refuse;
        }
        if m.bases.iter().any(|(k, base)| self.version(k) > *base) {
            return Readiness::Past;
        }
        if m.bases.iter().any(|(k, base)| self.version(k) < *base) {
            return Readiness::Wait;
        }
        Readiness::Apply
    }

    fn apply(&mut self, src: u32, m: &Commit) {
        let results: Vec<(u16, OpResult)> = m.ops.iter().map(|(i, op)| (*i, self.state.apply(op))).collect();
        for (key, base) in &m.bases {
            let version = self.versions.entry(key.clone()).or_default();
            assert_eq!(*version, *base, "a commit applied off its base");
            *version = base + 1;
            if self
                .locks
                .get(key)
                .is_some_and(|o| (o.client, o.txn) == (src, m.txn))
            {
                self.locks.remove(key);
            }
        }
        self.counters.commits += 1;
        self.remember(src, m.txn, m.attempt, Some(results.clone()));
        self.commit_reply(src, m, CommitStatus::Applied, results);
    }

    /// Applies every parked commit that became applicable, until none is.
    fn apply_parked(&mut self) {
        loop {
            let next = self
                .parked
                .iter()
                .position(|(_, m)| !matches!(self.readiness(m), Readiness::Wait));
            let Some(i) = next else {
                return;
            };
            let (src, m) = self.parked.remove(i).expect("position is in range");
            match self.readiness(&m) {
                Readiness::Apply => self.apply(src, &m),
                _ => {
                    self.counters.forgotten += 1;
                    self.commit_reply(src, &m, CommitStatus::Forgotten, Vec::new());
                }
            }
        }
    }

    fn on_abort(&mut self, src: u32, m: &Abort) {
        self.counters.aborts += 1;
        for key in &m.keys {
            let owned = self
                .locks
                .get(key)
                .is_some_and(|o| (o.client, o.txn) == (src, m.txn) && o.attempt <= m.attempt);
            if owned {
                self.locks.remove(key);
            }
        }
        self.remember(src, m.txn, m.attempt, None);
        let reply = AbortReply {
            txn: m.txn,
            attempt: m.attempt,
            shard: self.config.shard,
        };
        self.send(src, OccMessage::AbortReply(reply));
    }

    fn remember(&mut self, client: u32, txn: u64, attempt: u32, results: Option<Vec<(u16, OpResult)>>) {
        let max = self.config.remembered_per_client.max(1);
        let recent = self.history.entry(client).or_default();
        if let Some(f) = recent.iter_mut().find(|f| f.txn == txn) {
            f.attempt = f.attempt.max(attempt);
            if results.is_some() {
                f.results = results;
            }
            return;
        }
        recent.push_back(Finished {
            txn,
            attempt,
            results,
        });
        while recent.len() > max {
            recent.pop_front();
        }
    }

    fn commit_reply(&mut self, src: u32, m: &Commit, status: CommitStatus, results: Vec<(u16, OpResult)>) {
        let reply = CommitReply {
            txn: m.txn,
            attempt: m.attempt,
            shard: self.config.shard,
            replica: self.config.replica,
            status,
            results,
        };
        self.send(src, OccMessage::CommitReply(reply));
    }

    fn send(&mut self, dst: u32, m: OccMessage) {
        self.outbox.push_back((dst, m.encode()));
    }

    pub fn peek_send(&self) -> Option<&(u32, Vec<u8>)> {
        self.outbox.front()
    }

    pub fn pop_send(&mut self) -> Option<(u32, Vec<u8>)> {
        self.outbox.pop_front()
    }

    /// Checked after every step, in release builds too.
    pub fn invariants(&self) {
        assert!(self.is_primary() || self.locks.is_empty(), "a backup holds locks");
        assert!(
            self.parked.len() <= self.config.parked_commits_max,
            "parked commits over their bound"
        );
        assert!(
            self.parked
                .iter()
                .all(|(_, m)| matches!(self.readiness(m), Readiness::Wait)),
            "a parked commit could be applied"
        );
        assert!(
            self.history
                .values()
                .all(|r| r.len() <= self.config.remembered_per_client.max(1)),
            "remembered transactions over their bound"
        );
    }
}

/// Whether `new` may take a lock `held` holds: the same transaction's same or later attempt (a
/// retried Lock, or a restart whose Abort has not arrived yet).
fn supersedes(new: LockOwner, held: LockOwner) -> bool {
    (new.client, new.txn) == (held.client, held.txn) && new.attempt >= held.attempt
}
