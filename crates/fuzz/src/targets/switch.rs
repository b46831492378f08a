//! A real 1Pipe switch (`Switch::new(..).into_node()`, a `Pipeline`) of the leaf-spine
//! fixture, fed a sequence of steps drawn from the input: a frame on a port (well formed,
//! damaged or raw), a transmit opportunity, a timer; `invariants()` after every step.

use super::{STEPS_MAX, advance, drain, offer, tick};
use crate::fixture::{self, START};
use crate::frames::{self, Draw, Peers};
use onepipe_fabric::PortId;
use onepipe_fabric::node::FRAME_MAX;
use onepipe_proto::switch::SwitchNode;

pub fn run(data: &[u8]) {
    let fabric = fixture::fabric();
    let mut d = Draw::new(data);
    let id = d.below(fabric.wiring.switch_count());
    let mut node = fixture::switch_node(id);
    let ports = fabric.wiring.switch_ports[id].len() as PortId;
    let peers = Peers {
        processes: fabric.wiring.process_count() as u32,
        links: ports,
    };
    let mut now = START;
    let mut buf = vec![0u8; FRAME_MAX];
    let mut sent = Vec::new();
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(&mut d, now);
        match d.u8() % 4 {
            0 | 1 => {
                let port = d.below(ports as usize) as PortId;
                let mut f = frames::frame(&mut d, now, peers);
                offer(&mut d, &mut node, now, port, ports, &mut f);
            }
            2 => {
                let port = d.below(ports as usize) as PortId;
                drain(&mut node, now, port, &mut buf, &mut sent);
                sent.clear();
            }
            _ => tick(&mut node, now),
        }
        check(&node);
    }
}

pub fn check(node: &SwitchNode) {
    node.invariants();
    for (_, s) in node.programs() {
        s.invariants();
    }
}
