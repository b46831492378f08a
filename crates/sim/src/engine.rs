//! The event loop: any [`Node`] state machines, wired by directed links, driven in virtual
//! nanoseconds.
//!
//! Events are ordered by (virtual ns, sequence number), and every random draw comes from one
//! seeded stream consumed in event order, so a seed and a configuration fix the whole run; the
//! trace hash folds in every event to prove it (a test runs a seed twice).
//!
//! The link model (paper 7.1's fabric, in software): each output port has one FIFO per
//! priority class ([`onepipe_fabric::Hints::priority`], asked of the node that queues the
//! frame), served by strict priority without preemption, holding bounded bytes in all; a frame
//! is serialized at the link's bandwidth, then propagates for the link's delay; a switch adds a
//! fixed processing delay per hop; a frame forwarded into a queue past its ECN threshold is
//! offered to [`Node::mark_congestion`]; a full queue drops the frame (tail drop, counted).
//! Loss and duplication are drawn per frame as it leaves a port, before `faults_until`. Hosts
//! optionally have a CPU that takes a fixed time per frame received or sent, which is what
//! bounds a process's message rate in the paper's testbed.
//!
//! Failures: a link that is down loses every frame that arrives over it; a node that is down
//! loses its queues and arriving frames and runs no timers. Both may come back; the node
//! resumes with the state it had (a hang or partition, not a reboot).

use crate::fault::{Fault, FaultAction};
use onepipe_fabric::{DirectedLink, Node, PRIORITY_CLASSES, PortId, Route};
use onepipe_proto::hash::{SplitMix, mix64};
use onepipe_wire::{Duration, Instant};
use queues::{BEST_EFFORT, PortQueues};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Largest frame the engine hands to a node's `poll_transmit`.
const FRAME_BUF_BYTES: usize = onepipe_fabric::node::FRAME_MAX;
/// Events between checks of the resident memory.
const MEMORY_CHECK_EVENTS: u64 = 1 << 20;

/// What a node is, for the parts of the model that differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Switch,
    Host,
    /// The failure controller: a server CPU of its own, charged `controller_frame_cost`.
    Controller,
    /// A switch's host representative (paper 6.2.3) on `cores` cores of its own, charged
    /// `representative_frame_cost` per beacon on one of them.
    Representative {
        cores: u32,
    },
}

/// Parameters of the link and node model, shared by every link and node.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Serialization rate of a link with a host at one end; 0 means infinitely fast.
    pub link_bits_per_s: u64,
    /// Serialization rate of a link between two switches. A testbed without oversubscription
    /// bundles several cables between two switches; one link at the bundle's rate models it.
    pub fabric_link_bits_per_s: u64,
    /// Bytes an output queue holds (the frame being serialized not counted).
    pub queue_capacity_bytes: usize,
    /// A forwarded frame joining a queue that holds more than this is ECN-marked.
    pub ecn_threshold_bytes: usize,
    /// Fixed processing delay of a switch per frame (its pipeline).
    pub switch_delay: Duration,
    /// CPU time a host spends per frame received or sent; zero means an infinitely fast host.
    pub host_frame_cost: Duration,
    /// CPU time the controller spends per unit of work in a frame it receives or sends
    /// ([`Node::work_units`]); zero means an infinitely fast controller.
    pub controller_frame_cost: Duration,
    /// CPU time a host representative spends per beacon it receives or sends.
    pub representative_frame_cost: Duration,
    /// Time a switch's program is busy per frame it takes in (a frame it does not forward) or
    /// originates, one frame at a time: a rate per switch for the work of its program (a
    /// key-value switch's queries), for fabrics whose switches, not their links, are the
    /// bottleneck. Frames it forwards go through at line rate, as an ECMP fabric spreads
    /// transit over its spines. Zero means any rate (only `switch_delay` applies).
    pub switch_frame_cost: Duration,
    /// Probability that a frame is lost on a link, and that it arrives twice.
    pub loss: f64,
    pub duplicate: f64,
    /// Probability that a frame is held back by up to `reorder_delay`, so that frames behind
    /// it on its link may pass it: links stop being FIFO (exercises late drops and NAKs).
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Loss, duplication and reordering stop at this time (faults heal).
    pub faults_until: Instant,
    /// A switch may originate a frame (a beacon) on a port that is busy or has a queue: its
    /// frame joins the queue's tail, as a switch's own packets do. Without it a switch is
    /// asked only when the port is idle, which is the same while queues are short but starves
    /// its beacons behind a standing queue of background traffic (paper Fig. 12).
    pub originate_behind_queues: bool,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            link_bits_per_s: 100_000_000_000,
            fabric_link_bits_per_s: 100_000_000_000,
            queue_capacity_bytes: 1 << 20,
            ecn_threshold_bytes: 100 * 1024,
            switch_delay: Duration::from_nanos(500),
            host_frame_cost: Duration::ZERO,
            controller_frame_cost: Duration::ZERO,
            representative_frame_cost: Duration::ZERO,
            switch_frame_cost: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(2),
            faults_until: Instant::from_nanos(u64::MAX),
            originate_behind_queues: false,
        }
    }
}

