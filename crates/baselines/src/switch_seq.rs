//! Switch sequencer (paper 7.2, "programmable switch" sequencer, as in NOPaxos/Eris): one
//! designated switch numbers every broadcast.
//!
//! Packet flow: a sender sends its broadcast once, as a `SwitchRequest` addressed to no
//! process; every switch below the sequencer switch sends it up towards it (only up: the up-ports
//! from which the sequencer is reachable going up, found from the wiring); the sequencer switch
//! gives it the next global sequence number and originates one `Data` copy per process (the
//! sender included), which the routers carry down like any frame. Every process delivers in
//! sequence order.
//!
//! The sequencer defaults to the first switch of the highest layer that every rack reaches by
//! going up (the first core of a fat-tree, the first spine of a leaf-spine, the only switch of a
//! single rack), so requests never detour down and up again.
//!
//! What bounds throughput: the sequencer switch originates N copies per message on its down
//! ports (where the paper's switch pipeline would multicast), so its links and its node in the
//! runtime carry N times the offered load; far later than a host sequencer's one link.
//!
//! Copies are written from one store of numbered messages, like a switch's shared buffer: each
//! output port walks the store in number order with its own cursor over the processes it
//! reaches, and a message is freed once every port has sent its copies. A port may run at most
//! `lead` messages ahead of the slowest one. Without that bound a slow port would let the
//! senders behind the fast ports go on and the store grow without limit; with it, messages
//! beyond the lead have no copy out yet, so their senders wait on their windows and the store
//! holds at most processes x window + lead messages (the default capacity is twice processes x
//! window, and the lead half of it). Copies to one process always leave on the same port and
//! carry the switch as `src`, so routers keep them on one path: they arrive in number order.
//! A port held back by the lead returns no frame; it is asked again when the runtime next polls
//! the node's ports (the inproc runtime on every visit, the simulator whenever one of the
//! node's ports goes idle), which the slowest port's progress guarantees.

use crate::BaselineError;
use crate::frame::{FrameKind, Header, NO_PROCESS};
use crate::host::Core;
use crate::host_seq::FIRST_SEQ;
use crate::out::Dest;
use crate::reorder::{Pending, SeqReorder};
use crate::router::{Router, RouterStats};
use crate::workload::Offer;
use onepipe_fabric::{Hints, Node, Peer, PortDirection, PortId, Route, Wiring};
use onepipe_wire::Instant;
use std::collections::VecDeque;

/// The sequencer switch and, per switch, the up-ports towards it.
pub fn sequencer_uplinks(
    wiring: &Wiring,
    requested: Option<usize>,
) -> Result<(usize, Vec<Vec<u16>>), BaselineError> {
    let switches = &wiring.topology.switches;
    // Switches that have processes under them: every one must reach the sequencer.
    let racks: Vec<usize> = (0..switches.len())
        .filter(|&s| {
            wiring.switch_ports[s]
                .iter()
                .any(|p| matches!(p.peer, Peer::Process(_)))
        })
        .collect();
    let try_one = |target: usize| -> Option<Vec<Vec<u16>>> {
        let mut order: Vec<usize> = (0..switches.len()).collect();
        // Higher layers first, so that every up-neighbour is decided before its children.
        order.sort_by_key(|&s| std::cmp::Reverse(switches[s].layer));
        let mut reaches = vec![false; switches.len()];
        let mut up_ports = vec![Vec::new(); switches.len()];
        for s in order {
            if s == target {
                reaches[s] = true;
                continue;
            }
            for (port, spec) in wiring.switch_ports[s].iter().enumerate() {
                if let (Peer::Switch { switch, .. }, PortDirection::Up) = (spec.peer, spec.direction)
                    && reaches[switch]
                {
                    up_ports[s].push(port as u16);
                }
            }
            reaches[s] = !up_ports[s].is_empty();
        }
        racks.iter().all(|&r| reaches[r]).then_some(up_ports)
    };
    if let Some(s) = requested {
        if s >= switches.len() {
            return Err(BaselineError::SequencerSwitch {
                switch: s,
                reason: "no such switch",
            });
        }
        return try_one(s).map(|t| (s, t)).ok_or(BaselineError::SequencerSwitch {
            switch: s,
            reason: "some rack cannot reach it going only up",
        });
    }
    let mut candidates: Vec<usize> = (0..switches.len()).collect();
    candidates.sort_by_key(|&s| (std::cmp::Reverse(switches[s].layer), s));
    candidates
        .into_iter()
        .find_map(|s| try_one(s).map(|t| (s, t)))
        .ok_or(BaselineError::NoSequencerSwitch)
}

/// A numbered message waiting for its copies to leave.
#[derive(Clone, Copy, Debug)]
struct Stamped {
    origin: u32,
    msg_id: u64,
    sent_ns: u64,
    payload_len: u16,
    /// Ports that still have copies of it to send.
    ports_left: u16,
}

