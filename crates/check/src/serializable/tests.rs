//! Hand-written histories, one per rule; the property tests are in tests/serializable_prop.rs.

use super::*;
use crate::history::OpKind;

/// A transaction to write down as records.
#[derive(Clone)]
struct Tx {
    client: u64,
    txn: Option<u64>,
    outcome: Outcome,
    call_ns: u64,
    return_ns: u64,
    ts: Option<u64>,
    ops: Vec<(OpKind, &'static str, Option<&'static str>, Option<&'static str>)>,
}

/// A committed transaction of its own client (`client`), with txn id 1 and no ts.
fn tx(client: u64, call_ns: u64, return_ns: u64) -> Tx {
    Tx {
        client,
        txn: Some(1),
        outcome: Outcome::Ok,
        call_ns,
        return_ns,
        ts: None,
        ops: Vec::new(),
    }
}

impl Tx {
    fn ts(mut self, ts: u64) -> Self {
        self.ts = Some(ts);
        self
    }
    fn outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }
    fn read(mut self, key: &'static str, value: Option<&'static str>) -> Self {
        self.ops.push((OpKind::Read, key, value, None));
        self
    }
    fn write(mut self, key: &'static str, value: &'static str) -> Self {
        self.ops.push((OpKind::Write, key, Some(value), None));
        self
    }
    fn delete(mut self, key: &'static str) -> Self {
        self.ops.push((OpKind::Delete, key, None, None));
        self
    }
    fn cas(mut self, key: &'static str, expect: Option<&'static str>, value: &'static str) -> Self {
        self.ops.push((OpKind::Cas, key, Some(value), expect));
        self
    }
    fn records(&self) -> Vec<HistoryRecord> {
        self.ops
            .iter()
            .map(|&(op, key, value, expect)| HistoryRecord {
                client: self.client,
                op,
                key: key.to_owned(),
                value: value.map(str::to_owned),
                expect: expect.map(str::to_owned),
                outcome: self.outcome,
                call_ns: self.call_ns,
                return_ns: self.return_ns,
                txn: self.txn,
                ts: self.ts,
            })
            .collect()
    }
}

fn history(txs: &[Tx]) -> Vec<HistoryRecord> {
    txs.iter().flat_map(Tx::records).collect()
}

fn check(txs: &[Tx]) -> SerializabilityReport {
    check_serializable(&history(txs)).expect("a well-formed history")
}

fn without_ts(txs: &[Tx]) -> Vec<Tx> {
    txs.iter().cloned().map(|t| Tx { ts: None, ..t }).collect()
}

fn kinds(report: &SerializabilityReport) -> Vec<&'static str> {
    report
        .violations
        .iter()
        .map(|v| match v {
            TxnViolation::GarbageRead { .. } => "garbage",
            TxnViolation::AbortedRead { .. } => "aborted",
            TxnViolation::IntermediateRead { .. } => "intermediate",
            TxnViolation::FutureRead { .. } => "future",
            TxnViolation::InternalRead { .. } => "internal",
            TxnViolation::ReplayMismatch { .. } => "mismatch",
            TxnViolation::RealTime { .. } => "real_time",
            TxnViolation::Cycle { .. } => "cycle",
        })
        .collect()
}

/// The clients of a cycle's transactions, sorted, and its dependencies.
fn cycle(report: &SerializabilityReport) -> (Vec<u64>, Vec<Dependency>) {
    let Some(TxnViolation::Cycle { steps, length }) = report.violations.first() else {
        panic!("expected a cycle: {report}");
    };
    assert_eq!(*length, steps.len());
    let mut clients: Vec<u64> = steps.iter().map(|s| s.txn.client).collect();
    clients.sort_unstable();
    (clients, steps.iter().map(|s| s.dependency).collect())
}

