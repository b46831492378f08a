//! The demo's workload (paper 7.3.1): YCSB-like keys, uniform or Zipf (scrambled, so that hot
//! keys spread over the shards), transactions of a few independent reads and writes, values
//! sized like Facebook's ETC pool, and what every client records.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hdrhistogram::Histogram;
use onepipe_check::{HistoryRecord, OpKind, Outcome as HistoryOutcome};
use onepipe_fabric::hash::SplitMix;
use onepipe_txkv::run::TxnSource;
use onepipe_txkv::{Completion, Op, OpResult, Outcome, Txn};

/// How keys are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    Uniform,
    /// YCSB's Zipfian with this constant (0.99 in YCSB), ranks scrambled over the key space.
    Zipf(f64),
}

impl Distribution {
    pub fn name(&self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipf(_) => "zipf",
        }
    }
}

#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    pub keys: u64,
    pub distribution: Distribution,
    /// Share of transactions that only read.
    pub read_only_fraction: f64,
    pub keys_per_txn: usize,
    /// In the other transactions, the chance that an operation writes (at least one does).
    pub write_fraction: f64,
    /// ETC-like sizes are cut at this.
    pub value_bytes_max: usize,
    pub seed: u64,
}

impl Default for WorkloadConfig {
    fn default() -> WorkloadConfig {
        WorkloadConfig {
            keys: 100_000,
            distribution: Distribution::Uniform,
            read_only_fraction: 0.5,
            keys_per_txn: 2,
            write_fraction: 0.5,
            value_bytes_max: 1024,
            seed: 1,
        }
    }
}

/// YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"): ranks 0..n, rank 0 the hottest.
pub struct Zipf {
    n: f64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Zipf {
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2);
        let nf = n as f64;
        Zipf {
            n: nf,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / nf).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    /// A rank for the uniform draw `u` in [0, 1).
    pub fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = (self.n * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n as u64 - 1)
    }
}

/// ETC's value sizes (Atikoglu et al., SIGMETRICS 2012): a generalized Pareto distribution
/// with scale 214.476 and shape 0.348238, at least 1 byte, cut at `max`.
pub fn etc_value_bytes(u: f64, max: usize) -> usize {
    const SCALE: f64 = 214.476;
    const SHAPE: f64 = 0.348_238;
    let x = SCALE / SHAPE * ((1.0 - u).powf(-SHAPE) - 1.0);
    (x as usize).clamp(1, max.max(1))
}

fn uniform01(rng: &mut SplitMix) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// What every client of one run adds to.
pub struct Recorder {
    /// Latency of committed transactions, ns.
    pub latency_ns: Mutex<Histogram<u64>>,
    pub committed: AtomicI64,
    pub failed: AtomicI64,
    pub unknown: AtomicI64,
    pub aborts: AtomicI64,
    /// Transactions submitted and not finished.
    pub outstanding: AtomicI64,
    /// Committed transactions whose return falls in the measured window.
    pub in_window: AtomicI64,
    pub window_ns: Mutex<(u64, u64)>,
    /// Every operation, when a history is wanted.
    pub history: Option<Mutex<HistoryChunks>>,
    /// Clients stop submitting once this is set.
    pub stop: AtomicBool,
}

impl Recorder {
    pub fn new(history: bool) -> Recorder {
        Recorder {
            latency_ns: Mutex::new(Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")),
            committed: AtomicI64::new(0),
            failed: AtomicI64::new(0),
            unknown: AtomicI64::new(0),
            aborts: AtomicI64::new(0),
            outstanding: AtomicI64::new(0),
            in_window: AtomicI64::new(0),
            window_ns: Mutex::new((0, u64::MAX)),
            history: history.then(|| Mutex::new(HistoryChunks::default())),
            stop: AtomicBool::new(false),
        }
    }
}

/// A history kept in chunks of a fixed size. Clients record from inside the runtime's workers:
/// one growing vector, copied whole each time it doubles, stalled a worker for tens of
/// milliseconds at a few hundred MB, long enough for its switches' links to be declared dead
/// (a 1Pipe run under Zipf collapsed that way, docs/notes/2026-11-28-txkv.md).
#[derive(Default)]
pub struct HistoryChunks {
    chunks: Vec<Vec<HistoryRecord>>,
}

/// Records per chunk: about 2 MB.
const CHUNK_RECORDS: usize = 16 * 1024;

impl HistoryChunks {
    pub fn push(&mut self, record: HistoryRecord) {
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK_RECORDS) {
            self.chunks.push(Vec::with_capacity(CHUNK_RECORDS));
        }
        self.chunks.last_mut().expect("one was just made").push(record);
    }

