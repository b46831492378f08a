//! Issue 42 at the endpoint: barriers and timestamps implausibly far ahead of the host's clock,
//! and fragments no correct sender makes.

use super::*;
use crate::test_packets::{beacon, packet};

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

const NOW: u64 = 1_000_000_000;

fn data(msg_id: u64, ts: u64, barrier: u64, frag: (u16, u16), payload: &[u8]) -> Vec<u8> {
    packet(Opcode::Data, 0, 1, msg_id, ts, barrier, frag, payload)
}

/// A forged beacon would pin the receiver's barrier ahead of every sender, and a message
/// stamped far ahead would wait in the reorder buffer until the barrier got there. Both are
/// refused and counted, one report says so, and delivery goes on as if they never came.
#[test]
fn a_barrier_or_timestamp_implausibly_far_ahead_is_refused_counted_and_reported() {
    let mut ep = Endpoint::new(EndpointConfig::new(1, 2, 0), t(0));
    let max = ep.config().time_ahead_max.as_nanos();
    ep.handle_frame(t(NOW), &data(1, NOW, NOW, (0, 1), b"a")).unwrap();
    // At the bound: taken.
    ep.handle_frame(t(NOW), &data(2, NOW + max, NOW, (0, 1), b"b"))
        .unwrap();
    assert_eq!(ep.reorder().len(), 2);
    let forged = NOW + max + 1;
    ep.handle_frame(t(NOW), &beacon(forged)).unwrap();
    ep.handle_frame(t(NOW), &data(3, forged, NOW, (0, 1), b"f"))
        .unwrap();
    let mut prepare = packet(Opcode::Prepare, 0, 1, 4, forged, NOW, (0, 1), b"p");
    ep.handle_frame(t(NOW), &prepare).unwrap();
    assert_eq!((ep.barrier(), ep.commit_barrier()), (t(NOW), t(NOW)));
    assert_eq!((ep.reorder().len(), ep.prepared().len()), (2, 0));
    assert_eq!(ep.counters().time_implausible, 3);
    assert_eq!(
        ep.poll_implausible(),
        Some(ImplausibleReport {
            port: 0,
            ahead_ns: max + 1,
            refused: 3
        })
    );
    assert_eq!(ep.poll_implausible(), None);
    // A packet the controller forwards carries no barriers, but its timestamp is checked.
    let mut buf = [0u8; 1600];
    assert_eq!(ep.handle_forwarded(t(NOW), &prepare, &mut buf), Ok(None));
    assert_eq!(ep.counters().time_implausible, 4);
    // The real barrier moves on, and what came in time is delivered, nothing as late.
    ep.handle_frame(t(NOW + 10), &beacon(NOW + 10)).unwrap();
    assert_eq!(ep.poll_deliver().unwrap().payload, b"a");
    assert_eq!(ep.poll_deliver(), None);
    assert_eq!(ep.counters().late, 0);
    // A prepare within the bound is taken.
    Packet::new_unchecked(&mut prepare[..]).set_msg_ts(Timestamp48::new(NOW + 20));
    ep.handle_frame(t(NOW + 20), &prepare).unwrap();
    assert_eq!(ep.prepared().len(), 1);
    ep.invariants();
}

/// Without ordering nothing waits for a barrier: nothing is refused.
#[test]
fn an_unordered_endpoint_refuses_no_time() {
    let mut c = EndpointConfig::new(1, 2, 0);
    c.ordering = false;
    let mut ep = Endpoint::new(c, t(0));
    ep.handle_frame(t(NOW), &data(1, u64::MAX >> 17, NOW, (0, 1), b"a"))
        .unwrap();
    assert_eq!(ep.poll_deliver().unwrap().payload, b"a");
    assert_eq!(ep.counters().time_implausible, 0);
}

/// Issue 42: a few KB of fragments claiming huge fragment counts grew a process by hundreds of
/// MB. Counts past what `message_bytes_max` needs are refused before anything is allocated;
/// counts within it are charged in full, so the buffer's budget bounds them.
#[test]
fn fragments_claiming_huge_counts_are_refused_or_charged_in_full() {
    let mut c = EndpointConfig::new(1, 2, 0);
    c.reorder_bytes_max = 4 << 20;
    let mut ep = Endpoint::new(c, t(0));
    let limits = ep.reorder().limits();
    let most = limits.fragments_max() as u16;
    for i in 0..100 {
        ep.handle_frame(t(NOW), &data(i, NOW + 1, NOW, (0, u16::MAX), &[0; 30]))
            .unwrap();
    }
    assert_eq!(ep.counters().oversized, 100);
    assert_eq!((ep.reorder().bytes(), ep.reorder().len()), (0, 0));
    for i in 100..200 {
        ep.handle_frame(t(NOW), &data(i, NOW + 1, NOW, (0, most), &[0; 30]))
            .unwrap();
        ep.invariants();
    }
    let charge = most as usize * (limits.fragment_bytes + crate::reorder::ENTRY_OVERHEAD_BYTES);
    let taken = (4 << 20) / charge;
    assert_eq!(ep.reorder().bytes(), taken * charge);
    assert_eq!(ep.counters().reorder_full, 100 - taken as u64);
    // A fragment longer than a sender cuts them.
    let long = vec![0; limits.fragment_bytes + 1];
    ep.handle_frame(t(NOW), &data(300, NOW + 1, NOW, (0, 2), &long))
        .unwrap();
    assert_eq!(ep.counters().oversized, 101);
    ep.invariants();
}