fn serial() -> Vec<Tx> {
    vec![
        tx(1, 0, 10).ts(1).write("x", "x1").write("y", "y1"),
        tx(2, 20, 30)
            .ts(2)
            .read("x", Some("x1"))
            .write("y", "y2")
            .read("y", Some("y2")),
        tx(3, 40, 50).ts(3).cas("y", Some("y2"), "y3").delete("x"),
        tx(4, 60, 70).ts(4).read("x", None).read("y", Some("y3")),
    ]
}

#[test]
fn serial_history_with_timestamps_is_serializable() {
    let report = check(&serial());
    assert!(report.ok(), "{report}");
    assert_eq!(report.method, SerializabilityMethod::TimestampReplay);
    assert_eq!((report.transactions, report.applied, report.failed), (4, 4, 0));
    // Three reads, one internal read and one cas compare.
    assert_eq!(report.reads_checked, 5);
    assert_eq!((report.violations_total, report.reason.as_deref()), (0, None));
}

#[test]
fn serial_history_without_timestamps_is_unknown_without_violations() {
    let report = check(&without_ts(&serial()));
    assert_eq!(report.verdict, SerializabilityVerdict::Unknown, "{report}");
    assert_eq!(report.method, SerializabilityMethod::DependencyGraph);
    assert_eq!(report.reads_checked, 5);
    assert!(report.violations.is_empty());
    assert!(
        report
            .reason
            .as_deref()
            .unwrap()
            .contains("4 applied transactions carry no ts")
    );
}

#[test]
fn concurrent_transactions_on_other_keys_pass_in_any_claimed_order() {
    let txs = [
        tx(1, 0, 30).ts(9).write("x", "x1").read("x", Some("x1")),
        tx(2, 5, 25).ts(3).write("y", "y1"),
        tx(3, 10, 40).ts(4).read("y", Some("y1")).read("z", None),
    ];
    assert!(check(&txs).ok());
    assert!(check(&without_ts(&txs)).violations.is_empty());
}

/// Two transactions each read x and y, both absent, and each writes one of them.
fn write_skew() -> Vec<Tx> {
    vec![
        tx(1, 0, 10)
            .ts(1)
            .read("x", None)
            .read("y", None)
            .write("x", "x1"),
        tx(2, 0, 10)
            .ts(2)
            .read("x", None)
            .read("y", None)
            .write("y", "y1"),
    ]
}

#[test]
fn write_skew_is_a_cycle_of_anti_dependencies() {
    let report = check(&without_ts(&write_skew()));
    assert_eq!(
        report.verdict,
        SerializabilityVerdict::NotSerializable,
        "{report}"
    );
    assert_eq!(
        cycle(&report),
        (vec![1, 2], vec![Dependency::ReadWrite, Dependency::ReadWrite])
    );
}

#[test]
fn write_skew_fails_the_replay() {
    let report = check(&write_skew());
    assert_eq!(report.verdict, SerializabilityVerdict::NotSerializable);
    assert_eq!(kinds(&report), ["mismatch"]);
    let TxnViolation::ReplayMismatch {
        reader,
        key,
        value,
        replayed,
        ..
    } = &report.violations[0]
    else {
        unreachable!()
    };
    assert_eq!((reader.client, key.as_str()), (2, "x"));
    assert_eq!((value.as_deref(), replayed.as_deref()), (None, Some("x1")));
}

/// T1 writes x and y; T2, called after T1 returned, sees x but not y.
fn fractured_read() -> Vec<Tx> {
    vec![
        tx(1, 0, 10).ts(1).write("x", "x1").write("y", "y1"),
        tx(2, 20, 30).ts(2).read("x", Some("x1")).read("y", None),
    ]
}

#[test]
fn fractured_read_is_caught_both_ways() {
    let report = check(&fractured_read());
    assert_eq!(kinds(&report), ["mismatch"]);
    let report = check(&without_ts(&fractured_read()));
    assert_eq!(report.verdict, SerializabilityVerdict::NotSerializable);
    let (clients, dependencies) = cycle(&report);
    assert_eq!(clients, [1, 2]);
    assert!(dependencies.contains(&Dependency::ReadWrite));
}

