//! NetPaxos's "fast network consensus" (thesis 004, chapter 4.1.2, Figure 4.1) as sans-IO state
//! machines, with a seeded discrete-event simulation ([`simulate`]) that shows where it holds and
//! where it breaks.
//!
//! # What is modelled
//! - A [`Proposer`] sends values (unique ids) to the [`Serializer`] switch and re-submits the
//!   values the learners did not deliver in time.
//! - The serializer broadcasts each value to the four [`Minion`] switches in the order it
//!   received them; it stamps nothing ("the serializer does not need to establish a FIFO
//!   ordering of messages. It simply maximizes the chances that acceptors see the same
//!   ordering").
//! - A minion "always accepts": it forwards its vote to every learner and to its own
//!   [`Storage`] server, which logs it.
//! - A [`FastLearner`] keeps one queue per minion (one NIC each) and decides the next instance
//!   when at least [`FAST_QUORUM`] (3) of the 4 queue heads carry the same value. On a conflict
//!   (no value can reach 3) or when the instance stalls past a timeout it asks the
//!   [`RecoveryCoordinator`] for recovery.
//! - Recovery ("recovery mode", a classic round of Paxos run by a commodity server): Phase 1
//!   reads the storage servers' votes for the instance, Phase 2 chooses, keeping any value that
//!   may have been fast-chosen (with 4 acceptors and fast quorum 3: a value with at least 2 of
//!   the 3 answers), and the coordinator sends the decision to every learner.
//!
//! # Choices the thesis leaves open (see [`Numbering`] for the first)
//! - Instance numbers: "there are no sequence or round numbers, learners can only reason about
//!   messages by using their ordering in the queue". [`Numbering::QueuePosition`] is that: the
//!   k-th vote a learner (or a storage server) receives from a minion is its vote for instance
//!   k. [`Numbering::MinionStamp`] is the alternative where each minion stamps its own counter
//!   (one register, beyond OpenFlow, trivial in P4); it removes the thesis's second assumption.
//! - Storage servers are the acceptors of the recovery round (the minions cannot compare
//!   rounds). A storage server answers Phase 1 for an instance only once it holds its minion's
//!   vote for it: a minion's vote to the learners is not gated by any promise, so a storage
//!   server that answered "no vote yet" could see its minion's vote counted by a learner later,
//!   and the 2-of-3 rule would then be unsafe.
//! - One recovery coordinator, one ballot per instance, and reliable links between learners,
//!   coordinator and storage servers (servers talk over TCP); the storage link of each minion
//!   is FIFO and lossless (the thesis's second assumption, on the storage side).
//! - Learners decide instances in order and deliver each value once: a decided instance whose
//!   value was delivered before is a no-op (re-submissions and recovery make duplicates).
//!
//! # The weakness, as the thesis states it
//! Assumption 1 (the minions see the serializer's broadcasts in one order) matters for
//! performance: without it the fast path conflicts and only recovery makes progress.
//! Assumption 2 (a minion's votes reach its storage and every learner in one order) matters for
//! correctness: with [`Numbering::QueuePosition`], reordering or loss on a minion-to-learner
//! link shifts that learner's queue, learners decide different values for one instance, and
//! recovery from the storage logs cannot repair a decision already delivered. The tests in
//! `tests_sim.rs` find both.
//!
//! Loss is worse than the thesis's "one of the minions dropped a packet, [which] leads to a
//! conflict": a minion that misses a broadcast shifts every later position of its log by one.
//! Learners and storage servers shift alike (agreement holds), but instances then mix
//! neighbouring values, recovery chooses some values twice (no-ops) and the proposer has to
//! re-submit the ones skipped; an instance beyond the end of two shortened logs never gets a
//! classic quorum of votes and stays in recovery (`recoveries_unfinished` in the report).
//!
//! # What is not modelled
//! Switch, storage or learner failures and the serializer's backups; recovery coordinator
//! failover (ballots above 1); log trimming; bandwidth, queueing and the thesis's throughput
//! numbers; wire formats (messages are the plain enum [`Msg`]).

mod learner;
mod proposer;
mod recovery;
mod report;
mod sim;
mod storage;
mod switches;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_recovery;
#[cfg(test)]
mod tests_sim;

pub use learner::{Decision, DecisionPath, FastLearner, LearnerConfig, LearnerStats};
pub use proposer::{Proposer, ProposerConfig};
pub use recovery::{RecoveryCoordinator, choose_value};
pub use report::{Disagreement, NetpaxosReport};
pub use sim::{ConfigError, FaultyLinks, NetpaxosConfig, simulate};
pub use storage::Storage;
pub use switches::{Minion, Serializer};

/// The number of minion switches (Figure 4.1), each with its storage server and one learner NIC.
pub const MINIONS: usize = 4;
/// Votes that decide an instance on the fast path: "a quorum with three queues".
pub const FAST_QUORUM: usize = 3;
/// Answers the recovery coordinator waits for in each phase. With 4 acceptors and fast quorum
/// 3, a classic quorum must meet every two fast quorums (3 + 3 + 3 > 2 * 4), so it is 3 too.
pub const CLASSIC_QUORUM: usize = 3;

/// A proposed value: a unique id chosen by the proposer (the thesis's messages carry a value
/// and nothing else the learners can use).
pub type Value = u64;
/// A consensus instance: a position in the decided sequence.
pub type Instance = u64;
/// A recovery round's ballot; the fast round is ballot 0.
pub type Ballot = u32;

/// How learners and storage servers number a minion's votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    /// The thesis: no numbers; a minion's k-th vote to arrive is its vote for instance k.
    QueuePosition,
    /// Each minion stamps its own arrival counter on the votes it forwards.
    MinionStamp,
}

/// A participant, as an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeId {
    Proposer,
    Serializer,
    /// A minion switch, 0..4.
    Minion(u8),
    /// The storage server of one minion, 0..4.
    Storage(u8),
    Learner(u16),
    RecoveryCoordinator,
}

/// Every message of the protocol (no wire format: the simulation passes them as they are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// A value to agree on: proposer to serializer, serializer to minions.
    Request { value: Value },
    /// A minion's vote, to its storage server and to every learner. `stamp` is the minion's
    /// counter under [`Numbering::MinionStamp`], `None` under [`Numbering::QueuePosition`].
    Vote {
        minion: u8,
        stamp: Option<Instance>,
        value: Value,
    },
    /// A learner cannot decide `instance` on the fast path.
    RecoveryRequest { learner: u16, instance: Instance },
    /// Phase 1a, coordinator to storage servers.
    Prepare { instance: Instance, ballot: Ballot },
    /// Phase 1b: the storage server's fast vote and what it accepted in a recovery round.
    Promise {
        minion: u8,
        instance: Instance,
        ballot: Ballot,
        fast_vote: Option<Value>,
        accepted: Option<(Ballot, Value)>,
    },
    /// Phase 2a.
    Accept {
        instance: Instance,
        ballot: Ballot,
        value: Value,
    },
    /// Phase 2b, storage server to coordinator.
    Accepted {
        minion: u8,
        instance: Instance,
        ballot: Ballot,
    },
    /// The recovered decision, coordinator to every learner.
    Decided { instance: Instance, value: Value },
    /// A learner delivered `value` (to the proposer, which re-submits what is missing).
    Delivered { learner: u16, value: Value },
}

/// A message to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub to: NodeId,
    pub msg: Msg,
}
