//! One partition's state machine: applies the decided log in instance order, one atomic fjall
//! batch per call, and answers what each command returned.

use bytes::Bytes;
use fjall::{OwnedWriteBatch, PersistMode};

use super::codec::Fnv1a;
use super::db::{Claim, Keyspaces, ReplicaConfig, ReplicaError, SyncMode, numbered_key, partition_key};
use super::progress::{Counters, Progress};
use super::sessions::{Session, Sessions};
use super::step::{ReadCache, Step, View};
use crate::{MemStore, StoreInfo};

/// Longest key a replica executes, in bytes: [`MemStore`]'s, so that both answer alike. Part of
/// the state machine: every replica of a store must use the same.
pub const KEY_BYTES_MAX: usize = MemStore::KEY_BYTES_MAX;
/// Longest value a replica executes, in bytes (as [`KEY_BYTES_MAX`]).
pub const VALUE_BYTES_MAX: usize = MemStore::VALUE_BYTES_MAX;

/// Beyond the entries of a batch, the most trimmed log entries one batch deletes: after
/// `log_keep_instances` is lowered, the excess goes a bounded step at a time.
const TRIM_EXTRA_PER_BATCH_MAX: u64 = 1024;
/// Keys a partition keeps in memory as committed, to read without the LSM tree (at most
/// this times the largest key and value: 64K keys).
const READ_CACHE_KEYS_MAX: usize = 65_536;

/// What one decided command returned, for whoever answers its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The instance that carried it.
    pub inst: u64,
    /// The client that sent it ([`Envelope::client`]).
    pub client: u64,
    /// Its request id ([`Envelope::request`]).
    pub request: u64,
    /// The outcome, encoded by [`encode_reply`](super::encode_reply): the command's, the cached
    /// one for a duplicate, or [`StoreError::StaleRequest`].
    pub reply: Vec<u8>,
}

/// The state machine of one partition. Restored from the disk when made; owned by one thread
/// at a time (it is `Send`).
pub struct PartitionState {
    keyspaces: Keyspaces,
    config: ReplicaConfig,
    claim: Claim,
    progress: Progress,
    sessions: Sessions,
    limits: StoreInfo,
    reads: ReadCache,
    /// A batch failed after sessions changed in memory: refuse more until reopened.
    poisoned: bool,
}

