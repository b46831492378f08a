//! The receiving half of reliable 1Pipe (paper 5.1 prepare phase, 6.1 receive windows),
//! sans-IO: per-sender connections that suppress duplicates by PSN, bound what a sender may
//! have buffered here, and say what to acknowledge.

use super::sender::psn_before;
use onepipe_wire::{AckPayload, Duration, Instant};
use std::collections::VecDeque;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    pub prepared: u64,
    pub duplicates: u64,
    /// Beyond the receive window: dropped, the sender retransmits once the window opens.
    pub out_of_window: u64,
    pub acks_sent: u64,
    /// Of those, ACKs that rode on a prepare packet instead of a frame of their own.
    pub acks_piggybacked: u64,
    /// Of those, ACKs that went back through the controller (paper 5.2 forwarding).
    pub acks_forwarded: u64,
}

/// What to do with an arriving prepare packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// New and within the window: store it.
    Store,
    /// Seen before (a retransmission or a duplicate on the wire): drop it, ACK again.
    Duplicate,
    /// Beyond the window: drop it.
    OutOfWindow,
}

struct Connection {
    /// Next PSN expected: everything below arrived.
    cumulative: u32,
    /// Arrived PSNs at or after `cumulative`, as a ring of bits indexed by PSN. Its length is
    /// a power of two, so PSN modulo ring is a mask (no division per packet) and stays
    /// continuous where PSNs wrap at 2^32. As many bits are set as `held_out_of_order`, so
    /// with none out of order it is all zero and not read (in a FIFO fabric, nearly always:
    /// it is a cache line of its own, and reading it was ~40% of `on_prepare`).
    seen: Vec<u64>,
    /// Packets stored and not yet delivered, in order and out of order.
    held: u32,
    /// Of those, the ones at or after `cumulative` (out of order).
    held_out_of_order: u32,
    received_since_ack: u16,
    marked_since_ack: u16,
    /// Right edge of the window in the last ACK.
    advertised_edge: u32,
    /// An ACK is owed, since `ack_since`.
    ack_queued: bool,
    /// The owed ACK should not wait for more packets (see [`AckRelease::Idle`]).
    ack_ready: bool,
    ack_since: Instant,
}

impl Connection {
    fn bit(&self, psn: u32) -> (usize, u64) {
        let i = psn as usize & (self.seen.len() * 64 - 1);
        (i / 64, 1 << (i % 64))
    }
    fn is_seen(&self, psn: u32) -> bool {
        let (w, b) = self.bit(psn);
        self.seen[w] & b != 0
    }
    /// Which of the 64 PSNs after `cumulative` arrived (bit i: cumulative + 1 + i): the two
    /// ring words they span, shifted together. This runs for every ACK (a loop over the 64
    /// bits was a tenth of a reliable host's time).
    fn sack(&self) -> u64 {
        if self.held_out_of_order == 0 {
            return 0;
        }
        let i = self.cumulative.wrapping_add(1) as usize & (self.seen.len() * 64 - 1);
        let (w, shift) = (i / 64, i % 64);
        let low = self.seen[w] >> shift;
        if shift == 0 {
            return low;
        }
        let next = self.seen[(w + 1) & (self.seen.len() - 1)];
        low | next << (64 - shift)
    }

    /// The window to advertise: what is free of `window`, at most what a piggybacked ACK can
    /// say (`u16::MAX`), so that `advertised_edge` is what the sender heard.
    fn free_window(&self, window: u32) -> u32 {
        (window - (self.held - self.held_out_of_order)).min(u16::MAX as u32)
    }

    /// The window has opened by a quarter since the last ACK advertised it: the sender should
    /// hear of it now rather than with the next packet that happens to owe an ACK.
    fn window_opened(&self, window: u32) -> bool {
        let edge = self.cumulative.wrapping_add(self.free_window(window));
        edge.wrapping_sub(self.advertised_edge) as i32 >= (window / 4).max(1) as i32
    }