impl Model {
    /// CPU time per unit of work of a node in `role`; zero: its CPU is not modelled.
    fn cpu_cost(&self, role: Role) -> Duration {
        match role {
            Role::Host => self.host_frame_cost,
            Role::Controller => self.controller_frame_cost,
            Role::Representative { cores } => {
                Duration::from_nanos(self.representative_frame_cost.as_nanos() / cores.max(1) as u64)
            }
            Role::Switch => self.switch_frame_cost,
        }
    }
}

/// When a run must stop, whatever the workload says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub events_max: u64,
    /// Resident memory of the whole process, checked every million events (Linux only).
    pub memory_bytes_max: u64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            events_max: u64::MAX,
            memory_bytes_max: u64::MAX,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("link {index} names node {node}, but there are {nodes} nodes")]
    UnknownNode { index: usize, node: usize, nodes: usize },
    #[error("two links leave node {node} port {port}")]
    DuplicateOutput { node: usize, port: PortId },
    #[error(
        "stopped after {events} events at virtual time {at_ns} ns: the event budget is {budget} \
         (raise --events-max or shorten the run)"
    )]
    EventBudget { events: u64, budget: u64, at_ns: u64 },
    #[error(
        "stopped at virtual time {at_ns} ns: resident memory {used_bytes} bytes exceeds the budget of \
         {budget_bytes} bytes (raise --memory-mb-max or simulate fewer hosts)"
    )]
    MemoryBudget {
        used_bytes: u64,
        budget_bytes: u64,
        at_ns: u64,
    },
}

/// What happened in a run, summed over links and nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub events: u64,
    pub trace_hash: u64,
    pub frames_sent: u64,
    pub frames_delivered: u64,
    pub dropped_loss: u64,
    pub dropped_queue_full: u64,
    pub dropped_down: u64,
    pub duplicated: u64,
    /// Frames held back so that later ones could pass them.
    pub reordered: u64,
    pub ecn_marked: u64,
    /// The most bytes queued at any one output port, of any node, all classes together. A
    /// frame joining an idle port counts for the instant before it goes on the wire, so this
    /// is at least the largest frame sent.
    pub peak_queue_bytes: usize,
    /// Per priority class, the most bytes of that class queued at any one switch port (the
    /// frame being serialized not counted): what cosy's Lemma 3.3 bounds (paper 003).
    pub peak_switch_queue_bytes: [usize; PRIORITY_CLASSES],
}

enum Event {
    /// A frame reaches the far end of a link.
    Arrive {
        link: u32,
        frame: Vec<u8>,
    },
    /// A port finished serializing its frame.
    TxDone {
        port: u32,
    },
    /// A node's timer, valid only if it is still the one scheduled.
    Timeout {
        node: u32,
    },
    /// A host's CPU is free for the next frame.
    Cpu {
        node: u32,
    },
    Fault(FaultAction),
}

