//! End-to-end ordering over random fabrics in virtual time: the checker must pass (paper
//! sections 2.1 and 4: total order, FIFO, causality; no duplication or creation).

mod common;

use common::{Net, NetConfig};
use onepipe_check::{check_all, check_no_loss};
use onepipe_fabric::Topology;
use onepipe_wire::{Duration, Instant};
use proptest::prelude::*;

fn topology(kind: u8, size: usize) -> Topology {
    match kind % 4 {
        0 => Topology::single_switch(size.max(1)).unwrap(),
        1 => Topology::leaf_spine(2, 1 + size % 3, 1 + size % 4).unwrap(),
        2 => Topology::paper_testbed(),
        _ => Topology::three_layer(2, 2, 2, 1 + size % 2, 1 + size % 3).unwrap(),
    }
}

/// A seeded scenario on `base` (seed, skew and ECMP filled in here): random scatterings
/// (random receivers, sizes up to several fragments) from random senders, then a quiet period
/// so everything drains. Hosts visited rarely, a frame or two per visit, can still be sending
/// long after the last scattering was queued, so the quiet period starts once every send
/// queue is empty (the returned flag says whether they all emptied).
fn run(kind: u8, size: usize, seed: u64, skew_ns: u64, rounds: usize, base: NetConfig) -> (Net, bool) {
    let mut rng = onepipe_proto::hash::SplitMix::new(seed);
    let probe = topology(kind, size);
    let count = probe.hosts.len();
    let cfg = NetConfig {
        ecmp_seed: seed,
        offsets_ns: (0..count).map(|_| rng.symmetric(skew_ns)).collect(),
        ..base
    };
    let mut net = Net::new(probe, 1, &cfg);
    let n = count as u32;
    for _ in 0..rounds {
        for _ in 0..(rng.next_u64() % 4) {
            let (src, dsts, payload) = common::random_scattering(&mut rng, n);
            let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &payload[..])).collect();
            let _ = net.send(src, &scatter);
        }
        net.tick();
    }
    let sending = |net: &Net| {
        net.endpoints
            .iter()
            .any(|e| e.send_room_packets() < e.config().send_buffer_packets_max)
    };
    for _ in 0..100_000 {
        if !sending(&net) {
            break;
        }
        net.tick();
    }
    let drained = !sending(&net);
    net.run_for(Duration::from_micros(400));
    (net, drained)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random topologies, link delays, ECMP choices, skew and multi-packet messages: the
    /// checker passes, and with FIFO links nothing is lost or NAKed.
    #[test]
    fn random_fabrics_deliver_in_total_order(
        kind in 0u8..4,
        size in 1usize..6,
        seed in any::<u64>(),
        delays_ns in proptest::collection::vec(0u64..5_000, 1..8),
        skew_ns in 0u64..2_000,
    ) {
        let base = NetConfig {
            delays: delays_ns.into_iter().map(Duration::from_nanos).collect(),
            ..NetConfig::default()
        };
        let (net, _) = run(kind, size, seed, skew_ns, 150, base);
        let report = check_all(&net.logs);
        prop_assert!(report.ok(), "seed={seed}: {report}");
        let lost = check_no_loss(&net.logs);
        prop_assert!(lost.is_empty(), "seed={seed}: {} lost, first {}", lost.len(), lost[0]);
        prop_assert!(net.failures.iter().all(|f| f.is_empty()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Promise mode (docs/ordering.md, "Promises"): hosts visited at different rates, visits
    /// that end in the middle of a scattering, barriers promised ahead of the clock. The
    /// checker passes (causality included: a promise moves the next timestamps above it) and
    /// nothing is lost.
    #[test]
    fn promises_keep_total_order_and_causality(
        kind in 0u8..4,
        size in 1usize..6,
        seed in any::<u64>(),
        lead_ns in 0u64..40_000,
        visit_intervals in proptest::collection::vec(1u64..12, 1..6),
        budget in 1usize..12,
        skew_ns in 0u64..2_000,
    ) {
        let base = NetConfig {
            promise_lead: Some(Duration::from_nanos(lead_ns)),
            visit_intervals,
            visit_budget_frames: budget,
            ..NetConfig::default()
        };
        let (net, drained) = run(kind, size, seed, skew_ns, 150, base);
        prop_assert!(drained, "seed={seed}: send queues never drained");
        let report = check_all(&net.logs);
        prop_assert!(report.ok(), "seed={seed}: {report}");
        let lost = check_no_loss(&net.logs);
        prop_assert!(lost.is_empty(), "seed={seed}: {} lost, first {}", lost.len(), lost[0]);
        let promises: u64 = net.endpoints.iter().map(|e| e.counters().promises_sent).sum();
        prop_assert!(promises > 0, "seed={seed}: no promise was made");
        // Hosts' barriers never go down, promises or not.
        let regressions: u64 = net.switches.iter().map(|s| s.counters().barrier_regressions).sum();
        prop_assert_eq!(regressions, 0, "seed={}", seed);
    }
}

/// Everyone broadcasts to everyone on the paper testbed: all receivers deliver the same
/// sequence (paper 2.1: "each process delivers messages ... in non-decreasing timestamp order",
/// so receivers of the same messages agree).
#[test]
fn broadcast_receivers_agree_on_one_sequence() {
    let mut net = Net::new(Topology::paper_testbed(), 1, &NetConfig::default());
    for round in 0..20 {
        for src in 0..32u32 {
            if (src + round) % 3 == 0 {
                let scatter: Vec<(u32, &[u8])> = (0..32).map(|d| (d, &b"hello"[..])).collect();
                net.send(src, &scatter).unwrap();
            }
        }
        net.tick();
    }
    net.run_for(Duration::from_micros(100));
    let first = net.delivered(0);
    assert!(first.len() > 200, "only {} delivered", first.len());
    for p in 1..32 {
        assert_eq!(net.delivered(p), first, "process {p} disagrees");
    }
    assert!(check_all(&net.logs).ok());
}

/// Paper 6.1: timestamps are 48 bits on the wire; a run across the wrap stays ordered.
#[test]
fn ordering_holds_across_the_48_bit_wrap() {
    let cfg = NetConfig {
        start: Instant::from_nanos(
            std::env::var("WRAPSTART")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or((1 << 48) - 20_000),
        ),
        ..NetConfig::default()
    };
    let mut net = Net::new(Topology::leaf_spine(2, 2, 2).unwrap(), 2, &cfg);
    for i in 0..100u32 {
        let scatter: Vec<(u32, &[u8])> = (0..8).map(|d| (d, &b"x"[..])).collect();
        net.send(i % 8, &scatter).unwrap();
        net.tick();
    }
    net.run_for(Duration::from_micros(100));
    assert!(net.now.as_nanos() > 1 << 48, "the run must cross the wrap");
    assert!(check_all(&net.logs).ok());
    let lost = check_no_loss(&net.logs);
    let c: Vec<_> = net.endpoints.iter().map(|e| e.counters().clone()).collect();
    assert!(
        lost.is_empty(),
        "{} lost, first {}; counters {:?}",
        lost.len(),
        lost[0],
        c[0]
    );
    assert_eq!(net.delivered(0).len(), 100);
}

/// Paper 4.1: "If a link or switch is not strictly FIFO, out-of-order messages will not violate
/// correctness": late packets are dropped and NAKed, and their senders hear of it.
#[test]
fn non_fifo_links_cause_naks_not_disorder() {
    let mut net = Net::new(Topology::paper_testbed(), 1, &NetConfig::default());
    for l in net.links.iter_mut() {
        l.reorder = true;
    }
    // Everyone sends all the time, so barriers stay fresh and held-back packets fall behind them.
    for _ in 0..100 {
        for src in 0..32 {
            let scatter: Vec<(u32, &[u8])> = (0..32).map(|d| (d, &b"m"[..])).collect();
            net.send(src, &scatter).unwrap();
        }
        net.tick();
    }
    net.run_for(Duration::from_micros(200));
    let report = check_all(&net.logs);
    assert!(report.ok(), "{report}");
    let naks: usize = net
        .endpoints
        .iter()
        .map(|e| e.counters().naks_sent as usize)
        .sum();
    let failures: usize = net.failures.iter().map(|f| f.len()).sum();
    assert!(naks > 0, "reordering links should make some packets late");
    assert_eq!(failures, naks, "every NAK reaches its sender's failure callback");
}