    fn set_seen(&mut self, psn: u32, on: bool) {
        let (w, b) = self.bit(psn);
        if on {
            self.seen[w] |= b;
        } else {
            self.seen[w] &= !b;
        }
    }
}

/// A lone in-order packet's ACK may wait for the next packet of its connection; this many
/// packets make it ready (TCP's ACK for every second segment). Each peer then holds at most
/// one of a sender's packets unacknowledged, which is what makes holding safe (see
/// [`AckRelease::Idle`]).
const ACK_EVERY_PACKETS: u16 = 2;

/// Which owed ACKs [`ReliableReceiver::poll_ack`] lets go in a frame of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckRelease {
    /// Prepare packets are going out that ACKs may ride on: only ACKs that have waited at
    /// least this long.
    OlderThan(Duration),
    /// Nothing is going out to ride on: every owed ACK, except, with `hold_lone`, those that
    /// acknowledge a single in-order packet. Those wait for the connection's next packet, a
    /// ride, or the delay, and so cost no frame when traffic flows both ways.
    ///
    /// The caller holds lone ACKs only while it has more packets unacknowledged than peers.
    /// Then no cycle of hosts can stall each holding what the others wait for: each peer
    /// holds at most one of a host's packets, so some of its packets are always acknowledged
    /// freely, and once they are it stops holding.
    Idle { hold_lone: bool },
}

pub struct ReliableReceiver {
    window_packets: u32,
    connections: super::Connections<Connection>,
    /// Connections owing an ACK that should go at the next chance, with when they began to
    /// owe it. Entries that no longer match their connection (the ACK went, most often on a
    /// prepare packet) are dropped when they reach the front and are looked at (see `trim`),
    /// not when the ACK goes: checking the fronts after every piggybacked ACK cost a lookup
    /// of a cold connection each time (~1.5% of a saturated reliable run).
    ready: VecDeque<(u32, Instant)>,
    /// Connections owing an ACK for a single in-order packet.
    lone: VecDeque<(u32, Instant)>,
    counters: ReceiverCounters,
    /// (sender, PSN) of stored packets that will never be delivered (paper 5.2 recalls and
    /// recalled messages) but arrived out of order: their space is freed when the cumulative
    /// point passes them. Empty unless a failure is being handled.
    discarded: Vec<(u32, u32)>,
}

impl ReliableReceiver {
    pub fn new(window_packets: u32, process_count: u32) -> ReliableReceiver {
        assert!(window_packets > 0, "receive window must be positive");
        ReliableReceiver {
            window_packets,
            connections: super::Connections::new(process_count),
            ready: VecDeque::new(),
            lone: VecDeque::new(),
            counters: ReceiverCounters::default(),
            discarded: Vec::new(),
        }
    }

    pub fn counters(&self) -> &ReceiverCounters {
        &self.counters
    }

    /// Paper 6.1: "When a destination process is first accessed, it establishes a connection
    /// with the source process and provisions a receive buffer for it". Both ends know the
    /// window size from configuration, so the first packet opens the connection.
    fn open(
        connections: &mut super::Connections<Connection>,
        window: u32,
        src: u32,
    ) -> Option<&mut Connection> {
        // The window plus the 64 PSNs a SACK reads beyond the cumulative point.
        let words = ((window as usize).div_ceil(64) + 1).next_power_of_two();
        connections.get_or_open(src, || Connection {
            cumulative: 0,
            seen: vec![0; words],
            held: 0,
            held_out_of_order: 0,
            received_since_ack: 0,
            marked_since_ack: 0,
            advertised_edge: window,
            ack_queued: false,
            ack_ready: false,
            ack_since: Instant::ZERO,
        })
    }

