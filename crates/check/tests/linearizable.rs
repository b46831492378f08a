//! Small histories with a known answer, most from the literature: Herlihy and Wing,
//! "Linearizability: a correctness condition for concurrent objects" (TOPLAS 1990), section 2
//! (register histories), and the Knossos / Porcupine register examples.

mod common;

use OpKind::{Cas, Delete, Insert, Read, Write};
use Outcome::{Fail, Ok, Unknown};
use common::{Workload, build, record};
use onepipe_check::{
    HistoryError, HistoryRecord, LinearizabilityConfig, LinearizabilityReport, OpKind, Outcome, RecordError,
    Verdict, check_linearizable, check_linearizable_with,
};

fn verdict(history: &[HistoryRecord]) -> Verdict {
    check(history).verdict
}

fn check(history: &[HistoryRecord]) -> LinearizabilityReport {
    let report = check_linearizable(history).expect("well-formed history");
    assert!(
        report.keys_undecided == 0,
        "decided within the default budget: {report}"
    );
    report
}

fn cas(
    client: u64,
    expect: Option<&str>,
    new: &str,
    outcome: Outcome,
    call_ns: u64,
    return_ns: u64,
) -> HistoryRecord {
    HistoryRecord {
        expect: expect.map(str::to_owned),
        ..record(client, Cas, Some(new), outcome, call_ns, return_ns)
    }
}

#[test]
fn empty_history_is_linearizable() {
    let report = check(&[]);
    assert_eq!(
        (report.verdict, report.keys, report.operations),
        (Verdict::Linearizable, 0, 0)
    );
}

#[test]
fn stale_read_after_a_completed_write_is_not_linearizable() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Read, None, Ok, 20, 30),
    ];
    let report = check(&history);
    assert_eq!(report.verdict, Verdict::NotLinearizable);
    assert_eq!(report.keys_not_linearizable, 1);
    let violation = &report.violations[0];
    assert_eq!(violation.key, "k");
    assert_eq!(violation.blocked, history[1]);
    assert_eq!(violation.window, history);
    assert!(report.to_string().contains("not_linearizable"), "{report}");
}

#[test]
fn a_read_concurrent_with_a_write_may_see_either_value() {
    for seen in [None, Some("v1")] {
        let history = [
            record(1, Write, Some("v1"), Ok, 0, 10),
            record(2, Read, seen, Ok, 5, 15),
        ];
        assert_eq!(verdict(&history), Verdict::Linearizable, "read saw {seen:?}");
    }
}

#[test]
fn intervals_that_touch_count_as_concurrent() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Read, None, Ok, 10, 20),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

/// Herlihy and Wing's new/old inversion: once a read has seen the new value, a later read may
/// not see the old one, even while the write is still running.
#[test]
fn reads_may_not_go_back_to_the_old_value_during_a_write() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 100),
        record(2, Read, Some("v1"), Ok, 10, 20),
        record(3, Read, None, Ok, 30, 40),
    ];
    let report = check(&history);
    assert_eq!(report.verdict, Verdict::NotLinearizable);
    assert_eq!(report.violations[0].blocked, history[2]);
    let mut fixed = history.clone();
    fixed[2].value = Some("v1".to_owned());
    assert_eq!(verdict(&fixed), Verdict::Linearizable);
}

