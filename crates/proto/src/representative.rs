//! A host representative (paper 6.2.3): the 1Pipe program of one switch, run on a host that
//! hangs on that switch, whose data plane only forwards (`switch/plain.rs`).
//!
//! The representative keeps the switch's registers, input by input, as the switch would:
//! the switch tunnels it every beacon that arrives, with the input port as link id, and sends
//! each beacon the representative makes out of the port its link id names. Its inputs time
//! out, are reported and are removed exactly as a switch's: a representative that fails is
//! seen by its neighbours' representatives as a switch that failed. What it costs is the
//! detour: a beacon crosses the switch-to-host link twice per hop (paper: "RTT between switch
//! and host + host processing delay" per hop).

use crate::Incarnation;
use crate::switch::{Switch, SwitchConfig};
use onepipe_fabric::{Hints, Node, PortId, Route, Routes, Wiring};
use onepipe_wire::Instant;
use onepipe_wire::packet::{Opcode, Packet};

/// A representative's one port, its link to its switch.
pub const UPLINK: PortId = 0;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepresentativeCounters {
    /// Frames that were not beacons, came on no port of its own, or named no input of the
    /// switch: a representative takes only what its switch tunnels.
    pub refused: u64,
}

pub struct Representative {
    program: Switch,
    /// Where the next search for a beacon to send starts, so that no input waits behind the
    /// lower-numbered ones.
    next_port: usize,
    counters: RepresentativeCounters,
}

impl Representative {
    /// The representative of switch `id` of `wiring`: its program aggregates as a chip would,
    /// on beacons only, since no data reaches it.
    pub fn new(
        id: usize,
        wiring: &Wiring,
        routes: Routes,
        config: SwitchConfig,
        now: Instant,
    ) -> Representative {
        let config = SwitchConfig {
            incarnation: Incarnation::Chip,
            ..config
        };
        Representative {
            program: Switch::new(id, wiring, routes, config, now),
            next_port: 0,
            counters: RepresentativeCounters::default(),
        }
    }

    /// The switch's 1Pipe program, as the management plane and the reports see it.
    pub fn program(&self) -> &Switch {
        &self.program
    }

    pub fn program_mut(&mut self) -> &mut Switch {
        &mut self.program
    }

    pub fn counters(&self) -> &RepresentativeCounters {
        &self.counters
    }

    pub fn invariants(&self) {
        self.program.invariants();
        assert!(self.next_port <= self.program.port_count());
    }
}

/// The switch input a frame from the uplink speaks for: its link id, if it is a beacon.
fn tunnelled_input(port: PortId, frame: &[u8]) -> Option<PortId> {
    let packet = Packet::new_checked(frame).ok()?;
    let beacon = port == UPLINK && packet.check_header() == Ok(Opcode::Beacon);
    beacon.then(|| packet.link_id())
}

impl Node for Representative {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        match tunnelled_input(port, frame) {
            Some(input) => self.program.classify(now, input, frame),
            None => Route::Drop,
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        match tunnelled_input(port, frame) {
            // The program checks the input is one of its ports and counts it otherwise.
            Some(input) => self.program.handle_frame(now, input, frame, route),
            None => self.counters.refused += 1,
        }
    }

    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if let Some(input) = tunnelled_input(port, frame) {
            self.program.handle_stalled(now, input, frame);
        }
    }

    /// The next beacon the program owes any of its outputs, addressed (link id) to that output
    /// for the switch to send it on.
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let n = self.program.port_count();
        if port != UPLINK || n == 0 {
            return None;
        }
        for k in 0..n {
            let out = (self.next_port + k) % n;
            if let Some(len) = self.program.poll_transmit(now, out as PortId, buf) {
                Packet::new_unchecked(&mut buf[..len]).set_link_id(out as PortId);
                self.next_port = (out + 1) % n;
                return Some(len);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.program.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.program.handle_timeout(now);
    }
}

impl Hints for Representative {
    fn wants_transmit(&self) -> bool {
        self.program.wants_transmit()
    }
}

#[cfg(test)]
mod tests;