/// One output port's walk over the store.
#[derive(Clone, Debug, Default)]
struct PortCursor {
    /// Processes whose copies leave on this port.
    dests: Vec<u32>,
    /// The number whose copies this port sends now, and the next destination among `dests`.
    seq: u64,
    index: usize,
}

#[derive(Debug)]
pub struct SequencerSwitch {
    router: Router,
    next_seq: u64,
    /// Number of the front of `store`.
    base_seq: u64,
    store: VecDeque<Stamped>,
    capacity: usize,
    ports: Vec<PortCursor>,
    active_ports: u16,
    /// How far (in messages) a port may run ahead of the slowest port.
    lead: u64,
    /// A lower bound of the slowest active port's number (refreshed when a port hits the lead).
    slowest: u64,
    /// Highest message id numbered per origin (duplicated requests are refused).
    last_stamped: Vec<Option<u64>>,
}

impl SequencerSwitch {
    pub fn new(router: Router, port_count: usize, process_count: u32, capacity: usize) -> SequencerSwitch {
        let mut ports = vec![PortCursor::default(); port_count];
        for d in 0..process_count {
            let copy = Header {
                kind: FrameKind::Data,
                src: NO_PROCESS,
                dst: d,
                origin: 0,
                seq: 0,
                msg_id: 0,
                sent_ns: 0,
                payload_len: 0,
            };
            // Routing was checked to reach every process from every switch.
            if let Some(p) = router.port_for(&copy).filter(|&p| (p as usize) < port_count) {
                ports[p as usize].dests.push(d);
            }
        }
        for p in &mut ports {
            p.seq = FIRST_SEQ;
        }
        let active_ports = ports.iter().filter(|p| !p.dests.is_empty()).count() as u16;
        SequencerSwitch {
            router,
            next_seq: FIRST_SEQ,
            base_seq: FIRST_SEQ,
            store: VecDeque::new(),
            capacity: capacity.max(1),
            ports,
            active_ports,
            lead: (capacity / 2).max(1) as u64,
            slowest: FIRST_SEQ,
            last_stamped: vec![None; process_count as usize],
        }
    }

    pub fn stats(&self) -> &RouterStats {
        self.router.stats()
    }

    /// Messages numbered and not yet copied to every process.
    pub fn stored(&self) -> usize {
        self.store.len()
    }

    fn stamp(&mut self, h: &Header) {
        let stats = &mut self.router.stats;
        let Some(last) = self.last_stamped.get_mut(h.origin as usize) else {
            stats.no_route += 1;
            return;
        };
        if last.is_some_and(|l| h.msg_id <= l) {
            stats.duplicates += 1;
            return;
        }
        if self.store.len() >= self.capacity {
            stats.overflow += 1;
            return;
        }
        *last = Some(h.msg_id);
        self.store.push_back(Stamped {
            origin: h.origin,
            msg_id: h.msg_id,
            sent_ns: h.sent_ns,
            payload_len: h.payload_len,
            ports_left: self.active_ports,
        });
        self.next_seq += 1;
        stats.stamped += 1;
    }
}

impl Node for SequencerSwitch {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        match Header::parse(frame) {
            Ok(h) if h.kind == FrameKind::SwitchRequest => Route::Consume,
            _ => self.router.classify(now, port, frame),
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        match (route, Header::parse(frame)) {
            (Route::Consume, Ok(h)) if h.kind == FrameKind::SwitchRequest => self.stamp(&h),
            _ => self.router.handle_frame(now, port, frame, route),
        }
    }

    fn poll_transmit(&mut self, _now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let cursor = self.ports.get(port as usize)?;
        if cursor.seq >= self.next_seq || cursor.dests.is_empty() {
            return None;
        }
        if cursor.seq >= self.slowest + self.lead {
            self.slowest = self
                .ports
                .iter()
                .filter(|p| !p.dests.is_empty())
                .map(|p| p.seq)
                .min()
                .unwrap_or(self.next_seq);
            if cursor.seq >= self.slowest + self.lead {
                return None; // wait for the slowest port (its progress polls us again)
            }
        }
        let cursor = &mut self.ports[port as usize];
        let at = (cursor.seq - self.base_seq) as usize;
        let m = self.store[at];
        let copy = Header {
            kind: FrameKind::Data,
            src: NO_PROCESS,
            dst: cursor.dests[cursor.index],
            origin: m.origin,
            seq: cursor.seq,
            msg_id: m.msg_id,
            sent_ns: m.sent_ns,
            payload_len: m.payload_len,
        };
        let len = copy.emit(buf);
        cursor.index += 1;
        if cursor.index == cursor.dests.len() {
            cursor.index = 0;
            cursor.seq += 1;
            self.store[at].ports_left -= 1;
            // Ports finish messages in number order, so finished ones are at the front.
            while self.store.front().is_some_and(|f| f.ports_left == 0) {
                self.store.pop_front();
                self.base_seq += 1;
            }
        }
        self.router.stats.frames_sent += 1;
        Some(len)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}
}

