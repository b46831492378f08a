//! The small fabric every node target runs in: two leaves of two hosts under two spines, so
//! that a leaf has host ports, uplinks and ECMP choices, and a spine has only downlinks.

use onepipe_fabric::{Routes, Topology, Wiring, routing};
use onepipe_proto::switch::{Switch, SwitchConfig, SwitchNode};
use onepipe_wire::{Duration, Instant};
use std::sync::OnceLock;

/// Where every target's clock starts: far from zero and from the 48-bit wrap, so that
/// timestamps a little before and after it are both ordinary.
pub const START: Instant = Instant::from_nanos(1_000_000_000);

/// The wiring and each switch's routing tables.
pub struct Fabric {
    pub wiring: Wiring,
    pub routes: Vec<Routes>,
}

/// The shared fixture, built once per process.
pub fn fabric() -> &'static Fabric {
    static FABRIC: OnceLock<Fabric> = OnceLock::new();
    FABRIC.get_or_init(|| {
        let topology = Topology::leaf_spine(2, 2, 2).expect("a valid preset");
        let wiring = Wiring::new(topology, 1).expect("a valid wiring");
        let routes = routing::build(&wiring).expect("a connected fabric");
        Fabric { wiring, routes }
    })
}

/// A switch configuration with short intervals, so that inputs die and beacons leave within
/// the few microseconds a fuzz input spans.
pub fn switch_config() -> SwitchConfig {
    SwitchConfig {
        beacon_interval: Duration::from_micros(3),
        dead_after_intervals: 10,
        ecmp_seed: 7,
        promise_lead: Duration::ZERO,
        time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
        incarnation: onepipe_proto::Incarnation::Chip,
    }
}

/// Switch `id` of the fixture as the runtimes build it, started at [`START`].
pub fn switch_node(id: usize) -> SwitchNode {
    let f = fabric();
    Switch::new(id, &f.wiring, f.routes[id].clone(), switch_config(), START).into_node()
}
