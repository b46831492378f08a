//! Issue 42: one forged beacon with barriers far in the future, injected on a link mid-run.
//! Without a bound it pinned an input's register: the switch's barrier went on without that
//! link, whose messages then arrived below barriers already passed. With the bound
//! (docs/ordering.md, "Implausible time") it is refused and counted, and the run is as if it
//! never came: nothing dropped as late, every check passes, reliable scatterings all-or-nothing,
//! and the controller hears of it and declares nobody failed.

use onepipe_sim::{ForgedBeacon, SimConfig, SimReport, run};
use onepipe_wire::Duration;

mod common;

/// Ten seconds ahead: far past the default bound (one second), far within the wire's range.
fn forged(process: u32, to_tor: bool) -> ForgedBeacon {
    ForgedBeacon {
        at: Duration::from_micros(100),
        process,
        to_tor,
        ahead: Duration::from_secs(10),
    }
}

fn config(beacons: Vec<ForgedBeacon>) -> SimConfig {
    SimConfig {
        send_for: Duration::from_micros(300),
        forged_beacons: beacons,
        ..SimConfig::default()
    }
}

fn checked(c: &SimConfig) -> SimReport {
    common::run_clean(c)
}

/// Best effort: the forged beacon on a process's uplink is refused by its ToR, and no message
/// is dropped as late because of it.
#[test]
fn a_forged_beacon_on_an_uplink_is_refused_and_nothing_arrives_late() {
    let r = checked(&config(vec![forged(3, true)]));
    assert_eq!(r.implausible_refused, 1);
    assert_eq!(r.late_drops, 0);
    assert_eq!(r.send_failures, 0);
}

/// The same beacon with the bound lifted to the wire's limit: the attack of issue 42. The
/// test above can fail: this is what it would see.
#[test]
fn without_the_bound_the_forged_beacon_makes_messages_late() {
    let mut c = config(vec![forged(3, true)]);
    c.time_ahead_max = Duration::from_nanos(1 << 47);
    let r = run(&c, &mut |_, _| {}).unwrap();
    assert_eq!(r.implausible_refused, 0);
    assert!(r.late_drops > 0, "{} late", r.late_drops);
}

/// A forged beacon on the ToR's link down to a process is refused by the endpoint.
#[test]
fn a_forged_beacon_to_a_process_is_refused_by_its_endpoint() {
    let r = checked(&config(vec![forged(5, false)]));
    assert_eq!(r.implausible_refused, 1);
    assert_eq!(r.late_drops, 0);
}

/// Reliable, with the controller: forged commit barriers too, on an uplink and a downlink.
/// Every scattering is delivered by all its receivers or none, the controller heard both
/// reports, and nobody is declared failed.
#[test]
fn reliable_scatterings_stay_atomic_and_the_controller_hears_of_the_forgery() {
    let mut c = config(vec![forged(3, true), forged(9, false)]);
    c.reliable = true;
    c.controller = true;
    let r = checked(&c);
    assert_eq!(r.implausible_refused, 2);
    let f = r.failure.as_ref().expect("the controller ran");
    assert!(f.failed_processes.is_empty(), "{f:?}");
    assert_eq!(f.implausible_reports, 2);
    assert_eq!(f.stalled_processes, 0);
}
