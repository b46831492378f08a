//! The replica's database: one fjall database holding every partition, and the handles that
//! give each partition to one owner.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::state::PartitionState;

/// How hard a replica pushes each applied batch to disk before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// fsync the journal after each batch: an answered command survives a power loss.
    EveryBatch,
    /// The journal is written to the OS after each batch but not fsynced: an answered command
    /// survives the process crashing, not the machine. For benchmarks.
    Buffered,
}

/// A replica's settings. `partitions` is part of the store's format (it decides where each key
/// lives); the others may change between restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// How many partitions (independent logs) the store has; at least 1. The database remembers
    /// it and refuses to open with another value.
    pub partitions: u16,
    /// When batches reach the disk.
    pub sync: SyncMode,
    /// The most client sessions a partition keeps; at least 1. Beyond it the session applied
    /// least recently is evicted, and a late retry of that client's request runs again.
    pub sessions_max: usize,
    /// How many of the last decided values a partition keeps for peers catching up (0: none).
    pub log_keep_instances: u64,
}

impl Default for ReplicaConfig {
    fn default() -> ReplicaConfig {
        ReplicaConfig {
            partitions: 1,
            sync: SyncMode::EveryBatch,
            sessions_max: 4096,
            log_keep_instances: 65_536,
        }
    }
}

