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
