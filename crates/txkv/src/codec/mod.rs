//! The store's messages on 1Pipe, and their encoding. docs/txkv.md, "Messages", lists them.
//!
//! Every message starts with a tag byte. Integers are little-endian; byte strings carry a `u32`
//! length; lists a `u16` count. [`Message::decode`] refuses anything short, long, or with an
//! unknown tag with a [`DecodeError`]: a server or client counts it and drops it.

mod bytes_io;

use bytes::Bytes;

pub use bytes_io::{Reader, Writer};

use crate::txn::{Op, OpResult};

/// Operations or results of one message at most (a transaction's size limit).
pub const OPS_MAX: usize = u16::MAX as usize;

const TAG_REQUEST: u8 = 1;
const TAG_REPLY: u8 = 2;
const TAG_SNAPSHOT_REQUEST: u8 = 3;
const TAG_SNAPSHOT_CHUNK: u8 = 4;

/// A message that is not one of the store's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("message truncated in {what}: {need} bytes needed, {have} left")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    #[error("{bytes} bytes left over after the message")]
    Trailing { bytes: usize },
    #[error("empty message")]
    Empty,
}

/// Request flags.
pub const FLAG_READ_ONLY: u8 = 1;

/// A transaction's operations for one shard: one message of its scattering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The client's id for the transaction (unique per client).
    pub txn: u64,
    /// Which scattering of the transaction this is (a retry sends a new one).
    pub attempt: u32,
    pub flags: u8,
    /// The operations on this shard's keys, each with its index in the transaction.
    pub ops: Vec<(u16, Op)>,
}

/// How a server took a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Executed at `ts`.
    Applied = 0,
    /// A retry of a write it had executed: the results are those of the first execution.
    Duplicate = 1,
    /// A read that reached this replica below a write it had already applied (it cannot be
    /// served at its position any more): nothing happened, retry.
    Late = 2,
    /// A retry of a write older than what the server remembers: it may have been executed.
    Forgotten = 3,
}

impl Status {
    fn from_u8(v: u8) -> Result<Status, DecodeError> {
        Ok(match v {
            0 => Status::Applied,
            1 => Status::Duplicate,
            2 => Status::Late,
            3 => Status::Forgotten,
            tag => return Err(DecodeError::UnknownTag { what: "status", tag }),
        })
    }
}

/// A replica's answer to a [`Request`], sent to the client alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
    pub replica: u16,
    pub status: Status,
    /// The 1Pipe timestamp the transaction was executed at (its position in the total order).
    pub ts: u64,
    /// The replica's checksum of every write it has executed, this one included (paper 2.2.2):
    /// replicas of a shard that executed the same writes in the same order agree.
    pub checksum: u64,
    pub results: Vec<(u16, OpResult)>,
}

/// Asks a replica for its shard's state at the request's timestamp (paper 2.2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub id: u64,
    /// Pairs per chunk of the answer.
    pub chunk_pairs: u32,
}

