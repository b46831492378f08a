//! The coordinator's handlers: Phase 1 at start, the round it stamps, the first instance, a
//! takeover that finds an old coordinator's votes, refusals, and REINIT.

use super::*;

const ME: Addr = Addr::Switch(1);
const PROPOSER: Addr = Addr::Process(20);

fn acceptors() -> Vec<Addr> {
    (2..5).map(Addr::Switch).collect()
}
fn learners() -> Vec<Addr> {
    (10..13).map(Addr::Process).collect()
}

fn coordinator(active: bool) -> Coordinator {
    Coordinator::new(CoordinatorConfig {
        me: ME,
        owner: 3,
        acceptors: acceptors(),
        learners: learners(),
        trim_quorum: 2,
        partitions: 1,
        window: 16,
        range: 8,
        phase1_timeout: Duration::from_millis(1),
        held_max: 2,
        reinits_max: 1,
        active,
    })
}

type Sent = Vec<Vec<u8>>;

fn step(c: &mut Coordinator, now: Instant, m: Message<'_>) -> Sent {
    let mut out = Vec::new();
    c.handle(now, &m, &mut |m| out.push(m.to_vec()));
    c.invariants();
    out
}

fn of_type(sent: &Sent, t: MsgType) -> Vec<Message<'_>> {
    sent.iter()
        .map(|f| Message::parse(f).unwrap())
        .filter(|m| m.msgtype == t)
        .collect()
}

fn request(value: &[u8]) -> Message<'_> {
    Message {
        value,
        ..Message::new(MsgType::Request, 0, PROPOSER, ME)
    }
}

/// Acceptor `i`'s answer to a 1A: its votes `(inst, vrnd, value)`, then the summary.
fn promise(c: &mut Coordinator, p1a: &Message<'_>, i: usize, votes: &[(u64, u32, &[u8])]) -> Sent {
    let mut sent = Vec::new();
    for &(inst, vrnd, value) in votes {
        sent.extend(step(
            c,
            Instant::ZERO,
            Message {
                swid: i as u16,
                inst,
                rnd: p1a.rnd,
                vrnd,
                value,
                ..Message::new(MsgType::P1b, 0, acceptors()[i], ME)
            },
        ));
    }
    sent.extend(step(
        c,
        Instant::ZERO,
        Message {
            flags: flags::RANGE,
            swid: i as u16,
            inst: p1a.inst,
            rnd: p1a.rnd,
            a: p1a.a,
            b: votes.len() as u64,
            ..Message::new(MsgType::P1b, 0, acceptors()[i], ME)
        },
    ));
    sent
}

fn started() -> (Coordinator, Sent) {
    let mut c = coordinator(true);
    let mut out = Vec::new();
    c.start(Instant::ZERO, &mut |m| out.push(m.to_vec()));
    (c, out)
}

#[test]
fn phase_1_runs_at_start_and_requests_wait_for_it() {
    let (mut c, sent) = started();
    let p1a = of_type(&sent, MsgType::P1a);
    assert_eq!(p1a.len(), 3);
    assert_eq!((p1a[0].inst, p1a[0].a, p1a[0].rnd), (0, 8, 1 << 8 | 3));
    // Held until Phase 1 has a quorum.
    assert!(step(&mut c, Instant::ZERO, request(b"x")).is_empty());
    let p1a = p1a[0];
    assert!(
        of_type(&promise(&mut c, &p1a, 0, &[]), MsgType::P2a).is_empty(),
        "one promise is no quorum"
    );
    let sent = promise(&mut c, &p1a, 1, &[]);
    let p2a = of_type(&sent, MsgType::P2a);
    assert_eq!(p2a.len(), 3, "the held request, once per acceptor");
    // The first instance is the floor (0), not reg_inst + 1; the round is the one won.
    assert_eq!((p2a[0].inst, p2a[0].rnd, p2a[0].value), (0, p1a.rnd, &b"x"[..]));
    let sent = step(&mut c, Instant::ZERO, request(b"y"));
    assert_eq!(of_type(&sent, MsgType::P2a)[0].inst, 1);
}

#[test]
fn a_takeover_proposes_found_votes_again_and_fills_holes_with_noops() {
    let mut c = coordinator(false);
    // The backup's first request makes it take over.
    let sent = step(&mut c, Instant::ZERO, request(b"new"));
    assert!(c.is_active());
    let p1a = of_type(&sent, MsgType::P1a)[0];
    let sent = [
        promise(&mut c, &p1a, 0, &[(0, 0x103, b"a"), (3, 0x103, b"d")]),
        promise(&mut c, &p1a, 2, &[(0, 0x203, b"a2"), (1, 0x103, b"b")]),
    ]
    .concat();
    let p2a: Vec<_> = of_type(&sent, MsgType::P2a)
        .into_iter()
        .filter(|m| m.to == acceptors()[0])
        .collect();
    let got: Vec<(u64, &[u8])> = p2a.iter().map(|m| (m.inst, m.value)).collect();
    // Instance 0: the vote of the highest round; 1: the only vote; 2: a hole, a no-op; 3: found;
    // then the held request at 4.
    assert_eq!(
        got,
        vec![(0, &b"a2"[..]), (1, b"b"), (2, b""), (3, b"d"), (4, b"new")]
    );
    assert!(p2a.iter().all(|m| m.rnd == p1a.rnd));
    assert_eq!(c.counters().noops, 1);
    assert_eq!(c.counters().reproposed, 3);
}

