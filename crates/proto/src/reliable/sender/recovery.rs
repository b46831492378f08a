//! The sender's part of Receiver Recovery (paper 5.2): recalls that failed receivers cannot
//! take, the end of an incarnation, and a peer that comes back as a new process.

use super::{Connection, ReliableSender};
use crate::send_failure::{FailureReason, SendFailure};
use onepipe_wire::Instant;

impl ReliableSender {
    /// Scatterings aborted before `process` failed, whose message to it was not recalled yet
    /// (the recall is unacknowledged, or those packets were its message itself): it can take
    /// no recall now. (Called before the scatterings this failure aborts are: `abort` records
    /// those.)
    pub(super) fn record_lost_recalls_of_earlier_aborts(&mut self, process: u32) {
        for s in self.slots.iter().flatten() {
            if s.aborted.is_some() && s.messages.iter().any(|m| m.dst == process && m.unacked > 0) {
                self.lost_recalls.push_back((process, s.ts, s.msg_id));
            }
        }
    }

    /// The next recall a failed receiver could not take: (receiver, timestamp, message id).
    /// Paper 5.2: "the undeliverable recall message is recorded" by the controller, so that
    /// the receiver, if it recovers, discards the message.
    pub fn poll_lost_recall(&mut self) -> Option<(u32, Instant, u64)> {
        self.lost_recalls.pop_front()
    }

    /// Whether a scattering of ours with a message to failed `process` is still open, not
    /// aborted: its fate depends on its other receivers, and if one of them fails it is
    /// aborted and `process` gets a lost recall. The answer to `process`'s failure waits for
    /// these, so that every recall it will need is recorded before it may recover.
    pub fn has_open_to(&self, process: u32) -> bool {
        self.released.iter().any(|&slot| {
            self.slots[slot as usize].as_ref().is_some_and(|s| {
                s.aborted.is_none() && s.open_messages > 0 && s.messages.iter().any(|m| m.dst == process)
            })
        })
    }

    /// This process was declared failed at `failure_ts` and recovers as a new process: every
    /// scattering still here is dropped. Those at or above `failure_ts` were discarded by
    /// their receivers (paper 5.2, Discard) and are reported, one failure per message
    /// ([`FailureReason::OwnFailure`]); those below were delivered (the commit barrier the
    /// controller took as the failure timestamp had passed them). Waiting ones never left.
    pub fn abandon(&mut self, failure_ts: Instant) -> Vec<SendFailure> {
        let mut failures = Vec::new();
        let mut slots: Vec<u32> = self.released.iter().chain(&self.waiting).copied().collect();
        slots.sort_by_key(|&slot| self.slots[slot as usize].as_ref().map(|s| s.ts));
        for slot in slots {
            let Some(s) = self.slots[slot as usize].take() else {
                continue;
            };
            let waiting = s.ts == Instant::ZERO && self.waiting.contains(&slot);
            if s.ts < failure_ts && !waiting {
                continue;
            }
            for m in &s.messages {
                failures.push(SendFailure {
                    ts: s.ts,
                    dst: m.dst,
                    msg_id: s.msg_id,
                    reason: FailureReason::OwnFailure,
                });
            }
        }
        failures
    }

    /// `process` recovered and joined again as a new process: its connection starts over
    /// (PSN 0, fresh windows), and its failure is forgotten, unless a scattering aborted for
    /// it still waits for recall acknowledgments (then the entry stays until they come, and a
    /// new failure of it is taken as a repeat: a limit, see docs/failures.md).
    pub fn reset_peer(&mut self, process: u32) {
        let (config, cc) = (&self.config, &self.cc);
        if let Some(c) = self.connections.get_mut(process) {
            debug_assert!(c.in_flight.is_empty(), "a failed connection is closed");
            // No scattering waits for it (those that did were aborted with the failure, and
            // sends to a failed process are refused); a pending release pass may list it.
            let dirty = c.dirty;
            *c = Connection::new(config, cc);
            c.dirty = dirty;
        }
        self.failed.retain(|&(p, open)| p != process || open > 0);
    }
}
