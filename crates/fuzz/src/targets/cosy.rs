//! cosy's nodes fed hostile frames: a switch of a small leaf-spine (`CosySwitch`) and a host
//! (`CosyHost`), given steps drawn from the input: a cosy packet on a port (well formed with
//! fields from small sets, so that senders, messages, nonces and hops are often the real ones;
//! damaged; or raw), a submission, a transmit opportunity, a timer. The switch's and the
//! host's `invariants()` hold after every step, everything they send parses, and no port ever
//! holds more than K reservations (paper 3.3).

use super::{STEPS_MAX, advance};
use crate::fixture::START;
use crate::frames::{Draw, hostile};
use onepipe_cosy::{CosyHost, CosySwitch, HostConfig, SwitchConfig, Timing};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Route, Topology, Wiring, routing};
use onepipe_wire::Duration;
use onepipe_wire::cosy::{HEADER_LEN, Hop, Kind, Repr};

const K: u8 = 2;
/// The host is process 1; the leaf-spine has 4 processes, 2 leaves, 2 spines.
const ME: u32 = 1;

fn nodes(d: &mut Draw) -> (Wiring, CosySwitch, CosyHost) {
    let wiring = Wiring::new(Topology::leaf_spine(2, 2, 2).expect("preset"), 1).expect("wires");
    let id = d.below(wiring.switch_count());
    let routes = routing::build(&wiring).expect("routes").swap_remove(id);
    let config = SwitchConfig {
        k: K,
        cleanup_after: Duration::from_micros(200),
        queue_frames_max: 8,
        ..SwitchConfig::default()
    };
    let switch = CosySwitch::new(id, &wiring, routes, config);
    let timing = Timing {
        k: K,
        ..Timing::default()
    };
    let mut host_config = HostConfig::new(ME, 4, timing);
    host_config.message_bytes_max = 8 * 1024;
    host_config.outgoing_max = 8;
    host_config.pending_max = 8;
    host_config.queue_max = 16;
    let host = CosyHost::new(host_config).expect("valid timing");
    (wiring, switch, host)
}

/// A cosy packet whose fields are drawn from small sets.
fn message(d: &mut Draw) -> Vec<u8> {
    let kind = Kind::from_nibble(1 + d.u8() % 6).expect("1 to 6");
    let mut r = Repr::new(kind, d.u32() % 5, d.u32() % 5, d.u32() % 4);
    r.nonce = d.u32() % 4;
    r.size = d.u32() % 4096;
    for _ in 0..d.below(5) {
        r.push_hop(Hop {
            switch: d.u16() % 5,
            port: d.u16() % 5,
            vls: d.u16() % (1 << (K + 1)),
        });
    }
    if d.bool() {
        r.start_along();
        r.pointer = (d.u8() as usize % (r.hops().len() + 1)) as u8;
    }
    let payload = if kind == Kind::Data { d.below(64) } else { 0 };
    let mut f = vec![0u8; HEADER_LEN + payload];
    r.emit(&mut f).expect("room");
    f
}

fn check_sent(frame: &[u8]) {
    assert!(frame.len() <= FRAME_MAX);
    assert!(
        Repr::parse(frame).is_ok(),
        "sent a frame that does not parse: {frame:?}"
    );
}

pub fn run(data: &[u8]) {
    let mut d = Draw::new(data);
    let (wiring, mut switch, mut host) = nodes(&mut d);
    let ports = wiring.switch_ports[wiring.processes[0].tor].len() as PortId;
    let mut now = START;
    let mut buf = vec![0u8; FRAME_MAX];
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(&mut d, now);
        match d.u8() % 6 {
            0 | 1 => {
                let port = d.below(ports as usize) as PortId;
                let mut f = hostile(&mut d, message);
                let route = switch.classify(now, port, &f);
                if let Route::Forward(out) = route {
                    assert!(out < ports + 2, "forwarded to port {out}");
                }
                switch.handle_frame(now, port, &mut f, route);
            }
            2 => {
                let mut f = hostile(&mut d, message);
                host.handle_frame(now, 0, &mut f, Route::Consume);
            }
            3 => {
                for port in 0..ports + 2 {
                    while let Some(len) = switch.poll_transmit(now, port, &mut buf) {
                        check_sent(&buf[..len]);
                    }
                }
                for _ in 0..64 {
                    let Some(len) = host.poll_transmit(now, 0, &mut buf) else {
                        break;
                    };
                    check_sent(&buf[..len]);
                }
            }
            4 => {
                let dst = d.u32() % 6;
                let len = d.below(9000);
                let _ = host.submit(now, dst, d.bytes(len));
            }
            _ => {
                if switch.poll_timeout().is_some_and(|t| t <= now) {
                    switch.handle_timeout(now);
                }
                host.handle_timeout(now);
                while host.poll_completion().is_some() {}
                while host.poll_delivery().is_some() {}
            }
        }
        switch.invariants();
        host.invariants();
        assert!(switch.vlinks().peak_reserved().iter().all(|&p| p <= K));
    }
}