#[test]
fn an_unknown_write_may_appear_later() {
    // The client gave up at 10; the write took effect afterwards.
    let history = [
        record(1, Write, Some("v1"), Unknown, 0, 10),
        record(2, Read, None, Ok, 20, 30),
        record(2, Read, Some("v1"), Ok, 100, 110),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
    // But once seen it stays: a later read of the old value has no linearization.
    let mut back = history.to_vec();
    back.push(record(3, Read, None, Ok, 200, 210));
    assert_eq!(verdict(&back), Verdict::NotLinearizable);
}

#[test]
fn an_unknown_write_may_never_appear() {
    let history = [
        record(1, Write, Some("v1"), Unknown, 0, 10),
        record(2, Read, None, Ok, 20, 30),
        record(2, Read, None, Ok, 1_000, 1_010),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

/// Unknown-outcome operations may build on each other: a delete, then a cas from absent.
#[test]
fn unknown_operations_may_chain() {
    let history = [
        record(1, Write, Some("v0"), Ok, 0, 0),
        record(1, Delete, None, Unknown, 0, 0),
        cas(1, None, "v1", Unknown, 0, 0),
        record(1, Read, Some("v1"), Ok, 1, 1),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
    let mut without_delete = history.to_vec();
    without_delete.remove(1);
    assert_eq!(verdict(&without_delete), Verdict::NotLinearizable);
}

#[test]
fn an_unknown_write_takes_effect_only_after_its_call() {
    let history = [
        record(2, Read, Some("v1"), Ok, 0, 10),
        record(1, Write, Some("v1"), Unknown, 50, 60),
    ];
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
}

#[test]
fn a_failed_write_takes_no_effect() {
    let history = [
        record(1, Write, Some("v1"), Fail, 0, 10),
        record(2, Read, Some("v1"), Ok, 20, 30),
    ];
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
}

#[test]
fn reads_that_did_not_succeed_constrain_nothing() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Read, Some("nonsense"), Fail, 20, 30),
        record(3, Read, Some("garbage"), Unknown, 20, 30),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

#[test]
fn a_read_of_a_value_never_written_is_not_linearizable() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Read, Some("v2"), Ok, 5, 30),
    ];
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
}

#[test]
fn a_failed_cas_that_contradicts_the_only_possible_state_is_not_linearizable() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        cas(2, Some("v1"), "v2", Fail, 20, 30),
    ];
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
    // With another write running, the compare may have met the other value.
    let mut concurrent = history.to_vec();
    concurrent.push(record(3, Write, Some("v3"), Ok, 15, 40));
    assert_eq!(verdict(&concurrent), Verdict::Linearizable);
    // Or a write whose outcome is unknown may have come first.
    let mut unknown = history.to_vec();
    unknown.push(record(3, Write, Some("v3"), Unknown, 12, 14));
    assert_eq!(verdict(&unknown), Verdict::Linearizable);
}

#[test]
fn a_failed_cas_expecting_absent_needs_a_value() {
    let history = [cas(1, None, "v1", Fail, 0, 10)];
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
}

