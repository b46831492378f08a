//! The agent against the test network: calls become queries along the ring's chains, answers
//! complete them, timeouts retry as new operations.

use super::*;
use crate::testing::{CONTROLLER, Net, query};
use onepipe_wire::netchain::Repr;

const CLIENT: u32 = 1;

fn ring() -> Ring {
    Ring::new(&[0, 1, 2, 3], 4, 3).unwrap()
}

fn agent() -> Agent {
    Agent::new(AgentConfig::new(CLIENT, CONTROLLER), ring())
}

/// The controller's part of an insert, by hand: install `key` on its chain.
fn install(net: &mut Net, key: &Key) {
    let r = ring();
    let group = r.group_of(key);
    for &s in r.chain(group).unwrap().as_slice() {
        net.send(
            CONTROLLER,
            query(
                Opcode::Install,
                CONTROLLER,
                1,
                &[s],
                key.as_bytes(),
                None,
                None,
                group,
            ),
        );
    }
    net.run();
    net.replies(CONTROLLER);
}

/// Sends what the agent has, runs the network, hands the agent its answers.
fn exchange(net: &mut Net, agent: &mut Agent, now: Instant) {
    let mut buf = vec![0u8; 9216];
    while let Some(len) = agent.poll_transmit(now, &mut buf) {
        net.send(CLIENT, buf[..len].to_vec());
    }
    net.run();
    for frame in std::mem::take(&mut net.inbox[CLIENT as usize]) {
        agent.handle_frame(now, &frame);
    }
}

fn key(name: &str) -> Key {
    Key::new(name.as_bytes()).unwrap()
}

#[test]
fn calls_complete_with_the_answers_of_their_chains() {
    let mut net = Net::testbed();
    let mut a = agent();
    let keys: Vec<Key> = (0..20).map(|i| key(&format!("k{i}"))).collect();
    for k in &keys {
        install(&mut net, k);
    }
    let now = Instant::from_nanos(1);
    for (i, k) in keys.iter().enumerate() {
        a.submit(now, Call::Write(*k, vec![i as u8])).unwrap();
    }
    exchange(&mut net, &mut a, now);
    let done: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    assert_eq!(done.len(), 20);
    assert!(done.iter().all(|c| c.outcome == Outcome::Ok(None)));
    for k in &keys {
        a.submit(now, Call::Read(*k)).unwrap();
    }
    exchange(&mut net, &mut a, now);
    let mut done: Vec<Completion> = std::iter::from_fn(|| a.poll_completion()).collect();
    done.sort_by_key(|c| c.call);
    let values: Vec<Outcome> = done.into_iter().map(|c| c.outcome).collect();
    let expected: Vec<Outcome> = (0..20).map(|i| Outcome::Ok(Some(vec![i as u8]))).collect();
    assert_eq!(values, expected);
    assert_eq!(
        std::iter::from_fn(|| a.poll_attempt()).count(),
        40,
        "one attempt per call"
    );
    assert_eq!(a.in_progress(), 0);
}

/// Paper 4.1: a lost query is retried on timeout as a new operation; after the last attempt the
/// call's outcome is unknown, and a late answer is counted, not taken.
#[test]
fn lost_queries_are_retried_then_reported_unknown() {
    let mut net = Net::testbed();
    let mut a = agent();
    let k = key("lost");
    install(&mut net, &k);
    let t0 = Instant::from_nanos(1_000);
    a.submit(t0, Call::Write(k, b"v".to_vec())).unwrap();
    let mut buf = vec![0u8; 9216];
    let first = a
        .poll_transmit(t0, &mut buf)
        .map(|len| buf[..len].to_vec())
        .unwrap();
    let timeout = a.poll_timeout().unwrap();
    assert_eq!(timeout, t0 + AgentConfig::new(CLIENT, CONTROLLER).timeout);
    a.handle_timeout(timeout);
    let attempt = a.poll_attempt().unwrap();
    assert_eq!((attempt.outcome, attempt.sent_at), (Outcome::Unknown, t0));
    assert!(a.poll_completion().is_none(), "the call goes on");
    assert!(a.wants_transmit(), "a second attempt, a new request");
    for _ in 1..a.config.attempts_max {
        let now = a.poll_timeout().unwrap_or(timeout);
        assert!(a.poll_transmit(now, &mut buf).is_some());
        a.handle_timeout(a.poll_timeout().unwrap());
    }
    let done = a.poll_completion().unwrap();
    assert_eq!(done.outcome, Outcome::Unknown);
    // The first attempt's answer arrives after all: late.
    net.send(CLIENT, first);
    net.run();
    for frame in std::mem::take(&mut net.inbox[CLIENT as usize]) {
        a.handle_frame(timeout, &frame);
    }
    assert_eq!(a.counters().late, 1);
    assert!(a.poll_completion().is_none());
    assert_eq!(
        std::iter::from_fn(|| a.poll_attempt()).count(),
        2,
        "attempts 2 and 3"
    );
}

/// An insert asks the controller first, then writes; a write of a key never inserted is
/// refused, and nothing changed.
#[test]
fn an_insert_installs_through_the_controller_then_writes() {
    let mut net = Net::testbed();
    let mut a = agent();
    let k = key("fresh");
    let now = Instant::from_nanos(5);
    a.submit(now, Call::Write(k, b"x".to_vec())).unwrap();
    exchange(&mut net, &mut a, now);
    assert_eq!(
        a.poll_completion().unwrap().outcome,
        Outcome::Refused(Refusal::UnknownKey)
    );
    a.submit(now, Call::Insert(k, b"x".to_vec())).unwrap();
    exchange(&mut net, &mut a, now);
    // The controller's turn: the request reached it through s0.
    let requests = std::mem::take(&mut net.inbox[CONTROLLER as usize]);
    assert_eq!(requests.len(), 1);
    let Ok(Repr::Query(q)) = Repr::parse(&requests[0]) else {
        panic!("an insert")
    };
    assert_eq!((q.opcode, q.process, Key(q.key)), (Opcode::Insert, CLIENT, k));
    install(&mut net, &k);
    let answer = Query {
        flags: flags::REPLY,
        ..q
    };
    let mut frame = vec![0u8; Repr::Query(answer).buffer_len()];
    Repr::Query(answer).emit(&mut frame).unwrap();
    a.handle_frame(now, &frame);
    exchange(&mut net, &mut a, now);
    assert_eq!(a.poll_completion().unwrap().outcome, Outcome::Ok(None));
    a.submit(now, Call::Read(k)).unwrap();
    exchange(&mut net, &mut a, now);
    assert_eq!(
        a.poll_completion().unwrap().outcome,
        Outcome::Ok(Some(b"x".to_vec()))
    );
}

#[test]
fn calls_past_the_limits_are_refused_at_submission() {
    let mut a = Agent::new(
        AgentConfig {
            outstanding_max: 1,
            ..AgentConfig::new(CLIENT, CONTROLLER)
        },
        ring(),
    );
    let now = Instant::ZERO;
    let big = vec![0u8; VALUE_BYTES_MAX + 1];
    assert_eq!(
        a.submit(now, Call::Write(key("a"), big)),
        Err(SubmitError::ValueTooLarge(VALUE_BYTES_MAX + 1))
    );
    a.submit(now, Call::Read(key("a"))).unwrap();
    assert_eq!(
        a.submit(now, Call::Read(key("b"))),
        Err(SubmitError::TooManyCalls(1))
    );
    a.handle_frame(now, &[0x81, 0]);
    assert_eq!(a.counters().malformed, 1);
}
