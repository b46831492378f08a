//! The proposer (thesis 5.2 `submit`, 6.x failover): sends a value to the coordinator, retries
//! it after a timeout, and after `failover_after` retries of one request without an answer turns
//! to the next coordinator (the backup software coordinator), which takes over on the first
//! request it sees.
//!
//! A request is `(client, request)`, both the caller's, carried back in the replica's REPLY.
//! A retried request may be decided twice (its first copy was decided but the answer lost); the
//! replicas answer the second from their client sessions without executing it again.

use onepipe_wire::paxos::{Addr, Message, MsgType, VALUE_BYTES_MAX};
use onepipe_wire::{Duration, Instant};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposerConfig {
    pub me: Addr,
    /// The coordinator first, then its backups, in the order they are tried.
    pub coordinators: Vec<Addr>,
    pub retry_timeout: Duration,
    /// Retries of one request at one coordinator before turning to the next.
    pub failover_after: u32,
    /// Sends of one request before it completes as [`Completion::GaveUp`].
    pub tries_max: u32,
    pub pending_max: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProposerCounters {
    pub submitted: u64,
    pub retries: u64,
    pub failovers: u64,
    pub replied: u64,
    pub gave_up: u64,
    /// Replies to requests not pending (answered already, or not ours).
    pub stray_replies: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("too many requests pending")]
    Full,
    #[error("request already pending")]
    Duplicate,
    #[error("value empty (the no-op) or longer than the wire's {VALUE_BYTES_MAX} bytes")]
    BadValue,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A replica applied it as instance `inst` and answered `reply`.
    Replied {
        client: u64,
        request: u64,
        inst: u64,
        reply: Vec<u8>,
    },
    /// No answer after `tries_max` sends: it may or may not have been decided.
    GaveUp { client: u64, request: u64 },
}

impl Completion {
    /// `(client, request, reply)`; no reply when it gave up.
    pub fn into_parts(self) -> (u64, u64, Option<Vec<u8>>) {
        match self {
            Completion::Replied {
                client,
                request,
                reply,
                ..
            } => (client, request, Some(reply)),
            Completion::GaveUp { client, request } => (client, request, None),
        }
    }
}

/// A client's id: its host process in the high half, a slot of that host in the low half. The
/// replicas key their client sessions by it and answer the process it names.
pub fn client_id(process: u32, slot: u32) -> u64 {
    u64::from(process) << 32 | u64::from(slot)
}

/// The process of a client id.
pub fn client_process(client: u64) -> u32 {
    (client >> 32) as u32
}

/// The slot of a client id within its process.
pub fn client_slot(client: u64) -> u32 {
    client as u32
}

struct Pending {
    pid: u16,
    value: Vec<u8>,
    deadline: Instant,
    tries: u32,
    /// Sends to the current coordinator.
    tries_here: u32,
}

pub struct Proposer {
    config: ProposerConfig,
    /// Index of the coordinator requests go to.
    target: usize,
    pending: HashMap<(u64, u64), Pending>,
    counters: ProposerCounters,
}

impl Proposer {
    pub fn new(config: ProposerConfig) -> Proposer {
        assert!(!config.coordinators.is_empty() && config.failover_after >= 1 && config.tries_max >= 1);
        Proposer {
            config,
            target: 0,
            pending: HashMap::new(),
            counters: ProposerCounters::default(),
        }
    }

    pub fn counters(&self) -> &ProposerCounters {
        &self.counters
    }
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
    /// The coordinator requests go to now.
    pub fn coordinator(&self) -> Addr {
        self.config.coordinators[self.target]
    }

    pub fn submit(
        &mut self,
        now: Instant,
        pid: u16,
        client: u64,
        request: u64,
        value: &[u8],
        out: &mut dyn FnMut(&Message<'_>),
    ) -> Result<(), SubmitError> {
        if value.is_empty() || value.len() > VALUE_BYTES_MAX {
            return Err(SubmitError::BadValue);
        }
        if self.pending.contains_key(&(client, request)) {
            return Err(SubmitError::Duplicate);
        }
        if self.pending.len() >= self.config.pending_max {
            return Err(SubmitError::Full);
        }
        self.counters.submitted += 1;
        let p = Pending {
            pid,
            value: value.to_vec(),
            deadline: now + self.config.retry_timeout,
            tries: 1,
            tries_here: 1,
        };
        self.send(client, request, &p, out);
        self.pending.insert((client, request), p);
        Ok(())
    }

    fn send(&self, client: u64, request: u64, p: &Pending, out: &mut dyn FnMut(&Message<'_>)) {
        out(&Message {
            a: request,
            b: client,
            value: &p.value,
            ..Message::new(MsgType::Request, p.pid, self.config.me, self.coordinator())
        });
    }

    /// A REPLY: completes its request (the first reply; the other replicas' are strays).
    pub fn handle(&mut self, msg: &Message<'_>) -> Option<Completion> {
        if msg.msgtype != MsgType::Reply {
            return None;
        }
        let (client, request) = (msg.b, msg.a);
        if self.pending.remove(&(client, request)).is_none() {
            self.counters.stray_replies += 1;
            return None;
        }
        self.counters.replied += 1;
        Some(Completion::Replied {
            client,
            request,
            inst: msg.inst,
            reply: msg.value.to_vec(),
        })
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// Retries what timed out; completes what ran out of tries.
    pub fn handle_timeout(
        &mut self,
        now: Instant,
        out: &mut dyn FnMut(&Message<'_>),
        done: &mut Vec<Completion>,
    ) {
        let mut expired: Vec<(u64, u64)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&k, _)| k)
            .collect();
        // In a fixed order, not the map's: a seeded simulation replays its retries exactly.
        expired.sort_unstable();
        for (client, request) in expired {
            let tries_max = self.config.tries_max;
            let p = self.pending.get_mut(&(client, request)).expect("listed");
            if p.tries >= tries_max {
                self.pending.remove(&(client, request));
                self.counters.gave_up += 1;
                done.push(Completion::GaveUp { client, request });
                continue;
            }
            if p.tries_here > self.config.failover_after && self.config.coordinators.len() > 1 {
                self.target = (self.target + 1) % self.config.coordinators.len();
                self.counters.failovers += 1;
                for q in self.pending.values_mut() {
                    q.tries_here = 0;
                }
            }
            let p = self.pending.get_mut(&(client, request)).expect("listed");
            p.tries += 1;
            p.tries_here += 1;
            p.deadline = now + self.config.retry_timeout;
            self.counters.retries += 1;
            let p = &self.pending[&(client, request)];
            self.send(client, request, p, out);
        }
    }
}
