//! A controller group seen from outside: who leads it, and clearing its log, for a supervisor
//! (`onepipe up`) that starts replicas on a fresh fabric.

use crate::Keys;
use crate::client::{Client, EtcdError};
use crate::gateway::{DeleteRangeRequest, RangeRequest};

/// The id of the replica that leads the group under `prefix`, if one does.
pub fn leader(client: &Client, prefix: &str) -> Result<Option<String>, EtcdError> {
    let answer = client.range(&RangeRequest::key(&Keys::new(prefix).leader()))?;
    Ok(answer
        .kvs
        .first()
        .map(|kv| String::from_utf8_lossy(&kv.value.0).into_owned()))
}

/// Deletes the group's log under `prefix`: the records of a fabric that no longer runs, which
/// a new one's controller must not replay. The leader key is left alone; records being
/// written by a leader that still runs are deleted too, so check [`leader`] first.
pub fn delete_log(client: &Client, prefix: &str) -> Result<u64, EtcdError> {
    let range = RangeRequest::prefix(&Keys::new(prefix).log_prefix());
    let answer = client.delete_range(&DeleteRangeRequest {
        key: range.key,
        range_end: range.range_end,
    })?;
    Ok(answer.deleted.0.max(0) as u64)
}
