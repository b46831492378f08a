//! The sending half of reliable 1Pipe (paper 5.1 prepare phase, 6.1 flow control), sans-IO.
//!
//! A scattering waits in the send buffer, without a timestamp, until each of its messages fits
//! the send window of its destination (min of the receive window and the congestion window).
//! It acquires credits from those windows as they open and keeps them while it waits, so a
//! large scattering cannot be starved by small ones (paper 6.1). Once it holds every credit it
//! takes the current timestamp and its packets get PSNs on their connections and go out.
//!
//! Every packet stays in flight until acknowledged (cumulative plus selective ACKs), and is
//! sent again on timeout or when later packets are acknowledged before it. The commit barrier
//! is the timestamp of the oldest scattering not yet fully acknowledged, or the clock when there
//! is none: every message below it has reached its receiver.
//!
//! Failure (paper 5.2 Recall, [`ReliableSender::on_process_failed`]): every scattering with a
//! message the failed process has not fully acknowledged is aborted. Its connection to that
//! process closes; each other message of it that left (a packet of it was sent) is recalled by a
//! packet with the `RECALL` flag on its own connection, and its packets not yet sent go out as
//! recalls too, since their PSNs are taken. The aborted scattering holds the commit barrier until
//! all of those are acknowledged, so no receiver delivers a message of it meanwhile.

use super::ReliableConfig;
use super::dctcp::{Dctcp, DctcpParams, WindowBeforeTimeout};
use super::rtt::RttEstimator;
use crate::send_failure::{FailureReason, SendFailure};
use credits::Need;
use onepipe_wire::{AckPayload, Duration, Instant};
use std::collections::VecDeque;

/// `a` before `b` in PSN space (serial arithmetic, RFC 1982).
pub(crate) fn psn_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderCounters {
    pub retransmissions: u64,
    pub timeouts: u64,
    pub fast_retransmits: u64,
    pub acks_received: u64,
    /// Packets an ACK acknowledged for the first time: the reliable service's progress, which
    /// goes on while delivery waits for the commit barrier.
    pub packets_acked: u64,
    /// ACKs for a connection we never opened, or acknowledging PSNs we never sent.
    pub acks_invalid: u64,
    /// Messages given up after the retry budget (each reported as a send failure).
    pub messages_failed: u64,
    /// Timeouts shown spurious by an ACK of the original packet, and undone.
    pub spurious_timeouts: u64,
    /// Scatterings aborted because a receiver failed (paper 5.2 Recall).
    pub scatterings_aborted: u64,
    /// Recall packets queued (not counting retransmissions).
    pub recalls_sent: u64,
    /// Packets handed to the controller to forward (paper 5.2), and asks dropped because
    /// [`FORWARDS_QUEUED_MAX`] waited.
    pub forwards_requested: u64,
    pub forwards_dropped: u64,
}

struct OutMessage {
    dst: u32,
    start: usize,
    len: usize,
    packets: u16,
    /// Credits acquired while waiting; packets not yet acknowledged after release.
    credits: u16,
    /// Its credits went beyond the window (see `sender_credits.rs`): packets the window does
    /// not reach at release are held.
    overdrawn: bool,
    unacked: u16,
}

struct Scattering {
    ts: Instant,
    msg_id: u64,
    /// Submission number: tells a waiting scattering from a later one in the same slot, and
    /// orders releases (see `sender_credits.rs`).
    seq: u64,
    /// Packets still without a window credit (a message to a broken connection needs none).
    missing: usize,
    data: Vec<u8>,
    messages: Vec<OutMessage>,
    /// Messages not yet acknowledged or given up.
    open_messages: usize,
    packets: usize,
    /// Aborted because this process failed (paper 5.2): its open messages are recalls and
    /// remaining packets, and it is done when they are acknowledged.
    aborted: Option<u32>,
    /// Its entries in the connections' `in_flight` queues, acknowledged or not. A recall takes
    /// a PSN after those of newer scatterings, so the scattering can be done and retired while
    /// its selectively acknowledged recall still waits there for the cumulative ACK; the slot
    /// stays taken until then (in `lingering`), so that no entry names a reused slot.
    entries: usize,
}

/// A packet to put on the wire now.
pub struct Transmit<'a> {
    pub dst: u32,
    pub psn: u32,
    pub ts: Instant,
    pub msg_id: u64,
    pub frag_index: u16,
    pub frag_count: u16,
    pub payload: &'a [u8],
    /// A recall of message `msg_id` (paper 5.2): fragment 0 of 1, empty payload.
    pub recall: bool,
}

