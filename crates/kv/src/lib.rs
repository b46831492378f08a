//! Stores behind one trait, and one Redis-protocol (RESP2) server over them.
//!
//! - [`Store`]: one entry point, [`Store::execute`], taking the batch of [`Command`]s one
//!   connection pipelined and giving one [`Reply`] or [`StoreError`] per command; and
//!   [`Store::transaction`] for `MULTI` ... `EXEC`, in the stores that make commands atomic.
//! - [`serve`]: the server redis-cli, redis-benchmark and client libraries talk to; a thread per
//!   connection, bounded connections, requests and batches; [`ServerHandle`] stops it.
//! - [`MemStore`]: the in-memory reference store, the model other stores are compared against.
//! - [`Snapshot`]: the whole store at one point, as `SNAPSHOT` answers it.
//! - [`netchain::NetchainStore`]: NetChain, through client agents running in its fabric.
//! - [`paxos::PaxosStore`]: the in-network Paxos store, through proposers running in its fabric.
//! - [`replicated`]: the durable state machine each replica of the in-network Paxos store runs
//!   over its agreed log, and the encodings of the commands and replies in that log.
//!
//! docs/redis.md lists the commands (with `CAS`, `CASNX`, `CAD`), the errors and the limits.

mod admin;
mod command;
mod fnv;
mod mem;
mod multi;
pub mod netchain;
pub mod paxos;
pub mod redis_tools;
pub mod replicated;
mod reply;
mod resp;
mod server;
mod snapshot;
mod store;

pub use bytes::{Bytes, BytesMut};
pub use command::{Command, CommandError, SetCondition};
pub use fnv::{Fnv1a, fnv1a};
pub use mem::MemStore;
pub use reply::Reply;
pub use server::{ServeConfig, ServerHandle, serve};
pub use snapshot::Snapshot;
pub use store::{Store, StoreError, StoreInfo};
