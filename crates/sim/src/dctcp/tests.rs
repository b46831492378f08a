//! DCTCP flows through the engine: two racks under one spine whose uplinks are slower than the
//! hosts' links, so that the leaf's uplink queue is the bottleneck (DCTCP paper, section 4).

use super::{DctcpConfig, Flows, Router, WithBackground};
use crate::engine::{Budget, Engine, Model, Role};
use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring, routing};
use onepipe_wire::{Duration, Instant};

/// A node with nothing of its own: only its background part speaks.
struct Idle;

impl Node for Idle {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        Route::Drop
    }
    fn handle_frame(&mut self, _now: Instant, _port: PortId, _frame: &mut [u8], _route: Route) {}
    fn poll_transmit(&mut self, _now: Instant, _port: PortId, _buf: &mut [u8]) -> Option<usize> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
}

impl Hints for Idle {
    fn wants_transmit(&self) -> bool {
        false
    }
}

const HOST_BITS_PER_S: u64 = 10_000_000_000;
const UPLINK_BITS_PER_S: u64 = 5_000_000_000;
const THRESHOLD_BYTES: usize = 30_000;

struct Setup {
    engine: Engine<WithBackground<Idle>>,
    switches: usize,
}

/// Two leaves of two hosts (processes 0, 1 and 2, 3) under one spine; `flows[i]` is
/// (source, destination, start in us).
fn setup(flows: &[(u32, u32, u64)], ecn_threshold_bytes: usize) -> Setup {
    let topology = Topology::leaf_spine(2, 1, 2).unwrap();
    let wiring = Wiring::new(topology, 1).unwrap();
    let config = DctcpConfig {
        flows_per_host: 1,
        window_frames_max: 256,
        ..DctcpConfig::default()
    };
    let mut nodes = Vec::new();
    for routes in routing::build(&wiring).unwrap() {
        nodes.push((WithBackground::switch(Idle, Router::new(routes, 7)), Role::Switch));
    }
    for p in 0..wiring.process_count() as u32 {
        let mut host = Flows::to(p, &[], &config, Instant::ZERO);
        for &(from, to, start_us) in flows {
            if from == p {
                host = Flows::to(p, &[to], &config, Instant::from_nanos(start_us * 1000));
            }
        }
        nodes.push((WithBackground::host(Idle, host), Role::Host));
    }
    let model = Model {
        link_bits_per_s: HOST_BITS_PER_S,
        fabric_link_bits_per_s: UPLINK_BITS_PER_S,
        ecn_threshold_bytes,
        queue_capacity_bytes: 4 << 20,
        ..Model::default()
    };
    let links = wiring.directed_links(Duration::from_micros(1));
    let engine = Engine::new(nodes, &links, model, 1, Instant::ZERO).unwrap();
    Setup {
        engine,
        switches: wiring.switch_count(),
    }
}

/// What the run showed between `from_us` and `until_us`.
struct Observed {
    /// Frames each process's flow had acknowledged in the window.
    acked: Vec<u64>,
    queue_bytes_mean: f64,
    queue_bytes_max: usize,
}

/// Runs to `until_us`, sampling the largest switch queue every microsecond from `from_us`.
fn observe(s: &mut Setup, from_us: u64, until_us: u64) -> Observed {
    let acked = |e: &Engine<WithBackground<Idle>>| -> Vec<u64> {
        (s.switches..e.node_count())
            .map(|i| e.node(i).flows().unwrap().sent().frames_acked)
            .collect()
    };
    let budget = Budget::default();
    s.engine
        .run_until(Instant::from_nanos(from_us * 1000), &budget)
        .unwrap();
    let before = acked(&s.engine);
    let (mut sum, mut max) = (0usize, 0usize);
    for t in from_us + 1..=until_us {
        s.engine
            .run_until(Instant::from_nanos(t * 1000), &budget)
            .unwrap();
        let q = (0..s.switches)
            .flat_map(|n| (0..8).map(move |p| (n, p)))
            .map(|(n, p)| s.engine.queue_bytes(n, p))
            .max()
            .unwrap();
        sum += q;
        max = max.max(q);
    }
    let after = acked(&s.engine);
    Observed {
        acked: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
        queue_bytes_mean: sum as f64 / (until_us - from_us) as f64,
        queue_bytes_max: max,
    }
}

fn gbps(frames: u64, us: u64) -> f64 {
    frames as f64 * 1500.0 * 8.0 / (us as f64 * 1e3)
}

/// One flow across the uplink grows its window past the initial ten frames (the round trip
/// holds more) and fills the 5 Gbps bottleneck.
#[test]
fn a_single_flow_fills_the_bottleneck() {
    let mut s = setup(&[(0, 2, 0)], THRESHOLD_BYTES);
    let o = observe(&mut s, 2_000, 4_000);
    let rate = gbps(o.acked[0], 2_000);
    eprintln!("{rate:.2} Gbps, queue mean {:.0} bytes", o.queue_bytes_mean);
    assert!(rate > 0.9 * 5.0 && rate <= 5.0 * 1.01, "{rate} Gbps");
}

/// Two flows from two hosts of one rack share the uplink: the later one catches up (DCTCP's
/// AIMD converges), and the queue stays near the marking threshold.
#[test]
fn two_flows_share_the_bottleneck_with_the_queue_near_the_threshold() {
    let mut s = setup(&[(0, 2, 0), (1, 3, 1_000)], THRESHOLD_BYTES);
    let o = observe(&mut s, 6_000, 10_000);
    let (a, b) = (gbps(o.acked[0], 4_000), gbps(o.acked[1], 4_000));
    eprintln!(
        "{a:.2} + {b:.2} Gbps, queue mean {:.0} max {} bytes",
        o.queue_bytes_mean, o.queue_bytes_max
    );
    assert!(a + b > 0.9 * 5.0, "{a} + {b} Gbps");
    assert!(a / b > 0.7 && b / a > 0.7, "unfair: {a} vs {b} Gbps");
    let k = THRESHOLD_BYTES as f64;
    assert!(
        o.queue_bytes_mean > 0.3 * k && o.queue_bytes_mean < 1.5 * k,
        "mean queue {} bytes, threshold {k}",
        o.queue_bytes_mean
    );
    assert!(
        o.queue_bytes_max < 3 * THRESHOLD_BYTES,
        "max queue {}",
        o.queue_bytes_max
    );
}

/// Without marks the same two flows fill the queue to their windows: what holds it near the
/// threshold above is DCTCP, not the windows' cap.
#[test]
fn without_marks_the_queue_grows_to_the_windows() {
    let mut s = setup(&[(0, 2, 0), (1, 3, 1_000)], usize::MAX);
    let o = observe(&mut s, 6_000, 10_000);
    eprintln!(
        "queue mean {:.0} max {} bytes",
        o.queue_bytes_mean, o.queue_bytes_max
    );
    assert!(
        o.queue_bytes_mean > 5.0 * THRESHOLD_BYTES as f64,
        "mean queue {} bytes",
        o.queue_bytes_mean
    );
}
