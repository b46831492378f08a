//! In-network Paxos's nodes fed hostile frames: a switch of the paxos testbed (the coordinator
//! or an acceptor, drawn), a host running the backup coordinator, a learner and a proposer,
//! each given a sequence of steps drawn from the input: a Paxos message (well formed with
//! fields from small sets, damaged, or raw), a transmit opportunity, a timer, a submission.
//! Invariants hold after every step, and everything any of them sends parses.

use super::{STEPS_MAX, advance};
use crate::fixture::START;
use crate::frames::{Draw, hostile};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Topology, Wiring};
use onepipe_paxos::{Deployment, Learner, PaxosSwitch, Placement, Proposer, RoleHost, Tuning};
use onepipe_wire::paxos::{Addr, Message, MsgType, flags};
use std::sync::Arc;

fn deployment() -> Deployment {
    let tuning = Tuning {
        partitions: 2,
        window: 8,
        range: 4,
        value_bytes_max: 16,
        ..Tuning::default()
    };
    Deployment::testbed(Placement::InNetwork, 1, tuning)
}

/// Addresses the deployment uses, and one it does not.
fn addr(d: &mut Draw) -> Addr {
    match d.u8() % 3 {
        0 => Addr::Switch(d.u16() % 6),
        _ => Addr::Process(d.u32() % 10),
    }
}

fn message(d: &mut Draw) -> Vec<u8> {
    let value = d.bytes(24);
    let msgtype = MsgType::from_nibble(1 + d.u8() % 10).expect("1..=10");
    let m = Message {
        msgtype,
        flags: if msgtype == MsgType::P1b {
            d.u8() & flags::KNOWN
        } else {
            0
        },
        pid: d.u16() % 3,
        from: addr(d),
        to: addr(d),
        swid: d.u16() % 4,
        inst: d.number(16),
        rnd: d.u32() % 2048,
        vrnd: d.u32() % 2048,
        a: d.number(16),
        b: d.number(4),
        value: &value,
    };
    m.to_vec()
}

fn check_sent(frame: &[u8]) {
    assert!(frame.len() <= FRAME_MAX);
    assert!(
        Message::parse(frame).is_ok(),
        "sent a frame that does not parse: {frame:?}"
    );
}

pub fn run(data: &[u8]) {
    let mut d = Draw::new(data);
    let dep = deployment();
    let wiring = Arc::new(Wiring::new(Topology::paxos_testbed(Deployment::hosts(1)), 1).expect("preset"));
    let s = 1 + d.below(2);
    let mut switch = PaxosSwitch::new(s, wiring.clone(), dep.roles_at(Addr::Switch(s as u16)), 8);
    let mut backup = RoleHost::new(dep.backup, dep.roles_at(Addr::Process(dep.backup)), 8);
    let mut learner = Learner::new(dep.learner_config(0), &[0, 0]);
    let mut proposer = Proposer::new(dep.proposer_config(0));
    let ports = wiring.switch_ports[s].len();
    let mut now = START;
    let mut buf = vec![0u8; FRAME_MAX];
    let mut request = 0;
    for _ in 0..STEPS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(&mut d, now);
        match d.u8() % 6 {
            0 | 1 => {
                let port = d.below(ports) as PortId;
                let mut f = hostile(&mut d, message);
                let route = switch.classify(now, port, &f);
                switch.handle_frame(now, port, &mut f, route);
            }
            2 => {
                let mut f = hostile(&mut d, message);
                backup.handle_frame(now, 0, &mut f, onepipe_fabric::Route::Consume);
                if let Ok(m) = Message::parse(&f) {
                    learner.handle(now, &m, &mut |m| check_sent(&m.to_vec()));
                    let _ = proposer.handle(&m);
                }
                while learner.poll_delivery(now).is_some() {}
            }
            3 => {
                for port in 0..ports as PortId {
                    while let Some(len) = switch.poll_transmit(now, port, &mut buf) {
                        check_sent(&buf[..len]);
                    }
                }
                while let Some(len) = backup.poll_transmit(now, 0, &mut buf) {
                    check_sent(&buf[..len]);
                }
            }
            4 => {
                request += 1;
                let value = d.bytes(20);
                let _ = proposer.submit(now, d.u16() % 3, 1, request, &value, &mut |m| {
                    check_sent(&m.to_vec())
                });
                learner.applied(now, d.u16() % 3, d.number(16), &mut |m| check_sent(&m.to_vec()));
            }
            _ => {
                switch.handle_timeout(now);
                backup.handle_timeout(now);
                learner.handle_timeout(now, &mut |m| check_sent(&m.to_vec()));
                let mut done = Vec::new();
                proposer.handle_timeout(now, &mut |m| check_sent(&m.to_vec()), &mut done);
            }
        }
        switch.invariants();
        backup.roles().invariants();
        learner.invariants();
    }
}
