//! DCTCP under incast (paper 6.1): with ECN marks the reliable senders keep the bottleneck
//! queue near the marking threshold; without them the queue fills to what the windows allow.

use onepipe_fabric::Topology;
use onepipe_proto::reliable::ReliableConfig;
use onepipe_sim::traffic::Pattern;
use onepipe_sim::{SimConfig, SimReport, run};
use onepipe_wire::Duration;

fn incast(ecn_threshold_bytes: usize) -> SimReport {
    let config = SimConfig {
        seed: 3,
        topology: Topology::single_switch(16).unwrap(),
        link_bits_per_s: 10_000_000_000,
        ecn_threshold_bytes,
        queue_capacity_bytes: 4 << 20,
        pattern: Pattern::Incast { target: 0 },
        // 16 senders offer 1.3x what the receiver's 10 Gbps port carries, so a queue builds
        // wherever the windows let it; the excess drains after sending stops.
        gap: Duration::from_micros(14),
        message_bytes_min: 1400,
        message_bytes_max: 1400,
        reliable: true,
        // Queueing delay at 10 Gbps reaches hundreds of microseconds: timers long enough that
        // only ECN, not spurious timeouts, shapes the windows.
        reliable_config: ReliableConfig {
            rto_initial: Duration::from_micros(500),
            rto_min: Duration::from_micros(500),
            rto_max: Duration::from_millis(5),
            ..onepipe_sim::config::microsecond_reliable()
        },
        send_for: Duration::from_micros(2_000),
        drain: Duration::from_micros(5_000),
        ..SimConfig::default()
    };
    let r = run(&config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    r
}

#[test]
fn ecn_marks_keep_the_incast_queue_near_the_threshold() {
    let threshold = 64 * 1024;
    let marked = incast(threshold);
    let unmarked = incast(usize::MAX);
    assert!(marked.engine.ecn_marked > 0);
    assert_eq!(unmarked.engine.ecn_marked, 0);
    // The port is the bottleneck either way: everything offered arrives.
    for r in [&marked, &unmarked] {
        assert_eq!(r.scatterings_refused, 0);
        assert_eq!(r.delivered, r.scatterings_sent);
    }
    let (m, u) = (marked.engine.peak_queue_bytes, unmarked.engine.peak_queue_bytes);
    assert!(m < 4 * threshold, "marked peak queue {m} bytes");
    assert!(u > 2 * m, "unmarked peak queue {u} bytes vs marked {m}");
    eprintln!(
        "peak queue: {m} bytes with ECN, {u} without; p50 {} vs {} us",
        marked.latency_us.p50, unmarked.latency_us.p50
    );
    assert!(marked.latency_us.p50 < unmarked.latency_us.p50);
}
