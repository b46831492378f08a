//! The one interface every store implements, and the errors it may return.

use crate::command::Command;
use crate::reply::Reply;

/// A key-value store reached through the Redis-protocol front (or called directly).
///
/// One entry point takes a batch: the commands one client connection pipelined, in order, so that a
/// store can overlap their round trips (NetChain sends every query of the batch before it waits).
pub trait Store: Send + Sync + 'static {
    /// Runs `batch` and returns one result per command, in the same order (`len()` equal).
    ///
    /// Each command must take effect as if the batch ran one command after another: a `GET` after a
    /// `SET` of the same key in the same batch sees that value. Nothing more is promised across
    /// keys (an `MGET` reads key by key, a `DEL` of several keys deletes them one by one), unless a
    /// store documents more. A command the store does not implement gets
    /// [`StoreError::Unsupported`]; [`Command`] grows new variants, so match it with a `_` arm.
    fn execute(&self, batch: &[Command]) -> Vec<Result<Reply, StoreError>>;

    /// Runs `commands` as one transaction (a client's `MULTI` ... `EXEC`): all of them take effect
    /// atomically and in order, as if no other command ran between the first and the last, and
    /// each sees the effects of those before it (a `GET` after a `SET` of the same key sees it).
    ///
    /// - `Ok(results)`: one result per command, in order (`len()` equal), as `EXEC` answers. As in
    ///   Redis, a command that fails when it runs (`INCR` of a non-integer: an `Err` in its slot)
    ///   changes nothing itself and does not undo or stop the others.
    /// - `Err(error)`: the transaction as a whole was refused and none of it took effect (for
    ///   [`StoreError::OutcomeUnknown`]: all of it or none, the caller cannot tell which).
    ///
    /// The server calls it only with commands that passed [`Command::check_limits`], and never
    /// with an empty slice. The default refuses every transaction with
    /// `StoreError::Unsupported("EXEC")`, for stores that cannot make several commands atomic.
    fn transaction(&self, commands: &[Command]) -> Result<Vec<Result<Reply, StoreError>>, StoreError> {
        let _ = commands;
        Err(StoreError::Unsupported("EXEC".into()))
    }

    /// The store's name, limits and the lines `INFO` prints for it.
    fn describe(&self) -> StoreInfo;
}

/// What a store says about itself: `INFO` prints it, the server enforces its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// Short name, e.g. `memory` or `netchain`.
    pub name: String,
    /// Longest key accepted, in bytes. The server answers a longer one with
    /// [`StoreError::KeyTooLarge`] before the store sees it.
    pub key_bytes_max: usize,
    /// Longest value accepted, in bytes ([`StoreError::ValueTooLarge`] beyond it).
    pub value_bytes_max: usize,
    /// Extra `name:value` lines for the `# Store` section of `INFO` (names without `:` or line breaks).
    pub fields: Vec<(String, String)>,
}

/// Why a store did not carry out a command. Each maps to one Redis error reply
/// ([`StoreError::to_redis_error`]); docs/redis.md lists them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store does not implement this command (its Redis name, e.g. `MSET`). Nothing happened.
    #[error("command '{0}' is not supported by this store")]
    Unsupported(String),
    /// The key is longer than the store takes. Nothing happened.
    #[error("key of {len_bytes} bytes is over this store's limit of {max_bytes} bytes")]
    KeyTooLarge { len_bytes: usize, max_bytes: usize },
    /// The value is longer than the store takes. Nothing happened.
    #[error("value of {len_bytes} bytes is over this store's limit of {max_bytes} bytes")]
    ValueTooLarge { len_bytes: usize, max_bytes: usize },
    /// The store could not serve the command now (no chain for the key, a replica group being
    /// recovered...) and knows that it did not take effect: retrying is safe.
    #[error("store unavailable, the command did not take effect: {0}")]
    Unavailable(String),
    /// A write was sent but no answer came in time: it may or may not have taken effect. A client
    /// must read the key to learn which (a retried write is a new operation).
    #[error("outcome unknown, the write may or may not have taken effect: {0}")]
    OutcomeUnknown(String),
    /// A bug or a broken invariant inside the store.
    #[error("internal error: {0}")]
    Internal(String),
    /// `INCR`/`INCRBY`... of a key whose value is not the decimal form of an `i64` (Redis's
    /// text and rule). Nothing happened.
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    /// `INCR`/`INCRBY`... whose result would leave the `i64` range (Redis's text). Nothing
    /// happened.
    #[error("increment or decrement would overflow")]
    Overflow,
    /// The keys of one command live in different partitions of a partitioned store
    /// ([`replicated::partition_of_command`](crate::replicated::partition_of_command)). Nothing
    /// happened. Printed as Redis Cluster prints it, so that clients recognise it.
    #[error("Keys in request don't hash to the same slot")]
    CrossSlot,
    /// The command reached a partition that does not hold its keys (a client or coordinator
    /// routed it wrongly). Nothing happened.
    #[error("command for partition {key_partition} reached partition {partition}")]
    WrongPartition {
        /// The partition of the command's keys.
        key_partition: u16,
        /// The partition it reached.
        partition: u16,
    },
    /// A replicated store already executed a later request of this client (exactly-once
    /// sessions): this older one is not executed again. Nothing happened.
    #[error("stale request {request} of client {client}: request {last_request} was already applied")]
    StaleRequest {
        /// The client's id.
        client: u64,
        /// The refused request's id.
        request: u64,
        /// The id of the client's last executed request, higher.
        last_request: u64,
    },
}

