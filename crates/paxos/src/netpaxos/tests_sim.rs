//! The thesis's claims about fast network consensus (4.1.2) and their limits, on the seeded
//! simulation. Failing assertions print `seed=...`; `simulate` with that seed replays the run.

use super::*;
use proptest::prelude::*;

/// Seeds searched for a run that shows a weakness.
const SEEDS: std::ops::Range<u64> = 0..64;

fn config(seed: u64, numbering: Numbering, links: FaultyLinks, recovery: bool) -> NetpaxosConfig {
    NetpaxosConfig {
        values: 60,
        numbering,
        faulty_links: links,
        recovery,
        reorder_probability: 0.05,
        ..NetpaxosConfig::new(seed)
    }
}

fn run(config: &NetpaxosConfig) -> NetpaxosReport {
    let report = simulate(config).expect("a valid configuration");
    assert!(!report.truncated, "seed={} ran out of virtual time", config.seed);
    report
}

/// Every learner delivered every value exactly once, and the repeats were no-ops.
fn assert_complete(report: &NetpaxosReport) {
    let seed = report.seed;
    assert!(
        report.all_delivered(),
        "seed={seed}: {} values undelivered",
        report.undecided
    );
    let mut noops = 0;
    for (decided, delivered) in report.decided.iter().zip(&report.delivered) {
        let mut sorted = delivered.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..report.values).collect::<Vec<_>>(), "seed={seed}");
        noops += (decided.len() - delivered.len()) as u64;
    }
    assert_eq!(
        noops, report.noops,
        "seed={seed}: every undelivering instance is a repeat"
    );
}

/// "The non-conflicting scenario is the usual case": with no reordering or loss every learner
/// decides every value on the fast path, in the serializer's order.
#[test]
fn a_clean_network_decides_every_value_on_the_fast_path() {
    for numbering in [Numbering::QueuePosition, Numbering::MinionStamp] {
        for recovery in [false, true] {
            for seed in 0..4 {
                let c = NetpaxosConfig {
                    reorder_probability: 0.0,
                    ..config(seed, numbering, FaultyLinks::Both, recovery)
                };
                let report = run(&c);
                assert_eq!(
                    report.fast_decisions,
                    c.values * u64::from(c.learners),
                    "seed={seed}"
                );
                assert_eq!(
                    (report.recovered_decisions, report.recoveries, report.conflicts),
                    (0, 0, 0)
                );
                assert_eq!(
                    (report.noops, report.resubmitted, report.messages_reordered),
                    (0, 0, 0)
                );
                assert_eq!(report.check_agreement(), Ok(()));
                for decided in &report.decided {
                    assert_eq!(decided, &(0..c.values).collect::<Vec<_>>(), "seed={seed}");
                }
            }
        }
    }
}

/// Seeds where reordering between the serializer and the minions stops the fast path.
fn seeds_stalled_by_serializer_reordering() -> Vec<u64> {
    let mut stalled = Vec::new();
    for seed in SEEDS {
        let report = run(&config(
            seed,
            Numbering::QueuePosition,
            FaultyLinks::SerializerToMinion,
            false,
        ));
        // Assumption 1 is "important for performance, not correctness": every learner sees the
        // same queues, so they stop at the same instance having decided the same values.
        assert_eq!(report.check_agreement(), Ok(()), "seed={seed}");
        if report.undecided > 0 {
            assert!(
                report.conflicts + report.stall_timeouts > 0,
                "seed={seed}: undecided without a conflict"
            );
            stalled.push(seed);
        }
    }
    stalled
}

/// Assumption 1 broken: "if packets are received out-of-order, the learners would recognize
/// the problem, fail to reach consensus" (and, without recovery mode, stop).
#[test]
fn reordering_before_the_minions_loses_liveness_on_the_fast_path() {
    let stalled = seeds_stalled_by_serializer_reordering();
    assert!(!stalled.is_empty(), "no seed in {SEEDS:?} stalled the fast path");
}