/// Acknowledged scatterings stay in memory until every older one is acknowledged too (the
/// commit barrier is the oldest open one's timestamp). Counting them against the buffer, as
/// before, let one packet being repaired stop a host: at 1% loss per link it sent nothing for
/// whole RTOs. They may take this many buffers' worth instead, which bounds memory.
pub const RETAINED_BUFFERS: usize = 4;

/// Buffers of retired scatterings kept for new ones, and the largest buffer kept (payload or
/// message list: a scattering to thousands of receivers is not held on to).
/// Over udp a node moves between threads from pass to pass, so a scattering was most often
/// freed on another thread than the one that allocated it, and the allocator's cross-thread
/// path cost ~3% of a saturated reliable run at 8 processes (`_int_free`, `malloc`).
const SPARE_BUFFERS_MAX: usize = 64;
const SPARE_BYTES_MAX: usize = 64 * 1024;

/// Packets waiting to be handed to the controller for forwarding; a packet asked for again
/// later when this is full.
pub const FORWARDS_QUEUED_MAX: usize = 256;

pub struct ReliableSender {
    config: ReliableConfig,
    /// What every connection's congestion window shares.
    cc: DctcpParams,
    fragment_bytes: usize,
    slots: Vec<Option<Scattering>>,
    free_slots: Vec<u32>,
    /// Scatterings without a timestamp yet, oldest first.
    waiting: VecDeque<u32>,
    /// The first this many of `waiting` were offered credits and wait in the `needy` queues
    /// of the connections they lack credits on; the rest are not offered yet.
    offered: usize,
    next_seq: u64,
    /// Connections whose credits may have grown since the last release pass.
    dirty: Vec<u32>,
    /// Released scatterings in timestamp order; the front bounds the commit barrier.
    released: VecDeque<u32>,
    /// Retired scatterings whose slots wait for their last entries to leave `in_flight` (see
    /// `Scattering::entries`); few, scanned.
    lingering: Vec<u32>,
    connections: super::Connections<Connection>,
    /// (destination, PSN) to transmit, first transmissions and retransmissions alike.
    transmit: VecDeque<(u32, u32)>,
    /// Packets not yet acknowledged (nor given up): what `send_buffer_packets_max` bounds.
    unacked_packets: usize,
    /// Packets of scatterings not yet retired, acknowledged or not: what the buffer holds in
    /// memory. A scattering is retired only once it and every older one are done, as the
    /// commit barrier needs; see [`RETAINED_BUFFERS`].
    retained_packets: usize,
    /// Highest `unacked_packets` and `retained_packets` seen (memory use, for reports).
    unacked_packets_peak: usize,
    retained_packets_peak: usize,
    /// (message id, timestamp) of scatterings released since the last look.
    newly_released: VecDeque<(u64, Instant)>,
    failures: VecDeque<SendFailure>,
    /// Recalls that failed receivers cannot take: (receiver, timestamp, message id), for the
    /// controller (paper 5.2, Receiver Recovery; see `sender_recovery.rs`).
    lost_recalls: VecDeque<(u32, Instant, u64)>,
    /// When to call `on_timeout` next: early, or late by up to an eighth of the RTO (see there).
    rto_deadline: Option<Instant>,
    /// (sent at, destination, PSN) of every transmission, oldest first; an entry whose packet
    /// was acknowledged or sent again since is dropped when it reaches the front.
    timers: VecDeque<(Instant, u32, u32)>,
    /// Scatterings a release pass found complete (kept for its allocation).
    completed: Vec<u32>,
    /// (payload, messages) buffers of retired scatterings, for new ones to reuse.
    spare: Vec<(Vec<u8>, Vec<OutMessage>)>,
    /// One estimate for the host, not one per connection: all connections cross the same
    /// fabric, and in all-to-all traffic each connection alone sees too few samples to follow
    /// queueing (measured: per-connection estimates timed out spuriously on ~2% of packets).
    rtt: RttEstimator,
    counters: SenderCounters,
    /// Processes announced failed, each with how many scatterings aborted for it are not yet
    /// done (recalls or remaining packets unacknowledged). Few entries: scanned.
    failed: Vec<(u32, usize)>,
    /// A controller can forward packets (paper 5.2); see `forward_after_retries`.
    forwarding: bool,
    /// (destination, PSN) to hand to the controller, at most [`FORWARDS_QUEUED_MAX`].
    forwards: VecDeque<(u32, u32)>,
}

