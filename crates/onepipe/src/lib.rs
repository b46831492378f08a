//! onepipe: 1Pipe (SIGCOMM 2021) in software. Causally and totally ordered unicast and
//! scattering over a fabric of software switches that aggregate barrier timestamps.
//!
//! - [`switch`]: the switch barrier pipeline (paper 4.1, 4.2), sans-IO.
//! - [`endpoint`]: the host endpoint (paper 4.1, 6.1), sans-IO.
//! - [`api`]: the paper's Table 1 API over the inproc runtime.
//! - [`controller`]: failure recovery decisions (paper 5.2), sans-IO, and their durable log.
//! - [`demo`]: the all-to-all broadcast run behind `onepipe demo`.

pub mod api;
pub mod clock;
pub mod control;
mod control_forward;
pub mod control_msg;
pub mod control_node;
pub mod controller;
pub mod demo;
mod demo_drain;
pub mod endpoint;
pub use onepipe_fabric::hash;
pub mod host;
mod mgmt_outbox;
pub mod reliable;
pub mod reorder;
mod reorder_slab;
mod scatter;
pub mod status;
pub mod switch;
pub mod system;
#[cfg(test)]
mod test_packets;
pub mod udp;
pub mod workload;

pub use api::FabricLost;
pub use endpoint::{Delivery, FailureReason, ProcessFailureError, SendError, SendFailure};
pub use onepipe_wire::{Duration, Instant};
