//! The switch program on the paxos testbed: roles reached by address, forwarding, the source
//! check, and the drops it counts.

use super::*;
use crate::acceptor::{Acceptor, AcceptorConfig};
use crate::coordinator::{Coordinator, CoordinatorConfig};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use onepipe_wire::paxos::MsgType;

const LEARNER: u32 = 1;
const PROPOSER: u32 = 0;

fn wiring() -> Arc<Wiring> {
    Arc::new(Wiring::new(Topology::paxos_testbed(3), 1).unwrap())
}

fn acceptors() -> Vec<Addr> {
    (2..5).map(Addr::Switch).collect()
}

fn coordinator_switch(w: &Arc<Wiring>) -> PaxosSwitch {
    let c = Coordinator::new(CoordinatorConfig {
        me: Addr::Switch(1),
        owner: 1,
        acceptors: acceptors(),
        learners: vec![Addr::Process(LEARNER)],
        trim_quorum: 1,
        partitions: 1,
        window: 16,
        range: 8,
        phase1_timeout: Duration::from_millis(1),
        held_max: 4,
        reinits_max: 2,
        active: true,
    });
    PaxosSwitch::new(1, w.clone(), Roles::new(Some(c), None), 64)
}

fn acceptor_switch(w: &Arc<Wiring>, i: u16) -> PaxosSwitch {
    let a = Acceptor::new(AcceptorConfig {
        swid: i - 2,
        me: Addr::Switch(i),
        partitions: 1,
        window: 16,
        value_bytes_max: 32,
        coordinators: vec![Addr::Switch(1)],
        learners: vec![Addr::Process(LEARNER)],
        trim_quorum: 1,
    });
    PaxosSwitch::new(i as usize, w.clone(), Roles::new(None, Some(a)), 64)
}

/// Every frame the switch holds, with the port it leaves on.
fn drain(s: &mut PaxosSwitch) -> Vec<(PortId, Vec<u8>)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; onepipe_fabric::node::FRAME_MAX];
    for port in 0..s.ports.queues.len() as PortId {
        while let Some(n) = s.poll_transmit(Instant::ZERO, port, &mut buf) {
            out.push((port, buf[..n].to_vec()));
        }
    }
    out
}

fn feed(s: &mut PaxosSwitch, port: PortId, frame: &[u8]) -> Route {
    let mut f = frame.to_vec();
    let route = s.classify(Instant::ZERO, port, &f);
    s.handle_frame(Instant::ZERO, port, &mut f, route);
    s.invariants();
    route
}

#[test]
fn the_coordinator_switch_runs_phase_1_at_start_then_stamps_requests() {
    let w = wiring();
    let mut c = coordinator_switch(&w);
    assert_eq!(c.poll_timeout(), Some(Instant::ZERO));
    c.handle_timeout(Instant::ZERO);
    let p1a = drain(&mut c);
    assert_eq!(p1a.len(), 3, "one 1A per acceptor");
    // Each acceptor promises; their 1Bs come back on the coordinator's links to them.
    let mut accs: Vec<PaxosSwitch> = (2..5).map(|i| acceptor_switch(&w, i)).collect();
    for (_, frame) in p1a {
        let to = Message::peek_to(&frame).unwrap();
        let Addr::Switch(i) = to else { panic!() };
        let a = &mut accs[i as usize - 2];
        let port = a.ports.paths.port_to_switch(0).unwrap();
        assert_eq!(feed(a, port, &frame), Route::Consume);
        for (_, answer) in drain(a) {
            let back = c.ports.paths.port_to_switch(0).unwrap();
            feed(&mut c, back, &answer);
        }
    }
    assert!(c.roles().coordinator.as_ref().unwrap().counters().phase1_ranges >= 1);
    // A request from the proposer (behind s0) is stamped and sent to each acceptor.
    let request = Message {
        a: 1,
        b: 1,
        value: b"v",
        ..Message::new(MsgType::Request, 0, Addr::Process(PROPOSER), Addr::Switch(1))
    }
    .to_vec();
    let from_tor = c.ports.paths.port_to_switch(0).unwrap();
    assert_eq!(feed(&mut c, from_tor, &request), Route::Consume);
    let p2a: Vec<_> = drain(&mut c)
        .into_iter()
        .map(|(_, f)| Message::parse(&f).unwrap().to_vec())
        .filter(|f| Message::parse(f).unwrap().msgtype == MsgType::P2a)
        .collect();
    assert_eq!(p2a.len(), 3);
    let m = Message::parse(&p2a[0]).unwrap();
    assert_eq!((m.inst, m.value), (0, &b"v"[..]));
    assert_eq!(m.rnd & 0xff, 1, "the round it won, owned by coordinator 1");
    // An acceptor votes and tells the learner, through the ToR.
    let a = &mut accs[0];
    feed(a, a.ports.paths.port_to_switch(0).unwrap(), &p2a[0]);
    let votes = drain(a);
    assert_eq!(votes.len(), 1);
    assert_eq!(Some(votes[0].0), a.ports.paths.port_to_switch(0));
    let v = Message::parse(&votes[0].1).unwrap();
    assert_eq!(
        (v.msgtype, v.to, v.swid),
        (MsgType::P2b, Addr::Process(LEARNER), 0)
    );
}

