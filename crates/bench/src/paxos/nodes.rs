//! The hosts of a Paxos run: client hosts (a proposer and its closed-loop clients, each call
//! recorded for the history) and replicas (a learner applying the agreed log to the durable
//! key-value store and answering the clients).

use hdrhistogram::Histogram;
use onepipe_check::{HistoryRecord, OpKind, Outcome};
use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_kv::replicated::{
    Envelope, PartitionState, ReplicaConfig, ReplicaDb, decode_reply, partition_of,
};
use onepipe_kv::{Bytes, Command, Reply, SetCondition};
use onepipe_paxos::{Completion, Delivery, Learner, LearnerConfig, Proposer};
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Addr, Message, MsgType};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Latencies up to a minute, in nanoseconds.
const LATENCY_NS_MAX: u64 = 60_000_000_000;
/// Frames a host holds for its port.
const QUEUE_FRAMES_MAX: usize = 1 << 16;

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

/// A client's id in envelopes and histories: its host in the high half.
pub fn client_id(process: u32, index: usize) -> u64 {
    (process as u64) << 32 | index as u64
}

/// The process a client id belongs to.
pub fn client_process(client: u64) -> u32 {
    (client >> 32) as u32
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
            let client = client_id(self.me, i);
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
        let (client, request, reply) = match c {
            Completion::Replied {
                client,
                request,
                reply,
                ..
            } => (client, request, Some(reply)),
            Completion::GaveUp { client, request } => (client, request, None),
        };
        let index = (client & 0xffff_ffff) as usize;
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

/// One line of a replica's decided log: `inst,pid,value-hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    pub pid: u16,
    pub inst: u64,
    pub hash: u64,
}

/// A replica: a learner, and per partition the durable state it applies the log to.
pub struct ReplicaHost {
    pub learner: Learner,
    pub partitions: Vec<PartitionState>,
    /// Where its store is, to restart from it.
    store: Option<(std::path::PathBuf, ReplicaConfig)>,
    /// Set by the run: close the store and start again from it (a process restart).
    pub restart: Arc<AtomicBool>,
    pub restarts: u64,
    me: Addr,
    queue: VecDeque<Vec<u8>>,
    /// The decided log, if kept (for `--decisions-dir` and the agreement check).
    pub decided: Vec<Decided>,
    record_max: usize,
    pub decided_unrecorded: u64,
    /// Errors of the store (I/O): the replica stops applying at the first.
    pub store_error: Option<String>,
}

impl ReplicaHost {
    /// Replica of `learner`'s config with its store in `dir` (opened, or reopened where it left
    /// off: the learner starts at the store's next instance of each partition).
    pub fn open(
        dir: &Path,
        config: ReplicaConfig,
        learner: LearnerConfig,
        record_max: usize,
    ) -> Result<Self, String> {
        let db = ReplicaDb::open(dir, config).map_err(|e| format!("{}: {e}", dir.display()))?;
        let partitions = (0..config.partitions)
            .map(|pid| db.partition(pid))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let next: Vec<u64> = partitions.iter().map(PartitionState::next_instance).collect();
        let mut host = ReplicaHost::new(Learner::new(learner, &next), partitions, record_max);
        host.store = Some((dir.to_path_buf(), config));
        Ok(host)
    }

    /// A restart: the store closed and opened again, a new learner from where it stands, which
    /// asks its peers at once for what it missed.
    fn restart_if_asked(&mut self, now: Instant) {
        if !self.restart.swap(false, Ordering::AcqRel) {
            return;
        }
        let Some((dir, config)) = self.store.clone() else {
            return;
        };
        let learner = self.learner.config().clone();
        self.partitions.clear(); // closes the database before it opens again
        match ReplicaHost::open(&dir, config, learner, 0) {
            Ok(fresh) => {
                self.learner = fresh.learner;
                self.partitions = fresh.partitions;
                self.learner.rejoin(now);
                self.queue.clear();
                self.restarts += 1;
            }
            Err(e) => self.store_error = Some(format!("restart: {e}")),
        }
    }