struct Entry {
    at: u64,
    seq: u64,
    event: Event,
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

struct Port {
    node: u32,
    port: PortId,
    /// The directed link leaving here, if wired.
    link: Option<u32>,
    queue: PortQueues,
    /// A frame is being serialized.
    busy: bool,
    /// When the last frame finished serializing, in picoseconds: a frame queued behind it
    /// starts there, so that the link's rate is exact although events fall on whole
    /// nanoseconds (rounding each frame's time down made 112-byte frames leave 12% faster
    /// than 100 Gbit/s).
    tx_done_ps: u128,
}

struct Link {
    to_node: u32,
    to_port: PortId,
    delay: Duration,
    /// Serialization time of a byte in picoseconds (0: infinitely fast).
    ps_per_byte: u64,
    up: bool,
}

struct NodeState<N> {
    node: N,
    role: Role,
    up: bool,
    /// Index of port 0 in `Engine::ports`; ports of a node are contiguous.
    first_port: u32,
    port_count: u16,
    /// The timer event in the queue, if any.
    timer_at: Option<u64>,
    /// Host CPU: frames waiting to be processed, and whether a Cpu event is queued.
    rx_queue: VecDeque<(PortId, Vec<u8>)>,
    /// Bytes in `rx_queue`, bounded like a port queue (the NIC's receive ring).
    rx_bytes: usize,
    cpu_scheduled: bool,
    cpu_free_at: u64,
    prefer_rx: bool,
}

pub struct Engine<N: Node> {
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<Entry>>,
    nodes: Vec<NodeState<N>>,
    ports: Vec<Port>,
    links: Vec<Link>,
    model: Model,
    rng: SplitMix,
    stats: Stats,
    buf: Vec<u8>,
    spare: Vec<Vec<u8>>,
    /// Gives a node that restarts its fresh state ([`Engine::on_restart`]).
    restart: Option<RestartFn<N>>,
    /// Steps a node's clock: the engine knows nodes only as [`Node`]s, which have no clock of
    /// their own. Without it, clock steps change nothing.
    clock_stepper: Option<fn(&mut N, Instant, i64)>,
}

/// Replaces node `index`'s state with a fresh one, at `now`.
pub type RestartFn<N> = Box<dyn FnMut(u32, Instant, &mut N)>;

impl<N: Node> Engine<N> {
    /// Nodes are numbered by their index; `links` connect their ports (a port without a link
    /// originates nothing).
    pub fn new(
        nodes: Vec<(N, Role)>,
        links: &[DirectedLink],
        model: Model,
        seed: u64,
        start: Instant,
    ) -> Result<Engine<N>, EngineError> {
        let count = nodes.len();
        let mut port_counts = vec![0u16; count];
        for (index, l) in links.iter().enumerate() {
            for node in [l.from.0, l.to.0] {
                if node >= count {
                    return Err(EngineError::UnknownNode {
                        index,
                        node,
                        nodes: count,
                    });
                }
            }
            let c = &mut port_counts[l.from.0];
            *c = (*c).max(l.from.1 + 1);
        }
        let mut ports = Vec::new();
        let mut states = Vec::with_capacity(count);
        for (i, (node, role)) in nodes.into_iter().enumerate() {
            let first_port = ports.len() as u32;
            for p in 0..port_counts[i] {
                ports.push(Port {
                    node: i as u32,
                    port: p,
                    link: None,
                    queue: PortQueues::default(),
                    busy: false,
                    tx_done_ps: 0,
                });
            }
            states.push(NodeState {
                node,
                role,
                up: true,
                first_port,
                port_count: port_counts[i],
                timer_at: None,
                rx_queue: VecDeque::new(),
                rx_bytes: 0,
                cpu_scheduled: false,
                cpu_free_at: 0,
                prefer_rx: true,
            });
        }
        let mut link_states = Vec::with_capacity(links.len());
        for (index, l) in links.iter().enumerate() {
            let port = &mut ports[(states[l.from.0].first_port + l.from.1 as u32) as usize];
            if port.link.is_some() {
                return Err(EngineError::DuplicateOutput {
                    node: l.from.0,
                    port: l.from.1,
                });
            }
            port.link = Some(index as u32);
            let between_switches = [l.from.0, l.to.0].iter().all(|&n| states[n].role == Role::Switch);
            let bits_per_s = if between_switches {
                model.fabric_link_bits_per_s
            } else {
                model.link_bits_per_s
            };
            link_states.push(Link {
                to_node: l.to.0 as u32,
                to_port: l.to.1,
                delay: l.delay,
                ps_per_byte: match bits_per_s {
                    0 => 0,
                    bps => (8_000_000_000_000u128 / bps as u128) as u64,
                },
                up: true,
            });
        }
        let mut engine = Engine {
            now: start,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes: states,
            ports,
            links: link_states,
            rng: SplitMix::new(seed),
            stats: Stats::default(),
            buf: vec![0; FRAME_BUF_BYTES],
            spare: Vec::new(),
            restart: None,
            clock_stepper: None,
            model,
        };
        for n in 0..count as u32 {
            engine.kick(n);
        }
        Ok(engine)
    }

