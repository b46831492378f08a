//! Receiver Recovery at the controller (paper 5.2): a failed process heard again is told of its
//! failure, gets the failures since and the recalls it could not take, and rejoins as a new
//! process; none of it is lost across a restart, and repeats and late inputs change nothing.

use super::super::store::{MemoryStore, Service};
use super::super::{Controller, Input, Member, Output};
use super::{LOST_RECALLS_MAX, LostRecall, RECALLS_PER_OUTPUT};
use crate::controller::test_util::{self, failure, outputs, t};
use onepipe_fabric::{Peer, Topology, Wiring};
use onepipe_wire::{Duration, Instant};

const SETTLE: Duration = Duration::from_millis(5);

/// Two leaves (switches 0 and 1) of two processes each (0 and 1, then 2 and 3), two spines.
fn wiring() -> Wiring {
    Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap()
}

fn unregistered(w: &Wiring) -> Controller {
    test_util::unregistered(w, SETTLE, Duration::from_millis(100))
}

fn controller(w: &Wiring) -> Controller {
    test_util::registered(w, SETTLE, Duration::from_millis(100))
}

/// Process `p`'s ToR reports its input down, and the controller decides.
fn fail(w: &Wiring, c: &mut Controller, p: u32, at: Instant, last_commit: Instant) -> Vec<Output> {
    let spec = w.processes[p as usize];
    let input = Input::LinkDown {
        member: Member::Switch(spec.tor),
        port: spec.tor_port,
        last_commit_ns: last_commit.as_nanos(),
    };
    c.handle_input(at, input).unwrap();
    c.handle_timeout(at + SETTLE);
    outputs(c)
}

fn complete(c: &mut Controller, epoch: u64, processes: &[u32]) -> Vec<Output> {
    for &process in processes {
        c.handle_input(t(50), Input::Completed { process, epoch })
            .unwrap();
    }
    outputs(c)
}

fn heard(w: &Wiring, p: u32) -> Input {
    let spec = w.processes[p as usize];
    Input::Heard {
        member: Member::Switch(spec.tor),
        port: spec.tor_port,
    }
}

fn lost(process: u32, receiver: u32, ts: Instant, msg_id: u64) -> Input {
    Input::RecallLost {
        process,
        lost: vec![(receiver, ts.as_nanos(), msg_id)],
    }
}

/// The whole conversation, paper 5.2: "The controller notifies process of its own failure.
/// Then, the process contacts controller to get host failure notifications since its failure
/// and undeliverable recall messages. After delivering buffered messages, the recovered
/// process needs to join 1Pipe as a new process."
#[test]
fn a_failed_process_heard_again_recovers_with_its_record_and_rejoins_as_a_new_one() {
    let w = wiring();
    let mut c = controller(&w);
    fail(&w, &mut c, 2, t(10), t(7));
    // Senders report the recalls 2 cannot take before they answer; repeats and reports about
    // a process that is not failed are not recorded.
    c.handle_input(t(11), lost(0, 2, t(8), 5)).unwrap();
    c.handle_input(t(11), lost(1, 2, t(9), 6)).unwrap();
    c.handle_input(t(12), lost(0, 2, t(8), 5)).unwrap();
    c.handle_input(t(12), lost(0, 3, t(8), 5)).unwrap();
    let recalls = vec![
        LostRecall {
            sender: 0,
            ts: t(8),
            msg_id: 5,
        },
        LostRecall {
            sender: 1,
            ts: t(9),
            msg_id: 6,
        },
    ];
    assert_eq!(c.lost_recalls(2), recalls);
    assert_eq!(c.recovery_counters().stale, 2);
    // Heard again before Resume: told at once, answered only once every correct process is
    // done with its failure (no recall for it can come later).
    c.handle_input(t(20), heard(&w, 2)).unwrap();
    let own = Output::OwnFailure {
        to: 2,
        ts: t(7),
        incarnation: 0,
    };
    assert_eq!(outputs(&mut c), vec![own.clone()]);
    c.handle_input(
        t(21),
        Input::Recover {
            process: 2,
            incarnation: 0,
        },
    )
    .unwrap();
    assert!(outputs(&mut c).is_empty());
    let after_resume = complete(&mut c, 0, &[0, 1, 3]);
    let tor = w.processes[2];
    let recovery = Output::Recovery {
        to: 2,
        incarnation: 0,
        ts: t(7),
        failures: vec![],
        failed_now: vec![],
        recalls: 2,
        recalls_truncated: false,
    };
    assert_eq!(
        after_resume,
        vec![
            Output::RemoveInputs {
                switch: tor.tor,
                ports: vec![tor.tor_port]
            },
            Output::LostRecalls {
                to: 2,
                incarnation: 0,
                recalls,
            },
            recovery,
        ]
    );
    // Another incarnation's request is stale; so is a rejoin before the answer was asked for.
    c.handle_input(
        t(22),
        Input::Recover {
            process: 2,
            incarnation: 1,
        },
    )
    .unwrap();
    assert!(outputs(&mut c).is_empty());
    let rejoin = Input::Rejoin {
        process: 2,
        incarnation: 0,
    };
    c.handle_input(t(23), rejoin.clone()).unwrap();
    let mut expected = vec![Output::Readmit {
        switch: tor.tor,
        ports: vec![tor.tor_port],
    }];
    expected.extend([0, 1, 3].map(|to| Output::Rejoined {
        to,
        process: 2,
        incarnation: 1,
    }));
    assert_eq!(outputs(&mut c), expected);
    assert_eq!((c.failure_of(2), c.incarnation(2)), (None, 1));
    assert!(c.lost_recalls(2).is_empty(), "forgotten with the old incarnation");
    // Repeats and late arrivals change nothing.
    c.handle_input(t(24), rejoin).unwrap();
    c.handle_input(t(24), heard(&w, 2)).unwrap();
    c.handle_input(t(24), lost(1, 2, t(9), 6)).unwrap();
    assert!(outputs(&mut c).is_empty());
    assert!(c.lost_recalls(2).is_empty());
    assert_eq!(c.recovery_counters().stale, 6);
    // The new process fails like any other: a new failure, announced to all, 2 no longer
    // waited for as a failed one.
    let again = fail(&w, &mut c, 2, t(30), t(29));
    assert_eq!(
        again,
        [0, 1, 3]
            .map(|to| Output::Announce {
                to,
                epoch: 1,
                failures: vec![failure(2, t(29))],
            })
            .to_vec()
    );
    c.handle_input(t(40), Input::Register { process: 2 }).unwrap();
    assert_eq!(
        outputs(&mut c),
        vec![
            Output::Registered {
                to: 2,
                failures: vec![],
            },
            Output::OwnFailure {
                to: 2,
                ts: t(29),
                incarnation: 1,
            }
        ]
    );
}

