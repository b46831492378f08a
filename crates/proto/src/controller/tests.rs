//! The failure procedure's Determine, Broadcast and Resume steps, one scenario per case of
//! paper 5.2 and its appendix that the controller decides.

use super::store::{MemoryStore, Service, Store};
use super::*;
use crate::controller::test_util::{self, failure, outputs, t};
use onepipe_fabric::{Peer, Topology, Wiring};

const SETTLE: Duration = Duration::from_millis(5);
const ANSWER: Duration = Duration::from_millis(100);

/// Two leaves of `hosts` processes each, under `spines` spines: leaves are switches 0 and 1.
fn wiring(spines: usize, hosts: usize) -> Wiring {
    Wiring::new(Topology::leaf_spine(2, spines, hosts).unwrap(), 1).unwrap()
}

fn unregistered(w: &Wiring) -> Controller {
    test_util::unregistered(w, SETTLE, ANSWER)
}

fn controller(w: &Wiring) -> Controller {
    test_util::registered(w, SETTLE, ANSWER)
}

/// The port of switch `a` that leads to switch `b`.
fn port_to(w: &Wiring, a: usize, b: usize) -> u16 {
    w.switch_ports[a]
        .iter()
        .position(|p| matches!(p.peer, Peer::Switch { switch, .. } if switch == b))
        .unwrap() as u16
}

fn down(member: Member, port: u16, last_commit: Instant) -> Input {
    Input::LinkDown {
        member,
        port,
        last_commit_ns: last_commit.as_nanos(),
    }
}

fn tor_down(w: &Wiring, p: u32, last_commit: Instant) -> Input {
    let spec = w.processes[p as usize];
    down(Member::Switch(spec.tor), spec.tor_port, last_commit)
}

fn announced(failures: &[(u32, Instant)], to: &[u32], epoch: u64) -> Vec<Output> {
    let failures: Vec<Failure> = failures
        .iter()
        .map(|&(process, ts)| Failure { process, ts })
        .collect();
    to.iter()
        .map(|&to| Output::Announce {
            to,
            epoch,
            failures: failures.clone(),
        })
        .collect()
}

fn complete(c: &mut Controller, now: Instant, epoch: u64, processes: &[u32]) {
    for &process in processes {
        c.handle_input(now, Input::Completed { process, epoch }).unwrap();
    }
}

#[test]
fn a_failed_host_is_announced_with_its_tors_last_commit_and_resumed_after_every_answer() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    // Other reports of the same failure may still come: nothing is decided yet.
    c.handle_timeout(t(10));
    assert!(outputs(&mut c).is_empty());
    assert_eq!(c.poll_timeout(), Some(t(10) + SETTLE));
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(7))], &[1, 2, 3], 0));
    assert!(c.recovering());
    complete(&mut c, t(20), 0, &[1, 3]);
    assert!(
        outputs(&mut c).is_empty(),
        "barriers stay held until everyone answered"
    );
    complete(&mut c, t(21), 0, &[2]);
    let tor = w.processes[0];
    assert_eq!(
        outputs(&mut c),
        vec![Output::RemoveInputs {
            switch: tor.tor,
            ports: vec![tor.tor_port]
        }]
    );
    assert!(!c.recovering());
    assert_eq!(c.failure_of(0), Some(t(7)));
}

/// Switches repeat a report until the input leaves their commit lane, because management
/// frames can be lost. A repeat before Resume changes nothing; one after it comes from a switch
/// that missed its Resume, which gets it again (found by a simulator campaign: a lost Resume
/// stalled every commit barrier behind that switch for good).
#[test]
fn a_report_repeated_after_resume_gets_the_resume_again() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(7))], &[1, 2, 3], 0));
    c.handle_input(t(16), tor_down(&w, 0, t(7))).unwrap();
    assert!(outputs(&mut c).is_empty(), "its Resume is still to come");
    complete(&mut c, t(20), 0, &[1, 2, 3]);
    let tor = w.processes[0];
    let resume = vec![Output::RemoveInputs {
        switch: tor.tor,
        ports: vec![tor.tor_port],
    }];
    assert_eq!(outputs(&mut c), resume);
    c.handle_input(t(30), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(30));
    assert_eq!(outputs(&mut c), resume);
    assert_eq!(c.failure_of(0), Some(t(7)));
    assert_eq!(c.counters().resumes_resent, 1);
    assert_eq!(c.counters().duplicate_reports, 2);
}

