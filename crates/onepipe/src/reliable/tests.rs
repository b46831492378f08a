//! Edge cases of the reliable service, sans-IO: windows, credits, forged ACKs, the retry
//! budget (paper 5.1, 6.1).

use super::ReliableConfig;
use super::receiver::{AckRelease, Admit, ReliableReceiver};
use super::sender::ReliableSender;
use onepipe_wire::{AckPayload, Duration, Instant};

/// Nothing to ride on, and no reason to hold lone ACKs.
const IDLE: AckRelease = AckRelease::Idle { hold_lone: false };

fn t(us: u64) -> Instant {
    Instant::from_nanos(1_000_000 + us * 1_000)
}

fn config(window: u32) -> ReliableConfig {
    ReliableConfig {
        recv_window_packets: window,
        initial_cwnd_packets: window,
        rto_initial: Duration::from_micros(100),
        rto_min: Duration::from_micros(100),
        rto_max: Duration::from_micros(800),
        retries_max: 3,
        give_up_after: Duration::from_micros(300),
        send_buffer_packets_max: 64,
        ..ReliableConfig::default()
    }
}

/// 100-byte fragments, 4 processes.
fn sender(window: u32) -> ReliableSender {
    ReliableSender::new(config(window), 4, 100)
}

/// Releases what fits, with timestamps 1, 2, 3, ...
fn release(s: &mut ReliableSender) -> usize {
    let mut ts = 0;
    s.release(|| {
        ts += 1;
        Instant::from_nanos(ts)
    })
}

fn drain(s: &mut ReliableSender, now: Instant) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    while let Some(tx) = s.poll_transmit(now) {
        out.push((tx.dst, tx.psn));
    }
    out
}

fn ack(window_packets: u32) -> AckPayload {
    AckPayload {
        sack: 0,
        window_packets,
        received: 1,
        ce_marked: 0,
    }
}

#[test]
fn scattering_waits_for_window_and_goes_when_the_ack_opens_it() {
    let mut s = sender(2);
    s.submit(0, &[(1, &[0u8; 150])]); // 2 packets: fills the window of 2
    s.submit(1, &[(1, b"x"), (2, b"y")]);
    assert_eq!(release(&mut s), 1, "the second needs a packet of window to 1");
    assert_eq!(drain(&mut s, t(0)), vec![(1, 0), (1, 1)]);
    assert_eq!(s.waiting(), 1);
    assert_eq!(s.poll_released().map(|r| r.0), Some(0));
    s.on_ack(t(10), 1, 2, &ack(2));
    assert_eq!(release(&mut s), 1);
    assert_eq!(drain(&mut s, t(10)), vec![(1, 2), (2, 0)]);
}

/// Paper 6.1: "a scattering acquires credits from the send windows ... held in a wait queue
/// without releasing credits", so a large scattering is not starved by small ones behind it.
#[test]
fn waiting_scattering_keeps_its_credits() {
    let mut s = sender(4);
    s.submit(0, &[(1, &[0u8; 300])]); // 3 packets
    release(&mut s);
    drain(&mut s, t(0));
    s.submit(1, &[(1, &[0u8; 400])]); // 4 packets: 1 credit now, 3 more later
    s.submit(2, &[(1, b"small")]);
    assert_eq!(
        release(&mut s),
        0,
        "the large one holds the only credit; the small one waits"
    );
    s.on_ack(t(10), 1, 3, &ack(4));
    assert_eq!(release(&mut s), 1, "the large one completes first");
    assert_eq!(s.poll_released().map(|r| r.0), Some(0));
    assert_eq!(s.poll_released().map(|r| r.0), Some(1));
}

