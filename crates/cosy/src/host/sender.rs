//! The sender's half of a host (paper 3.2, 3.3): requests, slots, pacing, completions.
//!
//! A message is `Requested` from submission until its rsvp comes back (or a reject, or its
//! deadline). On the rsvp it takes a free slot if it can still finish by its deadline, and is
//! `Sending`: one data frame every `pace_gap` along the reserved path, then a complete behind the
//! last one. It is then `Sent` until the receiver's complete arrives. Each state ends at the
//! deadline at the latest, when the sender posts reject by itself (paper 3.2: "if the sender
//! does not receive a reject or complete before time delta, it marks its completion queue with a
//! reject flag").

use super::{HostConfig, HostCounters, Outbox};
use crate::timing::Timing;
use onepipe_wire::cosy::{HEADER_LEN, Kind, Repr};
use onepipe_wire::{Duration, Instant};
use std::collections::{BTreeMap, VecDeque};

/// What became of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flag {
    Complete,
    Reject,
    Failure,
}

impl Flag {
    pub fn name(self) -> &'static str {
        match self {
            Flag::Complete => "complete",
            Flag::Reject => "reject",
            Flag::Failure => "failure",
        }
    }
}

/// Why, in more detail than the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    Completed,
    /// Refused at submission: too large, or too many messages in flight.
    Unbounded,
    /// A reject from the receiver: every slot busy past the hold (proof that it is alive).
    ReceiverBusy,
    /// A reject from a switch: no free virtual link on the way.
    Blocked,
    /// The rsvp found every slot of this host busy.
    SenderBusy,
    /// The rsvp came too late to finish by the deadline.
    TooLate,
    /// Nothing came back by the deadline.
    TimedOut,
    /// The receiver reported that data stopped coming.
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub msg: u32,
    /// The bound for this message.
    pub delta: Duration,
    /// `submit + delta`: the completion is posted by then.
    pub deadline: Instant,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub msg: u32,
    pub dst: u32,
    pub bytes: usize,
    pub flag: Flag,
    pub cause: Cause,
    pub submitted_at: Instant,
    pub flagged_at: Instant,
    /// When the rsvp arrived, if one did (a failure detector's proof of life).
    pub rsvp_at: Option<Instant>,
}

#[derive(Debug)]
enum State {
    Requested,
    Sending {
        /// The slots it holds, a bit each, and how many: it sends at that many times B/K.
        slots: u16,
        count: u8,
        /// The data frames' header: the path, pointer at the sender's end.
        path: Repr,
        offset: usize,
        next_at: Instant,
    },
    Sent,
}

#[derive(Debug)]
struct Outgoing {
    dst: u32,
    message: Vec<u8>,
    submitted_at: Instant,
    deadline: Instant,
    rsvp_at: Option<Instant>,
    state: State,
}

#[derive(Debug)]
pub struct Sender {
    me: u32,
    timing: Timing,
    message_bytes_max: usize,
    outgoing_max: usize,
    next_msg: u32,
    outgoing: BTreeMap<u32, Outgoing>,
    /// Per slot: the message sending on it, and when the slot may start the next frame.
    slots: Vec<(Option<u32>, Instant)>,
    completions: VecDeque<Completion>,
    counts: SenderCounts,
    /// The last time the host was asked for data or ran its timers: a frame due by then
    /// waits for the port (the runtime asks again when it has room), not for a timer.
    asked_at: Instant,
}

#[derive(Debug, Default)]
struct SenderCounts {
    submitted: u64,
    completed: u64,
    rejected: u64,
    failed: u64,
    receiver_busy: u64,
    blocked: u64,
    sender_busy: u64,
    too_late: u64,
    unbounded: u64,
    timed_out: u64,
    data_sent: u64,
    stray: u64,
}

impl Sender {
    pub fn new(config: &HostConfig) -> Sender {
        Sender {
            me: config.me,
            timing: config.timing.clone(),
            message_bytes_max: config.message_bytes_max,
            outgoing_max: config.outgoing_max,
            next_msg: 0,
            outgoing: BTreeMap::new(),
            slots: vec![(None, Instant::ZERO); config.timing.k as usize],
            completions: VecDeque::new(),
            counts: SenderCounts::default(),
            asked_at: Instant::ZERO,
        }
    }

    pub fn submit(&mut self, now: Instant, dst: u32, message: Vec<u8>, out: &mut Outbox) -> Submitted {
        self.counts.submitted += 1;
        let msg = self.next_msg;
        self.next_msg = self.next_msg.wrapping_add(1);
        let delta = self.timing.delta(message.len());
        let o = Outgoing {
            dst,
            submitted_at: now,
            deadline: now + delta,
            rsvp_at: None,
            state: State::Requested,
            message,
        };
        let unbounded = o.message.len() > self.message_bytes_max
            || self.outgoing.len() >= self.outgoing_max
            || self.outgoing.contains_key(&msg);
        if unbounded {
            self.post(now, msg, o, Flag::Reject, Cause::Unbounded);
        } else {
            let mut request = Repr::new(Kind::Request, self.me, dst, msg);
            request.size = o.message.len() as u32;
            out.push(&request);
            self.outgoing.insert(msg, o);
        }
        Submitted {
            msg,
            delta,
            deadline: now + delta,
        }
    }

