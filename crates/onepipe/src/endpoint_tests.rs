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
    let receipt = ep
        .send_unreliable(t(100), &[(1, b"0123456789abcdef"), (2, b"xy")])
        .unwrap();
    let frames = drain(&mut ep, 100);
    assert_eq!(frames.len(), 3);
    let reprs: Vec<Repr> = frames.iter().map(|f| repr(f)).collect();
    for r in &reprs {
        assert_eq!(r.msg_ts, receipt.ts.to_wire());
        // Barrier on the uplink never exceeds what is still queued (docs/ordering.md).
        assert_eq!(r.barrier, receipt.ts.to_wire());
        assert_eq!(r.msg_id, receipt.msg_id);
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
        sender.poll_failure(),
        Some(SendFailure {
            ts: t(900),
            dst: 0,
            msg_id: 900
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
    let receipt = ep.send_unreliable(t(1_200), &[(1, b"y")]).unwrap();
    assert!(receipt.ts > t(50_000));
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
