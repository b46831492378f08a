//! Serializability on random histories that are serial by construction: transactions run one
//! after the other on one register per key, each gets an increasing ts and an interval around
//! its serialization point. Such histories pass; changing one committed read to another value
//! that a committed or failed transaction wrote to that key makes the replay fail.

use std::collections::HashMap;

use onepipe_check::{
    HistoryRecord, OpKind, Outcome, SerializabilityMethod, SerializabilityVerdict, TxnViolation,
    check_serializable,
};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Ok,
    Fail,
    /// Outcome unknown, took effect.
    UnknownApplied,
    /// Outcome unknown, never took effect.
    UnknownLost,
}

#[derive(Clone, Debug)]
struct TxnSpec {
    /// (op, key): 0 read, 1 write, 2 insert, 3 delete, 4 cas.
    ops: Vec<(u8, u32)>,
    fate: Fate,
    /// A one-operation transaction written without `txn`.
    single: bool,
    before_ns: u64,
    after_ns: u64,
}

/// Time between two serialization points; intervals reach up to 2.5 of them either side, so
/// neighbours overlap.
const SPACING_NS: u64 = 100;

fn txn_spec() -> impl Strategy<Value = TxnSpec> {
    let fate = prop_oneof![
        6 => Just(Fate::Ok),
        1 => Just(Fate::Fail),
        1 => Just(Fate::UnknownApplied),
        1 => Just(Fate::UnknownLost),
    ];
    (
        prop::collection::vec((0u8..5, 0u32..3), 1..5),
        fate,
        any::<bool>(),
        0..250u64,
        0..250u64,
    )
        .prop_map(|(ops, fate, single, before_ns, after_ns)| TxnSpec {
            ops,
            fate,
            single,
            before_ns,
            after_ns,
        })
}

/// A generated history and, per record, for a committed plain read whose value no transaction
/// of unknown outcome wrote: `Some(key)`.
struct Serial {
    records: Vec<HistoryRecord>,
    mutable_reads: Vec<Option<String>>,
    /// Values written to each key by committed or failed transactions.
    certain_values: HashMap<String, Vec<String>>,
}

fn execute(specs: &[TxnSpec]) -> Serial {
    let mut model: HashMap<String, Option<String>> = HashMap::new();
    // Which fate wrote each value.
    let mut writer_fate: HashMap<String, Fate> = HashMap::new();
    let mut serial = Serial {
        records: Vec::new(),
        mutable_reads: Vec::new(),
        certain_values: HashMap::new(),
    };
    for (i, spec) in specs.iter().enumerate() {
        let i = i as u64;
        let point_ns = SPACING_NS * (i + 3);
        let applies = matches!(spec.fate, Fate::Ok | Fate::UnknownApplied);
        let unknown = matches!(spec.fate, Fate::UnknownApplied | Fate::UnknownLost);
        let outcome = match spec.fate {
            Fate::Ok => Outcome::Ok,
            Fate::Fail => Outcome::Fail,
            Fate::UnknownApplied | Fate::UnknownLost => Outcome::Unknown,
        };
        // A transaction's own writes are visible to it even when they never take effect.
        let mut own: HashMap<String, Option<String>> = HashMap::new();
        for (j, &(op, key)) in spec.ops.iter().enumerate() {
            let key = format!("k{key}");
            let fresh = format!("t{i}.{j}");
            let current = own.get(&key).or_else(|| model.get(&key)).cloned().flatten();
            // A delete of unknown outcome cannot be observed, so it would leave reads of
            // absent undecided: such transactions write instead.
            let op = match op {
                3 if unknown => 1,
                op => op,
            };
            let (kind, value, expect) = match op {
                0 => (OpKind::Read, current.clone(), None),
                1 => (OpKind::Write, Some(fresh), None),
                2 => (OpKind::Insert, Some(fresh), None),
                3 => (OpKind::Delete, None, None),
                _ => (OpKind::Cas, Some(fresh), current.clone()),
            };
            if kind != OpKind::Read {
                own.insert(key.clone(), value.clone());
                if let Some(v) = &value {
                    writer_fate.insert(v.clone(), spec.fate);
                    if !unknown {
                        serial
                            .certain_values
                            .entry(key.clone())
                            .or_default()
                            .push(v.clone());
                    }
                }
            }
            let read_of_certain = current
                .as_ref()
                .is_none_or(|v| !matches!(writer_fate[v], Fate::UnknownApplied));
            let mutable = kind == OpKind::Read && spec.fate == Fate::Ok && read_of_certain;
            serial.mutable_reads.push(mutable.then(|| key.clone()));
            serial.records.push(HistoryRecord {
                client: i,
                op: kind,
                key,
                value,
                expect: if kind == OpKind::Cas { expect } else { None },
                outcome,
                call_ns: point_ns - spec.before_ns,
                return_ns: point_ns + spec.after_ns,
                txn: (!spec.single || spec.ops.len() > 1).then_some(i),
                ts: Some(i + 1),
            });
        }
        if applies {
            model.extend(own);
        }
    }
    serial
}

