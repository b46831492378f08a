//! The switches and the fast learner, on hand-built schedules (thesis 4.1.2).

use super::*;
use onepipe_wire::{Duration, Instant};

fn learner_config(id: u16, numbering: Numbering) -> LearnerConfig {
    LearnerConfig {
        id,
        numbering,
        recovery: false,
        stall_timeout: Duration::from_micros(100),
        votes_buffered_max: 64,
    }
}

fn learner(id: u16, numbering: Numbering, recovery: bool) -> FastLearner {
    FastLearner::new(LearnerConfig {
        recovery,
        ..learner_config(id, numbering)
    })
}

fn vote(minion: u8, value: Value) -> Msg {
    Msg::Vote {
        minion,
        stamp: None,
        value,
    }
}

pub(super) fn drain<T>(mut poll: impl FnMut() -> Option<T>) -> Vec<T> {
    std::iter::from_fn(&mut poll).collect()
}

pub(super) const T0: Instant = Instant::ZERO;

#[test]
fn the_serializer_broadcasts_to_every_minion_in_arrival_order() {
    let mut serializer = Serializer::new();
    serializer.handle(Msg::Request { value: 7 });
    serializer.handle(Msg::Request { value: 8 });
    serializer.handle(Msg::Decided {
        instance: 0,
        value: 1,
    });
    let sent = drain(|| serializer.poll_transmit());
    assert_eq!(sent.len(), 2 * MINIONS);
    assert!(sent[..MINIONS].iter().all(|t| t.msg == Msg::Request { value: 7 }));
    let targets: Vec<NodeId> = sent[MINIONS..].iter().map(|t| t.to).collect();
    assert_eq!(
        targets,
        (0..MINIONS as u8).map(NodeId::Minion).collect::<Vec<_>>()
    );
    assert_eq!(serializer.forwarded(), 2);
}

#[test]
fn a_minion_forwards_its_vote_to_its_storage_and_every_learner() {
    for (numbering, stamps) in [
        (Numbering::QueuePosition, [None, None]),
        (Numbering::MinionStamp, [Some(0), Some(1)]),
    ] {
        let mut minion = Minion::new(2, 3, numbering);
        minion.handle(Msg::Request { value: 40 });
        minion.handle(Msg::Request { value: 41 });
        let sent = drain(|| minion.poll_transmit());
        assert_eq!(sent.len(), 2 * 4, "storage and three learners, per vote");
        assert_eq!(sent[0].to, NodeId::Storage(2));
        assert_eq!(sent[3].to, NodeId::Learner(2));
        assert_eq!(
            sent[0].msg,
            Msg::Vote {
                minion: 2,
                stamp: stamps[0],
                value: 40
            }
        );
        assert_eq!(
            sent[4].msg,
            Msg::Vote {
                minion: 2,
                stamp: stamps[1],
                value: 41
            }
        );
        assert_eq!(minion.votes(), 2);
    }
}