#[test]
fn hosts_cannot_speak_for_others_and_garbage_is_counted() {
    let w = wiring();
    let mut tor = PaxosSwitch::new(0, w.clone(), Roles::default(), 4);
    let host_port = tor.ports.paths.port_to_process(PROPOSER).unwrap();
    // A host posing as the coordinator switch, sending a 2A.
    let forged = Message {
        inst: 0,
        rnd: u32::MAX,
        value: b"evil",
        ..Message::new(MsgType::P2a, 0, Addr::Switch(1), Addr::Switch(2))
    }
    .to_vec();
    assert_eq!(feed(&mut tor, host_port, &forged), Route::Drop);
    assert_eq!(tor.counters().spoofed, 1);
    assert_eq!(feed(&mut tor, host_port, b"\x90garbage"), Route::Drop);
    assert_eq!(tor.counters().malformed, 1);
    // Its own request is forwarded toward the coordinator.
    let ok = Message {
        value: b"v",
        ..Message::new(MsgType::Request, 0, Addr::Process(PROPOSER), Addr::Switch(1))
    }
    .to_vec();
    assert_eq!(
        feed(&mut tor, host_port, &ok),
        Route::Forward(tor.ports.paths.port_to_switch(1).unwrap())
    );
    let nowhere = Message::new(MsgType::Request, 0, Addr::Process(PROPOSER), Addr::Switch(99)).to_vec();
    assert_eq!(feed(&mut tor, host_port, &nowhere), Route::Drop);
    assert_eq!(tor.counters().no_route, 1);
}

#[test]
fn an_acceptor_refuses_2as_from_anyone_but_the_coordinators() {
    let w = wiring();
    let mut a = acceptor_switch(&w, 2);
    // A well-formed 2A that claims a switch that is not a coordinator, arriving from a switch
    // port (switches are trusted to say who they are).
    let rogue = Message {
        value: b"x",
        ..Message::new(MsgType::P2a, 0, Addr::Switch(3), Addr::Switch(2))
    }
    .to_vec();
    let port = a.ports.paths.port_to_switch(0).unwrap();
    assert_eq!(feed(&mut a, port, &rogue), Route::Consume);
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.roles().acceptor.as_ref().unwrap().counters().refused_sender, 1);
}

mod budget {
    //! The P4 budget each placement declares (docs/p4-budget.md), and the per-packet loop it
    //! names seen on the acceptor's code path.

    use super::*;
    use crate::deployment::Tuning;
    use onepipe_fabric::budget::{Beyond, Budgeted, ChipBudget, Excess, check};

    fn acceptor_at(tuning: &Tuning) -> Acceptor {
        Acceptor::new(AcceptorConfig {
            swid: 0,
            me: Addr::Switch(2),
            partitions: tuning.partitions,
            window: tuning.window,
            value_bytes_max: tuning.value_bytes_max,
            coordinators: vec![Addr::Switch(1)],
            learners: (0..3).map(Addr::Process).collect(),
            trim_quorum: 2,
        })
    }

    /// The demo's acceptor (4,096 slots of 256-byte values): memory and stages fit; what goes
    /// past a chip is the two loops.
    #[test]
    fn an_acceptor_fits_but_for_its_range_and_trim_loops() {
        let w = wiring();
        let s = PaxosSwitch::new(
            2,
            w.clone(),
            Roles::new(None, Some(acceptor_at(&Tuning::default()))),
            64,
        );
        let budget = s.budget();
        assert_eq!(budget.stages, 7);
        assert_eq!(
            check(&budget, &ChipBudget::TOFINO),
            vec![
                Excess::Beyond(Beyond::LoopOverState(PHASE1_RANGE)),
                Excess::Beyond(Beyond::LoopOverState(TRIM_FLOOR)),
            ]
        );
    }

    /// The coordinator copies any value the wire carries (4,096 bytes) into the header it
    /// parses, holds requests, and loops when it closes a range.
    #[test]
    fn a_coordinator_goes_past_the_parser_and_holds_requests() {
        let w = wiring();
        let budget = coordinator_switch(&w).budget();
        assert_eq!(
            check(&budget, &ChipBudget::TOFINO),
            vec![
                Excess::HeaderBytes {
                    bytes: 4144,
                    max: 512
                },
                Excess::Beyond(Beyond::QueuedPackets(HELD_REQUESTS)),
                Excess::Beyond(Beyond::LoopOverState(PHASE1_CLOSE)),
            ]
        );
    }

    #[test]
    fn a_co_located_coordinator_adds_a_second_pass() {
        let w = wiring();
        let c = coordinator_switch(&w).roles.coordinator.take().unwrap();
        let a = acceptor_at(&Tuning::default());
        let budget = PaxosSwitch::new(1, w.clone(), Roles::new(Some(c), Some(a)), 64).budget();
        assert!(
            check(&budget, &ChipBudget::TOFINO).contains(&Excess::Beyond(Beyond::SecondPass(CO_LOCATED)))
        );
    }

    /// The declared loop, on the code path: one 1A makes a 1B per vote in its range plus the
    /// summary, all from one packet.
    #[test]
    fn one_1a_for_a_range_answers_a_1b_per_vote() {
        let w = wiring();
        let mut s = acceptor_switch(&w, 2);
        let from = s.ports.port_to(Addr::Switch(1)).unwrap();
        for inst in 0..3 {
            let p2a = Message {
                inst,
                rnd: 1,
                value: b"v",
                ..Message::new(MsgType::P2a, 0, Addr::Switch(1), Addr::Switch(2))
            };
            feed(&mut s, from, &p2a.to_vec());
        }
        drain(&mut s);
        let p1a = Message {
            inst: 0,
            rnd: 2,
            a: 8,
            ..Message::new(MsgType::P1a, 0, Addr::Switch(1), Addr::Switch(2))
        };
        assert_eq!(feed(&mut s, from, &p1a.to_vec()), Route::Consume);
        let answers = drain(&mut s);
        assert_eq!(answers.len(), 4, "three votes and the summary");
    }
}