fn strip_ts(records: &[HistoryRecord]) -> Vec<HistoryRecord> {
    records
        .iter()
        .cloned()
        .map(|r| HistoryRecord { ts: None, ..r })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn serial_executions_pass(specs in prop::collection::vec(txn_spec(), 0..30)) {
        let serial = execute(&specs);
        let report = check_serializable(&serial.records).unwrap();
        prop_assert!(report.ok(), "{}", report);
        let applied = specs.iter().filter(|s| matches!(s.fate, Fate::Ok | Fate::UnknownApplied)).count();
        prop_assert!(report.applied <= applied as u64);
        // Without the claimed order, the graph finds nothing wrong either.
        let report = check_serializable(&strip_ts(&serial.records)).unwrap();
        prop_assert_eq!(report.violations_total, 0, "{}", report);
    }

    #[test]
    fn changing_one_committed_read_fails_the_replay(
        specs in prop::collection::vec(txn_spec(), 1..30),
        which in any::<prop::sample::Index>(),
        to in any::<prop::sample::Index>(),
    ) {
        let mut serial = execute(&specs);
        let reads: Vec<usize> = (0..serial.records.len()).filter(|&r| serial.mutable_reads[r].is_some()).collect();
        prop_assume!(!reads.is_empty());
        let r = reads[which.index(reads.len())];
        let key = serial.mutable_reads[r].clone().unwrap();
        let original = serial.records[r].value.clone();
        let others: Vec<&String> = serial
            .certain_values
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|v| Some(*v) != original.as_ref())
            .collect();
        prop_assume!(!others.is_empty());
        serial.records[r].value = Some(others[to.index(others.len())].clone());
        let report = check_serializable(&serial.records).unwrap();
        prop_assert_eq!(report.verdict, SerializabilityVerdict::NotSerializable, "{}", report);
        let reader_named = report.violations.iter().any(|v| match v {
            TxnViolation::ReplayMismatch { reader, .. }
            | TxnViolation::AbortedRead { reader, .. }
            | TxnViolation::IntermediateRead { reader, .. }
            | TxnViolation::FutureRead { reader, .. }
            | TxnViolation::InternalRead { reader, .. }
            | TxnViolation::GarbageRead { reader, .. } => reader.client == serial.records[r].client,
            TxnViolation::RealTime { .. } | TxnViolation::Cycle { .. } => false,
        });
        prop_assert!(reader_named, "{}", report);
    }
}

