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
    /// Arrived PSNs at or after `cumulative`, as a ring of bits indexed by PSN.
    seen: Vec<u64>,
    /// Packets stored and not yet delivered, in order and out of order.
    held: u32,
    /// Of those, the ones at or after `cumulative` (out of order).
    held_out_of_order: u32,
    received_since_ack: u16,
    marked_since_ack: u16,
    /// Right edge of the window in the last ACK.
    advertised_edge: u32,
    ack_queued: bool,
}

impl Connection {
    fn bit(&self, psn: u32) -> (usize, u64) {
        let i = psn as usize % (self.seen.len() * 64);
        (i / 64, 1 << (i % 64))
    }
    fn is_seen(&self, psn: u32) -> bool {
        let (w, b) = self.bit(psn);
        self.seen[w] & b != 0
    }
    /// Which of the 64 PSNs after `cumulative` arrived (bit i: cumulative + 1 + i). Walks the
    /// ring with shifts (one division in all): this runs for every ACK.
    fn sack(&self) -> u64 {
        let ring = self.seen.len() * 64;
        let mut i = self.cumulative.wrapping_add(1) as usize % ring;
        let mut sack = 0u64;
        for bit in 0..64 {
            sack |= (self.seen[i / 64] >> (i % 64) & 1) << bit;
            i += 1;
            if i == ring {
                i = 0;
            }
        }
        sack
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

pub struct ReliableReceiver {
    window_packets: u32,
    connections: super::Connections<Connection>,
    /// Connections owing an ACK, with when they began to owe it. An entry whose connection
    /// no longer owes (its ACK rode on a prepare packet) is skipped.
    ack_queue: VecDeque<(u32, Instant)>,
    counters: ReceiverCounters,
}

impl ReliableReceiver {
    pub fn new(window_packets: u32, process_count: u32) -> ReliableReceiver {
        assert!(window_packets > 0, "receive window must be positive");
        ReliableReceiver {
            window_packets,
            connections: super::Connections::new(process_count),
            ack_queue: VecDeque::new(),
            counters: ReceiverCounters::default(),
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
        let words = (window as usize).div_ceil(64) + 1;
        connections.get_or_open(src, || Connection {
            cumulative: 0,
            seen: vec![0; words],
            held: 0,
            held_out_of_order: 0,
            received_since_ack: 0,
            marked_since_ack: 0,
            advertised_edge: window,
            ack_queued: false,
        })
    }

    fn queue_ack(ack_queue: &mut VecDeque<(u32, Instant)>, c: &mut Connection, src: u32, now: Instant) {
        if !c.ack_queued {
            c.ack_queued = true;
            ack_queue.push_back((src, now));
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
        let admit = if psn_before(psn, c.cumulative) || c.is_seen(psn) {
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
        match admit {
            Admit::Store => self.counters.prepared += 1,
            Admit::Duplicate => self.counters.duplicates += 1,
            Admit::OutOfWindow => self.counters.out_of_window += 1,
        }
        Self::queue_ack(&mut self.ack_queue, c, src, now);
        admit
    }

    /// A message of `packets` packets from `src` was delivered: its buffer space is free. The
    /// sender hears of it in the next ACK, sent now if the window opened by a quarter.
    pub fn on_delivered(&mut self, now: Instant, src: u32, packets: u16) {
        let window = self.window_packets;
        let Some(c) = self.connections.get_mut(src) else {
            return;
        };
        c.held = c.held.saturating_sub(packets as u32);
        let edge = c.cumulative.wrapping_add(window - (c.held - c.held_out_of_order));
        if edge.wrapping_sub(c.advertised_edge) as i32 >= (window / 4).max(1) as i32 {
            Self::queue_ack(&mut self.ack_queue, c, src, now);
        }
    }

    /// The next ACK to send on its own: (to, cumulative PSN, payload). With `only_older_than`,
    /// only one that has waited at least that long for a prepare packet to ride on.
    pub fn poll_ack(
        &mut self,
        now: Instant,
        only_older_than: Option<Duration>,
    ) -> Option<(u32, u32, AckPayload)> {
        loop {
            let &(src, since) = self.ack_queue.front()?;
            let owed = self.connections.get(src).is_some_and(|c| c.ack_queued);
            if !owed {
                self.ack_queue.pop_front();
                continue;
            }
            if only_older_than.is_some_and(|d| now.saturating_since(since) < d) {
                return None;
            }
            self.ack_queue.pop_front();
            return Some(self.build_ack(src));
        }
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

    fn build_ack(&mut self, src: u32) -> (u32, u32, AckPayload) {
        let window = self.window_packets;
        let c = self.connections.get_mut(src).expect("owing connections exist");
        c.ack_queued = false;
        let sack = c.sack();
        let window_packets = window - (c.held - c.held_out_of_order);
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
