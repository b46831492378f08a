//! Host endpoint rules, each citing the paper section it checks.

use super::*;
use crate::test_packets::beacon;

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn endpoint(process: u32, count: u32) -> Endpoint {
    let mut c = EndpointConfig::new(process, count, 7);
    c.beacon_interval = Duration::from_nanos(1_000);
    c.mtu_bytes = HEADER_LEN + 10;
    c.send_buffer_packets_max = 8;
    Endpoint::new(c, t(0))
}

fn drain(ep: &mut Endpoint, now: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while let Some(len) = ep.poll_transmit(t(now), &mut buf) {
        out.push(buf[..len].to_vec());
    }
    out
}

fn repr(f: &[u8]) -> Repr {
    Repr::parse(&Packet::new_checked(f).unwrap()).unwrap()
}

fn with_barrier(mut f: Vec<u8>, b: u64) -> Vec<u8> {
    Packet::new_unchecked(&mut f[..]).set_barrier(Timestamp48::new(b));
    f
}

/// Paper 2.1: all packets of all messages of a scattering carry the sender's one timestamp;
/// paper 6.1: messages larger than the MTU are fragmented, the last fragment flagged.
#[test]
fn scattering_shares_one_timestamp_and_fragments() {
    let mut ep = endpoint(0, 4);
    let msg_id = ep
        .send_unreliable(t(100), &[(1, b"0123456789abcdef"), (2, b"xy")])
        .unwrap();
    assert_eq!(ep.poll_released(), None, "stamped when its first packet leaves");
    let frames = drain(&mut ep, 150);
    let (released_id, ts) = ep.poll_released().expect("released when sent");
    assert_eq!((released_id, ts), (msg_id, t(150)));
    assert_eq!(frames.len(), 3);
    let reprs: Vec<Repr> = frames.iter().map(|f| repr(f)).collect();
    for r in &reprs {
        assert_eq!(r.msg_ts, ts.to_wire());
        // Barrier on the uplink never exceeds what is still queued (docs/ordering.md).
        assert_eq!(r.barrier, ts.to_wire());
        assert_eq!(r.msg_id, msg_id);
        assert_eq!(r.link_id, 7);
    }
    assert_eq!(
        (
            reprs[0].dst,
            reprs[0].frag_index,
            reprs[0].frag_count,
            reprs[0].end_of_message
        ),
        (1, 0, 2, false)
    );
    assert_eq!(
        (reprs[1].dst, reprs[1].frag_index, reprs[1].end_of_message),
        (1, 1, true)
    );
    assert_eq!(
        (reprs[2].dst, reprs[2].frag_count, reprs[2].end_of_message),
        (2, 1, true)
    );
}

/// API misuse and full buffers are typed errors; nothing of a refused scattering is queued.
#[test]
fn send_errors_are_typed_and_leave_nothing_behind() {
    let mut ep = endpoint(0, 4);
    assert_eq!(ep.send_unreliable(t(1), &[]), Err(SendError::EmptyScattering));
    assert_eq!(
        ep.send_unreliable(t(1), &[(4, b"x")]),
        Err(SendError::UnknownDestination(4))
    );
    assert_eq!(
        ep.send_reliable(t(1), &[(2, b"x"), (1, b"y"), (2, b"z")]),
        Err(SendError::DuplicateDestination(2))
    );
    let huge = vec![0u8; (1 << 20) + 1];
    assert!(matches!(
        ep.send_unreliable(t(1), &[(1, &huge)]),
        Err(SendError::MessageTooLarge { .. })
    ));
    let nine = [0u8; 90]; // 9 packets of 10 bytes > 8-packet buffer
    assert!(matches!(
        ep.send_unreliable(t(1), &[(1, &nine)]),
        Err(SendError::BufferFull { .. })
    ));
    assert_eq!(ep.send_room_packets(), 8);
    ep.send_unreliable(t(1), &[(1, &[0u8; 80])]).unwrap();
    assert!(matches!(
        ep.send_unreliable(t(1), &[(1, b"x")]),
        Err(SendError::BufferFull { queued: 8, max: 8 })
    ));
    assert_eq!(drain(&mut ep, 2).len(), 8);
    assert_eq!(ep.send_room_packets(), 8);
}

fn data_from(src: u32, dst: u32, ts: u64, barrier: u64, frag: (u16, u16), payload: &[u8]) -> Vec<u8> {
    crate::test_packets::packet(Opcode::Data, src, dst, ts, ts, barrier, frag, payload)
}

/// Paper 4.1: deliver exactly the messages with timestamp below the barrier, in (timestamp,
/// sender) order; a message at the barrier waits (a later packet may still carry that time).
#[test]
fn delivers_below_the_barrier_in_timestamp_then_sender_order() {
    let mut ep = endpoint(0, 8);
    ep.handle_frame(t(1), &data_from(3, 0, 500, 0, (0, 1), b"c"))
        .unwrap();
    ep.handle_frame(t(1), &data_from(5, 0, 400, 0, (0, 1), b"b"))
        .unwrap();
    ep.handle_frame(t(1), &data_from(2, 0, 400, 0, (0, 1), b"a"))
        .unwrap();
    assert!(ep.poll_deliver().is_none(), "no barrier yet");
    ep.handle_frame(t(2), &beacon(500)).unwrap();
    let got: Vec<(u32, Vec<u8>)> = std::iter::from_fn(|| ep.poll_deliver())
        .map(|d| (d.src, d.payload))
        .collect();
    assert_eq!(got, vec![(2, b"a".to_vec()), (5, b"b".to_vec())]);
    ep.handle_frame(t(3), &beacon(501)).unwrap();
    assert_eq!(ep.poll_deliver().unwrap().payload, b"c");
}

