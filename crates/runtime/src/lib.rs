//! The runtimes that drive any [`onepipe_fabric::Node`]: threads, sockets and the OS clock live
//! here and nowhere below.
//!
//! - [`inproc`]: a whole topology inside one process, on a small worker pool, with links as
//!   bounded queues (seeded loss, duplication and jitter optional).
//! - [`udp`]: nodes as OS processes (or threads) with their own UDP sockets, links made
//!   lossless by per-link credits.
//!
//! The simulator (the `onepipe-sim` crate) is the third runtime, in virtual time.

pub mod inproc;
pub mod udp;