/// A process whose registration arrives between the decision and Resume (its first was lost,
/// or it started late) is told of the failure and waited for: the commit barrier must not pass
/// the failure before it has discarded and recalled (found by a simulator campaign).
#[test]
fn a_process_registering_during_a_recovery_is_announced_to_and_waited_for() {
    let w = wiring(2, 2);
    let mut c = unregistered(&w);
    for process in [0, 1, 2] {
        c.handle_input(t(0), Input::Register { process }).unwrap();
    }
    outputs(&mut c);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(7))], &[1, 2], 0));
    c.handle_input(t(16), Input::Register { process: 3 }).unwrap();
    let mut late = vec![Output::Registered {
        to: 3,
        failures: vec![failure(0, t(7))],
    }];
    late.extend(announced(&[(0, t(7))], &[3], 0));
    assert_eq!(outputs(&mut c), late);
    complete(&mut c, t(20), 0, &[1, 2]);
    assert!(outputs(&mut c).is_empty(), "waits for the late process too");
    complete(&mut c, t(21), 0, &[3]);
    assert!(matches!(outputs(&mut c)[..], [Output::RemoveInputs { .. }]));
    // Registering again changes nothing; after Resume a process is not announced to, but
    // its confirmation names the failure, which it applies before it delivers.
    c.handle_input(t(30), Input::Register { process: 3 }).unwrap();
    assert_confirmed_with(&mut c, 3, vec![failure(0, t(7))]);
}

/// The only output is `process`'s confirmation, naming `failures`.
fn assert_confirmed_with(c: &mut Controller, process: u32, failures: Vec<Failure>) {
    let confirmed = Output::Registered {
        to: process,
        failures,
    };
    assert_eq!(outputs(c), vec![confirmed]);
}

/// A process the controller first hears of after a recovery resumed (found by a simulator
/// campaign, seed 90059545 of a build with other timing: docs/failures.md): the recovery is
/// not redone for it, but its confirmation names every failure not recovered, with its
/// timestamp, and never the process itself.
#[test]
fn a_process_registering_after_resume_is_told_the_failures_in_its_confirmation() {
    let w = wiring(2, 2);
    let mut c = unregistered(&w);
    for process in [1, 2] {
        c.handle_input(t(0), Input::Register { process }).unwrap();
    }
    outputs(&mut c);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(7))], &[1, 2], 0));
    complete(&mut c, t(20), 0, &[1, 2]);
    assert!(matches!(outputs(&mut c)[..], [Output::RemoveInputs { .. }]));
    c.handle_input(t(30), Input::Register { process: 3 }).unwrap();
    // Told in the confirmation, not announced to.
    assert_confirmed_with(&mut c, 3, vec![failure(0, t(7))]);
}

/// The only host of a rack fails: its ToR is alive but nothing below it can send again, so its
/// uplink barrier would hold forever. Resume removes the ToR's inputs at the spines too (found
/// by the simulator: every commit barrier stalled behind that ToR).
#[test]
fn a_rack_left_without_correct_processes_is_no_longer_waited_for() {
    let w = wiring(2, 1);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 1, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(1, t(7))], &[0], 0));
    complete(&mut c, t(20), 0, &[0]);
    let tor = w.processes[1];
    let mut removed = outputs(&mut c);
    removed.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(
        removed,
        vec![
            Output::RemoveInputs {
                switch: tor.tor,
                ports: vec![tor.tor_port]
            },
            Output::RemoveInputs {
                switch: 2,
                ports: vec![port_to(&w, 2, tor.tor)]
            },
            Output::RemoveInputs {
                switch: 3,
                ports: vec![port_to(&w, 3, tor.tor)]
            },
        ]
    );
    // The rack of the correct process keeps being counted.
    let mut c2 = controller(&wiring(2, 2));
    c2.handle_input(t(10), tor_down(&wiring(2, 2), 1, t(7))).unwrap();
    c2.handle_timeout(t(10) + SETTLE);
    outputs(&mut c2);
    complete(&mut c2, t(20), 0, &[0, 2, 3]);
    assert_eq!(outputs(&mut c2).len(), 1, "only the failed host's input");
}