/// T1 and T2 both read x0 and both overwrite it.
fn lost_update() -> Vec<Tx> {
    vec![
        tx(1, 0, 10).ts(1).write("x", "x0"),
        tx(2, 20, 40).ts(2).read("x", Some("x0")).write("x", "x2"),
        tx(3, 20, 40).ts(3).read("x", Some("x0")).write("x", "x3"),
    ]
}

#[test]
fn lost_update_is_caught_both_ways() {
    assert_eq!(kinds(&check(&lost_update())), ["mismatch"]);
    let report = check(&without_ts(&lost_update()));
    assert_eq!(
        cycle(&report),
        (vec![2, 3], vec![Dependency::ReadWrite, Dependency::ReadWrite])
    );
}

#[test]
fn lost_update_on_the_initial_state_is_a_cycle() {
    let txs = [
        tx(2, 0, 10).cas("x", None, "x2"),
        tx(3, 0, 10).cas("x", None, "x3"),
        tx(4, 0, 10).read("x", None),
    ];
    assert_eq!(cycle(&check(&txs)).0, [2, 3]);
}

#[test]
fn reads_of_aborted_and_garbage_values_are_named() {
    for strip in [false, true] {
        let mut txs = vec![
            tx(1, 0, 10).ts(1).outcome(Outcome::Fail).write("x", "x1"),
            tx(2, 20, 30).ts(2).read("x", Some("x1")),
            tx(3, 20, 30).ts(3).read("y", Some("nobody")),
        ];
        if strip {
            txs = without_ts(&txs);
        }
        let report = check(&txs);
        assert_eq!(report.verdict, SerializabilityVerdict::NotSerializable);
        assert_eq!(kinds(&report), ["aborted", "garbage"], "strip {strip}");
        assert_eq!((report.applied, report.failed), (2, 1));
        let TxnViolation::AbortedRead { reader, writer, .. } = &report.violations[0] else {
            unreachable!()
        };
        assert_eq!(
            (reader.client, writer.client, writer.outcome),
            (2, 1, Outcome::Fail)
        );
    }
}

#[test]
fn reads_that_contradict_their_own_transaction_are_named() {
    for strip in [false, true] {
        let mut txs = vec![
            tx(1, 0, 10).ts(1).write("x", "x1").write("x", "x2"),
            tx(2, 20, 30).ts(2).read("x", Some("x1")),
            tx(3, 40, 50).ts(3).read("y", Some("y3")).write("y", "y3"),
            tx(4, 60, 70).ts(4).write("z", "z4").read("z", None),
        ];
        if strip {
            txs = without_ts(&txs);
        }
        assert_eq!(
            kinds(&check(&txs)),
            ["intermediate", "future", "internal"],
            "strip {strip}"
        );
    }
}

#[test]
fn a_claimed_order_against_real_time_fails_only_when_strict() {
    // T2 reads x absent, consistent with the claimed order, but T1 had returned already.
    let txs = [
        tx(1, 0, 10).ts(5).write("x", "x1"),
        tx(2, 20, 30).ts(3).read("x", None),
    ];
    let report = check(&txs);
    assert_eq!(kinds(&report), ["real_time"]);
    let TxnViolation::RealTime { earlier, later } = &report.violations[0] else {
        unreachable!()
    };
    assert_eq!((earlier.client, later.client), (1, 2));
    let loose = SerializabilityConfig {
        strict: false,
        ..Default::default()
    };
    assert!(check_serializable_with(&history(&txs), &loose).unwrap().ok());
}

#[test]
fn a_stale_read_is_a_real_time_cycle_without_timestamps() {
    let txs = [tx(1, 0, 10).write("x", "x1"), tx(2, 20, 30).read("x", None)];
    let report = check(&txs);
    let (clients, dependencies) = cycle(&report);
    assert_eq!(clients, [1, 2]);
    assert!(dependencies.contains(&Dependency::RealTime));
    let loose = SerializabilityConfig {
        strict: false,
        ..Default::default()
    };
    let report = check_serializable_with(&history(&txs), &loose).unwrap();
    assert_eq!(report.verdict, SerializabilityVerdict::Unknown);
}

