//! Histories of real sequential registers, linearizable by construction: every operation that
//! takes effect gets a linearization point inside its interval (after its call, for an unknown
//! outcome), and the registers apply the operations in the order of those points.

#![allow(dead_code)] // each test target uses a part

use std::collections::HashMap;

use onepipe_check::{HistoryRecord, OpKind, Outcome};

/// What happens to an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Takes effect and returns.
    Ok,
    /// The client gives up; the operation takes effect anyway (maybe after the client gave up).
    UnknownApplied,
    /// The client gives up; the operation never takes effect.
    UnknownLost,
    /// Definitely no effect: outcome fail (for a cas, whose fail means a failed compare, the
    /// same as `UnknownLost`).
    Fail,
}

/// One operation to generate.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub client: u64,
    pub key: u32,
    pub op: OpKind,
    /// Index of the value written (write, insert, cas).
    pub value: u32,
    /// cas: index of the value expected, `None` for absent.
    pub expect: Option<u32>,
    /// Time from the client's previous return to this call.
    pub think_ns: u64,
    /// Time from the call to the linearization point.
    pub effect_ns: u64,
    /// Time from the linearization point to the return (from the call, for an unknown outcome).
    pub return_ns: u64,
    pub fate: Fate,
}

pub fn value_text(value: u32) -> String {
    format!("v{value}")
}

/// Builds the history of `specs` (each client issues its specs in order) on registers that
/// start absent. Reads that do not succeed return garbage, which must not matter.
pub fn build(specs: &[Spec]) -> Vec<HistoryRecord> {
    let mut cursor_ns: HashMap<u64, u64> = HashMap::new();
    let mut records = Vec::with_capacity(specs.len());
    let mut effects: Vec<(u64, usize)> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let call_ns = cursor_ns.get(&spec.client).copied().unwrap_or(0) + spec.think_ns;
        let effect_ns = call_ns + spec.effect_ns;
        let (outcome, return_ns, applied) = match (spec.fate, spec.op) {
            (Fate::Ok, _) => (Outcome::Ok, effect_ns + spec.return_ns, true),
            (Fate::UnknownApplied, _) => (Outcome::Unknown, call_ns + spec.return_ns, true),
            (Fate::Fail, op) if op != OpKind::Cas => (Outcome::Fail, effect_ns + spec.return_ns, false),
            (Fate::UnknownLost | Fate::Fail, _) => (Outcome::Unknown, call_ns + spec.return_ns, false),
        };
        cursor_ns.insert(spec.client, return_ns);
        let writes = matches!(spec.op, OpKind::Write | OpKind::Insert | OpKind::Cas);
        records.push(HistoryRecord {
            client: spec.client,
            op: spec.op,
            key: format!("k{}", spec.key),
            value: if writes {
                Some(value_text(spec.value))
            } else {
                None
            },
            expect: if spec.op == OpKind::Cas {
                spec.expect.map(value_text)
            } else {
                None
            },
            outcome,
            call_ns,
            return_ns,
            txn: None,
            ts: None,
        });
        if applied {
            effects.push((effect_ns, i));
        } else if spec.op == OpKind::Read {
            records[i].value = Some("garbage".to_owned());
        }
    }
    effects.sort_unstable();
    let mut registers: HashMap<String, Option<String>> = HashMap::new();
    for (_, i) in effects {
        let record = &mut records[i];
        let state = registers.entry(record.key.clone()).or_default();
        match record.op {
            OpKind::Read => record.value = state.clone(),
            OpKind::Write | OpKind::Insert => *state = record.value.clone(),
            OpKind::Delete => *state = None,
            OpKind::Cas if *state == record.expect => *state = record.value.clone(),
            // A failed compare: fail when the client heard back, unknown otherwise.
            OpKind::Cas if record.outcome == Outcome::Ok => record.outcome = Outcome::Fail,
            OpKind::Cas => {}
        }
    }
    records
}

/// Random specs from a seeded generator: `clients` clients, `ops` operations over `keys` keys,
/// one write in `write_one_in` operations, one unknown outcome in `unknown_one_in` (0: none),
/// with think, effect and return times up to `spread_ns` each.
#[derive(Clone, Debug)]
pub struct Workload {
    pub seed: u64,
    pub clients: u64,
    pub ops: usize,
    pub keys: u32,
    pub write_one_in: u32,
    pub unknown_one_in: u32,
    /// Distinct values written.
    pub values: u32,
    /// Whether writes include cas (most of which fail, with random expects).
    pub cas: bool,
    pub spread_ns: u64,
}

impl Workload {
    pub fn specs(&self) -> Vec<Spec> {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        (0..self.ops)
            .map(|_| {
                let op = if rng.u32(0..self.write_one_in) != 0 {
                    OpKind::Read
                } else {
                    let kinds = [
                        OpKind::Write,
                        OpKind::Insert,
                        OpKind::Delete,
                        OpKind::Write,
                        OpKind::Cas,
                    ];
                    kinds[rng.usize(0..if self.cas { 5 } else { 4 })]
                };
                let unknown = self.unknown_one_in != 0 && rng.u32(0..self.unknown_one_in) == 0;
                let fate = match (unknown, rng.bool()) {
                    (false, _) => Fate::Ok,
                    (true, true) => Fate::UnknownApplied,
                    (true, false) => Fate::UnknownLost,
                };
                Spec {
                    client: rng.u64(0..self.clients),
                    key: rng.u32(0..self.keys),
                    op,
                    value: rng.u32(0..self.values),
                    expect: rng.bool().then(|| rng.u32(0..self.values)),
                    think_ns: rng.u64(0..=self.spread_ns),
                    effect_ns: rng.u64(0..=self.spread_ns),
                    return_ns: rng.u64(0..=self.spread_ns),
                    fate,
                }
            })
            .collect()
    }
}

/// An operation on key "k" (no expect), for hand-written histories.
pub fn record(
    client: u64,
    op: OpKind,
    value: Option<&str>,
    outcome: Outcome,
    call_ns: u64,
    return_ns: u64,
) -> HistoryRecord {
    HistoryRecord {
        client,
        op,
        key: "k".to_owned(),
        value: value.map(str::to_owned),
        expect: None,
        outcome,
        call_ns,
        return_ns,
        txn: None,
        ts: None,
    }
}
