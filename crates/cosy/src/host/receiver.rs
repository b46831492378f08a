//! The receiver's half of a host (paper 3.2-4): requests held for a slot, rsvps, reassembly,
//! failure detection.
//!
//! - A request waits at most `hold` (the paper's delta^E, which it leaves undefined: ours is a
//!   configured time, docs/cosy.md) for one of the K slots; then the receiver rejects it.
//! - When a slot is free and requests wait, the receiver picks one by the power of two choices
//!   (paper 5.1, details not given; ours): two waiting requests drawn at random, the one that
//!   has waited longer wins (its hold ends sooner), so that a request is not starved by later
//!   ones while the choice stays cheap and spreads rsvps over senders.
//! - How many slots a message gets (paper 3.3: "a message may be allocated more than one
//!   slot", policy not given; ours): the free slots left after one for each request still
//!   waiting, at least one and at most `slots_max`. Alone on an idle receiver a message asks
//!   for all K (full rate B); under load, one each. Switches and the sender may give it fewer;
//!   its first data frame says how many it got, and the receiver frees the rest.
//! - Each rsvp carries a fresh random nonce, which the switches key the reservation by (paper 4).
//! - The receiver knows when the first data frame (or a reject back along the path) is due after
//!   its rsvp, and when each next frame is due; if one is late, it sends a failure to the sender
//!   (paper 4, "Exploiting synchrony for fast failure reaction") and frees the slot.

use super::{HostConfig, HostCounters, Outbox};
use crate::timing::Timing;
use onepipe_fabric::hash::SplitMix;
use onepipe_wire::Instant;
use onepipe_wire::cosy::{Kind, Repr};
use std::collections::VecDeque;

/// A message received whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub sender: u32,
    pub msg: u32,
    pub message: Vec<u8>,
    pub at: Instant,
}

#[derive(Clone, Copy, Debug)]
struct Request {
    sender: u32,
    msg: u32,
    bytes: u32,
    hold_until: Instant,
}

#[derive(Debug)]
struct Incoming {
    sender: u32,
    msg: u32,
    nonce: u32,
    bytes: usize,
    message: Vec<u8>,
    /// Slots it holds: asked for in the rsvp, then what its data says it got.
    units: u8,
    /// The next data frame, or the complete, must arrive by then.
    due: Instant,
}

impl Incoming {
    fn is(&self, repr: &Repr) -> bool {
        (self.sender, self.msg, self.nonce) == (repr.sender, repr.msg, repr.nonce)
    }
}

#[derive(Debug, Default)]
struct ReceiverCounts {
    rsvps_sent: u64,
    failures_sent: u64,
    data_received: u64,
    delivered: u64,
    stray: u64,
    deliveries_dropped: u64,
}

#[derive(Debug)]
pub struct Receiver {
    me: u32,
    timing: Timing,
    message_bytes_max: usize,
    pending_max: usize,
    queue_max: usize,
    /// Slots one message may ask for.
    slots_max: u8,
    rng: SplitMix,
    pending: Vec<Request>,
    incoming: Vec<Incoming>,
    deliveries: VecDeque<Delivery>,
    counts: ReceiverCounts,
}

impl Receiver {
    pub fn new(config: &HostConfig) -> Receiver {
        Receiver {
            me: config.me,
            timing: config.timing.clone(),
            message_bytes_max: config.message_bytes_max,
            pending_max: config.pending_max,
            queue_max: config.queue_max,
            slots_max: config.slots_max.clamp(1, config.timing.k),
            rng: SplitMix::new(config.seed ^ 0x636f_7379),
            pending: Vec::new(),
            incoming: Vec::new(),
            deliveries: VecDeque::new(),
            counts: ReceiverCounts::default(),
        }
    }

    pub fn handle(&mut self, now: Instant, repr: &Repr, payload: &[u8], out: &mut Outbox) {
        match (repr.kind, repr.along_path) {
            (Kind::Request, false) => self.on_request(now, repr, out),
            (Kind::Data, true) => self.on_data(now, repr, payload, out),
            (Kind::Complete, true) => self.on_complete(now, repr, out),
            (Kind::Reject, true) => match self.incoming_of(repr) {
                // A switch found no free virtual link, or the sender was busy: the slots are
                // free again for another request.
                Some(i) => {
                    self.incoming.swap_remove(i);
                    self.grant(now, out);
                }
                None => self.counts.stray += 1,
            },
            _ => self.counts.stray += 1,
        }
    }

    fn incoming_of(&self, repr: &Repr) -> Option<usize> {
        self.incoming.iter().position(|s| s.is(repr))
    }

    fn knows(&self, sender: u32, msg: u32) -> bool {
        self.pending.iter().any(|r| (r.sender, r.msg) == (sender, msg))
            || self.incoming.iter().any(|s| (s.sender, s.msg) == (sender, msg))
    }

    /// Slots no message holds.
    fn free_units(&self) -> u8 {
        let held: u32 = self.incoming.iter().map(|s| s.units as u32).sum();
        (self.timing.k as u32).saturating_sub(held) as u8
    }

    fn on_request(&mut self, now: Instant, repr: &Repr, out: &mut Outbox) {
        if self.knows(repr.sender, repr.msg) {
            self.counts.stray += 1;
            return;
        }
        if repr.size as usize > self.message_bytes_max || self.pending.len() >= self.pending_max {
            out.push(&Repr::new(Kind::Reject, repr.sender, self.me, repr.msg));
            return;
        }
        self.pending.push(Request {
            sender: repr.sender,
            msg: repr.msg,
            bytes: repr.size,
            hold_until: now + self.timing.hold,
        });
        self.grant(now, out);
    }