    pub fn handle(&mut self, now: Instant, repr: &Repr, out: &mut Outbox) {
        let known = self
            .outgoing
            .get(&repr.msg)
            .is_some_and(|o| o.dst == repr.receiver);
        match (repr.kind, repr.along_path, known) {
            (Kind::Rsvp, false, true) => self.on_rsvp(now, repr, out),
            // An rsvp for nothing we wait for: release the path it reserved.
            (Kind::Rsvp, false, false) => {
                self.counts.stray += 1;
                release(repr, out);
            }
            (Kind::Reject, false, true) => {
                let cause = if repr.blocked {
                    Cause::Blocked
                } else {
                    Cause::ReceiverBusy
                };
                self.finish(now, repr.msg, Flag::Reject, cause, out)
            }
            (Kind::Complete, false, true) if self.is_sent(repr.msg) => {
                self.finish(now, repr.msg, Flag::Complete, Cause::Completed, out)
            }
            (Kind::Failure, false, true) => self.finish(now, repr.msg, Flag::Failure, Cause::Failed, out),
            _ => self.counts.stray += 1,
        }
    }

    fn is_sent(&self, msg: u32) -> bool {
        self.outgoing
            .get(&msg)
            .is_some_and(|o| matches!(o.state, State::Sent))
    }