/// Every process goes (applications exit): each is cut off alone, and none of them is the
/// side that stays, whatever the count. All are declared failed at once; nobody is left to
/// answer, so Resume follows.
#[test]
fn when_every_process_goes_the_fabric_side_stays() {
    let w = wiring(2, 1);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_input(t(10), tor_down(&w, 1, t(8))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(c.failure_of(0), Some(t(7)));
    assert_eq!(c.failure_of(1), Some(t(8)));
    let out = outputs(&mut c);
    assert!(
        out.iter().all(|o| matches!(o, Output::RemoveInputs { .. })),
        "no announcement, no cut: {out:?}"
    );
    assert!(!c.recovering());
}

#[test]
fn a_failed_tor_fails_its_rack_at_the_largest_commit_the_spines_saw() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    // Both spines time out the ToR; process 0 times out the ToR too, but it is on the failed
    // side: what it heard does not bound what reached the correct receivers.
    c.handle_input(t(10), down(Member::Switch(2), port_to(&w, 2, 0), t(30)))
        .unwrap();
    c.handle_input(t(11), down(Member::Process(0), 0, t(90))).unwrap();
    c.handle_input(t(12), down(Member::Switch(3), port_to(&w, 3, 0), t(25)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(30)), (1, t(30))], &[2, 3], 0));
    complete(&mut c, t(20), 0, &[2, 3]);
    assert_eq!(
        outputs(&mut c),
        vec![
            Output::RemoveInputs {
                switch: 2,
                ports: vec![port_to(&w, 2, 0)]
            },
            Output::RemoveInputs {
                switch: 3,
                ports: vec![port_to(&w, 3, 0)]
            },
        ]
    );
}

#[test]
fn a_tor_losing_one_spine_of_two_fails_nobody_and_both_ends_drop_the_link() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), down(Member::Switch(2), port_to(&w, 2, 0), t(30)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(
        outputs(&mut c),
        vec![
            Output::RemoveInputs {
                switch: 0,
                ports: vec![port_to(&w, 0, 2)]
            },
            Output::RemoveInputs {
                switch: 2,
                ports: vec![port_to(&w, 2, 0)]
            },
        ]
    );
    assert!(c.failures().is_empty());
    // The other end's own report comes later and decides nothing new; its end is told to
    // remove the input again (as a switch that missed its Resume and reported again would
    // be), which changes nothing there.
    c.handle_input(t(20), down(Member::Switch(0), port_to(&w, 0, 2), t(31)))
        .unwrap();
    c.handle_timeout(t(30));
    assert_eq!(
        outputs(&mut c),
        vec![Output::RemoveInputs {
            switch: 0,
            ports: vec![port_to(&w, 0, 2)]
        }]
    );
    assert!(c.failures().is_empty());
    assert_eq!(c.counters().duplicate_reports, 1);
    assert_eq!(c.counters().resumes_resent, 1);
}

#[test]
fn a_link_only_the_failed_side_reports_is_cut_at_the_switch_before_deciding() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    // Process 1 stops hearing its ToR; the ToR still hears it.
    c.handle_input(t(10), down(Member::Process(1), 0, t(50))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    let tor = w.processes[1];
    assert_eq!(
        outputs(&mut c),
        vec![Output::CutInput {
            switch: tor.tor,
            port: tor.tor_port
        }]
    );
    assert!(c.failures().is_empty());
    // The ToR cuts it and reports what it last carried: that is the failure timestamp.
    c.handle_input(t(16), tor_down(&w, 1, t(12))).unwrap();
    c.handle_timeout(t(16));
    assert_eq!(outputs(&mut c), announced(&[(1, t(12))], &[0, 2, 3], 0));
}

