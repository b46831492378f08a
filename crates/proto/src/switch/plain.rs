//! The plain forwarding switch of host delegation (paper 6.2.3): a data plane that knows
//! nothing of barriers. It routes data as any switch does, and it has two tunnel rules for
//! beacons, which play the paper's IP-in-IP detour with the link id as the one inner header:
//! - a beacon that comes in on a fabric port goes to the representative's port, its link id
//!   set to the port it came in on (so the representative knows which input it speaks for);
//! - a beacon from the representative goes out of the port its link id names, stamped with
//!   the link id of the far end as any frame is.
//!
//! So a beacon between two representatives crosses exactly the link whose barrier it
//! carries, behind the data that link carried before it (links and queues are FIFO): the
//! argument of `cpu.rs` holds with the representative in place of the CPU. A switch
//! aggregates nothing, ticks nothing and times no link out: its representative does.

use super::Switch;
use onepipe_fabric::{PortId, Route};
use onepipe_wire::packet::{Opcode, Packet};

impl Switch {
    /// Where a plain switch sends a frame that passed the header check.
    pub(super) fn classify_plain(
        &self,
        port: PortId,
        opcode: Opcode,
        packet: &Packet<&[u8]>,
        rep: PortId,
    ) -> Route {
        if port == rep {
            let out = packet.link_id() as usize;
            return match self.ports.get(out) {
                Some(p) if opcode == Opcode::Beacon && !p.cut => Route::Forward(out as PortId),
                _ => Route::Drop,
            };
        }
        if self.ports.get(port as usize).is_none_or(|p| p.cut) {
            return Route::Drop;
        }
        match opcode {
            Opcode::Beacon => Route::Forward(rep),
            _ => self.route_data(port, packet),
        }
    }

    /// A frame through a plain switch: its link id rewritten for the next hop, and counted.
    pub(super) fn handle_plain(
        &mut self,
        port: PortId,
        packet: &mut Packet<&mut [u8]>,
        route: Route,
        rep: PortId,
    ) {
        match route {
            Route::Forward(out) if out == rep => {
                packet.set_link_id(port);
                self.counters.beacons_received += 1;
            }
            Route::Forward(out) => {
                packet.set_link_id(self.ports[out as usize].peer_port);
                if port == rep {
                    self.counters.beacons_sent += 1;
                } else {
                    self.counters.forwarded += 1;
                }
            }
            Route::Drop if port == rep => self.counters.no_route += 1,
            Route::Drop if self.ports.get(port as usize).is_some_and(|p| p.cut) => {
                self.counters.cut_frames += 1
            }
            Route::Drop if !self.source_matches(port, packet.src()) => self.counters.spoofed_source += 1,
            Route::Drop => self.counters.no_route += 1,
            // A plain switch takes nothing for itself.
            Route::Consume => self.counters.malformed += 1,
        }
    }
}