impl ReliableSender {
    pub fn new(config: ReliableConfig, process_count: u32, fragment_bytes: usize) -> ReliableSender {
        ReliableSender {
            rtt: RttEstimator::new(config.rto_initial, config.rto_min, config.rto_max),
            cc: DctcpParams::new(1, config.max_cwnd_packets, config.dctcp_gain),
            config,
            fragment_bytes,
            slots: Vec::new(),
            free_slots: Vec::new(),
            waiting: VecDeque::new(),
            offered: 0,
            next_seq: 0,
            dirty: Vec::new(),
            released: VecDeque::new(),
            lingering: Vec::new(),
            connections: super::Connections::new(process_count),
            transmit: VecDeque::new(),
            unacked_packets: 0,
            retained_packets: 0,
            unacked_packets_peak: 0,
            retained_packets_peak: 0,
            newly_released: VecDeque::new(),
            failures: VecDeque::new(),
            lost_recalls: VecDeque::new(),
            rto_deadline: None,
            timers: VecDeque::new(),
            completed: Vec::new(),
            spare: Vec::new(),
            counters: SenderCounters::default(),
            failed: Vec::new(),
            forwarding: false,
            forwards: VecDeque::new(),
        }
    }

    pub fn counters(&self) -> &SenderCounters {
        &self.counters
    }

    /// Packets not yet acknowledged.
    pub fn unacked_packets(&self) -> usize {
        self.unacked_packets
    }

    /// Packets of scatterings kept until they retire (acknowledged ones included).
    pub fn retained_packets(&self) -> usize {
        self.retained_packets
    }

    /// The most packets ever unacknowledged, and ever retained, at once.
    pub fn packets_peak(&self) -> (usize, usize) {
        (self.unacked_packets_peak, self.retained_packets_peak)
    }

    /// Room for new packets: the unacknowledged ones are bounded by the buffer, and what
    /// acknowledged scatterings still retain, by [`RETAINED_BUFFERS`] buffers.
    pub fn room_packets(&self) -> usize {
        let max = self.config.send_buffer_packets_max;
        let unacked_room = max.saturating_sub(self.unacked_packets);
        let retained_room = (RETAINED_BUFFERS * max).saturating_sub(self.retained_packets);
        unacked_room.min(retained_room)
    }

    /// Scatterings waiting for window credits.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Packets a message of `len` bytes takes.
    pub fn packets_for(&self, len: usize) -> u16 {
        len.div_ceil(self.fragment_bytes).max(1) as u16
    }

