//! The receiver's reorder buffer: messages wait here, sorted by (timestamp, sender), until the
//! barrier proves that nothing earlier can still arrive (paper section 4.1).
//!
//! Fragments of multi-packet messages collect in `partial` until complete. A message whose
//! timestamp the barrier passes while it is still incomplete has lost a fragment for good
//! (later packets on every link carry timestamps at or above the barrier), so it is dropped and
//! reported.
//!
//! A partial message is charged at its first fragment for all it may need once complete: its
//! fragment count times the largest fragment ([`ReorderLimits`]). A fragment count no message
//! within `message_bytes_max` has, or a fragment larger than a sender makes, is refused
//! ([`Insert::Oversized`]) before anything is allocated for it. So the bytes charged bound what
//! the buffer holds, whatever fragments claim.

mod slab;

use onepipe_wire::Instant;
use slab::{Meta, Slab};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// Order of delivery: timestamp, ties broken by sender (paper 4.1).
pub type Key = (Instant, u32);

#[derive(Debug)]
struct Partial {
    frag_count: u16,
    received: u16,
    first_psn: u32,
    /// Bytes charged for it at its first fragment: all it may need when complete.
    reserved: usize,
    fragments: Vec<Option<Vec<u8>>>,
}

/// What a reorder buffer may hold, and what the messages in it may be like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderLimits {
    /// Bytes charged at most (payload plus [`ENTRY_OVERHEAD_BYTES`] per entry).
    pub bytes_max: usize,
    /// The largest fragment payload a sender makes (positive).
    pub fragment_bytes: usize,
    /// The largest message: no message has more fragments than it needs at `fragment_bytes`.
    pub message_bytes_max: usize,
}

impl ReorderLimits {
    /// A buffer of `bytes_max` for fragments of up to `fragment_bytes` and messages of up to
    /// `message_bytes_max`.
    pub fn new(bytes_max: usize, fragment_bytes: usize, message_bytes_max: usize) -> ReorderLimits {
        assert!(fragment_bytes > 0, "fragments carry at least a byte");
        ReorderLimits {
            bytes_max,
            fragment_bytes,
            message_bytes_max,
        }
    }

    /// The most fragments a message may come in.
    pub fn fragments_max(&self) -> usize {
        self.message_bytes_max.div_ceil(self.fragment_bytes).max(1)
    }

    /// Whether a correct sender could have made a fragment of `payload_bytes` of a message of
    /// `frag_count` fragments.
    pub fn admits(&self, frag_count: u16, payload_bytes: usize) -> bool {
        payload_bytes <= self.fragment_bytes && frag_count as usize <= self.fragments_max()
    }

    /// What a message of `frag_count` fragments is charged until it is complete.
    fn reservation(&self, frag_count: u16) -> usize {
        frag_count as usize * (self.fragment_bytes + ENTRY_OVERHEAD_BYTES)
    }
}

/// A message released from the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Released {
    pub ts: Instant,
    pub src: u32,
    pub msg_id: u64,
    pub payload: Vec<u8>,
}

/// What became of an inserted fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Buffered,
    /// The same fragment was already here.
    Duplicate,
    /// The buffer is at its byte limit; the message is dropped and must be reported.
    Full,
    /// The fragment disagrees with earlier fragments of its message.
    Inconsistent,
    /// Its fragment count is more than a message of `message_bytes_max` has, or its payload
    /// more than a fragment carries ([`ReorderLimits`]): no correct sender made it.
    Oversized,
}

#[derive(Debug)]
pub struct ReorderBuffer {
    /// Complete messages by (timestamp, sender), pointing into `slab`.
    ready: BinaryHeap<Reverse<PackedKey>>,
    /// The lowest complete messages below the barrier, taken from `ready` a batch at a time
    /// (see [`ReorderBuffer::stage`]), in delivery order.
    staged: VecDeque<(Instant, u32, u32)>,
    /// Complete messages in arrival order, for unordered delivery.
    arrival: VecDeque<(Instant, u32, u32)>,
    slab: Slab,
    partial: BTreeMap<(Instant, u32, u64), Partial>,
    bytes: usize,
    limits: ReorderLimits,
    bytes_peak: usize,
    messages_peak: usize,
    /// The last messages delivered, (sender, message id), as a ring: a copy of one of them
    /// that arrives later (a duplicating link) is a duplicate, not a late message to report.
    recent: Vec<(u32, u64)>,
    recent_next: usize,
    /// Second copies of complete messages dropped at delivery.
    duplicates: u64,
    /// Fragments refused as [`Insert::Oversized`].
    oversized: u64,
}

