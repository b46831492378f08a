//! The in-memory reference store: the model other stores are compared against.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::command::{Command, SetCondition, parse_integer};
use crate::reply::Reply;
use crate::snapshot::Snapshot;
use crate::store::{Store, StoreError, StoreInfo};

/// A `HashMap` behind one lock. A batch runs under the lock as a whole, so each batch is atomic
/// here (more than the [`Store`] contract asks), and so is a transaction, which is a batch.
///
/// `SNAPSHOT`'s `ts` is the number of changes applied so far (each key set, each present key
/// deleted): equal `ts`, equal contents.
#[derive(Debug)]
pub struct MemStore {
    state: Mutex<MemState>,
    info: StoreInfo,
}

/// What the lock guards.
#[derive(Debug, Default)]
struct MemState {
    map: HashMap<Bytes, Bytes>,
    /// Changes applied: the `ts` of a snapshot.
    changes: u64,
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
            state: Mutex::new(MemState::default()),
            info,
        }
    }

    fn lock(&self) -> MutexGuard<'_, MemState> {
        // A panic while holding the lock leaves a map that each command keeps consistent on its
        // own (every command is one insert or remove at most per key), so the data is still good.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `commands` in order under one lock.
    fn run(&self, commands: &[Command]) -> Vec<Result<Reply, StoreError>> {
        let mut state = self.lock();
        commands
            .iter()
            .map(|command| {
                command.check_limits(&self.info)?;
                if let Command::Snapshot { dump } = command {
                    return Ok(state.snapshot().to_reply(*dump));
                }
                let Ok(result) = apply(&mut *state, command);
                result
            })
            .collect()
    }
}

impl MemState {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            ts: self.changes,
            pairs: self.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

impl Default for MemStore {
    fn default() -> MemStore {
        MemStore::new()
    }
}

impl Store for MemStore {
    fn execute(&self, batch: &[Command]) -> Vec<Result<Reply, StoreError>> {
        self.run(batch)
    }

    /// A batch already runs under one lock: the transaction is that batch.
    fn transaction(&self, commands: &[Command]) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        Ok(self.run(commands))
    }

