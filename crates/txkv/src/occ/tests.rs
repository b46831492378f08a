//! The OCC baseline's clients and servers driven together by a tiny in-memory network: messages
//! are delivered one at a time in a seeded random order, some dropped on request; the clock
//! advances 1 µs per delivery and jumps to the next timeout when nothing is in flight.

use std::collections::HashMap;

use bytes::Bytes;

use super::*;
use crate::layout::Layout;
use crate::state::ShardState;
use crate::txn::{Op, OpResult, Outcome};

mod client;
mod scenarios;
mod server;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// A deterministic generator for the test network (the code under test draws nothing).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One finished transaction with what was asked.
struct Done {
    client: usize,
    txn: Txn,
    completion: Completion,
}

/// Whether the network loses a message, from its source, destination and bytes.
type DropRule = dyn Fn(u32, u32, &[u8]) -> bool;

struct Net {
    layout: Layout,
    servers: Vec<OccServer>,
    clients: Vec<OccClient>,
    /// Transactions each client still has to submit, in order.
    queues: Vec<Vec<Txn>>,
    submitted: HashMap<(usize, u64), Txn>,
    in_flight: Vec<(u32, u32, Vec<u8>)>,
    seed: u64,
    rng: SplitMix,
    drop_per_mille: u64,
    /// Messages delivered twice (the copy stays in flight, to come later).
    duplicate_per_mille: u64,
    /// Messages (source, destination, bytes) always lost.
    drop_where: Option<Box<DropRule>>,
    /// Server processes declared failed: left out of the replica comparison.
    failed: Vec<u32>,
    now_ns: u64,
    msg_ids: u64,
    done: Vec<Done>,
    /// Keys whose versions are checked for monotony after every step.
    watched: Vec<Bytes>,
    versions_seen: HashMap<(usize, Bytes), u64>,
}

const TIMEOUT_NS: u64 = 100_000;
const STEPS_MAX: usize = 2_000_000;

fn client_config(process: u32, layout: Layout) -> OccClientConfig {
    let mut c = OccClientConfig::new(process, layout);
    c.timeout_ns = TIMEOUT_NS;
    c.attempts_max = 30;
    c.aborts_max = 1_000;
    c.backoff_base_ns = 2_000;
    c.backoff_max_ns = 64_000;
    c
}

impl Net {
    fn new(layout: Layout, clients: usize, seed: u64) -> Net {
        let servers = (0..layout.servers())
            .map(|p| {
                let (shard, replica) = layout.role_of(p).expect("a server process");
                OccServer::new(OccServerConfig::new(shard as u16, replica as u16))
            })
            .collect();
        let clients = (0..clients)
            .map(|i| OccClient::new(client_config(layout.servers() + i as u32, layout)))
            .collect();
        Net {
            layout,
            servers,
            clients,
            queues: Vec::new(),
            submitted: HashMap::new(),
            in_flight: Vec::new(),
            seed,
            rng: SplitMix(seed),
            drop_per_mille: 0,
            duplicate_per_mille: 0,
            drop_where: None,
            failed: Vec::new(),
            now_ns: 0,
            msg_ids: 0,
            done: Vec::new(),
            watched: Vec::new(),
            versions_seen: HashMap::new(),
        }
    }

    fn with_config(mut self, f: impl Fn(&mut OccClientConfig)) -> Net {
        for c in &mut self.clients {
            let mut config = c.config().clone();
            f(&mut config);
            *c = OccClient::new(config);
        }
        self
    }

    fn client_process(&self, i: usize) -> u32 {
        self.layout.servers() + i as u32
    }

