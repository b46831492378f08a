//! One decided value applied: its session checked, its command routed and run on the batch's
//! view of the partition's keys.

use std::collections::HashMap;

use bytes::Bytes;
use fjall::{Keyspace, OwnedWriteBatch};

use super::answer::encode_reply;
use super::db::partition_key;
use super::envelope::{Envelope, partition_of_command};
use super::progress::Counters;
use super::sessions::{Check, Sessions};
use super::state::Applied;
use crate::mem::{KeyValues, apply};
use crate::{Reply, StoreError, StoreInfo};

/// What one entry needs besides the keys: the sessions, the counters and the routing.
pub(super) struct Step<'a> {
    pub(super) sessions: &'a mut Sessions,
    pub(super) counters: &'a mut Counters,
    pub(super) limits: &'a StoreInfo,
    pub(super) pid: u16,
    pub(super) partitions: u16,
}

impl Step<'_> {
    /// Applies the value decided at `inst`: `None` for a no-op or a value that does not decode.
    pub(super) fn apply(
        &mut self,
        view: &mut View<'_>,
        inst: u64,
        value: &[u8],
    ) -> Result<Option<Applied>, fjall::Error> {
        if value.is_empty() {
            self.counters.noops += 1;
            return Ok(None);
        }
        let Ok(envelope) = Envelope::decode(value) else {
            self.counters.malformed += 1;
            return Ok(None);
        };
        let (client, request) = (envelope.client, envelope.request);
        let reply = match self.sessions.check(client, request) {
            Check::Duplicate(reply) => {
                self.counters.duplicates += 1;
                reply.to_vec()
            }
            Check::Stale { last_request } => {
                self.counters.stale += 1;
                encode_reply(&Err(StoreError::StaleRequest {
                    client,
                    request,
                    last_request,
                }))
            }
            Check::New => {
                let reply = encode_reply(&self.execute(view, &envelope)?);
                self.counters.applied += 1;
                self.sessions.record(client, request, reply.clone(), inst);
                reply
            }
        };
        Ok(Some(Applied {
            inst,
            client,
            request,
            reply,
        }))
    }

    /// Runs a command as [`MemStore`] would, once its keys are known to belong here.
    fn execute(
        &self,
        view: &mut View<'_>,
        envelope: &Envelope,
    ) -> Result<Result<Reply, StoreError>, fjall::Error> {
        let command = &envelope.command;
        if let Err(error) = command.check_limits(self.limits) {
            return Ok(Err(error));
        }
        match partition_of_command(command, self.partitions) {
            Err(error) => Ok(Err(error)),
            Ok(key_partition) if key_partition != self.pid => Ok(Err(StoreError::WrongPartition {
                key_partition,
                partition: self.pid,
            })),
            Ok(_) => apply(view, command),
        }
    }
}

/// The partition's keys as a batch sees them: the disk, under the batch's own reads and writes.
pub(super) struct View<'a> {
    data: &'a Keyspace,
    pid: u16,
    /// The partition's key count, with the batch's writes.
    pub(super) keys: u64,
    /// Keys read or written by the batch; bounded by the keys its commands name.
    cache: HashMap<Bytes, Cached>,
    /// What earlier batches read and wrote (the disk's contents, as committed).
    reads: &'a mut ReadCache,
}

/// Keys as committed, kept across batches so that a read seldom reaches the LSM tree (whose
/// memtable holds every version of a hot key). At most `keys_max` entries: when full, it
/// starts over (a cache only: every entry equals the disk's).
pub(super) struct ReadCache {
    entries: HashMap<Bytes, Option<Bytes>>,
    keys_max: usize,
}

impl ReadCache {
    pub(super) fn new(keys_max: usize) -> ReadCache {
        ReadCache {
            entries: HashMap::new(),
            keys_max,
        }
    }

    fn insert(&mut self, key: Bytes, value: Option<Bytes>) {
        if self.entries.len() >= self.keys_max && !self.entries.contains_key(&key) {
            self.entries.clear();
        }
        if self.keys_max > 0 {
            self.entries.insert(key, value);
        }
    }
}

struct Cached {
    value: Option<Bytes>,
    written: bool,
}

impl<'a> View<'a> {
    pub(super) fn new(data: &'a Keyspace, pid: u16, keys: u64, reads: &'a mut ReadCache) -> View<'a> {
        View {
            data,
            pid,
            keys,
            cache: HashMap::new(),
            reads,
        }
    }

    /// Adds the batch's writes, one per key, to `batch`, and to the read cache (a batch that
    /// fails to commit poisons the partition, so the cache is never read past a failure).
    pub(super) fn write_into(self, batch: &mut OwnedWriteBatch) {
        for (key, cached) in self.cache.into_iter().filter(|(_, cached)| cached.written) {
            let disk_key = partition_key(self.pid, &key);
            match &cached.value {
                Some(value) => batch.insert(self.data, disk_key, value.as_ref()),
                None => batch.remove(self.data, disk_key),
            }
            self.reads.insert(key, cached.value);
        }
    }

    fn set(&mut self, key: &Bytes, value: Option<Bytes>) -> Result<bool, fjall::Error> {
        let present = self.value(key)?.is_some();
        match (present, value.is_some()) {
            (false, true) => self.keys += 1,
            (true, false) => self.keys = self.keys.checked_sub(1).expect("a present key was counted"),
            _ => {}
        }
        self.cache.insert(key.clone(), Cached { value, written: true });
        Ok(present)
    }
}

impl KeyValues for View<'_> {
    type Error = fjall::Error;

    fn value(&mut self, key: &Bytes) -> Result<Option<Bytes>, fjall::Error> {
        if let Some(cached) = self.cache.get(key) {
            return Ok(cached.value.clone());
        }
        let value = match self.reads.entries.get(key) {
            Some(v) => v.clone(),
            None => {
                let v = self
                    .data
                    .get(partition_key(self.pid, key))?
                    .map(|value| Bytes::copy_from_slice(&value));
                self.reads.insert(key.clone(), v.clone());
                v
            }
        };
        let cached = Cached {
            value: value.clone(),
            written: false,
        };
        self.cache.insert(key.clone(), cached);
        Ok(value)
    }

    fn put(&mut self, key: &Bytes, value: &Bytes) -> Result<(), fjall::Error> {
        self.set(key, Some(value.clone()))?;
        Ok(())
    }

    fn delete(&mut self, key: &Bytes) -> Result<bool, fjall::Error> {
        if self.value(key)?.is_none() {
            return Ok(false);
        }
        self.set(key, None)
    }

    fn count(&mut self) -> Result<usize, fjall::Error> {
        Ok(usize::try_from(self.keys).unwrap_or(usize::MAX))
    }
}