#[test]
fn three_equal_heads_decide_on_the_fast_path() {
    let mut l = learner(0, Numbering::QueuePosition, true);
    for (minion, value) in [(0, 5), (1, 5), (3, 9)] {
        l.handle(T0, vote(minion, value));
    }
    assert_eq!(
        l.decided(),
        &[] as &[Value],
        "two votes for 5 are not a fast quorum"
    );
    assert!(
        l.poll_timeout().is_some(),
        "the instance holds votes: the stall timer runs"
    );
    l.handle(T0, vote(2, 5));
    assert_eq!(l.decided(), &[5]);
    assert_eq!(
        l.poll_decision(),
        Some(Decision {
            instance: 0,
            value: 5,
            path: DecisionPath::Fast,
            noop: false
        })
    );
    assert_eq!(
        l.poll_transmit(),
        Some(Transmit {
            to: NodeId::Proposer,
            msg: Msg::Delivered { learner: 0, value: 5 }
        })
    );
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn two_against_two_is_a_conflict_that_asks_for_recovery() {
    let mut l = learner(1, Numbering::QueuePosition, true);
    for (minion, value) in [(0, 5), (1, 6), (2, 5), (3, 6)] {
        l.handle(T0, vote(minion, value));
    }
    assert_eq!(l.stats().conflicts, 1);
    let request = Msg::RecoveryRequest {
        learner: 1,
        instance: 0,
    };
    assert_eq!(
        drain(|| l.poll_transmit()),
        vec![Transmit {
            to: NodeId::RecoveryCoordinator,
            msg: request
        }]
    );
    l.handle(
        T0,
        Msg::Decided {
            instance: 0,
            value: 6,
        },
    );
    assert_eq!(l.decided(), &[6]);
    assert_eq!(l.stats().recovered_decisions, 1);
}

#[test]
fn without_recovery_a_conflict_stops_the_learner_for_good() {
    let mut l = learner(0, Numbering::QueuePosition, false);
    for (minion, value) in [(0, 5), (1, 6), (2, 7), (3, 5), (0, 8), (1, 8), (2, 8), (3, 8)] {
        l.handle(T0, vote(minion, value));
    }
    assert_eq!(
        l.decided(),
        &[] as &[Value],
        "instance 1 is decidable, but instance 0 is in the way"
    );
    assert_eq!(drain(|| l.poll_transmit()), vec![]);
    assert_eq!(l.poll_timeout(), None);
}

#[test]
fn a_stalled_instance_asks_for_recovery_after_the_timeout() {
    let mut l = learner(0, Numbering::QueuePosition, true);
    l.handle(T0, vote(0, 5));
    l.handle(T0 + Duration::from_micros(10), vote(1, 5));
    let deadline = l.poll_timeout().expect("armed at the first vote");
    assert_eq!(deadline, T0 + Duration::from_micros(100));
    l.handle_timeout(deadline.saturating_sub(Duration::from_nanos(1)));
    assert_eq!(
        l.stats().stall_timeouts,
        0,
        "an early timeout call changes nothing"
    );
    l.handle_timeout(deadline);
    assert_eq!(l.stats().stall_timeouts, 1);
    assert_eq!(l.stats().recovery_requests, 1);
    assert_eq!(
        l.poll_timeout(),
        None,
        "recovery links are reliable: no second request"
    );
}

#[test]
fn a_repeated_value_is_a_noop_and_a_contradiction_is_counted() {
    let mut l = learner(0, Numbering::QueuePosition, true);
    for instance in 0..2 {
        for minion in 0..3 {
            l.handle(T0, vote(minion, 5));
        }
        assert_eq!(l.next_instance(), instance + 1);
    }
    assert_eq!(l.stats().noops, 1);
    assert_eq!(drain(|| l.poll_transmit()).len(), 1, "one delivery for the value");
    l.handle(
        T0,
        Msg::Decided {
            instance: 0,
            value: 6,
        },
    );
    assert_eq!(l.stats().recovery_contradictions, 1);
    assert_eq!(l.decided(), &[5, 5], "a decision is never taken back");
}

/// Thesis assumption 2: "if this assumption is violated, then learners may decide different
/// values in an instance of consensus". Two learners; the second gets minions 0, 1 and 2's
/// votes for values 10 and 11 in the other order (their storage logs hold 10 first).
#[test]
fn queue_positions_let_a_reordered_learner_decide_differently() {
    let in_order = [
        (0, 0, 10),
        (1, 0, 10),
        (2, 0, 10),
        (3, 0, 10),
        (0, 1, 11),
        (1, 1, 11),
        (2, 1, 11),
    ];
    let reordered = [
        (0, 1, 11),
        (1, 1, 11),
        (2, 1, 11),
        (3, 0, 10),
        (0, 0, 10),
        (1, 0, 10),
        (2, 0, 10),
    ];
    for (numbering, expected) in [
        (Numbering::QueuePosition, [11, 10]),
        (Numbering::MinionStamp, [10, 11]),
    ] {
        let stamp = |instance| (numbering == Numbering::MinionStamp).then_some(instance);
        let mut learners = [learner(0, numbering, false), learner(1, numbering, false)];
        for (l, votes) in learners.iter_mut().zip([in_order, reordered]) {
            for (minion, instance, value) in votes {
                l.handle(
                    T0,
                    Msg::Vote {
                        minion,
                        stamp: stamp(instance),
                        value,
                    },
                );
            }
        }
        assert_eq!(learners[0].decided(), &[10, 11]);
        assert_eq!(learners[1].decided(), &expected, "{numbering:?}");
        assert_eq!(
            learners[1].stats().fast_decisions,
            2,
            "both on the fast path, no conflict seen"
        );
    }
}

#[test]
fn a_full_queue_drops_and_counts() {
    let mut l = FastLearner::new(LearnerConfig {
        votes_buffered_max: 2,
        ..learner_config(0, Numbering::QueuePosition)
    });
    // Instance 0 conflicts (no recovery), so minion 0's later votes pile up behind it.
    for (minion, value) in [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (0, 6)] {
        l.handle(T0, vote(minion, value));
    }
    assert_eq!(
        l.stats().dropped_full,
        1,
        "minion 0's third vote found its queue full"
    );
    for instance in 1..4 {
        l.handle(
            T0,
            Msg::Decided {
                instance,
                value: 10 + instance,
            },
        );
    }
    assert_eq!(
        l.stats().dropped_full,
        2,
        "recovered decisions are bounded as well"
    );
    l.handle(
        T0,
        Msg::Decided {
            instance: 0,
            value: 2,
        },
    );
    assert_eq!(l.decided(), &[2, 11, 12], "decision 13 was dropped");
}