    /// Opens the connection from `src` as if PSNs up to `cumulative` had arrived and been
    /// delivered (tests of PSN wraparound, which would otherwise take 2^32 packets).
    #[cfg(test)]
    pub(crate) fn open_at(&mut self, src: u32, cumulative: u32) {
        let window = self.window_packets;
        let c = Self::open(&mut self.connections, window, src).expect("known process");
        c.cumulative = cumulative;
        c.advertised_edge = cumulative.wrapping_add(window);
    }

    /// Owes `src` an ACK from now on (if not already), `ready` if it should not wait for more
    /// packets. A lone ACK made ready moves queues and keeps its age.
    fn queue_ack(&mut self, src: u32, now: Instant, ready: bool) {
        let Some(c) = self.connections.get_mut(src) else {
            return;
        };
        if !c.ack_queued {
            c.ack_queued = true;
            c.ack_ready = ready;
            c.ack_since = now;
            let queue = if ready { &mut self.ready } else { &mut self.lone };
            queue.push_back((src, now));
        } else if ready && !c.ack_ready {
            c.ack_ready = true;
            self.ready.push_back((src, c.ack_since));
        }
    }

    /// Whether a queue entry still stands for an owed ACK of its kind.
    fn is_current(&self, entry: (u32, Instant), ready: bool) -> bool {
        let (src, since) = entry;
        self.connections
            .get(src)
            .is_some_and(|c| c.ack_queued && c.ack_ready == ready && c.ack_since == since)
    }

    /// Drops entries that no longer stand for an owed ACK from the fronts of both queues, so
    /// that the fronts are current.
    fn trim(&mut self) {
        while let Some(&e) = self.ready.front()
            && !self.is_current(e, true)
        {
            self.ready.pop_front();
        }
        while let Some(&e) = self.lone.front()
            && !self.is_current(e, false)
        {
            self.lone.pop_front();
        }
    }

    /// A prepare packet `psn` from `src` arrived, `marked` if it carried ECN.
    pub fn on_prepare(&mut self, now: Instant, src: u32, psn: u32, marked: bool) -> Admit {
        let window = self.window_packets;
        let Some(c) = Self::open(&mut self.connections, window, src) else {
            return Admit::OutOfWindow;
        };
        c.received_since_ack = c.received_since_ack.saturating_add(1);
        if marked {
            c.marked_since_ack = c.marked_since_ack.saturating_add(1);
        }
        let admit = if psn == c.cumulative && c.held_out_of_order == 0 && c.held < window {
            // In order with nothing beyond it, within the window: no bit to set or clear.
            c.held += 1;
            c.cumulative = c.cumulative.wrapping_add(1);
            Admit::Store
        } else if psn_before(psn, c.cumulative) || c.is_seen(psn) {
            Admit::Duplicate
        } else if psn.wrapping_sub(c.cumulative) >= window - (c.held - c.held_out_of_order) {
            Admit::OutOfWindow
        } else {
            c.set_seen(psn, true);
            c.held += 1;
            c.held_out_of_order += 1;
            while c.is_seen(c.cumulative) {
                c.set_seen(c.cumulative, false);
                c.cumulative = c.cumulative.wrapping_add(1);
                c.held_out_of_order -= 1;
            }
            Admit::Store
        };
        if admit == Admit::Store && !self.discarded.is_empty() {
            Self::settle_discarded(&mut self.discarded, src, c);
        }
        match admit {
            Admit::Store => self.counters.prepared += 1,
            Admit::Duplicate => self.counters.duplicates += 1,
            Admit::OutOfWindow => self.counters.out_of_window += 1,
        }
        // Repairs, duplicates and congestion marks are news the sender needs now.
        let ready = admit != Admit::Store
            || marked
            || c.held_out_of_order > 0
            || c.received_since_ack >= ACK_EVERY_PACKETS;
        self.queue_ack(src, now, ready);
        admit
    }

