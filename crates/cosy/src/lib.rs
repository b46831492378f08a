//! cosy (paper 003, *partial communication synchrony*): a message of size s submitted at a_m is
//! completed, rejected or reported failed by a_m + delta, a bound known at submission, because
//! every message travels on virtual links reserved hop by hop (K per physical link, each B/K).
//!
//! Sans-IO like every protocol crate here: the switch program and the host library take time as
//! an input and own no socket, thread, clock or global RNG, so the simulator and the runtimes
//! (inproc, udp) drive the same code. docs/cosy.md is the user's page.
pub mod host;
pub mod switch;
#[cfg(test)]
mod testing;
pub mod theory;
pub mod timing;

pub use host::{
    Cause, Completion, CosyHost, Delivery, Flag, HostConfig, HostCounters, SubmitError, Submitted,
};
pub use switch::{CosySwitch, PortUse, SwitchConfig, SwitchCounters};
pub use timing::{Timing, TimingError};