/// DESIGN edge: a multi-packet message split across a beacon whose barrier equals its
/// timestamp is still delivered whole (barrier means later packets have ts >= B).
#[test]
fn message_split_across_a_beacon_at_its_timestamp_is_delivered() {
    let mut ep = endpoint(0, 8);
    ep.handle_frame(t(1), &data_from(1, 0, 600, 600, (0, 2), b"he"))
        .unwrap();
    ep.handle_frame(t(1), &beacon(600)).unwrap();
    ep.handle_frame(t(1), &data_from(1, 0, 600, 600, (1, 2), b"llo"))
        .unwrap();
    assert!(ep.poll_deliver().is_none());
    ep.handle_frame(t(2), &beacon(601)).unwrap();
    assert_eq!(ep.poll_deliver().unwrap().payload, b"hello");
    assert_eq!(ep.counters().late + ep.counters().incomplete, 0);
}

/// Paper 4.1: "If a process receives a message with timestamp [below the delivered barrier],
/// it is dropped, and a NAK message is returned to the sender"; the sender's send-failure
/// callback fires (Table 1).
#[test]
fn late_packet_is_naked_and_the_sender_hears_of_it() {
    let mut receiver = endpoint(0, 8);
    receiver.handle_frame(t(1), &beacon(1_000)).unwrap();
    receiver
        .handle_frame(t(2), &data_from(4, 0, 900, 900, (0, 1), b"late"))
        .unwrap();
    assert!(receiver.poll_deliver().is_none());
    assert_eq!(receiver.counters().late, 1);
    let frames = drain(&mut receiver, 3);
    let nak = frames
        .iter()
        .map(|f| repr(f))
        .find(|r| r.opcode == Opcode::Nak)
        .expect("a NAK goes out");
    assert_eq!((nak.src, nak.dst, nak.msg_ts.raw(), nak.msg_id), (0, 4, 900, 900));

    let mut sender = endpoint(4, 8);
    let nak_frame = frames
        .into_iter()
        .find(|f| repr(f).opcode == Opcode::Nak)
        .unwrap();
    sender.handle_frame(t(4), &nak_frame).unwrap();
    assert_eq!(
        send_failure(&mut sender),
        Some(SendFailure {
            ts: t(900),
            dst: 0,
            msg_id: 900,
            reason: FailureReason::Nak,
        })
    );
}

/// A fragment lost for good: the barrier passes an incomplete message, which is NAKed.
#[test]
fn incomplete_message_is_naked_when_the_barrier_passes() {
    let mut ep = endpoint(0, 8);
    ep.handle_frame(t(1), &data_from(2, 0, 300, 300, (0, 2), b"ab"))
        .unwrap();
    ep.handle_frame(t(2), &beacon(301)).unwrap();
    assert!(ep.poll_deliver().is_none());
    assert_eq!(ep.counters().incomplete, 1);
    assert!(drain(&mut ep, 3).iter().any(|f| repr(f).opcode == Opcode::Nak));
}

/// Paper 4.2: hosts beacon at synchronized times when the uplink was idle, with their clock as
/// barrier; paper 2.1 causality: after delivering T, the next timestamp issued is above T.
#[test]
fn beacons_when_idle_and_timestamps_stay_above_deliveries() {
    let mut ep = endpoint(0, 8);
    assert_eq!(ep.poll_timeout(), t(1_000));
    ep.handle_timeout(t(1_000));
    let frames = drain(&mut ep, 1_000);
    assert_eq!(frames.len(), 1);
    assert_eq!(repr(&frames[0]).opcode, Opcode::Beacon);
    assert_eq!(repr(&frames[0]).barrier.raw(), 1_000);
    // A sender far ahead of us: we deliver its message at 50_000 while our clock reads ~1_000.
    ep.handle_frame(t(1_100), &data_from(1, 0, 50_000, 50_000, (0, 1), b"x"))
        .unwrap();
    ep.handle_frame(t(1_100), &beacon(50_001)).unwrap();
    assert_eq!(ep.poll_deliver().unwrap().ts, t(50_000));
    ep.send_unreliable(t(1_200), &[(1, b"y")]).unwrap();
    drain(&mut ep, 1_200);
    let (_, ts) = ep.poll_released().expect("sent");
    assert!(ts > t(50_000));
}

/// Bad input: malformed frames are counted, never a panic; misaddressed data is not delivered.
#[test]
fn malformed_and_misaddressed_frames_are_counted() {
    let mut ep = endpoint(0, 8);
    assert!(ep.handle_frame(t(1), &[1, 2, 3]).is_err());
    assert!(ep.handle_frame(t(1), &[0x11; 64]).is_err());
    assert_eq!(ep.counters().malformed, 2);
    ep.handle_frame(t(1), &with_barrier(data_from(1, 5, 10, 10, (0, 1), b"x"), 20))
        .unwrap();
    assert_eq!(ep.counters().misdelivered, 1);
    assert!(ep.poll_deliver().is_none());
}

/// The unordered baseline delivers on arrival, whatever the barrier.
#[test]
fn unordered_mode_delivers_on_arrival() {
    let mut c = EndpointConfig::new(0, 8, 0);
    c.ordering = false;
    let mut ep = Endpoint::new(c, t(0));
    ep.handle_frame(t(1), &data_from(1, 0, 900, 0, (0, 1), b"x"))
        .unwrap();
    assert_eq!(ep.poll_deliver().unwrap().payload, b"x");
}