/// Why the replicated store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The embedded store failed (I/O, a corrupt journal, the directory locked by another
    /// process...).
    #[error("storage: {0}")]
    Storage(#[from] fjall::Error),
    /// The configuration cannot work (which field, and why).
    #[error("invalid configuration: {0}")]
    InvalidConfig(&'static str),
    /// The database was created with another number of partitions: keys would be looked for in
    /// the wrong partitions.
    #[error("the database has {stored} partitions, the configuration says {configured}")]
    PartitionsMismatch {
        /// The number the database was created with.
        stored: u16,
        /// The number [`ReplicaConfig::partitions`] gave.
        configured: u16,
    },
    /// No such partition: ids run from 0 to `partitions - 1`.
    #[error("partition {partition} does not exist (the store has {partitions})")]
    NoSuchPartition {
        /// The id asked for.
        partition: u16,
        /// The store's number of partitions.
        partitions: u16,
    },
    /// The partition already has a live [`PartitionState`]: two would apply the log twice.
    #[error("partition {0} is already open")]
    PartitionInUse(u16),
    /// A batch does not continue the log: entry `got` came where `expected` was due. Nothing of
    /// the batch was applied.
    #[error("instance {got} out of order: the partition expects {expected}")]
    OutOfOrder {
        /// The instance due.
        expected: u64,
        /// The instance the batch had there.
        got: u64,
    },
    /// The instances asked for are no longer kept (a peer that far behind needs another way).
    #[error("instance {from} was trimmed: the first kept is {first_kept}")]
    Trimmed {
        /// The first instance asked for.
        from: u64,
        /// The first instance still kept.
        first_kept: u64,
    },
    /// A record the store wrote earlier does not decode (which one).
    #[error("corrupt record: {0}")]
    Corrupt(&'static str),
    /// An earlier batch of this partition failed to commit: its in-memory state may be ahead of
    /// the disk. Drop the handle and open the partition again (the disk is what counts).
    #[error("partition {0} failed earlier; reopen it")]
    Poisoned(u16),
}

/// The fjall keyspaces of a replica. Every key but the configuration's starts with the
/// partition id (2 bytes, big endian), so partitions share the keyspaces and never a key.
#[derive(Clone)]
pub(crate) struct Keyspaces {
    pub(crate) db: Database,
    /// `config` -> the format version and `partitions`; `p` + pid -> a partition's progress.
    pub(crate) meta: Keyspace,
    /// pid + key -> value.
    pub(crate) data: Keyspace,
    /// pid + client (8 bytes, big endian) -> a session.
    pub(crate) sessions: Keyspace,
    /// pid + instance (8 bytes, big endian) -> the decided value, for peers catching up.
    pub(crate) log: Keyspace,
}

const CONFIG_KEY: &[u8] = b"config";
const CONFIG_VERSION: u8 = 1;

/// A replica's durable store: the state machine of every partition in one database.
pub struct ReplicaDb {
    keyspaces: Keyspaces,
    config: ReplicaConfig,
    /// The partitions with a live [`PartitionState`].
    claimed: Arc<Mutex<HashSet<u16>>>,
}

impl std::fmt::Debug for ReplicaDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaDb")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ReplicaDb {
    /// Opens the store in `dir`, creating it if empty. Fails if it was created with another
    /// number of partitions, or if another process has it open.
    pub fn open(dir: &Path, config: ReplicaConfig) -> Result<ReplicaDb, ReplicaError> {
        if config.partitions == 0 {
            return Err(ReplicaError::InvalidConfig("partitions must be at least 1"));
        }
        if config.sessions_max == 0 {
            return Err(ReplicaError::InvalidConfig("sessions_max must be at least 1"));
        }
        let db = Database::builder(dir).open()?;
        let keyspace = |name: &str| db.keyspace(name, KeyspaceCreateOptions::default);
        let keyspaces = Keyspaces {
            meta: keyspace("kv_meta")?,
            data: keyspace("kv_data")?,
            sessions: keyspace("kv_sessions")?,
            log: keyspace("kv_log")?,
            db: db.clone(),
        };
        check_partitions(&keyspaces, config.partitions)?;
        Ok(ReplicaDb {
            keyspaces,
            config,
            claimed: Arc::new(Mutex::new(HashSet::new())),
        })
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> ReplicaConfig {
        self.config
    }

    /// The state machine of partition `pid`, restored from the disk. One live handle per
    /// partition ([`ReplicaError::PartitionInUse`] for a second); handles of different
    /// partitions are independent and `Send`, so each may run on its own thread.
    pub fn partition(&self, pid: u16) -> Result<PartitionState, ReplicaError> {
        if pid >= self.config.partitions {
            return Err(ReplicaError::NoSuchPartition {
                partition: pid,
                partitions: self.config.partitions,
            });
        }
        let claim = Claim::take(&self.claimed, pid)?;
        PartitionState::load(self.keyspaces.clone(), self.config, claim)
    }

    /// fsyncs the journal: what [`SyncMode::Buffered`] batches wrote is then on disk too.
    pub fn persist(&self) -> Result<(), ReplicaError> {
        self.keyspaces.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}

/// Writes `partitions` into a new database, or checks it against the one stored.
fn check_partitions(keyspaces: &Keyspaces, partitions: u16) -> Result<(), ReplicaError> {
    let [low, high] = partitions.to_le_bytes();
    match keyspaces.meta.get(CONFIG_KEY)? {
        None => {
            keyspaces.meta.insert(CONFIG_KEY, [CONFIG_VERSION, low, high])?;
            keyspaces.db.persist(PersistMode::SyncAll)?;
            Ok(())
        }
        Some(record) => match *record {
            [CONFIG_VERSION, low, high] => {
                let stored = u16::from_le_bytes([low, high]);
                if stored == partitions {
                    Ok(())
                } else {
                    Err(ReplicaError::PartitionsMismatch {
                        stored,
                        configured: partitions,
                    })
                }
            }
            _ => Err(ReplicaError::Corrupt("configuration record")),
        },
    }
}

/// A partition's claim on its id, released when its [`PartitionState`] drops.
#[derive(Debug)]
pub(crate) struct Claim {
    claimed: Arc<Mutex<HashSet<u16>>>,
    pub(crate) pid: u16,
}

impl Claim {
    fn take(claimed: &Arc<Mutex<HashSet<u16>>>, pid: u16) -> Result<Claim, ReplicaError> {
        // The set only ever holds ids; a panic elsewhere while holding the lock left it valid.
        let mut set = claimed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !set.insert(pid) {
            return Err(ReplicaError::PartitionInUse(pid));
        }
        Ok(Claim {
            claimed: Arc::clone(claimed),
            pid,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut set = self
            .claimed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let released = set.remove(&self.pid);
        debug_assert!(released, "a claim is released once");
    }
}

/// A partition's key for `suffix` in a shared keyspace.
pub(crate) fn partition_key(pid: u16, suffix: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + suffix.len());
    key.extend_from_slice(&pid.to_be_bytes());
    key.extend_from_slice(suffix);
    key
}

/// The key of instance `inst` in the log, or of `client` in the sessions: big endian, so that
/// the keyspace's order is the numbers' order.
pub(crate) fn numbered_key(pid: u16, number: u64) -> Vec<u8> {
    partition_key(pid, &number.to_be_bytes())
}
