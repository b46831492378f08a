//! The client agent (paper 4.1 and 6): turns calls into queries, writes the key's chain into each
//! (from its copy of the controller's ring), waits for the answer, and retries on timeout. A
//! retried write is a new operation (paper 4.1: "every retried write is treated as a new
//! operation"), so every attempt is reported on its own ([`Attempt`], for client histories) and
//! the call's [`Completion`] carries the first answer, or `Unknown` once every attempt timed out.
//!
//! Sans-IO, like a quinn-proto connection: `submit` (application), `handle_frame` and
//! `handle_timeout` (network and timer input, with `now`), `poll_transmit`, `poll_timeout`,
//! `poll_completion` and `poll_attempt` (output).

use crate::key::Key;
use crate::ring::Ring;
use onepipe_wire::netchain::{Chain, Opcode, Query, Repr, Status, VALUE_BYTES_MAX, flags};
use onepipe_wire::{Duration, Instant};
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// This process: answers come back to it.
    pub process: u32,
    /// The controller's process, which installs inserted keys.
    pub controller: u32,
    /// How long an attempt waits for its answer.
    pub timeout: Duration,
    /// Attempts per call before it completes as `Unknown`.
    pub attempts_max: u32,
    /// Calls in progress at once.
    pub outstanding_max: usize,
    /// The request id of the first attempt; the agent counts up from it. The head drops a
    /// write whose request it has seen (a network duplicate), so a new incarnation of a process
    /// must start above the last one's: runtimes set it from the clock.
    pub first_request: u64,
}

impl AgentConfig {
    pub fn new(process: u32, controller: u32) -> AgentConfig {
        AgentConfig {
            process,
            controller,
            timeout: Duration::from_millis(20),
            attempts_max: 3,
            outstanding_max: 4096,
            first_request: 1,
        }
    }
}

/// What an application asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Read(Key),
    /// Overwrites an installed key.
    Write(Key, Vec<u8>),
    /// Installs the key through the controller if needed, then writes it.
    Insert(Key, Vec<u8>),
    /// Installs the key through the controller (absent if it was not there); writes nothing.
    Install(Key),
    /// Deletes; completes `CasFailed(None)` if the key was absent already.
    Delete(Key),
    /// Swaps in `new` (`None`: deletes) if the value is `expect` (`None`: absent).
    Cas {
        key: Key,
        expect: Option<Vec<u8>>,
        new: Option<Vec<u8>>,
    },
}

impl Call {
    pub fn key(&self) -> &Key {
        match self {
            Call::Read(k) | Call::Write(k, _) | Call::Insert(k, _) | Call::Install(k) | Call::Delete(k) => k,
            Call::Cas { key, .. } => key,
        }
    }

    fn opcode(&self) -> Opcode {
        match self {
            Call::Read(_) => Opcode::Read,
            Call::Write(..) | Call::Insert(..) => Opcode::Write,
            Call::Install(_) => Opcode::Insert,
            Call::Delete(_) => Opcode::Delete,
            Call::Cas { .. } => Opcode::Cas,
        }
    }
}

/// Why the store refused a call: nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("key not installed (insert it first)")]
    UnknownKey,
    #[error("value larger than a switch's slot")]
    ValueTooLarge,
    #[error("no room for the key in a switch's index table")]
    TableFull,
}

/// How a call or an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done; a read's value (`None`: absent), nothing for the others.
    Ok(Option<Vec<u8>>),
    /// A compare-and-swap found this value instead (and changed nothing).
    CasFailed(Option<Vec<u8>>),
    /// Refused; definitely not done.
    Refused(Refusal),
    /// No answer in time: it may or may not have taken effect.
    Unknown,
}

/// A call, numbered by the agent.
pub type CallId = u64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub call: CallId,
    pub outcome: Outcome,
    pub submitted_at: Instant,
    pub completed_at: Instant,
}

/// One query sent for a call and what became of it (an operation of the client history).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub call: CallId,
    pub request: u64,
    pub sent_at: Instant,
    pub returned_at: Instant,
    pub outcome: Outcome,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("value of {0} bytes, more than the wire's {VALUE_BYTES_MAX}")]
    ValueTooLarge(usize),
    #[error("{0} calls in progress already")]
    TooManyCalls(usize),
}

