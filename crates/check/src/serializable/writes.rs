//! Who wrote each value, which transactions of unknown outcome took effect, and what a read
//! tells on its own (before any order is considered).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::history::Outcome;

use super::txns::{ABSENT, MicroOp, Txns};
use super::{TxnViolation, Violations};

/// No transaction (a stamp that matches none).
const NO_TXN: u32 = u32::MAX;

/// The transaction that wrote a value, and whether the value outlived it: a value the same
/// transaction overwrote (or deleted) later was never visible to others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WriteOf {
    pub txn: u32,
    pub installed: bool,
}

/// A value written twice to one key: then a read of it does not say which write it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Duplicate {
    pub key: u32,
    pub value: u32,
    pub first: u32,
    pub second: u32,
}

/// The writer of every (key, value) pair, values other than absent.
#[derive(Debug, Default)]
pub(super) struct Writes {
    by_value: HashMap<(u32, u32), WriteOf>,
    /// The first duplicate found.
    pub duplicate: Option<Duplicate>,
    pub duplicates: u64,
}

impl Writes {
    pub fn build(txns: &Txns) -> Self {
        let mut writes = Writes::default();
        // The transaction whose last write of the key has been seen, scanning it backwards.
        let mut seen_last = vec![NO_TXN; txns.keys.len()];
        for (t, txn) in txns.txns.iter().enumerate() {
            let t = t as u32;
            for op in txns.ops[txn.ops.clone()].iter().rev().filter(|op| op.write) {
                let installed = seen_last[op.key as usize] != t;
                seen_last[op.key as usize] = t;
                if op.value == ABSENT {
                    continue;
                }
                match writes.by_value.entry((op.key, op.value)) {
                    Entry::Vacant(slot) => {
                        slot.insert(WriteOf { txn: t, installed });
                    }
                    Entry::Occupied(slot) => {
                        writes.duplicates += 1;
                        writes.duplicate.get_or_insert(Duplicate {
                            key: op.key,
                            value: op.value,
                            first: slot.get().txn,
                            second: t,
                        });
                    }
                }
            }
        }
        writes
    }

    /// The writer of `value` (not absent) at `key`.
    pub fn writer(&self, key: u32, value: u32) -> Option<WriteOf> {
        debug_assert_ne!(value, ABSENT);
        self.by_value.get(&(key, value)).copied()
    }
}

/// Which transactions took effect: every ok one, and every one of unknown outcome a committed
/// read saw a value of. Reads of transactions that are not ok constrain nothing, so one pass
/// decides (no transaction of unknown outcome can reveal another).
pub(super) fn applied(txns: &Txns, writes: &Writes) -> Vec<bool> {
    let mut applied: Vec<bool> = txns.txns.iter().map(|txn| txn.outcome == Outcome::Ok).collect();
    for txn in txns.txns.iter().filter(|txn| txn.outcome == Outcome::Ok) {
        for op in &txns.ops[txn.ops.clone()] {
            if op.write || op.value == ABSENT {
                continue;
            }
            if let Some(w) = writes.writer(op.key, op.value)
                && txns.txns[w.txn as usize].outcome == Outcome::Unknown
            {
                applied[w.txn as usize] = true;
            }
        }
    }
    applied
}

/// For each key, whether a transaction that `include` accepts deletes it.
pub(super) fn deleted_by(txns: &Txns, include: impl Fn(u32) -> bool) -> Vec<bool> {
    let mut deleted = vec![false; txns.keys.len()];
    for (t, txn) in txns.txns.iter().enumerate() {
        if include(t as u32) {
            for op in &txns.ops[txn.ops.clone()] {
                if op.write && op.value == ABSENT {
                    deleted[op.key as usize] = true;
                }
            }
        }
    }
    deleted
}

/// The last value each key was given by the transaction being scanned, in memory per key rather
/// than per transaction, so a scan stays linear whatever the sizes of transactions.
pub(super) struct OwnWrites {
    stamp: Vec<u32>,
    value: Vec<u32>,
    txn: u32,
}

