//! Histories of real registers pass; one read changed to a value never written fails, and the
//! checker blames that read.

mod common;

use std::collections::HashSet;

use common::{Fate, Spec, Workload, build};
use onepipe_check::{
    HistoryRecord, LinearizabilityConfig, OpKind, Outcome, Verdict, check_linearizable,
    check_linearizable_with,
};
use proptest::prelude::*;

fn op_kind() -> impl Strategy<Value = OpKind> {
    prop_oneof![
        4 => Just(OpKind::Read),
        2 => Just(OpKind::Write),
        1 => Just(OpKind::Insert),
        2 => Just(OpKind::Cas),
        1 => Just(OpKind::Delete),
    ]
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        6 => Just(Fate::Ok),
        1 => Just(Fate::UnknownApplied),
        1 => Just(Fate::UnknownLost),
        1 => Just(Fate::Fail),
    ]
}

fn spec(clients: u64, keys: u32) -> impl Strategy<Value = Spec> {
    let times = (0u64..30, 0u64..30, 0u64..30);
    (
        0..clients,
        0..keys,
        op_kind(),
        0u32..4,
        prop::option::of(0u32..4),
        times,
        fate(),
    )
        .prop_map(
            |(client, key, op, value, expect, (think_ns, effect_ns, return_ns), fate)| Spec {
                client,
                key,
                op,
                value,
                expect,
                think_ns,
                effect_ns,
                return_ns,
                fate,
            },
        )
}

fn history() -> impl Strategy<Value = Vec<HistoryRecord>> {
    (1u64..=6, 1u32..=3)
        .prop_flat_map(|(clients, keys)| prop::collection::vec(spec(clients, keys), 1..40))
        .prop_map(|specs| build(&specs))
}

/// Sets the value of one successful read (chosen by `pick`) to one never written; its index,
/// or `None` without such a read.
fn corrupt_a_read(history: &mut [HistoryRecord], pick: usize) -> Option<usize> {
    let reads: Vec<usize> = (0..history.len())
        .filter(|&i| history[i].op == OpKind::Read && history[i].outcome == Outcome::Ok)
        .collect();
    let i = *reads.get(pick % reads.len().max(1))?;
    history[i].value = Some("never-written".to_owned());
    Some(i)
}

/// Larger histories from the seeded workload: more clients, more overlap, few or many values.
fn workload() -> impl Strategy<Value = Workload> {
    let shape = (
        2u64..=16,
        20usize..=300,
        1u32..=3,
        1u32..=5,
        0u32..=10,
        1u32..=10,
        any::<bool>(),
    );
    (any::<u64>(), shape).prop_map(
        |(seed, (clients, ops, keys, write_one_in, unknown_one_in, values, cas))| Workload {
            seed,
            clients,
            ops,
            keys,
            write_one_in,
            unknown_one_in,
            values,
            cas,
            spread_ns: 100,
        },
    )
}

/// Any records at all (one client each, so that they are well formed): small keys, values and
/// times so that operations overlap and values repeat.
fn arbitrary_history(records_max: usize, keys: u8) -> impl Strategy<Value = Vec<HistoryRecord>> {
    let op = prop_oneof![
        Just(OpKind::Read),
        Just(OpKind::Write),
        Just(OpKind::Insert),
        Just(OpKind::Cas),
        Just(OpKind::Delete)
    ];
    let outcome = prop_oneof![Just(Outcome::Ok), Just(Outcome::Fail), Just(Outcome::Unknown)];
    let value = prop::option::of(0u8..4);
    let record = (op, 0..keys, value.clone(), value, outcome, 0u64..60, 0u64..30);
    prop::collection::vec(record, 0..records_max).prop_map(|records| {
        (0u64..)
            .zip(records)
            .map(
                |(client, (op, key, value, expect, outcome, call_ns, length_ns))| HistoryRecord {
                    client,
                    op,
                    key: format!("k{key}"),
                    value: match op {
                        OpKind::Delete => None,
                        OpKind::Read => value.map(|v| format!("v{v}")),
                        _ => Some(format!("v{}", value.unwrap_or(0))),
                    },
                    expect: if op == OpKind::Cas {
                        expect.map(|v| format!("v{v}"))
                    } else {
                        None
                    },
                    outcome,
                    call_ns,
                    return_ns: call_ns + length_ns,
                    txn: None,
                    ts: None,
                },
            )
            .collect()
    })
}

