//! Switches host programs (DESIGN.md, "Switches host programs"): every switch runs 1Pipe's
//! barrier pipeline and a second program, a sequencer that numbers requests, side by side on
//! the same ports; every host runs a 1Pipe endpoint and the sequencer's client. The same nodes
//! run on each runtime (the simulator, inproc, udp), and on each the 1Pipe traffic is delivered
//! whole and in one total order while every request gets its own number.
//!
//! Neither program knows the other: the pipeline hands each frame to the program of its
//! protocol (`onepipe_wire::protocol`).

#![allow(clippy::disallowed_methods)] // inproc and udp run in real time: the test waits on them

use onepipe_fabric::{Hints, Node, Pipeline, PortId, Route, Topology, Wiring, routing};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_runtime::inproc::{Clock, InprocConfig, Runtime};
use onepipe_runtime::udp::UdpConfig;
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_sim::{Budget, Engine, Model, Role};
use onepipe_wire::protocol::{EXPERIMENTAL, ONEPIPE, first_byte};
use onepipe_wire::{Duration, Instant};
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

/// Broadcasts each process sends through 1Pipe.
const BROADCASTS: u32 = 100;
/// Requests each process sends to the sequencer at its ToR, at most `WINDOW` unanswered.
const REQUESTS: u32 = 100;
const WINDOW: u32 = 8;

const REQUEST: u8 = 1;
const REPLY: u8 = 2;
const REQUEST_BYTES: usize = 9;
const REPLY_BYTES: usize = 17;
/// Replies a sequencer holds per port before it drops (and counts) more.
const REPLIES_QUEUED_MAX: usize = 64;
/// 0.5 s at 50 us beacons: far longer than a thread of a loaded machine stays descheduled.
const REAL_TIME_DEAD_AFTER_INTERVALS: u32 = 10_000;

/// Two racks of two processes under one spine: 1Pipe's barriers cross three switches.
fn wiring() -> Wiring {
    Wiring::new(Topology::leaf_spine(2, 1, 2).unwrap(), 1).unwrap()
}

/// The second program: numbers each request that reaches it and answers on the port it came
/// in on. One register, one read-modify-write per packet, as a switch program may.
struct Sequencer {
    next: u64,
    replies: Vec<VecDeque<[u8; REPLY_BYTES]>>,
    dropped: Arc<Mutex<u64>>,
}

impl Node for Sequencer {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, _: Instant, port: PortId, frame: &mut [u8], _: Route) {
        let (Some(queue), true) = (
            self.replies.get_mut(port as usize),
            frame.len() == REQUEST_BYTES && frame[0] == first_byte(EXPERIMENTAL, REQUEST),
        ) else {
            *self.dropped.lock().unwrap() += 1;
            return;
        };
        if queue.len() == REPLIES_QUEUED_MAX {
            *self.dropped.lock().unwrap() += 1;
            return;
        }
        let mut reply = [0u8; REPLY_BYTES];
        reply[0] = first_byte(EXPERIMENTAL, REPLY);
        reply[1..9].copy_from_slice(&frame[1..9]);
        reply[9..].copy_from_slice(&self.next.to_be_bytes());
        self.next += 1;
        queue.push_back(reply);
    }
    fn poll_transmit(&mut self, _: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let reply = self.replies.get_mut(port as usize)?.pop_front()?;
        buf[..REPLY_BYTES].copy_from_slice(&reply);
        Some(REPLY_BYTES)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for Sequencer {
    fn wants_transmit(&self) -> bool {
        self.replies.iter().any(|q| !q.is_empty())
    }
}

/// What the test reads back from every host, shared with the nodes wherever a runtime runs them.
#[derive(Default)]
struct Outcome {
    /// Per process: the 1Pipe deliveries, in delivery order, as (timestamp, sender, payload).
    delivered: Vec<Vec<(Instant, u32, Vec<u8>)>>,
    /// Per process: the number each request got.
    numbers: Vec<Vec<u64>>,
    /// Frames the sequencers dropped.
    dropped: Arc<Mutex<u64>>,
}

type Shared = Arc<Mutex<Outcome>>;

/// 1Pipe's host side: broadcasts `BROADCASTS` messages through the endpoint as its send buffer
/// takes them, and logs what it delivers.
struct Broadcaster {
    endpoint: Endpoint,
    sent: u32,
    outcome: Shared,
}

impl Broadcaster {
    fn drain(&mut self) {
        let me = self.endpoint.config().process as usize;
        while let Some(d) = self.endpoint.poll_deliver() {
            self.outcome.lock().unwrap().delivered[me].push((d.ts, d.src, d.payload));
        }
    }
}

impl Node for Broadcaster {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.endpoint
            .handle_frame(now, frame)
            .expect("well-formed 1Pipe frames only");
        self.drain();
    }
    fn poll_transmit(&mut self, now: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        let c = self.endpoint.config();
        let (me, count) = (c.process, c.process_count);
        if self.sent < BROADCASTS && self.endpoint.send_room_packets() >= count as usize {
            let payload = [me.to_be_bytes(), self.sent.to_be_bytes()].concat();
            let scatter: Vec<(u32, &[u8])> = (0..count).map(|p| (p, &payload[..])).collect();
            self.endpoint.send_unreliable(now, &scatter).unwrap();
            self.sent += 1;
        }
        self.endpoint.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.endpoint.poll_timeout())
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain();
    }
}