/// A cut that goes unanswered is asked again every quarter of the answer timeout (the request
/// or the report may be lost); a switch that answers none by the timeout is failed with every
/// link of it, as a process that does not answer is, and the decision goes on through its
/// neighbours (seed 90115774: a dead ToR's rack looked the larger side, and the controller
/// waited for ever for the dead ToR's report).
#[test]
fn a_switch_that_does_not_carry_out_a_cut_is_asked_again_then_failed() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), down(Member::Process(1), 0, t(50))).unwrap();
    let asked = t(10) + SETTLE;
    c.handle_timeout(asked);
    let tor = w.processes[1];
    let cut = Output::CutInput {
        switch: tor.tor,
        port: tor.tor_port,
    };
    assert_eq!(outputs(&mut c), vec![cut.clone()]);
    let repeat = Duration::from_millis(25);
    for k in 1..ANNOUNCE_REPEATS_PER_TIMEOUT {
        assert_eq!(c.poll_timeout(), Some(asked + repeat.saturating_mul(k)));
        c.handle_timeout(asked + repeat.saturating_mul(k));
        assert_eq!(outputs(&mut c), vec![cut.clone()]);
    }
    assert!(c.failures().is_empty());
    // Leaf 0 never answers: it is failed, and with it its rack. The spine's end of its uplink
    // is the boundary now, and the spine is asked for what it last heard.
    assert_eq!(c.poll_timeout(), Some(asked + ANSWER));
    c.handle_timeout(asked + ANSWER);
    assert_eq!(c.counters().switches_unanswering, 1);
    assert_eq!(
        outputs(&mut c),
        vec![Output::CutInput {
            switch: 2,
            port: port_to(&w, 2, 0)
        }]
    );
    let answered = asked + ANSWER + Duration::from_millis(1);
    c.handle_input(answered, down(Member::Switch(2), port_to(&w, 2, 0), t(30)))
        .unwrap();
    c.handle_timeout(answered);
    assert_eq!(outputs(&mut c), announced(&[(0, t(30)), (1, t(30))], &[2, 3], 0));
}

