//! A replica of one shard: executes the requests it is delivered at their position in 1Pipe's
//! total order (paper 2.2.3, 7.3.1), without locks.
//!
//! Writes come on the reliable service, in (timestamp, sender) order, and are executed when
//! delivered. Reads come on the best-effort service, which runs ahead of the reliable one: a
//! read at `t` waits until the commit barrier passes `t`, so that every write below it has been
//! delivered and executed, and is served before any write above it. A read that arrives below
//! a write already executed can no longer be served at its position: it is answered
//! [`Status::Late`] and the client retries it.
//!
//! The same server runs the non-transactional baseline ([`Ordering::Unordered`]): everything is
//! executed on arrival, on endpoints that do not order.

use std::collections::{HashMap, VecDeque};

use crate::codec::{FLAG_READ_ONLY, Message, Reply, Request, SnapshotChunk, SnapshotRequest, Status};
use crate::state::ShardState;
use crate::txn::OpResult;

/// How a server orders what it executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ordering {
    /// 1Pipe: at each request's position in the total order.
    OnePipe,
    /// The non-transactional baseline: on arrival.
    Unordered,
}

/// Which 1Pipe service delivered a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    BestEffort,
    Reliable,
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub shard: u16,
    pub replica: u16,
    pub ordering: Ordering,
    /// Write transactions remembered per client, to answer a retry without executing it again.
    pub remembered_per_client: usize,
}

