//! A minion's storage server: the log of the votes its minion forwarded, and the acceptor of the
//! recovery round ("the learner must access the storage of the minions to determine the message
//! to be decided").

use super::{Ballot, Instance, MINIONS, Msg, NodeId, Numbering, Transmit, Value};
use std::collections::{BTreeMap, VecDeque};

/// What the storage server knows about one instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// The minion's vote for this instance (the fast round, ballot 0).
    fast_vote: Option<Value>,
    /// The highest recovery ballot promised (0: none).
    promised: Ballot,
    /// The last value accepted in a recovery round, with its ballot.
    accepted: Option<(Ballot, Value)>,
    /// A promise is owed to the coordinator once the fast vote arrives.
    promise_deferred: bool,
}

/// The storage server of minion `minion`.
#[derive(Debug)]
pub struct Storage {
    minion: u8,
    numbering: Numbering,
    /// Votes received so far: the next instance under [`Numbering::QueuePosition`].
    arrivals: Instance,
    slots: BTreeMap<Instance, Slot>,
    slots_max: usize,
    /// Votes and prepares dropped because `slots_max` instances are held already.
    dropped_full: u64,
    outbox: VecDeque<Transmit>,
}

impl Storage {
    /// Holds at most `slots_max` instances (nothing is trimmed: a run is bounded).
    pub fn new(minion: u8, numbering: Numbering, slots_max: usize) -> Storage {
        assert!(
            (minion as usize) < MINIONS,
            "storage of minion {minion} of {MINIONS}"
        );
        assert!(slots_max > 0, "a storage server holds at least one instance");
        Storage {
            minion,
            numbering,
            arrivals: 0,
            slots: BTreeMap::new(),
            slots_max,
            dropped_full: 0,
            outbox: VecDeque::new(),
        }
    }

    /// A vote from this server's minion, or a recovery message from the coordinator.
    pub fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Vote { minion, stamp, value } if minion == self.minion => self.handle_vote(stamp, value),
            Msg::Prepare { instance, ballot } => self.handle_prepare(instance, ballot),
            Msg::Accept {
                instance,
                ballot,
                value,
            } => self.handle_accept(instance, ballot, value),
            _ => {}
        }
    }

    fn handle_vote(&mut self, stamp: Option<Instance>, value: Value) {
        let instance = match self.numbering {
            Numbering::QueuePosition => self.arrivals,
            // A vote without its stamp under stamping is not a vote for any instance.
            Numbering::MinionStamp => match stamp {
                Some(stamp) => stamp,
                None => return,
            },
        };
        self.arrivals += 1;
        let minion = self.minion;
        let Some(slot) = self.slot(instance) else {
            return;
        };
        if slot.fast_vote.is_some() {
            // One vote per instance and minion; a second one is a duplicate stamp.
            return;
        }
        slot.fast_vote = Some(value);
        if slot.promise_deferred {
            slot.promise_deferred = false;
            let promise = promise_of(minion, instance, slot);
            self.outbox.push_back(Transmit {
                to: NodeId::RecoveryCoordinator,
                msg: promise,
            });
        }
    }

    fn handle_prepare(&mut self, instance: Instance, ballot: Ballot) {
        let minion = self.minion;
        let Some(slot) = self.slot(instance) else {
            return;
        };
        // Ballot 0 is the fast round: no coordinator prepares it.
        if ballot == 0 || ballot <= slot.promised {
            return;
        }
        slot.promised = ballot;
        // The minion's vote may still be on its way, and the learners count it whatever this
        // server promised: answer only once it is here (or once a recovery value is).
        if slot.fast_vote.is_none() && slot.accepted.is_none() {
            slot.promise_deferred = true;
            return;
        }
        let promise = promise_of(minion, instance, slot);
        self.outbox.push_back(Transmit {
            to: NodeId::RecoveryCoordinator,
            msg: promise,
        });
    }

    fn handle_accept(&mut self, instance: Instance, ballot: Ballot, value: Value) {
        let minion = self.minion;
        let Some(slot) = self.slot(instance) else {
            return;
        };
        if ballot == 0 || ballot < slot.promised {
            return;
        }
        slot.promised = ballot;
        slot.accepted = Some((ballot, value));
        slot.promise_deferred = false;
        let accepted = Msg::Accepted {
            minion,
            instance,
            ballot,
        };
        self.outbox.push_back(Transmit {
            to: NodeId::RecoveryCoordinator,
            msg: accepted,
        });
    }

    /// The slot of `instance`, created if there is room.
    fn slot(&mut self, instance: Instance) -> Option<&mut Slot> {
        if !self.slots.contains_key(&instance) && self.slots.len() >= self.slots_max {
            self.dropped_full += 1;
            return None;
        }
        Some(self.slots.entry(instance).or_default())
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    /// The logged fast vote for `instance`.
    pub fn fast_vote(&self, instance: Instance) -> Option<Value> {
        self.slots.get(&instance).and_then(|slot| slot.fast_vote)
    }

    /// Messages dropped because the log was full.
    pub fn dropped_full(&self) -> u64 {
        self.dropped_full
    }
}

fn promise_of(minion: u8, instance: Instance, slot: &Slot) -> Msg {
    Msg::Promise {
        minion,
        instance,
        ballot: slot.promised,
        fast_vote: slot.fast_vote,
        accepted: slot.accepted,
    }
}