#[test]
fn forged_and_impossible_acks_are_counted_and_ignored() {
    let mut s = sender(4);
    s.on_ack(t(0), 3, 0, &ack(4));
    assert_eq!(s.counters().acks_invalid, 1, "no connection to 3");
    s.submit(0, &[(1, b"x")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_ack(t(1), 1, 7, &ack(4));
    assert_eq!(s.counters().acks_invalid, 2, "acknowledges PSNs never sent");
    assert!(!s.is_idle());
    s.on_ack(t(2), 1, 1, &ack(4));
    assert!(s.is_idle());
}

/// Issue: "a receiver that never answers leads to the send-failure callback, not to
/// unbounded buffering".
#[test]
fn silent_receiver_exhausts_the_retry_budget_and_frees_the_buffer() {
    let mut s = sender(4);
    s.submit(7, &[(1, b"x"), (2, b"y")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_ack(t(5), 2, 1, &ack(4)); // 2 answers, 1 never does
    let mut now = t(0);
    let mut sends = 0;
    while s.poll_failure().is_none() {
        now = s.poll_timeout().expect("a retransmission is due");
        s.on_timeout(now);
        sends += drain(&mut s, now).len();
        assert!(sends <= 3, "retries bounded by retries_max");
    }
    assert_eq!(sends, 3);
    assert!(s.is_idle(), "nothing of it stays buffered");
    assert!(s.commit_barrier(now) == now, "the commit barrier moves on");
    // Later messages to the unreachable receiver fail at once.
    s.submit(8, &[(1, b"z")]);
    release(&mut s);
    assert_eq!(s.poll_failure().map(|f| (f.msg_id, f.dst)), Some((8, 1)));
}

#[test]
fn selective_ack_repairs_a_hole_once_per_rtt() {
    let mut s = sender(8);
    s.submit(0, &[(1, &[0u8; 400])]); // PSNs 0..4
    release(&mut s);
    drain(&mut s, t(0));
    // PSN 0 lost; 1..3 arrived.
    let a = AckPayload {
        sack: 0b111,
        ..ack(8)
    };
    s.on_ack(t(500), 1, 0, &a);
    assert_eq!(drain(&mut s, t(500)), vec![(1, 0)], "the hole goes again");
    s.on_ack(t(501), 1, 0, &a);
    assert!(drain(&mut s, t(501)).is_empty(), "not again within an RTT");
    assert_eq!(s.counters().fast_retransmits, 1);
}

/// Karn's rule: an ACK of a retransmitted packet measures nothing, so it must not undo the
/// backoff. Found in the simulator (Fig. 8 at 128 processes): saturated queues pushed the
/// RTT past the estimate, each timeout's backoff was dropped by the ACK of the retransmission,
/// and the next packet timed out again; one spurious retransmission per packet.
#[test]
fn ack_of_a_retransmission_keeps_the_backoff() {
    let mut s = sender(8);
    s.submit(0, &[(1, b"a")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(0)), vec![(1, 0)]);
    s.on_timeout(t(100)); // RTO 100 us, no sample yet
    assert_eq!(drain(&mut s, t(100)), vec![(1, 0)], "timed out once");
    s.on_ack(t(150), 1, 1, &ack(8));
    s.submit(1, &[(1, b"b")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(150)), vec![(1, 1)]);
    s.on_timeout(t(260));
    assert!(
        drain(&mut s, t(260)).is_empty(),
        "backed off to 200 us: not due before t(350)"
    );
    s.on_ack(t(300), 1, 2, &ack(8)); // sent once: a real sample (150 us)
    s.submit(2, &[(1, b"c")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(300)), vec![(1, 2)]);
    s.on_timeout(t(300 + 449));
    assert!(
        drain(&mut s, t(749)).is_empty(),
        "RTO 150 + 4 * 75 us = 450 us, not backed off"
    );
    s.on_timeout(t(300 + 450));
    assert_eq!(
        drain(&mut s, t(750)),
        vec![(1, 2)],
        "the backoff was reset by the sample"
    );
    assert_eq!(s.counters().retransmissions, 2);
}

/// A timeout whose packet is acknowledged before its second copy leaves was spurious (the
/// packet was late, not lost): the window cut is undone, and the ACK, which can only be for
/// the first copy, is an RTT sample. Found on the inproc testbed, where descheduled workers
/// made about 400 spurious timeouts per host per second and held windows at 5-8 packets.
#[test]
fn a_timeout_disproved_before_the_resend_is_undone() {
    let mut s = sender(8);
    s.submit(0, &[(1, b"a")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(0)), vec![(1, 0)]);
    s.on_timeout(t(100)); // window 8 -> 1, second copy queued
    s.on_ack(t(150), 1, 1, &ack(8)); // the first copy's ACK, before the second copy left
    assert_eq!(s.counters().spurious_timeouts, 1);
    s.submit(1, &[(1, &[7u8; 400])]); // four packets
    assert_eq!(release(&mut s), 1, "the window of 8 is back");
    assert_eq!(
        drain(&mut s, t(150)),
        vec![(1, 1), (1, 2), (1, 3), (1, 4)],
        "no second copy of PSN 0: it was acknowledged"
    );
    // The late ACK was a sample of 150 us: RTO 150 + 4 * 75 = 450 us, not the initial 100.
    s.on_timeout(t(150 + 449));
    assert!(drain(&mut s, t(599)).is_empty());
    s.on_timeout(t(150 + 450));
    assert_eq!(drain(&mut s, t(600)).len(), 4);
}

/// Once the second copy has left, an ACK may be for either copy: the cut stands.
#[test]
fn a_timeout_after_the_resend_left_keeps_its_cut() {
    let mut s = sender(8);
    s.submit(0, &[(1, b"a")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_timeout(t(100));
    assert_eq!(drain(&mut s, t(100)), vec![(1, 0)], "the second copy left");
    s.on_ack(t(150), 1, 1, &ack(8));
    assert_eq!(s.counters().spurious_timeouts, 0);
    s.submit(1, &[(1, &[7u8; 400])]);
    assert_eq!(
        release(&mut s),
        0,
        "window 1 + 1 from slow start: four packets wait"
    );
}

#[test]
fn commit_barrier_is_the_oldest_unacknowledged_timestamp() {
    let mut s = sender(8);
    s.submit(0, &[(1, b"a")]);
    s.submit(1, &[(2, b"b")]);
    release(&mut s); // timestamps 1 and 2
    drain(&mut s, t(0));
    let clock = Instant::from_nanos(100);
    assert_eq!(s.commit_barrier(clock), Instant::from_nanos(1));
    s.on_ack(t(1), 2, 1, &ack(8));
    assert_eq!(s.commit_barrier(clock), Instant::from_nanos(1), "ts 1 still open");
    s.on_ack(t(2), 1, 1, &ack(8));
    assert_eq!(s.commit_barrier(clock), clock, "nothing open: the clock");
}

/// An acknowledged scattering frees its room in the buffer even while an older one is still
/// open (one packet under repair must not stop the host); what acknowledged scatterings keep
/// in memory is bounded separately, by `RETAINED_BUFFERS` buffers.
#[test]
fn acknowledged_packets_free_room_behind_an_open_one() {
    use super::sender::RETAINED_BUFFERS;
    let max = config(8).send_buffer_packets_max;
    let mut s = sender(64);
    s.submit(0, &[(1, b"held")]);
    release(&mut s);
    drain(&mut s, t(0));
    // The packet to process 1 is never acknowledged; everything to process 2 is, one
    // buffer's worth at a time, until only the retained bound holds the sender back.
    let mut psn = 0;
    let mut submitted = 1;
    while s.room_packets() > 0 {
        let room = s.room_packets();
        for _ in 0..room {
            s.submit(submitted, &[(2, b"x")]);
            submitted += 1;
        }
        release(&mut s);
        drain(&mut s, t(1));
        psn += room as u32;
        s.on_ack(t(2), 2, psn, &ack(1 << 20));
        assert_eq!(s.unacked_packets(), 1, "only the packet to 1 is unacknowledged");
    }
    assert_eq!(s.retained_packets(), RETAINED_BUFFERS * max);
    assert!(submitted as usize > max, "acknowledged packets freed room");
    assert_eq!(
        s.commit_barrier(t(3)),
        Instant::from_nanos(1),
        "the first is still open"
    );
    // Its ACK retires everything at once.
    s.on_ack(t(4), 1, 1, &ack(8));
    assert!(s.is_idle());
    assert_eq!(s.room_packets(), max);
}

#[test]
fn receiver_suppresses_duplicates_and_bounds_each_sender() {
    let mut r = ReliableReceiver::new(4, 3);
    assert_eq!(r.on_prepare(t(0), 1, 0, false), Admit::Store);
    assert_eq!(r.on_prepare(t(0), 1, 0, false), Admit::Duplicate);
    assert_eq!(
        r.on_prepare(t(0), 1, 2, true),
        Admit::Store,
        "out of order within the window"
    );
    assert_eq!(
        r.on_prepare(t(0), 1, 4, false),
        Admit::OutOfWindow,
        "cumulative 1 + window 4 - 1 held"
    );
    assert_eq!(
        r.on_prepare(t(0), 9, 0, false),
        Admit::OutOfWindow,
        "no such process"
    );
    let (to, cumulative, a) = r.poll_ack(t(0), IDLE).unwrap();
    assert_eq!((to, cumulative), (1, 1));
    assert_eq!(a.sack, 0b1, "PSN 2 = cumulative + 1 + bit 0");
    assert_eq!(
        a.window_packets, 3,
        "one packet delivered-pending below cumulative"
    );
    assert_eq!((a.received, a.ce_marked), (4, 1));
    r.on_delivered(t(0), 1, 1);
    let (_, _, a) = r
        .poll_ack(t(0), IDLE)
        .expect("window opened by a quarter: tell the sender");
    assert_eq!(a.window_packets, 4);
}

/// An owed ACK rides on a prepare packet going its way, or goes alone once it has waited.
#[test]
fn owed_ack_rides_along_or_goes_alone_after_the_delay() {
    let mut r = ReliableReceiver::new(8, 3);
    r.on_prepare(t(0), 1, 0, false);
    r.on_prepare(t(0), 2, 0, false);
    let delay = AckRelease::OlderThan(Duration::from_micros(10));
    assert!(r.poll_ack(t(5), delay).is_none(), "young: wait for a ride");
    assert_eq!(r.take_ack(1).map(|(c, _)| c), Some(1), "rides to 1");
    assert!(r.take_ack(1).is_none(), "owed once");
    let (to, _, _) = r.poll_ack(t(10), delay).expect("2 waited long enough");
    assert_eq!(to, 2);
    assert!(r.poll_ack(t(20), IDLE).is_none(), "nothing else owed");
    assert_eq!((r.counters().acks_sent, r.counters().acks_piggybacked), (2, 1));
}

/// A loaded host holds the ACK of a lone in-order packet: the connection's next packet, a
/// ride, or the delay sends it. Anything else the sender needs soon is never held.
#[test]
fn lone_acks_wait_while_held_and_news_does_not() {
    let hold = AckRelease::Idle { hold_lone: true };
    let mut r = ReliableReceiver::new(8, 4);
    r.on_prepare(t(0), 1, 0, false);
    assert!(r.poll_ack(t(0), hold).is_none(), "one in-order packet: held");
    assert_eq!(r.ack_deadline(Duration::from_micros(10)), Some(t(10)));
    r.on_prepare(t(3), 1, 1, false);
    let (to, cumulative, a) = r.poll_ack(t(3), hold).expect("two packets: ready");
    assert_eq!((to, cumulative, a.received), (1, 2, 2));
    assert_eq!(r.ack_deadline(Duration::from_micros(10)), None, "nothing owed");

    r.on_prepare(t(4), 1, 2, false);
    let aged = AckRelease::OlderThan(Duration::from_micros(10));
    assert!(r.poll_ack(t(13), aged).is_none());
    assert_eq!(r.poll_ack(t(14), aged).map(|a| a.1), Some(3), "waited the delay");
    r.on_prepare(t(20), 1, 3, false);
    assert_eq!(r.poll_ack(t(20), IDLE).map(|a| a.1), Some(4), "not held: goes");

    // A gap, a duplicate and a congestion mark are each news.
    r.on_prepare(t(30), 2, 1, false);
    r.on_prepare(t(30), 1, 3, false);
    r.on_prepare(t(30), 3, 0, true);
    let mut news: Vec<u32> = std::iter::from_fn(|| r.poll_ack(t(30), hold).map(|a| a.0)).collect();
    news.sort();
    assert_eq!(news, [1, 2, 3]);
}

/// The SACK bitmap names the 64 PSNs after the cumulative point, across the seen ring's wrap.
#[test]
fn sack_bits_follow_the_cumulative_point_around_the_ring() {
    // Window 64: a ring of 128 PSNs.
    let mut r = ReliableReceiver::new(64, 3);
    for psn in 0..120 {
        assert_eq!(r.on_prepare(t(0), 1, psn, false), Admit::Store);
        r.on_delivered(t(0), 1, 1);
    }
    for psn in [121, 124, 130, 183] {
        r.on_prepare(t(0), 1, psn, false);
    }
    while r.poll_ack(t(0), IDLE).is_some() {}
    r.on_prepare(t(0), 1, 121, false); // a duplicate: ACKed again
    let (to, cumulative, ack) = r.poll_ack(t(0), IDLE).unwrap();
    assert_eq!((to, cumulative), (1, 120));
    // 121 -> bit 0, 124 -> bit 3, 130 -> bit 9, 183 (the window's last PSN) -> bit 62; the
    // ring of 128 wrapped at 128.
    assert_eq!(ack.sack, 1 | 1 << 3 | 1 << 9 | 1 << 62);
}

/// PSNs wrap at 2^32, and the seen ring must not jump there. A ring of 320 bits (window 256)
/// did: 2^32 is not a multiple of 320, so the PSNs after the wrap were looked for in the wrong
/// bits and the SACK missed them.
#[test]
fn seen_ring_is_continuous_where_psns_wrap() {
    let mut r = ReliableReceiver::new(256, 3);
    let cumulative = u32::MAX - 3;
    r.open_at(1, cumulative);
    // MAX-1 and 1 arrive; MAX-3, MAX-2, MAX and 0 do not (yet).
    assert_eq!(r.on_prepare(t(0), 1, u32::MAX - 1, false), Admit::Store);
    assert_eq!(r.on_prepare(t(0), 1, 1, false), Admit::Store);
    let (_, cum, ack) = r.poll_ack(t(0), IDLE).unwrap();
    assert_eq!(cum, cumulative);
    // Bit i is cumulative + 1 + i: MAX-1 is bit 1, 1 is bit 4.
    assert_eq!(ack.sack, 1 << 1 | 1 << 4);
    // The gaps fill across the wrap and the cumulative point passes it.
    for psn in [u32::MAX - 3, u32::MAX - 2, u32::MAX, 0] {
        assert_eq!(r.on_prepare(t(0), 1, psn, false), Admit::Store);
    }
    let (_, cum, ack) = r.poll_ack(t(0), IDLE).unwrap();
    assert_eq!((cum, ack.sack), (2, 0));
    assert_eq!(r.on_prepare(t(0), 1, 1, false), Admit::Duplicate);
}

/// Retransmission scans visit connections in peer order whatever order they were opened in
/// (the simulator's traces depend on it); ids beyond the system open nothing.
#[test]
fn connections_are_listed_in_peer_order() {
    let mut c = super::Connections::new(10);
    for peer in [7, 2, 9, 2, 0, 5] {
        assert!(c.get_or_open(peer, || peer * 10).is_some());
    }
    assert!(c.get_or_open(10, || 0).is_none(), "not a process");
    let peers: Vec<u32> = (0..c.peer_count()).map(|i| c.peer_at(i)).collect();
    assert_eq!(peers, [0, 2, 5, 7, 9]);
    assert_eq!(c.get(9), Some(&90));
}