/// Paper 6.1: "If the send buffer is full, the send API returns fail"; a scattering that
/// could never fit is a different error from one that must wait.
#[test]
fn full_reliable_send_buffer_is_backpressure() {
    let mut c = EndpointConfig::new(0, 4, 7);
    c.mtu_bytes = HEADER_LEN + 10;
    c.reliable.send_buffer_packets_max = 4;
    let mut ep = Endpoint::new(c, t(0));
    assert!(matches!(
        ep.send_reliable(t(1), &[(1, &[0u8; 50])]),
        Err(SendError::ScatteringTooLarge { packets: 5, max: 4 })
    ));
    ep.send_reliable(t(1), &[(1, &[0u8; 30])]).unwrap();
    assert_eq!(
        ep.send_reliable(t(2), &[(2, &[0u8; 20])]),
        Err(SendError::BufferFull { queued: 3, max: 4 })
    );
    assert_eq!(ep.reliable_room_packets(), 1);
}

/// A reliable message waits whole at its receiver, within the receive window: one larger
/// than the window could never complete, so it is refused, not left to wait forever.
#[test]
fn reliable_message_larger_than_the_receive_window_is_refused() {
    let mut c = EndpointConfig::new(0, 4, 7);
    c.mtu_bytes = HEADER_LEN + 10;
    c.reliable.recv_window_packets = 4;
    let mut ep = Endpoint::new(c, t(0));
    assert_eq!(
        ep.send_reliable(t(1), &[(1, &[0u8; 10]), (2, &[0u8; 50])]),
        Err(SendError::MessageExceedsWindow {
            packets: 5,
            window: 4
        })
    );
    assert_eq!(ep.reliable_sender().unacked_packets(), 0, "nothing of it stays");
    ep.send_reliable(t(1), &[(1, &[0u8; 40])]).unwrap();
}

/// Paper 5.1: a prepare packet is acknowledged and held until the commit barrier passes its
/// timestamp; only then is it delivered.
#[test]
fn prepared_message_waits_for_the_commit_barrier() {
    let mut sender = endpoint(0, 2);
    let mut receiver = endpoint(1, 2);
    sender.send_reliable(t(100), &[(1, b"hi")]).unwrap();
    let (id, ts) = sender.poll_released().unwrap();
    let frames = drain(&mut sender, 100);
    let prepare = frames
        .iter()
        .find(|f| repr(f).opcode == Opcode::Prepare)
        .expect("sent");
    // The ToR passes it on with barriers below its timestamp.
    let mut f = prepare.clone();
    {
        let mut p = Packet::new_unchecked(&mut f[..]);
        p.set_barrier(Timestamp48::new(1));
        p.set_commit_barrier(Timestamp48::new(1));
    }
    receiver.handle_frame(t(110), &f).unwrap();
    assert!(
        receiver.poll_deliver_reliable().is_none(),
        "prepared, not committed"
    );
    let acks: Vec<_> = drain(&mut receiver, 110)
        .into_iter()
        .filter(|f| repr(f).opcode == Opcode::Ack)
        .collect();
    assert_eq!(acks.len(), 1);
    assert_eq!(repr(&acks[0]).psn, 1, "cumulative: PSN 0 arrived");
    sender.handle_frame(t(120), &acks[0]).unwrap();
    // With nothing open, the sender's commit barrier is its clock, past the message.
    let beacon_frames = {
        sender.handle_timeout(t(1_000));
        drain(&mut sender, 1_000)
    };
    let commit = Packet::new_checked(&beacon_frames[0][..])
        .unwrap()
        .commit_barrier();
    assert!(commit.raw() > ts.as_nanos());
    let mut b = beacon(1);
    Packet::new_unchecked(&mut b[..]).set_commit_barrier(commit);
    receiver.handle_frame(t(1_010), &b).unwrap();
    let d = receiver.poll_deliver_reliable().expect("committed");
    assert_eq!((d.src, d.msg_id, d.payload.as_slice()), (0, id, &b"hi"[..]));
}

/// A prepare below a commit barrier already passed cannot be delivered in order: it is neither
/// stored nor acknowledged (the sender's retry budget reports it; recovery is paper 5.2's).
#[test]
fn prepare_below_the_passed_commit_barrier_is_refused() {
    let mut sender = endpoint(0, 2);
    let mut receiver = endpoint(1, 2);
    sender.send_reliable(t(100), &[(1, b"hi")]).unwrap();
    let frames = drain(&mut sender, 100);
    let prepare = frames
        .iter()
        .find(|f| repr(f).opcode == Opcode::Prepare)
        .unwrap()
        .clone();
    let mut b = beacon(1);
    Packet::new_unchecked(&mut b[..]).set_commit_barrier(Timestamp48::new(50_000));
    receiver.handle_frame(t(200), &b).unwrap();
    receiver.handle_frame(t(210), &prepare).unwrap();
    assert_eq!(receiver.counters().late, 1);
    assert!(
        drain(&mut receiver, 220)
            .iter()
            .all(|f| repr(f).opcode != Opcode::Ack)
    );
    assert!(receiver.poll_deliver_reliable().is_none());
}