/// One piece of a replica's answer to a [`SnapshotRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotChunk {
    pub id: u64,
    pub shard: u16,
    pub replica: u16,
    /// The snapshot's timestamp: the request's position in the total order.
    pub ts: u64,
    pub index: u32,
    pub count: u32,
    pub pairs: Vec<(Bytes, Bytes)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Request(Request),
    Reply(Reply),
    SnapshotRequest(SnapshotRequest),
    SnapshotChunk(SnapshotChunk),
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Message::Request(m) => {
                let mut w = Writer::with_tag(TAG_REQUEST);
                w.u64(m.txn);
                w.u32(m.attempt);
                w.u8(m.flags);
                w.count(m.ops.len());
                for (i, op) in &m.ops {
                    w.u16(*i);
                    write_op(&mut w, op);
                }
                w.buf
            }
            Message::Reply(m) => {
                let mut w = Writer::with_tag(TAG_REPLY);
                w.u64(m.txn);
                w.u32(m.attempt);
                w.u16(m.shard);
                w.u16(m.replica);
                w.u8(m.status as u8);
                w.u64(m.ts);
                w.u64(m.checksum);
                w.count(m.results.len());
                for (i, r) in &m.results {
                    w.u16(*i);
                    write_result(&mut w, r);
                }
                w.buf
            }
            Message::SnapshotRequest(m) => {
                let mut w = Writer::with_tag(TAG_SNAPSHOT_REQUEST);
                w.u64(m.id);
                w.u32(m.chunk_pairs);
                w.buf
            }
            Message::SnapshotChunk(m) => {
                let mut w = Writer::with_tag(TAG_SNAPSHOT_CHUNK);
                w.u64(m.id);
                w.u16(m.shard);
                w.u16(m.replica);
                w.u64(m.ts);
                w.u32(m.index);
                w.u32(m.count);
                w.count(m.pairs.len());
                for (k, v) in &m.pairs {
                    w.bytes(k);
                    w.bytes(v);
                }
                w.buf
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader::new(bytes);
        let tag = r.u8("tag").map_err(|_| DecodeError::Empty)?;
        let m = match tag {
            TAG_REQUEST => {
                let txn = r.u64("txn")?;
                let attempt = r.u32("attempt")?;
                let flags = r.u8("flags")?;
                let n = r.count("ops", 7)?;
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    ops.push((r.u16("op index")?, read_op(&mut r)?));
                }
                Message::Request(Request {
                    txn,
                    attempt,
                    flags,
                    ops,
                })
            }
            TAG_REPLY => {
                let txn = r.u64("txn")?;
                let attempt = r.u32("attempt")?;
                let shard = r.u16("shard")?;
                let replica = r.u16("replica")?;
                let status = Status::from_u8(r.u8("status")?)?;
                let ts = r.u64("ts")?;
                let checksum = r.u64("checksum")?;
                let n = r.count("results", 3)?;
                let mut results = Vec::with_capacity(n);
                for _ in 0..n {
                    results.push((r.u16("result index")?, read_result(&mut r)?));
                }
                Message::Reply(Reply {
                    txn,
                    attempt,
                    shard,
                    replica,
                    status,
                    ts,
                    checksum,
                    results,
                })
            }
            TAG_SNAPSHOT_REQUEST => Message::SnapshotRequest(SnapshotRequest {
                id: r.u64("snapshot id")?,
                chunk_pairs: r.u32("chunk pairs")?,
            }),
            TAG_SNAPSHOT_CHUNK => {
                let id = r.u64("snapshot id")?;
                let shard = r.u16("shard")?;
                let replica = r.u16("replica")?;
                let ts = r.u64("ts")?;
                let index = r.u32("chunk index")?;
                let count = r.u32("chunk count")?;
                let n = r.count("pairs", 8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes("key")?, r.bytes("value")?));
                }
                Message::SnapshotChunk(SnapshotChunk {
                    id,
                    shard,
                    replica,
                    ts,
                    index,
                    count,
                    pairs,
                })
            }
            tag => return Err(DecodeError::UnknownTag { what: "message", tag }),
        };
        r.finish()?;
        Ok(m)
    }
}

const OP_GET: u8 = 0;
const OP_PUT: u8 = 1;
const OP_DEL: u8 = 2;
const OP_INCRBY: u8 = 3;

pub fn write_op(w: &mut Writer, op: &Op) {
    match op {
        Op::Get { key } => {
            w.u8(OP_GET);
            w.bytes(key);
        }
        Op::Put { key, value } => {
            w.u8(OP_PUT);
            w.bytes(key);
            w.bytes(value);
        }
        Op::Del { key } => {
            w.u8(OP_DEL);
            w.bytes(key);
        }
        Op::IncrBy { key, delta } => {
            w.u8(OP_INCRBY);
            w.bytes(key);
            w.i64(*delta);
        }
    }
}

pub fn read_op(r: &mut Reader<'_>) -> Result<Op, DecodeError> {
    Ok(match r.u8("op")? {
        OP_GET => Op::Get { key: r.bytes("key")? },
        OP_PUT => Op::Put {
            key: r.bytes("key")?,
            value: r.bytes("value")?,
        },
        OP_DEL => Op::Del { key: r.bytes("key")? },
        OP_INCRBY => Op::IncrBy {
            key: r.bytes("key")?,
            delta: r.i64("delta")?,
        },
        tag => return Err(DecodeError::UnknownTag { what: "op", tag }),
    })
}

pub fn write_result(w: &mut Writer, result: &OpResult) {
    match result {
        OpResult::Value(None) => w.u8(0),
        OpResult::Value(Some(v)) => {
            w.u8(1);
            w.bytes(v);
        }
        OpResult::Done => w.u8(2),
        OpResult::Deleted(false) => w.u8(3),
        OpResult::Deleted(true) => w.u8(4),
        OpResult::Integer(n) => {
            w.u8(5);
            w.i64(*n);
        }
        OpResult::NotAnInteger => w.u8(6),
        OpResult::Overflow => w.u8(7),
    }
}

pub fn read_result(r: &mut Reader<'_>) -> Result<OpResult, DecodeError> {
    Ok(match r.u8("result")? {
        0 => OpResult::Value(None),
        1 => OpResult::Value(Some(r.bytes("value")?)),
        2 => OpResult::Done,
        3 => OpResult::Deleted(false),
        4 => OpResult::Deleted(true),
        5 => OpResult::Integer(r.i64("integer")?),
        6 => OpResult::NotAnInteger,
        7 => OpResult::Overflow,
        tag => return Err(DecodeError::UnknownTag { what: "result", tag }),
    })
}

#[cfg(test)]
pub(crate) mod tests;
