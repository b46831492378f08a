//! The in-memory reference store: the model other stores are compared against.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::command::{Command, SetCondition};
use crate::reply::Reply;
use crate::store::{Store, StoreError, StoreInfo};

/// A `HashMap` behind one lock. A batch runs under the lock as a whole, so each batch is atomic
/// here (more than the [`Store`] contract asks).
#[derive(Debug)]
pub struct MemStore {
    map: Mutex<HashMap<Bytes, Bytes>>,
    info: StoreInfo,
}

impl MemStore {
    /// Longest key by default, in bytes.
    pub const KEY_BYTES_MAX: usize = 1024;
    /// Longest value by default, in bytes (under `ServeConfig::default().request_bytes_max`).
    pub const VALUE_BYTES_MAX: usize = 512 * 1024;

    /// An empty store with the default limits.
    pub fn new() -> MemStore {
        MemStore::with_limits(Self::KEY_BYTES_MAX, Self::VALUE_BYTES_MAX)
    }

    /// An empty store with these limits (e.g. NetChain's 16 B keys, to model it).
    pub fn with_limits(key_bytes_max: usize, value_bytes_max: usize) -> MemStore {
        let info = StoreInfo {
            name: "memory".into(),
            key_bytes_max,
            value_bytes_max,
            fields: Vec::new(),
        };
        MemStore {
            map: Mutex::new(HashMap::new()),
            info,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Bytes, Bytes>> {
        // A panic while holding the lock leaves a map that each command keeps consistent on its
        // own (every command is one insert or remove at most per key), so the data is still good.
        self.map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Default for MemStore {
    fn default() -> MemStore {
        MemStore::new()
    }
}

impl Store for MemStore {
    fn execute(&self, batch: &[Command]) -> Vec<Result<Reply, StoreError>> {
        let mut map = self.lock();
        batch
            .iter()
            .map(|command| {
                command.check_limits(&self.info)?;
                let Ok(result) = apply(&mut *map, command);
                result
            })
            .collect()
    }

    fn describe(&self) -> StoreInfo {
        let mut info = self.info.clone();
        info.fields.push(("keys".into(), self.lock().len().to_string()));
        info
    }
}

/// The map a command runs on: [`MemStore`]'s `HashMap`, or a replicated partition's view of its
/// on-disk keys. One [`apply`] for both keeps the replicated store's semantics those of the model.
pub(crate) trait KeyValues {
    /// Why the map could not be read or written (never for a `HashMap`).
    type Error;
    /// The value of `key`, if present.
    fn value(&mut self, key: &Bytes) -> Result<Option<Bytes>, Self::Error>;
    /// Sets `key` to `value`.
    fn put(&mut self, key: &Bytes, value: &Bytes) -> Result<(), Self::Error>;
    /// Removes `key`; `true` when it was present.
    fn delete(&mut self, key: &Bytes) -> Result<bool, Self::Error>;
    /// The number of keys.
    fn count(&mut self) -> Result<usize, Self::Error>;
}

impl KeyValues for HashMap<Bytes, Bytes> {
    type Error = std::convert::Infallible;

    fn value(&mut self, key: &Bytes) -> Result<Option<Bytes>, Self::Error> {
        Ok(self.get(key).cloned())
    }

    fn put(&mut self, key: &Bytes, value: &Bytes) -> Result<(), Self::Error> {
        self.insert(key.clone(), value.clone());
        Ok(())
    }

    fn delete(&mut self, key: &Bytes) -> Result<bool, Self::Error> {
        Ok(self.remove(key).is_some())
    }

    fn count(&mut self) -> Result<usize, Self::Error> {
        Ok(self.len())
    }
}

/// Runs one command on `map`. The outer error is the map's own (I/O), the inner one the reply.
pub(crate) fn apply<M: KeyValues>(
    map: &mut M,
    command: &Command,
) -> Result<Result<Reply, StoreError>, M::Error> {
    let reply = match command {
        Command::Get { key } => Reply::from(map.value(key)?),
        Command::Set {
            key,
            value,
            condition,
        } => {
            let present = map.value(key)?.is_some();
            let allowed = match condition {
                SetCondition::Always => true,
                SetCondition::IfAbsent => !present,
                SetCondition::IfPresent => present,
            };
            if !allowed {
                return Ok(Ok(Reply::Nil));
            }
            map.put(key, value)?;
            Reply::Ok
        }
        Command::Del { keys } => {
            let mut removed: i64 = 0;
            for key in keys {
                removed += i64::from(map.delete(key)?);
            }
            Reply::Integer(removed)
        }
        Command::MGet { keys } => {
            let mut values = Vec::with_capacity(keys.len());
            for key in keys {
                values.push(Reply::from(map.value(key)?));
            }
            Reply::Array(values)
        }
        Command::Cas { key, expect, new } => {
            let current = map.value(key)?;
            if current.as_ref() != expect.as_ref() {
                return Ok(Ok(Reply::cas_failed(current)));
            }
            match new {
                Some(new) => map.put(key, new)?,
                None => {
                    map.delete(key)?;
                }
            }
            Reply::cas_swapped()
        }
        Command::DbSize => Reply::Integer(i64::try_from(map.count()?).unwrap_or(i64::MAX)),
    };
    Ok(Ok(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn run(store: &MemStore, command: Command) -> Result<Reply, StoreError> {
        let mut results = store.execute(&[command]);
        assert_eq!(results.len(), 1);
        results.remove(0)
    }

    fn set(key: &str, value: &str, condition: SetCondition) -> Command {
        Command::Set {
            key: b(key),
            value: b(value),
            condition,
        }
    }

    #[test]
    fn set_conditions_hold() {
        let store = MemStore::new();
        assert_eq!(
            run(&store, set("k", "1", SetCondition::IfPresent)),
            Ok(Reply::Nil)
        );
        assert_eq!(run(&store, set("k", "1", SetCondition::IfAbsent)), Ok(Reply::Ok));
        assert_eq!(run(&store, set("k", "2", SetCondition::IfAbsent)), Ok(Reply::Nil));
        assert_eq!(run(&store, set("k", "3", SetCondition::IfPresent)), Ok(Reply::Ok));
        assert_eq!(run(&store, Command::Get { key: b("k") }), Ok(Reply::Bulk(b("3"))));
    }

    #[test]
    fn a_lock_by_cas() {
        let store = MemStore::new();
        let acquire = |owner: &str| Command::Cas {
            key: b("lock"),
            expect: None,
            new: Some(b(owner)),
        };
        let release = |owner: &str| Command::Cas {
            key: b("lock"),
            expect: Some(b(owner)),
            new: None,
        };
        assert_eq!(run(&store, acquire("a")), Ok(Reply::cas_swapped()));
        assert_eq!(run(&store, acquire("b")), Ok(Reply::cas_failed(Some(b("a")))));
        assert_eq!(run(&store, release("b")), Ok(Reply::cas_failed(Some(b("a")))));
        assert_eq!(run(&store, release("a")), Ok(Reply::cas_swapped()));
        assert_eq!(run(&store, release("a")), Ok(Reply::cas_failed(None)));
        assert_eq!(run(&store, acquire("b")), Ok(Reply::cas_swapped()));
        assert_eq!(run(&store, Command::DbSize), Ok(Reply::Integer(1)));
    }

    #[test]
    fn a_batch_runs_in_order_and_del_counts_what_existed() {
        let store = MemStore::new();
        let results = store.execute(&[
            set("a", "1", SetCondition::Always),
            Command::MGet {
                keys: vec![b("a"), b("b")],
            },
            Command::Del {
                keys: vec![b("a"), b("b"), b("a")],
            },
            Command::DbSize,
        ]);
        assert_eq!(
            results,
            vec![
                Ok(Reply::Ok),
                Ok(Reply::Array(vec![Reply::Bulk(b("1")), Reply::Nil])),
                Ok(Reply::Integer(1)),
                Ok(Reply::Integer(0)),
            ]
        );
    }

    #[test]
    fn limits_are_enforced_per_command() {
        let store = MemStore::with_limits(2, 2);
        let results = store.execute(&[
            set("kkk", "v", SetCondition::Always),
            set("k", "v", SetCondition::Always),
        ]);
        assert_eq!(
            results[0],
            Err(StoreError::KeyTooLarge {
                len_bytes: 3,
                max_bytes: 2
            })
        );
        assert_eq!(results[1], Ok(Reply::Ok));
        assert_eq!(
            store.describe().fields,
            vec![("keys".to_string(), "1".to_string())]
        );
    }
}