    /// Stored packet `psn` from `src` will never be delivered (paper 5.2: a recall, or a packet
    /// of a recalled message): its buffer space is free, now if it is in order, else once the
    /// cumulative point passes it (until then it holds its place beyond the gap like any
    /// out-of-order packet). Never underflows, whatever PSNs a sender forged.
    pub fn discard(&mut self, now: Instant, src: u32, psn: u32) {
        let window = self.window_packets;
        let Some(c) = self.connections.get_mut(src) else {
            return;
        };
        if !psn_before(psn, c.cumulative) {
            let in_window = psn.wrapping_sub(c.cumulative) < window;
            if in_window && c.is_seen(psn) && !self.discarded.contains(&(src, psn)) {
                self.discarded.push((src, psn));
            }
            return;
        }
        if c.held > c.held_out_of_order {
            c.held -= 1;
        }
        if c.window_opened(window) {
            self.queue_ack(src, now, true);
        }
    }

    /// Frees the discarded packets of `src` the cumulative point has passed.
    fn settle_discarded(discarded: &mut Vec<(u32, u32)>, src: u32, c: &mut Connection) {
        discarded.retain(|&(s, psn)| {
            if s != src || !psn_before(psn, c.cumulative) {
                return true;
            }
            if c.held > c.held_out_of_order {
                c.held -= 1;
            }
            false
        });
    }

    /// Sender `src` failed (paper 5.2): nothing of it will be settled any more.
    pub fn close(&mut self, src: u32) {
        self.discarded.retain(|&(s, _)| s != src);
    }

    /// Sender `src` recovered from a failure and joined again as a new process (paper 5.2,
    /// Receiver Recovery): its PSNs start over, so does the connection. Packets of its old
    /// incarnation still waiting here for the commit barrier no longer count against the window.
    pub fn reset(&mut self, src: u32) {
        let window = self.window_packets;
        self.discarded.retain(|&(s, _)| s != src);
        if let Some(c) = self.connections.get_mut(src) {
            c.cumulative = 0;
            c.seen.fill(0);
            c.held = 0;
            c.held_out_of_order = 0;
            c.received_since_ack = 0;
            c.marked_since_ack = 0;
            c.advertised_edge = window;
            c.ack_queued = false;
            c.ack_ready = false;
        }
        self.trim();
    }

    /// Packets held for `src`, and of those, out of order (tests of the window accounting).
    pub fn held_packets(&self, src: u32) -> Option<(u32, u32)> {
        self.connections.get(src).map(|c| (c.held, c.held_out_of_order))
    }

    /// A message of `packets` packets from `src` was delivered: its buffer space is free. The
    /// sender hears of it in the next ACK, sent now if the window opened by a quarter.
    pub fn on_delivered(&mut self, now: Instant, src: u32, packets: u16) {
        let window = self.window_packets;
        let Some(c) = self.connections.get_mut(src) else {
            return;
        };
        // Delivered packets were in order; a message that claims more packets than are held in
        // order (its fragments forged or duplicated) frees no more than that, so that the
        // out-of-order count stays within the total.
        let in_order = c.held - c.held_out_of_order;
        c.held -= in_order.min(packets as u32);
        if c.window_opened(window) {
            self.queue_ack(src, now, true);
        }
    }

    /// The owed ACK that has waited longest, as far as the fronts tell (current after `trim`;
    /// before, a front may stand for an ACK that already went, and is then no younger than
    /// what was queued behind it).
    fn oldest(&self) -> Option<(u32, Instant)> {
        match (self.ready.front().copied(), self.lone.front().copied()) {
            (Some(r), Some(l)) => Some(if l.1 < r.1 { l } else { r }),
            (r, l) => r.or(l),
        }
    }

