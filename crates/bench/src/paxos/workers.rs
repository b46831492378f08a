//! Where a replica applies its partitions' logs (thesis 6.1: the replica's I/O core hands each
//! partition's decided values to a worker core of its own, `worker = pid mod workers`): inline
//! on the node's own thread (the simulator, deterministic), or one worker thread per partition
//! (the runtimes), so that partitions apply in parallel. Either way the node submits jobs and
//! polls what is done, in the order each partition finished them.

use onepipe_kv::replicated::{Applied, PartitionState};
use onepipe_paxos::Delivery;
use onepipe_wire::paxos::Addr;
use std::collections::VecDeque;
use std::sync::mpsc;
use std::thread::JoinHandle;

pub enum Job {
    /// Apply consecutive decided values of the partition.
    Apply(Vec<Delivery>),
    /// Read the kept log from `from`, at most `max` values, for peer `to`'s catch-up.
    LogRange { from: u64, max: usize, to: Addr },
}

pub enum Done {
    Applied {
        pid: u16,
        applied: Vec<Applied>,
        /// The partition's next instance after the batch.
        next: u64,
    },
    Entries {
        pid: u16,
        to: Addr,
        entries: Vec<(u64, Vec<u8>)>,
    },
    /// The store failed; the partition takes no more jobs.
    Failed { pid: u16, error: String },
}

fn run_job(state: &mut PartitionState, job: Job) -> Done {
    let pid = state.partition();
    match job {
        Job::Apply(batch) => {
            let entries: Vec<(u64, &[u8])> = batch.iter().map(|d| (d.inst, &d.value[..])).collect();
            match state.apply_batch(&entries) {
                Ok(applied) => Done::Applied {
                    pid,
                    applied,
                    next: state.next_instance(),
                },
                Err(e) => Done::Failed {
                    pid,
                    error: e.to_string(),
                },
            }
        }
        // A range already trimmed from the log is not an error of this replica: nothing to send.
        Job::LogRange { from, max, to } => Done::Entries {
            pid,
            to,
            entries: state.log_range(from, max).unwrap_or_default(),
        },
    }
}

enum Mode {
    Inline(Vec<PartitionState>),
    Threads {
        jobs: Vec<mpsc::Sender<Job>>,
        done: mpsc::Receiver<Done>,
        workers: Vec<JoinHandle<PartitionState>>,
    },
}

pub struct Appliers {
    mode: Mode,
    /// Inline mode: what is done, not yet polled.
    ready: VecDeque<Done>,
    outstanding: usize,
}

impl Appliers {
    pub fn inline(states: Vec<PartitionState>) -> Appliers {
        Appliers {
            mode: Mode::Inline(states),
            ready: VecDeque::new(),
            outstanding: 0,
        }
    }

    /// One worker thread per partition, each owning its partition's state.
    pub fn threads(states: Vec<PartitionState>) -> Result<Appliers, String> {
        let (done_tx, done) = mpsc::channel();
        let mut jobs = Vec::new();
        let mut workers = Vec::new();
        for mut state in states {
            let (tx, rx) = mpsc::channel::<Job>();
            let done_tx = done_tx.clone();
            let name = format!("paxos-worker-{}", state.partition());
            let worker = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    // Ends when the node drops its senders (`into_states`).
                    for job in rx {
                        let _ = done_tx.send(run_job(&mut state, job));
                    }
                    state
                })
                .map_err(|e| format!("cannot start a worker thread: {e}"))?;
            jobs.push(tx);
            workers.push(worker);
        }
        Ok(Appliers {
            mode: Mode::Threads { jobs, done, workers },
            ready: VecDeque::new(),
            outstanding: 0,
        })
    }

    pub fn partitions(&self) -> usize {
        match &self.mode {
            Mode::Inline(states) => states.len(),
            Mode::Threads { jobs, .. } => jobs.len(),
        }
    }

    /// Jobs submitted and not yet polled.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    pub fn submit(&mut self, pid: u16, job: Job) {
        match &mut self.mode {
            Mode::Inline(states) => {
                let Some(state) = states.get_mut(pid as usize) else {
                    return;
                };
                self.ready.push_back(run_job(state, job));
                self.outstanding += 1;
            }
            Mode::Threads { jobs, .. } => {
                if let Some(tx) = jobs.get(pid as usize)
                    && tx.send(job).is_ok()
                {
                    self.outstanding += 1;
                }
            }
        }
    }

    /// What is done, if anything: one [`Done`] per job, in each partition's order.
    pub fn poll(&mut self) -> Option<Done> {
        let d = match &mut self.mode {
            Mode::Inline(_) => self.ready.pop_front(),
            Mode::Threads { done, .. } => done.try_recv().ok(),
        }?;
        self.outstanding = self.outstanding.saturating_sub(1);
        Some(d)
    }

    /// The partitions' states once the workers are stopped ([`Appliers::states`]); `None` while
    /// they run.
    pub fn stopped_states(&self) -> Option<&[PartitionState]> {
        match &self.mode {
            Mode::Inline(states) => Some(states),
            Mode::Threads { .. } => None,
        }
    }

    /// The partitions' states, the worker threads stopped first (after every job submitted is
    /// done; what they finished meanwhile is still polled).
    pub fn states(&mut self) -> &mut Vec<PartitionState> {
        if let Mode::Threads { jobs, done, workers } = &mut self.mode {
            jobs.clear();
            let states = workers.drain(..).filter_map(|w| w.join().ok()).collect();
            self.ready.extend(done.try_iter());
            self.mode = Mode::Inline(states);
        }
        match &mut self.mode {
            Mode::Inline(states) => states,
            Mode::Threads { .. } => unreachable!("stopped above"),
        }
    }
}

impl Drop for Appliers {
    /// Stops the worker threads, so that no store stays open after its replica is gone.
    fn drop(&mut self) {
        self.states();
    }
}