#[test]
fn an_unknown_transaction_takes_effect_whole_or_not_at_all() {
    let unknown = tx(1, 0, 10)
        .ts(2)
        .outcome(Outcome::Unknown)
        .write("x", "x1")
        .write("y", "y1");
    // Nobody saw it: taken as not applied, and reads of absent are fine.
    let unseen = [unknown.clone(), tx(2, 20, 30).ts(3).read("y", None)];
    let report = check(&unseen);
    assert!(report.ok(), "{report}");
    assert_eq!((report.applied, report.unknown_applied), (1, 0));
    // Someone saw x1: then y1 took effect too.
    let seen = [
        unknown.clone(),
        tx(2, 20, 30).ts(3).read("x", Some("x1")),
        tx(3, 40, 50).ts(4).read("y", Some("y1")),
    ];
    let report = check(&seen);
    assert!(report.ok(), "{report}");
    assert_eq!((report.applied, report.unknown_applied), (3, 1));
    let half = [
        unknown,
        tx(2, 20, 30).ts(3).read("x", Some("x1")),
        tx(3, 40, 50).ts(4).read("y", None),
    ];
    assert_eq!(kinds(&check(&half)), ["mismatch"]);
    assert_eq!(
        check(&without_ts(&half)).verdict,
        SerializabilityVerdict::NotSerializable
    );
}

#[test]
fn an_unknown_transaction_may_take_effect_after_it_gave_up() {
    // Its return bounds nothing: a transaction called later may come before it.
    let txs = [
        tx(1, 0, 10).ts(9).outcome(Outcome::Unknown).write("x", "x1"),
        tx(2, 20, 30).ts(3).read("x", None),
        tx(3, 40, 50).ts(10).read("x", Some("x1")),
    ];
    assert!(check(&txs).ok(), "{}", check(&txs));
    assert!(check(&without_ts(&txs)).violations.is_empty());
}

#[test]
fn reads_of_transactions_that_did_not_commit_constrain_nothing() {
    let txs = [
        tx(1, 0, 10)
            .ts(1)
            .outcome(Outcome::Unknown)
            .read("x", Some("garbage")),
        tx(2, 0, 10)
            .ts(2)
            .outcome(Outcome::Fail)
            .read("x", Some("x9"))
            .write("y", "y1"),
    ];
    let report = check(&txs);
    assert!(report.ok(), "{report}");
    assert_eq!((report.reads_checked, report.applied), (0, 0));
}

#[test]
fn an_unseen_delete_of_unknown_outcome_makes_a_read_of_absent_undecided() {
    let txs = [
        tx(1, 0, 10).ts(1).write("x", "x1"),
        tx(2, 20, 30).ts(2).outcome(Outcome::Unknown).delete("x"),
        tx(3, 40, 50).ts(3).read("x", None),
    ];
    let report = check(&txs);
    assert_eq!(report.verdict, SerializabilityVerdict::Unknown, "{report}");
    assert!(report.reason.unwrap().contains("1 reads of absent"));
}