impl Hints for Broadcaster {}

/// The sequencer's host side: keeps `WINDOW` requests outstanding until `REQUESTS` are
/// answered.
struct Client {
    process: u32,
    sent: u32,
    answered: u32,
    outcome: Shared,
}

impl Node for Client {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, frame: &mut [u8], _: Route) {
        assert_eq!(frame.len(), REPLY_BYTES);
        assert_eq!(frame[0], first_byte(EXPERIMENTAL, REPLY));
        let process = u32::from_be_bytes(frame[1..5].try_into().unwrap());
        assert_eq!(process, self.process, "a reply reaches the process that asked");
        let number = u64::from_be_bytes(frame[9..17].try_into().unwrap());
        self.outcome.lock().unwrap().numbers[process as usize].push(number);
        self.answered += 1;
    }
    fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        if self.sent == REQUESTS || self.sent - self.answered >= WINDOW {
            return None;
        }
        buf[0] = first_byte(EXPERIMENTAL, REQUEST);
        buf[1..5].copy_from_slice(&self.process.to_be_bytes());
        buf[5..9].copy_from_slice(&self.sent.to_be_bytes());
        self.sent += 1;
        Some(REQUEST_BYTES)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for Client {}

/// Every node is a pipeline of two programs, whatever its role.
type TwoPrograms = Pipeline<Box<dyn Node>>;

/// Nodes for a run whose beacons go every `beacon_interval`. A switch takes an input silent for
/// `dead_after_intervals` of them as dead: in real time on two shared cores, a descheduled
/// thread is silent for milliseconds, and a live link taken for dead turns its sender's next
/// messages into late drops (docs/ordering.md), so the real-time runtimes wait longer.
fn nodes(
    wiring: &Wiring,
    beacon_interval: Duration,
    dead_after_intervals: u32,
    now: Instant,
    outcome: &Shared,
) -> Vec<TwoPrograms> {
    let count = wiring.process_count();
    let dropped = {
        let mut o = outcome.lock().unwrap();
        o.delivered = vec![Vec::new(); count];
        o.numbers = vec![Vec::new(); count];
        o.dropped.clone()
    };
    let config = SwitchConfig {
        beacon_interval,
        dead_after_intervals,
        ..SwitchConfig::default()
    };
    let mut nodes = Vec::new();
    for (s, routes) in routing::build(wiring).unwrap().into_iter().enumerate() {
        let onepipe: Box<dyn Node> = Box::new(Switch::new(s, wiring, routes, config.clone(), now));
        let sequencer: Box<dyn Node> = Box::new(Sequencer {
            next: 0,
            replies: vec![VecDeque::new(); wiring.switch_ports[s].len()],
            dropped: dropped.clone(),
        });
        nodes.push(Pipeline::new(vec![(ONEPIPE, onepipe), (EXPERIMENTAL, sequencer)]).unwrap());
    }
    for (p, spec) in wiring.processes.iter().enumerate() {
        let mut ec = EndpointConfig::new(p as u32, count as u32, spec.tor_port);
        ec.beacon_interval = beacon_interval;
        let broadcaster: Box<dyn Node> = Box::new(Broadcaster {
            endpoint: Endpoint::new(ec, now),
            sent: 0,
            outcome: outcome.clone(),
        });
        let client: Box<dyn Node> = Box::new(Client {
            process: p as u32,
            sent: 0,
            answered: 0,
            outcome: outcome.clone(),
        });
        nodes.push(Pipeline::new(vec![(ONEPIPE, broadcaster), (EXPERIMENTAL, client)]).unwrap());
    }
    nodes
}

