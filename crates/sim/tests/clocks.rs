//! Issue 42: clock steps and large skew. A host's clock that steps (as NTP steps a clock too far
//! off to slew) never makes it stamp a message below a barrier it sent, nor its barrier go back
//! (docs/ordering.md, "Clock steps"); a clock stepped far ahead only delays that host's
//! messages until the others' barriers pass them. Skew up to the bound on time is taken; a
//! configuration whose clocks could drift further apart than the bound is refused before it
//! runs, naming the flag to raise, rather than running into refusals that look like violations.

use onepipe_sim::{ClockStep, SimConfig, SimError, SimReport, run};
use onepipe_wire::Duration;

mod common;

fn step(process: u32, at_us: u64, delta_us: i64) -> ClockStep {
    ClockStep {
        process,
        at: Duration::from_micros(at_us),
        delta_ns: delta_us * 1_000,
    }
}

fn config(steps: Vec<ClockStep>) -> SimConfig {
    SimConfig {
        send_for: Duration::from_micros(300),
        drain: Duration::from_micros(400),
        // Sparse enough that beacons, not data, keep each link alive.
        gap: Duration::from_micros(100),
        clock_steps: steps,
        ..SimConfig::default()
    }
}

fn checked(c: &SimConfig) -> SimReport {
    let r = common::run_clean(c);
    assert_eq!(r.implausible_refused, 0, "a correct host's time was refused");
    r
}

/// A step back longer than the dead-link timeout (10 beacon intervals, 30 us): the host's
/// clock holds until it catches up, its timestamps and barriers never go back, and it keeps
/// beaconing, so its ToR never takes it for dead and nothing arrives late.
#[test]
fn a_step_back_holds_the_clock_and_the_host_keeps_beaconing() {
    let r = checked(&config(vec![step(3, 100, -80)]));
    assert_eq!(r.late_drops, 0);
    assert_eq!(r.send_failures, 0);
}

/// A step forward: the host's messages wait until the others' barriers pass them (1Pipe's
/// price of a fast clock is latency, never order), and are delivered.
#[test]
fn a_step_forward_delays_the_host_and_reorders_nothing() {
    let plain = checked(&config(Vec::new()));
    let r = checked(&config(vec![step(3, 100, 80)]));
    assert_eq!(r.late_drops, 0);
    assert!(
        r.latency_us.max >= plain.latency_us.max + 50.0,
        "{} us, {} us without the step",
        r.latency_us.max,
        plain.latency_us.max
    );
}

/// Reliable, with the controller, steps both ways on several hosts: every scattering
/// all-or-nothing and nobody declared failed.
#[test]
fn reliable_steps_both_ways_keep_atomicity_and_nobody_is_declared_failed() {
    let mut c = config(vec![step(3, 60, 40), step(7, 80, -60), step(3, 150, -40)]);
    c.reliable = true;
    c.controller = true;
    c.drain = Duration::from_micros(2_000);
    let r = checked(&c);
    let f = r.failure.as_ref().expect("the controller ran");
    assert!(f.failed_processes.is_empty(), "{f:?}");
}

/// The same steps run twice give the same trace, and a step changes it.
#[test]
fn a_step_is_part_of_the_trace() {
    let c = config(vec![step(3, 100, -20)]);
    let a = checked(&c);
    assert_eq!(a.trace_hash, checked(&c).trace_hash);
    assert_ne!(a.trace_hash, checked(&config(Vec::new())).trace_hash);
}

/// Skew and steps up to the bound exactly: clocks as far apart as `time_ahead_max` allows, and
/// nothing of a correct host is refused.
#[test]
fn skew_and_steps_up_to_the_bound_are_taken() {
    let mut c = config(vec![step(3, 100, 30), step(5, 120, -10)]);
    c.skew_mean = Duration::from_micros(10);
    c.drift_ppb_max = 100_000;
    c.drain = Duration::from_micros(600);
    c.time_ahead_max = Duration::from_nanos(c.clock_spread_ns_max());
    checked(&c);
}

/// One nanosecond below what the clocks may need, the run is refused before it starts, and the
/// error names the bound, the skew and the flag to raise.
#[test]
fn skew_past_the_bound_is_refused_naming_the_flag_to_raise() {
    let mut c = config(vec![step(3, 100, 30)]);
    c.skew_mean = Duration::from_micros(10);
    c.time_ahead_max = Duration::from_nanos(c.clock_spread_ns_max() - 1);
    let err = match run(&c, &mut |_, _| {}) {
        Err(SimError::Config(e)) => e,
        other => panic!("not refused: {:?}", other.map(|r| r.violations)),
    };
    assert_eq!(err.field, "time_ahead_max");
    let text = err.to_string();
    for part in ["skew_mean", "clock_steps", "--time-ahead-max-ms", "implausible"] {
        assert!(text.contains(part), "{text}");
    }
}

/// Past the wire's limit (half the 48-bit clock's range, where a time ahead cannot be told from
/// one behind) no bound helps: the error says to lower the skew instead.
#[test]
fn skew_past_the_wires_limit_is_refused() {
    let mut c = config(Vec::new());
    // Offsets within 2 x 10 hours of the shared clock: two clocks 40 hours apart, past the
    // limit of about 39 hours.
    c.skew_mean = Duration::from_secs(36_000);
    c.time_ahead_max = Duration::from_nanos(1 << 47);
    let Err(SimError::Config(err)) = run(&c, &mut |_, _| {}) else {
        panic!("not refused");
    };
    assert!(err.to_string().contains("wire's limit"), "{err}");
    c.time_ahead_max = Duration::from_nanos((1 << 47) + 1);
    c.skew_mean = Duration::ZERO;
    let Err(SimError::Config(err)) = run(&c, &mut |_, _| {}) else {
        panic!("not refused");
    };
    assert_eq!(err.field, "time_ahead_max");
}

/// The flag's syntax round-trips, and malformed steps are errors, not panics.
#[test]
fn clock_steps_parse_and_print() {
    let s: ClockStep = "host:3@200us-50us".parse().unwrap();
    assert_eq!(s, step(3, 200, -50));
    assert_eq!(s.to_string().parse::<ClockStep>().unwrap(), s);
    let f: ClockStep = "host:0@1ms+140737s".parse().unwrap();
    assert_eq!(f.delta_ns, 140_737_000_000_000, "up to the wire's limit");
    for bad in [
        "host:3@200us",
        "switch:a@1us+1us",
        "host:x@1us+1us",
        "host:3@1us+-1us",
        "host:3@1us+1",
        "host:3@1us+140738s",
    ] {
        assert!(bad.parse::<ClockStep>().is_err(), "{bad}");
    }
}