/// Deliveries remembered for duplicate detection; duplicates from a link arrive within
/// microseconds of the original, far fewer deliveries apart than this.
const RECENT_DELIVERIES: usize = 1024;

impl ReorderBuffer {
    pub fn new(limits: ReorderLimits) -> ReorderBuffer {
        ReorderBuffer {
            ready: BinaryHeap::new(),
            staged: VecDeque::new(),
            arrival: VecDeque::new(),
            slab: Slab::default(),
            partial: BTreeMap::new(),
            bytes: 0,
            limits,
            bytes_peak: 0,
            messages_peak: 0,
            // Grows to RECENT_DELIVERIES as messages are delivered: idle endpoints stay small.
            recent: Vec::new(),
            recent_next: 0,
            duplicates: 0,
            oversized: 0,
        }
    }

    pub fn limits(&self) -> ReorderLimits {
        self.limits
    }

    /// Payload bytes held (plus per-entry overhead), and the most ever held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    pub fn bytes_peak(&self) -> usize {
        self.bytes_peak
    }
    pub fn messages_peak(&self) -> usize {
        self.messages_peak
    }
    /// Second copies of complete messages dropped instead of delivered.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
    /// Fragments refused for a count or size no correct sender makes.
    pub fn oversized(&self) -> u64 {
        self.oversized
    }

    /// Whether `(src, msg_id)` is among the last deliveries. Only for the rare packet that
    /// arrives below the barrier: a linear scan.
    pub fn recently_delivered(&self, src: u32, msg_id: u64) -> bool {
        self.recent.contains(&(src, msg_id))
    }

    fn remember_delivery(&mut self, src: u32, msg_id: u64) {
        if self.recent.len() < RECENT_DELIVERIES {
            self.recent.push((src, msg_id));
        } else {
            self.recent[self.recent_next] = (src, msg_id);
        }
        self.recent_next = (self.recent_next + 1) % RECENT_DELIVERIES;
    }

    /// Whether a complete copy of the message with this key waits for delivery.
    fn complete_waiting(&self, ts: Instant, src: u32) -> bool {
        let waiting = |&(t, s, _): &(Instant, u32, u32)| (t, s) == (ts, src);
        self.ready.iter().any(|&Reverse(k)| waiting(&unpack(k))) || self.staged.iter().any(waiting)
    }
    pub fn len(&self) -> usize {
        self.ready.len() + self.staged.len() + self.arrival.len() + self.partial.len()
    }

    /// Checks what every step must keep (TigerBeetle's `invariants()`): the byte budget holds,
    /// the peaks cover the present, and the staged batch is in delivery order. Cheap enough
    /// for the simulator to call after every step (the partial messages are checked in debug
    /// builds only: a scan).
    pub fn invariants(&self) {
        assert!(
            self.bytes <= self.limits.bytes_max,
            "reorder bytes {} over {}",
            self.bytes,
            self.limits.bytes_max
        );
        assert!(self.bytes <= self.bytes_peak);
        assert!(self.recent.len() <= RECENT_DELIVERIES);
        assert!(self.recent_next < RECENT_DELIVERIES);
        assert!(
            self.bytes == 0 || !self.is_empty(),
            "bytes are charged to messages"
        );
        let staged = self.staged.iter().map(|&(ts, src, _)| (ts, src));
        assert!(
            staged.clone().zip(staged.skip(1)).all(|(a, b)| a <= b),
            "staged in order"
        );
        if cfg!(debug_assertions) {
            for p in self.partial.values() {
                assert_eq!(p.fragments.len(), p.frag_count as usize);
                assert!(p.frag_count as usize <= self.limits.fragments_max());
                assert_eq!(p.reserved, self.limits.reservation(p.frag_count));
                let held: usize = p.fragments.iter().flatten().map(Vec::len).sum();
                assert!(held <= p.frag_count as usize * self.limits.fragment_bytes);
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn account(&mut self, added: usize) {
        self.bytes += added;
        self.bytes_peak = self.bytes_peak.max(self.bytes);
        self.messages_peak = self.messages_peak.max(self.len());
    }

    /// Copies a complete message into a free slot of the slab (see `slab`).
    fn store<'a>(
        &mut self,
        msg_id: u64,
        fragments: u16,
        first_psn: u32,
        len: usize,
        parts: impl Iterator<Item = &'a [u8]>,
    ) -> u32 {
        let meta = Meta {
            msg_id,
            first_psn,
            len: len as u32,
            fragments,
        };
        self.slab.store(meta, parts)
    }

    fn enqueue(&mut self, ts: Instant, src: u32, slot: u32, ordered: bool) {
        if ordered {
            self.ready.push(Reverse(pack(ts, src, slot)));
        } else {
            self.arrival.push_back((ts, src, slot));
        }
    }

    /// Adds one fragment of message `(src, msg_id)` with timestamp `ts`. With `ordered` false
    /// the message is released in arrival order once complete (the unordered baseline).
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &mut self,
        ts: Instant,
        src: u32,
        msg_id: u64,
        frag_index: u16,
        frag_count: u16,
        payload: &[u8],
        ordered: bool,
    ) -> Insert {
        self.insert_numbered(ts, src, msg_id, 0, frag_index, frag_count, payload, ordered)
    }

    /// As [`ReorderBuffer::insert`] for a reliable fragment with PSN `psn`, remembered so that
    /// [`ReorderBuffer::remove`] can say which packets it frees.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_numbered(
        &mut self,
        ts: Instant,
        src: u32,
        msg_id: u64,
        psn: u32,
        frag_index: u16,
        frag_count: u16,
        payload: &[u8],
        ordered: bool,
    ) -> Insert {
        let first_psn = psn.wrapping_sub(frag_index as u32);
        let limits = self.limits;
        if !limits.admits(frag_count, payload.len()) {
            self.oversized += 1;
            return Insert::Oversized;
        }
        if frag_count == 1 {
            // Accounting counts payload plus a fixed per-entry overhead, so empty messages count.
            let cost = payload.len() + ENTRY_OVERHEAD_BYTES;
            if self.bytes + cost > limits.bytes_max {
                return Insert::Full;
            }
            let slot = self.store(msg_id, 1, first_psn, payload.len(), std::iter::once(payload));
            self.enqueue(ts, src, slot, ordered);
            self.account(cost);
            return Insert::Buffered;
        }
        let key = (ts, src, msg_id);
        let Some(entry) = self.partial.get_mut(&key) else {
            return self.begin_partial(key, first_psn, frag_index, frag_count, payload);
        };
        if entry.frag_count != frag_count {
            return Insert::Inconsistent;
        }
        let Some(fragment) = entry.fragments.get_mut(frag_index as usize) else {
            return Insert::Inconsistent;
        };
        if fragment.is_some() {
            return Insert::Duplicate;
        }
        *fragment = Some(payload.to_vec());
        entry.received += 1;
        if entry.received == entry.frag_count {
            let p = self.partial.remove(&key).expect("just found");
            let len: usize = p.fragments.iter().flatten().map(Vec::len).sum();
            // Re-account as one entry: never more than was reserved.
            self.bytes = self.bytes - p.reserved + len + ENTRY_OVERHEAD_BYTES;
            let parts = p.fragments.iter().flatten().map(Vec::as_slice);
            let slot = self.store(msg_id, frag_count, p.first_psn, len, parts);
            self.enqueue(ts, src, slot, ordered);
        }
        Insert::Buffered
    }

    /// The first fragment of a message of `frag_count` (checked against the limits) to arrive:
    /// the whole message is charged now, or refused if it may not fit.
    fn begin_partial(
        &mut self,
        key: (Instant, u32, u64),
        first_psn: u32,
        frag_index: u16,
        frag_count: u16,
        payload: &[u8],
    ) -> Insert {
        if frag_index >= frag_count {
            return Insert::Inconsistent;
        }
        let reserved = self.limits.reservation(frag_count);
        if self.bytes + reserved > self.limits.bytes_max {
            return Insert::Full;
        }
        let mut fragments = vec![None; frag_count as usize];
        fragments[frag_index as usize] = Some(payload.to_vec());
        self.partial.insert(
            key,
            Partial {
                frag_count,
                received: 1,
                first_psn,
                reserved,
                fragments,
            },
        );
        self.account(reserved);
        Insert::Buffered
    }

    /// Drops the complete messages for which `doomed(ts, src, msg_id)` holds, every copy,
    /// handing each to `removed`; returns how many entries went. Failure handling only (paper
    /// 5.2): a scan of the whole buffer.
    fn remove_complete(
        &mut self,
        mut doomed: impl FnMut(Instant, u32, u64) -> bool,
        mut removed: impl FnMut(&Meta),
    ) -> usize {
        let slab = &self.slab;
        let mut slots = Vec::new();
        let mut keep = |&(ts, src, slot): &(Instant, u32, u32)| {
            let go = doomed(ts, src, slab.meta(slot).msg_id);
            if go {
                slots.push(slot);
            }
            !go
        };
        self.ready.retain(|&Reverse(k)| keep(&unpack(k)));
        self.staged.retain(|e| keep(e));
        self.arrival.retain(|e| keep(e));
        for &slot in &slots {
            let s = self.slab.meta(slot);
            removed(s);
            self.bytes -= s.len as usize + ENTRY_OVERHEAD_BYTES;
            self.slab.free(slot);
        }
        slots.len()
    }

    /// Paper 5.2 Recall: drops message (`ts`, `src`, `msg_id`), complete or still collecting
    /// fragments, telling `freed` the PSN of each packet of it that was here (for the receive
    /// window). Whether it was here.
    pub fn remove(&mut self, ts: Instant, src: u32, msg_id: u64, mut freed: impl FnMut(u32)) -> bool {
        let mut copies = 0;
        let entries = self.remove_complete(
            |t, s, id| (t, s, id) == (ts, src, msg_id),
            |stored| {
                // A second copy (a duplicating link) took no window of its own.
                if copies == 0 {
                    for i in 0..stored.fragments {
                        freed(stored.first_psn.wrapping_add(i as u32));
                    }
                }
                copies += 1;
            },
        );
        let partial = self.partial.remove(&(ts, src, msg_id));
        if let Some(p) = &partial {
            self.bytes -= p.reserved;
            for (i, f) in p.fragments.iter().enumerate() {
                if f.is_some() {
                    freed(p.first_psn.wrapping_add(i as u32));
                }
            }
        }
        entries > 0 || partial.is_some()
    }

    /// Paper 5.2 Discard: drops the complete messages of failed sender `src` with timestamps at
    /// or above `from`, and every incomplete one of it (its missing fragments will never come).
    /// Returns how many messages went.
    pub fn discard_from(&mut self, src: u32, from: Instant) -> usize {
        let complete = self.remove_complete(|t, s, _| s == src && t >= from, |_| {});
        let before = self.partial.len();
        let mut freed = 0;
        self.partial.retain(|&(_, s, _), p| {
            let keep = s != src;
            if !keep {
                freed += p.reserved;
            }
            keep
        });
        self.bytes -= freed;
        complete + before - self.partial.len()
    }

    /// Drops incomplete messages the barrier has passed (timestamps below `barrier`),
    /// returning (timestamp, sender, message id) of each.
    pub fn expire_incomplete(&mut self, barrier: Instant, lost: &mut Vec<(Instant, u32, u64)>) {
        while let Some((&(ts, src, msg_id), _)) = self.partial.first_key_value() {
            if ts >= barrier {
                break;
            }
            let p = self.partial.pop_first().expect("peeked").1;
            self.bytes -= p.reserved;
            // Fragments of a copy of a message that is complete (a duplicating link): not lost.
            if self.complete_waiting(ts, src) || self.recently_delivered(src, msg_id) {
                continue;
            }
            lost.push((ts, src, msg_id));
        }
    }

    fn next_below(&mut self, barrier: Instant) -> Option<(Instant, u32, u32)> {
        if let Some(e) = self.arrival.pop_front() {
            return Some(e);
        }
        if self.staged.is_empty() {
            self.stage(barrier);
        }
        match self.staged.front() {
            Some(&(ts, _, _)) if ts < barrier => self.staged.pop_front(),
            _ => None,
        }
    }

    /// Moves up to [`STAGE_MESSAGES`] of the lowest complete messages below `barrier` from the
    /// heap to `staged`, then reads each one's id and length and first payload byte. A message
    /// waits for the barrier long enough to leave the cache; read one at a time at delivery,
    /// each would miss with nothing else to overlap, while these loads are independent of each
    /// other and the CPU overlaps them.
    fn stage(&mut self, barrier: Instant) {
        while self.staged.len() < STAGE_MESSAGES {
            match self.ready.peek() {
                Some(&Reverse(k)) if unpack(k).0 < barrier => {}
                _ => break,
            }
            let e = unpack(self.ready.pop().expect("peeked").0);
            // (timestamp, sender) names one message per receiver, so an equal key next in the
            // heap is a second copy (a duplicating link delivered it twice before the barrier).
            while let Some(&Reverse(k)) = self.ready.peek()
                && let (t, s, slot) = unpack(k)
                && (t, s) == (e.0, e.1)
            {
                self.ready.pop();
                self.bytes -= self.slab.meta(slot).len as usize + ENTRY_OVERHEAD_BYTES;
                self.slab.free(slot);
                self.duplicates += 1;
            }
            self.staged.push_back(e);
        }
        let slab = &self.slab;
        let entries = self.staged.iter().map(|&(_, _, slot)| slab.meta(slot));
        let touched = entries.fold(0u64, |acc, s| acc ^ s.msg_id ^ s.len as u64);
        let touched = self.staged.iter().fold(touched, |acc, &(_, _, slot)| {
            acc ^ slab.payload(slot).first().copied().unwrap_or(0) as u64
        });
        std::hint::black_box(touched);
    }

    /// Hands the lowest-keyed complete message whose timestamp is below `barrier` to `f`
    /// without copying it (paper 4.1: "it delivers all buffered packets with the message
    /// timestamp below B"). Unordered messages go first, in arrival order.
    pub fn pop_below_with<R>(
        &mut self,
        barrier: Instant,
        f: impl FnOnce(Instant, u32, u64, &[u8]) -> R,
    ) -> Option<R> {
        self.pop_below_counted(barrier, |ts, src, id, _, p| f(ts, src, id, p))
    }

    /// As [`ReorderBuffer::pop_below_with`], also telling `f` how many packets the message
    /// came in.
    pub fn pop_below_counted<R>(
        &mut self,
        barrier: Instant,
        f: impl FnOnce(Instant, u32, u64, u16, &[u8]) -> R,
    ) -> Option<R> {
        let (ts, src, slot) = self.next_below(barrier)?;
        let s = *self.slab.meta(slot);
        let r = f(ts, src, s.msg_id, s.fragments, self.slab.payload(slot));
        self.bytes -= s.len as usize + ENTRY_OVERHEAD_BYTES;
        let msg_id = s.msg_id;
        self.slab.free(slot);
        self.remember_delivery(src, msg_id);
        Some(r)
    }

    /// As [`ReorderBuffer::pop_below_with`], returning an owned message.
    pub fn pop_below(&mut self, barrier: Instant) -> Option<Released> {
        let (ts, src, slot) = self.next_below(barrier)?;
        let payload = self.slab.take_payload(slot);
        let msg_id = self.slab.meta(slot).msg_id;
        self.bytes -= payload.len() + ENTRY_OVERHEAD_BYTES;
        self.slab.free(slot);
        self.remember_delivery(src, msg_id);
        Some(Released {
            ts,
            src,
            msg_id,
            payload,
        })
    }
}