impl ServerConfig {
    pub fn new(shard: u16, replica: u16, ordering: Ordering) -> ServerConfig {
        ServerConfig {
            shard,
            replica,
            ordering,
            remembered_per_client: 256,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerCounters {
    pub reads: u64,
    pub writes: u64,
    pub duplicates: u64,
    pub late_reads: u64,
    pub forgotten: u64,
    pub snapshots: u64,
    /// Messages that were not the store's, or not meant for a server: dropped.
    pub malformed: u64,
    /// Most reads waiting for the commit barrier at once.
    pub pending_reads_max: u64,
}

pub struct Server {
    config: ServerConfig,
    state: ShardState,
    /// Best-effort reads waiting for the commit barrier, in (timestamp, sender) order.
    pending: VecDeque<(u64, u32, Request)>,
    /// Position of the last write executed.
    applied: (u64, u32),
    /// Per client: the last write transactions executed and their replies.
    remembered: HashMap<u32, VecDeque<Reply>>,
    outbox: VecDeque<(u32, Vec<u8>)>,
    counters: ServerCounters,
}

impl Server {
    pub fn new(config: ServerConfig) -> Server {
        Server {
            config,
            state: ShardState::default(),
            pending: VecDeque::new(),
            applied: (0, 0),
            remembered: HashMap::new(),
            outbox: VecDeque::new(),
            counters: ServerCounters::default(),
        }
    }

    pub fn state(&self) -> &ShardState {
        &self.state
    }

    pub fn counters(&self) -> &ServerCounters {
        &self.counters
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// A message delivered by `service` at timestamp `ts` from process `src`.
    pub fn on_delivery(&mut self, service: Service, ts: u64, src: u32, payload: &[u8]) {
        if service == Service::Reliable && self.config.ordering == Ordering::OnePipe {
            // Reliable deliveries come in order and above the commit barrier's past: the reads
            // below this one go first.
            self.release_reads_below((ts, src));
        }
        match Message::decode(payload) {
            Ok(Message::Request(req)) => self.on_request(service, ts, src, req),
            // A snapshot's position must be one every write agrees on: the reliable service's.
            Ok(Message::SnapshotRequest(req))
                if service == Service::Reliable || self.config.ordering == Ordering::Unordered =>
            {
                self.on_snapshot(ts, src, &req)
            }
            Ok(Message::SnapshotRequest(_) | Message::Reply(_) | Message::SnapshotChunk(_)) | Err(_) => {
                self.counters.malformed += 1
            }
        }
    }

    fn on_request(&mut self, service: Service, ts: u64, src: u32, req: Request) {
        let read_only = req.flags & FLAG_READ_ONLY != 0;
        if read_only && req.ops.iter().any(|(_, op)| op.is_write()) {
            // A write executed as a read would change this replica outside the total order.
            self.counters.malformed += 1;
            return;
        }
        if self.config.ordering == Ordering::Unordered {
            return self.execute(ts, src, req, read_only);
        }
        match (service, read_only) {
            (Service::BestEffort, true) => {
                if (ts, src) < self.applied {
                    self.counters.late_reads += 1;
                    return self.reply(src, &req, Status::Late, ts, Vec::new());
                }
                self.pending.push_back((ts, src, req));
                self.counters.pending_reads_max =
                    self.counters.pending_reads_max.max(self.pending.len() as u64);
            }
            (Service::Reliable, _) => self.execute(ts, src, req, read_only),
            // A write must come on the reliable service to be ordered with the others.
            (Service::BestEffort, false) => self.counters.malformed += 1,
        }
    }

    /// The commit barrier reached `barrier`: every write below it has been delivered.
    pub fn on_commit_barrier(&mut self, barrier: u64) {
        if self.config.ordering == Ordering::OnePipe {
            self.release_reads_below((barrier, 0));
        }
    }

    fn release_reads_below(&mut self, position: (u64, u32)) {
        while let Some(&(ts, src, _)) = self.pending.front() {
            if (ts, src) >= position {
                break;
            }
            let (ts, src, req) = self.pending.pop_front().expect("front was just seen");
            self.execute(ts, src, req, true);
        }
    }

    fn execute(&mut self, ts: u64, src: u32, req: Request, read_only: bool) {
        if read_only {
            self.counters.reads += 1;
            let results = req.ops.iter().map(|(i, op)| (*i, self.state.apply(op))).collect();
            return self.reply(src, &req, Status::Applied, ts, results);
        }
        if let Some(reply) = self.remembered_reply(src, &req) {
            return self.send(src, Message::Reply(reply));
        }
        let results: Vec<(u16, OpResult)> =
            req.ops.iter().map(|(i, op)| (*i, self.state.apply(op))).collect();
        self.state.note_write(ts, src, req.txn);
        self.applied = self.applied.max((ts, src));
        self.counters.writes += 1;
        let reply = self.make_reply(&req, Status::Applied, ts, results);
        self.remember(src, reply.clone());
        self.send(src, Message::Reply(reply));
    }

    /// The answer to a retried write: the first execution's, or [`Status::Forgotten`].
    fn remembered_reply(&mut self, src: u32, req: &Request) -> Option<Reply> {
        let recent = self.remembered.get(&src);
        if let Some(first) = recent.and_then(|r| r.iter().find(|r| r.txn == req.txn)) {
            self.counters.duplicates += 1;
            let mut reply = first.clone();
            reply.status = Status::Duplicate;
            reply.attempt = req.attempt;
            return Some(reply);
        }
        let oldest = recent.and_then(|r| r.front()).map(|r| r.txn);
        let full = recent.is_some_and(|r| r.len() >= self.config.remembered_per_client);
        if req.attempt > 0 && full && oldest.is_some_and(|o| req.txn < o) {
            self.counters.forgotten += 1;
            return Some(self.make_reply(req, Status::Forgotten, 0, Vec::new()));
        }
        None
    }

    fn remember(&mut self, src: u32, reply: Reply) {
        let recent = self.remembered.entry(src).or_default();
        recent.push_back(reply);
        while recent.len() > self.config.remembered_per_client.max(1) {
            recent.pop_front();
        }
    }

    fn on_snapshot(&mut self, ts: u64, src: u32, req: &SnapshotRequest) {
        self.counters.snapshots += 1;
        // Delivered on the reliable service, in order with the writes: the map now is the
        // shard's state at `ts`.
        self.applied = self.applied.max((ts, src));
        let pairs = self.state.sorted_pairs();
        let per_chunk = (req.chunk_pairs.max(1) as usize).min(crate::codec::OPS_MAX);
        let count = pairs.len().div_ceil(per_chunk).max(1);
        let mut chunks = pairs.chunks(per_chunk).map(<[_]>::to_vec);
        for index in 0..count {
            let chunk = SnapshotChunk {
                id: req.id,
                shard: self.config.shard,
                replica: self.config.replica,
                ts,
                index: index as u32,
                count: count as u32,
                pairs: chunks.next().unwrap_or_default(),
            };
            self.send(src, Message::SnapshotChunk(chunk));
        }
    }

    fn make_reply(&self, req: &Request, status: Status, ts: u64, results: Vec<(u16, OpResult)>) -> Reply {
        Reply {
            txn: req.txn,
            attempt: req.attempt,
            shard: self.config.shard,
            replica: self.config.replica,
            status,
            ts,
            checksum: self.state.checksum(),
            results,
        }
    }

    fn reply(&mut self, src: u32, req: &Request, status: Status, ts: u64, results: Vec<(u16, OpResult)>) {
        let reply = self.make_reply(req, status, ts, results);
        self.send(src, Message::Reply(reply));
    }

    fn send(&mut self, dst: u32, m: Message) {
        self.outbox.push_back((dst, m.encode()));
    }

    /// The next message to send, unicast to a client (unordered answers: the best-effort
    /// service).
    pub fn peek_send(&self) -> Option<&(u32, Vec<u8>)> {
        self.outbox.front()
    }

    pub fn pop_send(&mut self) -> Option<(u32, Vec<u8>)> {
        self.outbox.pop_front()
    }

    /// Reads still waiting for the commit barrier.
    pub fn pending_reads(&self) -> usize {
        self.pending.len()
    }

    /// Checked after every step, in release builds too.
    pub fn invariants(&self) {
        let ordered = self
            .pending
            .iter()
            .zip(self.pending.iter().skip(1))
            .all(|(a, b)| (a.0, a.1) <= (b.0, b.1));
        assert!(ordered, "pending reads out of order");
        if let Some(&(ts, src, _)) = self.pending.front() {
            assert!(
                (ts, src) >= self.applied,
                "a pending read sits below an executed write"
            );
        }
        assert!(
            self.remembered
                .values()
                .all(|r| r.len() <= self.config.remembered_per_client.max(1)),
            "remembered replies over their bound"
        );
    }
}

#[cfg(test)]
mod tests;