    fn describe(&self) -> StoreInfo {
        let mut info = self.info.clone();
        info.fields
            .push(("keys".into(), self.lock().map.len().to_string()));
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

impl KeyValues for MemState {
    type Error = std::convert::Infallible;

    fn value(&mut self, key: &Bytes) -> Result<Option<Bytes>, Self::Error> {
        Ok(self.map.get(key).cloned())
    }

    fn put(&mut self, key: &Bytes, value: &Bytes) -> Result<(), Self::Error> {
        self.map.insert(key.clone(), value.clone());
        self.changes += 1;
        Ok(())
    }

    fn delete(&mut self, key: &Bytes) -> Result<bool, Self::Error> {
        let present = self.map.remove(key).is_some();
        self.changes += u64::from(present);
        Ok(present)
    }

    fn count(&mut self) -> Result<usize, Self::Error> {
        Ok(self.map.len())
    }
}

/// Runs one command on `map`. The outer error is the map's own (I/O), the inner one the reply.
/// `SNAPSHOT` gets [`StoreError::Unsupported`]: a key-value view cannot list its keys, so a store
/// that has it answers it before calling this.
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
        Command::MSet { pairs } => {
            for (key, value) in pairs {
                map.put(key, value)?;
            }
            Reply::Ok
        }
        Command::IncrBy { key, delta } => {
            let current = match map.value(key)? {
                None => 0,
                Some(value) => match parse_integer(&value) {
                    Some(current) => current,
                    None => return Ok(Err(StoreError::NotAnInteger)),
                },
            };
            let Some(next) = current.checked_add(*delta) else {
                return Ok(Err(StoreError::Overflow));
            };
            map.put(key, &Bytes::from(next.to_string()))?;
            Reply::Integer(next)
        }
        // A whole-store read needs more than a key-value view: the store answers it itself.
        Command::Snapshot { .. } => return Ok(Err(StoreError::Unsupported(command.name().into()))),
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

    fn incr(key: &str, delta: i64) -> Command {
        Command::IncrBy { key: b(key), delta }
    }

    #[test]
    fn incr_by_counts_from_zero_and_keeps_decimal_values() {
        let store = MemStore::new();
        assert_eq!(run(&store, incr("n", 5)), Ok(Reply::Integer(5)));
        assert_eq!(run(&store, incr("n", -7)), Ok(Reply::Integer(-2)));
        assert_eq!(
            run(&store, Command::Get { key: b("n") }),
            Ok(Reply::Bulk(b("-2")))
        );
        run(&store, set("s", "41", SetCondition::Always)).unwrap();
        assert_eq!(run(&store, incr("s", 1)), Ok(Reply::Integer(42)));
    }

    #[test]
    fn incr_by_refuses_non_integers_and_overflow_and_changes_nothing() {
        let store = MemStore::new();
        for value in ["x", "1.0", " 1", "+1", "01", "", "9223372036854775808"] {
            run(&store, set("k", value, SetCondition::Always)).unwrap();
            assert_eq!(
                run(&store, incr("k", 1)),
                Err(StoreError::NotAnInteger),
                "{value:?}"
            );
            assert_eq!(
                run(&store, Command::Get { key: b("k") }),
                Ok(Reply::Bulk(b(value)))
            );
        }
        run(&store, set("max", &i64::MAX.to_string(), SetCondition::Always)).unwrap();
        assert_eq!(run(&store, incr("max", 1)), Err(StoreError::Overflow));
        assert_eq!(run(&store, incr("max", -1)), Ok(Reply::Integer(i64::MAX - 1)));
        run(&store, set("min", &i64::MIN.to_string(), SetCondition::Always)).unwrap();
        assert_eq!(run(&store, incr("min", -1)), Err(StoreError::Overflow));
        assert_eq!(
            run(&store, Command::Get { key: b("min") }),
            Ok(Reply::Bulk(b("-9223372036854775808")))
        );
    }

    #[test]
    fn mset_sets_every_pair_in_order() {
        let store = MemStore::new();
        let pairs = vec![(b("a"), b("1")), (b("b"), b("2")), (b("a"), b("3"))];
        assert_eq!(run(&store, Command::MSet { pairs }), Ok(Reply::Ok));
        assert_eq!(
            run(
                &store,
                Command::MGet {
                    keys: vec![b("a"), b("b")]
                }
            ),
            Ok(Reply::Array(vec![Reply::Bulk(b("3")), Reply::Bulk(b("2"))]))
        );
    }

    #[test]
    fn snapshot_ts_counts_changes_and_the_dump_is_sorted() {
        let store = MemStore::new();
        let snapshot = |store: &MemStore| run(store, Command::Snapshot { dump: true });
        assert_eq!(
            snapshot(&store),
            Ok(Reply::Array(vec![Reply::Integer(0), Reply::Array(vec![])]))
        );
        run(&store, set("b", "2", SetCondition::Always)).unwrap();
        run(&store, set("a", "1", SetCondition::Always)).unwrap();
        // Neither changes anything: the ts stays.
        run(&store, set("a", "9", SetCondition::IfAbsent)).unwrap();
        run(
            &store,
            Command::Del {
                keys: vec![b("missing")],
            },
        )
        .unwrap();
        let expected = Snapshot {
            ts: 2,
            pairs: [(b("a"), b("1")), (b("b"), b("2"))].into_iter().collect(),
        };
        assert_eq!(snapshot(&store), Ok(expected.to_reply(true)));
        assert_eq!(
            run(&store, Command::Snapshot { dump: false }),
            Ok(expected.to_reply(false))
        );
        run(&store, Command::Del { keys: vec![b("a")] }).unwrap();
        let Ok(Reply::Array(items)) = snapshot(&store) else {
            panic!("an array")
        };
        assert_eq!(items[0], Reply::Integer(3));
    }

    #[test]
    fn a_transaction_runs_in_order_and_keeps_going_past_a_failed_command() {
        let store = MemStore::new();
        run(&store, set("s", "text", SetCondition::Always)).unwrap();
        let results = store
            .transaction(&[
                incr("n", 1),
                incr("s", 1),
                incr("n", 1),
                Command::Get { key: b("n") },
            ])
            .expect("the memory store runs transactions");
        assert_eq!(
            results,
            vec![
                Ok(Reply::Integer(1)),
                Err(StoreError::NotAnInteger),
                Ok(Reply::Integer(2)),
                Ok(Reply::Bulk(b("2"))),
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