/// A loaded host holds a lone ACK for a ride, but never past `ack_delay_max`: the deadline is
/// a timeout, announced once (a deadline left in the past would have a runtime whose link is
/// busy call back at once, forever).
#[test]
fn held_ack_goes_at_its_deadline_which_is_announced_once() {
    let mut sender = endpoint(0, 3);
    let mut c = EndpointConfig::new(1, 3, 7);
    c.beacon_interval = Duration::from_millis(1);
    c.mtu_bytes = HEADER_LEN + 10;
    c.reliable.send_buffer_packets_max = 4;
    c.reliable.ack_delay_max = Duration::from_nanos(5_000);
    let mut receiver = Endpoint::new(c, t(0));
    // Three packets to process 2 in flight: loaded, and nothing going to process 0.
    receiver.send_reliable(t(1), &[(2, &[0u8; 30])]).unwrap();
    drain(&mut receiver, 1);
    sender.send_reliable(t(100), &[(1, b"hi")]).unwrap();
    let prepare = drain(&mut sender, 100)
        .into_iter()
        .find(|f| repr(f).opcode == Opcode::Prepare)
        .expect("sent");
    receiver.handle_frame(t(200), &prepare).unwrap();
    let acks = |frames: Vec<Vec<u8>>| frames.iter().filter(|f| repr(f).opcode == Opcode::Ack).count();
    assert_eq!(acks(drain(&mut receiver, 200)), 0, "held for a ride");
    assert_eq!(receiver.poll_timeout(), t(5_200));
    receiver.handle_timeout(t(5_200));
    assert!(receiver.poll_timeout() > t(5_200), "announced once");
    assert_eq!(acks(drain(&mut receiver, 5_200)), 1, "gone at the deadline");
}

// Paper 5.2 failure handling at the endpoint: Discard, Recall, Callback, completion.

/// Endpoints indexed by process id, wired through an ideal ToR: every frame goes straight to
/// its destination carrying barrier and commit barrier `commit` (what the ToR's aggregate is in
/// the test), except beacons and frames `lost` says to drop. Runs until nothing is left to
/// send; returns the frames delivered.
fn exchange(eps: &mut [Endpoint], now: u64, commit: u64, lost: impl Fn(&Repr) -> bool) -> Vec<Vec<u8>> {
    let mut delivered = Vec::new();
    loop {
        let mut moved = false;
        for i in 0..eps.len() {
            for mut f in drain(&mut eps[i], now) {
                let r = repr(&f);
                if r.opcode == Opcode::Beacon || lost(&r) {
                    continue;
                }
                let mut p = Packet::new_unchecked(&mut f[..]);
                p.set_barrier(Timestamp48::new(commit));
                p.set_commit_barrier(Timestamp48::new(commit));
                eps[r.dst as usize].handle_frame(t(now), &f).unwrap();
                delivered.push(f);
                moved = true;
            }
        }
        if !moved {
            return delivered;
        }
    }
}

fn nothing_lost(_: &Repr) -> bool {
    false
}

/// A beacon from the ToR with commit barrier `c`.
fn commit_beacon(c: u64) -> Vec<u8> {
    let mut b = beacon(1);
    Packet::new_unchecked(&mut b[..]).set_commit_barrier(Timestamp48::new(c));
    b
}

/// Delivers the committed reliable messages: (sender, payload).
fn committed(ep: &mut Endpoint) -> Vec<(u32, Vec<u8>)> {
    std::iter::from_fn(|| ep.poll_deliver_reliable())
        .map(|d| (d.src, d.payload))
        .collect()
}

fn recalls(frames: &[Vec<u8>]) -> Vec<Repr> {
    frames.iter().map(|f| repr(f)).filter(|r| r.recall).collect()
}

/// Paper 5.2 Discard: "Each correct process discards messages sent from P with timestamp higher
/// than T in the receive buffer." With barriers meaning "every later packet has a timestamp at
/// or above B", P's commit barrier T promised the messages below T acknowledged; the one at T
/// may be missing elsewhere, so it goes too. Below T they are delivered; nothing more from P
/// is taken; the application's callback hears of it once.
#[test]
fn discard_drops_messages_at_and_above_the_failure_timestamp_and_delivers_those_below() {
    let mut eps = vec![endpoint(0, 2), endpoint(1, 2)];
    for now in [100, 200, 300] {
        eps[0]
            .send_reliable(t(now), &[(1, format!("m{now}").as_bytes())])
            .unwrap();
    }
    exchange(&mut eps, 300, 1, nothing_lost);
    assert_eq!(eps[1].prepared().len(), 3);
    eps[1].on_process_failed(t(400), 0, t(200)).unwrap();
    assert_eq!(eps[1].counters().discarded, 2, "at 200 and at 300");
    assert_eq!(process_failure(&mut eps[1]), Some((0, t(200))));
    assert_eq!(process_failure(&mut eps[1]), None);
    assert!(
        eps[1].failure_complete(0),
        "a receiver only discards: done at once"
    );
    eps[1].handle_frame(t(500), &commit_beacon(10_000)).unwrap();
    assert_eq!(committed(&mut eps[1]), vec![(0, b"m100".to_vec())]);
    // Anything later from P is dropped whole.
    eps[0].send_reliable(t(600), &[(1, b"after")]).unwrap();
    let frames = drain(&mut eps[0], 600);
    for f in &frames {
        eps[1].handle_frame(t(610), f).unwrap();
    }
    assert_eq!(eps[1].counters().from_failed, frames.len() as u64);
    eps[1].handle_frame(t(700), &commit_beacon(20_000)).unwrap();
    assert!(committed(&mut eps[1]).is_empty());
}