/// The other end of an inter-switch link reporting again does not restart the wait for the end
/// a cut waits on (it did: every repeated report from the live end removed the cut, and the
/// next decision asked the dead end afresh, for ever).
#[test]
fn a_report_from_the_other_end_does_not_restart_a_cuts_wait() {
    let w = wiring(1, 1);
    let mut c = controller(&w);
    // Leaf 1 dies; the spine reports its uplink. Process 1 (under leaf 1) has also failed, and
    // leaf 0 reports it: leaf 1's rack (process 0 is under leaf 0) ...
    let (spine, leaf1) = (2, 1);
    let uplink = port_to(&w, spine, leaf1);
    c.handle_input(t(10), down(Member::Switch(spine), uplink, t(8)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    let first = outputs(&mut c);
    // However the sides were drawn, a report from the spine's end again must not reset a cut
    // that waits for leaf 1.
    for k in 1..=8u64 {
        let now = t(10) + SETTLE + Duration::from_millis(10 * k);
        c.handle_input(now, down(Member::Switch(spine), uplink, t(8)))
            .unwrap();
        c.handle_timeout(now);
        outputs(&mut c);
    }
    let waits_for_leaf1 = first
        .iter()
        .any(|o| matches!(o, Output::CutInput { switch, .. } if *switch == leaf1));
    if waits_for_leaf1 {
        assert_eq!(
            c.poll_timeout().map(|at| at <= t(10) + SETTLE + ANSWER),
            Some(true)
        );
        c.handle_timeout(t(10) + SETTLE + ANSWER);
        assert_eq!(c.counters().switches_unanswering, 1);
    }
}

#[test]
fn a_process_that_does_not_answer_is_cut_off_and_fails_in_a_later_epoch() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    outputs(&mut c);
    complete(&mut c, t(20), 0, &[1, 2]);
    assert!(outputs(&mut c).is_empty());
    // Process 3 never answers. It is told again every quarter of the answer timeout (the
    // announcement or its answer may have been lost)...
    let decided = t(10) + SETTLE;
    let repeat = Duration::from_millis(25);
    for k in 1..ANNOUNCE_REPEATS_PER_TIMEOUT {
        assert_eq!(c.poll_timeout(), Some(decided + repeat.saturating_mul(k)));
        c.handle_timeout(decided + repeat.saturating_mul(k));
        assert_eq!(outputs(&mut c), announced(&[(0, t(7))], &[3], 0));
    }
    assert_eq!(c.counters().announcements_repeated, 3);
    // ...and at the deadline the recovery resumes without it, and its ToR is told to cut it.
    let deadline = decided + ANSWER;
    assert_eq!(c.poll_timeout(), Some(deadline));
    c.handle_timeout(deadline);
    let (p0, p3) = (w.processes[0], w.processes[3]);
    assert_eq!(
        outputs(&mut c),
        vec![
            Output::CutInput {
                switch: p3.tor,
                port: p3.tor_port
            },
            Output::RemoveInputs {
                switch: p0.tor,
                ports: vec![p0.tor_port]
            },
        ]
    );
    assert_eq!(c.counters().unanswered, 1);
    c.handle_input(deadline, tor_down(&w, 3, t(40))).unwrap();
    c.handle_timeout(deadline);
    assert_eq!(outputs(&mut c), announced(&[(3, t(40))], &[1, 2], 1));
    // A late answer to the first epoch is harmless.
    complete(&mut c, deadline, 0, &[3]);
    assert_eq!(c.counters().stale_completions, 1);
}

#[test]
fn duplicate_late_and_contradictory_reports_do_not_change_a_decision() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), tor_down(&w, 0, t(7))).unwrap();
    c.handle_input(t(11), tor_down(&w, 0, t(7))).unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c).len(), 3);
    c.handle_input(t(30), tor_down(&w, 0, t(9))).unwrap();
    c.handle_input(t(31), down(Member::Process(0), 0, t(99))).unwrap();
    c.handle_timeout(t(32));
    assert!(outputs(&mut c).is_empty());
    assert_eq!(c.failure_of(0), Some(t(7)));
    assert_eq!(c.counters().duplicate_reports, 3);
}

#[test]
fn a_partition_keeps_the_side_with_more_processes() {
    // One spine: losing leaf 0's uplink splits the fabric in two halves of two processes. The
    // tie goes to the side with the top-layer switch, where the controller meets the fabric.
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), down(Member::Switch(0), port_to(&w, 0, 2), t(60)))
        .unwrap();
    c.handle_input(t(10), down(Member::Switch(2), port_to(&w, 2, 0), t(50)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(0, t(50)), (1, t(50))], &[2, 3], 0));

    // With three processes on leaf 1's side removed from the count, leaf 0's side wins.
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(1), tor_down(&w, 3, t(1))).unwrap();
    c.handle_timeout(t(1) + SETTLE);
    outputs(&mut c);
    complete(&mut c, t(2), 0, &[0, 1, 2]);
    outputs(&mut c);
    c.handle_input(t(10), down(Member::Switch(0), port_to(&w, 0, 2), t(60)))
        .unwrap();
    c.handle_input(t(10), down(Member::Switch(2), port_to(&w, 2, 0), t(50)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(2, t(60))], &[0, 1], 1));
}

#[test]
fn inputs_naming_nothing_are_refused_and_counted() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    assert_eq!(
        c.handle_input(t(1), Input::Register { process: 4 }),
        Err(ControllerError::UnknownProcess(4))
    );
    assert!(c.handle_input(t(1), down(Member::Switch(9), 0, t(0))).is_err());
    assert!(c.handle_input(t(1), down(Member::Switch(0), 99, t(0))).is_err());
    assert!(c.handle_input(t(1), down(Member::Process(0), 1, t(0))).is_err());
    assert_eq!(c.counters().unknown, 4);
    assert_eq!(c.poll_timeout(), None);
    // A completion for an epoch that never was.
    complete(&mut c, t(1), 7, &[0]);
    assert_eq!(c.counters().stale_completions, 1);
}