    pub fn now(&self) -> Instant {
        self.now
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn node(&self, i: usize) -> &N {
        &self.nodes[i].node
    }

    pub fn node_mut(&mut self, i: usize) -> &mut N {
        &mut self.nodes[i].node
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes, in index order, for reading their final state.
    pub fn into_nodes(self) -> Vec<N> {
        self.nodes.into_iter().map(|s| s.node).collect()
    }

    pub fn nodes(&self) -> impl Iterator<Item = &N> {
        self.nodes.iter().map(|s| &s.node)
    }

    /// Bytes queued at `node`'s output `port` now (the frame on the wire not counted); 0 for a
    /// port that does not exist.
    pub fn queue_bytes(&self, node: usize, port: PortId) -> usize {
        let Some(s) = self.nodes.get(node) else {
            return 0;
        };
        if port >= s.port_count {
            return 0;
        }
        self.ports[(s.first_port + port as u32) as usize].queue.bytes()
    }

    /// The directed links out of `node`'s ports, for fault injection by name.
    pub fn links_between(&self, a: usize, b: usize) -> Vec<u32> {
        let mut out = Vec::new();
        for (from, to) in [(a, b), (b, a)] {
            let s = &self.nodes[from];
            for p in s.first_port..s.first_port + s.port_count as u32 {
                if let Some(l) = self.ports[p as usize].link
                    && self.links[l as usize].to_node as usize == to
                {
                    out.push(l);
                }
            }
        }
        out
    }

    /// A frame that reaches node `to` at `at` over the directed link from node `from`, as if
    /// something on the wire had sent it (a forger, issue 42). Whether there is such a link.
    pub fn inject(&mut self, at: Instant, from: usize, to: usize, frame: Vec<u8>) -> bool {
        let link = self
            .links_between(from, to)
            .into_iter()
            .find(|&l| self.links[l as usize].to_node as usize == to);
        if let Some(link) = link {
            self.push(at, Event::Arrive { link, frame });
        }
        link.is_some()
    }

    pub fn schedule_fault(&mut self, fault: Fault) {
        for action in fault.actions() {
            self.push(action.0, Event::Fault(action.1));
        }
    }

    /// Node `node`'s clock steps by `delta_ns` at `at`, through `stepper`.
    pub fn schedule_clock_step(
        &mut self,
        at: Instant,
        node: u32,
        delta_ns: i64,
        stepper: fn(&mut N, Instant, i64),
    ) {
        self.clock_stepper = Some(stepper);
        self.push(at, Event::Fault(FaultAction::ClockStep { node, delta_ns }));
    }

    /// Lets node `node` originate frames and re-arms its timer now: for a run that changed, from
    /// outside the engine, what the node wants to do (a workload that starts at a time the run
    /// picks after a warm-up).
    pub fn wake(&mut self, node: usize) {
        if node < self.nodes.len() {
            self.kick(node as u32);
        }
    }

    /// Runs every event up to and including `until`.
    pub fn run_until(&mut self, until: Instant, budget: &Budget) -> Result<(), EngineError> {
        while let Some(Reverse(top)) = self.queue.peek() {
            if top.at > until.as_nanos() {
                break;
            }
            let Reverse(Entry { at, seq, event }) = self.queue.pop().expect("peeked");
            self.now = Instant::from_nanos(at);
            self.stats.events += 1;
            if self.stats.events > budget.events_max {
                return Err(EngineError::EventBudget {
                    events: self.stats.events - 1,
                    budget: budget.events_max,
                    at_ns: at,
                });
            }
            if self.stats.events % MEMORY_CHECK_EVENTS == 0 && budget.memory_bytes_max != u64::MAX {
                let used = crate::memory::resident_bytes();
                if used > budget.memory_bytes_max {
                    return Err(EngineError::MemoryBudget {
                        used_bytes: used,
                        budget_bytes: budget.memory_bytes_max,
                        at_ns: at,
                    });
                }
            }
            self.trace(at, seq, &event);
            self.dispatch(event);
        }
        self.now = self.now.max(until);
        Ok(())
    }

    fn trace(&mut self, at: u64, seq: u64, event: &Event) {
        let (code, a, b) = match event {
            Event::Arrive { link, frame } => (1, *link as u64, hash_bytes(frame)),
            Event::TxDone { port } => (2, *port as u64, 0),
            Event::Timeout { node } => (3, *node as u64, 0),
            Event::Cpu { node } => (4, *node as u64, 0),
            Event::Fault(f) => (5, f.code(), 0),
        };
        let mut h = self.stats.trace_hash;
        for x in [at, seq, code, a, b] {
            h = mix64(h ^ x);
        }
        self.stats.trace_hash = h;
    }

    fn push(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Entry {
            at: at.as_nanos(),
            seq: self.seq,
            event,
        }));
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Arrive { link, frame } => self.arrive(link, frame),
            Event::TxDone { port } => {
                let p = &mut self.ports[port as usize];
                p.busy = false;
                let node = p.node;
                if !self.start_tx(port) {
                    self.kick(node);
                }
            }
            Event::Timeout { node } => {
                let s = &mut self.nodes[node as usize];
                if s.timer_at != Some(self.now.as_nanos()) {
                    return; // superseded by an earlier timer
                }
                s.timer_at = None;
                if !s.up {
                    return;
                }
                if s.node.poll_timeout().is_some_and(|t| t <= self.now) {
                    s.node.handle_timeout(self.now);
                }
                self.kick(node);
            }
            Event::Cpu { node } => self.cpu(node),
            Event::Fault(action) => self.apply_fault(action),
        }
    }