/// A process the controller has not confirmed yet may have missed failures announced before
/// it was known (a recovery can resume without it): it delivers nothing reliable until the
/// confirmation, which names them, has been applied. Found by a simulator campaign (seed
/// 90059545 of a build with other timing): a process registered after a host failure's Resume
/// delivered a message of that host's that every other receiver discarded.
#[test]
fn an_unconfirmed_process_delivers_nothing_until_its_confirmation_names_the_failures() {
    let mut eps = vec![endpoint(0, 2), endpoint(1, 2)];
    eps[1].await_registration(); // what the management plane does when it registers
    for now in [100, 200, 300] {
        eps[0]
            .send_reliable(t(now), &[(1, format!("m{now}").as_bytes())])
            .unwrap();
    }
    exchange(&mut eps, 300, 1, nothing_lost);
    eps[1].handle_frame(t(400), &commit_beacon(10_000)).unwrap();
    assert!(committed(&mut eps[1]).is_empty(), "not confirmed: held");
    // Process 0 failed at 200 and its recovery resumed before the controller knew process 1:
    // the confirmation names that failure, and the endpoint takes it before it may deliver.
    eps[1].on_process_failed(t(500), 0, t(200)).unwrap();
    eps[1].registration_confirmed();
    assert_eq!(eps[1].counters().discarded, 2, "at 200 and at 300");
    assert_eq!(committed(&mut eps[1]), vec![(0, b"m100".to_vec())]);
}

/// Paper 5.2 Recall and the appendix ("R fails before sending ACK in Prepare phase: discard
/// according to Recall step"): the sender aborts the scattering, reports it with the new
/// reason, recalls its message to the live receiver, which discards it and acknowledges; then
/// the sender's commit barrier moves on and its part of the failure is complete.
#[test]
fn recall_of_a_scattering_the_failed_receiver_had_not_acked() {
    let mut eps = vec![endpoint(0, 3), endpoint(1, 3), endpoint(2, 3)];
    let id = eps[0].send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    let (_, ts) = eps[0].poll_released().unwrap();
    exchange(&mut eps, 100, 1, |r| r.dst == 1); // 1 is dead: nothing reaches it
    assert_eq!(eps[2].prepared().len(), 1, "2 has its message, acknowledged");
    for p in [0, 2] {
        eps[p].on_process_failed(t(200), 1, t(50)).unwrap();
    }
    let f = send_failure(&mut eps[0]).expect("reported");
    assert_eq!(
        f,
        SendFailure {
            ts,
            dst: 1,
            msg_id: id,
            reason: FailureReason::ReceiverFailed { process: 1 },
        }
    );
    assert!(!eps[0].failure_complete(1), "the recall is not acknowledged yet");
    let frames = exchange(&mut eps, 200, 1, |r| r.dst == 1);
    let sent = recalls(&frames);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].src, sent[0].dst, sent[0].msg_id, sent[0].msg_ts),
        (0, 2, id, ts.to_wire())
    );
    assert_eq!(
        (eps[2].counters().recalls_received, eps[2].counters().recalled),
        (1, 1)
    );
    assert!(eps[2].prepared().is_empty());
    assert_eq!(eps[2].reliable_receiver().held_packets(0), Some((0, 0)));
    assert!(eps[0].failure_complete(1) && eps[2].failure_complete(1));
    // The sender's commit barrier is past the aborted scattering now.
    eps[0].handle_timeout(t(2_000));
    let beacon = drain(&mut eps[0], 2_000).pop().expect("a beacon");
    assert!(repr(&beacon).commit_barrier.raw() > ts.as_nanos());
    eps[2].handle_frame(t(2_100), &commit_beacon(10_000)).unwrap();
    assert!(committed(&mut eps[2]).is_empty(), "no message of it is delivered");
}

/// Paper appendix: "R fails after sending ACK in Prepare phase: deliver". The failed receiver
/// acknowledged; the live one had not yet: the scattering is not aborted and reaches it.
#[test]
fn scattering_the_failed_receiver_had_acked_is_delivered() {
    let mut eps = vec![endpoint(0, 3), endpoint(1, 3), endpoint(2, 3)];
    eps[0].send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    exchange(&mut eps, 100, 1, |r| r.dst == 2); // 2's copy is lost
    for p in [0, 2] {
        eps[p].on_process_failed(t(200), 1, t(50)).unwrap();
    }
    assert!(send_failure(&mut eps[0]).is_none());
    // Not done while the scattering is open: were its other receiver to fail, it would be
    // aborted, and 1 would need that recall when it recovers (paper 5.2, Receiver Recovery).
    assert!(!eps[0].failure_complete(1));
    let mut now = 200;
    while eps[2].prepared().is_empty() {
        now = eps[0].poll_timeout().as_nanos().max(now + 1);
        assert!(now < 100_000_000, "retransmitted within the retry budget");
        eps[0].handle_timeout(t(now));
        let frames = exchange(&mut eps, now, 1, |r| r.dst == 1);
        assert!(recalls(&frames).is_empty());
    }
    assert!(eps[0].failure_complete(1), "settled once 2 acknowledged");
    eps[2]
        .handle_frame(t(now), &commit_beacon(now + 10_000_000))
        .unwrap();
    assert_eq!(committed(&mut eps[2]), vec![(0, b"b".to_vec())]);
}

