//! Recovery mode, the storage servers, the proposer and the simulation's configuration, on
//! hand-built schedules (thesis 4.1.2).

use super::tests::{T0, drain};
use super::*;
use onepipe_wire::Duration;

#[test]
fn choose_keeps_a_value_that_may_have_been_fast_chosen() {
    assert_eq!(
        choose_value(&[(Some(3), None), (Some(4), None), (Some(4), None)]),
        Some(4)
    );
    assert_eq!(
        choose_value(&[(Some(4), None), (Some(3), None), (Some(4), None)]),
        Some(4)
    );
    // Nothing can have been chosen: the most voted, then the smallest.
    assert_eq!(
        choose_value(&[(Some(9), None), (Some(3), None), (Some(5), None)]),
        Some(3)
    );
    // A recovery acceptance wins over fast votes, the highest ballot first.
    let accepted = [(Some(4), Some((1, 7))), (Some(4), Some((2, 8))), (Some(4), None)];
    assert_eq!(choose_value(&accepted), Some(8));
    assert_eq!(choose_value(&[(None, None), (None, None), (None, None)]), None);
}

#[test]
fn storage_answers_phase_one_only_once_it_holds_the_vote() {
    let mut storage = Storage::new(1, Numbering::QueuePosition, 8);
    storage.handle(Msg::Prepare {
        instance: 0,
        ballot: 1,
    });
    assert_eq!(
        storage.poll_transmit(),
        None,
        "the minion's vote may still count at a learner"
    );
    storage.handle(Msg::Vote {
        minion: 1,
        stamp: None,
        value: 42,
    });
    let promise = Msg::Promise {
        minion: 1,
        instance: 0,
        ballot: 1,
        fast_vote: Some(42),
        accepted: None,
    };
    assert_eq!(
        storage.poll_transmit(),
        Some(Transmit {
            to: NodeId::RecoveryCoordinator,
            msg: promise
        })
    );
    storage.handle(Msg::Vote {
        minion: 2,
        stamp: None,
        value: 43,
    });
    assert_eq!(
        storage.fast_vote(1),
        None,
        "another minion's vote is not logged here"
    );
    storage.handle(Msg::Prepare {
        instance: 0,
        ballot: 1,
    });
    storage.handle(Msg::Accept {
        instance: 0,
        ballot: 0,
        value: 9,
    });
    assert_eq!(
        storage.poll_transmit(),
        None,
        "no second promise for one ballot, no ballot 0"
    );
    storage.handle(Msg::Accept {
        instance: 0,
        ballot: 1,
        value: 43,
    });
    let accepted = Msg::Accepted {
        minion: 1,
        instance: 0,
        ballot: 1,
    };
    assert_eq!(
        storage.poll_transmit(),
        Some(Transmit {
            to: NodeId::RecoveryCoordinator,
            msg: accepted
        })
    );
}

#[test]
fn a_full_storage_drops_and_counts() {
    let mut storage = Storage::new(0, Numbering::MinionStamp, 2);
    for stamp in 0..3 {
        storage.handle(Msg::Vote {
            minion: 0,
            stamp: Some(stamp),
            value: 100 + stamp,
        });
    }
    assert_eq!(storage.dropped_full(), 1);
    assert_eq!(storage.fast_vote(1), Some(101));
    assert_eq!(storage.fast_vote(2), None);
}

/// Drives a coordinator and four storage servers until nothing moves; returns what the
/// learners were told.
fn recover(
    storages: &mut [Storage],
    coordinator: &mut RecoveryCoordinator,
    instance: Instance,
) -> Vec<Transmit> {
    coordinator.handle(Msg::RecoveryRequest { learner: 0, instance });
    let mut to_learners = Vec::new();
    for _ in 0..10 {
        while let Some(t) = coordinator.poll_transmit() {
            match t.to {
                NodeId::Storage(m) => storages[m as usize].handle(t.msg),
                _ => to_learners.push(t),
            }
        }
        for storage in storages.iter_mut() {
            while let Some(t) = storage.poll_transmit() {
                coordinator.handle(t.msg);
            }
        }
    }
    to_learners
}

