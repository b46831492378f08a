//! The management plane: `ControlMsg::decode` (and encode -> decode of what decodes), then
//! the nodes that take control frames on their management port: a switch and a host inside
//! `Mgmt` (the one wrapper every runtime uses) and the controller as a node
//! (`ControllerNode`), each fed control frames (made up from the input: well formed ones
//! naming real and unknown ports, processes and epochs, or raw bytes) between fabric frames
//! and timers. Invariants after every step.

use super::{STEPS_MAX, advance, offer, tick};
use crate::fixture::{self, START};
use crate::frames::{self, Draw, Peers};
use crate::targets::endpoint;
use onepipe::control_msg::{CONTROL_TAG, ControlMsg};
use onepipe::control_node::{ControllerNode, Mgmt, RouteCache, mgmt_port};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId};
use onepipe_proto::controller::forward::PacketBytes;
use onepipe_proto::controller::{ControllerConfig, Input, Member};
use onepipe_wire::Instant;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => decode(rest),
        1 => switch(rest),
        2 => host(rest),
        _ => controller(rest),
    }
}

/// What decodes encodes back to a frame that decodes to the same message.
fn decode(bytes: &[u8]) {
    let Ok(msg) = ControlMsg::decode(bytes) else {
        return;
    };
    let mut buf = vec![0u8; FRAME_MAX * 8];
    // A message may decode from more bytes than a frame holds; then it need not encode into one.
    if let Ok(len) = msg.encode(&mut buf) {
        assert_eq!(ControlMsg::decode(&buf[..len]), Ok(msg));
    }
}

/// A control frame: an encoded message (7 in 8), or raw bytes behind the tag.
pub fn control_frame(d: &mut Draw, now: Instant, to_controller: bool) -> Vec<u8> {
    if d.u8() % 8 == 0 {
        let mut f = vec![CONTROL_TAG];
        f.extend(d.bytes(64));
        return f;
    }
    let msg = if to_controller || d.u8() % 8 == 0 {
        ControlMsg::Input(input(d, now))
    } else {
        message(d, now)
    };
    let mut buf = vec![0u8; FRAME_MAX];
    match msg.encode(&mut buf) {
        Ok(len) => buf[..len].to_vec(),
        Err(_) => vec![CONTROL_TAG],
    }
}

fn process(d: &mut Draw) -> u32 {
    d.number(fixture::fabric().wiring.process_count() as u64 + 1) as u32
}

fn port(d: &mut Draw) -> PortId {
    d.number(6) as PortId
}

fn ports(d: &mut Draw) -> Vec<PortId> {
    (0..d.below(4)).map(|_| port(d)).collect()
}

fn member(d: &mut Draw) -> Member {
    let switches = fixture::fabric().wiring.switch_count() as u64;
    match d.bool() {
        true => Member::Switch(d.number(switches + 1) as usize),
        false => Member::Process(process(d)),
    }
}

fn failures<T: From<(u32, u64)>>(d: &mut Draw, now: Instant) -> Vec<T> {
    (0..d.below(4))
        .map(|_| (process(d), d.time_near(now).as_nanos()).into())
        .collect()
}

fn packet(d: &mut Draw, now: Instant) -> PacketBytes {
    let peers = Peers {
        processes: fixture::fabric().wiring.process_count() as u32,
        links: 4,
    };
    PacketBytes(frames::frame(d, now, peers))
}

/// What a member may tell the controller, naming members, ports and processes that exist
/// and some that do not.
pub fn input(d: &mut Draw, now: Instant) -> Input {
    match d.u8() % 10 {
        0 => Input::Register { process: process(d) },
        8 => Input::Implausible {
            member: member(d),
            port: port(d),
            ahead_ns: d.number(8),
            refused: d.number(8),
        },
        1 => Input::LinkDown {
            member: member(d),
            port: port(d),
            last_commit_ns: d.time_near(now).as_nanos(),
        },
        2 => Input::Completed {
            process: process(d),
            epoch: d.number(4),
        },
        3 => Input::Heard {
            member: member(d),
            port: port(d),
        },
        4 => Input::RecallLost {
            process: process(d),
            lost: (0..d.below(4))
                .map(|_| (process(d), d.time_near(now).as_nanos(), d.number(8)))
                .collect(),
        },
        5 => Input::Recover {
            process: process(d),
            incarnation: d.number(4),
        },
        6 => Input::Rejoin {
            process: process(d),
            incarnation: d.number(4),
        },
        7 => Input::Forward {
            from: process(d),
            to: process(d),
            packet: packet(d, now),
        },
        _ => Input::Forwarded {
            process: process(d),
            id: d.number(8),
            ack: d.bool().then(|| packet(d, now)),
        },
    }
}