/// "... and revert to the recovery mode (i.e., classic Paxos)": the same seeds with recovery
/// end with every learner agreeing and every value delivered. Instances recovered with a value
/// decided before are no-ops (queue positions number the instances, so recovery may choose a
/// value twice; the proposer re-submits the value that lost its place).
#[test]
fn recovery_restores_liveness_on_the_same_seeds() {
    for seed in seeds_stalled_by_serializer_reordering() {
        let report = run(&config(
            seed,
            Numbering::QueuePosition,
            FaultyLinks::SerializerToMinion,
            true,
        ));
        assert_eq!(report.check_agreement(), Ok(()), "seed={seed}");
        assert!(
            report.recoveries > 0 && report.recovered_decisions > 0,
            "seed={seed}: {report:?}"
        );
        assert_eq!(report.recoveries_unfinished, 0, "seed={seed}");
        assert_eq!(report.recovery_contradictions, 0, "seed={seed}");
        assert_complete(&report);
    }
}

/// Assumption 2 broken: "learners may decide different values in an instance of consensus and
/// not be able to recover a consistent state from examining the logs at the minion storage".
/// Reordering between the minions and the learners makes learners disagree on the fast path
/// alone, and recovery does not repair it.
#[test]
fn reordering_after_the_minions_loses_agreement_and_recovery_cannot_repair_it() {
    let links = FaultyLinks::MinionToLearner;
    let disagree = |recovery| -> Vec<u64> {
        let runs = SEEDS.map(|seed| run(&config(seed, Numbering::QueuePosition, links, recovery)));
        runs.filter(|r| r.check_agreement().is_err())
            .map(|r| r.seed)
            .collect()
    };
    let fast_only = disagree(false);
    assert!(
        !fast_only.is_empty(),
        "no seed in {SEEDS:?} made the fast path disagree"
    );
    let with_recovery = disagree(true);
    assert!(
        !with_recovery.is_empty(),
        "recovery repaired every seed in {SEEDS:?}"
    );
    // Stamped votes do not depend on the learner links' order: the same seeds agree.
    for seed in fast_only.into_iter().chain(with_recovery) {
        for recovery in [false, true] {
            let report = run(&config(seed, Numbering::MinionStamp, links, recovery));
            assert_eq!(report.check_agreement(), Ok(()), "seed={seed}");
            assert_complete(&report);
        }
    }
}

#[test]
fn one_seed_replays_one_run() {
    let c = NetpaxosConfig {
        loss_probability: 0.02,
        ..config(7, Numbering::QueuePosition, FaultyLinks::Both, true)
    };
    let report = run(&c);
    assert_eq!(run(&c), report);
    assert!(
        report.messages_reordered > 0 && report.messages_lost > 0,
        "the faults were drawn"
    );
    assert_ne!(
        run(&NetpaxosConfig { seed: 8, ..c }),
        report,
        "another seed draws other faults"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// With recovery, no two learners decide different values for one instance whenever the
    /// learners see each minion's votes in its storage server's order: with queue positions,
    /// faults only before the minions; with stamped votes, faults on every faulty link.
    #[test]
    fn with_recovery_learners_never_disagree(
        seed in any::<u64>(),
        stamped in any::<bool>(),
        reorder in 0.0..0.3f64,
        loss in 0.0..0.05f64,
        stall_timeout_us in 1..100u64,
    ) {
        let (numbering, links) = if stamped {
            (Numbering::MinionStamp, FaultyLinks::Both)
        } else {
            (Numbering::QueuePosition, FaultyLinks::SerializerToMinion)
        };
        let c = NetpaxosConfig {
            values: 40,
            reorder_probability: reorder,
            loss_probability: loss,
            // Short timeouts start recovery while votes are still on their way.
            stall_timeout: onepipe_wire::Duration::from_micros(stall_timeout_us),
            ..config(seed, numbering, links, true)
        };
        let report = run(&c);
        prop_assert_eq!(report.check_agreement(), Ok(()), "seed={}", seed);
        prop_assert_eq!(report.recovery_contradictions, 0, "seed={}", seed);
    }
}
