//! The link model on a line of nodes: host -> switch -> switch -> host, one frame.

use super::*;
use onepipe_fabric::Hints;
use std::collections::VecDeque;

/// A host that sends one frame of `len` bytes at start and records when frames arrive; a
/// switch that forwards everything from port 0 out of port 1.
struct Probe {
    role: Role,
    /// A switch that takes every frame (a program's work) instead of forwarding it.
    consume: bool,
    to_send: Option<usize>,
    arrived_at: Vec<Instant>,
}

impl Node for Probe {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        match self.role {
            Role::Switch if self.consume => Route::Consume,
            Role::Switch => Route::Forward(1),
            Role::Host | Role::Controller | Role::Representative { .. } => Route::Consume,
        }
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, _frame: &mut [u8], _route: Route) {
        if self.role != Role::Switch || self.consume {
            self.arrived_at.push(now);
        }
    }

    fn poll_transmit(&mut self, _now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        let len = self.to_send.take()?;
        buf[..len].fill(7);
        Some(len)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}
}

impl Hints for Probe {
    /// A controller's frame is one unit of work per 100 bytes.
    fn work_units(&self, frame: &[u8]) -> u32 {
        match self.role {
            Role::Controller => frame.len() as u32 / 100,
            _ => 1,
        }
    }
}

fn probe(role: Role, to_send: Option<usize>) -> (Probe, Role) {
    let p = Probe {
        role,
        consume: false,
        to_send,
        arrived_at: Vec::new(),
    };
    (p, role)
}

/// When a 1,000-byte frame reaches the far host, in ns after start.
fn one_way_ns(model: Model) -> u64 {
    let nodes = vec![
        probe(Role::Host, Some(1000)),
        probe(Role::Switch, None),
        probe(Role::Switch, None),
        probe(Role::Host, None),
    ];
    let link = |a: usize, b: usize| DirectedLink {
        from: (a, if a == 0 { 0 } else { 1 }),
        to: (b, 0),
        delay: Duration::from_nanos(100),
    };
    let links = [link(0, 1), link(1, 2), link(2, 3)];
    let mut e = Engine::new(nodes, &links, model, 1, Instant::ZERO).unwrap();
    e.run_until(Instant::from_nanos(1_000_000), &Budget::default())
        .unwrap();
    let got = &e.node(3).arrived_at;
    assert_eq!(got.len(), 1, "one frame, delivered once");
    got[0].as_nanos()
}

#[test]
fn each_hop_serializes_at_its_links_rate_then_propagates() {
    let base = Model {
        link_bits_per_s: 8_000_000_000, // 1 ns a byte: 1,000 ns a frame
        fabric_link_bits_per_s: 8_000_000_000,
        switch_delay: Duration::from_nanos(500),
        ..Model::default()
    };
    // Three links of 1,000 ns serialization and 100 ns delay; two switches of 500 ns.
    assert_eq!(one_way_ns(base.clone()), 3 * 1_100 + 2 * 500);
    let fast_fabric = Model {
        fabric_link_bits_per_s: 32_000_000_000,
        ..base
    };
    // The middle link, between two switches, serializes in 250 ns.
    assert_eq!(one_way_ns(fast_fabric), 2 * 1_100 + 350 + 2 * 500);
}

/// The controller's CPU takes its frames one at a time, each for its units of work: two frames
/// that arrive together are handled one cost of the first apart.
#[test]
fn the_controller_cpu_charges_per_unit_of_work() {
    let nodes = vec![
        probe(Role::Host, Some(300)),
        probe(Role::Host, Some(300)),
        probe(Role::Controller, None),
    ];
    let link = |a: usize, port: PortId| DirectedLink {
        from: (a, 0),
        to: (2, port),
        delay: Duration::from_nanos(100),
    };
    let model = Model {
        link_bits_per_s: 0,
        controller_frame_cost: Duration::from_nanos(1_000),
        ..Model::default()
    };
    let mut e = Engine::new(nodes, &[link(0, 0), link(1, 1)], model, 1, Instant::ZERO).unwrap();
    e.run_until(Instant::from_nanos(1_000_000), &Budget::default())
        .unwrap();
    let got: Vec<u64> = e.node(2).arrived_at.iter().map(|t| t.as_nanos()).collect();
    // Both arrive at 100 ns; the second waits out the first's three units.
    assert_eq!(got, vec![100, 3_100]);
}

