//! Receiver Recovery (paper 5.2) on the management plane: a process's side of the
//! conversation.
//!
//! A process told of its own failure ([`ControlMsg::OwnFailure`]) asks to recover
//! ([`Input::Recover`]); it collects the recalls it could not take ([`ControlMsg::LostRecalls`])
//! until the answer ([`ControlMsg::Recovery`]), recovers its endpoint and rejoins
//! ([`Input::Rejoin`]). Peers reset their connections on [`ControlMsg::Rejoined`]. As a sender,
//! every process passes on the recalls its failed receivers could not take
//! ([`Input::RecallLost`]) before it answers an announcement.

use super::ControlPort;
use crate::control_msg::ControlMsg;
use onepipe_proto::controller::{Input, LostRecall, Member, RECALLS_PER_OUTPUT};
use onepipe_proto::endpoint::{Endpoint, Recovery};
use onepipe_wire::Instant;
use std::collections::BTreeSet;

/// A process's recovery in progress.
#[derive(Default)]
pub(crate) struct PortRecovery {
    /// The incarnation being recovered, and the recalls heard for it so far.
    incarnation: Option<u64>,
    recalls: BTreeSet<LostRecall>,
}

impl ControlPort {
    /// Handles `c` if it is a recovery message; hands it back otherwise.
    pub(super) fn recovery_message(
        &mut self,
        now: Instant,
        endpoint: &mut Endpoint,
        c: ControlMsg,
    ) -> Option<ControlMsg> {
        let Member::Process(me) = self.member else {
            return Some(c);
        };
        match c {
            ControlMsg::OwnFailure { ts, incarnation } => {
                // Repeated when the process is heard again: asking again is harmless (the
                // controller answers the incarnation it is in, once per ask).
                endpoint.on_own_failure(ts, incarnation);
                if endpoint.is_own_failure().is_some() && endpoint.incarnation() == incarnation {
                    if self.recovery.incarnation != Some(incarnation) {
                        self.recovery.incarnation = Some(incarnation);
                        self.recovery.recalls.clear();
                    }
                    self.send(Input::Recover {
                        process: me,
                        incarnation,
                    });
                }
            }
            ControlMsg::LostRecalls { incarnation, recalls } => {
                if self.recovery.incarnation == Some(incarnation) {
                    self.recovery.recalls.extend(recalls);
                }
            }
            ControlMsg::Recovery {
                incarnation,
                ts,
                failures,
                failed_now,
                recalls,
                recalls_truncated,
            } => {
                if self.recovery.incarnation != Some(incarnation) {
                    return None;
                }
                self.recovery.incarnation = None;
                let lost: Vec<LostRecall> = std::mem::take(&mut self.recovery.recalls).into_iter().collect();
                let r = Recovery {
                    failure_ts: ts,
                    incarnation,
                    failures,
                    failed_now,
                    recalls_complete: !recalls_truncated && lost.len() == recalls as usize,
                    recalls: lost,
                };
                if endpoint.recover(now, &r).is_ok() {
                    // Announcements before the failure are no longer ours to answer.
                    self.unanswered.clear();
                    self.send(Input::Rejoin {
                        process: me,
                        incarnation,
                    });
                }
            }
            ControlMsg::Rejoined { process, incarnation } => {
                // The controller never names this process or one that does not exist.
                let _ = endpoint.on_process_rejoined(process, incarnation);
            }
            other => return Some(other),
        }
        None
    }

    /// The recalls the endpoint's failed receivers could not take, for the controller.
    pub(super) fn send_lost_recalls(&mut self, endpoint: &mut Endpoint) {
        let Member::Process(me) = self.member else {
            return;
        };
        let mut lost = Vec::new();
        while let Some((receiver, ts, msg_id)) = endpoint.poll_lost_recall() {
            lost.push((receiver, ts.as_nanos(), msg_id));
            if lost.len() == RECALLS_PER_OUTPUT {
                self.send(Input::RecallLost {
                    process: me,
                    lost: std::mem::take(&mut lost),
                });
            }
        }
        if !lost.is_empty() {
            self.send(Input::RecallLost { process: me, lost });
        }
    }
}
