//! Receiver Recovery at the endpoint (paper 5.2): a process declared failed that comes back
//! "needs to consistently deliver or discard messages in the receive buffer", then "join 1Pipe
//! as a new process". Also the other side: a peer that rejoined.
//!
//! What the correct receivers of a scattering did with it, and so what a recovered receiver
//! does with its message in its buffer (the prepared messages it had not delivered):
//! - its sender is correct: the scattering was delivered, unless it was aborted (Recall). An
//!   aborted one with a message here was recalled from a receiver that was failed, so the
//!   controller recorded the recall; without such a record it is delivered.
//! - its sender failed at `T` (announced before or after our failure, or ourselves at our own
//!   failure timestamp): delivered below `T`, discarded at and above (Discard; a commit barrier
//!   promises only the messages below it).
//!
//! Our own failure timestamp bounds only our own messages: a correct sender's message at or
//! above it may well have been committed and delivered (our failure timestamp is *our* commit
//! barrier, held down by whatever we had not got acknowledged). The rule needs the recall
//! records to be complete, which is why the controller answers only after every correct
//! process has finished with our failure (controller/recovery.rs). Incomplete messages and
//! everything not delivered are discarded. Deliveries come out of
//! [`Endpoint::poll_deliver_reliable`] first, in (timestamp, sender) order; they are all below
//! anything delivered after the rejoin, since nobody sends to a failed process.
//!
//! Rejoining as a new process: the reliable connections start over (new PSN spaces at both
//! ends: peers reset theirs on [`Endpoint::on_process_rejoined`]); the send buffer is dropped
//! and its scatterings at or above our failure timestamp reported
//! ([`super::FailureReason::OwnFailure`]: their receivers discarded them). A scattering at or
//! above it that was fully acknowledged and already freed is not reported: the
//! [`RecoveryReport`] gives the failure timestamp, and every reliable scattering released at or
//! above it was discarded.

use super::{Delivery, Endpoint};
use crate::controller::{Failure, LostRecall};
use crate::reliable::receiver::ReliableReceiver;
use crate::reliable::sender::ReliableSender;
use crate::reorder::ReorderBuffer;
use onepipe_wire::Instant;
use std::collections::{BTreeMap, VecDeque};

/// What the controller answers a recovering process (paper 5.2: "host failure notifications
/// since its failure and undeliverable recall messages").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    pub failure_ts: Instant,
    pub incarnation: u64,
    /// The first failure of each other process since ours (and those failed before).
    pub failures: Vec<Failure>,
    /// Processes failed now: the new incarnation starts with them failed.
    pub failed_now: Vec<Failure>,
    /// Recalls we could not take while failed.
    pub recalls: Vec<LostRecall>,
    /// `false` if the controller's record of them overflowed (or parts were lost): then which
    /// buffered messages were aborted is unknown, and all are discarded.
    pub recalls_complete: bool,
}

/// What a recovery did, for the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Every reliable scattering of ours at or above it was discarded by its receivers.
    pub failure_ts: Instant,
    /// The incarnation that failed; the process is now in the next one.
    pub incarnation: u64,
    /// Buffered messages delivered, and discarded.
    pub delivered: usize,
    pub discarded: usize,
    /// Messages of ours reported as failed ([`super::FailureReason::OwnFailure`]).
    pub sends_failed: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    #[error("this process was not told it failed (in incarnation {0})")]
    NotFailed(u64),
    #[error("process {0} cannot rejoin here")]
    BadProcess(u32),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryCounters {
    /// Own-failure notices and rejoins repeated (ignored).
    pub repeated: u64,
    /// Peers that rejoined, each incarnation once.
    pub peers_rejoined: u64,
}

#[derive(Default)]
pub(super) struct EndpointRecovery {
    /// Declared failed: (failure timestamp, incarnation), until recovered.
    own_failure: Option<(Instant, u64)>,
    /// Incarnations this process has completed (rejoins).
    incarnation: u64,
    recovered: VecDeque<Delivery>,
    /// Releases the old send buffer had not reported yet.
    released: VecDeque<(u64, Instant)>,
    /// The last incarnation each peer rejoined in.
    peers: BTreeMap<u32, u64>,
    counters: RecoveryCounters,
}

impl EndpointRecovery {
    pub(super) fn is_failed(&self) -> bool {
        self.own_failure.is_some()
    }
    pub(super) fn poll_recovered(&mut self) -> Option<Delivery> {
        self.recovered.pop_front()
    }
    pub(super) fn poll_released(&mut self) -> Option<(u64, Instant)> {
        self.released.pop_front()
    }

    pub(super) fn peek_released(&self) -> Option<(u64, Instant)> {
        self.released.front().copied()
    }
}

impl Endpoint {
    pub fn recovery_counters(&self) -> &RecoveryCounters {
        &self.recovery.counters
    }

    /// The incarnation this process is in (how many times it rejoined).
    pub fn incarnation(&self) -> u64 {
        self.recovery.incarnation
    }

    /// Whether the controller declared this process failed and it has not recovered yet.
    pub fn is_own_failure(&self) -> Option<Instant> {
        self.recovery.own_failure.map(|(ts, _)| ts)
    }

