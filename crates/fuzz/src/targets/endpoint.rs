//! Hosts (`onepipe::host::HostNode`: the 1Pipe endpoint, its reliable service on, and an
//! application) fed frames. Two hosts of the fixture talk over a scripted link that delivers,
//! drops, duplicates, reorders and damages their real frames (data, prepares, ACKs, NAKs,
//! recalls, beacons), and both take frames made up from the input as well; the application
//! sends best-effort and reliable scatterings. `invariants()` after every step.

use super::{STEPS_MAX, advance, check_sent, tick};
use crate::fixture::{self, START};
use crate::frames::{self, Draw, Peers};
use onepipe::host::{Application, HostNode};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Hints, Node, Route};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig, SendFailure};
use onepipe_wire::Instant;
use std::collections::VecDeque;

/// An application that takes whatever its endpoint delivers, releases and reports.
#[derive(Default)]
pub struct Sink {
    pub delivered: u64,
    pub failures: u64,
}

impl Application for Sink {
    fn drain(&mut self, _now: Instant, endpoint: &mut Endpoint) {
        while endpoint.poll_deliver().is_some() {
            self.delivered += 1;
        }
        while endpoint.poll_deliver_reliable().is_some() {
            self.delivered += 1;
        }
        while endpoint.poll_released().is_some() {}
        while endpoint.poll_released_unreliable().is_some() {}
    }
    fn refill(&mut self, _now: Instant, _endpoint: &mut Endpoint) {}
    fn on_process_failure(&mut self, _process: u32, _ts: Instant) {
        self.failures += 1;
    }
    fn on_send_failure(&mut self, _failure: SendFailure) {
        self.failures += 1;
    }
}

/// Host `process` of the fixture, with short intervals and small buffers so that timers
/// fire and limits are reached within one input.
pub fn host(process: u32) -> HostNode<Sink> {
    let wiring = &fixture::fabric().wiring;
    let count = wiring.process_count() as u32;
    let mut config = EndpointConfig::new(process, count, wiring.processes[process as usize].tor_port);
    config.mtu_bytes = 256;
    config.message_bytes_max = 4096;
    config.send_buffer_packets_max = 64;
    config.reorder_bytes_max = 64 << 10;
    config.nak_queue_max = 16;
    config.fit_recv_window_to(config.message_bytes_max);
    HostNode {
        endpoint: Endpoint::new(config, START),
        app: Sink::default(),
    }
}

/// A scattering drawn from the input: to one to three destinations (any process number,
/// so some do not exist), best effort or reliable.
pub fn send(d: &mut Draw, now: Instant, host: &mut HostNode<Sink>) {
    let count = host.endpoint.config().process_count;
    // Most often to the other host of the pair, which takes this host's frames.
    let other = 1 - host.endpoint.config().process.min(1);
    let messages: Vec<(u32, Vec<u8>)> = (0..1 + d.below(3))
        .map(|i| {
            let dst = match i == 0 && d.u8() % 4 != 0 {
                true => other,
                false => d.number(count as u64 + 1) as u32,
            };
            (dst, vec![d.u8(); d.below(1500)])
        })
        .collect();
    let scatter: Vec<(u32, &[u8])> = messages.iter().map(|(dst, m)| (*dst, &m[..])).collect();
    let _ = if d.bool() {
        host.endpoint.send_reliable(now, &scatter)
    } else {
        host.endpoint.send_unreliable(now, &scatter)
    };
}

pub fn run(data: &[u8]) {
    let mut d = Draw::new(data);
    let mut hosts = [host(0), host(1)];
    let peers = Peers {
        processes: hosts[0].endpoint.config().process_count,
        links: 4,
    };
    // Frames each host sent, on their way to the other.
    let mut wires: [VecDeque<Vec<u8>>; 2] = Default::default();
    let mut now = START;
    let mut buf = vec![0u8; FRAME_MAX];
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(&mut d, now);
        let h = d.below(2);
        match d.u8() % 8 {
            0 => send(&mut d, now, &mut hosts[h]),
            1 | 2 => {
                for _ in 0..1 + d.below(8) {
                    let Some(len) = hosts[h].poll_transmit(now, 0, &mut buf) else {
                        break;
                    };
                    check_sent(&buf[..len]);
                    wires[h].push_back(buf[..len].to_vec());
                }
            }
            3 | 4 => carry(&mut d, now, &mut hosts[1 - h], &mut wires[h]),
            5 => {
                let mut f = frames::frame(&mut d, now, peers);
                hosts[h].handle_frame(now, 0, &mut f, Route::Consume);
            }
            6 => {
                let extra = hosts[h].end_visit(now);
                for _ in 0..extra {
                    let Some(len) = hosts[h].poll_transmit(now, 0, &mut buf) else {
                        break;
                    };
                    check_sent(&buf[..len]);
                    wires[h].push_back(buf[..len].to_vec());
                }
            }
            _ => tick(&mut hosts[h], now),
        }
        for host in &hosts {
            host.endpoint.invariants();
        }
        for w in &mut wires {
            w.truncate(256);
        }
    }
}

/// The link from one host to the other takes its next frame: delivers it, perhaps damaged,
/// drops it, delivers it twice, or lets the one behind it go first.
fn carry(d: &mut Draw, now: Instant, to: &mut HostNode<Sink>, wire: &mut VecDeque<Vec<u8>>) {
    let Some(mut f) = wire.pop_front() else {
        return;
    };
    // Faults one time in eight: each leaves a trace (a late message, a NAK, a retransmission)
    // that later steps build on; more, and an input rarely delivers anything.
    match d.u8() % 32 {
        0 => {}
        1 => {
            to.handle_frame(now, 0, &mut f.clone(), Route::Consume);
            to.handle_frame(now, 0, &mut f, Route::Consume);
        }
        2 => {
            if let Some(mut next) = wire.pop_front() {
                to.handle_frame(now, 0, &mut next, Route::Consume);
            }
            to.handle_frame(now, 0, &mut f, Route::Consume);
        }
        3 => {
            frames::damage(d, &mut f);
            to.handle_frame(now, 0, &mut f, Route::Consume);
        }
        _ => to.handle_frame(now, 0, &mut f, Route::Consume),
    }
}