/// 200,000 transactions over 1,000 keys, drawn with a fixed seed: large enough that anything
/// worse than n log n would show, small enough for a debug build.
#[test]
fn a_large_serial_execution_passes_both_ways() {
    const TRANSACTIONS: usize = 200_000;
    let mut rng = fastrand::Rng::with_seed(45);
    let specs: Vec<TxnSpec> = (0..TRANSACTIONS)
        .map(|_| TxnSpec {
            ops: (0..rng.usize(1..5))
                .map(|_| (rng.u8(0..5), rng.u32(0..1000)))
                .collect(),
            fate: match rng.u8(0..20) {
                0 => Fate::Fail,
                1 => Fate::UnknownApplied,
                2 => Fate::UnknownLost,
                _ => Fate::Ok,
            },
            single: rng.bool(),
            before_ns: rng.u64(0..250),
            after_ns: rng.u64(0..250),
        })
        .collect();
    let serial = execute(&specs);
    let report = check_serializable(&serial.records).unwrap();
    assert!(report.ok(), "{report}");
    assert_eq!(report.transactions, TRANSACTIONS as u64);
    assert!(report.unknown_applied > 0 && report.failed > 0, "{report}");
    let report = check_serializable(&strip_ts(&serial.records)).unwrap();
    assert_eq!(report.method, SerializabilityMethod::DependencyGraph);
    assert_eq!(report.violations_total, 0, "{report}");
}

/// A small random history, not serial by construction: reads return absent, any value written
/// to the key (by anyone, committed or not), or garbage.
#[derive(Clone, Debug)]
struct RandomTxn {
    /// (op 0 read / 1 write / 2 delete / 3 cas, key, choice of the value read or expected).
    ops: Vec<(u8, u8, usize)>,
    outcome: Outcome,
    call_ns: u64,
    length_ns: u64,
    ts: u64,
}

fn random_txn() -> impl Strategy<Value = RandomTxn> {
    let outcome = prop_oneof![
        6 => Just(Outcome::Ok),
        1 => Just(Outcome::Fail),
        2 => Just(Outcome::Unknown),
    ];
    (
        prop::collection::vec((0u8..4, 0u8..2, any::<usize>()), 1..4),
        outcome,
        0..60u64,
        0..40u64,
        0..8u64,
    )
        .prop_map(|(ops, outcome, call_ns, length_ns, ts)| RandomTxn {
            ops,
            outcome,
            call_ns,
            length_ns,
            ts,
        })
}

fn random_history(txns: &[RandomTxn], with_ts: bool) -> Vec<HistoryRecord> {
    let written = |key: u8| -> Vec<String> {
        let mut values = Vec::new();
        for (i, txn) in txns.iter().enumerate() {
            for (j, &(op, k, _)) in txn.ops.iter().enumerate() {
                if k == key && (op == 1 || op == 3) {
                    values.push(format!("t{i}.{j}"));
                }
            }
        }
        values
    };
    let pick = |key: u8, choice: usize| -> Option<String> {
        let values = written(key);
        match choice % (values.len() + 3) {
            0 | 1 => None,
            c if c - 2 < values.len() => Some(values[c - 2].clone()),
            _ => Some("garbage".to_owned()),
        }
    };
    let mut records = Vec::new();
    for (i, txn) in txns.iter().enumerate() {
        for (j, &(op, key, choice)) in txn.ops.iter().enumerate() {
            let (kind, value, expect) = match op {
                0 => (OpKind::Read, pick(key, choice), None),
                1 => (OpKind::Write, Some(format!("t{i}.{j}")), None),
                2 => (OpKind::Delete, None, None),
                _ => (OpKind::Cas, Some(format!("t{i}.{j}")), pick(key, choice)),
            };
            records.push(HistoryRecord {
                client: i as u64,
                op: kind,
                key: format!("k{key}"),
                value,
                expect,
                outcome: txn.outcome,
                call_ns: txn.call_ns,
                return_ns: txn.call_ns + txn.length_ns,
                txn: Some(0),
                ts: with_ts.then_some(txn.ts),
            });
        }
    }
    records
}