    fn arrive(&mut self, link: u32, frame: Vec<u8>) {
        let l = &self.links[link as usize];
        let (node, port) = (l.to_node, l.to_port);
        let s = &mut self.nodes[node as usize];
        if !l.up || !s.up {
            self.stats.dropped_down += 1;
            self.recycle(frame);
            return;
        }
        self.stats.frames_delivered += 1;
        // A frame of no work (background traffic on another core) skips the CPU's queue.
        let costs = self.model.cpu_cost(s.role) > Duration::ZERO
            && s.node.work_units(&frame) > 0
            && !(s.role == Role::Switch
                && matches!(s.node.classify(self.now, port, &frame), Route::Forward(_)));
        if costs {
            if s.rx_bytes + frame.len() > self.model.queue_capacity_bytes {
                self.stats.dropped_queue_full += 1;
                self.recycle(frame);
                return;
            }
            s.rx_bytes += frame.len();
            s.rx_queue.push_back((port, frame));
            self.kick(node);
            return;
        }
        self.receive(node, port, frame);
        self.kick(node);
    }

    /// Hands a frame to its node and forwards it if the node says so.
    fn receive(&mut self, node: u32, port: PortId, mut frame: Vec<u8>) {
        let now = self.now;
        let s = &mut self.nodes[node as usize];
        let route = s.node.classify(now, port, &frame);
        s.node.handle_frame(now, port, &mut frame, route);
        match route {
            Route::Forward(out) if out < s.port_count => {
                let out = s.first_port + out as u32;
                self.enqueue(out, frame, true);
            }
            _ => self.recycle(frame),
        }
    }

    /// Puts a frame on a port's queue (tail drop when full) and starts the port if idle.
    fn enqueue(&mut self, port: u32, mut frame: Vec<u8>, forwarded: bool) {
        let p = &mut self.ports[port as usize];
        if p.link.is_none() {
            self.recycle(frame);
            return;
        }
        if p.queue.bytes() + frame.len() > self.model.queue_capacity_bytes {
            self.stats.dropped_queue_full += 1;
            self.recycle(frame);
            return;
        }
        let s = &self.nodes[p.node as usize];
        if forwarded && p.queue.bytes() > self.model.ecn_threshold_bytes {
            s.node.mark_congestion(&mut frame);
            self.stats.ecn_marked += 1;
        }
        // After `handle_frame` and the mark: the class of the frame as it leaves.
        let class = (s.node.priority(&frame) as usize).min(BEST_EFFORT);
        let switch = s.role == Role::Switch;
        p.queue.push(class, frame);
        self.stats.peak_queue_bytes = self.stats.peak_queue_bytes.max(p.queue.bytes());
        if !p.busy {
            self.start_tx(port);
        }
        if switch {
            // Counted once an idle port has put the frame on the wire: what waits.
            let waiting = self.ports[port as usize].queue.class_bytes(class);
            let peak = &mut self.stats.peak_switch_queue_bytes[class];
            *peak = (*peak).max(waiting);
        }
    }