#[test]
fn a_refused_1a_is_retried_above_the_round_seen() {
    let (mut c, sent) = started();
    let p1a = of_type(&sent, MsgType::P1a)[0];
    let refusal = Message {
        flags: flags::REFUSED,
        inst: p1a.inst,
        a: p1a.a,
        rnd: 7 << 8 | 9,
        vrnd: p1a.rnd,
        ..Message::new(MsgType::P1b, 0, acceptors()[1], ME)
    };
    let sent = step(&mut c, Instant::ZERO, refusal);
    let again = of_type(&sent, MsgType::P1a);
    assert_eq!(again.len(), 3);
    assert_eq!(again[0].rnd, 8 << 8 | 3);
    assert_eq!(c.counters().phase1_retries, 1);
}

#[test]
fn phase_1_is_retried_after_its_timeout() {
    let (mut c, _) = started();
    let deadline = c.poll_timeout().unwrap();
    let mut out = Vec::new();
    c.handle_timeout(deadline, &mut |m| out.push(m.to_vec()));
    let again = of_type(&out, MsgType::P1a);
    assert_eq!(again.len(), 3);
    assert!(again[0].rnd > 1 << 8 | 3);
}

#[test]
fn reinit_runs_one_instance_again_and_proposes_what_it_finds() {
    let (mut c, sent) = started();
    let p1a = of_type(&sent, MsgType::P1a)[0];
    promise(&mut c, &p1a, 0, &[]);
    promise(&mut c, &p1a, 1, &[]);
    for v in [b"a", b"b"] {
        step(&mut c, Instant::ZERO, request(v));
    }
    let reinit = |inst| Message {
        inst,
        ..Message::new(MsgType::Reinit, 0, learners()[2], ME)
    };
    // Not handed out yet: ignored.
    assert!(step(&mut c, Instant::ZERO, reinit(5)).is_empty());
    let sent = step(&mut c, Instant::ZERO, reinit(1));
    let one = of_type(&sent, MsgType::P1a)[0];
    assert_eq!((one.inst, one.a), (1, 1));
    assert!(one.rnd > p1a.rnd);
    // A second REINIT while one runs (reinits_max 1) is ignored.
    assert!(step(&mut c, Instant::ZERO, reinit(0)).is_empty());
    promise(&mut c, &one, 0, &[(1, p1a.rnd, b"b")]);
    let sent = promise(&mut c, &one, 2, &[]);
    let p2a = of_type(&sent, MsgType::P2a);
    assert_eq!((p2a[0].inst, p2a[0].rnd, p2a[0].value), (1, one.rnd, &b"b"[..]));
}

#[test]
fn trims_move_the_window_and_extend_phase_1() {
    let (mut c, sent) = started();
    let p1a = of_type(&sent, MsgType::P1a)[0];
    promise(&mut c, &p1a, 0, &[]);
    promise(&mut c, &p1a, 1, &[]);
    let mut next_1a = Vec::new();
    for _ in 0..8 {
        next_1a.extend(step(&mut c, Instant::ZERO, request(b"v")));
    }
    // Fewer than a range prepared ahead: the next range [8, 16) is being prepared already.
    let p1a2 = of_type(&next_1a, MsgType::P1a);
    assert_eq!((p1a2[0].inst, p1a2[0].a), (8, 8));
    promise(&mut c, &p1a2[0], 0, &[]);
    promise(&mut c, &p1a2[0], 1, &[]);
    for _ in 0..8 {
        step(&mut c, Instant::ZERO, request(b"v"));
    }
    // The window (16) is used up: requests are held, then dropped.
    for _ in 0..3 {
        step(&mut c, Instant::ZERO, request(b"w"));
    }
    assert_eq!(c.counters().not_ready, 1);
    // Two learners have applied up to 10: the window moves and Phase 1 extends.
    let trim = |l: usize| Message {
        swid: l as u16,
        inst: 10,
        ..Message::new(MsgType::Trim, 0, learners()[l], ME)
    };
    assert!(of_type(&step(&mut c, Instant::ZERO, trim(0)), MsgType::P1a).is_empty());
    let sent = step(&mut c, Instant::ZERO, trim(1));
    let p1a3 = of_type(&sent, MsgType::P1a);
    assert_eq!((p1a3[0].inst, p1a3[0].a), (16, 8));
    assert_eq!(c.floor(0), Some(10));
}