    /// Takes a validated scattering into the send buffer. The caller checked destinations,
    /// sizes and `room_packets`.
    pub fn submit(&mut self, msg_id: u64, scatter: &[(u32, &[u8])]) {
        let (mut data, mut messages) = self.spare.pop().unwrap_or_default();
        messages.clear();
        let mut packets = 0;
        crate::scatter::pack(&mut data, scatter, |dst, start, len| {
            let n = self.packets_for(len);
            packets += n as usize;
            messages.push(OutMessage {
                dst,
                start,
                len,
                packets: n,
                credits: 0,
                overdrawn: false,
                unacked: n,
            });
        });
        let s = Scattering {
            ts: Instant::ZERO,
            msg_id,
            seq: self.next_seq,
            missing: packets,
            data,
            open_messages: messages.len(),
            messages,
            packets,
            aborted: None,
            entries: 0,
        };
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(s);
                i
            }
            None => {
                self.slots.push(Some(s));
                (self.slots.len() - 1) as u32
            }
        };
        self.unacked_packets += packets;
        self.retained_packets += packets;
        self.unacked_packets_peak = self.unacked_packets_peak.max(self.unacked_packets);
        self.retained_packets_peak = self.retained_packets_peak.max(self.retained_packets);
        self.next_seq += 1;
        self.waiting.push_back(slot);
    }

    fn connection(&mut self, dst: u32) -> &mut Connection {
        let (config, cc) = (&self.config, &self.cc);
        self.connections
            .get_or_open(dst, || Connection::new(config, cc))
            .expect("destinations were checked against the process count")
    }

    /// Timestamps scattering `slot` and queues its packets.
    fn launch(&mut self, slot: u32, ts: Instant) {
        let s = self.slots[slot as usize].as_mut().expect("released slot is live");
        s.ts = ts;
        self.newly_released.push_back((s.msg_id, ts));
        for (index, m) in s.messages.iter_mut().enumerate() {
            let c = self.connections.get_mut(m.dst).expect("its offer opened it");
            if c.broken {
                self.unacked_packets -= m.unacked as usize;
                m.unacked = 0;
                s.open_messages -= 1;
                self.counters.messages_failed += 1;
                let reason = if c.failed {
                    FailureReason::ReceiverFailed { process: m.dst }
                } else {
                    FailureReason::GaveUp
                };
                self.failures.push_back(SendFailure {
                    ts,
                    dst: m.dst,
                    msg_id: s.msg_id,
                    reason,
                });
                continue;
            }
            c.reserved -= m.credits as u32;
            s.entries += m.packets as usize;
            for fragment in 0..m.packets {
                let e = InFlight {
                    slot,
                    message: index as u16,
                    fragment,
                    sent_at: None,
                    retries: 0,
                    acked: false,
                    queued: true,
                    resent: false,
                    recall: false,
                    forwarded_at_retries: 0,
                };
                // Credits are the right to send at once (even if a timeout has cut the window
                // since); credits beyond the window are not.
                c.push_packet(e, m.overdrawn, &mut self.transmit, m.dst);
            }
        }
        self.released.push_back(slot);
        self.retire_front();
    }

    /// (message id, timestamp) of the next scattering that got its timestamp.
    pub fn poll_released(&mut self) -> Option<(u64, Instant)> {
        self.newly_released.pop_front()
    }

    pub fn peek_released(&self) -> Option<(u64, Instant)> {
        self.newly_released.front().copied()
    }

    pub fn poll_failure(&mut self) -> Option<SendFailure> {
        self.failures.pop_front()
    }

    /// The commit barrier (paper 5.1): every message with a lower timestamp is acknowledged.
    /// `clock` is the host clock now; anything released later gets a timestamp at or above it.
    pub fn commit_barrier(&self, clock: Instant) -> Instant {
        match self.released.front() {
            Some(&slot) => self.slots[slot as usize].as_ref().expect("live").ts.min(clock),
            None => clock,
        }
    }

    /// Retires fully acknowledged scatterings at the front of the release order (the commit
    /// barrier passes them), and frees the retired ones no `in_flight` entry names any more;
    /// their buffers are kept for the next ones.
    fn retire_front(&mut self) {
        while let Some(&slot) = self.released.front() {
            let done = self.slots[slot as usize]
                .as_ref()
                .is_some_and(|s| s.open_messages == 0);
            if !done {
                break;
            }
            self.released.pop_front();
            self.lingering.push(slot);
        }
        let mut i = 0;
        while i < self.lingering.len() {
            let slot = self.lingering[i];
            if self.slots[slot as usize]
                .as_ref()
                .expect("lingering slot is live")
                .entries
                > 0
            {
                i += 1;
                continue;
            }
            self.lingering.swap_remove(i);
            self.free(slot);
        }
    }

    fn free(&mut self, slot: u32) {
        let s = self.slots[slot as usize].take().expect("freed once");
        self.retained_packets -= s.packets;
        self.free_slots.push(slot);
        let messages_bytes = s.messages.capacity() * std::mem::size_of::<OutMessage>();
        if self.spare.len() < SPARE_BUFFERS_MAX
            && s.data.capacity() <= SPARE_BYTES_MAX
            && messages_bytes <= SPARE_BYTES_MAX
        {
            self.spare.push((s.data, s.messages));
        }
    }

    /// Entry `e` left its connection's `in_flight` (cumulatively acknowledged, or the
    /// connection closed); it was settled before.
    fn leave(slots: &mut [Option<Scattering>], e: &InFlight) {
        debug_assert!(e.acked, "settled before it leaves");
        let s = slots[e.slot as usize].as_mut().expect("in-flight slot is live");
        s.entries -= 1;
    }

    /// Whether `poll_transmit` may have a packet (first transmissions or retransmissions).
    pub fn has_transmit(&self) -> bool {
        !self.transmit.is_empty()
    }

    /// The next packet to send, if any. `now` is the shared clock.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        loop {
            let (dst, psn) = self.transmit.pop_front()?;
            let Some(c) = self.connections.get_mut(dst) else {
                continue;
            };
            let rto = self.rtt.rto(c.backoff);
            let Some(e) = c.entry(psn) else {
                continue; // acknowledged meanwhile
            };
            if e.acked {
                e.queued = false;
                continue;
            }
            // Copied before the stores below: read back after them, the copy stalled on
            // store forwarding (a fifth of this function's samples on one instruction).
            let what = *e;
            e.queued = false;
            e.resent |= e.retries > 0;
            e.sent_at = Some(now);
            self.timers.push_back((now, dst, psn));
            c.waiting_since.get_or_insert(now);
            let deadline = now + rto;
            self.rto_deadline = Some(self.rto_deadline.map_or(deadline, |d| d.min(deadline)));
            return Some(Self::packet(&self.slots, self.fragment_bytes, dst, psn, &what));
        }
    }

    /// What in-flight packet `e`, `psn` to `dst`, carries.
    fn packet<'a>(
        slots: &'a [Option<Scattering>],
        fragment_bytes: usize,
        dst: u32,
        psn: u32,
        e: &InFlight,
    ) -> Transmit<'a> {
        let s = slots[e.slot as usize].as_ref().expect("in-flight slot is live");
        let m = &s.messages[e.message as usize];
        if e.recall {
            return Transmit {
                dst,
                psn,
                ts: s.ts,
                msg_id: s.msg_id,
                frag_index: 0,
                frag_count: 1,
                payload: &[],
                recall: true,
            };
        }
        let start = m.start + e.fragment as usize * fragment_bytes;
        let end = (start + fragment_bytes).min(m.start + m.len);
        Transmit {
            dst,
            psn,
            ts: s.ts,
            msg_id: s.msg_id,
            frag_index: e.fragment,
            frag_count: m.packets,
            payload: &s.data[start..end],
            recall: false,
        }
    }

    /// A controller can forward what the fabric keeps losing (paper 5.2); from now on packets
    /// retransmitted `forward_after_retries` times are offered through [`Self::poll_forward`].
    pub fn set_forwarding(&mut self, on: bool) {
        self.forwarding = on && self.config.forward_after_retries > 0;
        if !self.forwarding {
            self.forwards.clear();
        }
    }

    /// The next packet to hand to the controller for forwarding: one retransmitted
    /// `forward_after_retries` times (or a multiple) and still not acknowledged. Its
    /// retransmissions over the fabric go on; an ACK by either way counts the same.
    pub fn poll_forward(&mut self) -> Option<Transmit<'_>> {
        loop {
            let (dst, psn) = self.forwards.pop_front()?;
            let Some(c) = self.connections.get_mut(dst) else {
                continue;
            };
            let Some(e) = c.entry(psn).filter(|e| !e.acked).copied() else {
                continue; // acknowledged meanwhile, or its connection closed
            };
            self.counters.forwards_requested += 1;
            return Some(Self::packet(&self.slots, self.fragment_bytes, dst, psn, &e));
        }
    }

    /// Marks one in-flight packet acknowledged (or settled, on the failure paths) and closes
    /// its message when it was the last. Whether it was open until now.
    fn ack_entry(
        slots: &mut [Option<Scattering>],
        unacked_packets: &mut usize,
        failed: &mut [(u32, usize)],
        e: &mut InFlight,
    ) -> bool {
        if e.acked {
            return false;
        }
        e.acked = true;
        *unacked_packets -= 1;
        let s = slots[e.slot as usize].as_mut().expect("in-flight slot is live");
        let m = &mut s.messages[e.message as usize];
        m.unacked -= 1;
        if m.unacked == 0 {
            s.open_messages -= 1;
            // Paper 5.2: "The sender completes Recall after collecting the ACKs."
            if s.open_messages == 0
                && let Some(process) = s.aborted
            {
                let f = failed
                    .iter_mut()
                    .find(|f| f.0 == process)
                    .expect("aborted for a failure");
                f.1 -= 1;
            }
        }
        true
    }

    /// An ACK from receiver `from` (paper 5.1: "The sender uses ACKs to detect and recover
    /// packet losses").
    pub fn on_ack(&mut self, now: Instant, from: u32, cumulative: u32, ack: &AckPayload) {
        let Some(c) = self.connections.get_mut(from) else {
            self.counters.acks_invalid += 1;
            return;
        };
        // Acknowledging beyond what we sent is forged or corrupt. An ACK below una is stale
        // (reordered or repeated): it advances nothing and its SACK bits find no entries.
        if psn_before(c.unsent, cumulative) {
            self.counters.acks_invalid += 1;
            return;
        }
        self.counters.acks_received += 1;
        let mut progressed = false;
        let mut sampled = false;
        while psn_before(c.una, cumulative) {
            let mut e = c.in_flight.pop_front().expect("una < cumulative <= next_psn");
            c.resolve_timeout(&e, &self.cc, &mut self.counters);
            if !e.acked {
                // Karn: a packet sent twice gives no sample, unless the second copy has not
                // left (then the ACK is for the only one, and shows how late ACKs can be).
                if let (Some(sent), false) = (e.sent_at, e.resent) {
                    self.rtt.sample(now.saturating_since(sent));
                    sampled = true;
                }
                self.counters.packets_acked += u64::from(Self::ack_entry(
                    &mut self.slots,
                    &mut self.unacked_packets,
                    &mut self.failed,
                    &mut e,
                ));
            }
            Self::leave(&mut self.slots, &e);
            c.una = c.una.wrapping_add(1);
            progressed = true;
        }
        let mut highest_sacked = None;
        // Only the set bits: in FIFO fabrics the map is almost always empty.
        let mut bits = ack.sack;
        while bits != 0 {
            let bit = bits.trailing_zeros();
            bits &= bits - 1;
            let psn = cumulative.wrapping_add(1 + bit);
            if !psn_before(psn, c.unsent) {
                break; // never sent: forged or corrupt, like the rest of the bits
            }
            if let Some(e) = c.entry(psn).map(|e| *e) {
                c.resolve_timeout(&e, &self.cc, &mut self.counters);
                let e = c.entry(psn).expect("just found");
                let newly = Self::ack_entry(&mut self.slots, &mut self.unacked_packets, &mut self.failed, e);
                self.counters.packets_acked += u64::from(newly);
                highest_sacked = Some(psn);
            }
        }
        // Later packets arrived and these did not: lost, most likely (the fabric keeps each
        // link FIFO, but paths differ). Resend each once per smoothed RTT.
        if let Some(high) = highest_sacked {
            let srtt = self.rtt.srtt();
            let mut psn = c.una;
            while psn_before(psn, high) {
                let e = c.entry(psn).expect("below highest sacked");
                let stale = e.sent_at.is_some_and(|t| now.saturating_since(t) >= srtt);
                if !e.acked && !e.queued && stale {
                    e.queued = true;
                    e.retries += 1;
                    self.transmit.push_back((from, psn));
                    self.counters.fast_retransmits += 1;
                    self.counters.retransmissions += 1;
                }
                psn = psn.wrapping_add(1);
            }
        }
        let edge = cumulative.wrapping_add(ack.window_packets);
        if psn_before(c.window_edge, edge) {
            c.window_edge = edge;
        }
        c.cc.on_ack(&self.cc, ack.received, ack.ce_marked, c.una, c.next_psn);
        if c.unsent != c.next_psn {
            c.send_held(&mut self.transmit, from);
        }
        if progressed {
            c.waiting_since = Some(now);
        }
        // Karn: only an ACK that measured a round trip (of a packet sent once) shows the RTO
        // is long enough again. An ACK of a retransmission is no such proof; dropping the
        // backoff on it made every packet time out once whenever queueing pushed the RTT past
        // the estimate, because the estimate only ever saw the packets that came back in time.
        if sampled {
            c.backoff = 0;
        }
        // Its window may have opened for the scatterings that wait for it.
        if !c.needy.is_empty() {
            credits::mark_dirty(&mut self.dirty, c, from);
        }
        self.retire_front();
    }

    /// When `on_timeout` is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.rto_deadline
    }

    /// Paths changed (the controller rerouted around a failed link): connections that timed
    /// out start over from the un-backed-off RTO, and what has waited that long goes again now
    /// instead of at its backed-off deadline (a link failure otherwise costs a full backoff
    /// step after the reroute: paper Fig. 10's core-link case in the simulator).
    pub fn on_paths_changed(&mut self, now: Instant) {
        let mut any = false;
        for k in 0..self.connections.peer_count() {
            let dst = self.connections.peer_at(k);
            let c = self.connections.get_mut(dst).expect("listed");
            if c.backoff > 0 {
                c.backoff = 0;
                any = true;
            }
        }
        if any {
            self.on_timeout(now);
        }
    }

    /// Retransmits what has waited longer than its RTO; gives up on messages whose packets
    /// used up the retry budget (paper Table 1 send-failure callback).
    ///
    /// Transmissions are visited oldest first from [`Self::timers`], and only those old enough
    /// to be due at the un-backed-off RTO: nothing younger can be. Scanning every connection's
    /// packets instead, as before, cost about 2.5% of a saturated reliable run, because the
    /// deadline kept pointing at packets that had since been acknowledged.
    pub fn on_timeout(&mut self, now: Instant) {
        let rto_unbacked = self.rtt.rto(0);
        // Transmissions of backed-off connections that are old enough but not due yet; they go
        // back to the front, in order.
        let mut kept: Vec<(Instant, u32, u32)> = Vec::new();
        let mut next: Option<Instant> = None;
        let mut expired: Vec<u32> = Vec::new();
        let mut exhausted: Vec<u32> = Vec::new();
        while let Some(&(sent, dst, psn)) = self.timers.front() {
            if now < sent + rto_unbacked {
                break;
            }
            self.timers.pop_front();
            if exhausted.contains(&dst) {
                continue;
            }
            let Some(c) = self.connections.get_mut(dst) else {
                continue;
            };
            let rto = self.rtt.rto(c.backoff);
            let waiting_since = c.waiting_since;
            let Some(e) = c.entry(psn) else {
                continue; // acknowledged cumulatively
            };
            // Acknowledged, queued to go again, or sent again since (a later timer has it).
            if e.acked || e.queued || e.sent_at != Some(sent) {
                continue;
            }
            let due = sent + rto;
            if now < due {
                next = Some(next.map_or(due, |n: Instant| n.min(due)));
                kept.push((sent, dst, psn));
                continue;
            }
            // Give up only on a receiver that is silent, not on a lossy path: the packet
            // used its retries and the connection saw no progress for `give_up_after`.
            let stalled = waiting_since.is_some_and(|w| now.saturating_since(w) >= self.config.give_up_after);
            if e.retries as u32 >= self.config.retries_max && stalled {
                exhausted.push(dst);
                continue;
            }
            e.retries += 1;
            e.queued = true;
            if !expired.contains(&dst) {
                expired.push(dst);
            }
            self.transmit.push_back((dst, psn));
            self.counters.retransmissions += 1;
            // Paper 5.2: "S repeatedly retransmits a message but cannot receive ACK from
            // R. In this case, S asks controller to forward the message to R". Only once
            // the connection has stalled too: on shared cores a few timeouts in a row are
            // most often a descheduled peer, and each forward costs the controller a
            // logged input (measured over udp, 4 processes, retries alone: 80 forwards in
            // the 1.4 s before any failure).
            let every = self.config.forward_after_retries;
            let stalled_long =
                waiting_since.is_some_and(|w| now.saturating_since(w) >= self.config.forward_after);
            let due = e.retries as u32 >= every + e.forwarded_at_retries as u32;
            if self.forwarding && stalled_long && due {
                e.forwarded_at_retries = e.retries;
                if self.forwards.len() < FORWARDS_QUEUED_MAX {
                    self.forwards.push_back((dst, psn));
                } else {
                    self.counters.forwards_dropped += 1;
                }
            }
        }
        if let Some(&(sent, _, _)) = self.timers.front() {
            // Late by up to an eighth of the RTO, so that one call handles the transmissions
            // of that span together: waking for each one (nearly all acknowledged by then)
            // cost more than the scans this replaced.
            let slack = Duration::from_nanos(rto_unbacked.as_nanos() / 8);
            let due = sent + rto_unbacked + slack;
            next = Some(next.map_or(due, |n| n.min(due)));
        }
        for entry in kept.into_iter().rev() {
            self.timers.push_front(entry);
        }
        // One window cut and one backoff step per connection and timeout, however many of
        // its packets expired together.
        for &dst in &expired {
            let c = self.connections.get_mut(dst).expect("expired above");
            self.counters.timeouts += 1;
            let window = c.cc.on_timeout(&self.cc, c.backoff > 0);
            c.undo.get_or_insert(TimeoutUndo {
                window,
                backoff: c.backoff,
            });
            c.backoff += 1;
        }
        self.rto_deadline = next;
        if expired.is_empty() && exhausted.is_empty() {
            return;
        }
        for dst in exhausted {
            self.give_up(dst);
        }
        self.retire_front();
    }

    /// The bounds every step must keep: cheap enough for the simulator to call after each.
    /// [`ReliableSender::check_invariants`] checks the bookkeeping in full.
    pub fn invariants(&self) {
        assert!(
            self.forwards.len() <= FORWARDS_QUEUED_MAX,
            "forward queue bounded"
        );
        assert!(
            self.released.len() + self.waiting.len() <= self.slots.len(),
            "slots hold them"
        );
    }

    /// Checks the bookkeeping against the buffer it summarizes (TigerBeetle's `invariants()`):
    /// a scan of everything, for tests and at the end of simulator runs, not for every packet.
    pub fn check_invariants(&self) {
        let mut unacked = 0;
        let mut retained = 0;
        let mut live = 0;
        for s in self.slots.iter().flatten() {
            live += 1;
            retained += s.packets;
            unacked += s.messages.iter().map(|m| m.unacked as usize).sum::<usize>();
            let open = s.messages.iter().filter(|m| m.unacked > 0).count();
            assert_eq!(s.open_messages, open, "open messages of scattering {}", s.msg_id);
        }
        assert_eq!(self.unacked_packets, unacked, "unacked packets");
        assert_eq!(self.retained_packets, retained, "retained packets");
        assert_eq!(
            live,
            self.waiting.len() + self.released.len() + self.lingering.len(),
            "live slots"
        );
        let mut entries = vec![0usize; self.slots.len()];
        self.check_credit_invariants();
        for &(process, open) in &self.failed {
            let aborted_open = self
                .slots
                .iter()
                .flatten()
                .filter(|s| s.aborted == Some(process) && s.open_messages > 0)
                .count();
            assert_eq!(open, aborted_open, "open aborts for failed process {process}");
        }
        for k in 0..self.connections.peer_count() {
            let dst = self.connections.peer_at(k);
            let c = self.connections.get(dst).expect("listed");
            assert_eq!(
                c.in_flight.len(),
                c.next_psn.wrapping_sub(c.una) as usize,
                "in flight to {dst}"
            );
            assert!(
                !c.failed || c.in_flight.is_empty(),
                "a failed connection is closed"
            );
            let sent = c.unsent.wrapping_sub(c.una) as usize;
            assert!(sent <= c.in_flight.len(), "held packets of {dst} are in flight");
            for e in c.in_flight.iter().skip(sent) {
                assert!(e.sent_at.is_none() && !e.queued, "a held packet to {dst} left");
            }
            for e in &c.in_flight {
                let s = self.slots[e.slot as usize]
                    .as_ref()
                    .expect("in-flight slot is live");
                let m = &s.messages[e.message as usize];
                assert_eq!(m.dst, dst, "entry on its message's connection");
                assert!(e.recall || e.fragment < m.packets);
                entries[e.slot as usize] += 1;
            }
            if !c.broken {
                let reserved: u32 = self
                    .waiting
                    .iter()
                    .flat_map(|&slot| &self.slots[slot as usize].as_ref().expect("live").messages)
                    .filter(|m| m.dst == dst)
                    .map(|m| m.credits as u32)
                    .sum();
                assert_eq!(c.reserved, reserved, "credits reserved on {dst}");
            }
        }
        for (slot, s) in self.slots.iter().enumerate() {
            let counted = s.as_ref().map_or(0, |s| s.entries);
            assert_eq!(counted, entries[slot], "in-flight entries of slot {slot}");
        }
        for &slot in &self.lingering {
            let s = self.slots[slot as usize]
                .as_ref()
                .expect("lingering slot is live");
            assert!(
                s.open_messages == 0 && s.entries > 0,
                "lingering slot {slot} is retired"
            );
        }
    }

    /// Whether nothing is buffered (all acknowledged or failed).
    pub fn is_idle(&self) -> bool {
        self.retained_packets == 0
    }

    /// Whether this sender has so much unacknowledged that it will send again soon, as ACKs
    /// free its buffer: more than half the buffer, and more packets than peers (so that its
    /// peers' held lone ACKs, one per peer, cannot be all it waits for; see
    /// [`super::receiver::AckRelease::Idle`]).
    pub fn is_loaded(&self) -> bool {
        self.unacked_packets * 2 > self.config.send_buffer_packets_max
            && self.unacked_packets > self.connections.peer_count()
    }
}

mod connection;
mod credits;
mod failure;
mod recovery;

use connection::{Connection, InFlight, TimeoutUndo};
