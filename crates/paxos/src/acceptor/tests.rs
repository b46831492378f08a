//! The acceptor's handlers against the thesis's Fig. 5.4, with its corrections.

use super::*;

const COORD: Addr = Addr::Switch(1);
const ME: Addr = Addr::Switch(2);

fn learners() -> Vec<Addr> {
    (10..13).map(Addr::Process).collect()
}

fn acceptor(window: u32) -> Acceptor {
    Acceptor::new(AcceptorConfig {
        swid: 0,
        me: ME,
        partitions: 2,
        window,
        value_bytes_max: 8,
        coordinators: vec![COORD],
        learners: learners(),
        trim_quorum: 2,
    })
}

fn run(a: &mut Acceptor, m: Message<'_>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    a.handle(&m, &mut |m| out.push(m.to_vec()));
    a.invariants();
    out
}

fn p1a(inst: u64, count: u64, rnd: u32) -> Message<'static> {
    Message {
        inst,
        a: count,
        rnd,
        ..Message::new(MsgType::P1a, 0, COORD, ME)
    }
}

fn p2a(inst: u64, rnd: u32, value: &[u8]) -> Message<'_> {
    Message {
        inst,
        rnd,
        value,
        ..Message::new(MsgType::P2a, 0, COORD, ME)
    }
}

fn trim(learner: u16, inst: u64) -> Message<'static> {
    Message {
        swid: learner,
        inst,
        ..Message::new(MsgType::Trim, 0, learners()[learner as usize], ME)
    }
}

fn parsed(frames: &[Vec<u8>]) -> Vec<Message<'_>> {
    frames.iter().map(|f| Message::parse(f).unwrap()).collect()
}

#[test]
fn a_1a_is_promised_only_above_the_promised_round() {
    let mut a = acceptor(8);
    let out = run(&mut a, p1a(0, 4, 5));
    let m = parsed(&out);
    assert_eq!(m.len(), 1, "no votes yet: the summary alone");
    assert_eq!(
        (m[0].msgtype, m[0].flags, m[0].b, m[0].rnd),
        (MsgType::P1b, flags::RANGE, 0, 5)
    );
    // The same round again, or a lower one, is refused (thesis: rnd > rnds[inst]).
    for rnd in [5, 4] {
        let out = run(&mut a, p1a(0, 4, rnd));
        let m = parsed(&out);
        assert_eq!((m[0].flags, m[0].rnd, m[0].vrnd), (flags::REFUSED, 5, rnd));
    }
    // A range that overlaps one promised instance is refused whole.
    let out = run(&mut a, p1a(3, 2, 5));
    assert_eq!(parsed(&out)[0].flags, flags::REFUSED);
    assert_eq!(a.counters().refused_1a, 3);
}

#[test]
fn a_2a_is_accepted_at_the_promised_round_and_voted_to_every_learner() {
    let mut a = acceptor(8);
    run(&mut a, p1a(0, 8, 5));
    // The thesis's strict comparison would refuse this 2A at the round just promised.
    let out = run(&mut a, p2a(2, 5, b"v"));
    let m = parsed(&out);
    assert_eq!(m.len(), 3);
    for (i, v) in m.iter().enumerate() {
        assert_eq!(
            (v.msgtype, v.inst, v.rnd, v.vrnd, v.value),
            (MsgType::P2b, 2, 5, 5, &b"v"[..])
        );
        assert_eq!((v.to, v.swid), (learners()[i], 0));
    }
    assert_eq!(a.vote(0, 2), Some((5, &b"v"[..])));
    // Below the promise: dropped and counted.
    assert!(run(&mut a, p2a(3, 4, b"w")).is_empty());
    assert_eq!(a.counters().stale_2a, 1);
    // Above it (a new coordinator that skipped no Phase 1 here): accepted.
    assert_eq!(run(&mut a, p2a(2, 7, b"x")).len(), 3);
    assert_eq!(a.vote(0, 2), Some((7, &b"x"[..])));
}

#[test]
fn a_1a_reports_the_votes_of_its_range_then_their_count() {
    let mut a = acceptor(8);
    run(&mut a, p2a(1, 3, b"a"));
    run(&mut a, p2a(3, 3, b"b"));
    let out = run(&mut a, p1a(0, 8, 9));
    let m = parsed(&out);
    assert_eq!(m.len(), 3);
    assert_eq!((m[0].inst, m[0].vrnd, m[0].rnd, m[0].value), (1, 3, 9, &b"a"[..]));
    assert_eq!((m[1].inst, m[1].vrnd, m[1].value), (3, 3, &b"b"[..]));
    assert_eq!((m[2].flags, m[2].b), (flags::RANGE, 2));
}

#[test]
fn slots_are_reused_only_after_a_quorum_of_learners_trim() {
    let mut a = acceptor(4);
    for inst in 0..4 {
        assert_eq!(run(&mut a, p2a(inst, 1, b"v")).len(), 3);
    }
    // Instance 4 would take slot 0, still holding instance 0: out of the window.
    assert!(run(&mut a, p2a(4, 1, b"w")).is_empty());
    assert_eq!(a.counters().out_of_window, 1);
    // One learner's word is not enough (trim quorum 2 of 3)...
    run(&mut a, trim(0, 2));
    assert_eq!(a.floor(0), Some(0));
    // ...two are: the floor is what both have applied.
    run(&mut a, trim(1, 3));
    assert_eq!(a.floor(0), Some(2));
    assert_eq!(run(&mut a, p2a(4, 1, b"w")).len(), 3);
    assert_eq!(a.vote(0, 4), Some((1, &b"w"[..])));
    assert_eq!(a.vote(0, 0), None, "instance 0 is trimmed");
    // A 1A below the floor is answered with the floor.
    let m = run(&mut a, p1a(0, 2, 9));
    let m = parsed(&m);
    assert_eq!((m[0].flags, m[0].b), (flags::OUT_OF_WINDOW, 2));
    // The other partition has a window of its own.
    assert_eq!(a.floor(1), Some(0));
}

#[test]
fn hostile_messages_are_counted_not_obeyed() {
    let mut a = acceptor(4);
    let forged = Message {
        value: b"v",
        ..Message::new(MsgType::P2a, 0, Addr::Process(10), ME)
    };
    assert!(run(&mut a, forged).is_empty());
    let wrong_learner = Message {
        swid: 1,
        inst: 1000,
        ..Message::new(MsgType::Trim, 0, learners()[0], ME)
    };
    run(&mut a, wrong_learner);
    assert_eq!(a.counters().refused_sender, 2);
    assert_eq!(a.floor(0), Some(0));
    assert!(run(&mut a, p2a(0, 1, b"too long value")).is_empty());
    assert_eq!(a.counters().value_too_large, 1);
    let huge_range = p1a(u64::MAX - 1, 4, 3);
    assert!(run(&mut a, huge_range).is_empty());
    assert!(
        run(
            &mut a,
            Message {
                pid: 9,
                ..p1a(0, 1, 3)
            }
        )
        .is_empty()
    );
    assert_eq!(a.counters().malformed, 1);
}

#[test]
fn quorum_floor_is_the_quorum_th_largest() {
    assert_eq!(quorum_floor(&[5, 9, 7], 2), 7);
    assert_eq!(quorum_floor(&[5, 9, 7], 1), 9);
    assert_eq!(quorum_floor(&[5, 9, 7], 3), 5);
}