/// A switch with a per-frame cost takes the frames its program consumes one at a time, two
/// that arrive together one cost apart; frames it forwards go through at line rate.
#[test]
fn a_switch_with_a_frame_cost_takes_its_frames_one_at_a_time() {
    let switch_cost_ns = 1_000;
    let model = Model {
        link_bits_per_s: 0,
        fabric_link_bits_per_s: 0,
        switch_delay: Duration::ZERO,
        switch_frame_cost: Duration::from_nanos(switch_cost_ns),
        ..Model::default()
    };
    let free = Model {
        switch_frame_cost: Duration::ZERO,
        ..model.clone()
    };
    assert_eq!(two_senders_into_a_switch(free.clone(), true), vec![100, 100]);
    assert_eq!(
        two_senders_into_a_switch(model.clone(), true),
        vec![100, 100 + switch_cost_ns]
    );
    assert_eq!(two_senders_into_a_switch(free, false), vec![200, 200]);
    assert_eq!(
        two_senders_into_a_switch(model, false),
        vec![200, 200],
        "forwarding costs nothing"
    );
}

/// When the frames of two hosts, sent together to one switch, reach it (`consume`) or the host
/// behind it.
fn two_senders_into_a_switch(model: Model, consume: bool) -> Vec<u64> {
    let mut switch = probe(Role::Switch, None);
    switch.0.consume = consume;
    let nodes = vec![
        probe(Role::Host, Some(100)),
        probe(Role::Host, Some(100)),
        switch,
        probe(Role::Host, None),
    ];
    let link = |from: (usize, PortId), to: (usize, PortId)| DirectedLink {
        from,
        to,
        delay: Duration::from_nanos(100),
    };
    let links = [link((0, 0), (2, 0)), link((1, 0), (2, 2)), link((2, 1), (3, 0))];
    let mut e = Engine::new(nodes, &links, model, 1, Instant::ZERO).unwrap();
    e.run_until(Instant::from_nanos(1_000_000), &Budget::default())
        .unwrap();
    let at = if consume { 2 } else { 3 };
    e.node(at).arrived_at.iter().map(|t| t.as_nanos()).collect()
}

/// A node whose frames carry their class in byte 0 and a sequence number in byte 1: a host
/// sends `to_send` in order at start and records `(sequence, arrival)`; a switch forwards
/// everything from port 0 out of port 1.
struct Classed {
    role: Role,
    to_send: VecDeque<Vec<u8>>,
    arrived: Vec<(u8, Instant)>,
}

impl Node for Classed {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        match self.role {
            Role::Switch => Route::Forward(1),
            Role::Host | Role::Controller | Role::Representative { .. } => Route::Consume,
        }
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
        if self.role != Role::Switch {
            self.arrived.push((frame[1], now));
        }
    }

    fn poll_transmit(&mut self, _now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        let frame = self.to_send.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _now: Instant) {}
}

impl Hints for Classed {
    fn priority(&self, frame: &[u8]) -> u8 {
        frame[0]
    }
}

/// Host 0 -> switch 1 -> switch 2 -> host 3; only the link between the switches has a rate
/// (1 byte a ns), so frames queue at switch 1's port 1 and nowhere else. Host 0 sends
/// `(class, length)` frames in order, all at start. Returns the run's stats and the order and
/// times in which host 3 got them (by index in `frames`).
fn through_a_slow_fabric_link(frames: &[(u8, usize)]) -> (Stats, Vec<(u8, u64)>) {
    let node = |role, frames: &[(u8, usize)]| {
        let to_send = frames
            .iter()
            .enumerate()
            .map(|(i, &(class, len))| {
                let mut f = vec![0; len];
                (f[0], f[1]) = (class, i as u8);
                f
            })
            .collect();
        let n = Classed {
            role,
            to_send,
            arrived: Vec::new(),
        };
        (n, role)
    };
    let nodes = vec![
        node(Role::Host, frames),
        node(Role::Switch, &[]),
        node(Role::Switch, &[]),
        node(Role::Host, &[]),
    ];
    let link = |a: usize, b: usize| DirectedLink {
        from: (a, if a == 0 { 0 } else { 1 }),
        to: (b, 0),
        delay: Duration::from_nanos(100),
    };
    let model = Model {
        link_bits_per_s: 0,
        fabric_link_bits_per_s: 8_000_000_000,
        switch_delay: Duration::from_nanos(500),
        ..Model::default()
    };
    let links = [link(0, 1), link(1, 2), link(2, 3)];
    let mut e = Engine::new(nodes, &links, model, 1, Instant::ZERO).unwrap();
    e.run_until(Instant::from_nanos(1_000_000), &Budget::default())
        .unwrap();
    let arrived = e
        .node(3)
        .arrived
        .iter()
        .map(|&(i, t)| (i, t.as_nanos()))
        .collect();
    (e.stats().clone(), arrived)
}