impl Hints for SequencerSwitch {}

/// A process in the switch-sequencer baseline: sends requests up, delivers numbered copies.
#[derive(Debug)]
pub struct SwitchSeqClient {
    reorder: SeqReorder,
}

impl SwitchSeqClient {
    pub fn new(reorder_capacity: usize) -> SwitchSeqClient {
        SwitchSeqClient {
            reorder: SeqReorder::new(FIRST_SEQ, reorder_capacity),
        }
    }

    /// Returns whether the broadcast was taken (the output holds a window of requests).
    pub fn on_offer(&mut self, core: &mut Core, offer: Offer) -> bool {
        let request = core.item(FrameKind::SwitchRequest, Dest::One(NO_PROCESS), 0, &offer);
        if core.out.push(request).is_err() {
            core.lost_own(offer.msg_id);
            return false;
        }
        true
    }

    /// Returns whether the frame belongs to this protocol.
    pub fn on_frame(&mut self, core: &mut Core, now: Instant, h: &Header) -> bool {
        if h.kind != FrameKind::Data {
            return false;
        }
        let m = Pending {
            origin: h.origin,
            msg_id: h.msg_id,
            sent_ns: h.sent_ns,
        };
        core.accept_numbered(now, &mut self.reorder, h.seq, m);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_fabric::{Topology, routing};

    #[test]
    fn default_sequencer_is_a_top_switch_every_rack_reaches_going_up() {
        for (topo, expect_layer) in [
            (Topology::paper_testbed(), 3),
            (Topology::fat_tree(4).unwrap(), 3),
            (Topology::leaf_spine(3, 2, 2).unwrap(), 2),
            (Topology::single_switch(4).unwrap(), 1),
        ] {
            let w = Wiring::new(topo, 1).unwrap();
            let (s, up) = sequencer_uplinks(&w, None).unwrap();
            assert_eq!(w.topology.switches[s].layer, expect_layer);
            // Walk up from every rack by the first up-port: reaches the sequencer.
            for p in &w.processes {
                let mut at = p.tor;
                while at != s {
                    let port = *up[at].first().expect("a way up");
                    let spec = w.switch_ports[at][port as usize];
                    assert_eq!(spec.direction, PortDirection::Up);
                    let Peer::Switch { switch, .. } = spec.peer else {
                        panic!("up-port to a process")
                    };
                    at = switch;
                }
            }
        }
        let w = Wiring::new(Topology::fat_tree(4).unwrap(), 1).unwrap();
        // An aggregation switch is not above every rack.
        let agg = (0..w.switch_count())
            .find(|&s| w.topology.switches[s].layer == 2)
            .unwrap();
        assert!(matches!(
            sequencer_uplinks(&w, Some(agg)),
            Err(BaselineError::SequencerSwitch { .. })
        ));
        assert!(sequencer_uplinks(&w, Some(999)).is_err());
    }

    #[test]
    fn sequencer_switch_numbers_requests_and_sends_one_copy_per_process() {
        let w = Wiring::new(Topology::single_switch(3).unwrap(), 1).unwrap();
        let routes = routing::build(&w).unwrap().remove(0);
        let mut s = SequencerSwitch::new(Router::new(0, routes, Vec::new()), 3, 3, 2);
        let request = |origin, msg_id| {
            let h = Header {
                kind: FrameKind::SwitchRequest,
                src: origin,
                dst: NO_PROCESS,
                origin,
                seq: 0,
                msg_id,
                sent_ns: 7,
                payload_len: 8,
            };
            let mut f = vec![0; h.frame_len()];
            h.emit(&mut f);
            f
        };
        let now = Instant::ZERO;
        for mut f in [request(2, 0), request(0, 0), request(2, 0), request(1, 0)] {
            let route = s.classify(now, 0, &f);
            assert_eq!(route, Route::Consume);
            s.handle_frame(now, 0, &mut f, route);
        }
        let st = s.stats();
        assert_eq!((st.stamped, st.duplicates, st.overflow), (2, 1, 1));
        let mut buf = [0u8; 128];
        let mut copies = Vec::new();
        for _round in 0..3 {
            for port in [2u16, 0, 1] {
                while let Some(len) = s.poll_transmit(now, port, &mut buf) {
                    let h = Header::parse(&buf[..len]).unwrap();
                    assert_eq!(
                        (h.src, h.dst),
                        (NO_PROCESS, port as u32),
                        "process p hangs on port p"
                    );
                    copies.push((h.dst, h.seq, h.origin));
                }
            }
        }
        // Capacity 2 gives a lead of 1: ports 2 and 0 wait at number 2 until port 1 (the
        // slowest, polled last) has sent number 1.
        assert_eq!(
            copies,
            [(2, 1, 2), (0, 1, 2), (1, 1, 2), (1, 2, 0), (2, 2, 0), (0, 2, 0)]
        );
        assert_eq!(s.stored(), 0, "every copy sent: the store is empty");
    }
}