/// Whether every message and every answer has arrived.
fn complete(outcome: &Shared) -> bool {
    let o = outcome.lock().unwrap();
    let whole = (BROADCASTS as usize) * o.delivered.len();
    o.delivered.iter().all(|d| d.len() == whole) && o.numbers.iter().all(|n| n.len() == REQUESTS as usize)
}

/// Both programs did their work: every process delivered every broadcast, all in one order
/// (1Pipe), and each rack's requests got distinct numbers from its ToR, none skipped (the
/// sequencer), with nothing dropped.
fn check(wiring: &Wiring, outcome: &Shared, nodes: &[TwoPrograms]) {
    let o = outcome.lock().unwrap();
    let count = wiring.process_count();
    for (p, d) in o.delivered.iter().enumerate() {
        assert_eq!(
            d.len(),
            BROADCASTS as usize * count,
            "process {p} delivered everything"
        );
        assert_eq!(
            d, &o.delivered[0],
            "process {p} delivered in the same total order as 0"
        );
    }
    let mut by_tor = vec![Vec::new(); wiring.switch_count()];
    for (p, spec) in wiring.processes.iter().enumerate() {
        assert_eq!(
            o.numbers[p].len(),
            REQUESTS as usize,
            "process {p}: every request answered"
        );
        by_tor[spec.tor].extend(&o.numbers[p]);
    }
    for (tor, numbers) in by_tor.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
        let distinct: BTreeSet<u64> = numbers.iter().copied().collect();
        let expected: BTreeSet<u64> = (0..numbers.len() as u64).collect();
        assert_eq!(distinct, expected, "switch {tor} numbered each request once");
    }
    assert_eq!(*o.dropped.lock().unwrap(), 0);
    for (i, n) in nodes.iter().enumerate() {
        n.invariants();
        assert_eq!(n.counters().unknown_protocol, 0, "node {i}");
        assert!(
            n.programs()
                .all(|(protocol, _)| protocol == ONEPIPE || protocol == EXPERIMENTAL)
        );
    }
}

/// The fabric, what it will report, a clock and the nodes, for a runtime in real time
/// (beacons every 50 us).
fn real_time() -> (Wiring, Shared, Clock, Vec<TwoPrograms>) {
    let w = wiring();
    let outcome = Shared::default();
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let beacon_interval = Duration::from_micros(50);
    let nodes = nodes(
        &w,
        beacon_interval,
        REAL_TIME_DEAD_AFTER_INTERVALS,
        clock.now(),
        &outcome,
    );
    (w, outcome, clock, nodes)
}

/// Waits in real time until the run is complete, or `limit` passes.
fn wait(outcome: &Shared, limit: std::time::Duration) {
    let started = std::time::Instant::now();
    while !complete(outcome) && started.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn two_programs_share_the_switches_in_the_simulator() {
    let w = wiring();
    let outcome = Shared::default();
    let start = Instant::from_nanos(1_000_000);
    let nodes = nodes(&w, Duration::from_micros(3), 10, start, &outcome);
    let roles = (0..nodes.len()).map(|i| {
        if i < w.switch_count() {
            Role::Switch
        } else {
            Role::Host
        }
    });
    let nodes: Vec<_> = nodes.into_iter().zip(roles).collect();
    let links = w.directed_links(Duration::from_micros(1));
    let mut engine = Engine::new(nodes, &links, Model::default(), 7, start).unwrap();
    engine
        .run_until(start + Duration::from_millis(20), &Budget::default())
        .unwrap();
    let nodes = engine.into_nodes();
    check(&w, &outcome, &nodes);
}

#[test]
fn two_programs_share_the_switches_on_inproc() {
    let (w, outcome, clock, nodes) = real_time();
    let inproc = InprocConfig {
        workers: 2,
        ..InprocConfig::default()
    };
    let rt = Runtime::start(nodes, &w.directed_links(Duration::ZERO), &[], &inproc, clock).unwrap();
    wait(&outcome, std::time::Duration::from_secs(30));
    let nodes = rt.stop();
    check(&w, &outcome, &nodes);
}

#[test]
fn two_programs_share_the_switches_over_udp() {
    let (w, outcome, clock, nodes) = real_time();
    let udp = UdpConfig {
        threads: Some(2),
        ..UdpConfig::default()
    };
    let fabric = LocalFabric::start(&w, nodes, &udp, clock).unwrap();
    wait(&outcome, std::time::Duration::from_secs(30));
    let nodes = fabric.stop();
    check(&w, &outcome, &nodes);
}