    /// Paper 3.2: "upon receiving a rsvp either sends a reject (if busy ...) or, if idle,
    /// transfers the message ... using the switch identifiers in the rsvp header".
    fn on_rsvp(&mut self, now: Instant, repr: &Repr, out: &mut Outbox) {
        let o = self.outgoing.get_mut(&repr.msg).expect("known");
        if !matches!(o.state, State::Requested) {
            self.counts.stray += 1;
            release(repr, out);
            return;
        }
        o.rsvp_at = Some(now);
        // As many slots as every hop reserved virtual links, and as this host has free.
        let path_slots = repr.hops().iter().map(|h| h.count()).min().unwrap_or(repr.slots);
        let free: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].0.is_none())
            .collect();
        let count = (path_slots as usize).min(free.len()) as u8;
        let late = now + self.timing.after_rsvp(o.message.len(), count.max(1)) > o.deadline;
        let cause = match (count, late) {
            (0, _) => Some(Cause::SenderBusy),
            (_, true) => Some(Cause::TooLate),
            _ => None,
        };
        if let Some(cause) = cause {
            release(repr, out);
            self.finish(now, repr.msg, Flag::Reject, cause, out);
            return;
        }
        let mut path = *repr;
        path.kind = Kind::Data;
        path.trim_hops(count);
        path.start_along();
        let mut slots = 0u16;
        let mut next_at = now;
        for &i in &free[..count as usize] {
            self.slots[i].0 = Some(repr.msg);
            next_at = next_at.max(self.slots[i].1);
            slots |= 1 << i;
        }
        o.state = State::Sending {
            slots,
            count,
            path,
            offset: 0,
            next_at,
        };
    }

    /// Frees the slots of `mask`: each may start a frame again at `free_at`.
    fn free_slots(&mut self, mask: u16, free_at: Instant) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if mask >> i & 1 == 1 {
                *slot = (None, free_at);
            }
        }
    }

    /// The next data frame due by `now` (the one due earliest), or the complete behind the
    /// last one. Writes it into `buf`.
    pub fn poll_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.asked_at = self.asked_at.max(now);
        let (&msg, _) = self
            .outgoing
            .iter()
            .filter_map(|(m, o)| match o.state {
                State::Sending { next_at, .. } if next_at <= now => Some((m, next_at)),
                _ => None,
            })
            .min_by_key(|(_, at)| *at)?;
        let payload_max = self.timing.payload_bytes_max();
        let o = self.outgoing.get_mut(&msg).expect("found");
        let State::Sending {
            slots,
            count,
            path,
            offset,
            next_at,
        } = &mut o.state
        else {
            unreachable!("filtered on Sending")
        };
        let chunk = (o.message.len() - *offset).min(payload_max);
        if chunk == 0 {
            // Everything is out: the complete follows on the same path, behind the data.
            let mut complete = *path;
            complete.kind = Kind::Complete;
            complete.size = 0;
            let len = complete.emit(buf).expect("room for a header");
            let (mask, free_at) = (*slots, *next_at);
            o.state = State::Sent;
            self.free_slots(mask, free_at);
            return Some(len);
        }
        let mut header = *path;
        header.size = *offset as u32;
        header.emit(buf).expect("room for a header");
        buf[HEADER_LEN..HEADER_LEN + chunk].copy_from_slice(&o.message[*offset..*offset + chunk]);
        *offset += chunk;
        let len = HEADER_LEN + chunk;
        // Catching up after a late start keeps the message on time; the gap keeps its
        // average at its slots' B/K each.
        *next_at += self.timing.pace_gap(len, *count);
        self.counts.data_sent += 1;
        Some(len)
    }

    /// Whether some message is sending (its next frame may be due now or later).
    pub fn has_data_ready(&self) -> bool {
        self.slots.iter().any(|s| s.0.is_some())
    }

    /// The earliest deadline, or the next frame of a slot if it is due after the host was
    /// last asked (one due before waits for the port, which the runtime signals by asking).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outgoing
            .values()
            .map(|o| match o.state {
                State::Sending { next_at, .. } if next_at > self.asked_at => next_at.min(self.give_up_at(o)),
                _ => self.give_up_at(o),
            })
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant, out: &mut Outbox) {
        self.asked_at = self.asked_at.max(now);
        let due: Vec<u32> = self
            .outgoing
            .iter()
            .filter(|(_, o)| self.give_up_at(o) <= now)
            .map(|(&m, _)| m)
            .collect();
        for msg in due {
            self.counts.timed_out += 1;
            self.finish(now, msg, Flag::Reject, Cause::TimedOut, out);
        }
    }

    /// When the sender posts reject by itself: its deadline less the hosts' processing
    /// allowance, so that the runtime's lateness in running this timer (which that allowance
    /// covers) does not post the flag past the bound. Exactly the deadline in the simulator.
    fn give_up_at(&self, o: &Outgoing) -> Instant {
        let early = o
            .deadline
            .as_nanos()
            .saturating_sub(self.timing.processing.as_nanos());
        Instant::from_nanos(early.max(o.submitted_at.as_nanos()))
    }

    /// Posts the message's completion; a message still sending stops and releases its path.
    fn finish(&mut self, now: Instant, msg: u32, flag: Flag, cause: Cause, out: &mut Outbox) {
        let Some(o) = self.outgoing.remove(&msg) else {
            return;
        };
        if let State::Sending {
            slots, path, next_at, ..
        } = &o.state
        {
            self.free_slots(*slots, *next_at);
            let mut reject = *path;
            reject.kind = Kind::Reject;
            reject.size = 0;
            out.push(&reject);
        }
        self.post(now, msg, o, flag, cause);
    }

    fn post(&mut self, now: Instant, msg: u32, o: Outgoing, flag: Flag, cause: Cause) {
        let c = &mut self.counts;
        match flag {
            Flag::Complete => c.completed += 1,
            Flag::Reject => c.rejected += 1,
            Flag::Failure => c.failed += 1,
        }
        match cause {
            Cause::ReceiverBusy => c.receiver_busy += 1,
            Cause::Blocked => c.blocked += 1,
            Cause::SenderBusy => c.sender_busy += 1,
            Cause::TooLate => c.too_late += 1,
            Cause::Unbounded => c.unbounded += 1,
            Cause::Completed | Cause::TimedOut | Cause::Failed => {}
        }
        self.completions.push_back(Completion {
            msg,
            dst: o.dst,
            bytes: o.message.len(),
            flag,
            cause,
            submitted_at: o.submitted_at,
            flagged_at: now,
            rsvp_at: o.rsvp_at,
        });
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    pub fn completions_waiting(&self) -> usize {
        self.completions.len()
    }

    pub fn in_flight(&self) -> usize {
        self.outgoing.len()
    }

    pub fn add_counters(&self, c: &mut HostCounters) {
        let s = &self.counts;
        c.submitted += s.submitted;
        c.completed += s.completed;
        c.rejected += s.rejected;
        c.failed += s.failed;
        c.rejected_receiver_busy += s.receiver_busy;
        c.rejected_blocked += s.blocked;
        c.rejected_sender_busy += s.sender_busy;
        c.rejected_too_late += s.too_late;
        c.rejected_unbounded += s.unbounded;
        c.timed_out += s.timed_out;
        c.data_sent += s.data_sent;
        c.stray += s.stray;
    }

    /// Every slot's message is sending on it, and every sending message holds its slots.
    pub fn invariants(&self) {
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(msg) = slot.0 {
                let o = self.outgoing.get(&msg).expect("a slot's message is in flight");
                assert!(matches!(o.state, State::Sending { slots, .. } if slots >> i & 1 == 1));
            }
        }
        for (msg, o) in &self.outgoing {
            if let State::Sending { slots, count, .. } = o.state {
                assert_eq!(slots.count_ones(), count as u32);
                assert!(
                    (0..self.slots.len())
                        .filter(|i| slots >> i & 1 == 1)
                        .all(|i| self.slots[i].0 == Some(*msg))
                );
            }
        }
        assert!(self.outgoing.len() <= self.outgoing_max);
    }
}

/// A reject along the rsvp's path, unreserving what it reserved (the message is not sent).
fn release(rsvp: &Repr, out: &mut Outbox) {
    let mut reject = *rsvp;
    reject.kind = Kind::Reject;
    reject.start_along();
    out.push(&reject);
}
