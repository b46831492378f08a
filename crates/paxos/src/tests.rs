//! The whole protocol on the test network: agreement, validity and durability under loss,
//! duplication, reordering and the failure of a coordinator, an acceptor or a replica.

use crate::testing::{BACKUP, Cluster, PRIMARY, Setup, acceptor_addr, learner_addr};
use onepipe_wire::{Duration, Instant};
use proptest::prelude::*;

const RUN_LIMIT: Instant = Instant::from_nanos(20_000_000_000);

fn run(setup: Setup) -> Cluster {
    let mut cluster = Cluster::new(setup);
    let finished = cluster.run(RUN_LIMIT);
    cluster.check().unwrap();
    assert!(finished, "not every request completed by {RUN_LIMIT:?}");
    if !cluster.setup.kills.is_empty() {
        // The failure came in the middle of the traffic.
        let at_kill = cluster.acked_at_kill.expect("killed");
        assert!(
            at_kill > 0 && at_kill < cluster.acked.len() / 2,
            "{at_kill} of {}",
            cluster.acked.len()
        );
    }
    cluster
}

#[test]
fn without_faults_every_request_is_decided_once_in_order() {
    let c = run(Setup::default());
    assert_eq!(c.gave_up, 0);
    let total = (c.setup.proposers * c.setup.clients_per_proposer) as u64 * c.setup.requests_per_client;
    for r in &c.replicas {
        // No retries, so no duplicates or no-ops: exactly the requests, in instances 0..total.
        assert_eq!(r.log.len() as u64, total);
        assert!(r.log.keys().map(|&(_, i)| i).eq(0..total));
        assert_eq!(r.learner.counters().noops, 0);
    }
    assert_eq!(c.coordinators[0].1.counters().takeovers, 1);
    assert!(!c.coordinators[1].1.is_active());
}

#[test]
fn slots_are_reused_after_trim_and_no_index_is_out_of_range() {
    let c = run(Setup {
        window: 16,
        range: 4,
        requests_per_client: 40,
        ..Setup::default()
    });
    for a in &c.acceptors {
        // 320 instances through a ring of 16 slots: reused twenty times over.
        assert!(a.floor(0).unwrap() > 16 * 4, "floor {:?}", a.floor(0));
        a.invariants();
    }
}

#[test]
fn loss_duplication_and_reordering_do_not_break_agreement() {
    let c = run(Setup {
        loss: 0.05,
        duplicate: 0.05,
        jitter: Duration::from_micros(200),
        heal_at: Instant::from_nanos(200_000_000),
        ..Setup::default()
    });
    let reinits: u64 = c.replicas.iter().map(|r| r.learner.counters().reinits_sent).sum();
    let catchups: u64 = c
        .replicas
        .iter()
        .map(|r| r.learner.counters().catchups_sent)
        .sum();
    assert!(reinits + catchups > 0, "loss should leave holes to chase");
}

#[test]
fn the_backup_takes_over_when_the_coordinator_fails() {
    let c = run(Setup {
        kills: vec![(PRIMARY, Instant::from_nanos(500_000))],
        ..Setup::default()
    });
    assert!(c.coordinators[1].1.is_active());
    assert!(c.proposers.iter().all(|p| p.coordinator() == BACKUP));
}

#[test]
fn one_acceptor_may_fail() {
    run(Setup {
        kills: vec![(acceptor_addr(1), Instant::from_nanos(500_000))],
        ..Setup::default()
    });
}

#[test]
fn one_replica_may_fail_and_acknowledged_values_survive() {
    run(Setup {
        kills: vec![(learner_addr(0), Instant::from_nanos(500_000))],
        ..Setup::default()
    });
}

#[test]
fn a_replica_restarted_from_its_log_catches_up_from_its_peers() {
    let mut c = run(Setup {
        requests_per_client: 60,
        kills: vec![(learner_addr(2), Instant::from_nanos(300_000))],
        restarts: vec![(2, Instant::from_nanos(2_000_000))],
        retain: 1024,
        ..Setup::default()
    });
    // The run may end before the restart: time goes on until the replica is back and level.
    let level = |c: &Cluster| c.restarted == 1 && c.replicas[2].log.len() == c.replicas[0].log.len();
    c.run_while(c.now + Duration::from_millis(100), |c| !level(c));
    c.check().unwrap();
    assert_eq!(c.restarted, 1);
    let lens: Vec<usize> = c.replicas.iter().map(|r| r.log.len()).collect();
    assert_eq!(lens[2], lens[0], "caught up: {lens:?}");
    let caught: u64 = c.replicas[2].learner.counters().catchups_sent;
    assert!(caught > 0);
}

#[test]
fn partitions_have_instance_spaces_of_their_own() {
    let c = run(Setup {
        partitions: 4,
        ..Setup::default()
    });
    for pid in 0..4 {
        assert!(c.replicas[0].log.keys().any(|&(p, i)| p == pid && i == 0));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Never two replicas decide different values for one instance, whatever the seed, the
    /// faults and which one role fails when.
    #[test]
    fn agreement_under_any_schedule(
        seed: u64,
        loss in 0.0..0.1f64,
        duplicate in 0.0..0.1f64,
        victim in 0usize..5,
        kill_us in 0u64..1_500,
        partitions in 1u16..3,
    ) {
        let victim = [PRIMARY, acceptor_addr(0), acceptor_addr(2), learner_addr(1), BACKUP][victim];
        let mut cluster = Cluster::new(Setup {
            seed,
            loss,
            duplicate,
            partitions,
            window: 32,
            range: 8,
            requests_per_client: 8,
            jitter: Duration::from_micros(100),
            kills: vec![(victim, Instant::from_nanos(kill_us * 1000))],
            heal_at: Instant::from_nanos(50_000_000),
            ..Setup::default()
        });
        let finished = cluster.run(RUN_LIMIT);
        prop_assert_eq!(cluster.check(), Ok(()));
        prop_assert!(finished, "stuck at {:?}: acked {}", cluster.now, cluster.acked.len());
    }
}
