//! A tiny deterministic driver for tests: any `Node`s over directed links in virtual time, each
//! output port serializing frames at a fixed rate into a FIFO link with the link's delay, and
//! unbounded queues (a lossless fabric). It calls the nodes the way a discrete-event simulator
//! does (poll a port only when it is idle, arm the node's timer after every event), so it also
//! catches a node whose timer stays due: that would spin at one instant, which `run_until`
//! refuses.

use onepipe_fabric::{DirectedLink, Node, PortId, Route};
use onepipe_wire::Instant;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

enum Ev {
    Arrive {
        node: usize,
        port: PortId,
        frame: Vec<u8>,
    },
    TxDone {
        node: usize,
        port: PortId,
    },
    Timer {
        node: usize,
    },
}

struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Entry) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Entry) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Port {
    /// Peer node, peer port and delay in ns.
    link: Option<(usize, PortId, u64)>,
    queue: VecDeque<Vec<u8>>,
    busy: bool,
    /// When the last frame finished serializing, in picoseconds: back-to-back frames start
    /// there, so the rate is exact although events fall on whole nanoseconds.
    done_ps: u64,
}

pub struct MiniSim<N: Node> {
    pub now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Entry>>,
    pub nodes: Vec<N>,
    ports: Vec<Vec<Port>>,
    timer_at: Vec<Option<u64>>,
    /// Serialization time per byte, in picoseconds.
    ps_per_byte: u64,
    buf: Vec<u8>,
    pub peak_queue: usize,
}

/// Events one instant may hold before the driver calls it a spin.
const SAME_INSTANT_MAX: u64 = 5_000_000;

impl<N: Node> MiniSim<N> {
    pub fn new(nodes: Vec<N>, links: &[DirectedLink], bits_per_s: u64, start: Instant) -> MiniSim<N> {
        let mut ports: Vec<Vec<Port>> = (0..nodes.len()).map(|_| Vec::new()).collect();
        for l in links {
            let p = &mut ports[l.from.0];
            if p.len() <= l.from.1 as usize {
                p.resize_with(l.from.1 as usize + 1, Port::default);
            }
            p[l.from.1 as usize].link = Some((l.to.0, l.to.1, l.delay.as_nanos()));
        }
        let count = nodes.len();
        let mut sim = MiniSim {
            now: start.as_nanos(),
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            ports,
            timer_at: vec![None; count],
            ps_per_byte: 8_000_000_000_000 / bits_per_s,
            buf: vec![0; onepipe_fabric::node::FRAME_MAX],
            peak_queue: 0,
        };
        for n in 0..count {
            sim.kick(n);
        }
        sim
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    pub fn run_until(&mut self, until: Instant) {
        let mut same = 0u64;
        while let Some(Reverse(top)) = self.queue.peek() {
            if top.at > until.as_nanos() {
                break;
            }
            let Reverse(Entry { at, ev, .. }) = self.queue.pop().expect("peeked");
            same = if at == self.now { same + 1 } else { 0 };
            assert!(same < SAME_INSTANT_MAX, "a node spins at {at} ns");
            self.now = at;
            let now = Instant::from_nanos(at);
            match ev {
                Ev::Arrive {
                    node,
                    port,
                    mut frame,
                } => {
                    let n = &mut self.nodes[node];
                    let route = n.classify(now, port, &frame);
                    n.handle_frame(now, port, &mut frame, route);
                    if let Route::Forward(out) = route {
                        self.enqueue(node, out, frame);
                    }
                    self.kick(node);
                }
                Ev::TxDone { node, port } => {
                    self.ports[node][port as usize].busy = false;
                    if !self.start_tx(node, port) {
                        // As the simulator does: an idle port lets the node originate frames
                        // on every port (one port's progress may unblock another's).
                        self.kick(node);
                    }
                }
                Ev::Timer { node } => {
                    if self.timer_at[node] != Some(at) {
                        continue;
                    }
                    self.timer_at[node] = None;
                    if self.nodes[node].poll_timeout().is_some_and(|t| t <= now) {
                        self.nodes[node].handle_timeout(now);
                    }
                    self.kick(node);
                }
            }
        }
        self.now = self.now.max(until.as_nanos());
    }

    fn enqueue(&mut self, node: usize, port: PortId, frame: Vec<u8>) {
        let Some(p) = self.ports[node].get_mut(port as usize) else {
            return;
        };
        if p.link.is_none() {
            return;
        }
        p.queue.push_back(frame);
        self.peak_queue = self.peak_queue.max(p.queue.len());
        self.start_tx(node, port);
    }

    fn start_tx(&mut self, node: usize, port: PortId) -> bool {
        let p = &mut self.ports[node][port as usize];
        if p.busy {
            return true;
        }
        let Some(frame) = p.queue.pop_front() else {
            return false;
        };
        p.busy = true;
        let (to, to_port, delay) = p.link.expect("only linked ports queue");
        let now_ps = self.now * 1000;
        // The port went idle at `done_ps` (its TxDone fell on the next whole nanosecond).
        let start_ps = if now_ps < p.done_ps + 1000 {
            p.done_ps
        } else {
            now_ps
        };
        p.done_ps = start_ps + frame.len() as u64 * self.ps_per_byte;
        let done = p.done_ps.div_ceil(1000);
        self.push(done, Ev::TxDone { node, port });
        self.push(
            done + delay,
            Ev::Arrive {
                node: to,
                port: to_port,
                frame,
            },
        );
        true
    }

    fn pull(&mut self, node: usize, port: PortId) {
        let p = &self.ports[node][port as usize];
        if p.busy || !p.queue.is_empty() || p.link.is_none() {
            return;
        }
        let now = Instant::from_nanos(self.now);
        if let Some(len) = self.nodes[node].poll_transmit(now, port, &mut self.buf) {
            let frame = self.buf[..len].to_vec();
            self.enqueue(node, port, frame);
        }
    }

    fn kick(&mut self, node: usize) {
        for port in 0..self.ports[node].len() {
            self.pull(node, port as PortId);
        }
        self.arm_timer(node);
    }

    fn arm_timer(&mut self, node: usize) {
        let Some(t) = self.nodes[node].poll_timeout() else {
            return;
        };
        let at = t.as_nanos().max(self.now);
        if self.timer_at[node].is_some_and(|old| old <= at) {
            return;
        }
        self.timer_at[node] = Some(at);
        self.push(at, Ev::Timer { node });
    }
}
