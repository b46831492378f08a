//! Paper Fig. 12 (section 7.2, "queuing delay caused by background traffic can also increase
//! 1Pipe latency"): DCTCP flows between hosts share queues with 1Pipe's messages and beacons.

use onepipe_sim::fig12::{Point, config};
use onepipe_sim::figures::Service;
use onepipe_sim::{SimReport, run};

fn point(service: Service, flows_per_host: u32, oversubscription: f64) -> SimReport {
    let c = config(
        16,
        service,
        Point {
            flows_per_host,
            oversubscription,
        },
    )
    .unwrap();
    let r = run(&c, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "seed={} {:?}", c.seed, r.examples);
    r
}

/// Queues the flows hold near the ECN threshold delay 1Pipe's messages and, through its
/// beacons, its barriers: best effort and reliable are slower with background flows, and the
/// flows really carry traffic and get marked.
#[test]
fn background_flows_inflate_best_effort_and_reliable_latency() {
    for service in [Service::BestEffort, Service::Reliable] {
        let idle = point(service, 0, 1.0);
        let busy = point(service, 4, 1.0);
        assert!(idle.background.is_none());
        let bg = busy.background.as_ref().unwrap();
        assert!(bg.goodput_gbps_per_host > 30.0, "{bg:?}");
        assert!(bg.marked_fraction > 0.0 && busy.engine.ecn_marked > 0, "{bg:?}");
        let (a, b) = (idle.latency_us.mean, busy.latency_us.mean);
        eprintln!(
            "{}: {a:.2} us idle, {b:.2} us with 4 flows per host",
            service.label()
        );
        assert!(
            b > a + 2.0,
            "{}: {a} us idle, {b} us with background",
            service.label()
        );
        assert!(busy.barrier_lag_us.mean > idle.barrier_lag_us.mean);
    }
}

/// Panel (b): with the same flows, slower uplinks hold the same bytes of queue for longer.
#[test]
fn oversubscribed_uplinks_add_latency() {
    let flat = point(Service::BestEffort, 2, 1.0);
    let over = point(Service::BestEffort, 2, 8.0);
    let (a, b) = (flat.latency_us.mean, over.latency_us.mean);
    eprintln!("best effort with 2 flows per host: {a:.2} us at 1:1, {b:.2} us at 8:1");
    assert!(b > a + 2.0, "{a} us at 1:1, {b} us at 8:1");
}

/// One seed, one trace, with background flows too.
#[test]
fn a_run_with_background_flows_replays_exactly() {
    let c = config(
        16,
        Service::BestEffort,
        Point {
            flows_per_host: 2,
            oversubscription: 2.0,
        },
    )
    .unwrap();
    let a = run(&c, &mut |_, _| {}).unwrap();
    let b = run(&c, &mut |_, _| {}).unwrap();
    assert_eq!(a.trace_hash, b.trace_hash);
}
