//! A replica: a learner, and the durable store it applies the agreed log to (one worker per
//! partition, [`super::workers`]); it answers the clients, TRIMs through its learner, serves
//! its peers' catch-ups from the store's kept log, and can restart from its store.

use super::workers::{Appliers, Done, Job};
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_kv::StoreError;
use onepipe_kv::replicated::{PartitionState, ReplicaConfig, ReplicaDb, encode_reply};
use onepipe_paxos::{Learner, LearnerConfig, client_process};
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Addr, Message, MsgType, VALUE_BYTES_MAX};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Frames a replica holds for its port.
const QUEUE_FRAMES_MAX: usize = 1 << 16;
/// How soon a replica with work at its workers looks again for what they finished.
const WORKER_POLL_NS: u64 = 20_000;

/// `reply`, or an error reply in its place if it is longer than a message carries (an MGET of
/// many long values): the client learns why instead of waiting for an answer that cannot be sent.
fn fit_reply(reply: Vec<u8>) -> Vec<u8> {
    if reply.len() <= VALUE_BYTES_MAX {
        return reply;
    }
    encode_reply(&Err(StoreError::ValueTooLarge {
        len_bytes: reply.len(),
        max_bytes: VALUE_BYTES_MAX,
    }))
}

/// One line of a replica's decided log: `inst,pid,value-hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    pub pid: u16,
    pub inst: u64,
    pub hash: u64,
}

