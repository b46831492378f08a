//! Every baseline in virtual time (the simulator's engine): 100 Gbit/s links, 500 ns per hop,
//! queues that never fill, infinitely fast hosts and switches; the checker, one delivered
//! sequence, open-loop pacing, runs cut short, and the shapes of paper Fig. 8 that follow from
//! the protocols alone.

mod common;

use common::{assert_sound, deliveries};
use onepipe_baselines::{BaselineConfig, BaselineNode, Kind, Schedule, build, collect_logs, totals};
use onepipe_check::check_all;
use onepipe_fabric::{Topology, Wiring};
use onepipe_sim::{Budget, Engine, Model, Role};
use onepipe_wire::{Duration, Instant};

const GBPS_100: u64 = 100_000_000_000;
const SEND: Duration = Duration::from_micros(100);
/// Every message in flight arrives well within this after sending stops.
const DRAIN: Duration = Duration::from_millis(1);

struct Run {
    config: BaselineConfig,
    nodes: Vec<BaselineNode>,
}

impl Run {
    /// Delivered messages per second over the whole system, during the sending window.
    fn throughput(&self) -> f64 {
        let s = &self.config.schedule;
        let secs = (s.send_until - s.send_from).as_nanos() as f64 / 1e9;
        totals(&self.nodes).delivered_in_window as f64 / secs
    }

    fn p50_us(&self) -> f64 {
        totals(&self.nodes).latency_ns.value_at_quantile(0.5) as f64 / 1e3
    }
}

fn run(wiring: &Wiring, kind: Kind, drain: Duration, configure: impl FnOnce(&mut BaselineConfig)) -> Run {
    let start = Instant::from_nanos(1_000_000);
    let send_from = start + Duration::from_micros(1);
    let mut config = BaselineConfig::new(kind, Schedule::saturated(send_from, send_from + SEND));
    configure(&mut config);
    let nodes = build(wiring, &config, start).unwrap();
    let links = wiring.directed_links(Duration::from_nanos(500));
    let roles = (0..nodes.len()).map(|n| match n < wiring.switch_count() {
        true => Role::Switch,
        false => Role::Host,
    });
    let model = Model {
        link_bits_per_s: GBPS_100,
        fabric_link_bits_per_s: GBPS_100,
        // A lossless fabric: no queue fills, none marks.
        queue_capacity_bytes: usize::MAX,
        ecn_threshold_bytes: usize::MAX,
        switch_delay: Duration::ZERO,
        ..Model::default()
    };
    let nodes = nodes.into_iter().zip(roles).collect();
    let mut sim = Engine::new(nodes, &links, model, 1, start).unwrap();
    let budget = Budget {
        events_max: 200_000_000,
        ..Budget::default()
    };
    sim.run_until(config.schedule.send_until + drain, &budget)
        .unwrap();
    Run {
        config,
        nodes: sim.into_nodes(),
    }
}

fn testbed() -> Wiring {
    Wiring::new(Topology::paper_testbed(), 1).unwrap()
}

/// 8 processes over the same three layers as the testbed (2 pods, 2 ToRs each, 2 hosts each).
fn small() -> Wiring {
    Wiring::new(Topology::three_layer(2, 2, 2, 2, 2).unwrap(), 1).unwrap()
}

#[test]
fn every_baseline_is_sound_on_the_testbed() {
    let w = testbed();
    for kind in Kind::ALL {
        let r = run(&w, kind, DRAIN, |c| c.window = 4);
        assert_sound(&r.config, &r.nodes);
    }
}

#[test]
fn paced_sending_follows_the_schedule() {
    let w = small();
    for kind in Kind::ALL {
        let r = run(&w, kind, DRAIN, |c| {
            c.schedule.send_gap = Duration::from_micros(2);
            c.schedule.seed = 7;
        });
        assert_sound(&r.config, &r.nodes);
        // 100 us at one per 2 us on average: about 50 per process, 400 in all.
        let broadcasts = totals(&r.nodes).broadcasts;
        assert!(
            (300..500).contains(&broadcasts),
            "{kind}: {broadcasts} broadcasts"
        );
    }
}

/// A run stopped while messages are in flight: sequencer senders have not learned the numbers
/// of their last messages, yet `collect_logs` gives logs that pass every check.
#[test]
fn logs_of_a_run_cut_short_pass_the_checker() {
    let w = small();
    for kind in Kind::ALL {
        let r = run(&w, kind, Duration::ZERO, |_| {});
        let logs = collect_logs(&r.nodes);
        let report = check_all(&logs);
        assert!(report.ok(), "{kind}: {report}");
        let lengths: Vec<usize> = logs.iter().map(|l| deliveries(l).len()).collect();
        assert!(lengths.iter().all(|&n| n > 0), "{kind}: {lengths:?}");
        if matches!(kind, Kind::HostSequencer | Kind::SwitchSequencer) {
            let owed: usize = r
                .nodes
                .iter()
                .filter_map(BaselineNode::host_stats)
                .map(|h| h.unconfirmed.len())
                .sum();
            assert!(owed > 0, "{kind}: the cut should leave numbers unlearned");
        }
    }
}

/// Paper Fig. 8 with the protocols' own limits (no host CPU cost here): a host sequencer's one
/// link and a token's one sender at a time cap the whole system at one link's frame rate,
/// whatever N is, far below a switch sequencer; a token's latency grows with the ring.
#[test]
fn throughput_shapes_from_8_to_32_processes() {
    let (w8, w32) = (small(), testbed());
    let at = |kind| (run(&w8, kind, DRAIN, |_| {}), run(&w32, kind, DRAIN, |_| {}));
    let (host8, host32) = at(Kind::HostSequencer);
    let (switch8, switch32) = at(Kind::SwitchSequencer);
    let (token8, token32) = at(Kind::Token);
    // Frames of 40 + 64 bytes on a 100 Gbit/s link; each message reaches N - 1 others by
    // frame and its sender (or sequencer) without one.
    let link_frames_per_s = 100e9 / 8.0 / 104.0;
    for (r, n) in [(&host8, 8.0), (&host32, 32.0), (&token8, 8.0), (&token32, 32.0)] {
        let bound = link_frames_per_s * n / (n - 1.0);
        assert!(
            r.throughput() <= 1.01 * bound,
            "{}: {:.1} M msg/s is above one link's {:.1}",
            r.config.kind,
            r.throughput() / 1e6,
            bound / 1e6
        );
    }
    assert!(
        host32.throughput() > 0.8 * link_frames_per_s,
        "the host sequencer saturates its link"
    );
    assert!(switch32.throughput() > 3.0 * host32.throughput());
    assert!(switch8.throughput() > 2.0 * host8.throughput());
    assert!(
        token32.p50_us() > 3.0 * token8.p50_us(),
        "token latency grows with N"
    );
}

/// Capacities far below what the windows need: sequencers drop requests (counted), senders
/// retry later instead of spinning, and what is delivered is still in one total order.
#[test]
fn undersized_buffers_drop_and_count_but_keep_order() {
    let w = small();
    for kind in [Kind::HostSequencer, Kind::SwitchSequencer] {
        let r = run(&w, kind, DRAIN, |c| c.reorder_capacity = Some(8));
        let report = check_all(&collect_logs(&r.nodes));
        assert!(report.ok(), "{kind}: {report}");
        let t = totals(&r.nodes);
        assert!(t.dropped > 0, "{kind}: nothing dropped");
        assert!(t.delivered > 0, "{kind}");
    }
}
