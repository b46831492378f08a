//! onepipe: 1Pipe (SIGCOMM 2021) in software. Causally and totally ordered unicast and
//! scattering over a fabric of software switches that aggregate barrier timestamps.
//!
//! The state machines (switch, endpoint, controller) are the `onepipe-proto` crate; this crate
//! runs them for an application:
//! - [`api`]: the paper's Table 1 API over the inproc runtime, and over udp through [`udp::join`].
//! - [`control`]: the management plane between the controller and every node.
//! - [`host`]: a process in a runtime, its endpoint driven by an [`host::Application`].
//! - [`embed`]: a whole system in this process, its processes applications inside the
//!   runtime's workers, with a controller.

pub mod api;
pub mod control;
mod control_forward;
pub mod control_msg;
pub mod control_node;
pub mod embed;
pub mod file_store;
pub mod host;
pub mod keys;
pub mod status;
pub mod supervise;
pub mod system;
pub mod udp;

pub use api::FabricLost;
pub use onepipe_fabric::Topology;
pub use onepipe_proto::endpoint::{
    Delivery, Endpoint, EndpointConfig, FailureReason, ProcessFailureError, SendError, SendFailure,
};
pub use onepipe_wire::{Duration, Instant};
