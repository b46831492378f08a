//! A baseline process as a [`Node`]: the workload, the measurements and the output queue every
//! baseline shares ([`Core`]), plus one protocol state machine that decides how a broadcast is
//! ordered ([`Protocol`]).
//!
//! Event log rules (what `onepipe_check::check_all` needs, crates/check/src/order.rs): a
//! message's `ts_ns` is its order stamp (global sequence number, or Lamport timestamp with the
//! sender breaking ties as the checker does), the same at the sender and every receiver. Token
//! and Lamport know the stamp when they send and log the send then. The sequencer kinds learn it
//! only when their own copy comes back, so they log the send right before that delivery: every
//! message they delivered before has a lower number, which keeps the causality rule (a send's
//! stamp exceeds everything delivered before it) and send order.

use crate::frame::{FrameKind, Header};
use crate::host_seq::HostSeq;
use crate::lamport::Lamport;
use crate::out::{Item, OutQueue};
use crate::reorder::{Insert, Pending, SeqReorder};
use crate::stats::{HostStats, LATENCY_NS_MAX};
use crate::switch_seq::SwitchSeqClient;
use crate::token::Token;
use crate::workload::{Offer, Schedule, Workload};
use onepipe_check::Event;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_wire::Instant;

/// What every baseline process has, whatever orders its messages.
#[derive(Debug)]
pub struct Core {
    pub me: u32,
    pub n: u32,
    pub payload_len: u16,
    pub workload: Workload,
    pub stats: HostStats,
    pub out: OutQueue,
    /// The order stamp is learned at the sender's own delivery (sequencer kinds).
    learns_at_delivery: bool,
}

impl Core {
    pub fn new(
        me: u32,
        n: u32,
        payload_len: u16,
        schedule: Schedule,
        window: usize,
        out_capacity: usize,
        learns_at_delivery: bool,
    ) -> Core {
        Core {
            me,
            n,
            payload_len,
            workload: Workload::new(me, schedule, window),
            stats: HostStats::new(me),
            out: OutQueue::new(me, n, out_capacity),
            learns_at_delivery,
        }
    }

    /// An item for a broadcast copy or request of one of this process's messages.
    pub fn item(&self, kind: FrameKind, dest: crate::out::Dest, seq: u64, offer: &Offer) -> Item {
        Item {
            kind,
            dest,
            origin: self.me,
            seq,
            msg_id: offer.msg_id,
            sent_ns: offer.sent.as_nanos(),
            payload_len: self.payload_len,
        }
    }

    /// Logs the sends of a broadcast (one event per destination, itself included).
    pub fn record_send(&mut self, ts: u64, msg_id: u64) {
        for dst in 0..self.n {
            self.stats.events.push(Event::Send {
                ts_ns: ts,
                dst,
                msg_id,
            });
        }
    }

    /// A broadcast of ours will never be ordered (dropped for lack of room): free its window
    /// slot and forget that its stamp is owed. Protocols that call this refuse the offer.
    pub fn lost_own(&mut self, msg_id: u64) {
        self.workload.on_lost();
        self.stats.unconfirmed.retain(|&m| m != msg_id);
    }

    /// Delivers one message in order.
    pub fn deliver(&mut self, now: Instant, ts: u64, m: Pending) {
        let s = &mut self.stats;
        s.delivered += 1;
        let sched = self.workload.schedule();
        if now >= sched.measure_from && now <= sched.send_until {
            s.delivered_in_window += 1;
        }
        if m.sent_ns >= sched.measure_from.as_nanos() {
            let latency = now.as_nanos().saturating_sub(m.sent_ns).clamp(1, LATENCY_NS_MAX);
            s.latency_ns.record(latency).expect("clamped into bounds");
        }
        let recorded = m.sent_ns < sched.record_until.as_nanos();
        if m.origin == self.me {
            self.workload.on_self_delivered();
            if self.learns_at_delivery && recorded {
                // FIFO to the sequencer makes stamps come back in send order; anything older
                // still owed was dropped unordered and will never be delivered anywhere.
                while let Some(&front) = self.stats.unconfirmed.front() {
                    if front > m.msg_id {
                        break;
                    }
                    self.stats.unconfirmed.pop_front();
                    if front == m.msg_id {
                        self.record_send(ts, m.msg_id);
                    }
                }
            }
        }
        if recorded {
            self.stats.events.push(Event::Deliver {
                ts_ns: ts,
                src: m.origin,
                msg_id: m.msg_id,
            });
        }
    }

