//! The replicated key-value store's state machine: what each replica (a Paxos learner) of
//! onepipe's in-network Paxos store runs over the agreed log.
//!
//! - A client's command travels as an [`Envelope`] (client id, request id, command), encoded
//!   by [`Envelope::encode`]; the log of partition [`partition_of_command`] decides it.
//! - A replica opens a [`ReplicaDb`] (one fjall database) and takes a [`PartitionState`] per
//!   partition, each applying its log in instance order with
//!   [`apply_batch`](PartitionState::apply_batch): one atomic write per batch, persisted as
//!   [`SyncMode`] says, then one [`Applied`] per command with its reply, encoded by
//!   [`encode_reply`].
//! - Client sessions give exactly-once execution: a retried request that was decided twice
//!   runs once, and its second copy gets the first's reply.
//! - Each partition keeps its last decided values for peers catching up
//!   ([`log_range`](PartitionState::log_range)); a fed replica applies them with
//!   [`ingest`](PartitionState::ingest), the same path.
//!
//! Commands behave as on [`MemStore`](crate::MemStore) (the same code runs them), with its
//! default limits ([`KEY_BYTES_MAX`], [`VALUE_BYTES_MAX`]). The formats (envelope, reply,
//! partition hash) are part of the store: every client and replica must agree on them.

mod answer;
mod codec;
mod db;
mod envelope;
mod progress;
mod sessions;
mod state;
mod step;

pub use answer::{REPLY_VERSION, decode_reply, encode_reply};
pub use codec::{EnvelopeError, REPLY_DEPTH_MAX};
pub use db::{ReplicaConfig, ReplicaDb, ReplicaError, SyncMode};
pub use envelope::{ENVELOPE_VERSION, Envelope, partition_of, partition_of_command};
pub use progress::Counters;
pub use state::{Applied, KEY_BYTES_MAX, PartitionState, VALUE_BYTES_MAX};

#[cfg(test)]
mod tests;