    fn on_data(&mut self, now: Instant, repr: &Repr, payload: &[u8], out: &mut Outbox) {
        let Some(i) = self.incoming_of(repr) else {
            self.counts.stray += 1;
            return;
        };
        let s = &mut self.incoming[i];
        let in_order = repr.size as usize == s.message.len() && s.message.len() + payload.len() <= s.bytes;
        if !in_order {
            // Frames of one path arrive in order; a gap means one was lost.
            self.fail(i, out);
            self.grant(now, out);
            return;
        }
        s.message.extend_from_slice(payload);
        // The receiver's ToR is the first hop: as many virtual links as it kept, as many slots.
        let got = repr
            .hops()
            .first()
            .map_or(s.units, |h| h.count())
            .clamp(1, s.units);
        let freed = got < s.units;
        s.units = got;
        s.due = now
            + self
                .timing
                .next_data_due(onepipe_wire::cosy::HEADER_LEN + payload.len(), got);
        self.counts.data_received += 1;
        if freed {
            self.grant(now, out);
        }
    }

    fn on_complete(&mut self, now: Instant, repr: &Repr, out: &mut Outbox) {
        let Some(i) = self.incoming_of(repr) else {
            self.counts.stray += 1;
            return;
        };
        if self.incoming[i].message.len() != self.incoming[i].bytes {
            self.fail(i, out);
        } else {
            let s = self.incoming.swap_remove(i);
            let mut complete = Repr::new(Kind::Complete, s.sender, self.me, s.msg);
            complete.nonce = s.nonce;
            out.push(&complete);
            self.deliver(now, s);
        }
        self.grant(now, out);
    }

    fn deliver(&mut self, now: Instant, s: Incoming) {
        if self.deliveries.len() >= self.queue_max {
            self.counts.deliveries_dropped += 1;
            return;
        }
        self.counts.delivered += 1;
        self.deliveries.push_back(Delivery {
            sender: s.sender,
            msg: s.msg,
            message: s.message,
            at: now,
        });
    }

    /// Tells the sender its data stopped coming, and frees the message's slots.
    fn fail(&mut self, i: usize, out: &mut Outbox) {
        let s = self.incoming.swap_remove(i);
        let mut failure = Repr::new(Kind::Failure, s.sender, self.me, s.msg);
        failure.nonce = s.nonce;
        out.push(&failure);
        self.counts.failures_sent += 1;
    }

    /// Grants free slots to waiting requests, by the power of two choices; each gets the free
    /// slots left after one for every request still waiting.
    fn grant(&mut self, now: Instant, out: &mut Outbox) {
        while self.free_units() > 0 {
            let Some(pick) = self.choose() else {
                return;
            };
            let r = self.pending.swap_remove(pick);
            let waiting = self.pending.len().min(u8::MAX as usize) as u8;
            let units = self.free_units().saturating_sub(waiting).clamp(1, self.slots_max);
            let mut rsvp = Repr::new(Kind::Rsvp, r.sender, self.me, r.msg);
            rsvp.nonce = self.rng.next_u64() as u32;
            rsvp.size = r.bytes;
            rsvp.slots = units;
            out.push(&rsvp);
            self.counts.rsvps_sent += 1;
            self.incoming.push(Incoming {
                sender: r.sender,
                msg: r.msg,
                nonce: rsvp.nonce,
                bytes: r.bytes as usize,
                message: Vec::with_capacity(r.bytes as usize),
                units,
                due: now + self.timing.first_data_due(),
            });
        }
    }

    /// Two waiting requests at random; the one whose hold ends first.
    fn choose(&mut self) -> Option<usize> {
        let n = self.pending.len();
        if n <= 1 {
            return (n == 1).then_some(0);
        }
        let a = (self.rng.next_u64() % n as u64) as usize;
        let b = (a + 1 + (self.rng.next_u64() % (n as u64 - 1)) as usize) % n;
        let key = |i: usize| (self.pending[i].hold_until, i);
        Some(if key(a) <= key(b) { a } else { b })
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let dues = self.incoming.iter().map(|s| s.due);
        let holds = self.pending.iter().map(|r| r.hold_until);
        dues.chain(holds).min()
    }

    pub fn handle_timeout(&mut self, now: Instant, out: &mut Outbox) {
        for i in (0..self.incoming.len()).rev() {
            if self.incoming[i].due <= now {
                self.fail(i, out);
            }
        }
        let me = self.me;
        self.pending.retain(|r| {
            let expired = r.hold_until <= now;
            if expired {
                out.push(&Repr::new(Kind::Reject, r.sender, me, r.msg));
            }
            !expired
        });
        self.grant(now, out);
    }

    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    pub fn add_counters(&self, c: &mut HostCounters) {
        let r = &self.counts;
        c.rsvps_sent += r.rsvps_sent;
        c.failures_sent += r.failures_sent;
        c.data_received += r.data_received;
        c.delivered += r.delivered;
        c.stray += r.stray;
        c.deliveries_dropped += r.deliveries_dropped;
    }

    /// Messages hold at most K slots together, and a free slot never leaves a request waiting.
    pub fn invariants(&self) {
        for s in &self.incoming {
            assert!(s.message.len() <= s.bytes);
            assert!(s.units >= 1);
        }
        let held: u32 = self.incoming.iter().map(|s| s.units as u32).sum();
        assert!(
            held <= self.timing.k as u32,
            "{held} slots held of {}",
            self.timing.k
        );
        assert!(self.pending.len() <= self.pending_max);
        assert!(self.deliveries.len() <= self.queue_max);
        if self.free_units() > 0 {
            assert!(self.pending.is_empty(), "a free slot is granted at once");
        }
    }
}
