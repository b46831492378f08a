//! The OCC baseline's messages (tags 16 and up, beside the 1Pipe store's 1 to 4), encoded with
//! the crate's [`Writer`] and [`Reader`]: same integers, byte strings and counts.
//!
//! Every request carries the client's transaction id and attempt (aborts so far), and every
//! answer repeats them, so an answer to an older attempt is recognised and dropped.

use bytes::Bytes;

use crate::codec::{DecodeError, Reader, Writer, read_op, read_result, write_op, write_result};
use crate::txn::{Op, OpResult};

const TAG_READ: u8 = 16;
const TAG_READ_REPLY: u8 = 17;
const TAG_LOCK: u8 = 18;
const TAG_LOCK_REPLY: u8 = 19;
const TAG_VALIDATE: u8 = 20;
const TAG_VALIDATE_REPLY: u8 = 21;
const TAG_COMMIT: u8 = 22;
const TAG_COMMIT_REPLY: u8 = 23;
const TAG_ABORT: u8 = 24;
const TAG_ABORT_REPLY: u8 = 25;

/// Reads keys at a shard's primary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub txn: u64,
    pub attempt: u32,
    pub keys: Vec<Bytes>,
}

/// One key as the primary saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadItem {
    pub value: Option<Bytes>,
    /// Committed writes to the key so far (0: never written).
    pub version: u64,
    /// Whether a transaction holds the key's lock (it may be about to change it).
    pub locked: bool,
}

/// The answer to a [`Read`]: one item per key, in its order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
    /// The primary's clock when it read the items (all at once): a one-shard read-only
    /// transaction's serialization point.
    pub read_ns: u64,
    pub items: Vec<ReadItem>,
}

/// Locks keys at a shard's primary, all or none. A key the transaction read carries the version
/// it read: the lock is refused if the key changed since.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    pub txn: u64,
    pub attempt: u32,
    pub items: Vec<(Bytes, Option<u64>)>,
}

/// The answer to a [`Lock`]: when granted, each key's version (its writes wait for it at the
/// backups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockReply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
    pub ok: bool,
    pub versions: Vec<u64>,
}

/// Checks that keys still have the versions read and are not locked by another transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validate {
    pub txn: u64,
    pub attempt: u32,
    pub items: Vec<(Bytes, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateReply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
    pub ok: bool,
}

/// Executes a transaction's operations on locked keys, at every replica of the shard. `bases`
/// holds each written key's version when it was locked: a replica applies the commit when its
/// versions of those keys are the bases, so every replica applies one key's writes in the same
/// order, however the network reorders commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    pub txn: u64,
    pub attempt: u32,
    pub ops: Vec<(u16, Op)>,
    pub bases: Vec<(Bytes, u64)>,
}

/// How a replica took a [`Commit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitStatus {
    Applied = 0,
    /// A retry of a commit it had applied: the first application's results.
    Duplicate = 1,
    /// A retry older than what the replica remembers: it was applied, the results are lost.
    Forgotten = 2,
    /// A commit whose keys are not those of its bases: not applied.
    Refused = 3,
}

