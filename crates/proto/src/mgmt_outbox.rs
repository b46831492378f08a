//! The management plane's bounded queues: what a node has yet to tell the controller
//! ([`MgmtOutbox`]), and, through [`MgmtQueue`], what the controller has yet to tell each node
//! (`onepipe::control_node`).
//!
//! A management link is flow-controlled (over udp a sender waits for credit), so its queue
//! grows for as long as the far end is down or slow: seconds, when a standby takes over, or
//! for ever for a node that died. Every queue is bounded by [`MgmtQueue`]'s rules:
//! - a message equal to one still queued is not queued twice (every message is idempotent at
//!   its receiver: a repeated report, registration, answer or order changes nothing);
//! - a message that names the whole state of its kind ([`Keep::Latest`]: the links to route
//!   around, a registration's answer) replaces the older one of its kind;
//! - once the queue holds its `_max`, the oldest message that the protocol repeats until it
//!   takes effect ([`Keep::Repeated`]) makes room, counted: its next repetition comes after
//!   the queue drained. A failure announcement is such a message: the controller repeats it
//!   every announcement interval until answered, and a process that takes none of them by
//!   the deadline is declared failed, as one that does not answer is (paper 5.2).
//! - a message sent once ([`Keep::Once`]: a recovery's answer, a forwarded packet) is dropped
//!   only from a queue full of such, and counted apart (`dropped_once`): that takes more
//!   messages than the controller's own bounds let it owe one node (forwards waiting at once,
//!   recalls per recovery), so a node that far behind is not taking its messages at all.
//!
//! [`MgmtOutbox`] adds a lane of its own for requests to forward a packet, which go last: each
//! carries a whole packet, and its sender asks again at a later retransmission, so the oldest
//! is dropped and counted once [`FORWARD_REQUESTS_QUEUED_MAX`] wait.
//!
//! Found over udp: a process whose controller was replaced mid-recovery had hundreds of
//! forward requests queued ahead of its answer to the new controller's announcement, each
//! written to etcd before it was handled; the answer came seconds late and the commit barrier
//! stood still until then.

use crate::controller::Input;
use std::collections::VecDeque;

/// Forward requests kept waiting at once (a few per peer of a 32-process run).
pub const FORWARD_REQUESTS_QUEUED_MAX: usize = 64;

/// Messages other than forward requests waiting for one management link, either way.
/// Above what one node is owed at once: [`crate::controller::forward::FORWARDS_MAX`]
/// forwards and a recovery's answer of [`crate::controller::LOST_RECALLS_MAX`] recalls in
/// parts of [`crate::controller::RECALLS_PER_OUTPUT`] fit with room to spare.
pub const MGMT_QUEUED_MAX: usize = 2048;

/// How a queued message may be merged or given up (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Names the whole state of kind `u8`: a newer message of the kind replaces the older.
    Latest(u8),
    /// Repeated by the protocol until it takes effect: the first to go from a full queue.
    Repeated,
    /// Sent once: given up only from a queue full of such.
    Once,
}

/// A management message, as its queue treats it.
pub trait Queued: PartialEq {
    fn keep(&self) -> Keep;
}