    /// Starts serializing the next queued frame; false if the queue was empty.
    fn start_tx(&mut self, port: u32) -> bool {
        let p = &mut self.ports[port as usize];
        // Strict priority, not preemptive: the frame already on the wire finished first.
        let Some(frame) = p.queue.pop() else {
            return false;
        };
        p.busy = true;
        let link = p.link.expect("only wired ports queue frames");
        let start_ps = p.tx_done_ps.max(self.now.as_nanos() as u128 * 1000);
        p.tx_done_ps = start_ps + frame.len() as u128 * self.links[link as usize].ps_per_byte as u128;
        // The event falls on the nanosecond the frame's last bit leaves (at or before it); the
        // next frame starts from the exact time.
        let done = Instant::from_nanos((p.tx_done_ps / 1000) as u64).max(self.now);
        self.push(done, Event::TxDone { port });
        self.stats.frames_sent += 1;
        let l = &self.links[link as usize];
        let mut at = done + l.delay;
        if self.nodes[l.to_node as usize].role == Role::Switch {
            at += self.model.switch_delay;
        }
        let faulty = self.now < self.model.faults_until;
        if faulty && self.rng.chance(self.model.loss) {
            self.stats.dropped_loss += 1;
            self.recycle(frame);
            return true;
        }
        if faulty && self.rng.chance(self.model.reorder) {
            self.stats.reordered += 1;
            at += Duration::from_nanos(self.rng.next_u64() % self.model.reorder_delay.as_nanos().max(1));
        }
        if faulty && self.rng.chance(self.model.duplicate) {
            self.stats.duplicated += 1;
            let copy = self.copy_of(&frame);
            self.push(at, Event::Arrive { link, frame: copy });
        }
        self.push(at, Event::Arrive { link, frame });
        true
    }

    /// Lets a node originate frames on its idle ports (or its CPU run) and re-arms its timer.
    fn kick(&mut self, node: u32) {
        let s = &self.nodes[node as usize];
        if !s.up {
            return;
        }
        if self.model.cpu_cost(s.role) > Duration::ZERO {
            if !s.cpu_scheduled {
                let at = Instant::from_nanos(s.cpu_free_at.max(self.now.as_nanos()));
                self.nodes[node as usize].cpu_scheduled = true;
                self.push(at, Event::Cpu { node });
            }
        } else if s.node.wants_transmit() {
            let (first, count) = (s.first_port, s.port_count as u32);
            for port in first..first + count {
                self.pull(port);
            }
        }
        self.arm_timer(node);
    }

    /// Asks the node for frames while its port is idle and has nothing queued; a switch
    /// that may originate behind queues is asked once whatever the port holds.
    fn pull(&mut self, port: u32) -> bool {
        let mut sent = false;
        let p = &self.ports[port as usize];
        let behind = self.model.originate_behind_queues && self.nodes[p.node as usize].role == Role::Switch;
        loop {
            let p = &self.ports[port as usize];
            let idle = !p.busy && p.queue.is_empty();
            if p.link.is_none() || !(idle || behind && !sent) {
                return sent;
            }
            let (node, local) = (p.node, p.port);
            let now = self.now;
            let Some(len) = self.nodes[node as usize]
                .node
                .poll_transmit(now, local, &mut self.buf)
            else {
                return sent;
            };
            let frame = self.frame_from_buf(len);
            self.enqueue(port, frame, false);
            sent = true;
        }
    }

    /// One frame of CPU work, received or sent, alternating when both wait; it keeps the CPU
    /// busy for its cost times its units of work.
    fn cpu(&mut self, node: u32) {
        let s = &mut self.nodes[node as usize];
        let cost = self.model.cpu_cost(s.role).as_nanos();
        s.cpu_scheduled = false;
        if !s.up {
            return;
        }
        let (first, count) = (s.first_port, s.port_count as u32);
        let rx_first = s.prefer_rx || (count > 0 && self.ports[first as usize].busy);
        s.prefer_rx = !s.prefer_rx;
        let mut units = if rx_first { self.cpu_receive(node) } else { 0 };
        // A host's fabric link is port 0; a port after it is its management link, whose rare
        // frames go first. The controller's first ports lead to switches: it resumes the
        // fabric before it tells processes that paths changed.
        let controller = self.nodes[node as usize].role == Role::Controller;
        for i in 0..count {
            if units > 0 {
                break;
            }
            let port = if controller {
                first + i
            } else {
                first + count - 1 - i
            };
            units = self.cpu_transmit(node, port);
        }
        if units == 0 {
            units = self.cpu_receive(node);
        }
        if units > 0 {
            let s = &mut self.nodes[node as usize];
            s.cpu_free_at = self.now.as_nanos() + cost * units as u64;
            s.cpu_scheduled = true;
            let at = Instant::from_nanos(s.cpu_free_at);
            self.push(at, Event::Cpu { node });
        }
        self.arm_timer(node);
    }

