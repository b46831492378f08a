//! A plain switch for the baselines: forwards every frame towards its destination process over
//! the fabric's up/down routes (crates/fabric/src/routing.rs), with no barrier logic.
//!
//! ECMP picks one of the equal-cost next hops by a hash of (src, dst), salted per switch so that
//! successive layers do not make correlated choices. One flow therefore keeps one path, and one
//! path is FIFO: frames of one sender to one receiver arrive in the order they were sent, which
//! the Lamport baseline relies on and which keeps sequenced copies in order.
//!
//! In the switch-sequencer baseline, requests (`SwitchRequest`, addressed to no process) climb
//! towards the sequencer switch over `toward_sequencer`, the up-ports from which it is reachable
//! going only up; a sender's requests hash on the sender alone, so they keep one path too.

use crate::frame::{FrameKind, Header};
use crate::workload::mix64;
use onepipe_fabric::{Hints, Node, PortId, Route, Routes};
use onepipe_wire::Instant;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    pub forwarded: u64,
    pub malformed: u64,
    /// Well-formed frames with nowhere to go (unknown process, no path up to the sequencer).
    pub no_route: u64,
    /// Sequencer switch only: messages numbered, requests refused as duplicates, and requests
    /// dropped because its store was full.
    pub stamped: u64,
    pub duplicates: u64,
    pub overflow: u64,
    /// Sequencer switch only: copies it originated.
    pub frames_sent: u64,
}

#[derive(Clone, Debug)]
pub struct Router {
    routes: Routes,
    salt: u64,
    /// Up-ports that lead to the sequencer switch (empty: none, or this is it).
    toward_sequencer: Vec<u16>,
    pub(crate) stats: RouterStats,
}

impl Router {
    pub fn new(switch: usize, routes: Routes, toward_sequencer: Vec<u16>) -> Router {
        Router {
            routes,
            salt: mix64(switch as u64 ^ 0x5eed_0fba_5e00),
            toward_sequencer,
            stats: RouterStats::default(),
        }
    }

    pub fn stats(&self) -> &RouterStats {
        &self.stats
    }

    /// The port a frame leaves on, if any.
    pub fn port_for(&self, h: &Header) -> Option<PortId> {
        let hash = mix64(((u64::from(h.src) << 32) | u64::from(h.dst)) ^ self.salt);
        if h.kind == FrameKind::SwitchRequest {
            let up = &self.toward_sequencer;
            if up.is_empty() {
                return None;
            }
            return Some(up[(((hash >> 32) * up.len() as u64) >> 32) as usize]);
        }
        Some(self.routes.next_hops(h.dst).ok()?.pick(hash))
    }
}

impl Node for Router {
    fn classify(&self, _now: Instant, _port: PortId, frame: &[u8]) -> Route {
        match Header::parse(frame).ok().and_then(|h| self.port_for(&h)) {
            Some(p) => Route::Forward(p),
            None => Route::Drop,
        }
    }

    fn handle_frame(&mut self, _now: Instant, _port: PortId, frame: &mut [u8], route: Route) {
        match route {
            Route::Forward(_) => self.stats.forwarded += 1,
            _ if Header::parse(frame).is_err() => self.stats.malformed += 1,
            _ => self.stats.no_route += 1,
        }
    }

    fn poll_transmit(&mut self, _now: Instant, _port: PortId, _buf: &mut [u8]) -> Option<usize> {
        None
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}
}

impl Hints for Router {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::NO_PROCESS;
    use onepipe_fabric::{Peer, Topology, Wiring, routing};

    fn data(src: u32, dst: u32) -> Vec<u8> {
        let h = Header {
            kind: FrameKind::Data,
            src,
            dst,
            origin: src,
            seq: 1,
            msg_id: 0,
            sent_ns: 0,
            payload_len: 8,
        };
        let mut f = vec![0; h.frame_len()];
        h.emit(&mut f);
        f
    }

    /// Every (src, dst) flow reaches its destination on one path, up then down.
    #[test]
    fn flows_reach_their_destination_on_one_path() {
        let w = Wiring::new(Topology::paper_testbed(), 1).unwrap();
        let tables = routing::build(&w).unwrap();
        let routers: Vec<Router> = tables
            .into_iter()
            .enumerate()
            .map(|(s, r)| Router::new(s, r, Vec::new()))
            .collect();
        for (src, dst) in [(0u32, 31u32), (5, 6), (17, 3), (9, 9)] {
            let path = |routers: &[Router]| {
                let f = data(src, dst);
                let (mut at, mut port) = (w.processes[src as usize].tor, w.processes[src as usize].tor_port);
                let mut hops = Vec::new();
                loop {
                    let Route::Forward(out) = routers[at].classify(Instant::ZERO, port, &f) else {
                        panic!("dropped at {at}");
                    };
                    hops.push((at, out));
                    match w.switch_ports[at][out as usize].peer {
                        Peer::Process(p) => {
                            assert_eq!(p, dst);
                            return hops;
                        }
                        Peer::Switch { switch, port: p } => (at, port) = (switch, p),
                    }
                    assert!(hops.len() < 8, "loop");
                }
            };
            assert_eq!(path(&routers), path(&routers));
        }
    }

    #[test]
    fn malformed_and_unroutable_frames_are_dropped_and_counted() {
        let w = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
        let mut r = Router::new(0, routing::build(&w).unwrap().remove(0), Vec::new());
        let now = Instant::ZERO;
        for mut f in [vec![1, 2, 3], data(0, 7), {
            let mut f = data(0, NO_PROCESS);
            f[1] = FrameKind::SwitchRequest as u8;
            f
        }] {
            let route = r.classify(now, 0, &f);
            assert_eq!(route, Route::Drop);
            r.handle_frame(now, 0, &mut f, route);
        }
        let mut f = data(0, 1);
        let route = r.classify(now, 0, &f);
        assert_eq!(route, Route::Forward(1));
        r.handle_frame(now, 0, &mut f, route);
        let s = r.stats();
        assert_eq!((s.malformed, s.no_route, s.forwarded), (1, 2, 1));
    }
}
