//! Sequence-order delivery for the baselines that number messages globally (host sequencer,
//! switch sequencer, token): arrivals are buffered until every lower number has been delivered.
//!
//! Memory follows the actual reordering distance, not the bound: slots exist only from the
//! next expected number to the highest one buffered, and a number `capacity` or more ahead is
//! refused (dropped and counted by the caller). With a lossless fabric and per-flow paths,
//! arrivals are mostly in order and the buffer stays empty.

use std::collections::VecDeque;

/// What a buffered message keeps: enough to deliver and measure it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub origin: u32,
    pub msg_id: u64,
    pub sent_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    Accepted,
    /// Already delivered or already buffered (a duplicated frame).
    Duplicate,
    /// Too far ahead of the next expected number.
    Overflow,
}

#[derive(Clone, Debug)]
pub struct SeqReorder {
    next: u64,
    /// Slot `i` holds number `next + i`.
    slots: VecDeque<Option<Pending>>,
    capacity: usize,
    buffered: usize,
    peak: usize,
}

impl SeqReorder {
    /// Delivery starts at number `first`.
    pub fn new(first: u64, capacity: usize) -> SeqReorder {
        SeqReorder {
            next: first,
            slots: VecDeque::new(),
            capacity: capacity.max(1),
            buffered: 0,
            peak: 0,
        }
    }

    pub fn insert(&mut self, seq: u64, p: Pending) -> Insert {
        let Some(offset) = seq.checked_sub(self.next) else {
            return Insert::Duplicate;
        };
        if offset >= self.capacity as u64 {
            return Insert::Overflow;
        }
        let offset = offset as usize;
        if self.slots.len() <= offset {
            self.slots.resize(offset + 1, None);
        }
        if self.slots[offset].is_some() {
            return Insert::Duplicate;
        }
        self.slots[offset] = Some(p);
        self.buffered += 1;
        self.peak = self.peak.max(self.buffered);
        Insert::Accepted
    }

    /// The next message in sequence order, if it has arrived.
    pub fn pop(&mut self) -> Option<(u64, Pending)> {
        let p = self.slots.front().copied().flatten()?;
        self.slots.pop_front();
        self.buffered -= 1;
        let seq = self.next;
        self.next += 1;
        Some((seq, p))
    }

    /// The number delivery waits for.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Most messages buffered at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(msg_id: u64) -> Pending {
        Pending {
            origin: 0,
            msg_id,
            sent_ns: 0,
        }
    }

    #[test]
    fn delivers_in_sequence_order_whatever_the_arrival_order() {
        let mut r = SeqReorder::new(1, 8);
        assert_eq!(r.insert(3, p(3)), Insert::Accepted);
        assert_eq!(r.insert(2, p(2)), Insert::Accepted);
        assert_eq!(r.pop(), None, "1 is missing");
        assert_eq!(r.insert(1, p(1)), Insert::Accepted);
        let order: Vec<u64> = std::iter::from_fn(|| r.pop().map(|(s, m)| s * 10 + m.msg_id)).collect();
        assert_eq!(order, [11, 22, 33]);
        assert_eq!(r.next(), 4);
        assert_eq!(r.peak(), 3);
    }

    #[test]
    fn refuses_duplicates_and_far_numbers() {
        let mut r = SeqReorder::new(1, 4);
        assert_eq!(r.insert(1, p(1)), Insert::Accepted);
        assert_eq!(r.insert(1, p(1)), Insert::Duplicate);
        assert!(r.pop().is_some());
        assert_eq!(r.insert(1, p(1)), Insert::Duplicate, "already delivered");
        assert_eq!(r.insert(5, p(5)), Insert::Accepted);
        assert_eq!(r.insert(6, p(6)), Insert::Overflow);
        assert_eq!(r.pop(), None);
    }
}