impl OwnWrites {
    pub fn new(keys: usize) -> Self {
        OwnWrites {
            stamp: vec![NO_TXN; keys],
            value: vec![ABSENT; keys],
            txn: NO_TXN,
        }
    }

    /// Starts the scan of transaction `t` (each transaction at most once).
    pub fn begin(&mut self, t: u32) {
        assert_ne!(t, NO_TXN);
        self.txn = t;
    }

    pub fn write(&mut self, key: u32, value: u32) {
        self.stamp[key as usize] = self.txn;
        self.value[key as usize] = value;
    }

    /// The value the transaction last wrote to `key`, if it wrote it yet.
    pub fn get(&self, key: u32) -> Option<u32> {
        (self.stamp[key as usize] == self.txn).then(|| self.value[key as usize])
    }
}

/// Where a committed read's value came from, when the read alone shows nothing wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The transaction's own earlier write.
    Own,
    /// Absent, from another transaction or the initial state.
    Absent,
    /// The installed value of another transaction, ok or of unknown outcome.
    Writer(u32),
}

/// What is wrong with a committed read on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BadRead {
    /// No transaction wrote the value.
    Garbage,
    /// Its own transaction writes the value only later.
    Future,
    /// Only this failed transaction wrote the value.
    Aborted(u32),
    /// This transaction overwrote the value itself.
    Intermediate(u32),
    /// Its own transaction last wrote this other value to the key.
    Internal { own: u32 },
}

impl BadRead {
    /// The violation, for read `op` of transaction `t`.
    pub fn violation(self, txns: &Txns, t: u32, op: MicroOp) -> TxnViolation {
        let reader = txns.txn_ref(t);
        let key = txns.key_text(op.key);
        let value = || txns.value_text(op.value).unwrap_or_default();
        match self {
            BadRead::Garbage => TxnViolation::GarbageRead {
                reader,
                key,
                value: value(),
            },
            BadRead::Future => TxnViolation::FutureRead {
                reader,
                key,
                value: value(),
            },
            BadRead::Aborted(w) => TxnViolation::AbortedRead {
                reader,
                writer: txns.txn_ref(w),
                key,
                value: value(),
            },
            BadRead::Intermediate(w) => TxnViolation::IntermediateRead {
                reader,
                writer: txns.txn_ref(w),
                key,
                value: value(),
            },
            BadRead::Internal { own } => TxnViolation::InternalRead {
                reader,
                key,
                value: txns.value_text(op.value),
                own_write: txns.value_text(own),
            },
        }
    }
}

/// Judges read `op` of committed transaction `t` given its own earlier write of the key, if any.
pub(super) fn classify(
    txns: &Txns,
    writes: &Writes,
    t: u32,
    op: MicroOp,
    own: Option<u32>,
) -> Result<Source, BadRead> {
    debug_assert!(!op.write);
    if let Some(own) = own {
        return if own == op.value {
            Ok(Source::Own)
        } else {
            Err(BadRead::Internal { own })
        };
    }
    if op.value == ABSENT {
        return Ok(Source::Absent);
    }
    let w = writes.writer(op.key, op.value).ok_or(BadRead::Garbage)?;
    if w.txn == t {
        Err(BadRead::Future)
    } else if txns.txns[w.txn as usize].outcome == Outcome::Fail {
        Err(BadRead::Aborted(w.txn))
    } else if !w.installed {
        Err(BadRead::Intermediate(w.txn))
    } else {
        Ok(Source::Writer(w.txn))
    }
}

impl Violations {
    /// Counts a violation, and makes and keeps it while fewer than the maximum are kept.
    pub fn push(&mut self, violation: impl FnOnce() -> TxnViolation) {
        self.total += 1;
        if self.list.len() < self.max {
            self.list.push(violation());
        }
    }
}