/// Is there an order of the transactions that took effect, respecting real time, that explains
/// every committed read? Transactions of unknown outcome whose values a committed read saw took
/// effect; the others may have (`permissive`) or did not.
fn brute_force(records: &[HistoryRecord], permissive: bool) -> bool {
    let count = records.iter().map(|r| r.client as usize + 1).max().unwrap_or(0);
    let of = |t: usize| records.iter().filter(move |r| r.client == t as u64);
    let outcome = |t: usize| of(t).next().map(|r| r.outcome);
    let observed = |t: usize| {
        of(t).any(|w| {
            w.value.is_some()
                && w.op != OpKind::Read
                && records.iter().any(|r| {
                    r.outcome == Outcome::Ok
                        && r.key == w.key
                        && (r.op == OpKind::Read && r.value == w.value
                            || r.op == OpKind::Cas && r.expect == w.value)
                })
        })
    };
    let must: Vec<usize> = (0..count)
        .filter(|&t| outcome(t) == Some(Outcome::Ok) || outcome(t) == Some(Outcome::Unknown) && observed(t))
        .collect();
    let optional: Vec<usize> = (0..count)
        .filter(|&t| permissive && outcome(t) == Some(Outcome::Unknown) && !observed(t))
        .collect();
    (0..1u32 << optional.len()).any(|mask| {
        let mut applied = must.clone();
        applied.extend(
            optional
                .iter()
                .enumerate()
                .filter(|(b, _)| mask >> b & 1 == 1)
                .map(|(_, &t)| t),
        );
        place(
            records,
            &applied,
            &mut vec![false; applied.len()],
            &HashMap::new(),
        )
    })
}

/// Depth-first search over the next transaction to place.
fn place(
    records: &[HistoryRecord],
    applied: &[usize],
    placed: &mut Vec<bool>,
    model: &HashMap<String, String>,
) -> bool {
    let first = |t: usize| records.iter().find(|r| r.client == t as u64).expect("a record");
    if placed.iter().all(|&p| p) {
        return true;
    }
    for i in 0..applied.len() {
        if placed[i] {
            continue;
        }
        let b = first(applied[i]);
        // Every committed transaction that returned before b was called comes first.
        let blocked = (0..applied.len()).any(|j| {
            let a = first(applied[j]);
            !placed[j] && j != i && a.outcome == Outcome::Ok && a.return_ns < b.call_ns
        });
        if blocked {
            continue;
        }
        let mut next = model.clone();
        let mut explained = true;
        for r in records.iter().filter(|r| r.client == b.client) {
            let committed = r.outcome == Outcome::Ok;
            let current = next.get(&r.key).cloned();
            match r.op {
                OpKind::Read => explained &= !committed || current == r.value,
                OpKind::Cas => explained &= !committed || current == r.expect,
                _ => {}
            }
            match (r.op, &r.value) {
                (OpKind::Read, _) => {}
                (_, Some(value)) => {
                    next.insert(r.key.clone(), value.clone());
                }
                (_, None) => {
                    next.remove(&r.key);
                }
            }
        }
        if explained {
            placed[i] = true;
            let found = place(records, applied, placed, &next);
            placed[i] = false;
            if found {
                return true;
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The graph never reports a violation that no order of any applied set avoids; the replay
    /// passes only histories that have an order.
    #[test]
    fn agrees_with_brute_force(txns in prop::collection::vec(random_txn(), 1..6)) {
        let graph = check_serializable(&random_history(&txns, false)).unwrap();
        if graph.verdict == SerializabilityVerdict::NotSerializable {
            prop_assert!(!brute_force(&random_history(&txns, false), true), "{}", graph);
        }
        let replay = check_serializable(&random_history(&txns, true)).unwrap();
        if replay.verdict == SerializabilityVerdict::Serializable {
            prop_assert!(brute_force(&random_history(&txns, true), false), "{}", replay);
        }
    }
}