/// Drives a service through a host failure up to the announcement, so that a replacement
/// can take over with the recovery in progress.
fn half_a_recovery<S: Store>(w: &Wiring, store: S) -> Service<S> {
    let mut s = Service::open(unregistered(w), store, t(0)).unwrap();
    for p in 0..w.process_count() as u32 {
        s.handle_input(t(0), Input::Register { process: p }).unwrap();
    }
    s.handle_input(t(10), tor_down(w, 0, t(7))).unwrap();
    s.handle_timeout(t(10) + SETTLE).unwrap();
    s.handle_input(t(20), Input::Completed { process: 1, epoch: 0 })
        .unwrap();
    s
}

#[test]
fn a_controller_taking_over_from_the_log_finishes_the_recovery() {
    let w = wiring(1, 2);
    let first = half_a_recovery(&w, MemoryStore::default());
    let log = first.store().clone();
    // Bad input never reaches the log.
    let mut first = first;
    assert!(first.handle_input(t(21), Input::Register { process: 9 }).is_err());
    assert_eq!(first.store().records.len(), log.records.len());

    let fresh = unregistered(&w);
    let mut second = Service::open(fresh, log, t(30)).unwrap();
    assert_eq!(second.controller().failure_of(0), Some(t(7)));
    // Process 1 already answered; the others are asked again.
    let again: Vec<Output> = std::iter::from_fn(|| second.poll_event()).collect();
    assert_eq!(again, announced(&[(0, t(7))], &[2, 3], 0));
    for p in [2, 3] {
        second
            .handle_input(t(31), Input::Completed { process: p, epoch: 0 })
            .unwrap();
    }
    let tor = w.processes[0];
    assert_eq!(
        second.poll_event(),
        Some(Output::RemoveInputs {
            switch: tor.tor,
            ports: vec![tor.tor_port]
        })
    );
}

