//! Controller forwarding (paper 5.2): relaying, answers, timeouts, and what bad or repeated
//! input does.

use super::super::store::{MemoryStore, Record, Service};
use super::super::*;
use super::*;
use crate::controller::test_util::{self, outputs, packet, t};
use onepipe_fabric::{Topology, Wiring};

const ANSWER: Duration = Duration::from_millis(100);
/// Half of [`ANSWER`] ([`ControllerConfig::forward_timeout`]).
const FORWARD: Duration = Duration::from_millis(50);

/// Two leaves of two processes under one spine: 0 and 1 on leaf 0, 2 and 3 on leaf 1.
fn wiring() -> Wiring {
    Wiring::new(Topology::leaf_spine(2, 1, 2).unwrap(), 1).unwrap()
}

fn controller(w: &Wiring) -> Controller {
    test_util::registered(w, Duration::from_millis(5), ANSWER)
}

fn prepare(src: u32, dst: u32, psn: u32) -> PacketBytes {
    packet(Opcode::Prepare, src, dst, psn, false)
}

fn recall(src: u32, dst: u32, psn: u32) -> PacketBytes {
    packet(Opcode::Prepare, src, dst, psn, true)
}

fn ack(src: u32, dst: u32) -> PacketBytes {
    packet(Opcode::Ack, src, dst, 1, false)
}

fn forward(from: u32, to: u32, packet: &PacketBytes) -> Input {
    Input::Forward {
        from,
        to,
        packet: packet.clone(),
    }
}

fn answer(process: u32, id: u64, ack: Option<&PacketBytes>) -> Input {
    Input::Forwarded {
        process,
        id,
        ack: ack.cloned(),
    }
}

/// The cut order for process `p`'s input at its ToR.
fn cut(w: &Wiring, p: u32) -> Output {
    let spec = w.processes[p as usize];
    Output::CutInput {
        switch: spec.tor,
        port: spec.tor_port,
    }
}

/// "S asks controller to forward the message to R, and waits for ACK from the controller."
#[test]
fn a_forward_reaches_the_receiver_and_its_ack_comes_back() {
    let w = wiring();
    let mut c = controller(&w);
    let m = prepare(0, 2, 5);
    c.handle_input(t(1), forward(0, 2, &m)).unwrap();
    let there = Output::Forward {
        to: 2,
        id: 0,
        packet: m,
    };
    assert_eq!(outputs(&mut c), vec![there]);
    assert_eq!(c.poll_timeout(), Some(t(1) + FORWARD));
    let a = ack(2, 0);
    c.handle_input(t(2), answer(2, 0, Some(&a))).unwrap();
    let back = Output::Forward {
        to: 0,
        id: 1,
        packet: a,
    };
    assert_eq!(outputs(&mut c), vec![back]);
    assert_eq!(
        c.poll_timeout(),
        Some(t(2) + FORWARD),
        "the sender must answer too"
    );
    c.handle_input(t(3), answer(0, 1, None)).unwrap();
    assert_eq!((c.forwards_pending(), c.poll_timeout()), (0, None));
    c.handle_timeout(t(100));
    assert_eq!(outputs(&mut c), vec![]);
    assert!(c.failures().is_empty());
    let f = &c.counters().forwards;
    assert_eq!((f.forwarded, f.answered, f.unanswered), (2, 2, 0));
}

/// "If controller also cannot deliver the message, R will be announced as failed, and the
/// undeliverable recall message is recorded."
#[test]
fn a_receiver_that_does_not_answer_is_cut_off_and_its_recall_recorded() {
    let w = wiring();
    let mut c = controller(&w);
    let r = recall(0, 2, 9);
    let m = prepare(0, 3, 1);
    c.handle_input(t(1), forward(0, 2, &r)).unwrap();
    c.handle_input(t(2), forward(0, 3, &m)).unwrap();
    assert_eq!(outputs(&mut c).len(), 2);
    c.handle_timeout((t(1) + FORWARD).saturating_sub(Duration::from_nanos(1)));
    assert_eq!(outputs(&mut c), vec![], "not yet");
    c.handle_timeout(t(1) + FORWARD);
    assert_eq!(outputs(&mut c), vec![cut(&w, 2)]);
    assert_eq!(
        c.undeliverable_recalls(2),
        &[UndeliverableRecall {
            sender: 0,
            msg_id: 49,
            packet: r
        }]
    );
    c.handle_timeout(t(2) + FORWARD);
    assert_eq!(outputs(&mut c), vec![cut(&w, 3)]);
    assert!(c.undeliverable_recalls(3).is_empty(), "a prepare is no recall");
    let f = &c.counters().forwards;
    assert_eq!((f.unanswered, f.undeliverable_recalls), (2, 1));
    // The switch reports the cut input; the usual procedure declares the process failed.
    let spec = w.processes[2];
    let report = Input::LinkDown {
        member: Member::Switch(spec.tor),
        port: spec.tor_port,
        last_commit_ns: t(1).as_nanos(),
    };
    c.handle_input(t(60), report).unwrap();
    c.handle_timeout(t(70));
    assert_eq!(c.failure_of(2), Some(t(1)));
    // A later forward to it is settled by its failure, not sent.
    c.handle_input(t(80), forward(0, 2, &recall(0, 2, 10))).unwrap();
    assert!(
        !outputs(&mut c)
            .iter()
            .any(|o| matches!(o, Output::Forward { .. }))
    );
    assert_eq!(c.counters().forwards.to_failed, 1);
}

