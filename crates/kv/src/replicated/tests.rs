//! The state machine against its promises: restarts, order, sessions, trimming, agreement of
//! replicas fed the same log, and the semantics of [`MemStore`].

use std::path::Path;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::command::{Command, SetCondition};
use crate::{MemStore, Reply, Store, StoreError};

fn arb_bytes() -> BoxedStrategy<Bytes> {
    proptest::collection::vec(any::<u8>(), 0..12)
        .prop_map(Bytes::from)
        .boxed()
}

/// Keys from a small set, so that commands meet each other's keys.
fn arb_key() -> BoxedStrategy<Bytes> {
    prop_oneof![Just("a"), Just("b"), Just("c"), Just("")]
        .prop_map(|key: &'static str| Bytes::from_static(key.as_bytes()))
        .boxed()
}

fn arb_command_over(key: BoxedStrategy<Bytes>) -> impl Strategy<Value = Command> {
    let condition = prop_oneof![
        Just(SetCondition::Always),
        Just(SetCondition::IfAbsent),
        Just(SetCondition::IfPresent)
    ];
    let keys = proptest::collection::vec(key.clone(), 1..4);
    let value = || {
        prop_oneof![
            Just(Bytes::from_static(b"1")),
            Just(Bytes::from_static(b"2")),
            arb_bytes()
        ]
    };
    prop_oneof![
        key.clone().prop_map(|key| Command::Get { key }),
        (key.clone(), value(), condition).prop_map(|(key, value, condition)| Command::Set {
            key,
            value,
            condition,
        }),
        keys.clone().prop_map(|keys| Command::Del { keys }),
        keys.prop_map(|keys| Command::MGet { keys }),
        (key, proptest::option::of(value()), proptest::option::of(value()))
            .prop_map(|(key, expect, new)| Command::Cas { key, expect, new }),
        Just(Command::DbSize),
    ]
}

/// Any command, with any keys and values.
pub(crate) fn arb_command() -> impl Strategy<Value = Command> {
    arb_command_over(arb_bytes())
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn set(key: &str, value: &str) -> Command {
    Command::Set {
        key: b(key),
        value: b(value),
        condition: SetCondition::Always,
    }
}

fn envelope(client: u64, request: u64, command: Command) -> Vec<u8> {
    let mut out = Vec::new();
    Envelope {
        client,
        request,
        command,
    }
    .encode(&mut out);
    out
}

fn config() -> ReplicaConfig {
    ReplicaConfig {
        partitions: 1,
        // The tests reopen after dropping, which the OS buffers survive; one test fsyncs.
        sync: SyncMode::Buffered,
        sessions_max: 16,
        log_keep_instances: 1000,
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("onepipe-kv-replicated-")
        .tempdir()
        .expect("a temporary directory")
}

fn open(dir: &Path, config: ReplicaConfig) -> (ReplicaDb, PartitionState) {
    let db = ReplicaDb::open(dir, config).expect("open the replica");
    let state = db.partition(0).expect("partition 0");
    (db, state)
}

/// Applies `values` from the partition's next instance on, in batches of `batch` entries.
fn feed(state: &mut PartitionState, values: &[Vec<u8>], batch: usize) -> Vec<Applied> {
    let first = state.next_instance();
    let entries: Vec<(u64, &[u8])> = values
        .iter()
        .enumerate()
        .map(|(index, value)| (first + index as u64, value.as_slice()))
        .collect();
    let mut applied = Vec::new();
    for chunk in entries.chunks(batch.max(1)) {
        applied.extend(state.apply_batch(chunk).expect("apply"));
    }
    applied
}

fn reply(applied: &Applied) -> Result<Reply, StoreError> {
    decode_reply(&applied.reply).expect("a reply the replica encoded decodes")
}

#[test]
fn partition_state_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<PartitionState>();
    assert_send::<ReplicaDb>();
}

#[test]
fn a_restart_keeps_progress_state_and_sessions() {
    let dir = tempdir();
    let config = ReplicaConfig {
        sync: SyncMode::EveryBatch,
        ..config()
    };
    let (db, mut state) = open(dir.path(), config);
    let first = envelope(1, 1, set("a", "1"));
    feed(
        &mut state,
        &[first.clone(), Vec::new(), envelope(2, 1, set("a", "2"))],
        2,
    );
    let digest = state.state_digest().unwrap();
    let counters = state.counters();
    assert_eq!(state.next_instance(), 3);
    drop((state, db));

    let (_db, mut state) = open(dir.path(), config);
    assert_eq!(state.next_instance(), 3);
    assert_eq!(state.counters(), counters);
    assert_eq!(state.state_digest().unwrap(), digest);
    assert_eq!(state.get(b"a").unwrap(), Some(b("2")));
    assert_eq!(state.key_count(), 1);
    // Client 1's request 1 decided again: answered from the restored session, not run again
    // (running it would set "a" back to "1").
    let applied = state.ingest(3, &first).unwrap().expect("a command");
    assert_eq!(reply(&applied), Ok(Reply::Ok));
    assert_eq!((applied.inst, applied.client, applied.request), (3, 1, 1));
    assert_eq!(state.get(b"a").unwrap(), Some(b("2")));
    assert_eq!(state.counters().duplicates, 1);
}

#[test]
fn out_of_order_batches_apply_nothing() {
    let dir = tempdir();
    let (_db, mut state) = open(dir.path(), config());
    let value = envelope(1, 1, set("a", "1"));
    let error = state.apply_batch(&[(1, &value)]).unwrap_err();
    assert!(
        matches!(error, ReplicaError::OutOfOrder { expected: 0, got: 1 }),
        "{error}"
    );
    // A gap inside a batch refuses the whole batch, its valid start included.
    let error = state.apply_batch(&[(0, &value), (2, &value)]).unwrap_err();
    assert!(
        matches!(error, ReplicaError::OutOfOrder { expected: 1, got: 2 }),
        "{error}"
    );
    assert_eq!(state.next_instance(), 0);
    assert_eq!(state.get(b"a").unwrap(), None);
    assert_eq!(state.counters(), Counters::default());
    // The partition is still usable, and a replayed instance is refused too.
    state.apply_batch(&[(0, &value)]).unwrap();
    let error = state.apply_batch(&[(0, &value)]).unwrap_err();
    assert!(
        matches!(error, ReplicaError::OutOfOrder { expected: 1, got: 0 }),
        "{error}"
    );
}

#[test]
fn a_retried_request_runs_once_and_an_older_one_is_refused() {
    let dir = tempdir();
    let (_db, mut state) = open(dir.path(), config());
    let acquire = |owner: &str| Command::Cas {
        key: b("lock"),
        expect: None,
        new: Some(b(owner)),
    };
    let applied = feed(
        &mut state,
        &[
            envelope(7, 5, acquire("x")),
            // The same request decided a second time (the client retried): if it ran again, it
            // would fail, the lock being taken.
            envelope(7, 5, acquire("x")),
            envelope(7, 4, acquire("y")),
            envelope(7, 6, acquire("z")),
        ],
        4,
    );
    assert_eq!(applied.len(), 4);
    assert_eq!(reply(&applied[0]), Ok(Reply::cas_swapped()));
    assert_eq!(applied[1].reply, applied[0].reply);
    assert_eq!(
        reply(&applied[2]),
        Err(StoreError::StaleRequest {
            client: 7,
            request: 4,
            last_request: 5
        })
    );
    assert_eq!(reply(&applied[3]), Ok(Reply::cas_failed(Some(b("x")))));
    let counters = state.counters();
    assert_eq!((counters.applied, counters.duplicates, counters.stale), (2, 1, 1));
}

#[test]
fn the_least_recently_applied_session_is_evicted_on_every_replica() {
    let config = ReplicaConfig {
        sessions_max: 2,
        ..config()
    };
    let log = [
        envelope(1, 1, set("k", "1")),
        envelope(2, 1, set("k", "2")),
        envelope(1, 2, set("k", "3")),
        // A third client: client 2's session is the oldest (client 1 ran since).
        envelope(3, 1, set("k", "4")),
        // Client 2's retry finds no session and runs again, evicting client 1's session (now
        // the oldest); client 3's retry is still answered from its session.
        envelope(2, 1, set("k", "5")),
        envelope(3, 1, set("k", "4")),
        // Client 1's retry runs again too.
        envelope(1, 2, set("k", "6")),
    ];
    let (dir_a, dir_b) = (tempdir(), tempdir());
    let (_db_a, mut a) = open(dir_a.path(), config);
    let applied = feed(&mut a, &log, 1);
    assert_eq!(a.get(b"k").unwrap(), Some(b("6")));
    assert_eq!(a.counters().applied, 6);
    assert_eq!(a.counters().duplicates, 1);
    assert_eq!(a.session_count(), 2);
    assert_eq!(reply(&applied[5]), Ok(Reply::Ok));
    assert_eq!(applied[5].request, 1);

    // Replica b restarts in the middle and takes other batches: it evicts the same sessions.
    let (db_b, mut b) = open(dir_b.path(), config);
    feed(&mut b, &log[..3], 3);
    drop((b, db_b));
    let (_db_b, mut b) = open(dir_b.path(), config);
    feed(&mut b, &log[3..], 2);
    assert_eq!(b.state_digest().unwrap(), a.state_digest().unwrap());
    assert_eq!(b.counters(), a.counters());
}

#[test]
fn the_log_keeps_the_last_instances_for_peers() {
    let config = ReplicaConfig {
        log_keep_instances: 4,
        ..config()
    };
    let dir = tempdir();
    let (_db, mut state) = open(dir.path(), config);
    let log: Vec<Vec<u8>> = (0..10)
        .map(|i| envelope(1, i + 1, set("k", &i.to_string())))
        .collect();
    feed(&mut state, &log[..3], 3);
    assert_eq!(state.first_kept_instance(), 0);
    feed(&mut state, &log[3..], 2);
    assert_eq!(state.first_kept_instance(), 6);
    let kept = state.log_range(6, 100).unwrap();
    let expected: Vec<(u64, Vec<u8>)> = (6..10).map(|i| (i, log[i as usize].clone())).collect();
    assert_eq!(kept, expected);
    assert_eq!(state.log_range(7, 2).unwrap(), expected[1..3]);
    assert_eq!(state.log_range(10, 5).unwrap(), []);
    let error = state.log_range(5, 1).unwrap_err();
    assert!(
        matches!(
            error,
            ReplicaError::Trimmed {
                from: 5,
                first_kept: 6
            }
        ),
        "{error}"
    );
}

#[test]
fn a_lowered_keep_trims_a_bounded_step_per_batch() {
    let dir = tempdir();
    let config = ReplicaConfig {
        log_keep_instances: 5000,
        ..config()
    };
    let (db, mut state) = open(dir.path(), config);
    feed(&mut state, &vec![Vec::new(); 6000], 500);
    assert_eq!(state.first_kept_instance(), 1000);
    drop((state, db));
    let config = ReplicaConfig {
        log_keep_instances: 10,
        ..config
    };
    let (_db, mut state) = open(dir.path(), config);
    let mut steps = 0;
    while state.first_kept_instance() + 10 < state.next_instance() {
        let before = state.first_kept_instance();
        state.ingest(state.next_instance(), &[]).unwrap();
        // One entry and at most 1024 more trimmed in one batch.
        assert_eq!(
            state.first_kept_instance().min(before + 1025),
            state.first_kept_instance()
        );
        assert!(matches!(
            state.log_range(state.first_kept_instance() - 1, 1),
            Err(ReplicaError::Trimmed { .. })
        ));
        steps += 1;
    }
    assert_eq!(steps, 5, "(6005 - 10 - 1000) / 1025, rounded up");
    assert_eq!(state.first_kept_instance(), state.next_instance() - 10);
    let kept = state.log_range(state.first_kept_instance(), 100).unwrap();
    assert_eq!(kept.len(), 10);
}

#[test]
fn a_peer_catches_up_from_the_kept_log() {
    let (dir_a, dir_b) = (tempdir(), tempdir());
    let (_db_a, mut a) = open(dir_a.path(), config());
    let log: Vec<Vec<u8>> = (0..20)
        .map(|i| match i % 4 {
            0 => Vec::new(),
            1 => vec![0xff, 0x00],
            _ => envelope(i % 3, i, set(&format!("k{}", i % 5), "v")),
        })
        .collect();
    feed(&mut a, &log, 7);
    let (_db_b, mut b) = open(dir_b.path(), config());
    while b.next_instance() < a.next_instance() {
        for (inst, value) in a.log_range(b.next_instance(), 3).unwrap() {
            b.ingest(inst, &value).unwrap();
        }
    }
    assert_eq!(b.state_digest().unwrap(), a.state_digest().unwrap());
    assert_eq!(b.counters(), a.counters());
    assert_eq!(b.log_range(0, 100).unwrap(), a.log_range(0, 100).unwrap());
}

#[test]
fn limits_are_memstores() {
    let dir = tempdir();
    let (_db, mut state) = open(dir.path(), config());
    let long_key = "k".repeat(KEY_BYTES_MAX + 1);
    let commands = [set(&long_key, "v"), set(&"k".repeat(KEY_BYTES_MAX), "v")];
    let values: Vec<Vec<u8>> = (0..2)
        .map(|i| envelope(1, i + 1, commands[i as usize].clone()))
        .collect();
    let applied = feed(&mut state, &values, 2);
    let model = MemStore::new();
    assert_eq!(reply(&applied[0]), model.execute(&commands[..1]).remove(0));
    assert!(matches!(reply(&applied[0]), Err(StoreError::KeyTooLarge { .. })));
    assert_eq!(reply(&applied[1]), Ok(Reply::Ok));
    assert_eq!(state.key_count(), 1);
}

#[test]
fn the_database_remembers_its_partitions() {
    let dir = tempdir();
    let db = ReplicaDb::open(
        dir.path(),
        ReplicaConfig {
            partitions: 4,
            ..config()
        },
    )
    .unwrap();
    let first = db.partition(3).unwrap();
    assert!(matches!(db.partition(3), Err(ReplicaError::PartitionInUse(3))));
    assert!(matches!(
        db.partition(4),
        Err(ReplicaError::NoSuchPartition {
            partition: 4,
            partitions: 4
        })
    ));
    drop(first);
    let again = db.partition(3).expect("released when dropped");
    drop((again, db));
    let error = ReplicaDb::open(
        dir.path(),
        ReplicaConfig {
            partitions: 2,
            ..config()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            ReplicaError::PartitionsMismatch {
                stored: 4,
                configured: 2
            }
        ),
        "{error}"
    );
    let error = ReplicaDb::open(
        dir.path(),
        ReplicaConfig {
            sessions_max: 0,
            ..config()
        },
    )
    .unwrap_err();
    assert!(matches!(error, ReplicaError::InvalidConfig(_)), "{error}");
}

/// A key of each partition among `partitions`.
fn keys_by_partition(partitions: u16) -> Vec<Bytes> {
    (0..partitions)
        .map(|pid| {
            (0..10_000)
                .map(|i| b(&format!("key{i}")))
                .find(|key| partition_of(key, partitions) == pid)
                .expect("a key in each partition")
        })
        .collect()
}

#[test]
fn partitions_apply_on_their_own_threads_and_refuse_foreign_keys() {
    let partitions = 3;
    let dir = tempdir();
    let db = ReplicaDb::open(
        dir.path(),
        ReplicaConfig {
            partitions,
            ..config()
        },
    )
    .unwrap();
    let keys = keys_by_partition(partitions);
    let workers: Vec<_> = (0..partitions)
        .map(|pid| {
            let mut state = db.partition(pid).unwrap();
            let (own, foreign) = (
                keys[pid as usize].clone(),
                keys[((pid + 1) % partitions) as usize].clone(),
            );
            std::thread::spawn(move || {
                let log = [
                    envelope(
                        1,
                        1,
                        Command::Set {
                            key: own.clone(),
                            value: b("v"),
                            condition: SetCondition::Always,
                        },
                    ),
                    envelope(1, 2, Command::Get { key: foreign.clone() }),
                    envelope(
                        1,
                        3,
                        Command::MGet {
                            keys: vec![own, foreign],
                        },
                    ),
                    envelope(1, 4, Command::DbSize),
                ];
                let replies: Vec<_> = feed(&mut state, &log, 4).iter().map(reply).collect();
                (pid, replies)
            })
        })
        .collect();
    for worker in workers {
        let (pid, replies) = worker.join().expect("a worker");
        let next = (pid + 1) % partitions;
        assert_eq!(replies[0], Ok(Reply::Ok));
        assert_eq!(
            replies[1],
            Err(StoreError::WrongPartition {
                key_partition: next,
                partition: pid
            })
        );
        assert_eq!(replies[2], Err(StoreError::CrossSlot));
        let dbsize = if pid == 0 {
            Ok(Reply::Integer(1))
        } else {
            Err(StoreError::WrongPartition {
                key_partition: 0,
                partition: pid,
            })
        };
        assert_eq!(replies[3], dbsize);
    }
    for pid in 0..partitions {
        let state = db.partition(pid).unwrap();
        assert_eq!(state.key_count(), 1);
        assert_eq!(state.get(&keys[pid as usize]).unwrap(), Some(b("v")));
    }
}

/// A decided value: a command of one of a few clients, a no-op, or bytes that may not decode.
#[derive(Debug, Clone)]
enum Decided {
    Command { client: u64, command: Command },
    Retry,
    Noop,
    Junk(Vec<u8>),
}

fn arb_decided() -> impl Strategy<Value = Decided> {
    prop_oneof![
        6 => (0u64..3, arb_command_over(arb_key())).prop_map(|(client, command)| Decided::Command { client, command }),
        1 => Just(Decided::Retry),
        1 => Just(Decided::Noop),
        1 => proptest::collection::vec(any::<u8>(), 1..16).prop_map(Decided::Junk),
    ]
}

/// The log's values: each client numbers its requests 1, 2, ...; `Retry` repeats the last value.
fn values_of(log: &[Decided]) -> Vec<Vec<u8>> {
    let mut requests = [0u64; 3];
    let mut values: Vec<Vec<u8>> = Vec::new();
    for decided in log {
        let value = match decided {
            Decided::Command { client, command } => {
                requests[*client as usize] += 1;
                envelope(*client, requests[*client as usize], command.clone())
            }
            Decided::Retry => values.last().cloned().unwrap_or_default(),
            Decided::Noop => Vec::new(),
            Decided::Junk(bytes) => bytes.clone(),
        };
        values.push(value);
    }
    values
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Reference: the commands' semantics are MemStore's (crates/kv/src/mem.rs).
    #[test]
    fn replies_are_those_of_memstore(
        commands in proptest::collection::vec(arb_command_over(arb_key()), 1..40),
        batch in 1usize..8,
    ) {
        let dir = tempdir();
        let (_db, mut state) = open(dir.path(), config());
        let values: Vec<Vec<u8>> = commands
            .iter()
            .enumerate()
            .map(|(index, command)| envelope(9, index as u64 + 1, command.clone()))
            .collect();
        let applied = feed(&mut state, &values, batch);
        let model = MemStore::new();
        prop_assert_eq!(applied.len(), commands.len());
        for (applied, command) in applied.iter().zip(&commands) {
            let expected = model.execute(std::slice::from_ref(command)).remove(0);
            prop_assert_eq!(reply(applied), expected, "{:?}", command);
        }
        for key in ["a", "b", "c", ""] {
            let expected = model.execute(&[Command::Get { key: b(key) }]).remove(0);
            prop_assert_eq!(Ok(Reply::from(state.get(key.as_bytes()).unwrap())), expected);
        }
    }

    /// Two replicas fed the same log in different batches, one restarting, end in one state;
    /// malformed values are counted and change nothing.
    #[test]
    fn replicas_fed_one_log_agree(
        log in proptest::collection::vec(arb_decided(), 1..40),
        batch_a in 1usize..8,
        batch_b in 1usize..8,
        restart_at in 0usize..40,
    ) {
        let values = values_of(&log);
        let config = ReplicaConfig { sessions_max: 2, ..config() };
        let (dir_a, dir_b) = (tempdir(), tempdir());
        let (_db_a, mut a) = open(dir_a.path(), config);
        feed(&mut a, &values, batch_a);

        let restart_at = restart_at.min(values.len());
        let (db_b, mut b) = open(dir_b.path(), config);
        feed(&mut b, &values[..restart_at], batch_b);
        drop((b, db_b));
        let (_db_b, mut b) = open(dir_b.path(), config);
        feed(&mut b, &values[restart_at..], batch_b);

        prop_assert_eq!(a.state_digest().unwrap(), b.state_digest().unwrap());
        prop_assert_eq!(a.counters(), b.counters());
        let malformed = values.iter().filter(|v| !v.is_empty() && Envelope::decode(v).is_err()).count();
        prop_assert_eq!(a.counters().malformed, malformed as u64);
        prop_assert_eq!(a.counters().entries(), values.len() as u64);

        // The same log without its malformed values gives the same keys and sessions.
        let clean: Vec<Vec<u8>> = values
            .iter()
            .map(|v| if Envelope::decode(v).is_ok() { v.clone() } else { Vec::new() })
            .collect();
        let dir_c = tempdir();
        let (_db_c, mut c) = open(dir_c.path(), config);
        feed(&mut c, &clean, batch_a);
        prop_assert_eq!(c.state_digest().unwrap(), a.state_digest().unwrap());
    }
}