/// The answer names the first failure of every process since ours (a process failing later,
/// which the failed process never heard of), the earlier ones still standing, and who is
/// failed now (a process that rejoined meanwhile is not).
#[test]
fn the_answer_names_the_failures_since_and_who_is_failed_now() {
    let w = wiring();
    let mut c = controller(&w);
    fail(&w, &mut c, 0, t(10), t(5));
    complete(&mut c, 0, &[1, 2, 3]);
    fail(&w, &mut c, 2, t(20), t(15));
    complete(&mut c, 1, &[1, 3]);
    fail(&w, &mut c, 3, t(30), t(25));
    complete(&mut c, 2, &[1]);
    c.handle_input(t(40), Input::Register { process: 2 }).unwrap();
    c.handle_input(
        t(40),
        Input::Recover {
            process: 2,
            incarnation: 0,
        },
    )
    .unwrap();
    let out = outputs(&mut c);
    assert_eq!(
        out.last(),
        Some(&Output::Recovery {
            to: 2,
            incarnation: 0,
            ts: t(15),
            failures: vec![failure(3, t(25)), failure(0, t(5))],
            failed_now: vec![failure(0, t(5)), failure(3, t(25))],
            recalls: 0,
            recalls_truncated: false,
        })
    );
}

/// A process whose ToR is gone cannot come back: it is told of its failure, but not taken
/// back, since nobody could reach it.
#[test]
fn a_process_behind_a_failed_switch_is_not_taken_back() {
    let w = wiring();
    let mut c = controller(&w);
    // Both spines lose leaf 1: processes 2 and 3 fail with it.
    for spine in [2, 3] {
        let port = w.switch_ports[spine]
            .iter()
            .position(|p| matches!(p.peer, Peer::Switch { switch: 1, .. }))
            .unwrap() as u16;
        let input = Input::LinkDown {
            member: Member::Switch(spine),
            port,
            last_commit_ns: t(7).as_nanos(),
        };
        c.handle_input(t(10), input).unwrap();
    }
    c.handle_timeout(t(10) + SETTLE);
    complete(&mut c, 0, &[0, 1]);
    c.handle_input(t(20), Input::Register { process: 2 }).unwrap();
    c.handle_input(
        t(20),
        Input::Recover {
            process: 2,
            incarnation: 0,
        },
    )
    .unwrap();
    assert_eq!(
        outputs(&mut c),
        vec![
            // Its rack mate failed with it: named, with its timestamp.
            Output::Registered {
                to: 2,
                failures: vec![failure(3, t(7))],
            },
            Output::OwnFailure {
                to: 2,
                ts: t(7),
                incarnation: 0
            }
        ]
    );
    assert_eq!(c.recovery_counters().unreachable, 1);
}

