//! Edge cases of the reliable service, sans-IO: windows, credits, forged ACKs, the retry
//! budget (paper 5.1, 6.1).

use super::ReliableConfig;
use super::receiver::{AckRelease, Admit, ReliableReceiver};
use super::sender::ReliableSender;
use crate::endpoint::FailureReason;
use onepipe_wire::{AckPayload, Duration, Instant};

/// Nothing to ride on, and no reason to hold lone ACKs.
const IDLE: AckRelease = AckRelease::Idle { hold_lone: false };

pub(super) fn t(us: u64) -> Instant {
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
pub(super) fn sender(window: u32) -> ReliableSender {
    ReliableSender::new(config(window), 4, 100)
}

/// Releases what fits, with timestamps 1, 2, 3, ...
pub(super) fn release(s: &mut ReliableSender) -> usize {
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

/// A sender whose one packet, (1, 0), went at t(0) and again at its timeout at t(100) (RTO
/// 100 us before any sample); the connection is backed off once.
fn timed_out_once() -> ReliableSender {
    let mut s = sender(8);
    s.submit(0, &[(1, b"a")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(0)), vec![(1, 0)]);
    s.on_timeout(t(100));
    assert_eq!(drain(&mut s, t(100)), vec![(1, 0)], "timed out once");
    s
}

pub(super) fn ack(window_packets: u32) -> AckPayload {
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
    assert_eq!(s.counters().packets_acked, 3, "the selective bits, once each");
    s.on_ack(t(502), 1, 4, &ack(8));
    assert_eq!(
        s.counters().packets_acked,
        4,
        "the repaired hole, not the three again"
    );
}

/// Karn's rule: an ACK of a retransmitted packet measures nothing, so it must not undo the
/// backoff. Found in the simulator (Fig. 8 at 128 processes): saturated queues pushed the
/// RTT past the estimate, each timeout's backoff was dropped by the ACK of the retransmission,
/// and the next packet timed out again; one spurious retransmission per packet.
#[test]
fn ack_of_a_retransmission_keeps_the_backoff() {
    let mut s = timed_out_once();
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

/// Timeouts visit transmissions oldest first and stop at the first too young to be due at the
/// un-backed-off RTO. An older transmission of a backed-off connection is not due yet when a
/// younger one of another connection is: it must stay, and go when its own RTO has passed.
#[test]
fn an_older_backed_off_transmission_waits_behind_a_younger_due_one() {
    let mut s = timed_out_once(); // backed off: next RTO 200 us
    s.submit(1, &[(2, b"b")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(150)), vec![(2, 0)]);
    s.on_timeout(t(260));
    assert_eq!(drain(&mut s, t(260)), vec![(2, 0)], "only the younger one is due");
    let next = s.poll_timeout().expect("two packets unacknowledged");
    assert!(
        next <= t(300),
        "the older one is due at t(300), deadline {next:?}"
    );
    s.on_timeout(t(299));
    assert!(drain(&mut s, t(299)).is_empty());
    s.on_timeout(t(300));
    assert_eq!(drain(&mut s, t(300)), vec![(1, 0)], "kept, not lost");
    // Acknowledged packets are never sent again, whatever timers they left behind.
    s.on_ack(t(310), 1, 1, &ack(8));
    s.on_ack(t(310), 2, 1, &ack(8));
    s.on_timeout(t(5000));
    assert!(drain(&mut s, t(5000)).is_empty());
    assert_eq!(s.poll_timeout(), None, "nothing left to time");
    assert_eq!(s.counters().retransmissions, 3);
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
    s.on_timeout(t(100)); // window 8 -> 4, second copy queued
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

/// Once the second copy has left, an ACK may be for either copy: the cut stands. A first
/// timeout halves the window.
#[test]
fn a_timeout_after_the_resend_left_keeps_its_cut() {
    let mut s = timed_out_once(); // the second copy left
    s.on_ack(t(150), 1, 1, &ack(8));
    assert_eq!(s.counters().spurious_timeouts, 0);
    s.submit(1, &[(1, &[7u8; 800])]); // eight packets
    assert_eq!(
        release(&mut s),
        1,
        "larger than the window, it goes on the idle connection"
    );
    assert_eq!(
        drain(&mut s, t(150)),
        vec![(1, 1), (1, 2), (1, 3), (1, 4)],
        "window 8 halved: four of its eight packets now"
    );
    s.check_invariants();
    s.on_ack(t(200), 1, 5, &ack(8));
    assert_eq!(
        drain(&mut s, t(200)),
        vec![(1, 5), (1, 6), (1, 7), (1, 8)],
        "the rest as the window opens"
    );
    s.check_invariants();
}

/// A timeout that repeats before anything is acknowledged (the RTO had backed off) is more
/// than a late packet: the window starts again from one packet.
#[test]
fn a_repeated_timeout_restarts_the_window_from_one_packet() {
    let mut s = timed_out_once(); // window 8 -> 4, RTO 100 -> 200 us
    s.on_timeout(t(299));
    assert!(drain(&mut s, t(299)).is_empty(), "backed off to 200 us");
    s.on_timeout(t(300)); // window 4 -> 1
    assert_eq!(drain(&mut s, t(300)), vec![(1, 0)]);
    s.on_ack(t(350), 1, 1, &ack(8)); // slow start: 2
    s.submit(1, &[(1, &[7u8; 800])]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(350)), vec![(1, 1), (1, 2)]);
    s.check_invariants();
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

/// Paper 5.2: a recall, and each packet of a recalled message, takes no window once the
/// cumulative point passes it; before that an out-of-order one holds its place beyond the gap
/// like any other (freeing it at once underflowed the in-order count).
#[test]
fn discarded_packets_free_their_window_once_in_order() {
    let mut r = ReliableReceiver::new(4, 3);
    assert_eq!(r.on_prepare(t(0), 1, 1, false), Admit::Store); // PSN 0 missing
    r.discard(t(0), 1, 1); // a recall
    assert_eq!(r.held_packets(1), Some((1, 1)), "held beyond the gap");
    assert_eq!(r.on_prepare(t(0), 1, 0, false), Admit::Store);
    assert_eq!(
        r.held_packets(1),
        Some((1, 0)),
        "PSN 0 waits for delivery; 1 is freed"
    );
    r.discard(t(0), 1, 0); // its message was recalled
    assert_eq!(r.held_packets(1), Some((0, 0)));
    let (_, cumulative, a) = r.poll_ack(t(0), IDLE).unwrap();
    assert_eq!((cumulative, a.window_packets), (2, 4), "the whole window is free");
    // Forged or repeated PSNs change nothing and never underflow.
    for (src, psn) in [(1, 0), (1, 3), (1, 1_000), (1, u32::MAX), (2, 0), (9, 0)] {
        r.discard(t(0), src, psn);
    }
    assert_eq!(r.held_packets(1), Some((0, 0)));
    assert_eq!(r.on_prepare(t(0), 1, 5, false), Admit::Store);
    assert_eq!(r.held_packets(1), Some((1, 1)));
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
/// Both indexes: a table in small systems, a hash map past `DENSE_INDEX_PROCESSES_MAX`.
#[test]
fn connections_are_listed_in_peer_order() {
    for base in [0, super::DENSE_INDEX_PROCESSES_MAX] {
        let count = base + 10;
        let mut c = super::Connections::new(count);
        for peer in [7, 2, 9, 2, 0, 5].map(|p| base + p) {
            assert!(c.get_or_open(peer, || peer * 10).is_some());
        }
        assert!(c.get_or_open(count, || 0).is_none(), "not a process");
        let peers: Vec<u32> = (0..c.peer_count()).map(|i| c.peer_at(i)).collect();
        assert_eq!(peers, [0, 2, 5, 7, 9].map(|p| base + p));
        assert_eq!(c.get(base + 9), Some(&((base + 9) * 10)));
        assert_eq!(c.get(base + 2), Some(&((base + 2) * 10)), "opened once, kept");
        assert_eq!(c.get(base + 3), None);
        *c.get_mut(base + 5).expect("open") += 1;
        assert_eq!(c.get(base + 5), Some(&((base + 5) * 10 + 1)));
    }
}

/// (destination, PSN, recall, message id) of everything transmittable now.
pub(super) fn drain_full(s: &mut ReliableSender, now: Instant) -> Vec<(u32, u32, bool, u64)> {
    let mut out = Vec::new();
    while let Some(tx) = s.poll_transmit(now) {
        assert!(!tx.recall || (tx.payload.is_empty() && (tx.frag_index, tx.frag_count) == (0, 1)));
        out.push((tx.dst, tx.psn, tx.recall, tx.msg_id));
    }
    out
}

fn receiver_failed(process: u32) -> FailureReason {
    FailureReason::ReceiverFailed { process }
}

/// Paper 5.2 Recall: "If a discarded message is in a scattering ... the scattering needs to be
/// aborted, i.e., messages to other receivers in the same scattering need to be recalled ...
/// The sender completes Recall after collecting the ACKs." The aborted scattering holds the
/// commit barrier until then, so nobody delivers a message of it meanwhile.
#[test]
fn failed_receiver_that_had_not_acked_aborts_the_scattering_and_recalls_the_rest() {
    let mut s = sender(8);
    s.submit(7, &[(1, b"x"), (2, b"y"), (3, b"z")]);
    release(&mut s);
    assert_eq!(drain(&mut s, t(0)), vec![(1, 0), (2, 0), (3, 0)]);
    s.on_ack(t(5), 2, 1, &ack(8)); // 2 has it; 1 and 3 have not answered
    s.on_process_failed(1);
    s.check_invariants();
    let f = s.poll_failure().expect("reported");
    assert_eq!(
        (f.ts, f.dst, f.msg_id, f.reason),
        (Instant::from_nanos(1), 1, 7, receiver_failed(1))
    );
    assert!(s.poll_failure().is_none(), "one report per scattering");
    assert_eq!(
        drain_full(&mut s, t(6)),
        vec![(2, 1, true, 7), (3, 1, true, 7)],
        "a recall behind each message that left, none to the failed receiver"
    );
    let clock = Instant::from_nanos(100);
    assert_eq!(
        s.commit_barrier(clock),
        Instant::from_nanos(1),
        "held until recalled"
    );
    assert!(!s.recall_complete(1));
    s.on_ack(t(7), 2, 2, &ack(8));
    s.check_invariants();
    assert_eq!(
        s.commit_barrier(clock),
        Instant::from_nanos(1),
        "3 has not answered"
    );
    s.on_ack(t(8), 3, 2, &ack(8)); // its message and the recall
    s.check_invariants();
    assert!(s.recall_complete(1));
    assert_eq!(s.commit_barrier(clock), clock);
    assert!(s.is_idle());
    assert_eq!(
        (s.counters().scatterings_aborted, s.counters().recalls_sent),
        (1, 2)
    );
    assert_eq!(s.counters().messages_failed, 0, "not a give-up");
}

/// Paper appendix: "R fails after sending ACK in Prepare phase: deliver", and "The receiver R'
/// of another message M' in the same scattering fails after sending ACK in Prepare phase:
/// deliver according to 2PC".
#[test]
fn scattering_acknowledged_by_the_failed_receiver_is_not_aborted() {
    let mut s = sender(8);
    s.submit(7, &[(1, b"x"), (2, b"y")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_ack(t(5), 1, 1, &ack(8));
    s.on_process_failed(1);
    s.check_invariants();
    assert!(s.poll_failure().is_none());
    assert!(drain(&mut s, t(6)).is_empty(), "nothing recalled");
    assert!(s.recall_complete(1), "nothing to recall: complete at once");
    s.on_ack(t(7), 2, 1, &ack(8));
    assert!(s.is_idle());
}

/// A packet not sent yet already has its PSN, which its receiver waits for: it goes out as a
/// recall (empty), never with its payload; a message none of whose packets left needs no other
/// recall.
#[test]
fn unsent_packets_of_an_aborted_scattering_go_as_recalls() {
    let mut s = sender(8);
    s.submit(7, &[(1, b"x"), (2, &[0u8; 250])]); // 1 + 3 packets
    release(&mut s);
    assert_eq!(s.poll_transmit(t(0)).map(|tx| (tx.dst, tx.psn)), Some((1, 0)));
    assert_eq!(s.poll_transmit(t(0)).map(|tx| (tx.dst, tx.psn)), Some((2, 0)));
    s.on_process_failed(1);
    s.check_invariants();
    assert_eq!(
        drain_full(&mut s, t(1)),
        vec![(2, 1, true, 7), (2, 2, true, 7)],
        "fragments 1 and 2 go as recalls; no PSN 3"
    );
    s.on_ack(t(2), 2, 3, &ack(8));
    assert!(s.is_idle() && s.recall_complete(1));

    s.submit(8, &[(2, b"y"), (3, b"z")]);
    release(&mut s);
    s.on_process_failed(3);
    assert_eq!(
        drain_full(&mut s, t(3)),
        vec![(2, 3, true, 8)],
        "never sent: one recall"
    );
    assert_eq!(s.poll_failure().map(|f| f.reason), Some(receiver_failed(1)));
    assert_eq!(
        s.poll_failure().map(|f| (f.msg_id, f.reason)),
        Some((8, receiver_failed(3)))
    );
    s.on_ack(t(4), 2, 4, &ack(8));
    s.check_invariants();
    assert!(s.is_idle() && s.recall_complete(3));
}

/// A scattering still waiting for window credits never had a timestamp nor sent a packet: it
/// is dropped whole, its credits go back, and its failure carries no timestamp.
#[test]
fn waiting_scattering_naming_the_failed_process_is_dropped_with_its_credits() {
    let mut s = sender(2);
    s.submit(0, &[(2, &[0u8; 200])]); // fills the window to 2
    s.submit(1, &[(1, b"a"), (2, b"b")]); // a credit towards 1, none towards 2
    assert_eq!(release(&mut s), 1);
    drain(&mut s, t(0));
    s.check_invariants();
    s.on_process_failed(1);
    s.check_invariants();
    assert_eq!(s.waiting(), 0);
    let f = s.poll_failure().expect("reported");
    assert_eq!((f.ts, f.msg_id, f.reason), (Instant::ZERO, 1, receiver_failed(1)));
    assert!(s.recall_complete(1));
    s.on_ack(t(1), 2, 2, &ack(2));
    s.submit(2, &[(2, &[0u8; 200])]);
    assert_eq!(release(&mut s), 1, "the window to 2 is whole again");
    assert_eq!(s.unacked_packets(), 2);
}

/// Paper 5.2 Receiver Recovery: a failed peer that rejoins gets a fresh connection, and
/// scatterings to it wait for, and take, that connection's credits like any other.
#[test]
fn a_rejoined_peer_takes_credits_afresh() {
    let mut s = sender(2);
    s.submit(0, &[(1, &[0u8; 200])]); // fills the window to 1
    s.submit(1, &[(1, b"a"), (2, b"b")]); // waits for a credit towards 1
    assert_eq!(release(&mut s), 1);
    drain(&mut s, t(0));
    s.on_ack(t(1), 1, 1, &ack(2)); // a credit towards 1 frees; no release pass yet
    s.on_process_failed(1);
    s.reset_peer(1);
    s.check_invariants();
    assert_eq!(s.waiting(), 0, "the waiting one was aborted with the failure");
    s.submit(2, &[(1, &[0u8; 300]), (2, b"c")]); // 3 packets to 1, more than its window
    s.submit(3, &[(1, b"d")]);
    assert_eq!(
        release(&mut s),
        1,
        "the first goes on the idle connection; the second waits"
    );
    s.check_invariants();
    let to_1 = |sent: Vec<(u32, u32)>| sent.into_iter().filter(|p| p.0 == 1).collect::<Vec<_>>();
    assert_eq!(
        to_1(drain(&mut s, t(2))),
        vec![(1, 0), (1, 1)],
        "the third packet is held"
    );
    s.on_ack(t(3), 1, 2, &ack(4));
    assert_eq!(release(&mut s), 1);
    assert_eq!(to_1(drain(&mut s, t(3))), vec![(1, 2), (1, 3)]);
    s.check_invariants();
    let released: Vec<u64> = std::iter::from_fn(|| s.poll_released().map(|r| r.0)).collect();
    assert_eq!(released, vec![0, 2, 3]);
}

/// A recall is a packet of its connection: lost, it is sent again on timeout.
#[test]
fn lost_recall_is_retransmitted_on_timeout() {
    let mut s = sender(8);
    s.submit(7, &[(1, b"x"), (2, b"y")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_ack(t(1), 2, 1, &ack(8));
    s.on_process_failed(1);
    assert_eq!(drain_full(&mut s, t(2)), vec![(2, 1, true, 7)]);
    let mut resent = Vec::new();
    let mut due = t(2);
    for _ in 0..3 {
        due = s.poll_timeout().expect("the recall is timed"); // may be early, never late
        s.on_timeout(due);
        resent = drain_full(&mut s, due);
        if !resent.is_empty() {
            break;
        }
    }
    assert_eq!(resent, vec![(2, 1, true, 7)], "sent again");
    assert!(!s.recall_complete(1));
    s.on_ack(due, 2, 2, &ack(8));
    assert!(s.recall_complete(1) && s.is_idle());
    assert_eq!(s.counters().retransmissions, 1);
}

/// Two failures: a scattering aborted for the first is not aborted (nor reported) again, and
/// closing the second's connection settles the recall that was waiting for it.
#[test]
fn second_failure_settles_the_recalls_of_the_first() {
    let mut s = sender(8);
    s.submit(7, &[(1, b"x"), (2, b"y"), (3, b"z")]);
    release(&mut s);
    drain(&mut s, t(0));
    s.on_process_failed(1);
    assert_eq!(drain_full(&mut s, t(1)).len(), 2, "recalls to 2 and 3");
    s.on_process_failed(2);
    s.on_process_failed(2); // repeated: nothing changes
    s.check_invariants();
    assert_eq!(s.poll_failure().map(|f| f.reason), Some(receiver_failed(1)));
    assert!(s.poll_failure().is_none(), "aborted once");
    assert!(s.recall_complete(2), "nothing was aborted for 2");
    assert!(!s.recall_complete(1));
    s.on_ack(t(2), 3, 2, &ack(8));
    s.check_invariants();
    assert!(s.recall_complete(1) && s.is_idle());
    assert_eq!(s.counters().scatterings_aborted, 1);
}

/// Sends up to `n` packets, noting in `sent` the next PSN each receiver has been sent (first
/// transmissions leave in order), for the property tests' ACKs.
fn transmit(s: &mut ReliableSender, now: Instant, n: usize, sent: &mut [u32; 4]) {
    for _ in 0..n {
        let Some(tx) = s.poll_transmit(now) else { break };
        let next = tx.psn.wrapping_add(1);
        if super::sender::psn_before(sent[tx.dst as usize], next) {
            sent[tx.dst as usize] = next;
        }
    }
}

/// Submits scattering `id` of `packets` 100-byte packets to each process of 0..4 in `mask` for
/// which `live` holds, if there is one and the buffer has room; whether it did.
fn submit_masked(s: &mut ReliableSender, id: u64, mask: u8, packets: u8, live: impl Fn(u32) -> bool) -> bool {
    let payload = vec![0u8; packets as usize * 100];
    let scatter: Vec<(u32, &[u8])> = (0..4u32)
        .filter(|&d| mask & (1 << d) != 0 && live(d))
        .map(|d| (d, &payload[..]))
        .collect();
    let fits = !scatter.is_empty() && scatter.len() * packets as usize <= s.room_packets();
    if fits {
        s.submit(id, &scatter);
    }
    fits
}

mod failure_properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A scattering to the live processes picked by the mask, of 1..=3 packets each.
        Submit {
            mask: u8,
            packets: u8,
        },
        Transmit(u8),
        Ack(u32),
        Fail(u32),
        Timeout,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u8..16, 1u8..4).prop_map(|(mask, packets)| Op::Submit { mask, packets }),
            4 => (1u8..8).prop_map(Op::Transmit),
            3 => (0u32..4).prop_map(Op::Ack),
            1 => (0u32..4).prop_map(Op::Fail),
            1 => Just(Op::Timeout),
        ]
    }

    proptest! {
        /// Paper 5.2 Recall under any interleaving of sends, transmissions, ACKs, timeouts and
        /// failures: the bookkeeping stays exact after every step; each aborted scattering is
        /// reported once; and once the live receivers acknowledge everything, every Recall is
        /// complete, the buffer is empty and the commit barrier is free.
        #[test]
        fn recall_bookkeeping_stays_exact_and_completes(ops in proptest::collection::vec(op(), 1..60)) {
            let mut s = sender(4);
            let mut failed = [false; 4];
            // Next PSN each live receiver has been sent (first transmissions leave in order).
            let mut sent = [0u32; 4];
            let mut now = t(0);
            let mut next_id = 0;
            for op in ops {
                match op {
                    Op::Submit { mask, packets } => {
                        if submit_masked(&mut s, next_id, mask, packets, |d| !failed[d as usize]) {
                            next_id += 1;
                        }
                        release(&mut s);
                    }
                    Op::Transmit(n) => transmit(&mut s, now, n as usize, &mut sent),
                    Op::Ack(d) if !failed[d as usize] => s.on_ack(now, d, sent[d as usize], &ack(4)),
                    Op::Ack(_) => {}
                    Op::Fail(d) => {
                        failed[d as usize] = true;
                        s.on_process_failed(d);
                    }
                    Op::Timeout => {
                        now += Duration::from_micros(150);
                        s.on_timeout(now);
                    }
                }
                s.check_invariants();
            }
            // Liveness: the live receivers acknowledge whatever comes.
            for _ in 0..1_000 {
                if s.is_idle() && s.waiting() == 0 {
                    break;
                }
                release(&mut s);
                transmit(&mut s, now, usize::MAX, &mut sent);
                for d in 0..4u32 {
                    if !failed[d as usize] {
                        s.on_ack(now, d, sent[d as usize], &ack(4));
                    }
                }
                s.check_invariants();
            }
            prop_assert!(s.is_idle(), "buffer drained");
            prop_assert_eq!(s.commit_barrier(now), now);
            for d in 0..4u32 {
                prop_assert_eq!(s.recall_complete(d), failed[d as usize]);
            }
            let mut aborted = Vec::new();
            while let Some(f) = s.poll_failure() {
                if let FailureReason::ReceiverFailed { process } = f.reason {
                    prop_assert!(failed[process as usize]);
                    prop_assert_eq!(f.dst, process);
                    aborted.push(f.msg_id);
                }
            }
            let reported = aborted.len();
            aborted.sort_unstable();
            aborted.dedup();
            prop_assert_eq!(aborted.len(), reported, "each aborted scattering reported once");
            prop_assert_eq!(s.counters().scatterings_aborted as usize, reported);
        }
    }
}

mod credit_properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A scattering to the processes picked by the mask, of 1..=6 packets each (more than
        /// some windows give).
        Submit {
            mask: u8,
            packets: u8,
        },
        Transmit(u8),
        /// Receiver `dst` acknowledges `count` more of what it was sent, and advertises a
        /// window of `window` packets.
        Ack {
            dst: u32,
            count: u8,
            window: u32,
        },
        Timeout,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u8..16, 1u8..7).prop_map(|(mask, packets)| Op::Submit { mask, packets }),
            4 => (1u8..12).prop_map(Op::Transmit),
            4 => (0u32..4, 0u8..6, 1u32..9).prop_map(|(dst, count, window)| Op::Ack { dst, count, window }),
            1 => Just(Op::Timeout),
        ]
    }

    proptest! {
        /// Paper 6.1 credits under any interleaving of sends, transmissions, partial ACKs with
        /// changing windows, and timeouts: after every step the bookkeeping is exact, credits
        /// went oldest first, and no scattering waits for a connection that has credits left
        /// (`check_invariants`); once the receivers acknowledge everything, all is released,
        /// even messages larger than the window they advertise.
        #[test]
        fn credits_go_oldest_first_and_nothing_waits_for_a_free_window(
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut s = sender(8);
            let mut sent = [0u32; 4];
            let mut acked = [0u32; 4];
            let mut now = t(0);
            let mut next_id = 0;
            let mut submitted = 0;
            for op in ops {
                match op {
                    Op::Submit { mask, packets } => {
                        if submit_masked(&mut s, next_id, mask, packets, |_| true) {
                            next_id += 1;
                            submitted += 1;
                        }
                    }
                    Op::Transmit(n) => transmit(&mut s, now, n as usize, &mut sent),
                    Op::Ack { dst, count, window } => {
                        let d = dst as usize;
                        acked[d] = (acked[d] + count as u32).min(sent[d]);
                        s.on_ack(now, dst, acked[d], &ack(window));
                    }
                    Op::Timeout => {
                        now += Duration::from_micros(150);
                        s.on_timeout(now);
                    }
                }
                release(&mut s);
                s.check_invariants();
            }
            for _ in 0..1_000 {
                if s.is_idle() && s.waiting() == 0 {
                    break;
                }
                release(&mut s);
                transmit(&mut s, now, usize::MAX, &mut sent);
                for d in 0..4u32 {
                    s.on_ack(now, d, sent[d as usize], &ack(2));
                }
                s.check_invariants();
            }
            prop_assert!(s.is_idle() && s.waiting() == 0, "everything released and acknowledged");
            let mut released = 0;
            while s.poll_released().is_some() {
                released += 1;
            }
            prop_assert_eq!(released, submitted);
        }
    }
}
