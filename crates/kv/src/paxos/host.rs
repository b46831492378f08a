//! The fabric node behind a [`PaxosStore`](super::PaxosStore): a proposer taking the batches of
//! its [`Mailbox`] one command at a time per batch, each command in a client slot of its own.

use super::{Mailbox, Results};
use crate::replicated::{Envelope, decode_reply, partition_of_command};
use crate::{Command, StoreError};
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_paxos::{Completion, Proposer, client_id, client_process, client_slot};
use onepipe_wire::Instant;
use onepipe_wire::paxos::Message;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::Sender;

/// Frames the host holds for its port; beyond it a request is dropped and its retry resends it.
const QUEUE_FRAMES_MAX: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceConfig {
    /// The process of the deployment the host runs as (the high half of its client ids).
    pub process: u32,
    /// The deployment's partitions.
    pub partitions: u16,
    /// Client slots: commands in flight at once. Each is a replica session, so all the service
    /// hosts of a deployment together should stay under the replicas' `sessions_max`.
    pub slots: u32,
    /// The first request id of every slot: above any an earlier run as this process used
    /// (the wall clock in ns at start does), or the replicas refuse the requests as stale.
    pub first_request: u64,
    /// The longest value the acceptors hold: a longer envelope is refused, not proposed.
    pub log_value_bytes_max: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceCounters {
    pub batches: u64,
    pub proposed: u64,
    pub replied: u64,
    pub gave_up: u64,
    /// Commands answered without proposing (CROSSSLOT, too long).
    pub refused: u64,
    /// Replies that did not decode.
    pub bad_replies: u64,
    pub queue_full: u64,
}

struct Batch {
    commands: Vec<Command>,
    results: Results,
    reply: Sender<Results>,
}

struct Slot {
    next_request: u64,
    /// The batch whose command the slot carries, if any.
    batch: Option<u64>,
}

/// A process of the Paxos fabric serving a [`PaxosStore`](super::PaxosStore)'s batches.
pub struct ServiceHost {
    proposer: Proposer,
    mailbox: Arc<Mailbox>,
    config: ServiceConfig,
    batches: HashMap<u64, Batch>,
    next_batch: u64,
    /// Batches whose next command waits for a slot (or for the proposer's room), oldest first.
    ready: VecDeque<u64>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    queue: VecDeque<Vec<u8>>,
    counters: ServiceCounters,
}

impl ServiceHost {
    pub fn new(proposer: Proposer, mailbox: Arc<Mailbox>, config: ServiceConfig) -> ServiceHost {
        assert!(config.slots >= 1 && config.partitions >= 1);
        ServiceHost {
            proposer,
            mailbox,
            config,
            batches: HashMap::new(),
            next_batch: 0,
            ready: VecDeque::new(),
            slots: (0..config.slots)
                .map(|_| Slot {
                    next_request: config.first_request,
                    batch: None,
                })
                .collect(),
            // Popped from the back: slot 0 first.
            free: (0..config.slots).rev().collect(),
            queue: VecDeque::new(),
            counters: ServiceCounters::default(),
        }
    }

    pub fn proposer(&self) -> &Proposer {
        &self.proposer
    }
    pub fn counters(&self) -> &ServiceCounters {
        &self.counters
    }

    /// Batches in progress (taken from the mailbox, not all answered).
    pub fn batches_in_progress(&self) -> usize {
        self.batches.len()
    }

    /// Checks what must hold between steps.
    pub fn invariants(&self) {
        let busy = self.slots.iter().filter(|s| s.batch.is_some()).count();
        assert_eq!(busy + self.free.len(), self.slots.len(), "a slot is free or busy");
        assert!(
            self.proposer.pending() <= busy,
            "every pending request holds a slot"
        );
        for s in &self.slots {
            if let Some(b) = s.batch {
                assert!(
                    self.batches.contains_key(&b),
                    "a busy slot's batch is in progress"
                );
            }
        }
        for b in &self.ready {
            assert!(self.batches.contains_key(b));
        }
    }

    fn take_requests(&mut self) {
        for (commands, reply) in self.mailbox.drain() {
            let id = self.next_batch;
            self.next_batch += 1;
            self.counters.batches += 1;
            let batch = Batch {
                results: Vec::with_capacity(commands.len()),
                commands,
                reply,
            };
            self.batches.insert(id, batch);
            self.ready.push_back(id);
        }
    }

    /// Proposes the next command of every ready batch that can get a slot.
    fn advance(&mut self, now: Instant) {
        while let Some(&id) = self.ready.front() {
            match self.step_batch(now, id) {
                Step::Waiting => {
                    self.ready.pop_front();
                }
                Step::Finished => {
                    self.ready.pop_front();
                    self.finish(id);
                }
                Step::Blocked => return,
            }
        }
    }

    /// Answers the batch's commands that need no proposing, then proposes the next one.
    fn step_batch(&mut self, now: Instant, id: u64) -> Step {
        loop {
            let batch = self.batches.get_mut(&id).expect("ready batches are in progress");
            let Some(command) = batch.commands.get(batch.results.len()) else {
                return Step::Finished;
            };
            let pid = match partition_of_command(command, self.config.partitions) {
                Ok(pid) => pid,
                Err(e) => {
                    self.counters.refused += 1;
                    batch.results.push(Err(e));
                    continue;
                }
            };
            let Some(slot) = self.free.pop() else {
                return Step::Blocked;
            };
            let client = client_id(self.config.process, slot);
            let request = self.slots[slot as usize].next_request;
            let mut value = Vec::new();
            Envelope {
                client,
                request,
                command: command.clone(),
            }
            .encode(&mut value);
            if value.len() > self.config.log_value_bytes_max {
                self.free.push(slot);
                self.counters.refused += 1;
                batch.results.push(Err(StoreError::ValueTooLarge {
                    len_bytes: value.len(),
                    max_bytes: self.config.log_value_bytes_max,
                }));
                continue;
            }
            let (queue, counters) = (&mut self.queue, &mut self.counters);
            let sent = self.proposer.submit(now, pid, client, request, &value, &mut |m| {
                push(queue, counters, m)
            });
            if sent.is_err() {
                // The proposer is full: the batch waits for a request to end.
                self.free.push(slot);
                return Step::Blocked;
            }
            self.counters.proposed += 1;
            let s = &mut self.slots[slot as usize];
            s.next_request += 1;
            s.batch = Some(id);
            return Step::Waiting;
        }
    }

    fn complete(&mut self, c: Completion) {
        let (client, request, reply) = c.into_parts();
        let slot = client_slot(client) as usize;
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        // The proposer completes only what it has pending, and a slot has one request pending.
        assert_eq!(client_process(client), self.config.process);
        assert_eq!(
            s.next_request,
            request + 1,
            "a slot's completion is of its last request"
        );
        let id = s.batch.take().expect("a completed request's slot is busy");
        self.free.push(slot as u32);
        let batch = self
            .batches
            .get_mut(&id)
            .expect("a busy slot's batch is in progress");
        let command = &batch.commands[batch.results.len()];
        let read = matches!(
            command,
            Command::Get { .. } | Command::MGet { .. } | Command::DbSize
        );
        match reply {
            Some(bytes) => {
                self.counters.replied += 1;
                let result = decode_reply(&bytes).unwrap_or_else(|e| {
                    self.counters.bad_replies += 1;
                    Err(StoreError::Internal(format!(
                        "a replica's reply does not decode: {e}"
                    )))
                });
                batch.results.push(result);
            }
            None => {
                self.counters.gave_up += 1;
                let tries = "no replica answered after every try";
                batch.results.push(Err(if read {
                    StoreError::Unavailable(format!("{tries}; a read changes nothing"))
                } else {
                    StoreError::OutcomeUnknown(tries.into())
                }));
                // What follows in the pipeline is not proposed: it would be ordered against a
                // request whose place in the log (if any) is unknown.
                while batch.results.len() < batch.commands.len() {
                    batch.results.push(Err(StoreError::Unavailable(
                        "not proposed: an earlier command of this pipeline got no answer".into(),
                    )));
                }
            }
        }
        self.ready.push_back(id);
    }

    fn finish(&mut self, id: u64) {
        let batch = self
            .batches
            .remove(&id)
            .expect("finished batches are in progress");
        assert_eq!(batch.results.len(), batch.commands.len());
        // The connection may have stopped waiting: nothing to do then.
        let _ = batch.reply.send(batch.results);
    }
}

enum Step {
    /// A command of the batch is in flight.
    Waiting,
    /// Every command has its result.
    Finished,
    /// No slot, or no room in the proposer: try again when a request ends.
    Blocked,
}

fn push(queue: &mut VecDeque<Vec<u8>>, counters: &mut ServiceCounters, m: &Message<'_>) {
    if queue.len() >= QUEUE_FRAMES_MAX {
        counters.queue_full += 1;
    } else {
        queue.push_back(m.to_vec());
    }
}

impl Node for ServiceHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        let Ok(m) = Message::parse(frame) else { return };
        if let Some(c) = self.proposer.handle(&m) {
            self.complete(c);
            self.advance(now);
        }
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        self.take_requests();
        self.advance(now);
        let frame = self.queue.pop_front()?;
        if frame.len() > buf.len() {
            return None; // cannot happen: envelopes are within the log's value size
        }
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.proposer.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        let mut done = Vec::new();
        let (queue, counters) = (&mut self.queue, &mut self.counters);
        self.proposer
            .handle_timeout(now, &mut |m| push(queue, counters, m), &mut done);
        for c in done {
            self.complete(c);
        }
        self.advance(now);
    }
}

// The mailbox fills from other threads: the runtime keeps asking `poll_transmit` (the default).
impl Hints for ServiceHost {}