    /// Every record, in the order they came; the chunks are emptied.
    pub fn take(&mut self) -> Vec<HistoryRecord> {
        std::mem::take(&mut self.chunks).into_iter().flatten().collect()
    }
}

/// One closed-loop client's transactions.
pub struct Workload {
    client: u32,
    config: WorkloadConfig,
    rng: SplitMix,
    zipf: Option<Arc<Zipf>>,
    seq: u64,
    /// Transactions outstanding, with the window slot each holds.
    submitted: HashMap<u64, (Txn, u32)>,
    /// Window slots free: the history names slot `s` of process `p` as client `p * 1024 + s`,
    /// so that each history client has one transaction outstanding at a time.
    free_slots: Vec<u32>,
    recorder: Arc<Recorder>,
}

/// History client ids of one process: `process * SLOTS_PER_PROCESS + slot`.
pub const SLOTS_PER_PROCESS: u64 = 1024;

impl Workload {
    pub fn new(
        client: u32,
        config: WorkloadConfig,
        zipf: Option<Arc<Zipf>>,
        recorder: Arc<Recorder>,
    ) -> Workload {
        let rng = SplitMix::new(config.seed ^ (u64::from(client) << 32) ^ 0x7478_6b76);
        Workload {
            client,
            config,
            rng,
            zipf,
            seq: 0,
            submitted: HashMap::new(),
            free_slots: (0..SLOTS_PER_PROCESS as u32).rev().collect(),
            recorder,
        }
    }

    fn key(&mut self) -> Bytes {
        let u = uniform01(&mut self.rng);
        let index = match (&self.zipf, self.config.distribution) {
            (Some(z), Distribution::Zipf(_)) => {
                // Scrambled: the hot ranks land on keys spread over the key space.
                onepipe_txkv::layout::fnv1a(&z.rank(u).to_le_bytes()) % self.config.keys
            }
            _ => (u * self.config.keys as f64) as u64 % self.config.keys,
        };
        Bytes::from(format!("user{index}"))
    }

    /// A value unique to this client and write: its id, then padding to an ETC size.
    fn value(&mut self) -> Bytes {
        self.seq += 1;
        let mut v = format!("c{}-{}.", self.client, self.seq).into_bytes();
        let size = etc_value_bytes(uniform01(&mut self.rng), self.config.value_bytes_max);
        v.resize(size.max(v.len()), b'.');
        Bytes::from(v)
    }

    fn draw(&mut self) -> Txn {
        let read_only = uniform01(&mut self.rng) < self.config.read_only_fraction;
        let n = self.config.keys_per_txn.max(1);
        let mut keys: Vec<Bytes> = Vec::with_capacity(n);
        while keys.len() < n {
            let k = self.key();
            // Distinct keys: a transaction touching one key twice is not what the paper runs,
            // and a small hot set must not loop forever.
            if !keys.contains(&k) || keys.len() as u64 >= self.config.keys {
                keys.push(k);
            }
        }
        let mut writes: Vec<bool> = (0..n)
            .map(|_| !read_only && uniform01(&mut self.rng) < self.config.write_fraction)
            .collect();
        if !read_only && !writes.contains(&true) {
            let i = (self.rng.next_u64() % n as u64) as usize;
            writes[i] = true;
        }
        let ops = keys
            .into_iter()
            .zip(writes)
            .map(|(key, write)| {
                if write {
                    Op::Put {
                        key,
                        value: self.value(),
                    }
                } else {
                    Op::Get { key }
                }
            })
            .collect();
        Txn::new(ops)
    }