    /// Buffers a numbered message and delivers whatever is now in order.
    pub fn accept_numbered(&mut self, now: Instant, reorder: &mut SeqReorder, seq: u64, m: Pending) {
        match reorder.insert(seq, m) {
            Insert::Accepted => {}
            Insert::Duplicate => self.stats.duplicates += 1,
            Insert::Overflow => self.stats.reorder_overflow += 1,
        }
        while let Some((seq, m)) = reorder.pop() {
            self.deliver(now, seq, m);
        }
        self.stats.reorder_peak = self.stats.reorder_peak.max(reorder.peak());
    }
}

/// How a process orders its broadcasts.
#[derive(Debug)]
pub enum Protocol {
    HostSeq(HostSeq),
    SwitchSeq(SwitchSeqClient),
    Token(Token),
    Lamport(Lamport),
}

/// One baseline process.
#[derive(Debug)]
pub struct Host {
    pub core: Core,
    pub protocol: Protocol,
}

impl Host {
    pub fn stats(&self) -> &HostStats {
        &self.core.stats
    }

    /// Hands every due broadcast to the protocol.
    fn refill(&mut self, now: Instant) {
        while let Some(offer) = self.core.workload.offer(now) {
            self.core.stats.outstanding_peak = self.core.workload.outstanding_peak();
            if self.core.learns_at_delivery && offer.record {
                self.core.stats.unconfirmed.push_back(offer.msg_id);
            }
            let core = &mut self.core;
            let taken = match &mut self.protocol {
                Protocol::HostSeq(p) => p.on_offer(core, offer),
                Protocol::SwitchSeq(p) => p.on_offer(core, offer),
                Protocol::Token(p) => p.on_offer(offer),
                Protocol::Lamport(p) => p.on_offer(core, now, offer),
            };
            if taken {
                self.core.stats.broadcasts += 1;
            } else {
                // No room (counted): the window slot is free again, but offering again now
                // would only be refused again.
                self.core.workload.retry_later(now);
                break;
            }
        }
    }

    fn count_refused(&mut self, frame: &[u8]) {
        match Header::parse(frame) {
            Err(_) => self.core.stats.malformed += 1,
            Ok(_) => self.core.stats.misdirected += 1,
        }
    }
}

impl Node for Host {
    fn classify(&self, _now: Instant, _port: PortId, frame: &[u8]) -> Route {
        match Header::parse(frame) {
            Ok(h) if h.dst == self.core.me => Route::Consume,
            _ => Route::Drop,
        }
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], route: Route) {
        let h = match (route, Header::parse(frame)) {
            (Route::Consume, Ok(h)) if h.dst == self.core.me => h,
            _ => return self.count_refused(frame),
        };
        let core = &mut self.core;
        let understood = match &mut self.protocol {
            Protocol::HostSeq(p) => p.on_frame(core, now, &h),
            Protocol::SwitchSeq(p) => p.on_frame(core, now, &h),
            Protocol::Token(p) => p.on_frame(core, now, &h),
            Protocol::Lamport(p) => p.on_frame(core, now, &h),
        };
        if !understood {
            self.core.stats.misdirected += 1;
        }
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        self.refill(now);
        if let Protocol::Token(p) = &mut self.protocol {
            p.act(&mut self.core, now);
        }
        let sent = self.core.out.poll(buf)?;
        if let (Some(item), Protocol::HostSeq(p)) = (sent.finished, &mut self.protocol) {
            p.on_copies_sent(&mut self.core, now, &item);
        }
        let s = &mut self.core.stats;
        s.frames_sent += 1;
        match sent.kind {
            FrameKind::Request | FrameKind::SwitchRequest => s.requests_sent += 1,
            FrameKind::Token => s.tokens_passed += 1,
            FrameKind::Exchange => s.exchanges_sent += 1,
            FrameKind::Data => {}
        }
        Some(sent.len)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let protocol = match &self.protocol {
            Protocol::Token(p) => p.wake_at(),
            Protocol::Lamport(p) => p.wake_at(),
            Protocol::HostSeq(_) | Protocol::SwitchSeq(_) => None,
        };
        match (self.core.workload.wake_at(), protocol) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        // Offers are taken here too, not only when the port asks for frames: a paced send that
        // fell due must move the timer on even while the port is busy.
        self.refill(now);
        match &mut self.protocol {
            Protocol::Token(p) => p.act(&mut self.core, now),
            Protocol::Lamport(p) => p.on_timeout(&mut self.core, now),
            Protocol::HostSeq(_) | Protocol::SwitchSeq(_) => {}
        }
    }
}

impl Hints for Host {}