/// The definition, by brute force: some order of the operations of each key that keeps their
/// real-time order obeys the register (operations of unknown outcome optional, reads that did
/// not succeed and failed writes left out). Exponential (with a plain memo of the failed
/// (done, state) pairs, none of the checker's reductions): for a few operations per key only.
fn linearizable_by_brute_force(history: &[HistoryRecord]) -> bool {
    let mut keys: Vec<&str> = history.iter().map(|r| r.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter().all(|key| {
        let ops: Vec<&HistoryRecord> = history
            .iter()
            .filter(|r| r.key == key)
            .filter(|r| match (r.op, r.outcome) {
                (OpKind::Read, outcome) => outcome == Outcome::Ok,
                (OpKind::Cas, _) => true,
                (_, outcome) => outcome != Outcome::Fail,
            })
            .collect();
        orders_exist(&ops, &mut vec![false; ops.len()], None, &mut HashSet::new())
    })
}

type Failed<'a> = HashSet<(Vec<bool>, Option<&'a str>)>;

fn orders_exist<'a>(
    ops: &[&'a HistoryRecord],
    done: &mut Vec<bool>,
    state: Option<&'a str>,
    failed: &mut Failed<'a>,
) -> bool {
    let required_left = |i: usize, done: &[bool]| !done[i] && ops[i].outcome != Outcome::Unknown;
    if (0..ops.len()).all(|i| !required_left(i, done)) {
        return true;
    }
    if failed.contains(&(done.clone(), state)) {
        return false;
    }
    for i in 0..ops.len() {
        let op = ops[i];
        // Nothing left that must come first: a required operation that returned before this call.
        let may_come = !done[i]
            && (0..ops.len()).all(|j| j == i || !required_left(j, done) || ops[j].return_ns >= op.call_ns);
        if !may_come {
            continue;
        }
        let next = match (op.op, op.outcome) {
            (OpKind::Read, _) => (op.value.as_deref() == state).then_some(state),
            (OpKind::Write | OpKind::Insert, _) => Some(op.value.as_deref()),
            (OpKind::Delete, _) => Some(None),
            (OpKind::Cas, Outcome::Fail) => (op.expect.as_deref() != state).then_some(state),
            (OpKind::Cas, _) => (op.expect.as_deref() == state).then_some(op.value.as_deref()),
        };
        let Some(next) = next else { continue };
        done[i] = true;
        let found = orders_exist(ops, done, next, failed);
        done[i] = false;
        if found {
            return true;
        }
    }
    failed.insert((done.clone(), state));
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// On small histories of any kind, the check agrees with the definition, both ways.
    #[test]
    fn agrees_with_brute_force(history in arbitrary_history(16, 2)) {
        let report = check_linearizable(&history).unwrap();
        prop_assert_eq!(report.keys_undecided, 0);
        prop_assert_eq!(report.ok(), linearizable_by_brute_force(&history), "{}", report);
    }

    /// Whatever the history, the check ends with a verdict within its budget, and the
    /// verdict does not depend on the order of the records.
    #[test]
    fn any_history_gets_a_verdict(mut history in arbitrary_history(60, 3)) {
        let config = LinearizabilityConfig { steps_per_key_max: 20_000, ..LinearizabilityConfig::default() };
        let report = check_linearizable_with(&history, &config).unwrap();
        prop_assert!(report.steps <= 20_000 * report.keys * 2, "{}", report.steps);
        for violation in &report.violations {
            prop_assert!(violation.window.contains(&violation.blocked));
        }
        history.reverse();
        let reversed = check_linearizable_with(&history, &config).unwrap();
        if report.keys_undecided == 0 && reversed.keys_undecided == 0 {
            prop_assert_eq!(report.verdict, reversed.verdict);
        }
    }

    #[test]
    fn busier_register_histories_are_linearizable(workload in workload(), pick in any::<usize>()) {
        let mut history = build(&workload.specs());
        let report = check_linearizable(&history).unwrap();
        prop_assert_eq!(report.verdict, Verdict::Linearizable, "{}", report);
        let Some(i) = corrupt_a_read(&mut history, pick) else {
            return Ok(());
        };
        let report = check_linearizable(&history).unwrap();
        prop_assert_eq!(report.verdict, Verdict::NotLinearizable, "{}", report);
        prop_assert_eq!(&report.violations[0].blocked, &history[i]);
    }

    #[test]
    fn register_histories_are_linearizable(history in history()) {
        let report = check_linearizable(&history).unwrap();
        prop_assert_eq!(report.verdict, Verdict::Linearizable, "{}", report);
    }

    #[test]
    fn a_read_of_a_value_never_written_is_caught(mut history in history(), pick in any::<usize>()) {
        let Some(i) = corrupt_a_read(&mut history, pick) else {
            return Ok(());
        };
        let report = check_linearizable(&history).unwrap();
        prop_assert_eq!(report.verdict, Verdict::NotLinearizable, "{}", report);
        prop_assert_eq!(report.keys_not_linearizable, 1);
        let violation = &report.violations[0];
        prop_assert_eq!(&violation.key, &history[i].key);
        prop_assert_eq!(&violation.blocked, &history[i]);
        prop_assert!(violation.window.contains(&history[i]));
    }
}

