//! A host's output queue: frames it originates, in the order they must leave.
//!
//! One item is either one frame or a broadcast to every other process, expanded one frame at a
//! time as the port takes them, so a fan-out of N copies costs one item of memory. Items leave
//! in queue order, so for each destination the frames go out in the order they were queued:
//! the token frame follows the batch it closes, and a Lamport notice follows every data frame
//! stamped before it.

use crate::frame::{FrameKind, Header};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    One(u32),
    /// Every process but the sender.
    Others,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub kind: FrameKind,
    pub dest: Dest,
    pub origin: u32,
    pub seq: u64,
    pub msg_id: u64,
    pub sent_ns: u64,
    pub payload_len: u16,
}

#[derive(Clone, Debug)]
pub struct OutQueue {
    me: u32,
    n: u32,
    items: VecDeque<Item>,
    /// Next destination of the front item when it is a broadcast.
    cursor: u32,
    capacity: usize,
}

impl OutQueue {
    pub fn new(me: u32, n: u32, capacity: usize) -> OutQueue {
        OutQueue {
            me,
            n,
            items: VecDeque::new(),
            cursor: first_other(me, 0),
            capacity: capacity.max(1),
        }
    }

    /// Queues an item; gives it back when the queue is full.
    pub fn push(&mut self, item: Item) -> Result<(), Item> {
        if self.items.len() >= self.capacity {
            return Err(item);
        }
        if item.dest == Dest::Others && self.n <= 1 {
            return Ok(()); // nobody else to tell
        }
        self.items.push_back(item);
        Ok(())
    }

    /// The last queued item if none of its frames has left yet, to update a notice in place:
    /// once a broadcast's first copies are out, changing it would tell the rest of the
    /// processes something else than the first.
    pub fn back_unsent_mut(&mut self) -> Option<&mut Item> {
        let started = self.items.len() == 1 && self.cursor != first_other(self.me, 0);
        if started {
            return None;
        }
        self.items.back_mut()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Items that can still be queued.
    pub fn room(&self) -> usize {
        self.capacity - self.items.len()
    }

    /// Writes the next frame into `buf`.
    pub fn poll(&mut self, buf: &mut [u8]) -> Option<Sent> {
        let item = *self.items.front()?;
        let mut finished = None;
        let dst = match item.dest {
            Dest::One(d) => {
                self.items.pop_front();
                d
            }
            Dest::Others => {
                let d = self.cursor;
                self.cursor = first_other(self.me, d + 1);
                if self.cursor >= self.n {
                    self.items.pop_front();
                    self.cursor = first_other(self.me, 0);
                    finished = Some(item);
                }
                d
            }
        };
        let h = Header {
            kind: item.kind,
            src: self.me,
            dst,
            origin: item.origin,
            seq: item.seq,
            msg_id: item.msg_id,
            sent_ns: item.sent_ns,
            payload_len: item.payload_len,
        };
        Some(Sent {
            len: h.emit(buf),
            kind: item.kind,
            finished,
        })
    }
}

/// A frame [`OutQueue::poll`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    pub len: usize,
    pub kind: FrameKind,
    /// The broadcast whose last copy this was.
    pub finished: Option<Item>,
}

/// `from`, or the one after it if `from` is the sender itself.
fn first_other(me: u32, from: u32) -> u32 {
    if from == me { from + 1 } else { from }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: FrameKind, dest: Dest, seq: u64) -> Item {
        Item {
            kind,
            dest,
            origin: 1,
            seq,
            msg_id: 0,
            sent_ns: 0,
            payload_len: if kind == FrameKind::Data { 8 } else { 0 },
        }
    }

    #[test]
    fn broadcasts_expand_to_every_other_process_in_queue_order() {
        let mut q = OutQueue::new(1, 3, 4);
        q.push(item(FrameKind::Data, Dest::Others, 7)).unwrap();
        q.push(item(FrameKind::Token, Dest::One(2), 8)).unwrap();
        let mut buf = [0u8; 128];
        let mut seen = Vec::new();
        let mut finished = Vec::new();
        while let Some(sent) = q.poll(&mut buf) {
            finished.extend(sent.finished.map(|i| i.seq));
            let h = Header::parse(&buf[..sent.len]).unwrap();
            seen.push((h.kind, h.dst, h.seq, h.src));
        }
        assert_eq!(
            seen,
            [
                (FrameKind::Data, 0, 7, 1),
                (FrameKind::Data, 2, 7, 1),
                (FrameKind::Token, 2, 8, 1)
            ]
        );
        assert_eq!(finished, [7], "the broadcast is finished with its last copy");
    }

    /// Found in the inproc Lamport test on a loaded machine: a notice raised after its first
    /// copy left told the first process a lower clock than the others, and never the higher
    /// one, so that process waited forever for a word above the last message.
    #[test]
    fn a_broadcast_partly_sent_is_not_handed_out_for_change() {
        let mut q = OutQueue::new(1, 3, 4);
        q.push(item(FrameKind::Exchange, Dest::Others, 7)).unwrap();
        assert!(q.back_unsent_mut().is_some(), "nothing left yet");
        let mut buf = [0u8; 128];
        q.poll(&mut buf).unwrap();
        assert!(q.back_unsent_mut().is_none(), "process 0 has its copy");
        q.push(item(FrameKind::Exchange, Dest::Others, 8)).unwrap();
        assert_eq!(
            q.back_unsent_mut().map(|i| i.seq),
            Some(8),
            "the next one is whole"
        );
    }

    #[test]
    fn full_queue_gives_the_item_back() {
        let mut q = OutQueue::new(0, 2, 1);
        q.push(item(FrameKind::Data, Dest::Others, 1)).unwrap();
        assert!(q.push(item(FrameKind::Data, Dest::Others, 2)).is_err());
        assert_eq!(q.len(), 1);
    }
}
