//! The udp runtime's credits make links lossless: a sender much faster than its receiver, two
//! hops apart over real sockets, loses nothing and is held back instead, the frames that close
//! its visits included.

#![allow(clippy::disallowed_methods)] // the slow receiver burns real time

use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::UdpConfig;
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_wire::Instant;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const FRAMES: u64 = 150_000;
const FRAME_BYTES: usize = 100;

enum TestNode {
    /// Forwards each frame to the port in its first byte (the single switch's port p is
    /// process p).
    Switch,
    Sender {
        next: u64,
    },
    /// Takes about `slow` per frame and counts the frames that arrive in sequence.
    Receiver {
        in_sequence: Arc<AtomicU64>,
        out_of_sequence: u64,
        slow: std::time::Duration,
    },
}

impl Node for TestNode {
    fn classify(&self, _: Instant, _: PortId, frame: &[u8]) -> Route {
        match self {
            TestNode::Switch => Route::Forward(frame[0] as PortId),
            _ => Route::Consume,
        }
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, frame: &mut [u8], _: Route) {
        if let TestNode::Receiver {
            in_sequence,
            out_of_sequence,
            slow,
        } = self
        {
            let seq = u64::from_le_bytes(frame[1..9].try_into().unwrap());
            if seq == in_sequence.load(Ordering::Relaxed) {
                in_sequence.fetch_add(1, Ordering::Relaxed);
            } else {
                *out_of_sequence += 1;
            }
            let until = std::time::Instant::now() + *slow;
            while std::time::Instant::now() < until {}
        }
    }
    fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        let TestNode::Sender { next } = self else {
            return None;
        };
        if *next == FRAMES {
            return None;
        }
        buf[0] = 1;
        buf[1..9].copy_from_slice(&next.to_le_bytes());
        buf[9..FRAME_BYTES].fill(0xab);
        *next += 1;
        Some(FRAME_BYTES)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for TestNode {
    fn wants_transmit(&self) -> bool {
        matches!(self, TestNode::Sender { next } if *next < FRAMES)
    }
    /// The sender closes every visit with one more frame, as a host in promise mode does:
    /// those may go past a spent window, and must not overrun the receiver either.
    fn end_visit(&mut self, _: Instant) -> usize {
        usize::from(self.wants_transmit())
    }
}

#[test]
fn a_fast_sender_is_held_back_and_loses_nothing() {
    held_back_and_lossless(None);
}

/// The same with the three nodes on fewer threads than nodes, each node keeping its socket.
#[test]
fn nodes_sharing_threads_are_held_back_and_lose_nothing() {
    held_back_and_lossless(Some(2));
    held_back_and_lossless(Some(1));
}

fn held_back_and_lossless(threads: Option<usize>) {
    let wiring = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
    let in_sequence = Arc::new(AtomicU64::new(0));
    let nodes = vec![
        TestNode::Switch,
        TestNode::Sender { next: 0 },
        TestNode::Receiver {
            in_sequence: in_sequence.clone(),
            out_of_sequence: 0,
            slow: std::time::Duration::from_micros(2),
        },
    ];
    // Small socket buffers: without credits most of the burst would be dropped.
    let udp = UdpConfig {
        socket_buffer_bytes: 256 << 10,
        threads,
        ..UdpConfig::default()
    };
    let fabric = LocalFabric::start(&wiring, nodes, &udp, Clock::from_system_time()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while in_sequence.load(Ordering::Relaxed) < FRAMES && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let totals = fabric.totals();
    let nodes = fabric.stop();
    let TestNode::Receiver { out_of_sequence, .. } = &nodes[2] else {
        unreachable!()
    };
    assert_eq!(
        (in_sequence.load(Ordering::Relaxed), *out_of_sequence),
        (FRAMES, 0),
        "threads {threads:?}: {totals:?}"
    );
    assert_eq!(
        totals.lost_datagrams + totals.overrun_datagrams + totals.dropped_frames,
        0,
        "{totals:?}"
    );
    assert!(
        totals.blocked_frames > 0,
        "the switch never waited for credit: {totals:?}"
    );
}
