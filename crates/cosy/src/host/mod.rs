//! cosy's host library (paper 2.1, 3.2-4): a submission queue and a completion queue.
//!
//! `submit(dst, message)` returns at once with the bound delta of that message; by the time
//! `submit + delta` on this host's clock, the message's completion is posted: complete (the
//! receiver has it all), reject (cosy could not bound it: the receiver was busy, no path had a
//! free virtual link, this host had no free slot, or it was refused at submission), or failure
//! (the receiver saw its data stop coming).
//!
//! The host is a [`Node`] with one port. As a sender ([`sender`]) it asks the receiver, waits
//! for the rsvp that reserved a path, sends the data along it paced at B/K on one of its K
//! slots, then a complete behind it. As a receiver ([`receiver`]) it holds requests up to
//! `hold` (the paper's delta^E), grants its K slots by the power of two choices, and sends a
//! failure to the sender when data or a reject does not arrive when due.

mod receiver;
mod sender;
#[cfg(test)]
mod tests;

use crate::timing::{Timing, TimingError};
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_wire::Instant;
use onepipe_wire::cosy::{HEADER_LEN, Repr};
use receiver::Receiver;
use sender::Sender;
use std::collections::VecDeque;

pub use receiver::Delivery;
pub use sender::{Cause, Completion, Flag, Submitted};

#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// This host's process.
    pub me: u32,
    /// Processes in the fabric: destinations are `0..processes`.
    pub processes: u32,
    pub timing: Timing,
    /// The largest message a submission may carry; larger ones are rejected at once.
    pub message_bytes_max: usize,
    /// Messages in flight from this host (submitted, not completed), at most; beyond it a
    /// submission is rejected at once.
    pub outgoing_max: usize,
    /// Requests a receiver holds at most; beyond it a request is rejected at once.
    pub pending_max: usize,
    /// Completions and deliveries the application has not taken yet, at most.
    pub queue_max: usize,
    /// Slots a receiver gives one message at most (clamped to 1..=K). The default, 1, is the
    /// case of Theorem 3.5's bound; more lets a message alone go faster (K: at B) but holds
    /// slots and virtual links that later requests then miss: in the simulator it cut the
    /// load sustained without a reject (docs/cosy.md, "Several slots per message").
    pub slots_max: u8,
    /// Seeds the receiver's nonces and its power-of-two choices.
    pub seed: u64,
}

impl HostConfig {
    pub fn new(me: u32, processes: u32, timing: Timing) -> HostConfig {
        HostConfig {
            me,
            processes,
            timing,
            message_bytes_max: 1 << 20,
            outgoing_max: 256,
            pending_max: 256,
            queue_max: 4096,
            slots_max: 1,
            seed: me as u64,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    pub submitted: u64,
    pub completed: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Rejects by cause: from the receiver (its slots busy past the hold); from a switch (no
    /// free virtual link); every slot of this host busy when the rsvp came; the rsvp too late
    /// to finish by the deadline; refused at submission.
    pub rejected_receiver_busy: u64,
    pub rejected_blocked: u64,
    pub rejected_sender_busy: u64,
    pub rejected_too_late: u64,
    pub rejected_unbounded: u64,
    /// Completions posted by the sender's own deadline (no answer by delta).
    pub timed_out: u64,
    pub data_sent: u64,
    pub data_received: u64,
    pub delivered: u64,
    pub rsvps_sent: u64,
    pub failures_sent: u64,
    /// Frames that were not cosy's, or malformed.
    pub malformed: u64,
    /// Frames for no message this host knows (late, duplicated, or forged).
    pub stray: u64,
    /// Deliveries dropped because the application did not take them.
    pub deliveries_dropped: u64,
}

/// Why a submission was refused outright (the application's mistake, not load).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("process {dst} is not one of the {processes} processes")]
    NoSuchProcess { dst: u32, processes: u32 },
    #[error("a host does not send cosy messages to itself")]
    ToSelf,
    #[error("{0} completions wait for the application: take them first")]
    CompletionsFull(usize),
}

/// Frames a host has to send, in priority order.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    failures: VecDeque<Vec<u8>>,
    control: VecDeque<Vec<u8>>,
}

impl Outbox {
    pub(crate) fn push(&mut self, repr: &Repr) {
        let mut frame = vec![0; HEADER_LEN];
        repr.emit(&mut frame).expect("a header's room");
        match repr.class() {
            onepipe_wire::cosy::class::FAILURE => self.failures.push_back(frame),
            _ => self.control.push_back(frame),
        }
    }