/// Frames that reached the agent and were not answers it waits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentCounters {
    pub malformed: u64,
    /// Answers to attempts that had timed out, or duplicates.
    pub late: u64,
    pub retries: u64,
}

struct InProgress {
    call: Call,
    submitted_at: Instant,
    attempts: u32,
    /// The request of the attempt in flight and when it left.
    request: u64,
    sent_at: Instant,
    /// An insert whose key the controller has installed: its write is next.
    installed: bool,
}

pub struct Agent {
    config: AgentConfig,
    ring: Ring,
    next_call: CallId,
    next_request: u64,
    calls: HashMap<CallId, InProgress>,
    /// Request of an attempt in flight -> its call.
    requests: HashMap<u64, CallId>,
    /// Attempts to send, by call.
    to_send: VecDeque<CallId>,
    /// (deadline, request), in the order sent: every attempt waits the same timeout.
    deadlines: VecDeque<(Instant, u64)>,
    completions: VecDeque<Completion>,
    attempts: VecDeque<Attempt>,
    counters: AgentCounters,
}

impl Agent {
    pub fn new(config: AgentConfig, ring: Ring) -> Agent {
        assert!(config.attempts_max >= 1 && config.outstanding_max >= 1);
        Agent {
            next_request: config.first_request,
            config,
            ring,
            next_call: 0,
            calls: HashMap::new(),
            requests: HashMap::new(),
            to_send: VecDeque::new(),
            deadlines: VecDeque::new(),
            completions: VecDeque::new(),
            attempts: VecDeque::new(),
            counters: AgentCounters::default(),
        }
    }

    pub fn counters(&self) -> &AgentCounters {
        &self.counters
    }

    pub fn in_progress(&self) -> usize {
        self.calls.len()
    }

    /// The controller's newer ring (after a recovery).
    pub fn set_ring(&mut self, ring: Ring) {
        self.ring = ring;
    }