/// A recall can overtake its message (the message was lost and is retransmitted, or took a
/// slower path): the receiver keeps a tombstone, drops the late copy, and forgets the tombstone
/// once the commit barrier passes it (a copy after that is late anyway).
#[test]
fn recall_before_its_message_leaves_a_tombstone_until_the_commit_barrier_passes() {
    let mut sender = endpoint(0, 3);
    let mut receiver = endpoint(2, 3);
    sender.send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    let (_, ts) = sender.poll_released().unwrap();
    let held: Vec<Vec<u8>> = drain(&mut sender, 100)
        .into_iter()
        .filter(|f| repr(f).dst == 2)
        .collect();
    assert_eq!(held.len(), 1);
    sender.on_process_failed(t(200), 1, t(50)).unwrap();
    let recall = drain(&mut sender, 200);
    assert_eq!(recalls(&recall).len(), 1);
    receiver.handle_frame(t(210), &recall[0]).unwrap();
    assert_eq!((receiver.counters().recalled, receiver.tombstones()), (0, 1));
    receiver.handle_frame(t(220), &held[0]).unwrap();
    assert_eq!(receiver.counters().recalled_late, 1);
    assert!(receiver.prepared().is_empty());
    assert_eq!(
        receiver.reliable_receiver().held_packets(0),
        Some((0, 0)),
        "neither the recall nor the late copy holds window"
    );
    // Both PSNs arrived: the ACK covers them, and the sender is done.
    for f in drain(&mut receiver, 230) {
        sender.handle_frame(t(240), &f).unwrap();
    }
    assert!(sender.failure_complete(1));
    // The commit barrier passes the recalled timestamp: the tombstone goes.
    receiver
        .handle_frame(t(300), &commit_beacon(ts.as_nanos()))
        .unwrap();
    assert_eq!(receiver.tombstones(), 1, "at the barrier is not below it");
    receiver
        .handle_frame(t(310), &commit_beacon(ts.as_nanos() + 1))
        .unwrap();
    assert_eq!(receiver.tombstones(), 0);
    receiver.handle_frame(t(320), &held[0]).unwrap();
    assert_eq!(receiver.counters().late, 1, "a copy now is late");
    assert!(committed(&mut receiver).is_empty());
}

/// The Broadcast may be repeated (controller failover, retries): the second announcement
/// changes nothing. An announcement about the process itself, or one that does not exist, is
/// refused.
#[test]
fn repeated_failure_announcement_changes_nothing() {
    let mut eps = vec![endpoint(0, 3), endpoint(1, 3), endpoint(2, 3)];
    eps[0].send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    exchange(&mut eps, 100, 1, |r| r.dst == 1);
    eps[0].on_process_failed(t(200), 1, t(50)).unwrap();
    let first = drain(&mut eps[0], 200);
    eps[0].on_process_failed(t(201), 1, t(70)).unwrap();
    assert!(drain(&mut eps[0], 201).is_empty(), "no second recall");
    assert_eq!(eps[0].failed_processes(), &[(1, t(50))]);
    assert_eq!(eps[0].counters().failures_repeated, 1);
    // One callback, then one report of the aborted scattering.
    let events: Vec<_> = std::iter::from_fn(|| eps[0].poll_event()).collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        events[0],
        EndpointEvent::ProcessFailed {
            process: 1,
            ts: t(50)
        }
    );
    assert!(matches!(events[1], EndpointEvent::SendFailed(_)));
    assert_eq!(recalls(&first).len(), 1);
    assert_eq!(eps[0].reliable_sender().counters().recalls_sent, 1);
    assert_eq!(
        eps[0].on_process_failed(t(202), 0, t(50)),
        Err(ProcessFailureError::OwnProcess(0))
    );
    assert_eq!(
        eps[0].on_process_failed(t(202), 3, t(50)),
        Err(ProcessFailureError::UnknownProcess(3))
    );
    assert_eq!(eps[0].failed_processes().len(), 1);
}

/// A recall is numbered and acknowledged like a prepare packet: lost, it is sent again on
/// timeout, and the failure is complete only once it is acknowledged.
#[test]
fn lost_recall_is_sent_again_and_then_completes() {
    let mut eps = vec![endpoint(0, 3), endpoint(1, 3), endpoint(2, 3)];
    eps[0].send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    exchange(&mut eps, 100, 1, |r| r.dst == 1);
    eps[0].on_process_failed(t(200), 1, t(50)).unwrap();
    let lost = exchange(&mut eps, 200, 1, |r| r.dst == 1 || r.recall);
    assert!(lost.is_empty(), "the recall was lost");
    assert!(!eps[0].failure_complete(1));
    let mut now = 200;
    let mut resent = Vec::new();
    while resent.is_empty() {
        now = eps[0].poll_timeout().as_nanos().max(now + 1);
        assert!(now < 100_000_000, "retransmitted within the retry budget");
        eps[0].handle_timeout(t(now));
        resent = recalls(&exchange(&mut eps, now, 1, |r| r.dst == 1));
    }
    assert_eq!(resent.len(), 1);
    assert!(eps[0].failure_complete(1));
    assert_eq!(eps[2].counters().recalled, 1);
    assert!(eps[0].reliable_sender().is_idle());
}

/// After the announcement a send naming the failed process is refused, reliable or not, and
/// nothing of it is queued.
#[test]
fn sends_naming_a_failed_process_are_refused() {
    let mut ep = endpoint(0, 3);
    ep.on_process_failed(t(10), 2, t(5)).unwrap();
    assert_eq!(
        ep.send_reliable(t(20), &[(1, b"a"), (2, b"b")]),
        Err(SendError::ProcessFailed(2))
    );
    assert_eq!(
        ep.send_unreliable(t(20), &[(2, b"b")]),
        Err(SendError::ProcessFailed(2))
    );
    assert!(drain(&mut ep, 20).is_empty());
    assert!(ep.send_reliable(t(30), &[(1, b"a")]).is_ok());
}

