//! Fuzz targets for every input onepipe reads from outside (issue 42, "never panic on
//! input"): the udp runtime's datagrams, 1Pipe frames, switches and hosts fed frames, the
//! management plane's messages and the nodes that take them, topology files, the
//! controller's log, NetChain's nodes, in-network Paxos's nodes, the
//! transactional store's replicas and clients, and client histories.
//!
//! Each target is a function of `&[u8]` that panics only on a bug: it feeds the bytes (or a
//! structured input drawn from them with [`arbitrary`]) to the real code and checks what
//! must hold (round trips, `invariants()` after every step, frames a node sends parse). The
//! same functions run under the stable harness (`cargo run -p onepipe-fuzz --profile fuzz --
//! run TARGET`, `src/main.rs`) and under cargo-fuzz (`fuzz/`, nightly); docs/fuzzing.md says
//! how to run each and how to add a target.

pub mod corpus;
pub mod fixture;
pub mod frames;
pub mod mutate;
pub mod targets;

/// A fuzz target: its name, the function that runs one input, and its seed corpus.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, in the order `all` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "datagram",
        run: targets::datagram::run,
        seeds: corpus::datagram,
    },
    Target {
        name: "frame",
        run: targets::frame::run,
        seeds: corpus::frame,
    },
    Target {
        name: "switch",
        run: targets::switch::run,
        seeds: corpus::structured,
    },
    Target {
        name: "endpoint",
        run: targets::endpoint::run,
        seeds: corpus::structured,
    },
    Target {
        name: "control",
        run: targets::control::run,
        seeds: corpus::control,
    },
    Target {
        name: "topology",
        run: targets::topology::run,
        seeds: corpus::topology,
    },
    Target {
        name: "controller_log",
        run: targets::controller_log::run,
        seeds: corpus::controller_log,
    },
    Target {
        name: "netchain",
        run: targets::netchain::run,
        seeds: corpus::structured,
    },
    Target {
        name: "paxos",
        run: targets::paxos::run,
        seeds: corpus::structured,
    },
    Target {
        name: "txkv",
        run: targets::txkv::run,
        seeds: corpus::txkv,
    },
    Target {
        name: "cosy",
        run: targets::cosy::run,
        seeds: corpus::structured,
    },
    Target {
        name: "history",
        run: targets::history::run,
        seeds: corpus::history,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