/// A hot key: 1,000 operations of 64 clients whose intervals all overlap (up to 64 at once),
/// one in twenty of unknown outcome; decided within the default budget, and a corrupted read
/// is blamed. One in ten a write, insert, delete or cas of 8 values; or one in three a write,
/// insert or delete of (nearly) distinct values.
#[test]
fn a_hot_key_of_64_clients_is_decided() {
    let workloads = [(10, 8, true), (3, 1_000_000, false)];
    for (seed, (write_one_in, values, cas)) in (1..=4).zip(workloads.into_iter().cycle()) {
        let workload = Workload {
            seed,
            clients: 64,
            ops: 1_000,
            keys: 1,
            write_one_in,
            unknown_one_in: 20,
            values,
            cas,
            spread_ns: 1_000,
        };
        let mut history = build(&workload.specs());
        let report = check_linearizable(&history).unwrap();
        assert_eq!(report.verdict, Verdict::Linearizable, "{workload:?}: {report}");
        let i = corrupt_a_read(&mut history, seed as usize * 1_000_003).unwrap();
        let report = check_linearizable(&history).unwrap();
        assert_eq!(report.verdict, Verdict::NotLinearizable, "{workload:?}: {report}");
        assert_eq!(report.violations[0].blocked, history[i], "{workload:?}");
    }
}

/// The scale the demo produces: 1 M operations over 20,000 keys from 64 clients, 1% writes.
/// Prints the time taken as JSON; run with
/// `cargo test --release -p onepipe-check --test linearizable_prop -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it in release"]
#[allow(clippy::disallowed_methods)] // measures its own wall-clock time
fn scale_one_million_operations() {
    let workload = Workload {
        seed: 1,
        clients: 64,
        ops: 1_000_000,
        keys: 20_000,
        write_one_in: 100,
        unknown_one_in: 1_000,
        values: 1_000_000,
        cas: true,
        spread_ns: 20_000,
    };
    let history = build(&workload.specs());
    let start = std::time::Instant::now();
    let report = check_linearizable(&history).unwrap();
    let check_s = start.elapsed().as_secs_f64();
    let mut text = Vec::new();
    for record in &history {
        onepipe_check::write_record(&mut text, record).unwrap();
    }
    let start = std::time::Instant::now();
    let read = onepipe_check::read_history(text.as_slice()).unwrap();
    let read_s = start.elapsed().as_secs_f64();
    assert_eq!(read.len(), history.len());
    assert_eq!(report.verdict, Verdict::Linearizable, "{report}");
    println!(
        "{{\"operations\":{},\"keys\":{},\"steps\":{},\"check_s\":{check_s:.3},\"read_s\":{read_s:.3},\"bytes\":{}}}",
        report.operations,
        report.keys,
        report.steps,
        text.len()
    );
}
