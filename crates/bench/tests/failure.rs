//! Paper 5.2 end to end on the inproc runtime: a host or a ToR crashes in the middle of
//! reliable all-to-all traffic; the controller declares the processes behind it failed, every
//! correct process discards, recalls and answers, and the commit barrier flows again. Every
//! scattering is delivered by all of its correct receivers or by none, and in one total order.

use onepipe_bench::demo::{DemoConfig, FailTarget, PhaseResult, PlannedFailure, run_phase};
use onepipe_check::{Event, check_all, check_atomicity, check_no_loss};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;

const FAIL_AT: Duration = Duration::from_millis(300);

fn run(topology: Topology, target: FailTarget) -> PhaseResult {
    let config = DemoConfig {
        topology,
        duration: Duration::from_millis(1_000),
        reliable: true,
        workers: 2,
        // 100 ms of silence before a link is dead: a worker descheduled on a loaded machine
        // (other tests, other builds) must not look failed. Detection time is not judged here.
        dead_after_intervals: 2000,
        failures: vec![PlannedFailure { target, at: FAIL_AT }],
        ..DemoConfig::default()
    };
    run_phase(&config, true, &mut |_, _| {}).unwrap()
}

/// Checks the run and returns the processes declared failed.
fn judge(r: &PhaseResult) -> Vec<u32> {
    let report = check_all(&r.logs);
    assert!(report.ok(), "{report}");
    let outcome = r.failure.as_ref().expect("a failure was planned");
    let failed: Vec<u32> = outcome.failed_processes.iter().map(|f| f.0).collect();
    let partial = check_atomicity(&r.logs, &failed);
    assert!(
        partial.is_empty(),
        "{} partly delivered, first {}",
        partial.len(),
        partial[0]
    );
    assert!(
        outcome.detection_us.is_some() && outcome.recovery_us.is_some() && outcome.stalled_processes == 0,
        "{outcome:?}"
    );
    // Recovery is more than a formality: a correct process delivers what was sent well after
    // the failure.
    let start = DemoConfig::default().clock_start.as_nanos();
    let after = start + FAIL_AT.as_nanos() + 300_000_000;
    let correct = r.logs.iter().find(|l| !failed.contains(&l.process)).unwrap();
    assert!(
        correct
            .events
            .iter()
            .any(|e| matches!(e, Event::Deliver { ts_ns, .. } if *ts_ns > after)),
        "nothing delivered after the recovery: {outcome:?}"
    );
    failed
}

#[test]
fn a_crashed_host_is_declared_failed_and_delivery_resumes_atomically() {
    let r = run(Topology::leaf_spine(2, 2, 2).unwrap(), FailTarget::Host(1));
    assert_eq!(judge(&r), vec![1]);
}

#[test]
fn a_crashed_tor_fails_its_rack_and_delivery_resumes_atomically() {
    let r = run(Topology::leaf_spine(2, 2, 2).unwrap(), FailTarget::Switch(0));
    assert_eq!(judge(&r), vec![0, 1]);
}

/// A link between a ToR and a spine fails: nobody is cut off, the controller reroutes around
/// it and removes its inputs, and every message is delivered (retransmissions included, which
/// would otherwise keep hashing onto the dead link).
#[test]
fn a_failed_link_is_routed_around_and_nothing_is_lost() {
    let topology = Topology::leaf_spine(2, 2, 2).unwrap();
    // Switches: leaf0, leaf1, spine0, spine1.
    let r = run(topology, FailTarget::Link(0, 2));
    assert_eq!(judge(&r), Vec::<u32>::new(), "{:?}", r.failure);
    let lost = check_no_loss(&r.logs);
    assert!(lost.is_empty(), "{} lost, first {}", lost.len(), lost[0]);
}