    /// A peer's CATCHUP, answered from the store's kept log (further back than the learner
    /// keeps in memory).
    fn serve_catchup(&mut self, m: &Message<'_>) {
        let Some(state) = self.partitions.get(m.pid as usize) else {
            return;
        };
        if !self.learner.config().peers.contains(&m.from) {
            return;
        }
        let max = m.a.min(self.learner.config().catchup_max) as usize;
        let Ok(entries) = state.log_range(m.inst, max) else {
            return;
        };
        for (inst, value) in entries {
            let d = Message {
                inst,
                value: &value,
                ..Message::new(MsgType::Decided, m.pid, self.me, m.from)
            };
            if self.queue.len() < QUEUE_FRAMES_MAX {
                self.queue.push_back(d.to_vec());
            }
        }
    }

    pub fn new(learner: Learner, partitions: Vec<PartitionState>, record_max: usize) -> Self {
        ReplicaHost {
            me: learner.config().me,
            learner,
            partitions,
            store: None,
            restart: Arc::new(AtomicBool::new(false)),
            restarts: 0,
            queue: VecDeque::new(),
            decided: Vec::new(),
            record_max,
            decided_unrecorded: 0,
            store_error: None,
        }
    }

    /// Applies what the learner delivers, answers the clients, and tells the learner (which
    /// TRIMs).
    fn apply(&mut self, now: Instant) {
        while self.store_error.is_none() {
            let Some(first) = self.learner.poll_delivery(now) else {
                break;
            };
            let pid = first.pid;
            let mut batch = vec![first];
            // The rest of that partition's deliverable run, applied as one batch (one write).
            while let Some(d) = self.learner.poll_delivery(now) {
                if d.pid != pid {
                    self.apply_batch(now, std::mem::replace(&mut batch, vec![d]));
                } else {
                    batch.push(d);
                }
            }
            self.apply_batch(now, batch);
        }
    }

    fn apply_batch(&mut self, now: Instant, batch: Vec<Delivery>) {
        let Some(pid) = batch.first().map(|d| d.pid) else {
            return;
        };
        for d in &batch {
            if self.decided.len() < self.record_max {
                self.decided.push(Decided {
                    pid,
                    inst: d.inst,
                    hash: value_hash(&d.value),
                });
            } else {
                self.decided_unrecorded += 1;
            }
        }
        let entries: Vec<(u64, &[u8])> = batch.iter().map(|d| (d.inst, &d.value[..])).collect();
        let state = &mut self.partitions[pid as usize];
        let applied = match state.apply_batch(&entries) {
            Ok(a) => a,
            Err(e) => {
                self.store_error = Some(e.to_string());
                return;
            }
        };
        for a in applied {
            let reply = Message {
                inst: a.inst,
                a: a.request,
                b: a.client,
                value: &a.reply,
                ..Message::new(
                    MsgType::Reply,
                    pid,
                    self.me,
                    Addr::Process(client_process(a.client)),
                )
            };
            if self.queue.len() < QUEUE_FRAMES_MAX {
                self.queue.push_back(reply.to_vec());
            }
        }
        let next = state.next_instance();
        let queue = &mut self.queue;
        self.learner
            .applied(now, pid, next, &mut |m| queue.push_back(m.to_vec()));
    }
}

/// FNV-1a of a decided value: the decided logs' third column.
pub fn value_hash(v: &[u8]) -> u64 {
    v.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

impl Node for ReplicaHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.restart_if_asked(now);
        let Ok(m) = Message::parse(frame) else { return };
        if m.msgtype == MsgType::Catchup {
            self.serve_catchup(&m);
            return;
        }
        let queue = &mut self.queue;
        self.learner.handle(now, &m, &mut |m| queue.push_back(m.to_vec()));
        self.apply(now);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.restart_if_asked(now);
        if port != 0 {
            return None;
        }
        let frame = self.queue.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }
    fn poll_timeout(&self) -> Option<Instant> {
        if self.restart.load(Ordering::Acquire) {
            return Some(Instant::ZERO);
        }
        self.learner.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.restart_if_asked(now);
        let queue = &mut self.queue;
        self.learner
            .handle_timeout(now, &mut |m| queue.push_back(m.to_vec()));
        self.apply(now);
    }
}

impl Hints for ReplicaHost {
    fn wants_transmit(&self) -> bool {
        !self.queue.is_empty()
    }
}
