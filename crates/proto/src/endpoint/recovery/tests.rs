//! Receiver Recovery at the endpoint (paper 5.2): the recovered receiver's buffer, its new
//! incarnation, and peers that take it back.

use super::super::{Endpoint, EndpointConfig, EndpointEvent, SendError};
use super::Recovery;
use crate::controller::{Failure, LostRecall};
use crate::test_packets::beacon;
use onepipe_wire::packet::{HEADER_LEN, Opcode, Packet, Repr};
use onepipe_wire::{Duration, Instant, Timestamp48};

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn endpoint(process: u32) -> Endpoint {
    let mut c = EndpointConfig::new(process, 3, 7);
    c.beacon_interval = Duration::from_nanos(1_000);
    c.mtu_bytes = HEADER_LEN + 40;
    Endpoint::new(c, t(0))
}

/// Moves every frame between the endpoints until none is left, stamping commit barrier
/// `commit`; frames for which `lost` holds are dropped.
fn exchange(eps: &mut [Endpoint], now: u64, commit: u64, lost: impl Fn(&Repr) -> bool) {
    let mut buf = [0u8; 256];
    loop {
        let mut moved = false;
        for i in 0..eps.len() {
            while let Some(len) = eps[i].poll_transmit(t(now), &mut buf) {
                let mut f = buf[..len].to_vec();
                let r = Repr::parse(&Packet::new_checked(&f[..]).unwrap()).unwrap();
                if r.opcode == Opcode::Beacon || lost(&r) {
                    continue;
                }
                Packet::new_unchecked(&mut f[..]).set_commit_barrier(Timestamp48::new(commit));
                eps[r.dst as usize].handle_frame(t(now), &f).unwrap();
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

fn committed(ep: &mut Endpoint) -> Vec<(u32, Vec<u8>)> {
    std::iter::from_fn(|| ep.poll_deliver_reliable())
        .map(|d| (d.src, d.payload))
        .collect()
}

fn commit_beacon(c: u64) -> Vec<u8> {
    let mut b = beacon(1);
    Packet::new_unchecked(&mut b[..]).set_commit_barrier(Timestamp48::new(c));
    b
}

const OWN_FAILURE_NS: u64 = 150;

/// Process 1 fails holding four messages: 0's `a` (below its own failure timestamp) and `d`
/// (above it; 0 had every ACK, so the correct receivers deliver it), 0's `b` (aborted: its ACK
/// was lost, and the controller's record of the recall is handed in as it would be), and 2's
/// `c` (2 failed at a timestamp below it). The clocks have no offset: timestamps are send times.
fn failed_receiver_holding_four() -> (Vec<Endpoint>, Recovery) {
    let mut eps = vec![endpoint(0), endpoint(1), endpoint(2)];
    // 1 sends to 0 first, so that its connection has used PSNs before the failure.
    eps[1].send_reliable(t(50), &[(0, b"z")]).unwrap();
    exchange(&mut eps, 50, 1, |_| false);
    eps[0].send_reliable(t(100), &[(1, b"a")]).unwrap();
    exchange(&mut eps, 100, 1, |_| false);
    let b = eps[0].send_reliable(t(200), &[(1, b"b")]).unwrap();
    exchange(&mut eps, 200, 1, |r| r.opcode == Opcode::Ack);
    eps[2].send_reliable(t(300), &[(1, b"c")]).unwrap();
    exchange(&mut eps, 300, 1, |_| false);
    eps[0].send_reliable(t(400), &[(1, b"d")]).unwrap();
    exchange(&mut eps, 400, 1, |_| false);
    assert_eq!(eps[1].prepared().len(), 4);
    let recovery = Recovery {
        failure_ts: t(OWN_FAILURE_NS),
        incarnation: 0,
        failures: vec![Failure {
            process: 2,
            ts: t(250),
        }],
        failed_now: vec![Failure {
            process: 2,
            ts: t(250),
        }],
        recalls: vec![LostRecall {
            sender: 0,
            ts: t(200),
            msg_id: b,
        }],
        recalls_complete: true,
    };
    (eps, recovery)
}

#[test]
fn a_recovered_receiver_delivers_what_the_correct_receivers_did_and_nothing_else() {
    let (mut eps, recovery) = failed_receiver_holding_four();
    assert!(eps[1].on_own_failure(t(OWN_FAILURE_NS), 0));
    assert!(!eps[1].on_own_failure(t(OWN_FAILURE_NS), 0), "a repeat");
    // Declared failed: nothing delivered, whatever barrier comes; no sends.
    eps[1].handle_frame(t(500), &commit_beacon(10_000)).unwrap();
    assert!(committed(&mut eps[1]).is_empty());
    assert_eq!(
        eps[1].send_reliable(t(500), &[(0, b"x")]),
        Err(SendError::OwnFailure)
    );
    let report = eps[1].recover(t(600), &recovery).unwrap();
    assert_eq!((report.delivered, report.discarded), (2, 2));
    // `d` is above 1's own failure timestamp, and still delivered: that timestamp bounds 1's
    // own messages, not those of correct senders.
    assert_eq!(
        committed(&mut eps[1]),
        vec![(0, b"a".to_vec()), (0, b"d".to_vec())]
    );
    assert_eq!(eps[1].incarnation(), 1);
    assert!(eps[1].recover(t(600), &recovery).is_err(), "once");
    assert!(eps[1].is_process_failed(2));
    assert_eq!(
        eps[1].poll_event(),
        Some(EndpointEvent::ProcessFailed {
            process: 2,
            ts: t(250)
        })
    );
}

#[test]
fn an_incomplete_record_of_recalls_delivers_nothing() {
    let (mut eps, mut recovery) = failed_receiver_holding_four();
    recovery.recalls_complete = false;
    eps[1].on_own_failure(t(OWN_FAILURE_NS), 0);
    let report = eps[1].recover(t(600), &recovery).unwrap();
    assert_eq!((report.delivered, report.discarded), (0, 4));
    assert!(committed(&mut eps[1]).is_empty());
}

/// Rejoining as a new process: its PSNs start over, and a peer that resets its connection
/// takes them; the sends it had in flight are reported failed.
#[test]
fn a_rejoined_process_starts_new_connections_that_its_peers_take() {
    let (mut eps, recovery) = failed_receiver_holding_four();
    eps[0].on_process_failed(t(500), 1, t(OWN_FAILURE_NS)).unwrap();
    eps[1].send_reliable(t(500), &[(0, b"y")]).unwrap();
    eps[1].on_own_failure(t(OWN_FAILURE_NS), 0);
    let report = eps[1].recover(t(600), &recovery).unwrap();
    assert_eq!(report.sends_failed, 1);
    let failed: Vec<_> = std::iter::from_fn(|| eps[1].poll_event())
        .filter_map(|e| match e {
            EndpointEvent::SendFailed(f) => Some(f),
            EndpointEvent::ProcessFailed { .. } => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].reason, super::super::FailureReason::OwnFailure);
    eps[0].on_process_rejoined(1, 1).unwrap();
    eps[0].on_process_rejoined(1, 1).unwrap();
    assert_eq!(eps[0].recovery_counters().peers_rejoined, 1);
    assert!(!eps[0].is_process_failed(1));
    assert!(eps[0].on_process_rejoined(0, 1).is_err());
    let before = eps[0].prepared().len();
    eps[1].send_reliable(t(700), &[(0, b"w")]).unwrap();
    eps[0].send_reliable(t(700), &[(1, b"v")]).unwrap();
    exchange(&mut eps, 700, 1, |_| false);
    assert_eq!(eps[0].prepared().len(), before + 1, "PSN 0 again, taken as new");
    eps[0].handle_frame(t(800), &commit_beacon(100_000)).unwrap();
    eps[1].handle_frame(t(800), &commit_beacon(100_000)).unwrap();
    assert!(committed(&mut eps[0]).contains(&(1, b"w".to_vec())));
    assert!(committed(&mut eps[1]).contains(&(0, b"v".to_vec())));
    assert!(eps[0].reliable_sender().is_idle() && eps[1].reliable_sender().is_idle());
}

/// A recovery that names a failed process twice, this process, or one that does not exist (a
/// damaged management message) leaves the endpoint with each real failure once: its
/// invariants hold.
#[test]
fn a_recovery_naming_a_failure_twice_or_a_stranger_keeps_each_failure_once() {
    let (mut eps, mut recovery) = failed_receiver_holding_four();
    let twice = recovery.failed_now[0];
    recovery.failed_now.extend([
        twice,
        Failure { process: 1, ts: t(1) },
        Failure {
            process: 99,
            ts: t(1),
        },
    ]);
    assert!(eps[1].on_own_failure(t(OWN_FAILURE_NS), 0));
    eps[1].recover(t(600), &recovery).unwrap();
    assert_eq!(eps[1].failed_processes(), &[(2, t(250))]);
    eps[1].invariants();
}