impl std::fmt::Debug for PartitionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionState")
            .field("partition", &self.claim.pid)
            .field("progress", &self.progress)
            .field("sessions", &self.sessions.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl PartitionState {
    pub(crate) fn load(
        keyspaces: Keyspaces,
        config: ReplicaConfig,
        claim: Claim,
    ) -> Result<PartitionState, ReplicaError> {
        let pid = claim.pid;
        let progress = match keyspaces.meta.get(Progress::key(pid))? {
            Some(record) => Progress::decode(&record)?,
            None => Progress::default(),
        };
        let mut sessions = Sessions::new(config.sessions_max);
        for item in keyspaces.sessions.prefix(pid.to_be_bytes()) {
            let (key, value) = item.into_inner()?;
            let client = key
                .get(2..)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                .ok_or(ReplicaError::Corrupt("session key"))?;
            sessions.restore(u64::from_be_bytes(client), Session::decode(&value)?)?;
        }
        let limits = StoreInfo {
            name: "replicated".into(),
            key_bytes_max: KEY_BYTES_MAX,
            value_bytes_max: VALUE_BYTES_MAX,
            fields: Vec::new(),
        };
        let state = PartitionState {
            keyspaces,
            config,
            claim,
            progress,
            sessions,
            limits,
            reads: ReadCache::new(READ_CACHE_KEYS_MAX),
            poisoned: false,
        };
        state.check_invariants();
        Ok(state)
    }

    /// This partition's id.
    pub fn partition(&self) -> u16 {
        self.claim.pid
    }

    /// The instance the next batch must start with: 0 when fresh, one past the last applied.
    pub fn next_instance(&self) -> u64 {
        self.progress.next_instance
    }

    /// The first instance [`PartitionState::log_range`] can still give.
    pub fn first_kept_instance(&self) -> u64 {
        self.progress.first_kept_instance
    }

    /// What the applied log held: commands executed, no-ops, malformed values, duplicates.
    pub fn counters(&self) -> Counters {
        self.progress.counters
    }

    /// The number of keys in the partition.
    pub fn key_count(&self) -> u64 {
        self.progress.keys
    }

    /// The number of client sessions kept.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Applies decided values `entries`, which must continue the log: consecutive instances
    /// from [`PartitionState::next_instance`] ([`ReplicaError::OutOfOrder`] otherwise, and
    /// nothing is applied). An empty value is a no-op; one that does not decode as an
    /// [`Envelope`] too, and is counted. The state, sessions, progress and log entries of the
    /// whole batch are one atomic write, persisted as [`ReplicaConfig::sync`] says before this
    /// returns. Returns the outcome of each entry that carried a command, in order.
    pub fn apply_batch(&mut self, entries: &[(u64, &[u8])]) -> Result<Vec<Applied>, ReplicaError> {
        self.check_usable()?;
        self.check_order(entries)?;
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let result = self.apply_in_order(entries);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    /// Applies one decided value: [`PartitionState::apply_batch`] of one entry, the path a
    /// replica fed by a peer's [`PartitionState::log_range`] takes.
    pub fn ingest(&mut self, inst: u64, value: &[u8]) -> Result<Option<Applied>, ReplicaError> {
        let mut applied = self.apply_batch(&[(inst, value)])?;
        assert!(applied.len() <= 1);
        Ok(applied.pop())
    }

    fn check_usable(&self) -> Result<(), ReplicaError> {
        if self.poisoned {
            return Err(ReplicaError::Poisoned(self.claim.pid));
        }
        Ok(())
    }

    fn check_order(&self, entries: &[(u64, &[u8])]) -> Result<(), ReplicaError> {
        let mut expected = self.progress.next_instance;
        for &(got, _) in entries {
            if got != expected {
                return Err(ReplicaError::OutOfOrder { expected, got });
            }
            expected = expected
                .checked_add(1)
                .ok_or(ReplicaError::OutOfOrder { expected, got })?;
        }
        Ok(())
    }

    fn apply_in_order(&mut self, entries: &[(u64, &[u8])]) -> Result<Vec<Applied>, ReplicaError> {
        let pid = self.claim.pid;
        let mut progress = self.progress;
        let mut view = View::new(&self.keyspaces.data, pid, progress.keys, &mut self.reads);
        let mut step = Step {
            sessions: &mut self.sessions,
            counters: &mut progress.counters,
            limits: &self.limits,
            pid,
            partitions: self.config.partitions,
        };
        let mut applied = Vec::new();
        for &(inst, value) in entries {
            applied.extend(step.apply(&mut view, inst, value)?);
        }
        progress.keys = view.keys;

        let mut batch = self.keyspaces.db.batch();
        if self.config.sync == SyncMode::EveryBatch {
            batch = batch.durability(Some(PersistMode::SyncAll));
        }
        view.write_into(&mut batch);
        self.write_sessions(&mut batch);
        let next_instance = progress.next_instance + entries.len() as u64;
        progress.first_kept_instance = self.write_log(&mut batch, entries, next_instance);
        progress.next_instance = next_instance;
        batch.insert(&self.keyspaces.meta, Progress::key(pid), progress.encode());
        batch.commit()?;

        self.progress = progress;
        self.check_invariants();
        Ok(applied)
    }

    fn write_sessions(&mut self, batch: &mut OwnedWriteBatch) {
        let pid = self.claim.pid;
        for (client, session) in self.sessions.take_changed() {
            let key = numbered_key(pid, client);
            match session {
                Some(session) => batch.insert(&self.keyspaces.sessions, key, session.encode()),
                None => batch.remove(&self.keyspaces.sessions, key),
            }
        }
    }

    /// Adds the batch's values to the log and removes those that fall out of the last
    /// `log_keep_instances`; returns the new first kept instance. Never writes and removes one
    /// key in one batch (a batch gives all its writes one sequence number).
    fn write_log(&self, batch: &mut OwnedWriteBatch, entries: &[(u64, &[u8])], next_instance: u64) -> u64 {
        let pid = self.claim.pid;
        let first_kept_before = self.progress.first_kept_instance;
        let stored_end = self.progress.next_instance;
        let target = next_instance
            .saturating_sub(self.config.log_keep_instances)
            .max(first_kept_before);
        let step_max = entries.len() as u64 + TRIM_EXTRA_PER_BATCH_MAX;
        let first_kept = target.min(first_kept_before.saturating_add(step_max));
        for inst in first_kept_before..first_kept.min(stored_end) {
            batch.remove(&self.keyspaces.log, numbered_key(pid, inst));
        }
        for &(inst, value) in entries.iter().filter(|(inst, _)| *inst >= first_kept) {
            batch.insert(&self.keyspaces.log, numbered_key(pid, inst), value);
        }
        assert!(first_kept_before <= first_kept && first_kept <= next_instance);
        first_kept
    }

    /// Up to `max` decided values from instance `from` on, for a peer catching up: `(inst,
    /// value)` in instance order, no-ops and malformed values included. Empty when `from` is not
    /// below [`PartitionState::next_instance`]; [`ReplicaError::Trimmed`] when it is below
    /// [`PartitionState::first_kept_instance`].
    pub fn log_range(&self, from: u64, max: usize) -> Result<Vec<(u64, Vec<u8>)>, ReplicaError> {
        let first_kept = self.progress.first_kept_instance;
        if from < first_kept {
            return Err(ReplicaError::Trimmed { from, first_kept });
        }
        let end = self.progress.next_instance;
        if from >= end {
            return Ok(Vec::new());
        }
        let pid = self.claim.pid;
        let range = numbered_key(pid, from)..numbered_key(pid, end);
        let mut entries = Vec::with_capacity(max.min(usize::try_from(end - from).unwrap_or(usize::MAX)));
        for item in self.keyspaces.log.range(range).take(max) {
            let (key, value) = item.into_inner()?;
            let inst = key
                .get(2..)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                .map(u64::from_be_bytes)
                .ok_or(ReplicaError::Corrupt("log key"))?;
            // Kept instances have no gaps: a missing one is a corrupt store, not a short answer.
            if inst != from + entries.len() as u64 {
                return Err(ReplicaError::Corrupt("log entry missing"));
            }
            entries.push((inst, value.to_vec()));
        }
        Ok(entries)
    }

    /// The value of `key` in this partition, as applied so far.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, ReplicaError> {
        let value = self.keyspaces.data.get(partition_key(self.claim.pid, key))?;
        Ok(value.map(|value| Bytes::copy_from_slice(&value)))
    }

    /// A hash (FNV-1a, 64 bits) of the partition's keys and values and of its sessions (client,
    /// request, applied instance, reply), in key order: replicas that applied the same log have
    /// the same digest. Reads the whole partition.
    pub fn state_digest(&self) -> Result<u64, ReplicaError> {
        let pid = self.claim.pid;
        let mut hash = Fnv1a::new();
        hash.write(b"data");
        for item in self.keyspaces.data.prefix(pid.to_be_bytes()) {
            let (key, value) = item.into_inner()?;
            hash.write_field(&key[2..]);
            hash.write_field(&value);
        }
        hash.write(b"sessions");
        for item in self.keyspaces.sessions.prefix(pid.to_be_bytes()) {
            let (key, value) = item.into_inner()?;
            hash.write_field(&key[2..]);
            hash.write_field(&value);
        }
        Ok(hash.finish())
    }

    fn check_invariants(&self) {
        let progress = &self.progress;
        assert!(progress.first_kept_instance <= progress.next_instance);
        assert_eq!(
            progress.counters.entries(),
            progress.next_instance,
            "every instance is counted once"
        );
        self.sessions.check_invariants();
    }
}