/// Recalls travel in parts that fit a management frame; a record that outgrows its bound says
/// so, and the recovered process then delivers nothing it cannot vouch for.
#[test]
fn many_recalls_go_in_parts_and_an_overflowing_record_says_so() {
    let w = wiring();
    let mut c = controller(&w);
    fail(&w, &mut c, 2, t(10), t(7));
    for id in 0..300 {
        c.handle_input(t(11), lost(0, 2, t(8), id)).unwrap();
    }
    complete(&mut c, 0, &[0, 1, 3]);
    let ask = Input::Recover {
        process: 2,
        incarnation: 0,
    };
    c.handle_input(t(20), ask.clone()).unwrap();
    let out = outputs(&mut c);
    let parts: Vec<usize> = out
        .iter()
        .filter_map(|o| match o {
            Output::LostRecalls { recalls, .. } => Some(recalls.len()),
            _ => None,
        })
        .collect();
    assert_eq!(parts, vec![RECALLS_PER_OUTPUT, RECALLS_PER_OUTPUT, 44]);
    assert!(matches!(
        out.last(),
        Some(Output::Recovery {
            recalls: 300,
            recalls_truncated: false,
            ..
        })
    ));
    for id in 300..=LOST_RECALLS_MAX as u64 {
        c.handle_input(t(21), lost(1, 2, t(9), id)).unwrap();
    }
    assert_eq!(c.recovery_counters().recalls_dropped, 1);
    c.handle_input(t(22), ask).unwrap();
    assert!(matches!(
        outputs(&mut c).last(),
        Some(Output::Recovery {
            recalls_truncated: true,
            ..
        })
    ));
}

/// The record is inputs, so the log keeps it: a controller restarted on the log in the middle
/// of a recovery answers it again with every recall, and one restarted after the rejoin tells
/// the ToR and the others again (both ignore a repeat).
#[test]
fn a_restart_from_the_log_loses_no_recall_and_no_rejoin() {
    let w = wiring();
    let mut s = Service::open(unregistered(&w), MemoryStore::default(), t(0)).unwrap();
    for p in 0..4 {
        s.handle_input(t(0), Input::Register { process: p }).unwrap();
    }
    let spec = w.processes[2];
    let down = Input::LinkDown {
        member: Member::Switch(spec.tor),
        port: spec.tor_port,
        last_commit_ns: t(7).as_nanos(),
    };
    s.handle_input(t(10), down).unwrap();
    s.handle_timeout(t(10) + SETTLE).unwrap();
    s.handle_input(t(11), lost(0, 2, t(8), 5)).unwrap();
    for p in [0, 1, 3] {
        s.handle_input(t(12), Input::Completed { process: p, epoch: 0 })
            .unwrap();
    }
    s.handle_input(t(13), heard(&w, 2)).unwrap();
    let ask = Input::Recover {
        process: 2,
        incarnation: 0,
    };
    s.handle_input(t(14), ask).unwrap();
    let first: Vec<Output> = std::iter::from_fn(|| s.poll_event()).collect();
    let answer: Vec<Output> = first
        .iter()
        .filter(|o| matches!(o, Output::LostRecalls { .. } | Output::Recovery { .. }))
        .cloned()
        .collect();
    assert_eq!(answer.len(), 2);

    let mut second = Service::open(unregistered(&w), s.store().clone(), t(20)).unwrap();
    assert_eq!(second.controller().lost_recalls(2).len(), 1);
    let again: Vec<Output> = std::iter::from_fn(|| second.poll_event())
        .filter(|o| matches!(o, Output::LostRecalls { .. } | Output::Recovery { .. }))
        .collect();
    assert_eq!(again, answer, "answered again, whole");
    second
        .handle_input(
            t(21),
            Input::Rejoin {
                process: 2,
                incarnation: 0,
            },
        )
        .unwrap();
    let rejoined: Vec<Output> = std::iter::from_fn(|| second.poll_event()).collect();

    let mut third = Service::open(unregistered(&w), second.store().clone(), t(30)).unwrap();
    assert_eq!(third.controller().failure_of(2), None);
    assert_eq!(third.controller().incarnation(2), 1);
    let resent: Vec<Output> = std::iter::from_fn(|| third.poll_event())
        .filter(|o| matches!(o, Output::Readmit { .. } | Output::Rejoined { .. }))
        .collect();
    assert_eq!(resent, rejoined);
}

/// A sender reports its lost recalls in parts; one part names several receivers, and a part
/// larger than a frame allows, or naming a process that does not exist, is refused whole.
#[test]
fn lost_recalls_come_in_parts_and_a_bad_part_is_refused_whole() {
    let w = wiring();
    let mut c = controller(&w);
    fail(&w, &mut c, 2, t(10), t(5));
    fail(&w, &mut c, 3, t(11), t(5));
    let part = Input::RecallLost {
        process: 0,
        lost: vec![(2, t(6).as_nanos(), 1), (3, t(7).as_nanos(), 1)],
    };
    c.handle_input(t(20), part).unwrap();
    assert_eq!(c.recovery_counters().recalls_recorded, 2);
    let too_big = Input::RecallLost {
        process: 0,
        lost: vec![(2, t(6).as_nanos(), 9); RECALLS_PER_OUTPUT + 1],
    };
    assert!(c.handle_input(t(21), too_big).is_err());
    let stranger = Input::RecallLost {
        process: 0,
        lost: vec![(2, t(6).as_nanos(), 10), (99, t(6).as_nanos(), 11)],
    };
    assert!(c.handle_input(t(22), stranger).is_err());
    assert_eq!(
        c.recovery_counters().recalls_recorded,
        2,
        "nothing of a refused part is kept"
    );
}