    /// Submits what each client has room for, and moves every message sent onto the network.
    fn flush(&mut self) {
        for i in 0..self.clients.len() {
            while self.clients[i].has_room() && self.queues.get(i).is_some_and(|q| !q.is_empty()) {
                let txn = self.queues[i].remove(0);
                let id = self.clients[i]
                    .submit(self.now_ns, txn.clone())
                    .expect("room was checked");
                self.submitted.insert((i, id), txn);
            }
            let src = self.client_process(i);
            while let Some(out) = self.clients[i].poll_send() {
                self.msg_ids += 1;
                self.clients[i].on_sent(&out, self.msg_ids);
                for (dst, bytes) in out.scatter {
                    self.in_flight.push((src, dst, bytes));
                }
            }
            while let Some(c) = self.clients[i].poll_completion() {
                let txn = self
                    .submitted
                    .remove(&(i, c.id))
                    .expect("a submitted transaction");
                self.done.push(Done {
                    client: i,
                    txn,
                    completion: c,
                });
            }
        }
        for (p, s) in self.servers.iter_mut().enumerate() {
            while let Some((dst, bytes)) = s.pop_send() {
                self.in_flight.push((p as u32, dst, bytes));
            }
        }
    }

    fn deliver(&mut self, src: u32, dst: u32, bytes: &[u8]) {
        self.now_ns += 1_000;
        match self.layout.role_of(dst) {
            Some(_) => {
                let server = &mut self.servers[dst as usize];
                server.set_now(self.now_ns);
                server.on_delivery(Service::BestEffort, self.now_ns, src, bytes);
            }
            None => {
                let i = (dst - self.layout.servers()) as usize;
                self.clients[i].on_message(self.now_ns, src, bytes);
            }
        }
    }

    /// Delivers (or drops) one message in flight, or lets time pass to the next timeout.
    /// Returns false once nothing is left to do.
    fn step(&mut self) -> bool {
        self.flush();
        if !self.in_flight.is_empty() {
            let i = self.rng.below(self.in_flight.len() as u64) as usize;
            let (src, dst, bytes) = self.in_flight.swap_remove(i);
            if self.rng.below(1000) < self.duplicate_per_mille {
                self.in_flight.push((src, dst, bytes.clone()));
            }
            let lost = self.drop_where.as_ref().is_some_and(|f| f(src, dst, &bytes));
            if self.rng.below(1000) >= self.drop_per_mille && !lost {
                self.deliver(src, dst, &bytes);
            }
        } else if let Some(t) = self.clients.iter().filter_map(OccClient::poll_timeout).min() {
            self.now_ns = self.now_ns.max(t);
            for c in &mut self.clients {
                c.handle_timeout(self.now_ns);
            }
        } else {
            return false;
        }
        self.flush();
        self.invariants();
        true
    }

    /// Delivers every message in flight, and those they cause, without letting time jump.
    fn drain(&mut self) {
        self.flush();
        while !self.in_flight.is_empty() {
            let before = self.now_ns;
            self.step();
            assert!(self.now_ns <= before + 1_000, "time jumped while draining");
        }
    }

    fn run(&mut self) {
        for _ in 0..STEPS_MAX {
            if !self.step() {
                self.quiet_invariants();
                return;
            }
        }
        panic!(
            "seed={}: the network did not go quiet in {STEPS_MAX} steps",
            self.seed
        );
    }

    fn invariants(&mut self) {
        self.servers.iter().for_each(OccServer::invariants);
        self.clients.iter().for_each(OccClient::invariants);
        for (p, s) in self.servers.iter().enumerate() {
            for key in &self.watched {
                let version = s.version(key);
                let last = self.versions_seen.insert((p, key.clone()), version).unwrap_or(0);
                assert!(version >= last, "server {p}: the version of {key:?} went back");
            }
        }
    }

    /// Once nothing is in flight and nothing outstanding: no lock is held, nothing waits, and
    /// the replicas of each shard hold the same content.
    fn quiet_invariants(&self) {
        assert!(self.clients.iter().all(|c| c.outstanding() == 0));
        for s in &self.servers {
            assert_eq!(s.locks_held(), 0, "a lock outlived its transaction");
            assert_eq!(s.parked_commits(), 0, "a commit is still parked");
        }
        for shard in 0..self.layout.shards {
            let digests: Vec<u64> = self
                .layout
                .replicas_of(shard)
                .filter(|p| !self.failed.contains(p))
                .map(|p| self.servers[p as usize].state().digest())
                .collect();
            assert!(
                digests.iter().all(|&d| d == digests[0]),
                "shard {shard}: replicas differ"
            );
        }
    }

