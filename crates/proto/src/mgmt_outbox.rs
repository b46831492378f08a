//! What a node has yet to tell the controller, waiting for its management link.
//!
//! The link is flow-controlled (over udp a sender waits for credit), so this queue grows for
//! as long as the controller is down or slow: seconds, when a standby takes over. It has two
//! lanes. Requests to forward a packet go last and are bounded: each carries a whole packet,
//! and its sender asks again at a later retransmission, so the oldest is dropped and counted
//! once [`FORWARD_REQUESTS_QUEUED_MAX`] wait. Everything else (registrations, link reports,
//! answers to announcements, lost recalls, forwarded ACKs) goes first, in the order it was
//! said; a registration or report repeated while an equal one still waits is not queued
//! twice (both repeat on a timer until the controller answers).
//!
//! Found over udp: a process whose controller was replaced mid-recovery had hundreds of
//! forward requests queued ahead of its answer to the new controller's announcement, each
//! written to etcd before it was handled; the answer came seconds late and the commit barrier
//! stood still until then.

use crate::controller::Input;
use std::collections::VecDeque;

/// Forward requests kept waiting at once (a few per peer of a 32-process run).
pub const FORWARD_REQUESTS_QUEUED_MAX: usize = 64;

#[derive(Debug, Default)]
pub struct MgmtOutbox {
    first: VecDeque<Input>,
    forwards: VecDeque<Input>,
    /// Forward requests dropped, oldest first, because too many waited.
    pub forwards_dropped: u64,
    /// Registrations and reports not queued because an equal one still waited.
    pub repeats_merged: u64,
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
            Input::Register { .. } | Input::LinkDown { .. } | Input::Heard { .. }
                if self.first.contains(&input) =>
            {
                self.repeats_merged += 1;
            }
            _ => self.first.push_back(input),
        }
    }

    pub fn pop(&mut self) -> Option<Input> {
        self.first.pop_front().or_else(|| self.forwards.pop_front())
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty() && self.forwards.is_empty()
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
        assert_eq!(o.repeats_merged, 1);
        let all: Vec<Input> = std::iter::from_fn(|| o.pop()).collect();
        // Answers are not merged: each names its own announcement, and repeats are rare.
        assert_eq!(all, vec![register.clone(), completed.clone(), completed]);
        o.push(register.clone());
        assert_eq!(o.pop(), Some(register), "queued again once the first has left");
    }
}