/// Campaign seeds 90112596 and 90111865 (`crates/sim/tests/faults.rs`): leaf 0 lost its link
/// to spine 1, then leaf 1 its link to spine 0. The fabric is still connected (leaf 0, spine 0,
/// leaf 2, spine 1, leaf 1), so the controller failed nobody and removed the link from the
/// commit lanes; but packets and barriers only go up and then down, so nothing bounded
/// leaf 0's commit barrier by leaf 1's processes any more, and a scattering delivered on one
/// side was discarded on the other when leaf 1 failed later. One of the two leaves that cannot
/// reach each other now fails, cut off at its live uplink, at the largest commit barrier its
/// boundary reports.
#[test]
fn leaves_that_reach_each_other_only_through_a_valley_are_a_partition() {
    let w = Wiring::new(Topology::leaf_spine(3, 2, 1).unwrap(), 1).unwrap();
    let (spine0, spine1) = (3, 4);
    let mut c = controller(&w);
    c.handle_input(t(10), down(Member::Switch(spine1), port_to(&w, spine1, 0), t(9)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert!(
        outputs(&mut c)
            .iter()
            .all(|o| matches!(o, Output::RemoveInputs { .. })),
        "leaf 0 still reaches everyone over spine 0"
    );
    c.handle_input(t(20), down(Member::Switch(spine0), port_to(&w, spine0, 1), t(21)))
        .unwrap();
    c.handle_timeout(t(20) + SETTLE);
    let cut = outputs(&mut c);
    assert!(
        cut.contains(&Output::CutInput {
            switch: spine1,
            port: port_to(&w, spine1, 1)
        }),
        "leaf 1 (the higher processes of a tie) is cut at its live uplink: {cut:?}"
    );
    assert!(!cut.iter().any(|o| matches!(o, Output::RemoveInputs { .. })));
    assert!(c.failures().is_empty(), "decided once the cut is reported");
    c.handle_input(t(27), down(Member::Switch(spine1), port_to(&w, spine1, 1), t(22)))
        .unwrap();
    c.handle_timeout(t(27));
    assert_eq!(outputs(&mut c), announced(&[(1, t(22))], &[0, 2], 1));
}

/// Spine 2 dies at t(10): both leaves report their uplinks to it, and the controller decides
/// (nobody fails; the links are out).
fn spine_2_dies(w: &Wiring, c: &mut Controller) {
    for leaf in [0, 1] {
        c.handle_input(t(10), down(Member::Switch(leaf), port_to(w, leaf, 2), t(9)))
            .unwrap();
    }
    c.handle_timeout(t(10) + SETTLE);
}

fn heard(w: &Wiring, switch: usize, far: usize) -> Input {
    Input::Heard {
        member: Member::Switch(switch),
        port: port_to(w, switch, far),
    }
}

/// A spine that failed and came back (a restart, or its links healed) is taken back link by
/// link as its neighbours hear it: both ends readmit the link, and the routes use it again.
#[test]
fn a_spine_heard_again_is_readmitted_link_by_link_and_routed_through_again() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    // Spine 2 dies: both leaves report their uplinks to it; nobody fails.
    spine_2_dies(&w, &mut c);
    outputs(&mut c);
    assert!(c.failures().is_empty());
    assert_eq!(c.take_reroute().map(|ends| ends.len()), Some(4));
    // Leaf 0 hears the spine again.
    c.handle_input(t(30), heard(&w, 0, 2)).unwrap();
    assert_eq!(
        outputs(&mut c),
        vec![
            Output::Readmit {
                switch: 0,
                ports: vec![port_to(&w, 0, 2)]
            },
            Output::Readmit {
                switch: 2,
                ports: vec![port_to(&w, 2, 0)]
            },
        ]
    );
    // The routes now avoid only the link still out.
    let link1 = [(1, port_to(&w, 1, 2)), (2, port_to(&w, 2, 1))];
    let mut out = c.take_reroute().unwrap();
    out.sort();
    assert_eq!(out, link1.to_vec());
    // The same report again (a repeat while the Readmit was on its way) changes nothing.
    c.handle_input(t(31), heard(&w, 0, 2)).unwrap();
    assert!(outputs(&mut c).is_empty());
    assert_eq!(c.counters().readmissions_stale, 1);
    // Leaf 1 hears it too: the spine is whole again, and no link is avoided.
    c.handle_input(t(32), heard(&w, 1, 2)).unwrap();
    assert_eq!(outputs(&mut c).len(), 2);
    assert_eq!(c.take_reroute(), Some(vec![]));
    assert_eq!(c.counters().links_readmitted, 2);
    // Should it fail again, it is reported and decided afresh.
    c.handle_input(t(40), down(Member::Switch(0), port_to(&w, 0, 2), t(39)))
        .unwrap();
    c.handle_timeout(t(40) + SETTLE);
    assert!(outputs(&mut c).contains(&Output::RemoveInputs {
        switch: 0,
        ports: vec![port_to(&w, 0, 2)]
    }));
    // A controller taking over resends the Resumes of links still out only.
    let mut again = controller(&w);
    again.restore(c.snapshot()).unwrap();
    again.take_over(t(50));
    let removes: Vec<Output> = outputs(&mut again)
        .into_iter()
        .filter(|o| matches!(o, Output::RemoveInputs { .. }))
        .collect();
    assert!(
        !removes.contains(&Output::RemoveInputs {
            switch: 1,
            ports: vec![port_to(&w, 1, 2)]
        }),
        "{removes:?}"
    );
}

/// While a recovery is in progress nothing is taken back (the switch reports again later).
#[test]
fn nothing_is_readmitted_while_a_recovery_is_in_progress() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    spine_2_dies(&w, &mut c);
    outputs(&mut c);
    // A host fails; its recovery waits for answers.
    c.handle_input(t(20), tor_down(&w, 0, t(19))).unwrap();
    c.handle_timeout(t(20) + SETTLE);
    outputs(&mut c);
    assert!(c.recovering());
    c.handle_input(t(30), heard(&w, 0, 2)).unwrap();
    assert!(outputs(&mut c).is_empty());
    assert_eq!(c.counters().readmissions_stale, 1);
    complete(&mut c, t(31), 1, &[1, 2, 3]);
    outputs(&mut c);
    c.handle_input(t(32), heard(&w, 0, 2)).unwrap();
    assert_eq!(c.counters().links_readmitted, 1);
}

