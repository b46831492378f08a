//! The Paxos demo on the runtimes, judged from outside (agreement of the replicas' decided logs,
//! validity, linearizability of the history): with no fault, with lossy links, and with the
//! coordinator, an acceptor or a replica killed in the middle of the traffic.

use indicatif::ProgressBar;
use onepipe_bench::netchain::fabric::NetchainRuntime;
use onepipe_bench::paxos::{Failure, PaxosDemoConfig, PaxosReport, run};
use onepipe_paxos::{Placement, Tuning};
use onepipe_wire::Duration;

fn short() -> PaxosDemoConfig {
    PaxosDemoConfig {
        duration: Duration::from_millis(600),
        clients: 16,
        keys: 50,
        tuning: Tuning {
            // Small windows, so that the runs reuse acceptor slots after trims.
            window: 256,
            range: 64,
            retry_timeout: Duration::from_millis(10),
            ..Tuning::default()
        },
        ..PaxosDemoConfig::default()
    }
}

fn assert_correct(r: &PaxosReport, what: &str) {
    assert!(r.checks.ok(), "{what}: {:?}", r.checks);
    assert_eq!(r.checks.agreement, Some(true), "{what}");
    assert_eq!(r.checks.validity, Some(true), "{what}");
    assert_eq!(r.checks.linearizable, Some(true), "{what}");
    assert_eq!(r.checks.converged, Some(true), "{what}");
    assert!(r.ok > 100, "{what}: only {} calls answered", r.ok);
    // The replicas went around the acceptors' ring: slots were reused.
    assert!(
        r.checks.decided_max > 256,
        "{what}: {} decided",
        r.checks.decided_max
    );
}

fn run_ok(c: &PaxosDemoConfig, what: &str) -> PaxosReport {
    let r = run(c, &ProgressBar::hidden()).unwrap();
    assert_correct(&r, what);
    r
}

#[test]
fn both_placements_decide_and_answer_every_call() {
    for placement in [Placement::InNetwork, Placement::Software] {
        let r = run_ok(&PaxosDemoConfig { placement, ..short() }, "no fault");
        assert_eq!(r.unknown, 0);
        // The primary ran Phase 1 at start; the backup may have taken over too if the machine
        // was slow enough for proposers to give up on the primary (tests run side by side).
        assert!(r.roles.takeovers >= 1);
    }
}

#[test]
fn the_backup_takes_over_from_a_failed_coordinator() {
    let c = PaxosDemoConfig {
        failure: Some(Failure::Coordinator(Duration::from_millis(200))),
        ..short()
    };
    let r = run_ok(&c, "coordinator killed");
    assert!(r.failovers >= 1, "the proposers turned to the backup");
    assert_eq!(r.roles.takeovers, 2);
}

#[test]
fn an_acceptor_or_a_replica_may_fail() {
    for failure in [
        Failure::Acceptor(2, Duration::from_millis(200)),
        Failure::Replica(1, Duration::from_millis(200)),
    ] {
        run_ok(
            &PaxosDemoConfig {
                failure: Some(failure),
                ..short()
            },
            &format!("{failure:?}"),
        );
    }
}

#[test]
fn a_replica_restarts_from_its_store_and_catches_up() {
    let c = PaxosDemoConfig {
        duration: Duration::from_millis(900),
        failure: Some(Failure::Replica(0, Duration::from_millis(150))),
        restart_after: Some(Duration::from_millis(300)),
        // The restart closes and reopens the store under the worker threads.
        replica_workers: true,
        ..short()
    };
    let r = run_ok(&c, "replica restarted");
    assert_eq!(r.restarts, 1);
    // Back at the end, level with the others (the convergence check compares every live
    // replica's instance and state digest).
    assert_eq!(r.checks.converged, Some(true));
}

#[test]
fn lossy_links_leave_holes_that_are_filled() {
    let c = PaxosDemoConfig {
        loss: 0.01,
        ..short()
    };
    let r = run_ok(&c, "1% loss");
    assert!(r.retries > 0);
    assert!(r.roles.reinits + r.checks.noops > 0 || r.retries > 0);
}

#[test]
fn partitions_each_have_their_log() {
    let c = PaxosDemoConfig {
        tuning: Tuning {
            partitions: 4,
            ..short().tuning
        },
        // One worker thread per partition in each replica (thesis 6.1).
        replica_workers: true,
        ..short()
    };
    let r = run_ok(&c, "4 partitions");
    let pids: std::collections::HashSet<u16> = r.decided[0].iter().map(|d| d.pid).collect();
    assert_eq!(pids.len(), 4);
}

#[test]
fn the_udp_runtime_runs_the_same_nodes() {
    let c = PaxosDemoConfig {
        runtime: NetchainRuntime::Udp,
        ..short()
    };
    run_ok(&c, "udp");
}
