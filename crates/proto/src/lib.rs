//! onepipe-proto: 1Pipe's state machines (Li et al., SIGCOMM 2021), sans-IO. Nothing here owns
//! a socket, a thread, a file or a clock: time comes in as `now`, and what a state machine has
//! to send or report comes out through its `poll_*` methods. The runtimes (`onepipe-runtime`,
//! the simulator `onepipe-sim`) drive the same code; the `onepipe` crate is the application's
//! API over them.
//!
//! - [`switch`]: the switch barrier pipeline (paper 4.1, 4.2).
//! - [`endpoint`]: the host endpoint (paper 4.1, 6.1), with the reliable service ([`reliable`])
//!   and the reorder buffer ([`reorder`]).
//! - [`controller`]: failure recovery decisions (paper 5.2) and their log.
//! - [`clock`]: a host's clock guards (monotonic, causal).
//! - [`Incarnation`]: where barriers are aggregated (chip, switch CPU, host representatives).
//! - [`plausible`]: the bound on how far ahead of a receiver's clock a barrier may be.

pub mod clock;
pub mod controller;
pub mod endpoint;
mod incarnation;
pub use onepipe_fabric::hash;
pub mod mgmt_outbox;
pub mod plausible;
pub mod reliable;
pub mod reorder;
pub mod representative;
mod scatter;
pub mod send_failure;
pub mod switch;
#[cfg(test)]
mod test_packets;

pub use endpoint::{Delivery, EndpointEvent, FailureReason, ProcessFailureError, SendError, SendFailure};
pub use incarnation::{Incarnation, representative_port};
pub use onepipe_wire::{Duration, Instant};
