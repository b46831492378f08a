//! A parked udp node wakes for its timeouts at their time, not at the kernel's next scheduler
//! tick: an idle host must beacon every interval (200 us here), and ticks are 4 ms at HZ=250.

#![allow(clippy::disallowed_methods)] // parks on real time

use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_runtime::udp::{IdlePolicy, UdpConfig};
use onepipe_wire::{Duration, Instant};

const INTERVAL: Duration = Duration::from_micros(200);

enum TestNode {
    Switch,
    /// Wants a timeout every `INTERVAL` and counts them; never sends.
    Ticker {
        next: Instant,
        ticks: u64,
    },
}

impl Node for TestNode {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, _: &mut [u8], _: Route) {}
    fn poll_transmit(&mut self, _: Instant, _: PortId, _: &mut [u8]) -> Option<usize> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            TestNode::Switch => None,
            TestNode::Ticker { next, .. } => Some(*next),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        if let TestNode::Ticker { next, ticks } = self
            && now >= *next
        {
            *ticks += 1;
            *next = now + INTERVAL;
        }
    }
}

impl Hints for TestNode {
    fn wants_transmit(&self) -> bool {
        false
    }
}

#[test]
fn a_parked_node_wakes_for_timeouts_shorter_than_a_scheduler_tick() {
    ticks_near_the_interval(None);
}

/// A thread that runs several nodes parks on all their sockets and wakes for the earliest of
/// their timeouts.
#[test]
fn a_parked_thread_of_several_nodes_wakes_for_their_timeouts() {
    ticks_near_the_interval(Some(1));
}

fn ticks_near_the_interval(threads: Option<usize>) {
    let wiring = Wiring::new(Topology::single_switch(1).unwrap(), 1).unwrap();
    let nodes = vec![
        TestNode::Switch,
        TestNode::Ticker {
            next: Instant::ZERO,
            ticks: 0,
        },
    ];
    // Park after every idle pass, so that every timeout is waited for in the kernel.
    let udp = UdpConfig {
        idle: IdlePolicy::SpinThenPark { spins: 1 },
        threads,
        ..UdpConfig::default()
    };
    let fabric = LocalFabric::start(&wiring, nodes, &udp, Clock::from_system_time()).unwrap();
    let ran = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let nodes = fabric.stop();
    let elapsed = ran.elapsed();
    let TestNode::Ticker { ticks, .. } = nodes[1] else {
        unreachable!()
    };
    // Ideally one tick per interval (2000 in 400 ms); a wait rounded up to a 4 ms tick gives at
    // most 100, to 8 ms (what SO_RCVTIMEO did here) 50. A fifth of the ideal leaves room for a
    // loaded machine.
    let ideal = (elapsed.as_micros() as f64 / INTERVAL.as_micros_f64()) as u64;
    assert!(
        ticks > ideal / 5,
        "threads {threads:?}: {ticks} timeouts in {elapsed:?}, ideally {ideal}"
    );
}