/// "If controller receives ACK of a recall message but cannot forward it to S, S will be
/// announced as failed."
#[test]
fn a_sender_that_does_not_take_its_ack_is_cut_off() {
    let w = wiring();
    let mut c = controller(&w);
    c.handle_input(t(1), forward(0, 2, &recall(0, 2, 3))).unwrap();
    c.handle_input(t(2), answer(2, 0, Some(&ack(2, 0)))).unwrap();
    outputs(&mut c);
    c.handle_timeout(t(2) + FORWARD);
    assert_eq!(outputs(&mut c), vec![cut(&w, 0)]);
    assert!(c.undeliverable_recalls(2).is_empty(), "R took the recall");
    assert!(c.undeliverable_recalls(0).is_empty(), "an ACK is no recall");
}

/// Malformed, forged, repeated and late input changes nothing and is counted; a full table
/// drops new forwards (the sender asks again later).
#[test]
fn bad_repeated_and_excess_forwards_are_counted() {
    let w = wiring();
    let mut c = controller(&w);
    let m = prepare(0, 2, 1);
    let refused = [
        forward(0, 2, &PacketBytes(vec![1, 2, 3])),
        forward(1, 2, &m),
        forward(0, 3, &m),
        forward(0, 2, &ack(0, 2)),
        forward(0, 9, &m),
        forward(0, 2, &PacketBytes(vec![0; FORWARD_PACKET_BYTES_MAX + 1])),
        answer(2, 0, Some(&prepare(2, 0, 1))),
        answer(2, 0, Some(&ack(3, 0))),
    ];
    for input in refused {
        assert!(c.handle_input(t(1), input.clone()).is_err(), "{input:?}");
    }
    assert_eq!(c.counters().unknown, 8);
    c.handle_input(t(1), forward(0, 2, &m)).unwrap();
    c.handle_input(t(1), forward(0, 2, &m)).unwrap();
    assert_eq!(outputs(&mut c).len(), 1, "the same packet waits already");
    for stale in [answer(3, 0, None), answer(2, 7, None)] {
        c.handle_input(t(2), stale).unwrap();
    }
    c.handle_input(t(2), answer(2, 0, Some(&ack(2, 1)))).unwrap();
    c.handle_input(t(2), answer(2, 0, None)).unwrap();
    assert_eq!(outputs(&mut c), vec![], "an ACK for someone else is not carried");
    let f = c.counters().forwards.clone();
    assert_eq!(
        (f.forwarded, f.duplicates, f.answered, f.stale_answers),
        (1, 1, 1, 4)
    );
    for psn in 0..FORWARDS_MAX as u32 + 1 {
        c.handle_input(t(3), forward(1, 3, &prepare(1, 3, psn))).unwrap();
    }
    assert_eq!(c.forwards_pending(), FORWARDS_MAX);
    assert_eq!(c.counters().forwards.dropped, 1);
    assert!(c.failures().is_empty());
}

/// The forwards are in the log: a controller taking over (from records that went through
/// JSON, as the file and etcd logs keep them) knows the undeliverable recalls and sends the
/// forwards in progress again.
#[test]
fn a_controller_taking_over_resends_forwards_and_keeps_undeliverable_recalls() {
    let w = wiring();
    let (lost, waiting) = (recall(0, 2, 4), prepare(1, 3, 2));
    let mut first = Service::open(controller(&w), MemoryStore::default(), t(0)).unwrap();
    first.handle_input(t(1), forward(0, 2, &lost)).unwrap();
    first.handle_timeout(t(1) + FORWARD).unwrap();
    first.handle_input(t(60), forward(1, 3, &waiting)).unwrap();
    let json = serde_json::to_vec(&first.into_store().records).unwrap();
    let records: Vec<Record> = serde_json::from_slice(&json).unwrap();

    let mut second = Service::open(
        controller(&w),
        MemoryStore {
            records,
            ..MemoryStore::default()
        },
        t(70),
    )
    .unwrap();
    let c = second.controller();
    assert_eq!(c.undeliverable_recalls(2).len(), 1);
    assert_eq!(c.undeliverable_recalls(2)[0].packet, lost);
    let again: Vec<Output> = std::iter::from_fn(|| second.poll_event()).collect();
    let resent = Output::Forward {
        to: 3,
        id: 1,
        packet: waiting,
    };
    assert!(again.contains(&resent), "{again:?}");
    assert_eq!(
        second.controller().forward_deadline(),
        Some(t(70) + FORWARD),
        "a fresh deadline"
    );
    second.handle_input(t(71), answer(3, 1, None)).unwrap();
    assert_eq!(second.controller().forwards_pending(), 0);

    // The same history in memory gives the same state (the log is the state).
    let mut mem = Service::open(controller(&w), MemoryStore::default(), t(0)).unwrap();
    mem.handle_input(t(1), forward(0, 2, &lost)).unwrap();
    mem.handle_timeout(t(1) + FORWARD).unwrap();
    assert_eq!(
        mem.controller().undeliverable_recalls(2),
        second.controller().undeliverable_recalls(2)
    );
}
