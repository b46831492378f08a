//! Redis commands as transactions, and transaction results as Redis replies.

use bytes::Bytes;
use onepipe_kv::{Command, Reply, SetCondition, StoreError};

use crate::txn::{Op, OpResult};

/// The operations a command runs, or why this store cannot run it as a transaction.
pub fn ops_of(command: &Command) -> Result<Vec<Op>, StoreError> {
    Ok(match command {
        Command::Get { key } => vec![Op::Get { key: key.clone() }],
        Command::Set {
            key,
            value,
            condition: SetCondition::Always,
        } => vec![Op::Put {
            key: key.clone(),
            value: value.clone(),
        }],
        Command::Del { keys } => keys.iter().map(|key| Op::Del { key: key.clone() }).collect(),
        Command::MGet { keys } => keys.iter().map(|key| Op::Get { key: key.clone() }).collect(),
        Command::MSet { pairs } => pairs
            .iter()
            .map(|(key, value)| Op::Put {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
        Command::IncrBy { key, delta } => vec![Op::IncrBy {
            key: key.clone(),
            delta: *delta,
        }],
        Command::Set { .. } => return Err(StoreError::Unsupported("SET NX|XX".into())),
        other => return Err(StoreError::Unsupported(other.name().into())),
    })
}

/// The reply to `command` from the results of its operations, in order.
pub fn reply_of(command: &Command, results: &[OpResult]) -> Result<Reply, StoreError> {
    let value = |r: &OpResult| match r {
        OpResult::Value(Some(v)) => Reply::Bulk(v.clone()),
        _ => Reply::Nil,
    };
    Ok(match command {
        Command::Get { .. } => results.first().map(value).unwrap_or(Reply::Nil),
        Command::MGet { .. } => Reply::Array(results.iter().map(value).collect()),
        Command::Set { .. } | Command::MSet { .. } => Reply::Ok,
        Command::Del { .. } => {
            Reply::Integer(results.iter().filter(|r| **r == OpResult::Deleted(true)).count() as i64)
        }
        Command::IncrBy { .. } => match results.first() {
            Some(OpResult::Integer(n)) => Reply::Integer(*n),
            Some(OpResult::NotAnInteger) => return Err(StoreError::NotAnInteger),
            Some(OpResult::Overflow) => return Err(StoreError::Overflow),
            other => return Err(StoreError::Internal(format!("INCRBY answered {other:?}"))),
        },
        other => return Err(StoreError::Unsupported(other.name().into())),
    })
}

/// Whether a command reads the whole store (answered from a snapshot).
pub fn is_snapshot(command: &Command) -> bool {
    matches!(command, Command::Snapshot { .. } | Command::DbSize)
}

/// The reply of a whole-store command from a snapshot at `ts`.
pub fn snapshot_reply(command: &Command, ts: u64, pairs: Vec<(Bytes, Bytes)>) -> Reply {
    match command {
        Command::Snapshot { dump } => onepipe_kv::Snapshot {
            ts,
            pairs: pairs.into_iter().collect(),
        }
        .to_reply(*dump),
        _ => Reply::Integer(pairs.len() as i64),
    }
}
