//! One replica's answers, message by message.

use super::*;
use crate::occ::codec::{
    Abort, Commit, CommitReply, CommitStatus, Lock, LockReply, Read, ReadReply, Validate, ValidateReply,
};

const CLIENT: u32 = 10;
const OTHER: u32 = 11;

/// Delivers `m` from `src` and returns the answer, if any.
fn ask(s: &mut OccServer, src: u32, m: OccMessage) -> Option<OccMessage> {
    s.on_delivery(Service::BestEffort, 0, src, &m.encode());
    s.invariants();
    let answer = s.pop_send().map(|(dst, bytes)| {
        assert_eq!(dst, src);
        OccMessage::decode(&bytes).unwrap()
    });
    assert!(s.pop_send().is_none(), "more than one answer");
    answer
}

fn lock(txn: u64, attempt: u32, keys: &[(&str, Option<u64>)]) -> OccMessage {
    OccMessage::Lock(Lock {
        txn,
        attempt,
        items: keys.iter().map(|(k, v)| (b(k), *v)).collect(),
    })
}

fn granted(answer: Option<OccMessage>) -> Option<Vec<u64>> {
    match answer {
        Some(OccMessage::LockReply(LockReply {
            ok: true, versions, ..
        })) => Some(versions),
        Some(OccMessage::LockReply(LockReply { ok: false, .. })) => None,
        other => panic!("{other:?}"),
    }
}

fn put(txn: u64, key: &str, value: &str, base: u64) -> OccMessage {
    OccMessage::Commit(Commit {
        txn,
        attempt: 0,
        ops: vec![(
            0,
            Op::Put {
                key: b(key),
                value: b(value),
            },
        )],
        bases: vec![(b(key), base)],
    })
}

fn commit_status(answer: Option<OccMessage>) -> (CommitStatus, Vec<(u16, OpResult)>) {
    match answer {
        Some(OccMessage::CommitReply(CommitReply { status, results, .. })) => (status, results),
        other => panic!("{other:?}"),
    }
}

fn primary() -> OccServer {
    OccServer::new(OccServerConfig::new(0, 0))
}

#[test]
fn a_lock_is_all_or_none_and_granted_again_to_its_owner() {
    let mut s = primary();
    assert_eq!(
        granted(ask(&mut s, CLIENT, lock(1, 0, &[("a", None)]))),
        Some(vec![0])
    );
    assert_eq!(
        granted(ask(&mut s, CLIENT, lock(1, 0, &[("a", None)]))),
        Some(vec![0])
    );
    assert_eq!(
        granted(ask(&mut s, OTHER, lock(1, 0, &[("b", None), ("a", None)]))),
        None
    );
    assert_eq!(s.lock_owner(b"b"), None, "a refused lock took a key");
    assert_eq!(
        granted(ask(&mut s, OTHER, lock(2, 0, &[("b", Some(1))]))),
        None,
        "stale version"
    );
    assert_eq!(
        granted(ask(&mut s, OTHER, lock(2, 0, &[("b", Some(0))]))),
        Some(vec![0])
    );
    assert_eq!(s.locks_held(), 2);
}

#[test]
fn an_abort_releases_its_own_attempt_and_refuses_its_late_locks() {
    let mut s = primary();
    granted(ask(&mut s, CLIENT, lock(1, 0, &[("a", None)]))).unwrap();
    let abort = |txn, attempt| {
        OccMessage::Abort(Abort {
            txn,
            attempt,
            keys: vec![b("a")],
        })
    };
    // Another client's or transaction's abort leaves the lock alone.
    assert!(ask(&mut s, OTHER, abort(1, 0)).is_some());
    assert!(ask(&mut s, CLIENT, abort(2, 0)).is_some());
    assert!(s.lock_owner(b"a").is_some());
    assert!(matches!(
        ask(&mut s, CLIENT, abort(1, 0)),
        Some(OccMessage::AbortReply(_))
    ));
    assert_eq!(s.locks_held(), 0);
    // A copy of the aborted attempt's lock arriving late must not take the key again; the
    // next attempt may.
    assert_eq!(granted(ask(&mut s, CLIENT, lock(1, 0, &[("a", None)]))), None);
    assert!(granted(ask(&mut s, CLIENT, lock(1, 1, &[("a", None)]))).is_some());
    // An old attempt's abort arriving after the next attempt locked does not release it.
    ask(&mut s, CLIENT, abort(1, 0));
    assert_eq!(
        s.lock_owner(b"a"),
        Some(LockOwner {
            client: CLIENT,
            txn: 1,
            attempt: 1
        })
    );
}

