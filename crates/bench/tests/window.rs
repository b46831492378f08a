//! The demo workload's closed loop (`DemoConfig::window_broadcasts`, used by `bench fig8` as
//! the baselines use theirs): a process never has more of its own broadcasts undelivered back
//! to itself than the window, and the run stays correct.

use onepipe_bench::demo::{DemoConfig, PhaseResult, run_phase};
use onepipe_check::{Event, check_all};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;

fn run(window: Option<usize>, reliable: bool) -> PhaseResult {
    let config = DemoConfig {
        topology: Topology::single_switch(4).unwrap(),
        duration: Duration::from_millis(300),
        reliable,
        workers: 2,
        window_broadcasts: window,
        ..DemoConfig::default()
    };
    run_phase(&config, true, &mut |_, _| {}).unwrap()
}

/// The most own broadcasts any process had sent (its copy logged) and not yet delivered back.
/// Reliable sends are logged when they leave the send buffer, after the window counted them,
/// so the log can only show fewer than the workload held.
fn most_outstanding(r: &PhaseResult) -> usize {
    let mut most = 0;
    for log in &r.logs {
        let mut outstanding = 0usize;
        for e in &log.events {
            match *e {
                Event::Send { dst, .. } if dst == log.process => outstanding += 1,
                Event::Deliver { src, .. } if src == log.process => outstanding -= 1,
                _ => {}
            }
            most = most.max(outstanding);
        }
    }
    most
}

#[test]
fn a_window_bounds_own_broadcasts_in_flight() {
    for reliable in [false, true] {
        let r = run(Some(2), reliable);
        let report = check_all(&r.logs);
        assert!(report.ok(), "reliable {reliable}: {report}");
        assert!(
            r.delivered > 1_000,
            "reliable {reliable}: {} delivered",
            r.delivered
        );
        let most = most_outstanding(&r);
        assert!(most <= 2, "reliable {reliable}: {most} own broadcasts in flight");
        assert!(most >= 1, "reliable {reliable}: nothing was ever in flight");
    }
}

#[test]
fn without_a_window_more_are_in_flight() {
    // The send buffer alone (32 packets: 8 broadcasts to 4 processes) lets more out: the test
    // above would see it.
    let r = run(None, false);
    assert!(check_all(&r.logs).ok());
    let most = most_outstanding(&r);
    assert!(most > 2, "only {most} own broadcasts in flight without a window");
}
