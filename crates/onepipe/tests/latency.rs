//! Ordering delay at light load, in virtual time. Paper 4.2: with beacons at synchronized
//! times "the expected delay overhead is only half of the beacon interval", plus clock skew.
//! Deterministic: the bound is about the beacon schedule and how fast a raised barrier crosses
//! the fabric, not about this machine's speed.

mod common;

use common::{Net, NetConfig};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;

const INTERVAL_NS: u64 = 50_000;
const LINK_DELAY_NS: u64 = 1_000;
/// Host, ToR, spine, core, spine, ToR, host.
const PATH_NS: u64 = 6 * LINK_DELAY_NS;
const SKEW_NS: i64 = 300;

/// Sends one broadcast at a time, from varying senders at varying phases of the beacon
/// interval, and returns for each how long after the send its last receiver delivered it.
fn broadcast_delays_ns(probes: u32) -> Vec<u64> {
    let processes = 32;
    let cfg = NetConfig {
        beacon_interval: Duration::from_nanos(INTERVAL_NS),
        step: Duration::from_nanos(100),
        delays: vec![Duration::from_nanos(LINK_DELAY_NS)],
        offsets_ns: (0..processes)
            .map(|p| (p * 37 % 21 - 10) * SKEW_NS / 10)
            .collect(),
        ..NetConfig::default()
    };
    let mut net = Net::new(Topology::paper_testbed(), 1, &cfg);
    let n = net.endpoints.len() as u32;
    net.run_for(Duration::from_nanos(INTERVAL_NS * 20));
    let mut out = Vec::new();
    for probe in 0..probes {
        // Phases spread over the interval by a step co-prime to it.
        let phase = 7_300 * probe as u64 % INTERVAL_NS;
        net.run_for(Duration::from_nanos(INTERVAL_NS * 3 + phase));
        let before: Vec<usize> = (0..n).map(|p| net.delivered(p).len()).collect();
        let scatter: Vec<(u32, &[u8])> = (0..n).map(|d| (d, &b"probe"[..])).collect();
        let sent_at = net.now;
        net.send(probe * 7 % n, &scatter).unwrap();
        while (0..n).any(|p| net.delivered(p).len() == before[p as usize]) {
            net.tick();
            assert!(
                net.now - sent_at < Duration::from_nanos(INTERVAL_NS * 50),
                "probe {probe} stuck"
            );
        }
        out.push((net.now - sent_at).as_nanos());
    }
    out.sort_unstable();
    out
}

#[test]
fn light_load_delay_is_half_an_interval_plus_skew_plus_the_path() {
    let delays = broadcast_delays_ns(64);
    let (median, max) = (delays[delays.len() / 2], delays[delays.len() - 1]);
    // Slack for the 100 ns simulation step at each hop and the skew spread.
    let slack = 2 * SKEW_NS as u64 + 12 * 100 + 1_000;
    assert!(
        median <= INTERVAL_NS / 2 + PATH_NS + slack,
        "median {median} ns: a raised barrier should cross the fabric in one wave ({delays:?})"
    );
    assert!(
        max <= INTERVAL_NS + PATH_NS + slack,
        "max {max} ns: no send should wait more than one beacon interval ({delays:?})"
    );
}
