//! The hosts of a Paxos run: client hosts (a proposer and its closed-loop clients, each call
//! recorded for the history) and replicas (a learner applying the agreed log to the durable
//! key-value store and answering the clients).

use hdrhistogram::Histogram;
use onepipe_check::{HistoryRecord, OpKind, Outcome};
use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_kv::replicated::{Envelope, decode_reply, partition_of};
use onepipe_kv::{Bytes, Command, Reply, SetCondition};
use onepipe_paxos::{Completion, Proposer, client_id, client_slot};
use onepipe_wire::Instant;
use onepipe_wire::paxos::Message;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Latencies up to a minute, in nanoseconds.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// What the run and its nodes share.
#[derive(Debug)]
pub struct Shared {
    /// Clients submit calls from this time (ns) until `end_ns`.
    pub start_ns: AtomicU64,
    pub end_ns: AtomicU64,
    /// Calls completed in the measured window, for the progress bar.
    pub completed: AtomicU64,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            start_ns: AtomicU64::new(u64::MAX),
            end_ns: AtomicU64::new(u64::MAX),
            completed: AtomicU64::new(0),
        }
    }
}

impl Shared {
    fn measuring(&self, now: Instant) -> bool {
        let t = now.as_nanos();
        t >= self.start_ns.load(Ordering::Acquire) && t < self.end_ns.load(Ordering::Acquire)
    }
}

/// The workload's knobs.
#[derive(Clone, Debug)]
pub struct Workload {
    pub keys: usize,
    pub write_ratio: f64,
    pub value_bytes: usize,
    pub partitions: u16,
    /// Calls recorded per client host, at most (bounds memory on long runs).
    pub record_max: usize,
}

/// A client's call in flight.
struct Call {
    request: u64,
    write: bool,
    key: String,
    value: Option<String>,
    call_ns: u64,
}

/// A client process: a proposer and its closed-loop clients, one call outstanding each.
pub struct ClientHost {
    pub proposer: Proposer,
    me: u32,
    /// Per client: its next request id and the call outstanding.
    clients: Vec<(u64, Option<Call>)>,
    rng: SplitMix,
    workload: Workload,
    shared: Arc<Shared>,
    queue: VecDeque<Vec<u8>>,
    pub history: Vec<HistoryRecord>,
    pub unrecorded: u64,
    pub latency_ns: Histogram<u64>,
    /// Calls that completed in the measured window: answered, and given up.
    pub ok: u64,
    pub unknown: u64,
    /// Answers that did not decode, or that were errors.
    pub bad_replies: u64,
}

impl ClientHost {
    pub fn new(
        proposer: Proposer,
        me: u32,
        clients: usize,
        seed: u64,
        workload: Workload,
        shared: Arc<Shared>,
    ) -> Self {
        ClientHost {
            proposer,
            me,
            clients: (0..clients).map(|_| (1, None)).collect(),
            rng: SplitMix::new(seed),
            workload,
            shared,
            queue: VecDeque::new(),
            history: Vec::new(),
            unrecorded: 0,
            latency_ns: Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid bounds"),
            ok: 0,
            unknown: 0,
            bad_replies: 0,
        }
    }

    /// Every idle client makes its next call: a SET of a unique value or a GET, of a key drawn
    /// uniformly.
    fn submit(&mut self, now: Instant) {
        if !self.shared.measuring(now) {
            return;
        }
        for i in 0..self.clients.len() {
            if self.clients[i].1.is_some() {
                continue;
            }
            let request = self.clients[i].0;
            let client = client_id(self.me, i as u32);
            let key = format!("key:{:06}", self.rng.next_u64() % self.workload.keys as u64);
            let write = self.rng.chance(self.workload.write_ratio);
            let value = write.then(|| {
                let mut v = format!("c{client}r{request}");
                v.extend(std::iter::repeat_n(
                    '.',
                    self.workload.value_bytes.saturating_sub(v.len()),
                ));
                v
            });
            let command = match &value {
                Some(v) => Command::Set {
                    key: Bytes::from(key.clone()),
                    value: Bytes::from(v.clone()),
                    condition: SetCondition::Always,
                },
                None => Command::Get {
                    key: Bytes::from(key.clone()),
                },
            };
            let pid = partition_of(key.as_bytes(), self.workload.partitions);
            let mut bytes = Vec::new();
            Envelope {
                client,
                request,
                command,
            }
            .encode(&mut bytes);
            let queue = &mut self.queue;
            let sent = self.proposer.submit(now, pid, client, request, &bytes, &mut |m| {
                queue.push_back(m.to_vec())
            });
            if sent.is_err() {
                return; // the proposer is full: the client waits
            }
            self.clients[i] = (
                request + 1,
                Some(Call {
                    request,
                    write,
                    key,
                    value,
                    call_ns: now.as_nanos(),
                }),
            );
        }
    }

    fn complete(&mut self, now: Instant, c: Completion) {
        let (client, request, reply) = c.into_parts();
        let index = client_slot(client) as usize;
        let Some((_, slot)) = self.clients.get_mut(index) else {
            return;
        };
        if slot.as_ref().is_none_or(|call| call.request != request) {
            return;
        }
        let call = slot.take().expect("checked");
        let (outcome, read) = match reply.map(|r| decode_reply(&r)) {
            None => (Outcome::Unknown, None),
            Some(Ok(Ok(Reply::Bulk(v)))) => (Outcome::Ok, Some(String::from_utf8_lossy(&v).into_owned())),
            Some(Ok(Ok(_))) => (Outcome::Ok, None),
            Some(_) => {
                self.bad_replies += 1;
                (Outcome::Unknown, None)
            }
        };
        if self.shared.measuring(Instant::from_nanos(call.call_ns)) {
            match outcome {
                Outcome::Ok => self.ok += 1,
                _ => self.unknown += 1,
            }
            let ns = now.as_nanos().saturating_sub(call.call_ns).max(1);
            self.latency_ns.saturating_record(ns);
            self.shared.completed.fetch_add(1, Ordering::Relaxed);
        }
        if self.history.len() >= self.workload.record_max {
            self.unrecorded += 1;
            return;
        }
        self.history.push(HistoryRecord {
            client,
            op: if call.write { OpKind::Write } else { OpKind::Read },
            key: call.key,
            value: if call.write { call.value } else { read },
            expect: None,
            outcome,
            call_ns: call.call_ns,
            return_ns: now.as_nanos(),
            txn: None,
            ts: None,
        });
    }
}

impl Node for ClientHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        if let Ok(m) = Message::parse(frame)
            && let Some(c) = self.proposer.handle(&m)
        {
            self.complete(now, c);
        }
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        self.submit(now);
        let frame = self.queue.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        // Idle clients start in `poll_transmit`, which the runtime keeps asking (no `Hints`).
        self.proposer.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        let mut done = Vec::new();
        let queue = &mut self.queue;
        self.proposer
            .handle_timeout(now, &mut |m| queue.push_back(m.to_vec()), &mut done);
        for c in done {
            self.complete(now, c);
        }
        self.submit(now);
    }
}

impl Hints for ClientHost {}
