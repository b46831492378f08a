//! The host library across switches (crate::testing's fabric): the exchange of paper 3.2 with
//! virtual links and slots (3.3), the bound at submission, holding requests, failures (4).

use super::*;
use crate::testing::{Net, timing};
use onepipe_wire::Duration;
use proptest::prelude::*;
use std::collections::HashMap;

const HOP: Duration = Duration::from_micros(1);

/// Two leaves, two spines, two processes per leaf: 0, 1 under leaf0, 2, 3 under leaf1.
fn net(k: u8) -> Net {
    Net::new(2, 2, 2, timing(k, HOP), 7)
}

fn message(bytes: usize, seed: u8) -> Vec<u8> {
    (0..bytes).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

fn completions(net: &mut Net, p: u32) -> Vec<Completion> {
    std::iter::from_fn(|| net.hosts[p as usize].poll_completion()).collect()
}

#[test]
fn a_message_is_completed_within_its_bound_and_delivered_intact() {
    let mut net = net(4);
    let now = net.now;
    let body = message(10_000, 1);
    let sub = net.hosts[0].submit(now, 2, body.clone()).unwrap();
    assert_eq!(sub.deadline, now + sub.delta);
    net.kick(0);
    net.run_until(now + sub.delta + Duration::from_millis(1));
    let done = completions(&mut net, 0);
    assert_eq!(done.len(), 1);
    let c = &done[0];
    assert_eq!(
        (c.flag, c.cause, c.msg, c.dst),
        (Flag::Complete, Cause::Completed, sub.msg, 2)
    );
    assert!(
        c.flagged_at <= sub.deadline,
        "{:?} past {:?}",
        c.flagged_at,
        sub.deadline
    );
    assert!(c.rsvp_at.is_some());
    let got = net.hosts[2].poll_delivery().unwrap();
    assert_eq!((got.sender, got.msg), (0, sub.msg));
    assert_eq!(got.message, body);
    assert_eq!(net.reserved(), 0, "the complete released the path");
    assert_eq!(net.hosts[0].in_flight(), 0);
}

/// Paper 3.3: "a message may be allocated more than one virtual link": alone on an idle
/// fabric a message gets `slots_max` slots and goes that many times faster than on one.
#[test]
fn a_message_alone_goes_as_fast_as_its_slots_allow() {
    let k = 4;
    let mut net = Net::new_with(2, 2, 2, timing(k, HOP), 7, |c| c.slots_max = k);
    let now = net.now;
    let bytes = 200_000;
    let sub = net.hosts[0].submit(now, 2, message(bytes, 3)).unwrap();
    net.kick(0);
    net.run_until(sub.deadline);
    let c = &completions(&mut net, 0)[0];
    assert_eq!(c.flag, Flag::Complete);
    let took = c.flagged_at.as_nanos() - c.submitted_at.as_nanos();
    let timing = &net.hosts[0].config().timing;
    let one_slot = timing.send_time(bytes, 1).as_nanos();
    assert!(
        took < one_slot / 2,
        "{took} ns: not K times faster than one slot's {one_slot} ns"
    );
    assert!(took >= timing.send_time(bytes, k).as_nanos());
    assert_eq!(net.hosts[2].poll_delivery().unwrap().message, message(bytes, 3));
}

/// Two messages for one receiver at once: the first asks for the slots the second leaves, the
/// second gets the rest; together they never hold more than K (the receiver's invariants,
/// checked after every step).
#[test]
fn messages_that_meet_at_a_receiver_share_its_slots() {
    let mut net = Net::new_with(2, 2, 2, timing(4, HOP), 7, |c| c.slots_max = 2);
    let now = net.now;
    let a = net.hosts[0].submit(now, 2, message(300_000, 1)).unwrap();
    let b = net.hosts[1].submit(now, 2, message(300_000, 2)).unwrap();
    net.kick(0);
    net.kick(1);
    net.run_until(a.deadline.max(b.deadline));
    for p in [0, 1] {
        let c = &completions(&mut net, p)[0];
        assert_eq!(c.flag, Flag::Complete, "{c:?}");
    }
    assert_eq!(net.reserved(), 0);
}

#[test]
fn an_empty_message_completes_too() {
    let mut net = net(2);
    let now = net.now;
    let sub = net.hosts[1].submit(now, 3, Vec::new()).unwrap();
    net.kick(1);
    net.run_until(sub.deadline);
    let done = completions(&mut net, 1);
    assert_eq!(done[0].flag, Flag::Complete);
    assert_eq!(net.hosts[3].poll_delivery().unwrap().message, Vec::<u8>::new());
}

#[test]
fn a_message_cosy_cannot_bound_is_rejected_at_once() {
    let mut net = net(2);
    let now = net.now;
    let too_big = net.hosts[0].config().message_bytes_max + 1;
    net.hosts[0].submit(now, 2, vec![0; too_big]).unwrap();
    let done = completions(&mut net, 0);
    assert_eq!((done[0].flag, done[0].cause), (Flag::Reject, Cause::Unbounded));
    assert_eq!(done[0].flagged_at, now, "at once, not at the deadline");
    assert_eq!(net.hosts[0].submit(now, 0, vec![]), Err(SubmitError::ToSelf));
    assert!(matches!(
        net.hosts[0].submit(now, 9, vec![]),
        Err(SubmitError::NoSuchProcess { dst: 9, .. })
    ));
}

/// More senders than the receiver has slots: some wait (the hold) and get in when a slot
/// frees, the rest are rejected, and every one is flagged within its bound.
#[test]
fn a_busy_receiver_holds_then_rejects_and_every_flag_is_on_time() {
    let mut net = Net::new(3, 2, 2, timing(1, HOP), 3);
    let now = net.now;
    let mut subs = Vec::new();
    for p in [0u32, 1, 2, 3, 5] {
        let sub = net.hosts[p as usize]
            .submit(now, 4, message(20_000, p as u8))
            .unwrap();
        subs.push((p, sub));
        net.kick(p);
    }
    net.run_until(now + Duration::from_millis(5));
    let mut flags = HashMap::new();
    for (p, sub) in subs {
        let done = completions(&mut net, p);
        assert_eq!(done.len(), 1, "one completion per message");
        assert!(done[0].flagged_at <= sub.deadline);
        *flags.entry(done[0].flag).or_insert(0) += 1;
    }
    assert!(flags[&Flag::Complete] >= 1);
    assert!(flags.get(&Flag::Reject).copied().unwrap_or(0) >= 1, "{flags:?}");
    assert_eq!(net.reserved(), 0);
}

#[test]
fn a_receiver_that_crashes_mid_message_leaves_the_sender_a_reject_by_its_deadline() {
    let mut net = net(2);
    let now = net.now;
    let sub = net.hosts[0].submit(now, 2, message(1 << 20, 9)).unwrap();
    net.kick(0);
    net.run_until(now + Duration::from_micros(30));
    assert!(net.reserved() > 0, "sending by now");
    net.crash_host(2);
    net.run_until(sub.deadline + Duration::from_micros(1));
    let done = completions(&mut net, 0);
    assert_eq!((done[0].flag, done[0].cause), (Flag::Reject, Cause::TimedOut));
    let processing = net.hosts[0].config().timing.processing;
    assert_eq!(
        done[0].flagged_at,
        Instant::from_nanos(sub.deadline.as_nanos() - processing.as_nanos()),
        "its own processing allowance early, so that a late timer still flags within delta"
    );
    // The switches clear what nobody released, by delta_cosy after reserving.
    net.run_until(
        sub.deadline
            + net.switches[0]
                .poll_timeout()
                .map_or(Duration::ZERO, |_| sub.delta),
    );
    assert_eq!(net.reserved(), 0);
}

#[test]
fn a_sender_that_crashes_mid_message_is_reported_failed_by_the_receiver() {
    let mut net = net(2);
    let now = net.now;
    net.hosts[0].submit(now, 2, message(1 << 20, 9)).unwrap();
    net.kick(0);
    net.run_until(now + Duration::from_micros(30));
    net.crash_host(0);
    net.run_until(now + Duration::from_millis(2));
    assert_eq!(net.hosts[2].counters().failures_sent, 1);
    assert!(net.hosts[2].poll_delivery().is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random messages between random hosts at random times, K from 1 to 4, 1 to K slots per
    /// message, and maybe a host crash: every live sender's message gets exactly one
    /// completion, within its bound; what completes was delivered intact; nothing stays
    /// reserved after delta_cosy.
    #[test]
    fn no_bound_is_broken(
        k in 1u8..=4,
        slots_max in 1u8..=4,
        msgs in proptest::collection::vec((0u32..6, 0u32..6, 0usize..40_000, 0u64..200), 1..24),
        crash in proptest::option::of((0u32..6, 0u64..300)),
        seed in 0u64..1000,
    ) {
        let mut net = Net::new_with(3, 2, 2, timing(k, HOP), seed, |c| c.slots_max = slots_max);
        let start = net.now;
        let mut subs: Vec<(u32, Submitted, Vec<u8>)> = Vec::new();
        let mut events: Vec<(u64, u32, u32, usize)> = msgs.iter().map(|&(f, t, b, at)| (at, f, t, b)).collect();
        events.sort();
        let mut crashed = None;
        for (at_us, from, to, bytes) in events {
            let at = start + Duration::from_micros(at_us);
            if let Some((c, crash_us)) = crash && crashed.is_none() && crash_us <= at_us {
                net.run_until(start + Duration::from_micros(crash_us));
                net.crash_host(c);
                crashed = Some(c);
            }
            net.run_until(at);
            if from == to || crashed == Some(from) {
                continue;
            }
            let body = message(bytes, at_us as u8);
            let sub = net.hosts[from as usize].submit(net.now, to, body.clone()).unwrap();
            net.kick(from);
            subs.push((from, sub, body));
        }
        let last = subs.iter().map(|s| s.1.deadline).max().unwrap_or(net.now);
        net.run_until(last + Duration::from_millis(3));
        let mut done: HashMap<(u32, u32), Completion> = HashMap::new();
        for p in 0..6u32 {
            for c in completions(&mut net, p) {
                prop_assert!(done.insert((p, c.msg), c).is_none(), "one completion per message");
            }
        }
        let mut delivered: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
        for p in 0..6usize {
            while let Some(d) = net.hosts[p].poll_delivery() {
                delivered.insert((d.sender, d.msg), d.message);
            }
        }
        for (from, sub, body) in &subs {
            if crashed == Some(*from) {
                continue;
            }
            let c = &done[&(*from, sub.msg)];
            prop_assert!(c.flagged_at <= sub.deadline, "flag at {:?} after deadline {:?}", c.flagged_at, sub.deadline);
            if c.flag == Flag::Complete {
                prop_assert_eq!(&delivered[&(*from, sub.msg)], body);
            }
            if crashed.is_none() {
                prop_assert!(c.cause != Cause::TimedOut, "no timeouts without failures: {:?}", c);
                prop_assert!(c.flag != Flag::Failure);
            }
        }
        prop_assert_eq!(net.reserved(), 0);
    }
}

/// Found by `onepipe cosy demo --fail`: a runtime runs a host's timer late, and self-rejects
/// posted at the deadline came out about 1 us past delta. A timer late by less than the
/// processing allowance still flags within delta.
#[test]
fn a_timer_run_late_still_flags_within_the_bound() {
    let timing = Timing {
        processing: Duration::from_micros(100),
        ..timing(2, HOP)
    };
    let mut host = CosyHost::new(HostConfig::new(0, 4, timing)).unwrap();
    let now = Instant::from_nanos(1_000_000);
    let sub = host.submit(now, 2, vec![1; 1000]).unwrap();
    let due = host.poll_timeout().unwrap();
    assert!(due < sub.deadline);
    let late = due + Duration::from_micros(99);
    host.handle_timeout(late);
    let c = host.poll_completion().unwrap();
    assert_eq!((c.flag, c.cause), (Flag::Reject, Cause::TimedOut));
    assert!(
        c.flagged_at <= sub.deadline,
        "{:?} past {:?}",
        c.flagged_at,
        sub.deadline
    );
}