#[test]
fn cas_chains_follow_the_register() {
    let history = [
        cas(1, None, "v1", Ok, 0, 10),
        cas(2, Some("v1"), "v2", Ok, 20, 30),
        record(3, Read, Some("v2"), Ok, 40, 50),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
    let mut second_wins = history.clone();
    second_wins[1] = cas(2, None, "v2", Ok, 20, 30);
    assert_eq!(verdict(&second_wins), Verdict::NotLinearizable);
}

#[test]
fn delete_then_read_null() {
    let history = [
        record(1, Insert, Some("v1"), Ok, 0, 10),
        record(1, Delete, None, Ok, 20, 30),
        record(2, Read, None, Ok, 40, 50),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
    let mut stale = history.clone();
    stale[2].value = Some("v1".to_owned());
    assert_eq!(verdict(&stale), Verdict::NotLinearizable);
}

#[test]
fn keys_are_checked_apart() {
    let on = |key: &str, mut r: HistoryRecord| {
        r.key = key.to_owned();
        r
    };
    let history = [
        on("a", record(1, Write, Some("v1"), Ok, 0, 10)),
        on("b", record(2, Write, Some("v1"), Ok, 0, 10)),
        // Fine for "a" alone; stale for "b".
        on("a", record(3, Read, Some("v1"), Ok, 20, 30)),
        on("b", record(4, Read, None, Ok, 20, 30)),
    ];
    let report = check(&history);
    assert_eq!(report.verdict, Verdict::NotLinearizable);
    assert_eq!(
        (report.keys, report.operations, report.keys_not_linearizable),
        (2, 4, 1)
    );
    assert_eq!(report.violations.len(), 1);
    assert_eq!(report.violations[0].key, "b");
}

#[test]
fn records_may_come_in_any_order() {
    let mut history = build(
        &Workload {
            seed: 7,
            clients: 4,
            ops: 200,
            keys: 3,
            write_one_in: 3,
            unknown_one_in: 10,
            values: 8,
            cas: true,
            spread_ns: 50,
        }
        .specs(),
    );
    assert_eq!(verdict(&history), Verdict::Linearizable);
    history.reverse();
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

#[test]
fn an_exhausted_budget_is_unknown_not_a_verdict() {
    let history = build(
        &Workload {
            seed: 3,
            clients: 8,
            ops: 300,
            keys: 1,
            write_one_in: 2,
            unknown_one_in: 0,
            values: 8,
            cas: true,
            spread_ns: 100,
        }
        .specs(),
    );
    let tight = LinearizabilityConfig {
        steps_per_key_max: 10,
        ..LinearizabilityConfig::default()
    };
    let report = check_linearizable_with(&history, &tight).unwrap();
    assert_eq!(report.verdict, Verdict::Unknown);
    assert_eq!(
        (report.keys_undecided, report.undecided_keys.as_slice()),
        (1, ["k0".to_owned()].as_slice())
    );
    assert_eq!(report.steps, 10);
    let no_memory = LinearizabilityConfig {
        cache_bytes_per_key_max: 0,
        ..LinearizabilityConfig::default()
    };
    let report = check_linearizable_with(&history, &no_memory).unwrap();
    assert_eq!(report.verdict, Verdict::Unknown);
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

#[test]
fn a_violation_beats_an_undecided_key() {
    // "k": the cas cannot fail on an absent key; "other" takes more steps to pass.
    let mut history = vec![cas(0, None, "v1", Fail, 0, 10)];
    let fail_steps = check(&history).steps;
    for client in 1..=4 {
        let mut write = record(client, Write, Some("v1"), Ok, client * 100, client * 100 + 10);
        write.key = "other".to_owned();
        history.push(write);
    }
    assert!(check(&history).steps > 2 * fail_steps);
    let tight = LinearizabilityConfig {
        steps_per_key_max: fail_steps,
        ..LinearizabilityConfig::default()
    };
    let report = check_linearizable_with(&history, &tight).unwrap();
    assert_eq!((report.keys_not_linearizable, report.keys_undecided), (1, 1));
    assert_eq!(report.verdict, Verdict::NotLinearizable);
    assert_eq!(verdict(&history), Verdict::NotLinearizable);
}

#[test]
fn a_client_with_two_outstanding_operations_is_an_error() {
    let history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Read, None, Ok, 0, 10),
        record(1, Read, Some("v1"), Ok, 5, 20),
    ];
    match check_linearizable(&history) {
        Err(HistoryError::ClientOverlap {
            client: 1,
            first: 0,
            second: 2,
        }) => {}
        other => panic!("expected a client overlap, got {other:?}"),
    }
    // Back to back is fine, and so is a call right when an unknown-outcome operation gave up.
    let history = [
        record(1, Write, Some("v1"), Unknown, 0, 10),
        record(1, Read, Some("v1"), Ok, 10, 20),
    ];
    assert_eq!(verdict(&history), Verdict::Linearizable);
}

#[test]
fn a_malformed_record_is_an_error() {
    let mut history = [
        record(1, Write, Some("v1"), Ok, 0, 10),
        record(2, Write, None, Ok, 0, 10),
    ];
    assert!(matches!(
        check_linearizable(&history),
        Err(HistoryError::Record {
            index: 1,
            error: RecordError::MissingValue(Write)
        })
    ));
    history[1] = record(2, Read, None, Ok, 20, 10);
    assert!(matches!(
        check_linearizable(&history),
        Err(HistoryError::Record {
            index: 1,
            error: RecordError::ReturnBeforeCall {
                call_ns: 20,
                return_ns: 10
            }
        })
    ));
}

/// Many lost writes whose values nobody reads, next to a failed cas (which keeps them all in
/// the search): the search tries the operations with a known outcome first, so it does not
/// explore the subsets of the lost writes.
#[test]
fn lost_writes_do_not_blow_up_the_search() {
    let mut history = vec![record(0, Write, Some("v"), Ok, 0, 10)];
    for client in 1..=40 {
        let value = format!("lost{client}");
        history.push(record(client, Write, Some(&value), Unknown, 20, 30));
    }
    for i in 0..200 {
        history.push(record(100 + i % 8, Read, Some("v"), Ok, 40 + i * 10, 45 + i * 10));
    }
    history.push(cas(200, Some("x"), "y", Fail, 5_000, 5_010));
    let report = check(&history);
    assert_eq!(report.verdict, Verdict::Linearizable);
    assert!(report.steps < 10_000, "{} steps", report.steps);
}
