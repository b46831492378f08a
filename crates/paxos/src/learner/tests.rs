//! The learner: votes counted per (instance, round), delivery in order, TRIM, and holes chased.

use super::*;

const ME: Addr = Addr::Process(10);
const PEER: Addr = Addr::Process(11);
const COORD: Addr = Addr::Switch(1);

fn acceptors() -> Vec<Addr> {
    (2..5).map(Addr::Switch).collect()
}

fn learner() -> Learner {
    Learner::new(
        LearnerConfig {
            me: ME,
            index: 0,
            acceptors: acceptors(),
            coordinators: vec![COORD],
            peers: vec![PEER],
            partitions: 2,
            window: 8,
            retain: 4,
            trim_every: 3,
            trim_interval: Duration::from_millis(10),
            gap_timeout: Duration::from_millis(1),
            catchup_max: 2,
        },
        &[0, 0],
    )
}

fn vote(l: &mut Learner, acceptor: usize, inst: u64, rnd: u32, value: &[u8]) {
    let m = Message {
        swid: acceptor as u16,
        inst,
        rnd,
        vrnd: rnd,
        value,
        ..Message::new(MsgType::P2b, 0, acceptors()[acceptor], ME)
    };
    l.handle(Instant::ZERO, &m, &mut |_| panic!("a vote sends nothing"));
    l.invariants();
}

fn delivered(l: &mut Learner) -> Vec<(u64, Vec<u8>)> {
    std::iter::from_fn(|| l.poll_delivery(Instant::ZERO))
        .map(|d| (d.inst, d.value))
        .collect()
}

#[test]
fn an_instance_is_decided_by_a_quorum_of_one_round() {
    let mut l = learner();
    vote(&mut l, 0, 0, 1, b"a");
    assert!(delivered(&mut l).is_empty());
    // Another acceptor's vote of another round does not combine with it (the thesis's
    // learner, keyed by (inst, swid), would have counted two).
    vote(&mut l, 1, 0, 2, b"b");
    assert!(delivered(&mut l).is_empty());
    vote(&mut l, 2, 0, 2, b"b");
    assert_eq!(delivered(&mut l), vec![(0, b"b".to_vec())]);
    // Late votes change nothing; a conflicting one is counted.
    vote(&mut l, 0, 0, 2, b"b");
    vote(&mut l, 0, 0, 3, b"c");
    assert_eq!(l.counters().late_votes, 2);
}

#[test]
fn delivery_is_in_instance_order_and_duplicates_count_once() {
    let mut l = learner();
    for inst in [2, 1, 0] {
        vote(&mut l, 0, inst, 1, &[inst as u8]);
        vote(&mut l, 0, inst, 1, &[inst as u8]);
        assert!(delivered(&mut l).is_empty() || inst == 0);
        vote(&mut l, 1, inst, 1, &[inst as u8]);
    }
    assert_eq!(l.counters().decided, 3);
    assert_eq!(delivered(&mut l), vec![(0, vec![0]), (1, vec![1]), (2, vec![2])]);
    // Beyond the window: not kept.
    vote(&mut l, 0, 3 + 8, 1, b"x");
    assert_eq!(l.counters().out_of_window, 1);
}

#[test]
fn trim_goes_out_every_few_applied_instances_and_on_a_timer() {
    let mut l = learner();
    let mut sent = Vec::new();
    l.applied(Instant::ZERO, 0, 2, &mut |m| sent.push(m.to_vec()));
    assert!(sent.is_empty());
    l.applied(Instant::ZERO, 0, 3, &mut |m| sent.push(m.to_vec()));
    let trims: Vec<_> = sent.iter().map(|f| Message::parse(f).unwrap()).collect();
    assert_eq!(trims.len(), 4, "to each acceptor and the coordinator");
    assert!(
        trims
            .iter()
            .all(|m| m.msgtype == MsgType::Trim && m.inst == 3 && m.swid == 0)
    );
    let at = l.poll_timeout().unwrap();
    assert_eq!(at, Instant::ZERO + Duration::from_millis(10));
    let mut again = Vec::new();
    l.handle_timeout(at, &mut |m| again.push(m.to_vec()));
    assert_eq!(again.len(), 4, "resent: a lost TRIM must not stall the window");
}

#[test]
fn a_hole_is_chased_by_a_catchup_then_a_reinit() {
    let mut l = learner();
    vote(&mut l, 0, 1, 1, b"b");
    vote(&mut l, 1, 1, 1, b"b");
    assert!(delivered(&mut l).is_empty(), "instance 0 is a hole");
    let t1 = l.poll_timeout().unwrap();
    let mut sent = Vec::new();
    l.handle_timeout(t1, &mut |m| sent.push(m.to_vec()));
    let m = Message::parse(&sent[0]).unwrap();
    assert_eq!((m.msgtype, m.to, m.inst, m.a), (MsgType::Catchup, PEER, 0, 2));
    let t2 = l.poll_timeout().unwrap();
    assert!(t2 > t1);
    sent.clear();
    l.handle_timeout(t2, &mut |m| sent.push(m.to_vec()));
    let m = Message::parse(&sent[0]).unwrap();
    assert_eq!((m.msgtype, m.to, m.inst), (MsgType::Reinit, COORD, 0));
    // The peer's answer fills the hole.
    let decided = Message {
        inst: 0,
        value: b"a",
        ..Message::new(MsgType::Decided, 0, PEER, ME)
    };
    l.handle(t2, &decided, &mut |_| {});
    assert_eq!(delivered(&mut l), vec![(0, b"a".to_vec()), (1, b"b".to_vec())]);
}

#[test]
fn catchups_are_served_from_the_values_retained() {
    let mut l = learner();
    for inst in 0..6 {
        vote(&mut l, 0, inst, 1, &[inst as u8]);
        vote(&mut l, 2, inst, 1, &[inst as u8]);
    }
    assert_eq!(delivered(&mut l).len(), 6);
    let ask = Message {
        inst: 1,
        a: 10,
        ..Message::new(MsgType::Catchup, 0, PEER, ME)
    };
    let mut sent = Vec::new();
    l.handle(Instant::ZERO, &ask, &mut |m| sent.push(m.to_vec()));
    // Retained: instances 2..6 (4 of them); at most catchup_max (2) per answer.
    let got: Vec<(u64, Vec<u8>)> = sent
        .iter()
        .map(|f| Message::parse(f).unwrap())
        .map(|m| (m.inst, m.value.to_vec()))
        .collect();
    assert_eq!(got, vec![(2, vec![2]), (3, vec![3])]);
    // Strangers are not served.
    let stranger = Message {
        from: Addr::Process(99),
        ..ask
    };
    l.handle(Instant::ZERO, &stranger, &mut |_| panic!("served a stranger"));
}