    /// The store's content digest: the sum over shards of a replica's (the digest is a sum over
    /// pairs, so it is the whole map's).
    fn digest(&self) -> u64 {
        (0..self.layout.shards)
            .map(|s| self.servers[self.layout.process(s, 0) as usize].state().digest())
            .fold(0, u64::wrapping_add)
    }

    fn committed(&self) -> impl Iterator<Item = (&Done, u64, &Vec<OpResult>)> {
        self.done.iter().filter_map(|d| match &d.completion.outcome {
            Outcome::Committed { ts, results } => Some((d, *ts, results)),
            _ => None,
        })
    }

    /// Replays every committed transaction in `ts` order on one map and checks each result;
    /// returns the replayed map. A one-shard read-only transaction's `ts` is only an upper
    /// bound on its instant (see the client's documentation): its results must be the map's at
    /// some instant between its call and its `ts`.
    fn replay(&self) -> ShardState {
        let mut order: Vec<(u64, &Done, &Vec<OpResult>)> = self
            .committed()
            .map(|(d, ts, results)| (ts, d, results))
            .collect();
        order.sort_by_key(|(ts, ..)| *ts);
        assert!(
            order.windows(2).all(|w| w[0].0 < w[1].0),
            "two transactions share a ts"
        );
        let mut model = ShardState::default();
        // Per key, the values it took and the ts each was written at.
        let mut history: HashMap<Bytes, Vec<(u64, Option<Bytes>)>> = HashMap::new();
        let mut one_shard_reads = Vec::new();
        for (ts, d, results) in order {
            if d.txn.is_read_only() && self.shards_of(&d.txn) == 1 {
                one_shard_reads.push((ts, d, results));
                continue;
            }
            let got: Vec<OpResult> = d.txn.ops.iter().map(|op| model.apply(op)).collect();
            assert_eq!(&got, results, "client {} at ts {ts}: {:?}", d.client, d.txn);
            for op in d.txn.ops.iter().filter(|op| op.is_write()) {
                let now = model.apply(&Op::Get {
                    key: op.key().clone(),
                });
                let OpResult::Value(value) = now else {
                    unreachable!()
                };
                history.entry(op.key().clone()).or_default().push((ts, value));
            }
        }
        let value_at = |key: &Bytes, t: u64| -> Option<Bytes> {
            let writes = history.get(key).map(Vec::as_slice).unwrap_or_default();
            writes
                .iter()
                .rev()
                .find(|(w, _)| *w <= t)
                .and_then(|(_, v)| v.clone())
        };
        for (ts, d, results) in one_shard_reads {
            let call_ns = d.completion.call_ns;
            let mut instants = vec![call_ns];
            for op in &d.txn.ops {
                let writes = history.get(op.key()).map(Vec::as_slice).unwrap_or_default();
                instants.extend(
                    writes
                        .iter()
                        .map(|(w, _)| *w)
                        .filter(|w| (call_ns..ts).contains(w)),
                );
            }
            let seen_at = |t: u64| {
                d.txn
                    .ops
                    .iter()
                    .zip(results)
                    .all(|(op, r)| *r == OpResult::Value(value_at(op.key(), t)))
            };
            assert!(
                instants.into_iter().any(seen_at),
                "client {} between {call_ns} and {ts}: {:?} gave {results:?}",
                d.client,
                d.txn
            );
        }
        model
    }

    fn shards_of(&self, txn: &Txn) -> usize {
        let shards: std::collections::BTreeSet<u32> =
            txn.ops.iter().map(|op| self.layout.shard_of(op.key())).collect();
        shards.len()
    }
}

/// Two keys on two different shards of `layout`.
fn keys_on_two_shards(layout: &Layout) -> (Bytes, Bytes) {
    let x = b("x");
    let y = (0..)
        .map(|i| b(&format!("y{i}")))
        .find(|y| layout.shard_of(y) != layout.shard_of(&x))
        .expect("some key lands elsewhere");
    (x, y)
}
