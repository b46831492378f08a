//! A network for tests: NetChain switches on a wiring, frames delivered at once and in order,
//! processes as inboxes. Failed switches lose what reaches them.

use crate::switch::{NetchainSwitch, SwitchConfig};
use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::{Node, Peer, PortId, Route, Topology, Wiring};
use onepipe_wire::Instant;
use onepipe_wire::netchain::{Chain, Opcode, Query, Repr, Rule, RuleKind, Status};
use std::collections::VecDeque;
use std::sync::Arc;

pub struct Net {
    pub wiring: Arc<Wiring>,
    pub switches: Vec<NetchainSwitch>,
    /// Per process: frames delivered to it.
    pub inbox: Vec<Vec<Vec<u8>>>,
    pub down: Vec<bool>,
    /// (switch, arriving port, frame), in arrival order.
    pub in_flight: VecDeque<(usize, PortId, Vec<u8>)>,
    /// Seeded faults on every hop: loss and reordering.
    pub faults: Option<Faults>,
}

/// What the network does to frames, drawn from a seed.
pub struct Faults {
    pub rng: SplitMix,
    /// Probability that a frame is lost on a hop.
    pub loss: f64,
    /// Probability that a frame is passed by the one behind it.
    pub reorder: f64,
    /// Probability that a frame is delivered twice, the copy after everything in flight.
    pub duplicate: f64,
}

/// The process that is the controller in tests.
pub const CONTROLLER: u32 = 0;

impl Net {
    /// NetChain's testbed (s0..s3, four processes under s0), process 0 the controller.
    pub fn testbed() -> Net {
        Net::new(Topology::netchain_testbed())
    }

    pub fn new(topology: Topology) -> Net {
        let wiring = Arc::new(Wiring::new(topology, 1).unwrap());
        let config = SwitchConfig {
            slots: 1024,
            value_bytes_max: 16,
            controller: Some(CONTROLLER),
            ..SwitchConfig::default()
        };
        let switches = (0..wiring.switch_count())
            .map(|s| NetchainSwitch::new(s, wiring.clone(), config.clone()))
            .collect();
        Net {
            inbox: vec![Vec::new(); wiring.process_count()],
            down: vec![false; wiring.switch_count()],
            wiring,
            switches,
            in_flight: VecDeque::new(),
            faults: None,
        }
    }

    /// `process` sends `frame` to its ToR.
    pub fn send(&mut self, process: u32, frame: Vec<u8>) {
        let spec = self.wiring.processes[process as usize];
        self.in_flight.push_back((spec.tor, spec.tor_port, frame));
    }

    /// Takes the next frame off the wire and lets its switch handle it; `false` when none is
    /// left.
    pub fn step(&mut self) -> bool {
        if let Some(f) = self.faults.as_mut()
            && self.in_flight.len() > 1
            && f.rng.chance(f.reorder)
        {
            self.in_flight.swap(0, 1);
        }
        if let Some((s, port, mut frame)) = self.in_flight.pop_front() {
            if let Some(f) = self.faults.as_mut() {
                if f.rng.chance(f.loss) {
                    return true;
                }
                if f.rng.chance(f.duplicate) {
                    self.in_flight.push_back((s, port, frame.clone()));
                }
            }
            if !self.down[s] {
                let now = Instant::ZERO;
                let route = self.switches[s].classify(now, port, &frame);
                self.switches[s].handle_frame(now, port, &mut frame, route);
                self.switches[s].invariants();
                if let Route::Forward(out) = route {
                    self.deliver(s, out, frame);
                }
            }
            return true;
        }
        let mut moved = false;
        for s in 0..self.switches.len() {
            for port in 0..self.wiring.switch_ports[s].len() as PortId {
                let mut buf = vec![0u8; onepipe_fabric::node::FRAME_MAX];
                while let Some(len) = self.switches[s].poll_transmit(Instant::ZERO, port, &mut buf) {
                    self.deliver(s, port, buf[..len].to_vec());
                    moved = true;
                }
            }
        }
        moved
    }

    /// Runs until nothing moves (bounded: a loop of frames fails the test).
    pub fn run(&mut self) {
        for _ in 0..100_000 {
            if !self.step() {
                return;
            }
        }
        panic!("frames still moving after 100,000 steps");
    }

    fn deliver(&mut self, s: usize, port: PortId, frame: Vec<u8>) {
        if self.down[s] {
            return;
        }
        match self.wiring.switch_ports[s][port as usize].peer {
            Peer::Process(p) => self.inbox[p as usize].push(frame),
            Peer::Switch { switch, port } => self.in_flight.push_back((switch, port, frame)),
        }
    }

    /// The replies in `process`'s inbox, taken out.
    pub fn replies(&mut self, process: u32) -> Vec<(Opcode, Status, Option<Vec<u8>>, u64)> {
        std::mem::take(&mut self.inbox[process as usize])
            .iter()
            .map(|f| match Repr::parse(f).unwrap() {
                Repr::Query(q) => (q.opcode, q.status, q.value.map(<[u8]>::to_vec), q.request),
                Repr::Rule(r) => (Opcode::Rule, r.status, None, r.request),
            })
            .collect()
    }

    /// The controller installs a rule at `at`, and the acknowledgement comes back.
    pub fn rule(&mut self, at: u16, kind: RuleKind, group: u16, switch: u16, replacement: u16, session: u64) {
        let rule = Rule {
            target: at,
            flags: 0,
            status: Status::Ok,
            process: CONTROLLER,
            request: 0,
            kind,
            group,
            switch,
            replacement,
            session,
        };
        let mut frame = vec![0u8; Repr::Rule(rule).buffer_len()];
        Repr::Rule(rule).emit(&mut frame).unwrap();
        self.send(CONTROLLER, frame);
        self.run();
        let acks = self.replies(CONTROLLER);
        assert_eq!(acks.len(), 1, "one acknowledgement");
        assert_eq!(acks[0].1, Status::Ok);
    }
}

/// A query's frame.
#[allow(clippy::too_many_arguments)]
pub fn query(
    opcode: Opcode,
    process: u32,
    request: u64,
    chain: &[u16],
    key: &[u8],
    value: Option<&[u8]>,
    expect: Option<&[u8]>,
    group: u16,
) -> Vec<u8> {
    let chain = Chain::new(chain).unwrap();
    let mut k = [0u8; 16];
    k[..key.len()].copy_from_slice(key);
    let q = Query {
        opcode,
        flags: 0,
        status: Status::Ok,
        sc: chain.len() as u8,
        process,
        request,
        chain,
        group,
        version: 0,
        key: k,
        value,
        expect,
    };
    let mut frame = vec![0u8; Repr::Query(q).buffer_len()];
    Repr::Query(q).emit(&mut frame).unwrap();
    frame
}