    /// Receives one queued frame; returns its units of work (0: nothing was queued).
    fn cpu_receive(&mut self, node: u32) -> u32 {
        let s = &mut self.nodes[node as usize];
        let Some((port, frame)) = s.rx_queue.pop_front() else {
            return 0;
        };
        s.rx_bytes -= frame.len();
        let units = s.node.work_units(&frame);
        self.receive(node, port, frame);
        units
    }

    /// One frame at most: the CPU pays for each. Returns its units of work (0: none sent).
    fn cpu_transmit(&mut self, node: u32, port: u32) -> u32 {
        let p = &self.ports[port as usize];
        if p.busy || !p.queue.is_empty() || p.link.is_none() {
            return 0;
        }
        let (local, now) = (p.port, self.now);
        let Some(len) = self.nodes[node as usize]
            .node
            .poll_transmit(now, local, &mut self.buf)
        else {
            return 0;
        };
        let frame = self.frame_from_buf(len);
        let units = self.nodes[node as usize].node.work_units(&frame);
        self.enqueue(port, frame, false);
        units
    }

    fn frame_from_buf(&mut self, len: usize) -> Vec<u8> {
        let mut frame = self.spare.pop().unwrap_or_default();
        frame.clear();
        frame.extend_from_slice(&self.buf[..len]);
        frame
    }

    fn arm_timer(&mut self, node: u32) {
        let s = &mut self.nodes[node as usize];
        let Some(t) = s.node.poll_timeout() else {
            return;
        };
        let at = t.max(self.now).as_nanos();
        if s.timer_at.is_some_and(|old| old <= at) {
            return; // the earlier timer will fire and re-arm
        }
        s.timer_at = Some(at);
        self.push(Instant::from_nanos(at), Event::Timeout { node });
    }

    /// How a node that restarts (`FaultAction::Restart`) gets its fresh state; without it, a
    /// restart resumes the node as it was.
    pub fn on_restart(&mut self, restart: RestartFn<N>) {
        self.restart = Some(restart);
    }

    fn apply_fault(&mut self, action: FaultAction) {
        match action {
            FaultAction::Restart { node } => {
                let now = self.now;
                let Some(s) = self.nodes.get_mut(node as usize) else {
                    return;
                };
                if let Some(restart) = self.restart.as_mut() {
                    restart(node, now, &mut s.node);
                }
                // Timers of the old state are void; the fresh one asks for its own.
                s.timer_at = None;
                s.up = true;
                self.arm_timer(node);
                self.kick(node);
            }
            FaultAction::Link { link, up } => {
                if let Some(l) = self.links.get_mut(link as usize) {
                    l.up = up;
                }
            }
            FaultAction::Node { node, up } => {
                let Some(s) = self.nodes.get_mut(node as usize) else {
                    return;
                };
                s.up = up;
                if up {
                    self.kick(node);
                    return;
                }
                let dropped = s.rx_queue.len();
                s.rx_queue.clear();
                s.rx_bytes = 0;
                self.stats.dropped_down += dropped as u64;
                let (first, count) = (s.first_port, s.port_count as u32);
                for port in first..first + count {
                    self.stats.dropped_down += self.ports[port as usize].queue.clear() as u64;
                }
            }
            FaultAction::ClockStep { node, delta_ns } => {
                let (Some(step), Some(s)) = (self.clock_stepper, self.nodes.get_mut(node as usize)) else {
                    return;
                };
                step(&mut s.node, self.now, delta_ns);
                // Its timers are on the stepped clock now.
                self.kick(node);
            }
        }
    }

    fn copy_of(&mut self, frame: &[u8]) -> Vec<u8> {
        let mut c = self.spare.pop().unwrap_or_default();
        c.clear();
        c.extend_from_slice(frame);
        c
    }

    fn recycle(&mut self, frame: Vec<u8>) {
        if self.spare.len() < 4096 {
            self.spare.push(frame);
        }
    }
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = b.len() as u64;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(0x100_0000_01b3);
    }
    for &x in chunks.remainder() {
        h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

mod queues;
#[cfg(test)]
mod tests;