#[test]
fn a_value_written_twice_makes_the_verdict_unknown() {
    let txs = [
        tx(1, 0, 10).ts(1).write("x", "same"),
        tx(2, 20, 30).ts(2).write("x", "same"),
        tx(3, 40, 50).ts(3).read("x", Some("nobody")),
    ];
    let report = check(&txs);
    assert_eq!(report.verdict, SerializabilityVerdict::Unknown);
    assert_eq!(report.method, SerializabilityMethod::None);
    assert!(report.violations.is_empty());
    assert!(report.reason.unwrap().contains(r#""x" = "same""#));
}

#[test]
fn violations_beyond_the_maximum_are_counted() {
    let txs: Vec<Tx> = (0..20)
        .map(|c| tx(c, 0, 10).ts(c).read("x", Some("nobody")))
        .collect();
    let config = SerializabilityConfig {
        violations_max: 3,
        ..Default::default()
    };
    let report = check_serializable_with(&history(&txs), &config).unwrap();
    assert_eq!((report.violations.len(), report.violations_total), (3, 20));
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains(r#""verdict":"not_serializable""#), "{json}");
    assert!(json.contains(r#""kind":"garbage_read""#), "{json}");
    assert!(
        report
            .to_string()
            .starts_with("serializability: not_serializable (20 transactions")
    );
}

#[test]
fn records_without_txn_are_transactions_of_their_own() {
    let single = |client, op: Tx| Tx {
        txn: None,
        ..op.ts(client)
    };
    let txs = [
        single(1, tx(1, 0, 10).write("x", "x1")),
        single(2, tx(1, 20, 30).read("x", Some("x1"))),
    ];
    let report = check(&txs);
    assert!(report.ok(), "{report}");
    assert_eq!(report.transactions, 2);
}

#[test]
fn disagreeing_records_of_one_transaction_are_an_error() {
    let mut records = history(&[tx(1, 0, 10).ts(1).write("x", "x1").write("y", "y1")]);
    records[1].ts = Some(2);
    assert!(matches!(
        check_serializable(&records),
        Err(SerializabilityError::TxnMismatch {
            client: 1,
            txn: 1,
            field: TxnField::Ts,
            first: 0,
            second: 1
        })
    ));
    records[1].return_ns = 11;
    assert!(matches!(
        check_serializable(&records),
        Err(SerializabilityError::TxnMismatch {
            field: TxnField::ReturnNs,
            ..
        })
    ));
}

#[test]
fn a_client_with_two_transactions_outstanding_is_an_error() {
    let mut second = tx(1, 5, 15).write("y", "y1");
    second.txn = Some(2);
    let records = history(&[tx(1, 0, 10).write("x", "x1").read("x", None), second]);
    assert!(matches!(
        check_serializable(&records),
        Err(SerializabilityError::History(HistoryError::ClientOverlap {
            client: 1,
            ..
        }))
    ));
}

/// `n` transactions one after the other, each reading x and overwriting it, with ts or not, and
/// when `stale`, a last one that reads the first value again.
fn chain(n: u64, with_ts: bool, stale: bool) -> Vec<HistoryRecord> {
    let mut records = Vec::with_capacity(2 * n as usize + 1);
    let record = |t: u64, op, value: Option<String>| HistoryRecord {
        client: t % 64,
        op,
        key: "x".to_owned(),
        value,
        expect: None,
        outcome: Outcome::Ok,
        call_ns: 10 * t,
        return_ns: 10 * t + 5,
        txn: Some(t),
        ts: with_ts.then_some(t),
    };
    for t in 0..n {
        let previous = t.checked_sub(1).map(|p| format!("v{p}"));
        records.push(record(t, OpKind::Read, previous));
        records.push(record(t, OpKind::Write, Some(format!("v{t}"))));
    }
    if stale {
        records.push(record(n, OpKind::Read, Some("v0".to_owned())));
    }
    records
}

#[test]
fn a_long_chain_is_checked_without_deep_recursion() {
    const TRANSACTIONS: u64 = 200_000;
    let report = check_serializable(&chain(TRANSACTIONS, true, false)).unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.reads_checked, TRANSACTIONS);
    let report = check_serializable(&chain(TRANSACTIONS, false, false)).unwrap();
    assert_eq!(report.verdict, SerializabilityVerdict::Unknown, "{report}");
    assert!(report.violations.is_empty());
    // A stale read at the end closes a cycle through the whole chain's real-time order.
    let report = check_serializable(&chain(TRANSACTIONS, false, true)).unwrap();
    assert_eq!(
        report.verdict,
        SerializabilityVerdict::NotSerializable,
        "{report}"
    );
    assert_eq!(report.violations_total, 1);
    assert_eq!(
        kinds(&check_serializable(&chain(TRANSACTIONS, true, true)).unwrap()),
        ["mismatch"]
    );
}
