//! A connection to one receiver (paper 6.1): its PSNs, the packets in flight with their
//! retransmission state, and its window (receive window and DCTCP's congestion window).

use super::*;

#[derive(Clone, Copy)]
pub(super) struct InFlight {
    pub(super) slot: u32,
    pub(super) message: u16,
    pub(super) fragment: u16,
    /// Last transmission, `None` while waiting for its first.
    pub(super) sent_at: Option<Instant>,
    pub(super) retries: u16,
    pub(super) acked: bool,
    /// In the transmit queue now.
    pub(super) queued: bool,
    /// A retransmission of it has left; until then an ACK can only be for an earlier copy.
    pub(super) resent: bool,
    /// A recall of its message (paper 5.2), not a fragment of it: sent without payload.
    pub(super) recall: bool,
    /// `retries` when it was last handed to the controller to forward; 0: never.
    pub(super) forwarded_at_retries: u16,
}

/// A connection's state before a timeout cut it.
#[derive(Clone, Copy)]
pub(super) struct TimeoutUndo {
    pub(super) window: WindowBeforeTimeout,
    pub(super) backoff: u32,
}

pub(super) struct Connection {
    /// Next PSN to assign.
    pub(super) next_psn: u32,
    /// First PSN never put in the transmit queue: the packets from here to `next_psn` are held
    /// until the window reaches them (a message larger than the window went; see
    /// `sender_credits.rs`).
    pub(super) unsent: u32,
    /// Oldest PSN not cumulatively acknowledged; `in_flight[0]` has it.
    pub(super) una: u32,
    pub(super) in_flight: VecDeque<InFlight>,
    /// PSNs below this are within the receiver's window.
    pub(super) window_edge: u32,
    /// Credits held by waiting scatterings.
    pub(super) reserved: u32,
    pub(super) cc: Dctcp,
    pub(super) backoff: u32,
    /// What the first unresolved timeout took, to give back if it proves spurious.
    pub(super) undo: Option<TimeoutUndo>,
    /// Since when the connection has waited for ACK progress (`None`: nothing outstanding
    /// was ever sent since the last progress).
    pub(super) waiting_since: Option<Instant>,
    /// The retry budget ran out: the receiver is unreachable; later messages fail at once.
    pub(super) broken: bool,
    /// The receiver was announced failed (paper 5.2): closed, nothing in flight, also broken.
    pub(super) failed: bool,
    /// Messages of waiting scatterings that still lack credits here, oldest first; credits go
    /// to the front (see `sender_credits.rs`).
    pub(super) needy: VecDeque<Need>,
    /// Its credits may have grown since the last release pass (listed in `dirty`).
    pub(super) dirty: bool,
}

impl Connection {
    pub(super) fn new(config: &ReliableConfig, cc: &DctcpParams) -> Connection {
        Connection {
            next_psn: 0,
            unsent: 0,
            una: 0,
            in_flight: VecDeque::new(),
            window_edge: config.recv_window_packets,
            reserved: 0,
            cc: Dctcp::new(config.initial_cwnd_packets, cc),
            backoff: 0,
            undo: None,
            waiting_since: None,
            broken: false,
            failed: false,
            needy: VecDeque::new(),
            dirty: false,
        }
    }

    /// Nothing will be sent on this connection again (retry budget spent, or the receiver
    /// failed): its entries, already settled by the caller, go, and its PSNs close up.
    pub(super) fn close_in_flight(&mut self, slots: &mut [Option<Scattering>]) {
        for e in self.in_flight.drain(..) {
            ReliableSender::leave(slots, &e);
        }
        self.una = self.next_psn;
        self.unsent = self.next_psn;
        self.undo = None;
        self.waiting_since = None;
    }

    /// Packet `e` is being acknowledged. One acknowledged while its retransmission was still
    /// queued here was never lost: the timeout was spurious (a stalled worker, a long queue),
    /// and the window cut and RTO doubling it caused only slow the connection down (measured
    /// on the inproc testbed: about 400 timeouts per host per second, most of them spurious,
    /// held windows at 5-8 packets). As in Eifel (RFC 3522), the cut is undone. An ACK after
    /// the retransmission left is ambiguous; the cut stands.
    pub(super) fn resolve_timeout(&mut self, e: &InFlight, cc: &DctcpParams, counters: &mut SenderCounters) {
        if e.retries == 0 || e.acked {
            return;
        }
        let Some(undo) = self.undo.take() else {
            return;
        };
        if e.resent {
            return;
        }
        self.cc.undo_timeout(cc, undo.window);
        self.backoff = self.backoff.min(undo.backoff);
        counters.spurious_timeouts += 1;
    }

    /// Credits free for new packets: min(receive window, congestion window) less what is in
    /// flight and what waiting scatterings hold.
    pub(super) fn available(&self) -> u32 {
        let room = self.edge().wrapping_sub(self.next_psn);
        if (room as i32) <= 0 {
            return 0;
        }
        room.saturating_sub(self.reserved)
    }

    /// PSNs below this fit min(receive window, congestion window).
    pub(super) fn edge(&self) -> u32 {
        let cwnd_edge = self.una.wrapping_add(self.cc.window().max(1));
        if psn_before(cwnd_edge, self.window_edge) {
            cwnd_edge
        } else {
            self.window_edge
        }
    }

    /// The window has room for the next PSN (before what waiting scatterings reserved).
    pub(super) fn has_room(&self) -> bool {
        psn_before(self.next_psn, self.edge())
    }

    /// Nothing in flight, held or reserved by a waiting scattering other than one holding
    /// `own` credits: no credits will come back to this connection until it sends again.
    pub(super) fn is_idle(&self, own: u32) -> bool {
        self.una == self.next_psn && self.reserved == own
    }

    /// Assigns the next PSN to a new packet, and queues it for transmission unless packets
    /// before it are held or (with `windowed`) it lies beyond the window.
    pub(super) fn push_packet(
        &mut self,
        e: InFlight,
        windowed: bool,
        transmit: &mut VecDeque<(u32, u32)>,
        dst: u32,
    ) {
        let psn = self.next_psn;
        self.next_psn = self.next_psn.wrapping_add(1);
        let go = self.unsent == psn && (!windowed || psn_before(psn, self.edge()));
        self.in_flight.push_back(InFlight { queued: go, ..e });
        if go {
            self.unsent = self.next_psn;
            transmit.push_back((dst, psn));
        }
    }

    /// Queues held packets the window now reaches.
    pub(super) fn send_held(&mut self, transmit: &mut VecDeque<(u32, u32)>, dst: u32) {
        let edge = self.edge();
        while self.unsent != self.next_psn && psn_before(self.unsent, edge) {
            let psn = self.unsent;
            self.unsent = psn.wrapping_add(1);
            let e = self.entry(psn).expect("held packets are in flight");
            if !e.acked {
                e.queued = true;
                transmit.push_back((dst, psn));
            }
        }
    }

    pub(super) fn entry(&mut self, psn: u32) -> Option<&mut InFlight> {
        let index = psn.wrapping_sub(self.una) as usize;
        self.in_flight.get_mut(index)
    }
}
