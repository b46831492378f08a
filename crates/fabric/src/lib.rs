//! The software fabric: topologies (presets and TOML files), wiring of processes to ports,
//! up/down routing with ECMP, the [`Node`] trait every participant implements, and the inproc
//! runtime that drives a whole topology inside one process on a small worker pool.
//!
//! Nothing here knows about 1Pipe: the switch barrier pipeline and the host endpoint live in the
//! `onepipe` crate and plug in through [`Node`].

pub mod hash;
pub mod inproc;
pub mod node;
pub mod routing;
pub mod topology;
pub mod udp;
pub mod wiring;

pub use node::{Either, Node, PortId, Route};
pub use routing::{NextHops, NoRoute, Routes, RoutingError};
pub use topology::{Topology, TopologyError};
pub use wiring::{DirectedLink, Peer, PortDirection, PortSpec, ProcessSpec, Wiring, WiringError};