impl StoreError {
    /// The Redis error line for this error, without the leading `-` and the trailing CRLF: the
    /// first word is the error code clients see (`ERR`, `UNAVAILABLE`, `UNKNOWN`).
    pub fn to_redis_error(&self) -> String {
        let code = match self {
            StoreError::Unavailable(_) => "UNAVAILABLE",
            StoreError::OutcomeUnknown(_) => "UNKNOWN",
            StoreError::CrossSlot => "CROSSSLOT",
            StoreError::WrongPartition { .. } => "WRONGPARTITION",
            StoreError::StaleRequest { .. } => "STALE",
            StoreError::Unsupported(_)
            | StoreError::KeyTooLarge { .. }
            | StoreError::ValueTooLarge { .. }
            | StoreError::Internal(_)
            | StoreError::NotAnInteger
            | StoreError::Overflow => "ERR",
        };
        // An error line ends at the first line break: keep a store's reason on one line.
        let text = self.to_string().replace(['\r', '\n'], " ");
        format!("{code} {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_redis_code() {
        let cases = [
            (
                StoreError::Unsupported("MSET".into()),
                "ERR command 'MSET' is not supported by this store",
            ),
            (
                StoreError::KeyTooLarge {
                    len_bytes: 17,
                    max_bytes: 16,
                },
                "ERR key of 17 bytes is over this store's limit of 16 bytes",
            ),
            (
                StoreError::ValueTooLarge {
                    len_bytes: 200,
                    max_bytes: 128,
                },
                "ERR value of 200 bytes is over this store's limit of 128 bytes",
            ),
            (
                StoreError::Unavailable("no chain".into()),
                "UNAVAILABLE store unavailable, the command did not take effect: no chain",
            ),
            (
                StoreError::OutcomeUnknown("timed out after 3 tries".into()),
                "UNKNOWN outcome unknown, the write may or may not have taken effect: timed out after 3 tries",
            ),
            (StoreError::Internal("bug".into()), "ERR internal error: bug"),
            (
                StoreError::NotAnInteger,
                "ERR value is not an integer or out of range",
            ),
            (StoreError::Overflow, "ERR increment or decrement would overflow"),
            (
                StoreError::CrossSlot,
                "CROSSSLOT Keys in request don't hash to the same slot",
            ),
            (
                StoreError::WrongPartition {
                    key_partition: 3,
                    partition: 1,
                },
                "WRONGPARTITION command for partition 3 reached partition 1",
            ),
            (
                StoreError::StaleRequest {
                    client: 7,
                    request: 2,
                    last_request: 5,
                },
                "STALE stale request 2 of client 7: request 5 was already applied",
            ),
        ];
        for (error, line) in &cases {
            assert_eq!(&error.to_redis_error(), line);
        }
        let mut covered: Vec<usize> = cases.iter().map(|(error, _)| variant_index(error)).collect();
        covered.sort_unstable();
        covered.dedup();
        assert_eq!(covered, (0..VARIANTS).collect::<Vec<_>>(), "one case per variant");
    }

    const VARIANTS: usize = 11;

    /// No `_` arm: a new variant does not compile until it is given an index, and then
    /// [`each_error_has_its_redis_code`] fails until it has a case.
    fn variant_index(error: &StoreError) -> usize {
        match error {
            StoreError::Unsupported(_) => 0,
            StoreError::KeyTooLarge { .. } => 1,
            StoreError::ValueTooLarge { .. } => 2,
            StoreError::Unavailable(_) => 3,
            StoreError::OutcomeUnknown(_) => 4,
            StoreError::Internal(_) => 5,
            StoreError::NotAnInteger => 6,
            StoreError::Overflow => 7,
            StoreError::CrossSlot => 8,
            StoreError::WrongPartition { .. } => 9,
            StoreError::StaleRequest { .. } => 10,
        }
    }

    #[test]
    fn a_reason_with_line_breaks_stays_on_one_line() {
        let line = StoreError::Internal("a\r\nb".into()).to_redis_error();
        assert_eq!(line, "ERR internal error: a  b");
    }
}
