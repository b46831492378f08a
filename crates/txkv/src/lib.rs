//! A sharded, replicated, transactional key-value store on 1Pipe (paper 000, sections 2.2 and
//! 7.3.1), built on the public `onepipe` API as an application would be, with the baselines it
//! is compared against on the same fabric.
//!
//! - [`Layout`]: keys hashed over shards, each replicated on `replicas` server processes.
//! - [`Txn`]: one-shot transactions of independent operations (GET, PUT, DEL, INCRBY).
//! - [`Server`]: a replica; executes requests at their position in 1Pipe's total order, so
//!   transactions never lock and never abort.
//! - [`Client`]: one scattering per transaction, best effort for reads, reliable for writes to
//!   every replica at once (1-RTT replication with checksums, paper 2.2.2).
//!
//! The state machines are sans-IO: time is an input, nothing here reads a clock, opens a
//! socket or starts a thread; the runtimes (inproc, udp, simulator) drive them. docs/txkv.md
//! is the user's page.

pub mod client;
pub mod codec;
pub mod engine;
pub mod front;
pub mod layout;
pub mod occ;
pub mod run;
pub mod server;
pub mod state;
pub mod txn;

pub use client::{Client, ClientConfig, ClientCounters, Outgoing, SnapshotResult, SubmitError};
pub use engine::{ClientEngine, ServerEngine};
pub use layout::{Layout, LayoutError};
pub use occ::{OccClient, OccClientConfig, OccServer, OccServerConfig};
pub use server::{Ordering, Server, ServerConfig, ServerCounters, Service};
pub use state::ShardState;
pub use txn::{Completion, Op, OpResult, Outcome, Txn};