    pub fn submit(&mut self, now: Instant, call: Call) -> Result<CallId, SubmitError> {
        let value_len = match &call {
            Call::Write(_, v) | Call::Insert(_, v) => v.len(),
            Call::Cas { expect, new, .. } => expect
                .as_ref()
                .map_or(0, Vec::len)
                .max(new.as_ref().map_or(0, Vec::len)),
            Call::Read(_) | Call::Delete(_) | Call::Install(_) => 0,
        };
        if value_len > VALUE_BYTES_MAX {
            return Err(SubmitError::ValueTooLarge(value_len));
        }
        if self.calls.len() >= self.config.outstanding_max {
            return Err(SubmitError::TooManyCalls(self.calls.len()));
        }
        let id = self.next_call;
        self.next_call += 1;
        self.calls.insert(
            id,
            InProgress {
                call,
                submitted_at: now,
                attempts: 0,
                request: 0,
                sent_at: now,
                installed: false,
            },
        );
        self.to_send.push_back(id);
        Ok(id)
    }

    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let id = self.to_send.pop_front()?;
        let request = self.next_request;
        self.next_request += 1;
        let in_progress = self.calls.get_mut(&id).expect("queued calls are in progress");
        in_progress.attempts += 1;
        in_progress.request = request;
        in_progress.sent_at = now;
        self.requests.insert(request, id);
        self.deadlines.push_back((now + self.config.timeout, request));
        let len = self.emit(id, request, buf);
        self.invariants();
        Some(len)
    }

    fn emit(&self, id: CallId, request: u64, buf: &mut [u8]) -> usize {
        let c = &self.calls[&id];
        let key = *c.call.key();
        let group = self.ring.group_of(&key);
        let chain = self.ring.chain(group).expect("the ring's own group");
        let (opcode, chain, value, expect): (_, Chain, Option<&[u8]>, Option<&[u8]>) = match &c.call {
            Call::Insert(..) | Call::Install(_) if !c.installed => {
                (Opcode::Insert, Chain::default(), None, None)
            }
            Call::Install(_) => unreachable!("an installed Install is complete"),
            Call::Read(_) => (Opcode::Read, chain.reversed(), None, None),
            Call::Write(_, v) | Call::Insert(_, v) => (Opcode::Write, chain, Some(v), None),
            Call::Delete(_) => (Opcode::Delete, chain, None, None),
            Call::Cas { expect, new, .. } => (Opcode::Cas, chain, new.as_deref(), expect.as_deref()),
        };
        let q = Query {
            opcode,
            flags: 0,
            status: Status::Ok,
            sc: chain.len() as u8,
            process: self.config.process,
            request,
            chain,
            group,
            version: 0,
            key: key.0,
            value,
            expect,
        };
        Repr::Query(q).emit(buf).expect("a frame buffer holds a query")
    }

    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        let q = match Repr::parse(frame) {
            Ok(Repr::Query(q)) if q.flags & flags::REPLY != 0 && q.process == self.config.process => q,
            _ => {
                self.counters.malformed += 1;
                return;
            }
        };
        let Some(id) = self.requests.remove(&q.request) else {
            self.counters.late += 1;
            return;
        };
        let c = self
            .calls
            .get_mut(&id)
            .expect("requests map to calls in progress");
        if q.opcode == Opcode::Insert {
            // The controller installed the key (or could not): the write comes next.
            if q.status == Status::Ok && matches!(c.call, Call::Install(_)) {
                self.finish_attempt(now, id, q.request, Outcome::Ok(None));
            } else if q.status == Status::Ok {
                c.installed = true;
                self.to_send.push_back(id);
            } else {
                self.finish_attempt(now, id, q.request, Outcome::Refused(refusal(q.status)));
            }
            return;
        }
        let outcome = match q.status {
            Status::Ok if c.call.opcode() == Opcode::Read => Outcome::Ok(q.value.map(<[u8]>::to_vec)),
            Status::Ok => Outcome::Ok(None),
            Status::CasFailed => Outcome::CasFailed(q.value.map(<[u8]>::to_vec)),
            // A read of a key no switch holds finds it absent.
            Status::UnknownKey if c.call.opcode() == Opcode::Read => Outcome::Ok(None),
            s => Outcome::Refused(refusal(s)),
        };
        self.finish_attempt(now, id, q.request, outcome);
        self.invariants();
    }

    /// Records the attempt, and completes its call.
    fn finish_attempt(&mut self, now: Instant, id: CallId, request: u64, outcome: Outcome) {
        let c = self.calls.remove(&id).expect("in progress");
        self.attempts.push_back(Attempt {
            call: id,
            request,
            sent_at: c.sent_at,
            returned_at: now,
            outcome: outcome.clone(),
        });
        self.completions.push_back(Completion {
            call: id,
            outcome,
            submitted_at: c.submitted_at,
            completed_at: now,
        });
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.front().map(|&(t, _)| t)
    }

    /// Attempts past their deadline are unknown; their calls try again, or complete as
    /// `Unknown` after `attempts_max`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(deadline, request)) = self.deadlines.front() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_front();
            let Some(id) = self.requests.remove(&request) else {
                continue; // answered in time
            };
            let c = self.calls.get_mut(&id).expect("in progress");
            if c.attempts < self.config.attempts_max {
                self.attempts.push_back(Attempt {
                    call: id,
                    request,
                    sent_at: c.sent_at,
                    returned_at: now,
                    outcome: Outcome::Unknown,
                });
                self.counters.retries += 1;
                self.to_send.push_back(id);
            } else {
                self.finish_attempt(now, id, request, Outcome::Unknown);
            }
        }
        self.invariants();
    }

    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    pub fn poll_attempt(&mut self) -> Option<Attempt> {
        self.attempts.pop_front()
    }

    pub fn wants_transmit(&self) -> bool {
        !self.to_send.is_empty()
    }

    fn invariants(&self) {
        assert!(self.calls.len() <= self.config.outstanding_max);
        assert!(self.requests.len() <= self.calls.len());
        assert!(self.requests.len() <= self.deadlines.len());
        assert!(self.to_send.len() <= self.calls.len());
    }
}

fn refusal(status: Status) -> Refusal {
    match status {
        Status::ValueTooLarge => Refusal::ValueTooLarge,
        Status::TableFull => Refusal::TableFull,
        _ => Refusal::UnknownKey,
    }
}

#[cfg(test)]
mod tests;
