//! An output port's queues: one FIFO per priority class ([`Hints::priority`]), served by
//! strict priority, with capacity and ECN counted on their total.
//!
//! Most ports only ever see best-effort frames (every node but cosy's gives that class), and
//! the simulator has a port per link end of 32K hosts: so the best-effort FIFO is inline and
//! the FIFOs of the other classes live behind one box, made when a port first queues a frame
//! of theirs. An empty port grows by one pointer.
//!
//! [`Hints::priority`]: onepipe_fabric::Hints::priority

use onepipe_fabric::PRIORITY_CLASSES;
use std::collections::VecDeque;

/// The last class, which every node gives its frames unless it says otherwise.
pub(super) const BEST_EFFORT: usize = PRIORITY_CLASSES - 1;

#[derive(Default)]
pub(super) struct PortQueues {
    best_effort: VecDeque<Vec<u8>>,
    /// Classes 0 to `BEST_EFFORT - 1`, once a frame of one has been queued here.
    urgent: Option<Box<Urgent>>,
    /// Bytes queued in every class.
    bytes: usize,
}

#[derive(Default)]
struct Urgent {
    queues: [VecDeque<Vec<u8>>; BEST_EFFORT],
    bytes: [usize; BEST_EFFORT],
}

impl PortQueues {
    /// Bytes queued in every class together (what capacity and ECN thresholds apply to).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes queued in `class`.
    pub(super) fn class_bytes(&self, class: usize) -> usize {
        assert!(class < PRIORITY_CLASSES);
        match &self.urgent {
            None if class == BEST_EFFORT => self.bytes,
            None => 0,
            Some(u) if class == BEST_EFFORT => self.bytes - u.bytes.iter().sum::<usize>(),
            Some(u) => u.bytes[class],
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.best_effort.is_empty()
            && self
                .urgent
                .as_ref()
                .is_none_or(|u| u.queues.iter().all(VecDeque::is_empty))
    }

    /// Queues `frame` behind the others of its class.
    pub(super) fn push(&mut self, class: usize, frame: Vec<u8>) {
        assert!(class < PRIORITY_CLASSES);
        self.bytes += frame.len();
        if class == BEST_EFFORT {
            self.best_effort.push_back(frame);
            return;
        }
        let u = self.urgent.get_or_insert_with(Box::default);
        u.bytes[class] += frame.len();
        u.queues[class].push_back(frame);
    }

    /// The first frame of the lowest-numbered class that has one.
    pub(super) fn pop(&mut self) -> Option<Vec<u8>> {
        let frame = self
            .urgent
            .as_mut()
            .and_then(|u| {
                let class = u.queues.iter().position(|q| !q.is_empty())?;
                let frame = u.queues[class].pop_front().expect("not empty");
                u.bytes[class] -= frame.len();
                Some(frame)
            })
            .or_else(|| self.best_effort.pop_front())?;
        self.bytes -= frame.len();
        Some(frame)
    }

    /// Drops every frame; returns how many there were.
    pub(super) fn clear(&mut self) -> usize {
        let mut dropped = self.best_effort.len();
        self.best_effort.clear();
        if let Some(u) = &mut self.urgent {
            for q in &mut u.queues {
                dropped += q.len();
                q.clear();
            }
            u.bytes = [0; BEST_EFFORT];
        }
        self.bytes = 0;
        dropped
    }

    /// Each class's bytes are its frames', and they add up to the total.
    #[cfg(test)]
    pub(super) fn invariants(&self) {
        let mut bytes: usize = self.best_effort.iter().map(Vec::len).sum();
        if let Some(u) = &self.urgent {
            for (q, &b) in u.queues.iter().zip(&u.bytes) {
                assert_eq!(q.iter().map(Vec::len).sum::<usize>(), b);
                bytes += b;
            }
        }
        assert_eq!(bytes, self.bytes);
        assert!(!self.is_empty() || bytes == 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An empty port pays one pointer for the classes it does not use.
    #[test]
    fn the_classes_beyond_best_effort_cost_an_empty_port_one_pointer() {
        let inline = std::mem::size_of::<VecDeque<Vec<u8>>>() + std::mem::size_of::<usize>();
        assert_eq!(
            std::mem::size_of::<PortQueues>(),
            inline + std::mem::size_of::<usize>()
        );
        assert!(PortQueues::default().urgent.is_none());
    }

    proptest! {
        /// Against a model of one FIFO per class: every pop takes the front of the
        /// lowest-numbered non-empty class, and the byte counts follow.
        #[test]
        fn pops_follow_strict_priority_over_per_class_fifos(
            ops in proptest::collection::vec((0..PRIORITY_CLASSES + 1, 0..64usize), 0..200)
        ) {
            let mut q = PortQueues::default();
            let mut model: [VecDeque<Vec<u8>>; PRIORITY_CLASSES] = Default::default();
            for (n, (op, len)) in ops.into_iter().enumerate() {
                if op == PRIORITY_CLASSES {
                    let want = model.iter_mut().find(|m| !m.is_empty()).and_then(VecDeque::pop_front);
                    prop_assert_eq!(q.pop(), want);
                } else {
                    let frame = vec![n as u8; len];
                    model[op].push_back(frame.clone());
                    q.push(op, frame);
                }
                q.invariants();
                for (class, m) in model.iter().enumerate() {
                    prop_assert_eq!(q.class_bytes(class), m.iter().map(Vec::len).sum::<usize>());
                }
                prop_assert_eq!(q.is_empty(), model.iter().all(VecDeque::is_empty));
            }
            let left: usize = model.iter().map(VecDeque::len).sum();
            prop_assert_eq!(q.clear(), left);
            prop_assert!(q.is_empty() && q.bytes() == 0);
        }
    }
}