    /// The next ACK to send on its own, as `release` allows: (to, cumulative PSN, payload).
    /// Oldest first (measured: sending repairs ahead of older ACKs added 30 us to the median
    /// latency of the simulator's Fig. 9b at 10% loss).
    pub fn poll_ack(&mut self, now: Instant, release: AckRelease) -> Option<(u32, u32, AckPayload)> {
        if let AckRelease::OlderThan(delay) = release {
            // A front younger than `delay`, current or not, says nothing behind it is due:
            // no lookups on the common path.
            self.oldest()
                .filter(|&(_, since)| now.saturating_since(since) >= delay)?;
        }
        self.trim();
        let (src, _) = match release {
            AckRelease::OlderThan(delay) => self
                .oldest()
                .filter(|&(_, since)| now.saturating_since(since) >= delay)?,
            AckRelease::Idle { hold_lone: false } => self.oldest()?,
            AckRelease::Idle { hold_lone: true } => self.ready.front().copied()?,
        };
        Some(self.build_ack(src))
    }

    /// When the oldest owed ACK will have waited `delay`: it must go on its own then even if
    /// nothing else does. Possibly earlier (a front that already went): the poll at that time
    /// finds nothing due and the next deadline is exact.
    pub fn ack_deadline(&self, delay: Duration) -> Option<Instant> {
        self.oldest().map(|(_, since)| since + delay)
    }

    /// The ACK owed to `to`, if any, to piggyback on a prepare packet going there.
    pub fn take_ack(&mut self, to: u32) -> Option<(u32, AckPayload)> {
        let owed = self.connections.get(to)?.ack_queued;
        owed.then(|| {
            self.counters.acks_piggybacked += 1;
            let (_, cumulative, ack) = self.build_ack(to);
            (cumulative, ack)
        })
    }

    /// The ACK owed to `to`, if any, to answer a packet the controller forwarded: the fabric
    /// lost the packet, so it would most likely lose the ACK too.
    pub fn take_ack_forwarded(&mut self, to: u32) -> Option<(u32, AckPayload)> {
        let owed = self.connections.get(to)?.ack_queued;
        owed.then(|| {
            self.counters.acks_forwarded += 1;
            let (_, cumulative, ack) = self.build_ack(to);
            (cumulative, ack)
        })
    }

    fn build_ack(&mut self, src: u32) -> (u32, u32, AckPayload) {
        let window = self.window_packets;
        let c = self.connections.get_mut(src).expect("owing connections exist");
        // Its own queue entries go now if they are in front (no lookup needed: it is this
        // ACK); others wait for `trim`.
        for queue in [&mut self.ready, &mut self.lone] {
            if queue.front() == Some(&(src, c.ack_since)) {
                queue.pop_front();
            }
        }
        c.ack_queued = false;
        c.ack_ready = false;
        let sack = c.sack();
        let window_packets = c.free_window(window);
        c.advertised_edge = c.cumulative.wrapping_add(window_packets);
        let ack = AckPayload {
            sack,
            window_packets,
            received: std::mem::take(&mut c.received_since_ack),
            ce_marked: std::mem::take(&mut c.marked_since_ack),
        };
        self.counters.acks_sent += 1;
        (src, c.cumulative, ack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delivered message that claims more packets than its connection holds in order (its
    /// fragment count forged, or fragments the receiver counted as duplicates) frees only
    /// what is held in order: the out-of-order packets stay counted, and the free window is
    /// never computed from a count below them. It used to underflow and end the process
    /// (found by the `endpoint` and `control` fuzz targets; crates/fuzz/regressions).
    #[test]
    fn a_delivery_claiming_more_packets_than_held_frees_only_those() {
        let now = Instant::from_nanos(1_000);
        let mut r = ReliableReceiver::new(8, 2);
        assert_eq!(r.on_prepare(now, 1, 0, false), Admit::Store);
        assert_eq!(r.on_prepare(now, 1, 2, false), Admit::Store);
        assert_eq!(r.held_packets(1), Some((2, 1)));
        r.on_delivered(now, 1, u16::MAX);
        assert_eq!(r.held_packets(1), Some((1, 1)));
        let (to, cumulative, ack) = r
            .poll_ack(now, AckRelease::Idle { hold_lone: false })
            .expect("an ACK is owed");
        assert_eq!((to, cumulative), (1, 1));
        assert_eq!(ack.window_packets, 8);
    }
}