/// Strict priority (paper 003 section 4, footnote 4): frames of the last class waiting behind
/// a busy port are overtaken by a class-0 frame, then by class-2 frames, queued after them; a
/// class past the last counts as the last; the frame on the wire is not preempted. Per class,
/// the peak is what waited of that class at once, while the first frame was serialized.
#[test]
fn higher_classes_overtake_lower_ones_queued_before_them() {
    let frames = [(3, 1000), (3, 100), (200, 200), (2, 300), (0, 400), (2, 500)];
    let (stats, arrived) = through_a_slow_fabric_link(&frames);
    let order: Vec<u8> = arrived.iter().map(|&(i, _)| i).collect();
    assert_eq!(order, vec![0, 4, 3, 5, 1, 2]);
    // Every frame reaches switch 1 at 600 ns; each then leaves in turn at 1 ns a byte, and
    // reaches host 3 after two delays and switch 2's processing.
    let mut wire_free_ns = 600;
    for &(i, at) in &arrived {
        wire_free_ns += frames[i as usize].1 as u64;
        assert_eq!(at, wire_free_ns + 100 + 500 + 100, "frame {i}");
    }
    assert_eq!(stats.peak_switch_queue_bytes, [400, 0, 300 + 500, 100 + 200]);
    assert_eq!(stats.peak_queue_bytes, 100 + 200 + 300 + 400 + 500);
}

/// A run whose frames are all in one class, whichever, is the plain FIFO run: the same events
/// at the same times, and the peak is all in that class.
#[test]
fn one_class_alone_is_served_first_in_first_out() {
    let lengths = [1000, 100, 200, 300, 400, 500];
    let run = |class: u8| through_a_slow_fabric_link(&lengths.map(|len| (class, len)));
    let (fifo, fifo_arrived) = run(3);
    let order: Vec<u8> = fifo_arrived.iter().map(|&(i, _)| i).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 5]);
    for class in 0..PRIORITY_CLASSES as u8 {
        let (stats, arrived) = run(class);
        assert_eq!(arrived, fifo_arrived, "class {class}");
        assert_eq!(stats.events, fifo.events);
        assert_eq!(stats.peak_queue_bytes, 1500);
        let mut peaks = [0; PRIORITY_CLASSES];
        peaks[class as usize] = 1500;
        assert_eq!(stats.peak_switch_queue_bytes, peaks, "class {class}");
    }
}

/// Hosts send `frames` frames of 4,000 bytes tagged 1 at start; a switch forwards port 0 and
/// port 2 out of port 1 and, from `originate_at`, has one 100-byte frame of its own, tagged 2;
/// the far host records the tags in arrival order.
struct Originator {
    role: Role,
    frames: usize,
    originate_at: Option<Instant>,
    /// Its timer fired: the frame waits for the port, and the timer is not due again.
    due: bool,
    arrived: Vec<u8>,
}

impl Node for Originator {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        match self.role {
            Role::Switch => Route::Forward(1),
            _ => Route::Consume,
        }
    }
    fn handle_frame(&mut self, _now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
        if self.role == Role::Host {
            self.arrived.push(frame[0]);
        }
    }
    fn poll_transmit(&mut self, now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        if self.role == Role::Switch {
            if !self.due || self.originate_at.take_if(|at| *at <= now).is_none() {
                return None;
            }
            buf[0] = 2;
            return Some(100);
        }
        self.frames = self.frames.checked_sub(1)?;
        buf[..4000].fill(1);
        Some(4000)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.originate_at.filter(|_| !self.due)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.due |= self.originate_at.is_some_and(|at| at <= now);
    }
}

impl Hints for Originator {}

/// The order the far host sees, the switch originating at 5 us while its output port has a
/// standing queue of the two hosts' frames.
fn originated_behind(originate_behind_queues: bool) -> Vec<u8> {
    let node = |role, frames, originate_at| {
        let n = Originator {
            role,
            frames,
            originate_at,
            due: false,
            arrived: Vec::new(),
        };
        (n, role)
    };
    let nodes = vec![
        node(Role::Host, 3, None),
        node(Role::Host, 3, None),
        node(Role::Switch, 0, Some(Instant::from_nanos(5_000))),
        node(Role::Host, 0, None),
    ];
    let link = |from: (usize, PortId), to: (usize, PortId)| DirectedLink {
        from,
        to,
        delay: Duration::from_nanos(100),
    };
    let links = [link((0, 0), (2, 0)), link((1, 0), (2, 2)), link((2, 1), (3, 0))];
    let model = Model {
        link_bits_per_s: 8_000_000_000,
        originate_behind_queues,
        ..Model::default()
    };
    let mut e = Engine::new(nodes, &links, model, 1, Instant::ZERO).unwrap();
    e.run_until(Instant::from_nanos(1_000_000), &Budget::default())
        .unwrap();
    e.node(3).arrived.clone()
}

/// A switch asked only when its port is idle sends its own frame after the whole backlog; one
/// that may originate behind queues puts it behind what is queued when it is due.
#[test]
fn a_switch_originates_behind_a_standing_queue_only_when_allowed() {
    assert_eq!(originated_behind(false), [1, 1, 1, 1, 1, 1, 2]);
    assert_eq!(originated_behind(true), [1, 1, 2, 1, 1, 1, 1]);
}
