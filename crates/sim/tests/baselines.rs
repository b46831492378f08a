//! The Fig. 8 baselines in the simulator: every kind delivers in one total order, and the
//! shapes the paper reports show up (a host sequencer saturates, a token passes one sender at
//! a time).

use onepipe_baselines::Kind;
use onepipe_sim::SimConfig;
use onepipe_sim::baseline::run_baseline;
use onepipe_sim::figures::paper_placement;
use onepipe_sim::traffic::Pattern;
use onepipe_wire::Duration;

fn config(processes: u32) -> SimConfig {
    let (topology, processes_per_host) = paper_placement(processes);
    SimConfig {
        topology,
        processes_per_host,
        pattern: Pattern::Broadcast,
        gap: Duration::ZERO,
        send_for: Duration::from_micros(50),
        drain: Duration::from_micros(300),
        events_max: 20_000_000,
        ..SimConfig::default()
    }
}

#[test]
fn every_baseline_delivers_in_total_order() {
    for kind in Kind::ALL {
        for n in [2, 8, 32] {
            let r = run_baseline(&config(n), kind, 16).unwrap_or_else(|e| panic!("{kind} at {n}: {e}"));
            eprintln!(
                "{kind} {n}: {} delivered, {:.1} M msg/s, {} events",
                r.delivered,
                r.throughput_msgs_per_s / 1e6,
                r.events
            );
            assert!(r.delivered > 100, "{kind} at {n}: {r:?}");
            assert_eq!(r.violations, 0, "{kind} at {n}: {r:?}");
            assert_eq!(r.dropped, 0, "{kind} at {n}: {r:?}");
        }
    }
}
