//! Where a fabric aggregates barriers (paper 6.2). 1Pipe decouples barrier propagation from
//! forwarding: a switching chip that stamps every packet is the fastest place, but a switch
//! whose data plane only forwards still gives total order when its CPU, or a host standing in
//! for it, aggregates the barriers that beacons carry.

use onepipe_wire::Duration;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Incarnation {
    /// A programmable switching chip (6.2.1): every forwarded packet is stamped with the
    /// minimum over the inputs, and beacons fill idle links.
    #[default]
    Chip,
    /// The switch CPU (6.2.2): the data plane forwards and stamps nothing. Beacons are punted
    /// to the CPU, which takes each `delay` after it arrived (the kernel path and the
    /// computation), and sends beacons on every output each interval, busy or idle, and on
    /// news. Data and beacons share each link's FIFO, so a beacon still bounds what follows.
    SwitchCpu { delay: Duration },
    /// Host representatives (6.2.3): plain forwarding switches, and per switch a host that
    /// aggregates the beacons which cross that switch's links.
    Host,
}

/// The port of a switch that leads to its host representative (`Incarnation::Host`): two
/// past its fabric ports, since one past is its management port. `None` past the port
/// numbers (a switch of 65534 ports or more).
pub fn representative_port(fabric_ports: usize) -> Option<onepipe_fabric::PortId> {
    onepipe_fabric::PortId::try_from(fabric_ports + 1).ok()
}

impl Incarnation {
    /// Whether data packets carry barriers a receiver may take: only a chip stamps them on
    /// every hop. Elsewhere a data packet still holds what its sender wrote, a bound for its
    /// first link only, and receivers learn barriers from beacons alone.
    pub fn stamps_data(self) -> bool {
        self == Incarnation::Chip
    }

    /// How long a switch holds a beacon before its barrier counts (zero on a chip).
    pub fn cpu_delay(self) -> Duration {
        match self {
            Incarnation::SwitchCpu { delay } => delay,
            Incarnation::Chip | Incarnation::Host => Duration::ZERO,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Incarnation::Chip => "chip",
            Incarnation::SwitchCpu { .. } => "cpu",
            Incarnation::Host => "host",
        }
    }
}
