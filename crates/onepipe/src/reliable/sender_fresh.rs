//! First transmissions, stamped when they are queued.
//!
//! A packet counts as sent when it is queued for its first transmission, as TCP stamps a
//! segment when it hands it to the layer below, before any queueing there: its RTO and RTT
//! run from then, and its retransmission timer is armed then. The queue entry carries all that
//! building the packet needs, so that sending it reads only its scattering, not its connection
//! and in-flight entry. A scattering's packets are queued together (its connections were just
//! read to give them PSNs), but leave over several visits of the host as its uplink drains;
//! reading both again when each left missed the cache about once a packet (~4% of a saturated
//! reliable run; docs/performance.md).
//!
//! Retransmissions and recalls go through the sender's other queue, stamped when they leave.
//!
//! Whether a queued packet has left is a number: each entry is numbered in queue order, and
//! its in-flight entry keeps the number; everything numbered below the last entry taken has
//! left. A timeout or a recall that finds a packet not yet left treats it as unsent.

use super::InFlight;
use onepipe_wire::Instant;
use std::collections::VecDeque;

/// `InFlight::fresh` of a packet never queued here: held beyond the window, or a recall queued
/// in the other queue. It has not left.
pub(super) const NOT_QUEUED: u64 = u64::MAX;
/// `InFlight::fresh` of a packet that left through the other queue.
pub(super) const LEFT_OTHERWISE: u64 = 0;

/// A packet queued for its first transmission.
#[derive(Clone, Copy)]
pub(super) struct Fresh {
    /// Its scattering's submission number: a slot freed and reused meanwhile (an ACK for a
    /// packet that never left can only be forged) is not read as its scattering.
    pub seq: u64,
    /// `u32::MAX` once its connection closed (the entry stays, to keep the numbering).
    pub dst: u32,
    pub psn: u32,
    pub slot: u32,
    pub message: u16,
    pub fragment: u16,
    pub recall: bool,
}

impl Fresh {
    /// What sending in-flight packet `e`, `psn` to `dst`, needs.
    pub fn of(e: &InFlight, seq: u64, dst: u32, psn: u32) -> Fresh {
        Fresh {
            seq,
            dst,
            psn,
            slot: e.slot,
            message: e.message,
            fragment: e.fragment,
            recall: e.recall,
        }
    }
}

pub(super) struct FreshQueue {
    entries: VecDeque<Fresh>,
    /// Number of the next entry; numbers start above [`LEFT_OTHERWISE`].
    next: u64,
    /// Entries numbered below this have been taken.
    taken: u64,
}

impl FreshQueue {
    pub fn new() -> FreshQueue {
        FreshQueue {
            entries: VecDeque::new(),
            next: LEFT_OTHERWISE + 1,
            taken: LEFT_OTHERWISE + 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues in-flight packet `e`, `psn` to `dst` of the scattering numbered `seq`, sent as
    /// of `now`.
    pub fn push(&mut self, e: &mut InFlight, seq: u64, dst: u32, psn: u32, now: Instant) {
        e.fresh = self.next;
        e.sent_at = now;
        self.next += 1;
        self.entries.push_back(Fresh::of(e, seq, dst, psn));
    }

    /// The next packet to go, skipping those of closed connections.
    pub fn pop(&mut self) -> Option<Fresh> {
        while let Some(f) = self.entries.pop_front() {
            self.taken += 1;
            if f.dst != u32::MAX {
                return Some(f);
            }
        }
        None
    }

    /// Whether `e` has left (from either queue).
    pub fn has_left(&self, e: &InFlight) -> bool {
        e.fresh < self.taken
    }

    /// The connection to `dst` closed: nothing queued for it goes.
    pub fn forget(&mut self, dst: u32) {
        for f in self.entries.iter_mut().filter(|f| f.dst == dst) {
            f.dst = u32::MAX;
        }
    }

    /// Queued packets of message `message` of scattering `slot` now go as recalls of it.
    pub fn recall(&mut self, slot: u32, message: u16) {
        for f in self.entries.iter_mut() {
            if f.slot == slot && f.message == message && f.dst != u32::MAX {
                f.recall = true;
            }
        }
    }

    /// Queued entries to `dst` (invariant checks).
    pub fn queued_to(&self, dst: u32) -> impl Iterator<Item = &Fresh> {
        self.entries.iter().filter(move |f| f.dst == dst)
    }
}