/// (timestamp, sender, slot) as one integer that orders the same way: the heap's sift compares
/// it in two instructions, where the tuple took a branch per field.
type PackedKey = u128;

fn pack(ts: Instant, src: u32, slot: u32) -> PackedKey {
    (ts.as_nanos() as u128) << 64 | (src as u128) << 32 | slot as u128
}

fn unpack(k: PackedKey) -> (Instant, u32, u32) {
    (Instant::from_nanos((k >> 64) as u64), (k >> 32) as u32, k as u32)
}

/// Messages [`ReorderBuffer::stage`] takes from the heap at a time.
const STAGE_MESSAGES: usize = 32;

/// Bookkeeping charged per buffered fragment on top of its payload.
pub const ENTRY_OVERHEAD_BYTES: usize = 48;

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    /// Fragments of up to 1,460 bytes (a 1,500-byte MTU), messages of up to 1 MB.
    const FRAGMENT_BYTES: usize = 1_460;
    const MESSAGE_BYTES_MAX: usize = 1 << 20;

    fn buffer(bytes_max: usize) -> ReorderBuffer {
        ReorderBuffer::new(ReorderLimits::new(bytes_max, FRAGMENT_BYTES, MESSAGE_BYTES_MAX))
    }

    #[test]
    fn releases_in_timestamp_then_sender_order_below_barrier() {
        let mut r = buffer(1 << 20);
        r.insert(t(20), 1, 0, 0, 1, b"c", true);
        r.insert(t(10), 5, 0, 0, 1, b"b", true);
        r.insert(t(10), 2, 0, 0, 1, b"a", true);
        r.insert(t(30), 0, 0, 0, 1, b"d", true);
        let mut out = Vec::new();
        while let Some(m) = r.pop_below(t(30)) {
            out.push(m.payload[0]);
        }
        assert_eq!(out, b"abc");
        // Equal to the barrier is not below it: a later packet may still carry timestamp 30.
        assert!(r.pop_below(t(30)).is_none());
        assert_eq!(r.pop_below(t(31)).unwrap().payload, b"d");
        assert!(r.is_empty());
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn reassembles_fragments_in_any_order() {
        let mut r = buffer(1 << 20);
        assert_eq!(r.insert(t(5), 1, 9, 2, 3, b"ef", true), Insert::Buffered);
        assert_eq!(r.insert(t(5), 1, 9, 0, 3, b"ab", true), Insert::Buffered);
        assert!(r.pop_below(t(100)).is_none());
        assert_eq!(r.insert(t(5), 1, 9, 0, 3, b"ab", true), Insert::Duplicate);
        assert_eq!(r.insert(t(5), 1, 9, 1, 3, b"cd", true), Insert::Buffered);
        assert_eq!(r.pop_below(t(100)).unwrap().payload, b"abcdef");
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn incomplete_messages_expire_when_the_barrier_passes() {
        let mut r = buffer(1 << 20);
        r.insert(t(5), 1, 9, 0, 2, b"ab", true);
        r.insert(t(50), 1, 10, 0, 2, b"ab", true);
        let mut lost = Vec::new();
        r.expire_incomplete(t(6), &mut lost);
        assert_eq!(lost, vec![(t(5), 1, 9)]);
        assert_eq!(r.len(), 1);
    }

    /// A duplicating link (found by the simulator's campaigns): each message is delivered once
    /// and a stray copy of a fragment is not reported as a lost message.
    #[test]
    fn copies_of_a_message_are_delivered_once_and_not_reported_lost() {
        let mut r = buffer(1 << 20);
        r.insert(t(5), 1, 9, 0, 1, b"a", true);
        r.insert(t(5), 1, 9, 0, 1, b"a", true);
        r.insert(t(7), 2, 4, 0, 2, b"x", true);
        r.insert(t(7), 2, 4, 1, 2, b"y", true);
        // A copy of fragment 0 after the message completed.
        r.insert(t(7), 2, 4, 0, 2, b"x", true);
        let mut lost = Vec::new();
        r.expire_incomplete(t(8), &mut lost);
        assert!(lost.is_empty(), "{lost:?}");
        let keys: Vec<(u32, u64)> = std::iter::from_fn(|| r.pop_below(t(8)))
            .map(|m| (m.src, m.msg_id))
            .collect();
        assert_eq!(keys, vec![(1, 9), (2, 4)]);
        assert_eq!(r.duplicates(), 1);
        assert_eq!(r.bytes(), 0);
        assert!(r.recently_delivered(2, 4) && !r.recently_delivered(2, 5));
        // After delivery a late copy's partial is not a loss either.
        r.insert(t(7), 2, 4, 1, 2, b"y", true);
        r.expire_incomplete(t(9), &mut lost);
        assert!(lost.is_empty(), "{lost:?}");
    }

    /// Paper 5.2: a recall removes one message whether complete or partial; a discard removes
    /// a failed sender's messages from a timestamp on, and all its incomplete ones.
    #[test]
    fn recall_and_discard_remove_exactly_their_messages() {
        let mut r = buffer(1 << 20);
        r.insert_numbered(t(5), 1, 9, 7, 0, 2, b"ab", true);
        r.insert_numbered(t(5), 1, 9, 8, 1, 2, b"cd", true);
        r.insert_numbered(t(6), 1, 10, 11, 2, 3, b"ef", true);
        r.insert(t(6), 2, 4, 0, 1, b"x", true);
        let mut freed = Vec::new();
        assert!(!r.remove(t(5), 1, 8, |p| freed.push(p)), "wrong message id");
        assert!(r.remove(t(5), 1, 9, |p| freed.push(p)));
        assert_eq!(freed, [7, 8], "complete: both packets");
        assert!(!r.remove(t(5), 1, 9, |p| freed.push(p)), "gone");
        freed.clear();
        assert!(r.remove(t(6), 1, 10, |p| freed.push(p)));
        assert_eq!(
            freed,
            [11],
            "partial: the fragment that came, third of PSNs 9..12"
        );
        assert_eq!(r.len(), 1);
        r.insert(t(3), 1, 1, 0, 1, b"keep", true);
        r.insert(t(7), 1, 2, 0, 1, b"at", true);
        r.insert(t(8), 1, 3, 0, 1, b"above", true);
        r.insert(t(2), 1, 4, 0, 2, b"partial below", true);
        assert_eq!(r.discard_from(1, t(7)), 3);
        let left: Vec<(u32, u64)> = std::iter::from_fn(|| r.pop_below(t(100)))
            .map(|m| (m.src, m.msg_id))
            .collect();
        assert_eq!(left, vec![(1, 1), (2, 4)]);
        assert_eq!(r.bytes(), 0);
        assert!(r.is_empty());
    }

    /// Delivery takes a batch of messages out of the heap at a time: what was taken still
    /// counts as buffered, comes out in order before later arrivals, and can be discarded.
    #[test]
    fn a_batch_taken_for_delivery_stays_in_order_and_can_be_discarded() {
        let mut r = buffer(1 << 20);
        let n = 2 * STAGE_MESSAGES as u64 + 5;
        for i in 0..n {
            r.insert(t(10 + i), (i % 3) as u32, i, 0, 1, b"m", true);
        }
        let first = r.pop_below(t(10 + n)).unwrap();
        assert_eq!((first.ts, first.msg_id), (t(10), 0));
        assert_eq!(r.len(), n as usize - 1, "the rest of the batch is still buffered");
        // Arrivals above the barrier come after the batch.
        r.insert(t(10 + n + 1), 1, 100, 0, 1, b"late", true);
        assert_eq!(r.pop_below(t(10 + n)).unwrap().msg_id, 1);
        // Sender 2's messages, batched or not, go; sender 0's and 1's stay.
        let gone = r.discard_from(2, t(0));
        assert_eq!(gone, (0..n).filter(|i| i % 3 == 2).count());
        let ids: Vec<u64> = std::iter::from_fn(|| r.pop_below(t(1000)))
            .map(|m| m.msg_id)
            .collect();
        let mut want: Vec<u64> = (2..n).filter(|i| i % 3 != 2).collect();
        want.push(100);
        assert_eq!(ids, want);
        assert!(r.is_empty());
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn full_buffer_refuses_and_stays_bounded() {
        let mut r = buffer(3 * (ENTRY_OVERHEAD_BYTES + 10));
        for i in 0..3 {
            assert_eq!(r.insert(t(i), 0, i, 0, 1, &[0; 10], true), Insert::Buffered);
        }
        assert_eq!(r.insert(t(9), 0, 9, 0, 1, &[0; 10], true), Insert::Full);
        assert!(r.bytes() <= 3 * (ENTRY_OVERHEAD_BYTES + 10));
        assert_eq!(r.bytes_peak(), 3 * (ENTRY_OVERHEAD_BYTES + 10));
    }

    #[test]
    fn unordered_mode_releases_in_arrival_order_ignoring_the_barrier() {
        let mut r = buffer(1 << 20);
        r.insert(t(20), 1, 0, 0, 1, b"x", false);
        r.insert(t(10), 2, 0, 0, 1, b"y", false);
        let first = r
            .pop_below_with(Instant::ZERO, |ts, src, _, p| (ts, src, p.to_vec()))
            .unwrap();
        assert_eq!(first, (t(20), 1, b"x".to_vec()));
        assert_eq!(r.pop_below(Instant::ZERO).unwrap().payload, b"y");
        assert_eq!(r.bytes(), 0);
    }

    /// Issue 42: a fragment claiming a huge fragment count allocated a slot per claimed
    /// fragment and was charged only its payload. A count no message within
    /// `message_bytes_max` has, or a fragment larger than a sender makes, is refused before
    /// anything is allocated.
    #[test]
    fn fragments_no_sender_makes_are_refused_before_anything_is_allocated() {
        let mut r = buffer(64 << 20);
        let most = r.limits().fragments_max();
        assert_eq!(most, MESSAGE_BYTES_MAX.div_ceil(FRAGMENT_BYTES));
        for (i, count) in [u16::MAX, most as u16 + 1].into_iter().enumerate() {
            assert_eq!(
                r.insert(t(5), 1, i as u64, 0, count, b"x", true),
                Insert::Oversized
            );
        }
        let big = vec![0u8; FRAGMENT_BYTES + 1];
        assert_eq!(r.insert(t(5), 1, 7, 0, 2, &big, true), Insert::Oversized);
        assert_eq!(r.insert(t(5), 1, 8, 0, 1, &big, true), Insert::Oversized);
        assert_eq!(r.oversized(), 4);
        assert_eq!((r.bytes(), r.len()), (0, 0));
        // The largest count a message may have is taken, and charged for all of it.
        assert_eq!(r.insert(t(5), 1, 9, 0, most as u16, b"x", true), Insert::Buffered);
        assert_eq!(r.bytes(), most * (FRAGMENT_BYTES + ENTRY_OVERHEAD_BYTES));
        r.invariants();
    }

    /// A partial message is charged at its first fragment for all it needs when complete, so
    /// a message that could not complete within the budget is refused at once, later fragments
    /// of one taken always fit, and completion charges what it holds.
    #[test]
    fn a_partial_message_is_charged_at_its_first_fragment_for_all_of_it() {
        let whole = 3 * (FRAGMENT_BYTES + ENTRY_OVERHEAD_BYTES);
        let mut r = buffer(whole + ENTRY_OVERHEAD_BYTES + 10);
        assert_eq!(r.insert(t(5), 1, 9, 1, 3, &[1; 100], true), Insert::Buffered);
        assert_eq!(r.bytes(), whole);
        // A message of one more fragment would not fit beside it: refused, nothing charged.
        assert_eq!(r.insert(t(6), 2, 1, 0, 2, b"y", true), Insert::Full);
        assert_eq!(r.bytes(), whole);
        // A single small message still fits; the partial's own fragments always do.
        assert_eq!(r.insert(t(7), 2, 2, 0, 1, &[2; 10], true), Insert::Buffered);
        assert_eq!(
            r.insert(t(5), 1, 9, 0, 3, &[0; FRAGMENT_BYTES], true),
            Insert::Buffered
        );
        assert_eq!(r.insert(t(5), 1, 9, 2, 3, &[3; 7], true), Insert::Buffered);
        assert_eq!(
            r.bytes(),
            (FRAGMENT_BYTES + 100 + 7 + ENTRY_OVERHEAD_BYTES) + (10 + ENTRY_OVERHEAD_BYTES)
        );
        r.invariants();
        let m = r.pop_below(t(100)).unwrap();
        assert_eq!(m.payload.len(), FRAGMENT_BYTES + 107);
        r.pop_below(t(100)).unwrap();
        assert_eq!((r.bytes(), r.len()), (0, 0));
        r.invariants();
    }

    /// Issue 42's attack: a few KB of fragments, each the first of a message claiming a huge
    /// count. What is charged stays within the budget and covers what is held; the rest is
    /// refused and counted; expiry returns every byte.
    #[test]
    fn a_few_kilobytes_of_fragments_claiming_huge_counts_stay_within_the_charge() {
        let bytes_max = 8 << 20;
        let mut r = buffer(bytes_max);
        let (mut buffered, mut full, mut oversized) = (0, 0, 0);
        let most = r.limits().fragments_max() as u16;
        for i in 0..400u64 {
            let count = if i % 2 == 0 { u16::MAX } else { most };
            match r.insert(t(10 + i), 1, i, 0, count, &[0; 8], true) {
                Insert::Buffered => buffered += 1,
                Insert::Full => full += 1,
                Insert::Oversized => oversized += 1,
                other => panic!("{other:?}"),
            }
            assert!(r.bytes() <= bytes_max);
            r.invariants();
        }
        let charge = most as usize * (FRAGMENT_BYTES + ENTRY_OVERHEAD_BYTES);
        assert_eq!(buffered, bytes_max / charge, "as many as the budget covers");
        assert_eq!((full, oversized), (200 - buffered, 200));
        assert_eq!(r.oversized(), 200);
        assert_eq!(r.bytes(), buffered * charge);
        let mut lost = Vec::new();
        r.expire_incomplete(t(1_000), &mut lost);
        assert_eq!(lost.len(), buffered);
        assert_eq!((r.bytes(), r.len()), (0, 0));
    }

    proptest::proptest! {
        /// Whatever fragments arrive (any count, index, size, message), the charge stays within
        /// the budget, every partial is charged for all of it, and delivery, recall and expiry
        /// return every byte.
        #[test]
        fn any_fragments_keep_the_charge_within_the_budget(
            frags in proptest::collection::vec(
                (0u64..4, 0u32..3, 0u64..3, 0u16..8, 1u16..8, 0usize..2_000),
                1..200,
            ),
            bytes_max in 0usize..40_000,
        ) {
            let mut r = ReorderBuffer::new(ReorderLimits::new(bytes_max, 1_000, 6_000));
            for (ts, src, id, index, count, len) in frags {
                let index = index.min(count - 1);
                r.insert_numbered(t(ts), src, id, 0, index, count, &vec![0; len], true);
                r.invariants();
                proptest::prop_assert!(r.bytes() <= bytes_max);
            }
            let mut lost = Vec::new();
            r.expire_incomplete(t(10), &mut lost);
            while r.pop_below(t(10)).is_some() {}
            proptest::prop_assert_eq!((r.bytes(), r.len()), (0, 0));
        }
    }
}
