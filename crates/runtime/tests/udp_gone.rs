//! A switch whose neighbour is gone drops what it forwards there instead of holding it for
//! credit that will not come: otherwise the input carrying those frames stops, and with it
//! every other frame on that input (a dead host would stall its whole rack's traffic).

#![allow(clippy::disallowed_methods)] // the dead receiver waits on real time

use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::UdpConfig;
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_wire::Instant;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const FRAMES: u64 = 20_000;

enum TestNode {
    /// Forwards everything to port 1; says its peer there is gone when `gone` is set.
    Switch {
        gone: bool,
    },
    Sender {
        next: u64,
        sent: Arc<AtomicU64>,
    },
    /// Takes one frame, then stops reading (as a crashed process) until `dead` is cleared.
    Receiver {
        dead: Arc<AtomicBool>,
    },
}

impl Node for TestNode {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        match self {
            TestNode::Switch { .. } => Route::Forward(1),
            _ => Route::Consume,
        }
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, _: &mut [u8], _: Route) {
        if let TestNode::Receiver { dead } = self {
            while dead.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
    fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        let TestNode::Sender { next, sent } = self else {
            return None;
        };
        if *next == FRAMES {
            return None;
        }
        buf[..64].fill(0xab);
        *next += 1;
        sent.store(*next, Ordering::Relaxed);
        Some(64)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for TestNode {
    fn peer_gone(&self, port: PortId) -> bool {
        matches!(self, TestNode::Switch { gone: true }) && port == 1
    }
    fn wants_transmit(&self) -> bool {
        matches!(self, TestNode::Sender { next, .. } if *next < FRAMES)
    }
}

/// Runs the sender into a switch whose port 1 leads to a receiver that stopped; returns how
/// many frames the sender got out within `wait`, and the fabric's totals.
fn run(gone: bool, wait: std::time::Duration) -> (u64, onepipe_runtime::udp::local::UdpTotals) {
    let wiring = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
    let dead = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicU64::new(0));
    let nodes = vec![
        TestNode::Switch { gone },
        TestNode::Sender {
            next: 0,
            sent: sent.clone(),
        },
        TestNode::Receiver { dead: dead.clone() },
    ];
    let fabric =
        LocalFabric::start(&wiring, nodes, &UdpConfig::default(), Clock::from_system_time()).unwrap();
    let deadline = std::time::Instant::now() + wait;
    while sent.load(Ordering::Relaxed) < FRAMES && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let totals = fabric.totals();
    dead.store(false, Ordering::Relaxed);
    fabric.stop();
    (sent.load(Ordering::Relaxed), totals)
}

#[test]
fn frames_for_a_gone_neighbour_are_dropped_not_held() {
    let (sent, totals) = run(true, std::time::Duration::from_secs(30));
    assert_eq!(sent, FRAMES, "{totals:?}");
    assert!(totals.peer_gone_frames > FRAMES / 2, "{totals:?}");
}

#[test]
fn without_it_the_dead_port_holds_the_sender_back() {
    let (sent, totals) = run(false, std::time::Duration::from_millis(300));
    assert!(sent < FRAMES, "the sender was never held back: {totals:?}");
    assert_eq!(totals.peer_gone_frames, 0);
}
