//! The two switch roles of fast mode: the serializer and the minions. Neither compares anything,
//! which is the point of the design: "they simply forward all messages they receive".

use super::{Instance, MINIONS, Msg, NodeId, Numbering, Transmit, Value};
use std::collections::VecDeque;

/// The serializer switch: broadcasts every request to the four minions in arrival order.
#[derive(Debug, Default)]
pub struct Serializer {
    outbox: VecDeque<Transmit>,
    forwarded: u64,
}

impl Serializer {
    pub fn new() -> Serializer {
        Serializer::default()
    }

    /// A proposer's request; anything else is not for a serializer and is ignored.
    pub fn handle(&mut self, msg: Msg) {
        let Msg::Request { value } = msg else {
            return;
        };
        self.forwarded += 1;
        for minion in 0..MINIONS as u8 {
            self.outbox.push_back(Transmit {
                to: NodeId::Minion(minion),
                msg: Msg::Request { value },
            });
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// Requests broadcast so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded
    }
}

/// A minion switch: always accepts, and forwards its vote to its storage server and to every
/// learner, in one order (the switch's egress).
#[derive(Debug)]
pub struct Minion {
    id: u8,
    learners: u16,
    numbering: Numbering,
    /// Votes forwarded so far: the next stamp under [`Numbering::MinionStamp`].
    votes: Instance,
    outbox: VecDeque<Transmit>,
}

impl Minion {
    /// Minion `id` (0..4) in front of `learners` learners.
    pub fn new(id: u8, learners: u16, numbering: Numbering) -> Minion {
        assert!((id as usize) < MINIONS, "minion {id} of {MINIONS}");
        Minion {
            id,
            learners,
            numbering,
            votes: 0,
            outbox: VecDeque::new(),
        }
    }

    /// The serializer's broadcast; anything else is ignored.
    pub fn handle(&mut self, msg: Msg) {
        let Msg::Request { value } = msg else {
            return;
        };
        self.vote(value);
    }

    fn vote(&mut self, value: Value) {
        let stamp = match self.numbering {
            Numbering::QueuePosition => None,
            Numbering::MinionStamp => Some(self.votes),
        };
        self.votes += 1;
        let vote = Msg::Vote {
            minion: self.id,
            stamp,
            value,
        };
        // One egress order for the storage server and every learner (assumption 2 at the switch).
        self.outbox.push_back(Transmit {
            to: NodeId::Storage(self.id),
            msg: vote,
        });
        for learner in 0..self.learners {
            self.outbox.push_back(Transmit {
                to: NodeId::Learner(learner),
                msg: vote,
            });
        }
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// Votes forwarded so far.
    pub fn votes(&self) -> Instance {
        self.votes
    }
}