    fn pop(&mut self) -> Option<Vec<u8>> {
        self.failures.pop_front().or_else(|| self.control.pop_front())
    }

    fn is_empty(&self) -> bool {
        self.failures.is_empty() && self.control.is_empty()
    }
}

pub struct CosyHost {
    config: HostConfig,
    sender: Sender,
    receiver: Receiver,
    outbox: Outbox,
    counters: HostCounters,
}

impl CosyHost {
    pub fn new(config: HostConfig) -> Result<CosyHost, TimingError> {
        config.timing.validate()?;
        Ok(CosyHost {
            sender: Sender::new(&config),
            receiver: Receiver::new(&config),
            outbox: Outbox::default(),
            counters: HostCounters::default(),
            config,
        })
    }

    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    pub fn counters(&self) -> HostCounters {
        let mut c = self.counters;
        self.sender.add_counters(&mut c);
        self.receiver.add_counters(&mut c);
        c
    }

    /// Submits `message` for `dst` at `now`: its bound, and the time its completion is posted
    /// by at the latest. A message cosy cannot bound (too large, too many in flight) is
    /// rejected at once: its completion is already posted.
    pub fn submit(&mut self, now: Instant, dst: u32, message: Vec<u8>) -> Result<Submitted, SubmitError> {
        if dst >= self.config.processes {
            return Err(SubmitError::NoSuchProcess {
                dst,
                processes: self.config.processes,
            });
        }
        if dst == self.config.me {
            return Err(SubmitError::ToSelf);
        }
        if self.sender.completions_waiting() >= self.config.queue_max {
            return Err(SubmitError::CompletionsFull(self.config.queue_max));
        }
        Ok(self.sender.submit(now, dst, message, &mut self.outbox))
    }

    /// The next completion, in the order they were posted.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.sender.poll_completion()
    }

    /// The next message received whole.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        self.receiver.poll_delivery()
    }

    /// Messages submitted and not completed yet.
    pub fn in_flight(&self) -> usize {
        self.sender.in_flight()
    }

    pub fn invariants(&self) {
        self.sender.invariants();
        self.receiver.invariants();
    }

    fn handle(&mut self, now: Instant, frame: &[u8]) {
        let Ok((repr, payload)) = Repr::parse(frame) else {
            self.counters.malformed += 1;
            return;
        };
        let me = self.config.me;
        if repr.sender == me && repr.receiver != me {
            self.sender.handle(now, &repr, &mut self.outbox);
        } else if repr.receiver == me && repr.sender != me {
            self.receiver.handle(now, &repr, payload, &mut self.outbox);
        } else {
            self.counters.stray += 1;
        }
    }
}

impl Node for CosyHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }

    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.handle(now, frame);
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        if let Some(frame) = self.outbox.pop() {
            buf[..frame.len()].copy_from_slice(&frame);
            return Some(frame.len());
        }
        self.sender.poll_data(now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.sender.poll_timeout(), self.receiver.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.sender.handle_timeout(now, &mut self.outbox);
        self.receiver.handle_timeout(now, &mut self.outbox);
    }
}

impl Hints for CosyHost {
    fn wants_transmit(&self) -> bool {
        !self.outbox.is_empty() || self.sender.has_data_ready()
    }

    fn priority(&self, frame: &[u8]) -> u8 {
        onepipe_wire::cosy::class_of(frame)
    }
}