/// Bad input: a `RECALL` flag on anything but a prepare, or a recall with message bytes, is
/// malformed (counted, dropped). A well-formed recall of a message never seen, from a
/// connection never opened, is acknowledged harmlessly; one from a process that does not exist
/// is dropped.
#[test]
fn malformed_and_unknown_recalls_are_counted_and_harmless() {
    use onepipe_wire::packet::flags;
    let mut ep = endpoint(2, 3);
    let set_recall = |mut f: Vec<u8>| {
        let mut p = Packet::new_unchecked(&mut f[..]);
        let fl = p.flags();
        p.set_flags(fl | flags::RECALL);
        f
    };
    let bad = [
        set_recall(data_from(1, 2, 10, 1, (0, 1), b"")),
        set_recall(crate::test_packets::packet(
            Opcode::Prepare,
            1,
            2,
            10,
            10,
            1,
            (0, 1),
            b"x",
        )),
        set_recall(crate::test_packets::packet(
            Opcode::Prepare,
            1,
            2,
            10,
            10,
            1,
            (1, 2),
            b"",
        )),
        set_recall(beacon(1)),
    ];
    for f in &bad {
        assert!(ep.handle_frame(t(1), f).is_err());
    }
    assert_eq!(ep.counters().malformed, bad.len() as u64);
    let unknown = set_recall(crate::test_packets::packet(
        Opcode::Prepare,
        1,
        2,
        10,
        10,
        1,
        (0, 1),
        b"",
    ));
    ep.handle_frame(t(2), &unknown).unwrap();
    assert_eq!((ep.counters().recalls_received, ep.counters().recalled), (1, 0));
    let ack = drain(&mut ep, 3)
        .into_iter()
        .map(|f| repr(&f))
        .find(|r| r.opcode == Opcode::Ack);
    assert_eq!(ack.map(|a| (a.dst, a.psn)), Some((1, 1)), "acknowledged");
    let mut forged = set_recall(crate::test_packets::packet(
        Opcode::Prepare,
        9,
        2,
        10,
        10,
        1,
        (0, 1),
        b"",
    ));
    Packet::new_unchecked(&mut forged[..]).set_src(9);
    ep.handle_frame(t(4), &forged).unwrap();
    assert_eq!(ep.counters().recalls_received, 1, "no such process");
    assert!(ep.prepared().is_empty());
}

/// With room in the MTU, an ACK owed to the receiver of a recall rides on it like on any
/// prepare packet, and both are taken.
#[test]
fn recall_carries_a_piggybacked_ack() {
    let big = |p: u32| Endpoint::new(EndpointConfig::new(p, 3, 7), t(0));
    let mut eps = vec![big(0), big(1), big(2)];
    eps[0].send_reliable(t(100), &[(1, b"a"), (2, b"b")]).unwrap();
    exchange(&mut eps, 100, 1, |r| r.dst == 1);
    eps[2].send_reliable(t(150), &[(0, b"c")]).unwrap();
    for f in drain(&mut eps[2], 150) {
        eps[0].handle_frame(t(160), &f).unwrap(); // 0 owes 2 an ACK now
    }
    eps[0].on_process_failed(t(200), 1, t(50)).unwrap();
    let frames = drain(&mut eps[0], 200);
    assert_eq!(frames.len(), 1, "the ACK rode on the recall");
    let r = repr(&frames[0]);
    assert!(r.recall && r.ack);
    assert_eq!(r.payload_len as usize, onepipe_wire::PIGGYBACK_LEN);
    eps[2].handle_frame(t(210), &frames[0]).unwrap();
    assert_eq!(eps[2].counters().recalled, 1);
    assert_eq!(
        eps[2].reliable_sender().unacked_packets(),
        0,
        "the piggybacked ACK was taken"
    );
    for f in drain(&mut eps[2], 220) {
        eps[0].handle_frame(t(230), &f).unwrap();
    }
    assert!(eps[0].failure_complete(1));
}

/// Nearly every ACK rides on a prepare packet, so it rides short: its selective map only when
/// a bit of it is set (flag `SACK`, 18 bytes instead of 10), and the sender reads either.
#[test]
fn piggybacked_acks_carry_the_selective_map_only_when_it_has_bits() {
    let big = |p: u32| Endpoint::new(EndpointConfig::new(p, 2, 7), t(0));
    let mut eps = vec![big(0), big(1)];
    for now in [100, 110, 120] {
        eps[0].send_reliable(t(now), &[(1, b"m")]).unwrap();
    }
    let mut prepares: Vec<Vec<u8>> = drain(&mut eps[0], 130)
        .into_iter()
        .filter(|f| repr(f).opcode == Opcode::Prepare)
        .collect();
    assert_eq!(prepares.len(), 3);
    let first = prepares.remove(0); // lost, for now
    for f in &prepares {
        eps[1].handle_frame(t(140), f).unwrap();
    }
    // 1 answers with a message of its own: the ACK on it says 0 is missing, 1 and 2 arrived.
    let ride = |eps: &mut Vec<Endpoint>, now: u64| {
        eps[1].send_reliable(t(now), &[(0, b"r")]).unwrap();
        let frames = drain(&mut eps[1], now);
        assert_eq!(frames.len(), 1, "no ACK of its own");
        frames.into_iter().next().unwrap()
    };
    let with_map = ride(&mut eps, 150);
    let r = repr(&with_map);
    assert!(r.ack && r.sack);
    assert_eq!(r.payload_len as usize, onepipe_wire::PIGGYBACK_SACK_LEN + 1);
    eps[0].handle_frame(t(160), &with_map).unwrap();
    let sender = eps[0].reliable_sender();
    assert_eq!(sender.counters().packets_acked, 2, "selectively");
    assert_eq!(sender.unacked_packets(), 1);
    eps[1].handle_frame(t(170), &first).unwrap();
    let without_map = ride(&mut eps, 180);
    let r = repr(&without_map);
    assert!(r.ack && !r.sack);
    assert_eq!(r.payload_len as usize, onepipe_wire::PIGGYBACK_LEN + 1);
    eps[0].handle_frame(t(190), &without_map).unwrap();
    assert_eq!(eps[0].reliable_sender().unacked_packets(), 0, "cumulatively");
}