impl CommitStatus {
    fn from_u8(v: u8) -> Result<CommitStatus, DecodeError> {
        Ok(match v {
            0 => CommitStatus::Applied,
            1 => CommitStatus::Duplicate,
            2 => CommitStatus::Forgotten,
            3 => CommitStatus::Refused,
            tag => {
                return Err(DecodeError::UnknownTag {
                    what: "commit status",
                    tag,
                });
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitReply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
    pub replica: u16,
    pub status: CommitStatus,
    pub results: Vec<(u16, OpResult)>,
}

/// Releases the locks the attempt holds on these keys (and only those).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abort {
    pub txn: u64,
    pub attempt: u32,
    pub keys: Vec<Bytes>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortReply {
    pub txn: u64,
    pub attempt: u32,
    pub shard: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OccMessage {
    Read(Read),
    ReadReply(ReadReply),
    Lock(Lock),
    LockReply(LockReply),
    Validate(Validate),
    ValidateReply(ValidateReply),
    Commit(Commit),
    CommitReply(CommitReply),
    Abort(Abort),
    AbortReply(AbortReply),
}

impl OccMessage {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            OccMessage::Read(m) => {
                let mut w = head(TAG_READ, m.txn, m.attempt);
                keys(&mut w, &m.keys);
                w.buf
            }
            OccMessage::ReadReply(m) => {
                let mut w = head(TAG_READ_REPLY, m.txn, m.attempt);
                w.u16(m.shard);
                w.u64(m.read_ns);
                w.count(m.items.len());
                for item in &m.items {
                    option_bytes(&mut w, item.value.as_deref());
                    w.u64(item.version);
                    w.u8(u8::from(item.locked));
                }
                w.buf
            }
            OccMessage::Lock(m) => {
                let mut w = head(TAG_LOCK, m.txn, m.attempt);
                w.count(m.items.len());
                for (key, expected) in &m.items {
                    w.bytes(key);
                    option_u64(&mut w, *expected);
                }
                w.buf
            }
            OccMessage::LockReply(m) => {
                let mut w = head(TAG_LOCK_REPLY, m.txn, m.attempt);
                w.u16(m.shard);
                w.u8(u8::from(m.ok));
                w.count(m.versions.len());
                m.versions.iter().for_each(|&v| w.u64(v));
                w.buf
            }
            OccMessage::Validate(m) => {
                let mut w = head(TAG_VALIDATE, m.txn, m.attempt);
                key_versions(&mut w, &m.items);
                w.buf
            }
            OccMessage::ValidateReply(m) => {
                let mut w = head(TAG_VALIDATE_REPLY, m.txn, m.attempt);
                w.u16(m.shard);
                w.u8(u8::from(m.ok));
                w.buf
            }
            OccMessage::Commit(m) => {
                let mut w = head(TAG_COMMIT, m.txn, m.attempt);
                w.count(m.ops.len());
                for (i, op) in &m.ops {
                    w.u16(*i);
                    write_op(&mut w, op);
                }
                key_versions(&mut w, &m.bases);
                w.buf
            }
            OccMessage::CommitReply(m) => {
                let mut w = head(TAG_COMMIT_REPLY, m.txn, m.attempt);
                w.u16(m.shard);
                w.u16(m.replica);
                w.u8(m.status as u8);
                w.count(m.results.len());
                for (i, r) in &m.results {
                    w.u16(*i);
                    write_result(&mut w, r);
                }
                w.buf
            }
            OccMessage::Abort(m) => {
                let mut w = head(TAG_ABORT, m.txn, m.attempt);
                keys(&mut w, &m.keys);
                w.buf
            }
            OccMessage::AbortReply(m) => {
                let mut w = head(TAG_ABORT_REPLY, m.txn, m.attempt);
                w.u16(m.shard);
                w.buf
            }
        }
    }

    /// Never panics: anything short, long or unknown is a [`DecodeError`].
    pub fn decode(bytes: &[u8]) -> Result<OccMessage, DecodeError> {
        let mut r = Reader::new(bytes);
        let tag = r.u8("tag").map_err(|_| DecodeError::Empty)?;
        if !(TAG_READ..=TAG_ABORT_REPLY).contains(&tag) {
            return Err(DecodeError::UnknownTag {
                what: "occ message",
                tag,
            });
        }
        let txn = r.u64("txn")?;
        let attempt = r.u32("attempt")?;
        let m = match tag {
            TAG_READ => OccMessage::Read(Read {
                txn,
                attempt,
                keys: read_keys(&mut r)?,
            }),
            TAG_READ_REPLY => OccMessage::ReadReply(ReadReply {
                txn,
                attempt,
                shard: r.u16("shard")?,
                read_ns: r.u64("read time")?,
                items: read_items(&mut r)?,
            }),
            TAG_LOCK => OccMessage::Lock(Lock {
                txn,
                attempt,
                items: read_lock_items(&mut r)?,
            }),
            TAG_LOCK_REPLY => OccMessage::LockReply(LockReply {
                txn,
                attempt,
                shard: r.u16("shard")?,
                ok: read_bool(&mut r, "ok")?,
                versions: read_versions(&mut r)?,
            }),
            TAG_VALIDATE => OccMessage::Validate(Validate {
                txn,
                attempt,
                items: read_key_versions(&mut r)?,
            }),
            TAG_VALIDATE_REPLY => OccMessage::ValidateReply(ValidateReply {
                txn,
                attempt,
                shard: r.u16("shard")?,
                ok: read_bool(&mut r, "ok")?,
            }),
            TAG_COMMIT => OccMessage::Commit(Commit {
                txn,
                attempt,
                ops: read_ops(&mut r)?,
                bases: read_key_versions(&mut r)?,
            }),
            TAG_COMMIT_REPLY => OccMessage::CommitReply(CommitReply {
                txn,
                attempt,
                shard: r.u16("shard")?,
                replica: r.u16("replica")?,
                status: CommitStatus::from_u8(r.u8("commit status")?)?,
                results: read_results(&mut r)?,
            }),
            TAG_ABORT => OccMessage::Abort(Abort {
                txn,
                attempt,
                keys: read_keys(&mut r)?,
            }),
            _ => OccMessage::AbortReply(AbortReply {
                txn,
                attempt,
                shard: r.u16("shard")?,
            }),
        };
        r.finish()?;
        Ok(m)
    }
}

fn head(tag: u8, txn: u64, attempt: u32) -> Writer {
    let mut w = Writer::with_tag(tag);
    w.u64(txn);
    w.u32(attempt);
    w
}

fn keys(w: &mut Writer, keys: &[Bytes]) {
    w.count(keys.len());
    keys.iter().for_each(|k| w.bytes(k));
}

fn key_versions(w: &mut Writer, items: &[(Bytes, u64)]) {
    w.count(items.len());
    for (key, version) in items {
        w.bytes(key);
        w.u64(*version);
    }
}

fn option_bytes(w: &mut Writer, v: Option<&[u8]>) {
    match v {
        None => w.u8(0),
        Some(v) => {
            w.u8(1);
            w.bytes(v);
        }
    }
}

fn option_u64(w: &mut Writer, v: Option<u64>) {
    match v {
        None => w.u8(0),
        Some(v) => {
            w.u8(1);
            w.u64(v);
        }
    }
}

fn read_bool(r: &mut Reader<'_>, what: &'static str) -> Result<bool, DecodeError> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        tag => Err(DecodeError::UnknownTag { what, tag }),
    }
}

fn read_option_bytes(r: &mut Reader<'_>) -> Result<Option<Bytes>, DecodeError> {
    Ok(match r.u8("value presence")? {
        0 => None,
        1 => Some(r.bytes("value")?),
        tag => {
            return Err(DecodeError::UnknownTag {
                what: "value presence",
                tag,
            });
        }
    })
}

fn read_option_u64(r: &mut Reader<'_>) -> Result<Option<u64>, DecodeError> {
    Ok(match r.u8("version presence")? {
        0 => None,
        1 => Some(r.u64("expected version")?),
        tag => {
            return Err(DecodeError::UnknownTag {
                what: "version presence",
                tag,
            });
        }
    })
}

fn read_keys(r: &mut Reader<'_>) -> Result<Vec<Bytes>, DecodeError> {
    let n = r.count("keys", 4)?;
    (0..n).map(|_| r.bytes("key")).collect()
}

fn read_items(r: &mut Reader<'_>) -> Result<Vec<ReadItem>, DecodeError> {
    let n = r.count("read items", 10)?;
    (0..n)
        .map(|_| {
            Ok(ReadItem {
                value: read_option_bytes(r)?,
                version: r.u64("version")?,
                locked: read_bool(r, "locked")?,
            })
        })
        .collect()
}

fn read_lock_items(r: &mut Reader<'_>) -> Result<Vec<(Bytes, Option<u64>)>, DecodeError> {
    let n = r.count("lock items", 5)?;
    (0..n)
        .map(|_| Ok((r.bytes("key")?, read_option_u64(r)?)))
        .collect()
}

fn read_key_versions(r: &mut Reader<'_>) -> Result<Vec<(Bytes, u64)>, DecodeError> {
    let n = r.count("key versions", 12)?;
    (0..n).map(|_| Ok((r.bytes("key")?, r.u64("version")?))).collect()
}

fn read_versions(r: &mut Reader<'_>) -> Result<Vec<u64>, DecodeError> {
    let n = r.count("versions", 8)?;
    (0..n).map(|_| r.u64("version")).collect()
}

fn read_ops(r: &mut Reader<'_>) -> Result<Vec<(u16, Op)>, DecodeError> {
    let n = r.count("ops", 7)?;
    (0..n).map(|_| Ok((r.u16("op index")?, read_op(r)?))).collect()
}

fn read_results(r: &mut Reader<'_>) -> Result<Vec<(u16, OpResult)>, DecodeError> {
    let n = r.count("results", 3)?;
    (0..n)
        .map(|_| Ok((r.u16("result index")?, read_result(r)?)))
        .collect()
}

#[cfg(test)]
mod tests;
