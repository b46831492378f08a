//! One module per target; each `run` takes any bytes and panics only on a bug.

pub mod control;
pub mod controller_log;
pub mod cosy;
pub mod datagram;
pub mod endpoint;
pub mod frame;
pub mod history;
pub mod netchain;
pub mod paxos;
pub mod switch;
pub mod topology;
pub mod txkv;

use crate::frames::Draw;
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Route};
use onepipe_wire::packet::{Packet, Repr};
use onepipe_wire::{Duration, Instant};

/// Steps a node target takes at most, so that one input stays fast whatever its length.
pub const STEPS_MAX: usize = 256;
/// Frames drained from one port in one step at most.
const TRANSMITS_PER_STEP_MAX: usize = 64;

/// Moves the clock on as a runtime's would: by nothing, by nanoseconds to a few beacon
/// intervals, or, rarely, by up to a second. Never backwards.
pub fn advance(d: &mut Draw, now: Instant) -> Instant {
    let step_ns = match d.u8() % 32 {
        0..=3 => 0,
        4 => d.u32() as u64 % 1_000_000_000,
        _ => d.u16() as u64 % 20_000,
    };
    now + Duration::from_nanos(step_ns)
}

/// Hands `frame` to `node` on `port` the way the runtimes do: classify, perhaps stall it
/// first (its output full), then handle it, and mark it if it joins a congested queue.
/// Checks that a forwarded frame leaves by a port the node has.
pub fn offer<N: Node>(
    d: &mut Draw,
    node: &mut N,
    now: Instant,
    port: PortId,
    ports: PortId,
    frame: &mut [u8],
) {
    let route = node.classify(now, port, frame);
    if let Route::Forward(out) = route {
        assert!(out < ports, "forwarded to port {out} of {ports}");
        if d.u8() % 4 == 0 {
            node.handle_stalled(now, port, frame);
            node.handle_stalled(now, port, frame);
        }
    }
    node.handle_frame(now, port, frame, route);
    if matches!(route, Route::Forward(_)) && d.u8() % 4 == 0 {
        node.mark_congestion(frame);
    }
}

/// Takes what `node` sends on `port` (at most a step's worth) and checks that each is a
/// valid 1Pipe frame that fits a runtime's buffer.
pub fn drain<N: Node>(node: &mut N, now: Instant, port: PortId, buf: &mut [u8], sent: &mut Vec<Vec<u8>>) {
    for _ in 0..TRANSMITS_PER_STEP_MAX {
        let Some(len) = node.poll_transmit(now, port, buf) else {
            break;
        };
        assert!(len <= FRAME_MAX, "a frame of {len} bytes");
        check_sent(&buf[..len]);
        sent.push(buf[..len].to_vec());
    }
}

/// A frame a node originates parses.
pub fn check_sent(frame: &[u8]) {
    let packet =
        Packet::new_checked(frame).unwrap_or_else(|e| panic!("a node sent a frame that does not parse: {e}"));
    if let Err(e) = Repr::parse(&packet) {
        panic!("a node sent a frame that does not parse: {e}");
    }
}

/// Runs the node's timers if one is due.
pub fn tick<N: Node>(node: &mut N, now: Instant) {
    if node.poll_timeout().is_some_and(|t| t <= now) {
        node.handle_timeout(now);
    }
}