    /// Paper 5.2: "The controller notifies process of its own failure." From now until
    /// [`Endpoint::recover`], nothing reliable is delivered and sends are refused. Returns
    /// whether this is news (a repeat, or a notice for another incarnation, changes nothing).
    pub fn on_own_failure(&mut self, failure_ts: Instant, incarnation: u64) -> bool {
        if incarnation != self.recovery.incarnation || self.recovery.own_failure.is_some() {
            self.recovery.counters.repeated += 1;
            return false;
        }
        self.recovery.own_failure = Some((failure_ts, incarnation));
        true
    }

    /// Delivers or discards the receive buffer as the correct receivers did (see the module
    /// documentation) and starts the next incarnation. The caller then tells the controller it
    /// rejoins.
    pub fn recover(&mut self, now: Instant, r: &Recovery) -> Result<RecoveryReport, RecoveryError> {
        let me = self.config.process;
        match self.recovery.own_failure {
            Some((_, incarnation)) if incarnation == r.incarnation => {}
            _ => return Err(RecoveryError::NotFailed(r.incarnation)),
        }
        let mut discarded = self.prepared.discard_from(me, r.failure_ts);
        for f in r.failures.iter().filter(|f| f.process != me) {
            discarded += self.prepared.discard_from(f.process, f.ts);
        }
        for l in &r.recalls {
            discarded += usize::from(self.prepared.remove(l.ts, l.sender, l.msg_id, |_| {}));
        }
        let mut delivered = 0;
        while r.recalls_complete
            && let Some(m) = self.prepared.pop_below(Instant::MAX)
        {
            self.recovery.recovered.push_back(Delivery {
                ts: m.ts,
                src: m.src,
                msg_id: m.msg_id,
                payload: m.payload,
            });
            delivered += 1;
        }
        discarded += self.prepared.len();
        self.prepared = ReorderBuffer::new(self.config.prepared_limits());
        let sends_failed = self.start_incarnation(now, r);
        Ok(RecoveryReport {
            failure_ts: r.failure_ts,
            incarnation: r.incarnation,
            delivered,
            discarded,
            sends_failed,
        })
    }

    /// Fresh reliable state, the failures as they are now; returns the sends reported failed.
    fn start_incarnation(&mut self, now: Instant, r: &Recovery) -> usize {
        let fragment_bytes = self.config.reliable_fragment_bytes();
        let fresh = ReliableSender::new(
            self.config.reliable.clone(),
            self.config.process_count,
            fragment_bytes,
        );
        let mut old = std::mem::replace(&mut self.sender, fresh);
        while let Some(released) = old.poll_released() {
            self.recovery.released.push_back(released);
        }
        while let Some(f) = old.poll_failure() {
            self.failures.push_back(f);
        }
        let abandoned = old.abandon(r.failure_ts);
        let sends_failed = abandoned.len();
        self.failures.extend(abandoned);
        self.receiver = ReliableReceiver::new(
            self.config.reliable.recv_window_packets,
            self.config.process_count,
        );
        self.tombstones.clear();
        // The application hears of failures it had not (its callback), once each.
        for f in &r.failures {
            if f.process != self.config.process && !self.is_process_failed(f.process) {
                self.process_failures.push_back((f.process, f.ts));
            }
        }
        // The controller names each failed process once; a repeat or a process that does not
        // exist (a damaged message) is left out rather than trusted.
        self.failed.clear();
        for f in &r.failed_now {
            let known = f.process < self.config.process_count && f.process != self.config.process;
            if known && !self.is_process_failed(f.process) {
                self.failed.push((f.process, f.ts));
            }
        }
        for &(p, _) in &self.failed {
            self.sender.on_process_failed(p);
        }
        self.recovery.own_failure = None;
        self.recovery.incarnation = r.incarnation + 1;
        self.release(now);
        sends_failed
    }

    /// `process` recovered and joined again, in `incarnation` (its rejoins so far): it is no
    /// longer failed, and both reliable connections with it start over. Its old messages below
    /// its failure timestamp still here are delivered as usual. Each incarnation is taken once.
    pub fn on_process_rejoined(&mut self, process: u32, incarnation: u64) -> Result<(), RecoveryError> {
        if process == self.config.process || process >= self.config.process_count {
            return Err(RecoveryError::BadProcess(process));
        }
        if self
            .recovery
            .peers
            .get(&process)
            .is_some_and(|&i| i >= incarnation)
        {
            self.recovery.counters.repeated += 1;
            return Ok(());
        }
        self.recovery.peers.insert(process, incarnation);
        self.recovery.counters.peers_rejoined += 1;
        self.failed.retain(|f| f.0 != process);
        self.receiver.reset(process);
        self.sender.reset_peer(process);
        Ok(())
    }

    /// The next recall a failed receiver could not take, for the controller: (receiver,
    /// timestamp, message id). Sent before the answer to the announcement.
    pub fn poll_lost_recall(&mut self) -> Option<(u32, Instant, u64)> {
        self.sender.poll_lost_recall()
    }
}

#[cfg(test)]
mod tests;