#[test]
fn a_read_and_a_validation_see_other_transactions_locks() {
    let mut s = primary();
    granted(ask(&mut s, CLIENT, lock(1, 0, &[("a", None)]))).unwrap();
    let read = OccMessage::Read(Read {
        txn: 5,
        attempt: 0,
        keys: vec![b("a"), b("b")],
    });
    match ask(&mut s, OTHER, read) {
        Some(OccMessage::ReadReply(ReadReply { items, .. })) => {
            assert!(items[0].locked && !items[1].locked);
            assert_eq!((items[0].version, items[1].version), (0, 0));
        }
        other => panic!("{other:?}"),
    }
    let validate = |key: &str| {
        OccMessage::Validate(Validate {
            txn: 5,
            attempt: 0,
            items: vec![(b(key), 0)],
        })
    };
    let ok = |a| matches!(a, Some(OccMessage::ValidateReply(ValidateReply { ok: true, .. })));
    assert!(!ok(ask(&mut s, OTHER, validate("a"))));
    assert!(ok(ask(&mut s, OTHER, validate("b"))));
    commit_status(ask(&mut s, CLIENT, put(1, "a", "v", 0)));
    assert!(ok(ask(&mut s, OTHER, validate("b"))));
    assert!(!ok(ask(&mut s, OTHER, validate("a"))), "a changed key validated");
}

#[test]
fn a_repeated_commit_is_answered_from_memory_and_applied_once() {
    let mut s = primary();
    granted(ask(&mut s, CLIENT, lock(1, 0, &[("n", None)]))).unwrap();
    let incr = OccMessage::Commit(Commit {
        txn: 1,
        attempt: 0,
        ops: vec![
            (
                0,
                Op::IncrBy {
                    key: b("n"),
                    delta: 5,
                },
            ),
            (1, Op::Get { key: b("n") }),
        ],
        bases: vec![(b("n"), 0)],
    });
    let first = commit_status(ask(&mut s, CLIENT, incr.clone()));
    let expected = vec![(0, OpResult::Integer(5)), (1, OpResult::Value(Some(b("5"))))];
    assert_eq!(first, (CommitStatus::Applied, expected.clone()));
    assert_eq!(s.locks_held(), 0, "the commit kept its lock");
    assert_eq!(
        commit_status(ask(&mut s, CLIENT, incr)),
        (CommitStatus::Duplicate, expected)
    );
    assert_eq!(s.version(b"n"), 1);
    // A late lock of the committed transaction is refused.
    assert_eq!(granted(ask(&mut s, CLIENT, lock(1, 0, &[("n", None)]))), None);
}

#[test]
fn a_backup_applies_commits_of_one_key_in_version_order() {
    let mut backup = OccServer::new(OccServerConfig::new(0, 1));
    assert!(
        ask(&mut backup, OTHER, put(7, "k", "second", 1)).is_none(),
        "applied before its base"
    );
    assert_eq!(backup.parked_commits(), 1);
    assert!(
        ask(&mut backup, OTHER, put(7, "k", "second", 1)).is_none(),
        "parked twice"
    );
    assert_eq!(backup.parked_commits(), 1);
    backup.on_delivery(Service::BestEffort, 0, CLIENT, &put(3, "k", "first", 0).encode());
    backup.invariants();
    let answers: Vec<u32> = std::iter::from_fn(|| backup.pop_send())
        .map(|(dst, _)| dst)
        .collect();
    assert_eq!(answers, vec![CLIENT, OTHER]);
    assert_eq!(backup.version(b"k"), 2);
    let mut expected = ShardState::default();
    expected.apply(&Op::Put {
        key: b("k"),
        value: b("second"),
    });
    assert_eq!(backup.state().digest(), expected.digest());
}

#[test]
fn a_full_park_drops_and_a_mismatched_commit_is_refused() {
    let mut config = OccServerConfig::new(0, 1);
    config.parked_commits_max = 1;
    let mut backup = OccServer::new(config);
    assert!(ask(&mut backup, CLIENT, put(1, "k", "v", 3)).is_none());
    assert!(ask(&mut backup, CLIENT, put(2, "k", "v", 4)).is_none());
    assert_eq!(backup.parked_commits(), 1);
    assert_eq!(backup.counters().parked_dropped, 1);
    let mismatched = OccMessage::Commit(Commit {
        txn: 9,
        attempt: 0,
        ops: vec![(0, Op::Del { key: b("a") })],
        bases: vec![(b("b"), 0)],
    });
    assert_eq!(
        commit_status(ask(&mut backup, CLIENT, mismatched)).0,
        CommitStatus::Refused
    );
    assert!(backup.state().is_empty());
}

#[test]
fn a_backup_serves_no_reads_locks_or_validations() {
    let mut backup = OccServer::new(OccServerConfig::new(0, 2));
    assert!(ask(&mut backup, CLIENT, lock(1, 0, &[("a", None)])).is_none());
    let read = OccMessage::Read(Read {
        txn: 1,
        attempt: 0,
        keys: vec![b("a")],
    });
    assert!(ask(&mut backup, CLIENT, read).is_none());
    assert_eq!(backup.counters().misdirected, 2);
    backup.on_delivery(Service::BestEffort, 0, CLIENT, &[1, 2, 3]);
    assert_eq!(backup.counters().malformed, 1);
}
