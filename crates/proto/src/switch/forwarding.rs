//! Where a switch sends a packet, and whether it may take it from the port it came in on.

use super::Switch;
use crate::hash::mix64;
use onepipe_fabric::routing::{NextHops, NoRoute};
use onepipe_fabric::{PortDirection, PortId, Route};
use onepipe_wire::packet::Packet;

impl Switch {
    /// Whether a packet from process `src` may come in on `port`: the reverse path check of
    /// routers (RFC 3704's strict mode) against this switch's own routes. A process hangs on
    /// one port of its ToR, which is where the ToR routes to it; upstream, the port must be one
    /// this switch would send toward the source. So a process can send data, ACKs, NAKs and
    /// recalls only in its own name: 1Pipe's receivers and senders act on the source a packet
    /// names (an ACK releases the named sender's buffer, a NAK fails its send). Beacons are
    /// not checked: they name no source and speak only for their link.
    pub fn source_matches(&self, port: PortId, src: u32) -> bool {
        self.routes.leads_to(src, port)
    }

    /// Where a data packet (data, NAK, prepare, ACK) goes: toward its destination, if its
    /// source may send in on `port`.
    pub(super) fn route_data(&self, port: PortId, packet: &Packet<&[u8]>) -> Route {
        if !self.source_matches(port, packet.src()) {
            return Route::Drop;
        }
        match self.choose_output(port as usize, packet) {
            // Nothing reaches a cut neighbour: a quarantined process must not hear commit
            // barriers before it recovers.
            Ok(out) if self.ports[out].cut => Route::Drop,
            Ok(out) => Route::Forward(out as PortId),
            Err(_) => Route::Drop,
        }
    }

    pub(super) fn choose_output(&self, in_port: usize, packet: &Packet<&[u8]>) -> Result<usize, NoRoute> {
        let hops = self.routes.next_hops(packet.dst())?;
        // Per-packet spraying: any choice keeps ordering correct, since barriers only need
        // per-link FIFO (paper 4.1).
        let hash = mix64(
            self.config.ecmp_seed
                ^ (packet.src() as u64) << 32
                ^ packet.msg_id().rotate_left(17)
                ^ (packet.frag_index() as u64) << 48
                ^ self.id as u64,
        );
        let out = hops.pick(hash) as usize;
        // A packet from above only ever goes down; anything else would loop.
        let from_above = self.ports[in_port].direction == PortDirection::Up;
        let goes_up = !matches!(hops, NextHops::Local(_)) && self.ports[out].direction == PortDirection::Up;
        if from_above && goes_up {
            return Err(NoRoute::NotBelow);
        }
        Ok(out)
    }
}