    fn record(&self, txn: &Txn, slot: u32, c: &Completion) {
        let Some(history) = &self.recorder.history else {
            return;
        };
        let (outcome, ts, results) = match &c.outcome {
            Outcome::Committed { ts, results } => (HistoryOutcome::Ok, Some(*ts), Some(results)),
            Outcome::Failed(_) => (HistoryOutcome::Fail, None, None),
            // Placed at the position the client learned, if a read shows it took effect.
            Outcome::Unknown(_) => (HistoryOutcome::Unknown, c.ts, None),
        };
        let mut out = history.lock().expect("history lock");
        for (i, op) in txn.ops.iter().enumerate() {
            let (kind, value) = match op {
                Op::Get { .. } => {
                    let read = results.and_then(|r| match &r[i] {
                        OpResult::Value(v) => v.as_ref().map(|v| value_id(v)),
                        _ => None,
                    });
                    (OpKind::Read, read)
                }
                Op::Put { value, .. } => (OpKind::Write, Some(value_id(value))),
                // The demo's workload writes with PUT only.
                Op::Del { .. } | Op::IncrBy { .. } => continue,
            };
            out.push(HistoryRecord {
                client: u64::from(self.client) * SLOTS_PER_PROCESS + u64::from(slot),
                op: kind,
                key: String::from_utf8_lossy(op.key()).into_owned(),
                value,
                expect: None,
                outcome,
                call_ns: c.call_ns,
                return_ns: c.return_ns,
                txn: Some(c.id),
                ts,
            });
        }
    }
}

/// A value's id in the history: its bytes up to the padding (unique per write).
fn value_id(v: &[u8]) -> String {
    let end = v.iter().position(|&b| b == b'.').unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

impl TxnSource for Workload {
    fn next(&mut self, _now_ns: u64) -> Option<Txn> {
        if self.recorder.stop.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.draw())
    }

    fn submitted(&mut self, id: u64, txn: Txn) {
        self.recorder.outstanding.fetch_add(1, Ordering::Relaxed);
        // A window is at most 1024 (the CLI's bound); past it the slot is shared and the
        // history check would report the overlap.
        let slot = self.free_slots.pop().unwrap_or(0);
        self.submitted.insert(id, (txn, slot));
    }

    fn completed(&mut self, c: Completion) {
        let Some((txn, slot)) = self.submitted.remove(&c.id) else {
            // Refused at submit (never counted as outstanding).
            self.recorder.failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let r = &self.recorder;
        r.outstanding.fetch_sub(1, Ordering::Relaxed);
        r.aborts.fetch_add(i64::from(c.aborts), Ordering::Relaxed);
        match c.outcome {
            Outcome::Committed { .. } => {
                r.committed.fetch_add(1, Ordering::Relaxed);
                let (from, until) = *r.window_ns.lock().expect("window lock");
                if (from..until).contains(&c.return_ns) {
                    r.in_window.fetch_add(1, Ordering::Relaxed);
                    let latency = c.return_ns.saturating_sub(c.call_ns).max(1);
                    let _ = r.latency_ns.lock().expect("latency lock").record(latency);
                }
            }
            Outcome::Failed(_) => {
                r.failed.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Unknown(_) => {
                r.unknown.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.free_slots.push(slot);
        self.record(&txn, slot, &c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000, 0.99);
        let mut rng = SplitMix::new(3);
        let mut hits = vec![0u32; 1000];
        for _ in 0..100_000 {
            hits[z.rank(uniform01(&mut rng)) as usize] += 1;
        }
        assert!(
            hits[0] > 10 * hits[500].max(1),
            "rank 0: {}, rank 500: {}",
            hits[0],
            hits[500]
        );
    }

    #[test]
    fn etc_sizes_are_mostly_small_and_capped() {
        let mut rng = SplitMix::new(5);
        let sizes: Vec<usize> = (0..10_000)
            .map(|_| etc_value_bytes(uniform01(&mut rng), 1024))
            .collect();
        let small = sizes.iter().filter(|&&s| s < 500).count();
        assert!(small > 7_000, "{small}");
        assert!(sizes.iter().all(|&s| (1..=1024).contains(&s)));
    }

    #[test]
    fn read_write_transactions_write_at_least_once() {
        let config = WorkloadConfig {
            read_only_fraction: 0.0,
            write_fraction: 0.0,
            ..WorkloadConfig::default()
        };
        let mut w = Workload::new(1, config, None, Arc::new(Recorder::new(false)));
        for _ in 0..100 {
            assert!(!w.draw().is_read_only());
        }
    }
}
