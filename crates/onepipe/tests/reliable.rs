//! Reliable 1Pipe end to end in virtual time (paper 5.1): through lossy, duplicating,
//! jittery links every message is delivered exactly once by its receiver, in the one causal
//! total order, and senders report no failures.

mod common;

use common::{Net, NetConfig};
use onepipe_check::{check_all, check_no_loss};
use onepipe_fabric::Topology;
use onepipe_proto::reliable::ReliableConfig;
use onepipe_wire::Duration;
use proptest::prelude::*;

fn topology(kind: u8, size: usize) -> Topology {
    match kind % 3 {
        0 => Topology::single_switch(size.max(2)).unwrap(),
        1 => Topology::leaf_spine(2, 1 + size % 3, 1 + size % 4).unwrap(),
        _ => Topology::paper_testbed(),
    }
}

/// Retransmission timers scaled to the test net's microsecond links.
fn fast_timers() -> ReliableConfig {
    ReliableConfig {
        rto_initial: Duration::from_micros(100),
        rto_min: Duration::from_micros(50),
        rto_max: Duration::from_millis(2),
        retries_max: 40,
        give_up_after: Duration::from_millis(50),
        ..ReliableConfig::default()
    }
}

struct Faults {
    loss: f64,
    dup: f64,
    jitter_ns: u64,
    skew_ns: u64,
}

/// Random reliable scatterings from random senders; then runs until every sender has
/// everything acknowledged and every receiver has delivered what the commit barrier allows.
fn run(kind: u8, size: usize, seed: u64, faults: &Faults, rounds: usize, reliable: ReliableConfig) -> Net {
    let mut rng = onepipe_proto::hash::SplitMix::new(seed);
    let probe = topology(kind, size);
    let count = probe.hosts.len();
    let cfg = NetConfig {
        ecmp_seed: seed,
        seed,
        offsets_ns: (0..count).map(|_| rng.symmetric(faults.skew_ns)).collect(),
        loss: faults.loss,
        dup: faults.dup,
        jitter: Duration::from_nanos(faults.jitter_ns),
        reliable,
        ..NetConfig::default()
    };
    let mut net = Net::new(probe, 1, &cfg);
    let n = count as u32;
    for _ in 0..rounds {
        for _ in 0..(rng.next_u64() % 3) {
            let (src, dsts, payload) = common::random_scattering(&mut rng, n);
            let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &payload[..])).collect();
            net.send_reliable(src, &scatter)
                .expect("buffer has room in these runs");
        }
        net.tick();
    }
    for _ in 0..2_000 {
        net.run_for(Duration::from_micros(50));
        if net.endpoints.iter().all(|e| e.reliable_sender().is_idle()) {
            break;
        }
    }
    // Everything is acknowledged; one more stretch lets commit barriers reach everyone.
    net.run_for(Duration::from_micros(100));
    net
}

fn assert_exactly_once_in_order(net: &Net, seed: u64) -> Result<(), TestCaseError> {
    let report = check_all(&net.logs);
    prop_assert!(report.ok(), "seed={seed}: {report}");
    let lost = check_no_loss(&net.logs);
    prop_assert!(
        lost.is_empty(),
        "seed={seed}: {} lost, first {}",
        lost.len(),
        lost[0]
    );
    let failures: usize = net.failures.iter().map(Vec::len).sum();
    prop_assert_eq!(failures, 0, "seed={}", seed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Random loss (up to 5% per link, about 26% over the testbed's six hops), duplication
    /// (up to 10% per link), jitter and skew: zero ordering violations and no loss.
    #[test]
    fn lossy_fabrics_deliver_everything_once_in_total_order(
        kind in 0u8..3,
        size in 1usize..6,
        seed in any::<u64>(),
        loss in 0.0f64..0.05,
        dup in 0.0f64..0.1,
        jitter_ns in 0u64..3_000,
        skew_ns in 0u64..2_000,
    ) {
        let faults = Faults { loss, dup, jitter_ns, skew_ns };
        let net = run(kind, size, seed, &faults, 120, fast_timers());
        assert_exactly_once_in_order(&net, seed)?;
        let retransmissions: u64 =
            net.endpoints.iter().map(|e| e.reliable_sender().counters().retransmissions).sum();
        let sent: usize = net.logs.iter().map(|l| l.events.len()).sum();
        prop_assert!(loss < 0.01 || sent == 0 || retransmissions > 0, "seed={seed}: loss without retransmission");
    }
}

/// Without faults the reliable service needs no retransmission at all.
#[test]
fn clean_links_need_no_retransmission() {
    let faults = Faults {
        loss: 0.0,
        dup: 0.0,
        jitter_ns: 0,
        skew_ns: 300,
    };
    let net = run(2, 0, 7, &faults, 200, fast_timers());
    assert_exactly_once_in_order(&net, 7).unwrap();
    for e in &net.endpoints {
        assert_eq!(e.reliable_sender().counters().retransmissions, 0);
    }
    let delivered: usize = (0..32).map(|p| net.delivered(p).len()).sum();
    assert!(delivered > 1_000, "only {delivered} delivered");
}