/// What the controller may tell a member.
pub fn message(d: &mut Draw, now: Instant) -> ControlMsg {
    let switches = fixture::fabric().wiring.switch_count() as u64;
    match d.u8() % 14 {
        0 => ControlMsg::Hello,
        1 => ControlMsg::Announce {
            epoch: d.number(4),
            failures: failures(d, now),
        },
        2 => ControlMsg::RemoveInputs(ports(d)),
        3 => ControlMsg::CutInput(port(d)),
        4 => ControlMsg::Avoid(
            (0..d.below(4))
                .map(|_| (d.number(switches + 1) as usize, port(d)))
                .collect(),
        ),
        5 => ControlMsg::PathsChanged,
        6 => ControlMsg::Registered {
            failures: failures(d, now),
        },
        7 => ControlMsg::OwnFailure {
            ts: d.time_near(now),
            incarnation: d.number(4),
        },
        8 => ControlMsg::LostRecalls {
            incarnation: d.number(4),
            recalls: (0..d.below(4))
                .map(|_| (process(d), d.time_near(now).as_nanos(), d.number(8)).into())
                .collect(),
        },
        9 => ControlMsg::Recovery {
            incarnation: d.number(4),
            ts: d.time_near(now),
            failures: failures(d, now),
            failed_now: failures(d, now),
            recalls: d.number(4) as u32,
            recalls_truncated: d.bool(),
        },
        10 => ControlMsg::Rejoined {
            process: process(d),
            incarnation: d.number(4),
        },
        11 => ControlMsg::Readmit(ports(d)),
        12 => ControlMsg::Forward {
            id: d.number(8),
            packet: packet(d, now),
        },
        _ => ControlMsg::Input(input(d, now)),
    }
}

/// Steps a managed node: control frames on its management port, fabric frames on the others,
/// transmit opportunities on all, timers; `check` after each.
fn steps<N: Node>(d: &mut Draw, node: &mut N, fabric_ports: PortId, mgmt: PortId, check: impl Fn(&N)) {
    let peers = Peers {
        processes: fixture::fabric().wiring.process_count() as u32,
        links: fabric_ports,
    };
    let mut now = START;
    let mut buf = vec![0u8; FRAME_MAX];
    let mut sent = Vec::new();
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(d, now);
        match d.u8() % 5 {
            0 | 1 => {
                let mut f = control_frame(d, now, false);
                offer(d, node, now, mgmt, mgmt + 1, &mut f);
            }
            2 => {
                let port = d.below(fabric_ports as usize) as PortId;
                let mut f = frames::frame(d, now, peers);
                offer(d, node, now, port, mgmt + 1, &mut f);
            }
            3 => {
                let port = d.below(fabric_ports as usize + 1) as PortId;
                while let Some(len) = node.poll_transmit(now, port, &mut buf) {
                    if port == mgmt {
                        ControlMsg::decode(&buf[..len]).expect("a node's control frames decode");
                    } else {
                        super::check_sent(&buf[..len]);
                    }
                    sent.push(len);
                    if sent.len() > 64 {
                        break;
                    }
                }
                sent.clear();
            }
            _ => tick(node, now),
        }
        check(node);
    }
}

fn switch(data: &[u8]) {
    let fabric = fixture::fabric();
    let mut d = Draw::new(data);
    let id = d.below(fabric.wiring.switch_count());
    let sw = fixture::switch_node(id);
    let mgmt = mgmt_port(&fabric.wiring, id);
    let routes = RouteCache::shared(&fabric.wiring);
    let mut node = Mgmt::managed(sw, Member::Switch(id), mgmt, routes);
    steps(&mut d, &mut node, mgmt, mgmt, |n| super::switch::check(&n.node));
}

fn host(data: &[u8]) {
    let fabric = fixture::fabric();
    let mut d = Draw::new(data);
    let p = d.below(2) as u32;
    let index = fabric.wiring.node_of_process(p);
    let mgmt = mgmt_port(&fabric.wiring, index);
    let routes = RouteCache::shared(&fabric.wiring);
    let mut node = Mgmt::managed(endpoint::host(p), Member::Process(p), mgmt, routes);
    steps(&mut d, &mut node, mgmt, mgmt, |n| n.node.endpoint.invariants());
}

fn controller(data: &[u8]) {
    let fabric = fixture::fabric();
    let mut d = Draw::new(data);
    let mut node = ControllerNode::new(&fabric.wiring, ControllerConfig::default(), START);
    let nodes = (fabric.wiring.switch_count() + fabric.wiring.process_count()) as PortId;
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
                let (port, mut f) = to_controller(&mut d, now, nodes);
                offer(&mut d, &mut node, now, port, nodes, &mut f);
            }
            2 => {
                let port = d.below(nodes as usize + 1) as PortId;
                while let Some(len) = node.poll_transmit(now, port, &mut buf) {
                    ControlMsg::decode(&buf[..len]).expect("the controller's frames decode");
                    sent.push(len);
                    if sent.len() > 64 {
                        break;
                    }
                }
                sent.clear();
            }
            _ => tick(&mut node, now),
        }
        node.controller().invariants();
    }
}

/// A frame for the controller and the port it arrives on: most often the port of the member
/// the input names (which the controller requires), else any.
fn to_controller(d: &mut Draw, now: Instant, nodes: PortId) -> (PortId, Vec<u8>) {
    if d.u8() % 4 == 0 {
        return (d.below(nodes as usize) as PortId, control_frame(d, now, true));
    }
    let input = input(d, now);
    let switches = fixture::fabric().wiring.switch_count();
    let named = match input {
        Input::Register { process }
        | Input::Completed { process, .. }
        | Input::RecallLost { process, .. }
        | Input::Recover { process, .. }
        | Input::Rejoin { process, .. }
        | Input::Forward { from: process, .. }
        | Input::Forwarded { process, .. } => switches + process as usize,
        Input::LinkDown { member, .. } | Input::Heard { member, .. } | Input::Implausible { member, .. } => {
            match member {
                Member::Switch(s) => s,
                Member::Process(p) => switches + p as usize,
            }
        }
    };
    let port = if named < nodes as usize {
        named as PortId
    } else {
        d.below(nodes as usize) as PortId
    };
    let mut buf = vec![0u8; FRAME_MAX];
    let len = ControlMsg::Input(input).encode(&mut buf).unwrap_or(0);
    (port, buf[..len].to_vec())
}
