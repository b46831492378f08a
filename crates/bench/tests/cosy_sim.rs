//! cosy in the simulator, on the paper's testbed shape (8 hosts, 10 Gbps): every message is
//! flagged within the bound promised at submission (Theorem 3.5), and the invariants the
//! bound rests on hold (at most K reservations per link, Lemma 3.3's queue bound).

use onepipe_bench::cosy::CosyFabric;
use onepipe_bench::cosy::report::CosyReport;
use onepipe_bench::cosy::sim::{CosySimConfig, run};
use onepipe_wire::Duration;

fn testbed(k: u8, load: f64) -> CosySimConfig {
    CosySimConfig {
        fabric: CosyFabric::testbed(10_000_000_000),
        k,
        load,
        duration: Duration::from_millis(20),
        ..CosySimConfig::default()
    }
}

/// Every message flagged, within delta, no failures or timeouts without a fault, every
/// invariant held, nothing left reserved.
fn assert_clean(r: &CosyReport) {
    assert_eq!(
        r.completed + r.rejected + r.failed,
        r.submitted,
        "one flag per message"
    );
    assert_eq!(r.in_flight, 0);
    assert!(r.checks.bound_held, "{:?}", r.bound);
    assert!(r.checks.link_capacity, "{:?}", r.links);
    assert_eq!(r.checks.queue_bound, Some(true), "{:?}", r.queue);
    assert_eq!((r.failed, r.timed_out), (0, 0));
    assert_eq!(r.host_counters.failures_sent, 0);
    assert_eq!(r.switch_counters.still_reserved, 0);
    assert_eq!(r.host_counters.wrong_deliveries, 0);
    assert_eq!(
        r.host_counters.delivered, r.completed,
        "what completed was delivered"
    );
}

#[test]
fn at_half_load_with_k_4_every_message_is_flagged_within_its_bound() {
    let r = run(&testbed(4, 0.5)).unwrap();
    assert!(r.submitted > 500, "{}", r.submitted);
    assert!(r.completed > r.submitted / 2);
    assert_clean(&r);
}

/// Found in a run: with K = 1 Lemma 3.3 allows no queueing, but control packets served before
/// data still delay it, and receivers declared failures for data a few hundred ns late.
#[test]
fn with_one_virtual_link_control_packets_do_not_make_data_late() {
    let r = run(&testbed(1, 0.3)).unwrap();
    assert!(r.completed > 100);
    assert_clean(&r);
}

/// A host that crashes mid-run: its own messages go unflagged (no sender left), every other
/// sender still gets its flags within delta, and the switches clear its reservations.
#[test]
fn a_crashed_host_breaks_no_other_hosts_bound() {
    let mut c = testbed(4, 0.4);
    c.fail = Some((3, Duration::from_millis(7)));
    let r = run(&c).unwrap();
    assert!(r.checks.bound_held, "{:?}", r.bound);
    assert!(r.checks.link_capacity);
    assert_eq!(r.in_flight, 0);
    assert!(
        r.failed + r.timed_out > 0,
        "messages to or from the crashed host ended badly"
    );
    assert_eq!(r.switch_counters.still_reserved, 0, "cleared by delta_cosy");
}

/// A spine that fails mid-run: messages through it end in failures or timeouts (their data,
/// rsvp or complete stopped coming), every flag is still within delta, and the other switches
/// clear what the failed paths left reserved by delta_cosy (paper 4).
#[test]
fn a_failed_spine_leaves_nothing_reserved_past_delta_cosy() {
    let mut c = testbed(4, 0.4);
    c.switch_fail = Some((4, Duration::from_millis(7)));
    let r = run(&c).unwrap();
    assert!(r.checks.bound_held, "{:?}", r.bound);
    assert!(r.checks.link_capacity);
    assert_eq!(r.in_flight, 0);
    assert!(
        r.failed + r.timed_out > 0,
        "some messages crossed the spine when it failed"
    );
    assert!(
        r.switch_counters.expired > 0,
        "cleanup cleared what the failure stranded"
    );
    // Nothing routes around the dead spine (cosy has no control plane here): requests and
    // rsvps hashed through it are lost and their senders reject at delta, on time.
    assert!(r.timed_out > 0);
    let live_reserved = r.switch_counters.still_reserved;
    assert!(
        live_reserved <= 8,
        "only the failed spine's own table, frozen: {live_reserved}"
    );
}

/// Several slots per message (paper 3.3): messages go faster than B/K when slots are free, and
/// every invariant still holds (rates on a link never above B, queues within Lemma 3.3's bound).
#[test]
fn with_several_slots_per_message_every_invariant_holds() {
    let mut c = testbed(4, 0.5);
    c.slots_max = Some(4);
    let r = run(&c).unwrap();
    assert_clean(&r);
    let one = run(&testbed(4, 0.5)).unwrap();
    assert!(
        r.slowdown.p50 < one.slowdown.p50,
        "faster than one slot each: {} vs {}",
        r.slowdown.p50,
        one.slowdown.p50
    );
}
