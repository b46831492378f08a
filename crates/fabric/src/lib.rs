//! The software fabric, pure: topologies (presets and TOML files), wiring of processes to
//! ports, up/down routing with ECMP, the [`Node`] trait every participant implements, and the
//! [`Pipeline`] that makes a switch (or a host) out of several programs, one per protocol. The
//! runtimes that drive nodes (threads, sockets, the OS clock) are the `onepipe-runtime` crate.
//!
//! Nothing here knows about 1Pipe: its switch program and host endpoint live in the
//! `onepipe-proto` crate and plug in through [`Node`].

pub mod budget;
pub mod hash;
pub mod limits;
pub mod node;
pub mod pipeline;
pub mod routing;
pub mod switch_paths;
pub mod topology;
pub mod wiring;

pub use budget::{Beyond, Budgeted, ChipBudget, Excess, ProgramBudget, RegisterArray};
pub use node::{Either, Hints, Node, PRIORITY_CLASSES, PortId, Route};
pub use pipeline::{Pipeline, PipelineCounters, PipelineError};
pub use routing::{NextHops, NoRoute, Routes, RoutingError};
pub use switch_paths::SwitchPaths;
pub use topology::{EtcdFiles, Topology, TopologyError};
pub use wiring::{DirectedLink, Peer, PortDirection, PortSpec, ProcessSpec, Wiring, WiringError};