#[test]
fn recovery_decides_the_value_three_minions_voted_for() {
    let mut storages: Vec<Storage> = (0..4)
        .map(|m| Storage::new(m, Numbering::QueuePosition, 8))
        .collect();
    // Minion 3 is slow: its storage holds nothing yet, so the coordinator hears storages 0..3.
    for (m, value) in [(0u8, 5), (1, 6), (2, 6)] {
        storages[m as usize].handle(Msg::Vote {
            minion: m,
            stamp: None,
            value,
        });
    }
    let mut coordinator = RecoveryCoordinator::new(2, 16);
    let told = recover(&mut storages, &mut coordinator, 0);
    let decided = |to| Transmit {
        to,
        msg: Msg::Decided {
            instance: 0,
            value: 6,
        },
    };
    assert_eq!(
        told,
        vec![decided(NodeId::Learner(0)), decided(NodeId::Learner(1))]
    );
    assert_eq!(coordinator.recoveries(), 1);
    assert_eq!(coordinator.decided(0), Some(6));
    coordinator.handle(Msg::RecoveryRequest {
        learner: 1,
        instance: 0,
    });
    assert_eq!(
        coordinator.poll_transmit(),
        Some(decided(NodeId::Learner(1))),
        "a late request is answered"
    );
}

#[test]
fn recovery_waits_while_fewer_than_three_storage_servers_hold_a_vote() {
    let mut storages: Vec<Storage> = (0..4)
        .map(|m| Storage::new(m, Numbering::QueuePosition, 8))
        .collect();
    for m in 0..2u8 {
        storages[m as usize].handle(Msg::Vote {
            minion: m,
            stamp: None,
            value: 5,
        });
    }
    let mut coordinator = RecoveryCoordinator::new(2, 16);
    assert_eq!(recover(&mut storages, &mut coordinator, 0), vec![]);
    assert_eq!(coordinator.in_progress(), 1);
    storages[3].handle(Msg::Vote {
        minion: 3,
        stamp: None,
        value: 7,
    });
    assert_eq!(
        recover(&mut storages, &mut coordinator, 0).len(),
        2,
        "the third vote completes Phase 1"
    );
    assert_eq!(coordinator.decided(0), Some(5));
}

#[test]
fn the_proposer_resubmits_until_every_learner_delivered() {
    let config = ProposerConfig {
        values: 2,
        learners: 2,
        send_interval: Duration::from_micros(1),
        retry_timeout: Duration::from_micros(10),
        attempts_max: 2,
    };
    let mut proposer = Proposer::new(config, T0);
    proposer.handle_timeout(T0);
    proposer.handle_timeout(T0 + Duration::from_micros(1));
    assert_eq!(drain(|| proposer.poll_transmit()).len(), 2);
    for learner in 0..2 {
        proposer.handle(Msg::Delivered { learner, value: 0 });
    }
    proposer.handle(Msg::Delivered { learner: 0, value: 1 });
    let retry = proposer.poll_timeout().expect("value 1 is pending");
    assert_eq!(retry, T0 + Duration::from_micros(11));
    proposer.handle_timeout(retry);
    let resent = drain(|| proposer.poll_transmit());
    assert_eq!(
        resent,
        vec![Transmit {
            to: NodeId::Serializer,
            msg: Msg::Request { value: 1 }
        }]
    );
    let last = proposer.poll_timeout().expect("still pending");
    proposer.handle_timeout(last);
    assert_eq!((proposer.resubmitted(), proposer.abandoned()), (1, 1));
    assert_eq!(proposer.poll_timeout(), None);
}

#[test]
fn the_simulation_refuses_bad_configurations() {
    let good = NetpaxosConfig::new(1);
    assert_eq!(good.validate(), Ok(()));
    let one_learner = NetpaxosConfig { learners: 1, ..good };
    assert_eq!(simulate(&one_learner).err(), Some(ConfigError::Learners(1)));
    let no_values = NetpaxosConfig { values: 0, ..good };
    assert_eq!(no_values.validate(), Err(ConfigError::Values(0)));
    let bad_p = NetpaxosConfig {
        loss_probability: 1.5,
        ..good
    };
    assert_eq!(bad_p.validate(), Err(ConfigError::Probability(1.5)));
    let nan = NetpaxosConfig {
        reorder_probability: f64::NAN,
        ..good
    };
    assert!(nan.validate().is_err());
    let no_attempts = NetpaxosConfig {
        attempts_max: 0,
        ..good
    };
    assert_eq!(no_attempts.validate(), Err(ConfigError::Attempts));
}
