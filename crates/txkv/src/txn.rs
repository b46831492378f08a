//! Transactions: a list of independent key operations (one-shot transactions, paper 7.3.1).
//!
//! A transaction's operations may touch any keys of any shards; each runs where its key lives,
//! all at the transaction's one position in the total order. They are independent: no
//! operation's input depends on another's output, so a server needs nothing from the others.
//! Operations of one transaction on the same key take effect in their order.

use bytes::Bytes;

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The key's value, or absent.
    Get { key: Bytes },
    /// Sets the key.
    Put { key: Bytes, value: Bytes },
    /// Makes the key absent; the result says whether it was present.
    Del { key: Bytes },
    /// Adds `delta` to the key's decimal integer value (absent counts as 0).
    IncrBy { key: Bytes, delta: i64 },
}

impl Op {
    pub fn key(&self) -> &Bytes {
        match self {
            Op::Get { key } | Op::Put { key, .. } | Op::Del { key } | Op::IncrBy { key, .. } => key,
        }
    }

    /// Whether the operation may change the store.
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Get { .. })
    }
}

/// What one operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// `Get`: the value, or `None` if absent.
    Value(Option<Bytes>),
    /// `Put`: done.
    Done,
    /// `Del`: whether the key was present.
    Deleted(bool),
    /// `IncrBy`: the new value.
    Integer(i64),
    /// `IncrBy` on a value that is not a decimal `i64`: nothing changed.
    NotAnInteger,
    /// `IncrBy` that would overflow `i64`: nothing changed.
    Overflow,
}

/// A transaction as a client submits it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    pub ops: Vec<Op>,
}

impl Txn {
    pub fn new(ops: Vec<Op>) -> Txn {
        Txn { ops }
    }

    /// Read-only transactions go on the best-effort service and are retried when lost;
    /// the others on the reliable service (paper 7.3.1).
    pub fn is_read_only(&self) -> bool {
        self.ops.iter().all(|op| !op.is_write())
    }
}

/// How a transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It took effect once, at `ts`, with these results (one per operation, in order).
    Committed { ts: u64, results: Vec<OpResult> },
    /// It did not take effect (a read-only transaction out of retries, a refused one).
    Failed(String),
    /// It may or may not have taken effect (a write whose answers did not all come).
    Unknown(String),
}

/// A finished transaction, as the client reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The id `submit` returned.
    pub id: u64,
    pub outcome: Outcome,
    /// When it was submitted and when it finished, in the caller's clock (ns).
    pub call_ns: u64,
    pub return_ns: u64,
    /// Scatterings sent for it (1 without loss or failure).
    pub attempts: u32,
    /// Aborts before it committed (the OCC baseline; 0 for 1Pipe, which never aborts).
    pub aborts: u32,
    /// Where it took effect, if it did: a committed transaction's `ts`; for an unknown outcome,
    /// the position a replica reported (1Pipe) or the lock point (OCC) when the client learned
    /// one, so that a checker can place it if a read shows it took effect.
    pub ts: Option<u64>,
}
