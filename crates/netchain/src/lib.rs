//! NetChain (Jin et al., *NetChain: Scale-Free Sub-RTT Coordination*, NSDI 2018): a strongly
//! consistent key-value store for coordination, chain-replicated inside the switches.
//!
//! Sans-IO like every protocol crate here: the switch program ([`switch`]), the client agent
//! ([`agent`]) and the controller ([`controller`]) take time as an input and own no socket,
//! thread or clock, so the simulator and the runtimes (inproc, udp) drive the same code.
//! docs/netchain.md is the user's page.

pub mod agent;
pub mod controller;
pub mod key;
pub mod ring;

pub use agent::{Agent, AgentConfig, Attempt, Call, CallId, Completion, Outcome, Refusal, SubmitError};
pub use controller::{Controller, ControllerConfig, Event};
pub use key::{Key, KeyError};
pub use ring::{Ring, RingError};
pub mod switch;
#[cfg(test)]
mod testing;

pub use switch::{NetchainSwitch, SwitchConfig};
