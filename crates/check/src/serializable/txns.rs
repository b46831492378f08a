//! Records grouped into transactions, with keys and values interned to `u32` ids.

use std::collections::HashMap;
use std::ops::Range;

use crate::history::{HistoryError, HistoryRecord, OpKind, Outcome, check_client_overlap, check_records};

use super::{SerializabilityError, TxnField, TxnRef};

/// The value id of "absent" (a delete, an initial state, a read that found nothing).
pub(super) const ABSENT: u32 = u32::MAX;

/// Most records the check takes: a quarter of `u32::MAX`, so that value ids (at most two per
/// record) and graph nodes (transactions, plus helpers: at most one per key and one per
/// transaction) all fit a `u32` with `u32::MAX` left as a sentinel.
pub(super) const RECORDS_MAX: usize = (u32::MAX / 4) as usize;

/// One read or one write of a register; a cas is a read of `expect` then a write of `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MicroOp {
    pub write: bool,
    pub key: u32,
    /// A value id, or [`ABSENT`].
    pub value: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Txn {
    pub client: u64,
    pub txn: Option<u64>,
    pub outcome: Outcome,
    pub call_ns: u64,
    pub return_ns: u64,
    pub ts: Option<u64>,
    /// Index of its first record in the history.
    pub first_record: u32,
    /// Its operations in [`Txns::ops`], in execution order.
    pub ops: Range<usize>,
}

/// The history as transactions.
#[derive(Debug, Default)]
pub(super) struct Txns<'a> {
    pub txns: Vec<Txn>,
    pub ops: Vec<MicroOp>,
    /// Key text by id.
    pub keys: Vec<&'a str>,
    /// Value text by id.
    pub values: Vec<&'a str>,
}

impl<'a> Txns<'a> {
    /// Groups `records` into transactions, after checking each record, that operations of one
    /// transaction agree, and that no client has two transactions outstanding at once.
    pub fn build(records: &'a [HistoryRecord]) -> Result<Self, SerializabilityError> {
        // Every id (value, graph node) must fit a u32: see RECORDS_MAX.
        if records.len() > RECORDS_MAX {
            return Err(HistoryError::TooManyRecords(records.len()).into());
        }
        check_records(records)?;
        let mut txns = Txns::default();
        let txn_of = txns.group(records)?;
        check_client_overlap(records)?;
        txns.collect_ops(records, &txn_of);
        Ok(txns)
    }

    /// The transaction of each record; fills `self.txns` (without their ops).
    fn group(&mut self, records: &[HistoryRecord]) -> Result<Vec<u32>, SerializabilityError> {
        let mut by_id: HashMap<(u64, u64), u32> = HashMap::new();
        let mut txn_of = Vec::with_capacity(records.len());
        for (index, record) in records.iter().enumerate() {
            let existing = record.txn.and_then(|id| by_id.get(&(record.client, id)).copied());
            let t = match existing {
                Some(t) => {
                    disagreement(&self.txns[t as usize], records, index)?;
                    t
                }
                None => {
                    // check_records bounded the record count, hence the transaction count, to u32.
                    let t = self.txns.len() as u32;
                    if let Some(id) = record.txn {
                        by_id.insert((record.client, id), t);
                    }
                    self.txns.push(Txn {
                        client: record.client,
                        txn: record.txn,
                        outcome: record.outcome,
                        call_ns: record.call_ns,
                        return_ns: record.return_ns,
                        ts: record.ts,
                        first_record: index as u32,
                        ops: 0..0,
                    });
                    t
                }
            };
            txn_of.push(t);
        }
        Ok(txn_of)
    }

    /// Lays out the micro-operations of each transaction contiguously, in record order.
    fn collect_ops(&mut self, records: &'a [HistoryRecord], txn_of: &[u32]) {
        let mut counts = vec![0usize; self.txns.len()];
        for (record, &t) in records.iter().zip(txn_of) {
            counts[t as usize] += if record.op == OpKind::Cas { 2 } else { 1 };
        }
        let mut start = 0;
        for (txn, count) in self.txns.iter_mut().zip(&counts) {
            txn.ops = start..start;
            start += count;
        }
        let mut key_ids: HashMap<&'a str, u32> = HashMap::new();
        let mut value_ids: HashMap<&'a str, u32> = HashMap::new();
        let placeholder = MicroOp {
            write: false,
            key: 0,
            value: ABSENT,
        };
        self.ops = vec![placeholder; start];
        for (record, &t) in records.iter().zip(txn_of) {
            let key = intern(&mut key_ids, &mut self.keys, &record.key);
            let mut value_of = |text: &'a Option<String>| {
                text.as_deref()
                    .map_or(ABSENT, |v| intern(&mut value_ids, &mut self.values, v))
            };
            let (read, write) = match record.op {
                OpKind::Read => (Some(value_of(&record.value)), None),
                OpKind::Write | OpKind::Insert => (None, Some(value_of(&record.value))),
                OpKind::Delete => (None, Some(ABSENT)),
                OpKind::Cas => (Some(value_of(&record.expect)), Some(value_of(&record.value))),
            };
            let ops = &mut self.txns[t as usize].ops;
            for (write, value) in [(false, read), (true, write)] {
                if let Some(value) = value {
                    self.ops[ops.end] = MicroOp { write, key, value };
                    ops.end += 1;
                }
            }
        }
        debug_assert!(self.txns.iter().zip(&counts).all(|(t, &c)| t.ops.len() == c));
    }

    /// How a report names transaction `t`.
    pub fn txn_ref(&self, t: u32) -> TxnRef {
        let txn = &self.txns[t as usize];
        TxnRef {
            client: txn.client,
            txn: txn.txn,
            ts: txn.ts,
            outcome: txn.outcome,
            record: txn.first_record as usize,
        }
    }

    pub fn key_text(&self, key: u32) -> String {
        self.keys[key as usize].to_owned()
    }

    /// `None` for [`ABSENT`].
    pub fn value_text(&self, value: u32) -> Option<String> {
        (value != ABSENT).then(|| self.values[value as usize].to_owned())
    }
}

fn intern<'a>(ids: &mut HashMap<&'a str, u32>, texts: &mut Vec<&'a str>, text: &'a str) -> u32 {
    *ids.entry(text).or_insert_with(|| {
        // Build bounded the records to RECORDS_MAX, at most two texts each.
        let id = texts.len() as u32;
        assert!(id < ABSENT, "more texts than the record bound allows");
        texts.push(text);
        id
    })
}

/// The first field on which record `index` disagrees with the transaction it belongs to.
fn disagreement(txn: &Txn, records: &[HistoryRecord], index: usize) -> Result<(), SerializabilityError> {
    let record = &records[index];
    let field = if record.call_ns != txn.call_ns {
        TxnField::CallNs
    } else if record.return_ns != txn.return_ns {
        TxnField::ReturnNs
    } else if record.outcome != txn.outcome {
        TxnField::Outcome
    } else if record.ts != txn.ts {
        TxnField::Ts
    } else {
        return Ok(());
    };
    Err(SerializabilityError::TxnMismatch {
        client: record.client,
        txn: record.txn.unwrap_or_default(),
        field,
        first: txn.first_record as usize,
        second: index,
    })
}
