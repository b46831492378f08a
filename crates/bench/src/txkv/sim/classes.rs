//! The simulated store's per-class latency (paper Fig. 14b): the demo's [`Workload`] wrapped so
//! that each committed transaction's latency lands in the histogram of its class.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use onepipe_txkv::run::TxnSource;
use onepipe_txkv::{Completion, Outcome, Txn};
use serde::Serialize;

use crate::txkv::workload::Workload;

/// A transaction's class in the paper's Fig. 14b.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum TxnClass {
    /// Only reads (best-effort 1Pipe; one round trip in OCC).
    #[serde(rename = "read-only")]
    ReadOnly,
    /// Only writes.
    #[serde(rename = "write-only")]
    WriteOnly,
    /// Reads and writes.
    #[serde(rename = "read-write")]
    ReadWrite,
}

impl TxnClass {
    pub const ALL: [TxnClass; 3] = [TxnClass::ReadOnly, TxnClass::WriteOnly, TxnClass::ReadWrite];

    pub fn of(txn: &Txn) -> TxnClass {
        let writes = txn.ops.iter().filter(|op| op.is_write()).count();
        match writes {
            0 => TxnClass::ReadOnly,
            w if w == txn.ops.len() => TxnClass::WriteOnly,
            _ => TxnClass::ReadWrite,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TxnClass::ReadOnly => "read-only",
            TxnClass::WriteOnly => "write-only",
            TxnClass::ReadWrite => "read-write",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Latencies (ns) of the transactions committed in the measured window, per class.
pub struct ClassLatency {
    pub window_ns: (u64, u64),
    pub histograms: [Histogram<u64>; 3],
}

impl ClassLatency {
    pub fn new(window_ns: (u64, u64)) -> ClassLatency {
        let h = || Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        ClassLatency {
            window_ns,
            histograms: [h(), h(), h()],
        }
    }

    pub fn of(&self, class: TxnClass) -> &Histogram<u64> {
        &self.histograms[class.index()]
    }
}

/// One simulated client's transactions: the demo's workload, with their classes remembered
/// until they finish. Holds at most the client's window of transactions.
pub struct ClassedWorkload {
    inner: Workload,
    classes: HashMap<u64, TxnClass>,
    latency: Arc<Mutex<ClassLatency>>,
}

impl ClassedWorkload {
    pub fn new(inner: Workload, latency: Arc<Mutex<ClassLatency>>) -> ClassedWorkload {
        ClassedWorkload {
            inner,
            classes: HashMap::new(),
            latency,
        }
    }
}

impl TxnSource for ClassedWorkload {
    fn next(&mut self, now_ns: u64) -> Option<Txn> {
        self.inner.next(now_ns)
    }

    fn submitted(&mut self, id: u64, txn: Txn) {
        let previous = self.classes.insert(id, TxnClass::of(&txn));
        assert!(previous.is_none(), "transaction id {id} submitted twice");
        self.inner.submitted(id, txn);
    }

    fn completed(&mut self, c: Completion) {
        // Id 0 is a transaction refused at submit: never submitted, no class.
        if let Some(class) = self.classes.remove(&c.id)
            && matches!(c.outcome, Outcome::Committed { .. })
        {
            let mut latency = self.latency.lock().expect("latency lock");
            let (from, until) = latency.window_ns;
            if (from..until).contains(&c.return_ns) {
                let ns = c.return_ns.saturating_sub(c.call_ns).max(1);
                let _ = latency.histograms[class.index()].record(ns);
            }
        }
        self.inner.completed(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use onepipe_txkv::Op;

    fn get(k: &str) -> Op {
        Op::Get {
            key: Bytes::from(k.to_string()),
        }
    }

    fn put(k: &str) -> Op {
        Op::Put {
            key: Bytes::from(k.to_string()),
            value: Bytes::from_static(b"v"),
        }
    }

    #[test]
    fn classes_follow_the_writes() {
        assert_eq!(
            TxnClass::of(&Txn::new(vec![get("a"), get("b")])),
            TxnClass::ReadOnly
        );
        assert_eq!(
            TxnClass::of(&Txn::new(vec![put("a"), put("b")])),
            TxnClass::WriteOnly
        );
        assert_eq!(
            TxnClass::of(&Txn::new(vec![get("a"), put("b")])),
            TxnClass::ReadWrite
        );
    }
}