impl Queued for Input {
    fn keep(&self) -> Keep {
        match self {
            // Repeated on timers and on every Hello until the controller answers; an answer
            // to an announcement with every copy of it. A report of implausible time decides
            // nothing and comes again while the frames keep coming.
            Input::Register { .. }
            | Input::LinkDown { .. }
            | Input::Heard { .. }
            | Input::Completed { .. }
            | Input::Implausible { .. } => Keep::Repeated,
            Input::RecallLost { .. }
            | Input::Recover { .. }
            | Input::Rejoin { .. }
            | Input::Forward { .. }
            | Input::Forwarded { .. } => Keep::Once,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Messages not queued because an equal one waited, or that replaced an older one.
    pub merged: u64,
    /// Repeated messages dropped from a full queue (sent again later by the protocol).
    pub dropped_repeated: u64,
    /// Messages sent once, dropped from a queue full of such.
    pub dropped_once: u64,
}

impl QueueCounters {
    /// Adds `other`'s counts (a sum over queues).
    pub fn add(&mut self, other: &QueueCounters) {
        self.merged += other.merged;
        self.dropped_repeated += other.dropped_repeated;
        self.dropped_once += other.dropped_once;
    }
}

/// A bounded queue of management messages (see the module documentation).
#[derive(Debug)]
pub struct MgmtQueue<T> {
    items: VecDeque<T>,
    max: usize,
    pub counters: QueueCounters,
}

impl<T> Default for MgmtQueue<T> {
    fn default() -> MgmtQueue<T> {
        MgmtQueue::with_max(MGMT_QUEUED_MAX)
    }
}

impl<T> MgmtQueue<T> {
    /// A queue of at most `max` messages (at least 1).
    pub fn with_max(max: usize) -> MgmtQueue<T> {
        MgmtQueue {
            items: VecDeque::new(),
            max: max.max(1),
            counters: QueueCounters::default(),
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<T: Queued> MgmtQueue<T> {
    pub fn push(&mut self, msg: T) {
        if self.items.contains(&msg) {
            self.counters.merged += 1;
            return;
        }
        let keep = msg.keep();
        if let Keep::Latest(_) = keep
            && let Some(i) = self.items.iter().position(|m| m.keep() == keep)
        {
            self.items.remove(i);
            self.counters.merged += 1;
        }
        if self.items.len() >= self.max {
            self.make_room();
        }
        self.items.push_back(msg);
        debug_assert!(self.items.len() <= self.max);
    }
}

impl<T: Queued> MgmtQueue<T> {
    /// Drops the oldest repeated message, else the oldest sent once; the one message of each
    /// `Latest` kind stays.
    fn make_room(&mut self) {
        let oldest = |keep: Keep| self.items.iter().position(|m| m.keep() == keep);
        if let Some(i) = oldest(Keep::Repeated) {
            self.items.remove(i);
            self.counters.dropped_repeated += 1;
        } else if let Some(i) = oldest(Keep::Once) {
            self.items.remove(i);
            self.counters.dropped_once += 1;
        } else {
            self.items.pop_front();
            self.counters.dropped_repeated += 1;
        }
    }
}

/// What a node has yet to tell the controller: its forward requests in a lane of their own,
/// after everything else (see the module documentation).
#[derive(Debug, Default)]
pub struct MgmtOutbox {
    first: MgmtQueue<Input>,
    forwards: VecDeque<Input>,
    /// Forward requests dropped, oldest first, because too many waited.
    pub forwards_dropped: u64,
}

impl MgmtOutbox {
    pub fn push(&mut self, input: Input) {
        match input {
            Input::Forward { .. } => {
                if self.forwards.len() == FORWARD_REQUESTS_QUEUED_MAX {
                    self.forwards.pop_front();
                    self.forwards_dropped += 1;
                }
                self.forwards.push_back(input);
            }
            _ => self.first.push(input),
        }
    }

    pub fn pop(&mut self) -> Option<Input> {
        self.first.pop().or_else(|| self.forwards.pop_front())
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty() && self.forwards.is_empty()
    }

    /// What the queue of everything but forward requests merged and dropped.
    pub fn counters(&self) -> &QueueCounters {
        &self.first.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::PacketBytes;

    fn forward(n: u8) -> Input {
        Input::Forward {
            from: 0,
            to: 1,
            packet: PacketBytes(vec![n]),
        }
    }

    #[test]
    fn answers_overtake_forward_requests_which_are_bounded() {
        let mut o = MgmtOutbox::default();
        for n in 0..(FORWARD_REQUESTS_QUEUED_MAX + 10) as u8 {
            o.push(forward(n));
        }
        o.push(Input::Completed { process: 0, epoch: 3 });
        assert_eq!(o.forwards_dropped, 10);
        assert_eq!(o.pop(), Some(Input::Completed { process: 0, epoch: 3 }));
        // The newest requests are kept, in order.
        assert_eq!(o.pop(), Some(forward(10)));
        let rest = std::iter::from_fn(|| o.pop()).count();
        assert_eq!(rest, FORWARD_REQUESTS_QUEUED_MAX - 1);
        assert!(o.is_empty());
    }

    #[test]
    fn a_repeated_registration_waits_once_and_order_is_kept() {
        let mut o = MgmtOutbox::default();
        let register = Input::Register { process: 2 };
        let completed = Input::Completed { process: 2, epoch: 0 };
        o.push(register.clone());
        o.push(completed.clone());
        o.push(register.clone());
        o.push(completed.clone());
        assert_eq!(o.counters().merged, 2);
        let all: Vec<Input> = std::iter::from_fn(|| o.pop()).collect();
        assert_eq!(all, vec![register.clone(), completed]);
        o.push(register.clone());
        assert_eq!(o.pop(), Some(register), "queued again once the first has left");
    }

    /// A message of the test queue: its number and how it may be given up.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Msg(u32, Keep);

    impl Queued for Msg {
        fn keep(&self) -> Keep {
            self.1
        }
    }

    /// A full queue gives up a repeated message before a once-sent one, keeps one message
    /// per `Latest` kind, and never holds more than its bound, each drop counted.
    #[test]
    fn a_full_queue_drops_repeated_messages_first_and_stays_bounded() {
        let mut q = MgmtQueue::with_max(4);
        q.push(Msg(1, Keep::Repeated));
        q.push(Msg(2, Keep::Once));
        q.push(Msg(3, Keep::Latest(0)));
        q.push(Msg(4, Keep::Latest(0)));
        assert_eq!(q.counters.merged, 1, "the newer route replaces the older");
        q.push(Msg(5, Keep::Once));
        q.push(Msg(6, Keep::Once));
        assert_eq!(q.counters.dropped_repeated, 1);
        assert_eq!(q.len(), 4);
        let all: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|m| m.0).collect();
        assert_eq!(all, vec![2, 4, 5, 6]);
        for k in 0..100 {
            q.push(Msg(k, Keep::Once));
            assert!(q.len() <= 4);
        }
        assert_eq!(q.counters.dropped_once, 96);
        assert_eq!(q.counters.dropped_repeated, 1);
    }

    /// However long the controller is away, a node's queue holds at most its bound: repeated
    /// reports and registrations merge, and the answers to announcements stay.
    #[test]
    fn the_outbox_stays_bounded_while_nobody_drains_it() {
        let mut o = MgmtOutbox::default();
        for epoch in 0..(3 * MGMT_QUEUED_MAX) as u64 {
            o.push(Input::Register { process: 1 });
            o.push(Input::Completed { process: 1, epoch });
        }
        o.push(Input::Recover {
            process: 1,
            incarnation: 0,
        });
        let all: Vec<Input> = std::iter::from_fn(|| o.pop()).collect();
        assert_eq!(all.len(), MGMT_QUEUED_MAX);
        assert!(all.contains(&Input::Recover {
            process: 1,
            incarnation: 0
        }));
        assert!(o.counters().dropped_repeated > 0 && o.counters().dropped_once == 0);
    }
}