/// FNV-1a of a decided value: the decided logs' third column.
pub fn value_hash(v: &[u8]) -> u64 {
    v.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

pub struct ReplicaHost {
    pub learner: Learner,
    appliers: Appliers,
    /// Whether the partitions apply on worker threads (else on the node's thread).
    threaded: bool,
    /// Where its store is, to restart from it.
    store: Option<(PathBuf, ReplicaConfig)>,
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
    /// The time of the latest call, for the workers' poll timer.
    last_now: Instant,
}

impl ReplicaHost {
    /// Replica of `learner`'s config with its store in `dir` (opened, or reopened where it left
    /// off: the learner starts at the store's next instance of each partition); `threaded`:
    /// a worker thread per partition.
    pub fn open(
        dir: &Path,
        config: ReplicaConfig,
        learner: LearnerConfig,
        record_max: usize,
        threaded: bool,
    ) -> Result<Self, String> {
        let (learner, states) = open_store(dir, config, learner)?;
        let appliers = match threaded {
            true => Appliers::threads(states)?,
            false => Appliers::inline(states),
        };
        Ok(ReplicaHost {
            me: learner.config().me,
            learner,
            appliers,
            threaded,
            store: Some((dir.to_path_buf(), config)),
            restart: Arc::new(AtomicBool::new(false)),
            restarts: 0,
            queue: VecDeque::new(),
            decided: Vec::new(),
            record_max,
            decided_unrecorded: 0,
            store_error: None,
            last_now: Instant::ZERO,
        })
    }

    /// Stops the worker threads (after what was submitted is done), so that the partitions'
    /// states can be read: for the checks at the end of a run.
    pub fn stop_workers(&mut self) {
        self.appliers.states();
        self.collect(self.last_now);
    }

    /// The partitions' states; empty until [`ReplicaHost::stop_workers`] if they run on workers.
    pub fn partitions(&self) -> &[PartitionState] {
        self.appliers.stopped_states().unwrap_or_default()
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
        // Closes the database before it opens again; what the workers finished is dropped with
        // the process, as a crash drops it.
        self.appliers.states().clear();
        while self.appliers.poll().is_some() {}
        let opened = open_store(&dir, config, learner).and_then(|(learner, states)| {
            let appliers = match self.threaded {
                true => Appliers::threads(states)?,
                false => Appliers::inline(states),
            };
            Ok((learner, appliers))
        });
        match opened {
            Ok((learner, appliers)) => {
                self.learner = learner;
                self.appliers = appliers;
                self.learner.rejoin(now);
                self.queue.clear();
                self.restarts += 1;
            }
            Err(e) => self.store_error = Some(format!("restart: {e}")),
        }
    }

    /// Hands what the learner delivers to the partitions' workers, one batch per partition's
    /// run of consecutive instances (one write each).
    fn apply(&mut self, now: Instant) {
        while self.store_error.is_none() {
            let Some(first) = self.learner.poll_delivery(now) else {
                break;
            };
            let pid = first.pid;
            let mut batch = vec![first];
            while let Some(d) = self.learner.poll_delivery(now) {
                if d.pid != pid {
                    self.submit(std::mem::replace(&mut batch, vec![d]));
                } else {
                    batch.push(d);
                }
            }
            self.submit(batch);
        }
        self.collect(now);
    }

    fn submit(&mut self, batch: Vec<onepipe_paxos::Delivery>) {
        let Some(pid) = batch.first().map(|d| d.pid) else {
            return;
        };
        for d in &batch {
            if self.decided.len() < self.record_max {
                let hash = value_hash(&d.value);
                self.decided.push(Decided {
                    pid,
                    inst: d.inst,
                    hash,
                });
            } else {
                self.decided_unrecorded += 1;
            }
        }
        self.appliers.submit(pid, Job::Apply(batch));
    }

    /// Answers what the workers finished: the clients, the peers, and the learner (which TRIMs).
    fn collect(&mut self, now: Instant) {
        while let Some(done) = self.appliers.poll() {
            match done {
                Done::Applied { pid, applied, next } => {
                    for a in applied {
                        let to = Addr::Process(client_process(a.client));
                        let reply = fit_reply(a.reply);
                        self.send(&Message {
                            inst: a.inst,
                            a: a.request,
                            b: a.client,
                            value: &reply,
                            ..Message::new(MsgType::Reply, pid, self.me, to)
                        });
                    }
                    let queue = &mut self.queue;
                    self.learner.applied(now, pid, next, &mut |m| {
                        if queue.len() < QUEUE_FRAMES_MAX {
                            queue.push_back(m.to_vec());
                        }
                    });
                }
                Done::Entries { pid, to, entries } => {
                    for (inst, value) in entries {
                        self.send(&Message {
                            inst,
                            value: &value,
                            ..Message::new(MsgType::Decided, pid, self.me, to)
                        });
                    }
                }
                Done::Failed { pid, error } => {
                    self.store_error
                        .get_or_insert(format!("partition {pid}: {error}"));
                }
            }
        }
    }

    fn send(&mut self, m: &Message<'_>) {
        if self.queue.len() < QUEUE_FRAMES_MAX {
            self.queue.push_back(m.to_vec());
        }
    }

    /// A peer's CATCHUP, answered from the store's kept log (further back than the learner
    /// keeps in memory).
    fn serve_catchup(&mut self, m: &Message<'_>) {
        if !self.learner.config().peers.contains(&m.from) || m.pid as usize >= self.appliers.partitions() {
            return;
        }
        let max = m.a.min(self.learner.config().catchup_max) as usize;
        self.appliers.submit(
            m.pid,
            Job::LogRange {
                from: m.inst,
                max,
                to: m.from,
            },
        );
    }
}

fn open_store(
    dir: &Path,
    config: ReplicaConfig,
    learner: LearnerConfig,
) -> Result<(Learner, Vec<PartitionState>), String> {
    let db = ReplicaDb::open(dir, config).map_err(|e| format!("{}: {e}", dir.display()))?;
    let states = (0..config.partitions)
        .map(|pid| db.partition(pid))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let next: Vec<u64> = states.iter().map(PartitionState::next_instance).collect();
    Ok((Learner::new(learner, &next), states))
}

impl Node for ReplicaHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.last_now = now;
        self.restart_if_asked(now);
        let Ok(m) = Message::parse(frame) else { return };
        if m.msgtype == MsgType::Catchup {
            self.serve_catchup(&m);
        } else {
            let queue = &mut self.queue;
            self.learner.handle(now, &m, &mut |m| queue.push_back(m.to_vec()));
        }
        self.apply(now);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.last_now = now;
        self.restart_if_asked(now);
        self.collect(now);
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
        // Work at the workers: look again soon (their answers do not wake the node).
        let workers = (self.appliers.outstanding() > 0)
            .then(|| self.last_now + onepipe_wire::Duration::from_nanos(WORKER_POLL_NS));
        self.learner.poll_timeout().into_iter().chain(workers).min()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.last_now = now;
        self.restart_if_asked(now);
        let queue = &mut self.queue;
        self.learner
            .handle_timeout(now, &mut |m| queue.push_back(m.to_vec()));
        self.apply(now);
    }
}

impl Hints for ReplicaHost {
    fn wants_transmit(&self) -> bool {
        !self.queue.is_empty() || self.appliers.outstanding() > 0
    }
}