/// A ToR whose rack was declared failed and that comes back is not taken back: its hosts
/// return only through Receiver Recovery, not by a link healing under them.
#[test]
fn a_failed_racks_tor_heard_again_stays_out() {
    let w = wiring(1, 2);
    let mut c = controller(&w);
    c.handle_input(t(10), down(Member::Switch(2), port_to(&w, 2, 1), t(8)))
        .unwrap();
    c.handle_timeout(t(10) + SETTLE);
    assert_eq!(outputs(&mut c), announced(&[(2, t(8)), (3, t(8))], &[0, 1], 0));
    complete(&mut c, t(11), 0, &[0, 1]);
    outputs(&mut c);
    c.handle_input(t(30), heard(&w, 2, 1)).unwrap();
    assert!(outputs(&mut c).is_empty());
    assert_eq!(c.counters().readmissions_refused, 1);
    // Nor does a failed rack's ToR speak for its own uplink.
    c.handle_input(t(31), heard(&w, 1, 2)).unwrap();
    assert_eq!(c.counters().readmissions_refused, 2);
    assert_eq!(c.counters().links_readmitted, 0);
}

/// A switch that was not on the controller's side when a link was decided (it was down), and
/// reports that link later (it restarted, and one neighbour stayed silent), is told to remove
/// it once the recovery that decided the link has resumed (simulator campaign seed 90109845).
#[test]
fn a_late_report_of_a_decided_link_gets_its_resume() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    // Spine 2 dies: both leaves report their uplinks to it, and the links are decided with the
    // leaves' ends only (the spine is cut off from everything).
    spine_2_dies(&w, &mut c);
    outputs(&mut c);
    // It restarts; leaf 1 hears it and the link is readmitted. Leaf 0 stays silent to it.
    c.handle_input(t(30), heard(&w, 1, 2)).unwrap();
    outputs(&mut c);
    c.handle_input(t(40), down(Member::Switch(2), port_to(&w, 2, 0), t(0)))
        .unwrap();
    assert_eq!(
        outputs(&mut c),
        vec![Output::RemoveInputs {
            switch: 2,
            ports: vec![port_to(&w, 2, 0)]
        }]
    );
    assert!(c.failures().is_empty());
}

/// A switch taken back is told to remove its inputs on links still down to a side the
/// controller cut off (a restarted spine next to a failed rack's dead ToR would otherwise hold
/// that input for ever, and freeze the commit lanes it joins: campaign seed 90117261), but not
/// those to its own side, which are likely to be readmitted next (seed 90110662).
#[test]
fn a_switch_taken_back_drops_its_inputs_from_the_side_cut_off() {
    let w = wiring(2, 2);
    let mut c = controller(&w);
    // Spine 2 dies (both leaves report it), then leaf 1 dies: its rack fails.
    spine_2_dies(&w, &mut c);
    outputs(&mut c);
    c.handle_input(t(20), down(Member::Switch(3), port_to(&w, 3, 1), t(18)))
        .unwrap();
    c.handle_timeout(t(20) + SETTLE);
    outputs(&mut c);
    complete(&mut c, t(21), 1, &[0, 1]);
    outputs(&mut c);
    // Spine 2 restarts; leaf 0 hears it.
    c.handle_input(t(30), heard(&w, 0, 2)).unwrap();
    let out = outputs(&mut c);
    assert!(
        out.contains(&Output::RemoveInputs {
            switch: 2,
            ports: vec![port_to(&w, 2, 1)]
        }),
        "{out:?}"
    );
    assert_eq!(c.counters().links_readmitted, 1);
}