/// Promise mode (docs/ordering.md, "Promises"): a visit that ends in the middle of a
/// scattering finishes it, then beacons a barrier of the clock plus the lead; what is sent
/// after that is stamped at or above it. Without promise mode a visit's end costs nothing.
#[test]
fn end_visit_finishes_the_scattering_then_promises() {
    let mut plain = endpoint(0, 4);
    assert_eq!(plain.end_visit(t(100)), 0);
    let mut c = plain.config().clone();
    c.promise_lead = Some(Duration::from_nanos(10_000));
    let mut ep = Endpoint::new(c, t(0));
    ep.send_unreliable(t(100), &[(1, b"a"), (2, b"b"), (3, b"c")])
        .unwrap();
    let mut buf = [0u8; 256];
    let len = ep.poll_transmit(t(100), &mut buf).unwrap();
    let stamp = repr(&buf[..len]).msg_ts;
    assert_eq!(stamp.raw(), 100);
    // Two packets of the scattering left, then the promise.
    assert_eq!(ep.end_visit(t(200)), 3);
    let closing = drain(&mut ep, 200);
    let kinds: Vec<(Opcode, u64, u64)> = closing
        .iter()
        .map(|f| repr(f))
        .map(|r| (r.opcode, r.msg_ts.raw(), r.barrier.raw()))
        .collect();
    assert_eq!(
        kinds,
        [
            (Opcode::Data, 100, 100),
            (Opcode::Data, 100, 100),
            (Opcode::Beacon, 10_200, 10_200)
        ]
    );
    assert_eq!(ep.counters().promises_sent, 1);
    // Nothing new to promise yet (less than a quarter of a beacon interval later).
    assert_eq!(ep.end_visit(t(200)), 0);
    // The promise binds what is sent next, though the clock is still below it.
    ep.send_unreliable(t(300), &[(1, b"d")]).unwrap();
    let frames = drain(&mut ep, 300);
    assert_eq!(repr(&frames[0]).msg_ts.raw(), 10_200);
    assert_eq!(ep.poll_released().map(|(_, ts)| ts), Some(t(100)));
    assert_eq!(ep.poll_released().map(|(_, ts)| ts), Some(t(10_200)));
    assert!(
        ep.timestamp(t(300)) >= t(10_200),
        "the host timestamp is what it may still issue"
    );
}

/// Releases of both services come back in the order they were stamped (a log of them must
/// show one host's timestamps rising), though best effort is asked first.
#[test]
fn releases_of_both_services_come_in_timestamp_order() {
    let mut ep = endpoint(0, 4);
    let reliable = ep.send_reliable(t(100), &[(1, b"r")]).unwrap();
    let best_effort = ep.send_unreliable(t(100), &[(2, b"b")]).unwrap();
    drain(&mut ep, 200);
    let first = ep.poll_released().unwrap();
    let second = ep.poll_released().unwrap();
    assert_eq!(ep.poll_released(), None);
    assert_eq!(
        (first.0, second.0),
        (reliable, best_effort),
        "the reliable one left first"
    );
    assert!(first.1 < second.1);
}

/// The next send failure; process failures before it are passed over.
fn send_failure(ep: &mut Endpoint) -> Option<SendFailure> {
    std::iter::from_fn(|| ep.poll_event()).find_map(|e| match e {
        EndpointEvent::SendFailed(f) => Some(f),
        EndpointEvent::ProcessFailed { .. } => None,
    })
}

/// The next process failure, (process, failure timestamp), which comes before any send
/// failure it caused.
fn process_failure(ep: &mut Endpoint) -> Option<(u32, Instant)> {
    match ep.poll_event() {
        Some(EndpointEvent::ProcessFailed { process, ts }) => Some((process, ts)),
        None => None,
        Some(other) => panic!("expected a process failure, got {other:?}"),
    }
}

/// A clock stepped back (NTP): the barrier never goes back and the host keeps beaconing once
/// an interval, so its ToR never takes its link for dead while the clock catches up.
#[test]
fn after_a_clock_step_back_beacons_keep_coming_and_the_barrier_holds() {
    let mut ep = endpoint(0, 2);
    ep.handle_timeout(t(100_000));
    let before = repr(&drain(&mut ep, 100_000)[0]).barrier;
    ep.step_clock(t(100_000), -20_000);
    let mut now = 100_000;
    for _ in 0..5 {
        let due = ep.poll_timeout().as_nanos();
        assert!(due <= now + 1_000, "next beacon at {due} ns, now {now} ns");
        now = due.max(now);
        ep.handle_timeout(t(now));
        let frames = drain(&mut ep, now);
        let beacon = repr(frames.last().expect("a beacon each interval"));
        assert_eq!(beacon.opcode, Opcode::Beacon);
        assert!(beacon.barrier.unwrap_near(t(now)) >= before.unwrap_near(t(now)));
    }
}
