//! The certificate check: replay the applied transactions in their claimed `(ts, client, txn)`
//! order on one register per key, and check every committed read against it.

use crate::history::Outcome;

use super::txns::{ABSENT, Txns};
use super::writes::{OwnWrites, Writes, classify};
use super::{TxnViolation, Violations};

/// What the replay counted besides violations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ReplayStats {
    pub reads_checked: u64,
    /// Reads of absent that disagree with the replay on a key that a transaction of unknown
    /// outcome, taken as not applied, deletes: that delete may have taken effect unseen.
    pub reads_ambiguous: u64,
}

/// Replays the transactions `applied` says (each with a `ts`) and, when `strict`, checks that the
/// claimed order respects real time.
pub(super) fn replay(
    txns: &Txns,
    writes: &Writes,
    applied: &[bool],
    strict: bool,
    violations: &mut Violations,
) -> ReplayStats {
    let mut order: Vec<u32> = (0..txns.txns.len() as u32)
        .filter(|&t| applied[t as usize])
        .collect();
    order.sort_unstable_by_key(|&t| {
        let txn = &txns.txns[t as usize];
        (txn.ts, txn.client, txn.txn, txn.first_record)
    });
    debug_assert!(order.iter().all(|&t| txns.txns[t as usize].ts.is_some()));
    let unseen_deletes = super::writes::deleted_by(txns, |t| {
        !applied[t as usize] && txns.txns[t as usize].outcome == Outcome::Unknown
    });
    let mut stats = ReplayStats::default();
    let mut model = vec![ABSENT; txns.keys.len()];
    let mut own = OwnWrites::new(txns.keys.len());
    for &t in &order {
        let txn = &txns.txns[t as usize];
        let committed = txn.outcome == Outcome::Ok;
        own.begin(t);
        for &op in &txns.ops[txn.ops.clone()] {
            let key = op.key as usize;
            if op.write {
                model[key] = op.value;
                own.write(op.key, op.value);
                continue;
            }
            if !committed {
                continue;
            }
            stats.reads_checked += 1;
            if model[key] == op.value {
                continue;
            }
            if op.value == ABSENT && unseen_deletes[key] {
                stats.reads_ambiguous += 1;
                continue;
            }
            let bad = classify(txns, writes, t, op, own.get(op.key)).err();
            violations.push(|| match bad {
                Some(bad) => bad.violation(txns, t, op),
                None => TxnViolation::ReplayMismatch {
                    reader: txns.txn_ref(t),
                    key: txns.key_text(op.key),
                    value: txns.value_text(op.value),
                    replayed: txns.value_text(model[key]),
                },
            });
        }
    }
    if strict {
        check_real_time(txns, &order, violations);
    }
    stats
}

/// Every committed transaction that returned before another was called comes before it in
/// `order`. (One of unknown outcome may have taken effect after it gave up, so it bounds
/// nothing; it is still bounded below by its call.) One violation per later transaction, naming
/// the earliest-returning one placed after it.
fn check_real_time(txns: &Txns, order: &[u32], violations: &mut Violations) {
    let mut earliest_after: Option<(u64, u32)> = None;
    for &t in order.iter().rev() {
        let txn = &txns.txns[t as usize];
        if let Some((return_ns, a)) = earliest_after
            && return_ns < txn.call_ns
        {
            violations.push(|| TxnViolation::RealTime {
                earlier: txns.txn_ref(a),
                later: txns.txn_ref(t),
            });
        }
        let bounds = txn.outcome == Outcome::Ok;
        if bounds && earliest_after.is_none_or(|(return_ns, _)| txn.return_ns < return_ns) {
            earliest_after = Some((txn.return_ns, t));
        }
    }
}
