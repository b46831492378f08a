//! NetChain's nodes fed hostile frames: a switch of NetChain's testbed, the client agent and
//! the controller, each given a sequence of steps drawn from the input: a NetChain message on a
//! port (well formed, damaged or raw), a transmit opportunity, a timer. The switch's
//! `invariants()` hold after every step, and everything any of them sends parses.

use super::{STEPS_MAX, advance};
use crate::fixture::START;
use crate::frames::{Draw, hostile};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Topology, Wiring};
use onepipe_netchain::{
    Agent, AgentConfig, Call, Controller, ControllerConfig, Key, NetchainSwitch, Ring, SwitchConfig,
};
use onepipe_wire::netchain::{Chain, Opcode, Query, Repr, Rule, RuleKind, Status, flags};
use std::sync::Arc;

/// The testbed's last process runs the controller; clients are 0 to 3.
const CONTROLLER: u32 = 4;
const KEYS: [&[u8]; 3] = [b"a", b"key:000000000001", b"lock"];

struct Nodes {
    wiring: Arc<Wiring>,
    switch: NetchainSwitch,
    agent: Agent,
    controller: Controller,
}

fn nodes(d: &mut Draw) -> Nodes {
    let wiring = Arc::new(Wiring::new(Topology::netchain_testbed(), 1).expect("preset"));
    let config = SwitchConfig {
        slots: 4,
        value_bytes_max: 16,
        queue_frames_max: 8,
        rules_max: 8,
        controller: Some(CONTROLLER),
    };
    let id = d.below(wiring.switch_count());
    let ring = Ring::new(&[0, 1, 2, 3], 2, 3).expect("valid ring");
    Nodes {
        switch: NetchainSwitch::new(id, wiring.clone(), config),
        agent: Agent::new(AgentConfig::new(1, CONTROLLER), ring.clone()),
        controller: Controller::new(ControllerConfig::new(CONTROLLER), wiring.clone(), ring),
        wiring,
    }
}

/// A NetChain message whose fields are drawn from small sets, so that keys, switches and
/// processes are often the real ones.
fn message(d: &mut Draw) -> Vec<u8> {
    let value = |d: &mut Draw| (!d.bool()).then(|| d.bytes(20));
    let repr_bytes = |r: Repr<'_>| {
        let mut f = vec![0u8; r.buffer_len()];
        r.emit(&mut f).map(|len| f[..len].to_vec()).unwrap_or_default()
    };
    if d.u8() % 8 == 0 {
        let rule = Rule {
            flags: d.u8() & flags::REPLY,
            status: Status::from_byte(d.u8() % 5).unwrap_or(Status::Ok),
            process: d.u32() % 6,
            request: d.number(8),
            target: d.u16() % 5,
            kind: RuleKind::from_byte(1 + d.u8() % 7).unwrap_or(RuleKind::Skip),
            group: d.u16() % 10,
            switch: d.u16() % 5,
            replacement: d.u16() % 5,
            session: d.number(4),
        };
        return repr_bytes(Repr::Rule(rule));
    }
    let ops = [1, 2, 3, 4, 5, 8, 9, 10, 11];
    let opcode = Opcode::from_nibble(ops[d.below(ops.len())]).expect("listed");
    let chain: Vec<u16> = (0..d.below(5)).map(|_| d.u16() % 5).collect();
    let chain = Chain::new(&chain).expect("short");
    let mut key = [0u8; 16];
    let k = KEYS[d.below(KEYS.len())];
    key[..k.len()].copy_from_slice(k);
    let (v, e) = (value(d), value(d));
    let q = Query {
        opcode,
        flags: d.u8() & (flags::REPLY | flags::SEQUENCED),
        status: Status::from_byte(d.u8() % 5).unwrap_or(Status::Ok),
        sc: (d.u8() as usize % (chain.len() + 1)) as u8,
        process: d.u32() % 6,
        request: d.number(8),
        chain,
        group: d.u16() % 10,
        version: d.number(6),
        key,
        value: v.as_deref(),
        expect: e.as_deref(),
    };
    repr_bytes(Repr::Query(q))
}

/// Everything a node sends is a NetChain message that fits a runtime's buffer.
fn check_sent(frame: &[u8]) {
    assert!(frame.len() <= FRAME_MAX);
    assert!(
        Repr::parse(frame).is_ok(),
        "sent a frame that does not parse: {frame:?}"
    );
}

pub fn run(data: &[u8]) {
    let mut d = Draw::new(data);
    let mut n = nodes(&mut d);
    let ports = n.wiring.switch_ports[n.switch.id() as usize].len() as PortId;
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
                let route = n.switch.classify(now, port, &f);
                n.switch.handle_frame(now, port, &mut f, route);
            }
            2 => {
                let f = hostile(&mut d, message);
                n.agent.handle_frame(now, &f);
                n.controller.handle_frame(now, &f);
            }
            3 => {
                for port in 0..ports {
                    while let Some(len) = n.switch.poll_transmit(now, port, &mut buf) {
                        check_sent(&buf[..len]);
                    }
                }
                while let Some(len) = n.agent.poll_transmit(now, &mut buf) {
                    check_sent(&buf[..len]);
                }
                while let Some(len) = n.controller.poll_transmit(now, &mut buf) {
                    check_sent(&buf[..len]);
                }
            }
            4 => {
                let key = Key::new(KEYS[d.below(KEYS.len())]).expect("valid");
                let call = match d.u8() % 4 {
                    0 => Call::Read(key),
                    1 => Call::Insert(key, d.bytes(20)),
                    2 => Call::Cas {
                        key,
                        expect: None,
                        new: Some(d.bytes(8)),
                    },
                    _ => Call::Delete(key),
                };
                let _ = n.agent.submit(now, call);
                if d.u8() % 8 == 0 {
                    n.controller.switch_failed(now, d.u16() % 5);
                }
            }
            _ => {
                n.agent.handle_timeout(now);
                n.controller.handle_timeout(now);
                while n.agent.poll_completion().is_some() {}
                while n.controller.poll_event().is_some() {}
            }
        }
        n.switch.invariants();
    }
}
