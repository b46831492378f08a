//! A small discrete-event network for tests: every role of a Paxos deployment addressed by its
//! [`Addr`], messages delivered after a seeded delay (so they reorder), lost or duplicated
//! with seeded probabilities, roles killed at a time. Replicas are learners that answer every
//! client and keep a session per client, as the store's replicas do.

use crate::acceptor::{Acceptor, AcceptorConfig};
use crate::coordinator::{Coordinator, CoordinatorConfig};
use crate::learner::{Learner, LearnerConfig};
use crate::proposer::{Completion, Proposer, ProposerConfig};
use onepipe_fabric::hash::SplitMix;
use onepipe_wire::paxos::{Addr, Message, MsgType};
use onepipe_wire::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

pub const PRIMARY: Addr = Addr::Switch(0);
pub const BACKUP: Addr = Addr::Process(100);

pub fn acceptor_addr(i: usize) -> Addr {
    Addr::Switch(1 + i as u16)
}
pub fn learner_addr(i: usize) -> Addr {
    Addr::Process(10 + i as u32)
}
pub fn proposer_addr(i: usize) -> Addr {
    Addr::Process(20 + i as u32)
}

#[derive(Clone, Debug)]
pub struct Setup {
    pub seed: u64,
    pub acceptors: usize,
    pub learners: usize,
    pub proposers: usize,
    pub clients_per_proposer: usize,
    pub requests_per_client: u64,
    pub partitions: u16,
    pub window: u32,
    pub range: u32,
    pub loss: f64,
    pub duplicate: f64,
    /// Delay of each message: `latency` plus up to `jitter` (uniform), so messages reorder.
    pub latency: Duration,
    pub jitter: Duration,
    /// Roles that stop at a time (fail-stop).
    pub kills: Vec<(Addr, Instant)>,
    /// Replicas that come back at a time, from their log (a restart from the store): a new
    /// learner that starts after the last instance the replica applied.
    pub restarts: Vec<(usize, Instant)>,
    /// Delivered values each learner keeps for its peers' catch-ups.
    pub retain: usize,
    /// No loss after this time, so that the run can finish.
    pub heal_at: Instant,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            seed: 1,
            acceptors: 3,
            learners: 3,
            proposers: 2,
            clients_per_proposer: 4,
            requests_per_client: 20,
            partitions: 1,
            window: 64,
            range: 16,
            loss: 0.0,
            duplicate: 0.0,
            latency: Duration::from_micros(10),
            jitter: Duration::from_micros(20),
            kills: Vec::new(),
            restarts: Vec::new(),
            retain: 256,
            heal_at: Instant::from_nanos(u64::MAX),
        }
    }
}

/// A learner with the replica's part: the log it applied and a session per client.
pub struct Replica {
    pub learner: Learner,
    /// `(pid, inst) -> value` in the order applied.
    pub log: BTreeMap<(u16, u64), Vec<u8>>,
    sessions: HashMap<u64, u64>,
}

/// A message on its way: when it arrives, a tie-breaker, where, the frame.
type InFlight = (Instant, u64, Addr, Vec<u8>);

pub struct Cluster {
    pub setup: Setup,
    pub now: Instant,
    rng: SplitMix,
    queue: BinaryHeap<Reverse<InFlight>>,
    sent: u64,
    pub coordinators: Vec<(Addr, Coordinator)>,
    pub acceptors: Vec<Acceptor>,
    pub replicas: Vec<Replica>,
    pub proposers: Vec<Proposer>,
    dead: HashSet<Addr>,
    /// Per client: the next request to submit.
    next_request: HashMap<u64, u64>,
    /// Every value submitted, and the requests acknowledged.
    pub submitted: HashSet<Vec<u8>>,
    pub acked: Vec<Vec<u8>>,
    pub gave_up: u64,
    /// Requests acknowledged when the first kill took effect.
    pub acked_at_kill: Option<usize>,
    pub restarted: usize,
}

fn value_of(client: u64, request: u64) -> Vec<u8> {
    format!("c{client}r{request}").into_bytes()
}

impl Cluster {
    pub fn new(setup: Setup) -> Cluster {
        let acceptors: Vec<Addr> = (0..setup.acceptors).map(acceptor_addr).collect();
        let learners: Vec<Addr> = (0..setup.learners).map(learner_addr).collect();
        let coordinators = vec![PRIMARY, BACKUP];
        let trim_quorum = setup.learners / 2 + 1;
        let coordinator = |me: Addr, owner: u8, active: bool| CoordinatorConfig {
            me,
            owner,
            acceptors: acceptors.clone(),
            learners: learners.clone(),
            trim_quorum,
            partitions: setup.partitions,
            window: setup.window,
            range: setup.range,
            phase1_timeout: Duration::from_micros(500),
            held_max: 64,
            reinits_max: 8,
            active,
        };
        let acceptor = |i: usize| AcceptorConfig {
            swid: i as u16,
            me: acceptors[i],
            partitions: setup.partitions,
            window: setup.window,
            value_bytes_max: 64,
            coordinators: coordinators.clone(),
            learners: learners.clone(),
            trim_quorum,
        };
        let learner = |i: usize| LearnerConfig {
            me: learners[i],
            index: i as u16,
            acceptors: acceptors.clone(),
            coordinators: coordinators.clone(),
            peers: learners.iter().copied().filter(|&l| l != learners[i]).collect(),
            partitions: setup.partitions,
            window: setup.window,
            retain: setup.retain,
            trim_every: (setup.window / 4) as u64,
            trim_interval: Duration::from_millis(1),
            gap_timeout: Duration::from_micros(400),
            catchup_max: 32,
        };
        let proposer = |i: usize| ProposerConfig {
            me: proposer_addr(i),
            coordinators: coordinators.clone(),
            retry_timeout: Duration::from_micros(800),
            failover_after: 3,
            tries_max: 1000,
            pending_max: 64,
        };
        let mut cluster = Cluster {
            now: Instant::ZERO,
            rng: SplitMix::new(setup.seed),
            queue: BinaryHeap::new(),
            sent: 0,
            coordinators: vec![
                (PRIMARY, Coordinator::new(coordinator(PRIMARY, 1, true))),
                (BACKUP, Coordinator::new(coordinator(BACKUP, 2, false))),
            ],
            acceptors: (0..setup.acceptors).map(|i| Acceptor::new(acceptor(i))).collect(),
            replicas: (0..setup.learners)
                .map(|i| Replica {
                    learner: Learner::new(learner(i), &vec![0; setup.partitions as usize]),
                    log: BTreeMap::new(),
                    sessions: HashMap::new(),
                })
                .collect(),
            proposers: (0..setup.proposers).map(|i| Proposer::new(proposer(i))).collect(),
            dead: HashSet::new(),
            next_request: HashMap::new(),
            submitted: HashSet::new(),
            acked: Vec::new(),
            gave_up: 0,
            acked_at_kill: None,
            restarted: 0,
            setup,
        };
        let mut out = Vec::new();
        cluster.coordinators[0]
            .1
            .start(Instant::ZERO, &mut |m| out.push(m.to_vec()));
        cluster.post(out);
        for p in 0..cluster.setup.proposers {
            for c in 0..cluster.setup.clients_per_proposer {
                cluster.submit_next(p, (p * 1000 + c) as u64);
            }
        }
        cluster
    }

    fn post(&mut self, frames: Vec<Vec<u8>>) {
        for frame in frames {
            let Some(to) = Message::peek_to(&frame) else {
                continue;
            };
            let lossy = self.now < self.setup.heal_at;
            if lossy && self.rng.chance(self.setup.loss) {
                continue;
            }
            let copies = if lossy && self.rng.chance(self.setup.duplicate) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let jitter = self.rng.next_u64() % (self.setup.jitter.as_nanos() + 1);
                let at = self.now + self.setup.latency + Duration::from_nanos(jitter);
                self.sent += 1;
                self.queue.push(Reverse((at, self.sent, to, frame.clone())));
            }
        }
    }

    fn submit_next(&mut self, proposer: usize, client: u64) {
        let request = self.next_request.entry(client).or_insert(0);
        if *request >= self.setup.requests_per_client {
            return;
        }
        *request += 1;
        let request = *request;
        let value = value_of(client, request);
        let pid = (client % self.setup.partitions as u64) as u16;
        self.submitted.insert(value.clone());
        let mut out = Vec::new();
        let now = self.now;
        self.proposers[proposer]
            .submit(now, pid, client, request, &value, &mut |m| out.push(m.to_vec()))
            .expect("room for every client");
        self.post(out);
    }

    /// Runs until every request completed, nothing is left to do, or `until`; returns whether
    /// every request completed.
    pub fn run(&mut self, until: Instant) -> bool {
        self.run_while(until, |c| !c.done())
    }

    /// Runs on (with time) until `until`, or until `go` says stop.
    pub fn run_while(&mut self, until: Instant, go: impl Fn(&Cluster) -> bool) -> bool {
        loop {
            self.kill_due();
            let next_timer = self.next_timer();
            let next_msg = self.queue.peek().map(|Reverse((at, ..))| *at);
            let at = match (next_msg, next_timer) {
                (None, None) => break,
                (Some(m), Some(t)) => m.min(t),
                (m, t) => m.or(t).expect("one is some"),
            };
            if at > until {
                break;
            }
            self.now = self.now.max(at);
            if next_msg == Some(at) {
                let Reverse((_, _, to, frame)) = self.queue.pop().expect("peeked");
                self.deliver(to, &frame);
            } else {
                self.fire_timers();
            }
            self.invariants();
            if !go(self) {
                break;
            }
        }
        self.done()
    }

    pub fn done(&self) -> bool {
        let total =
            (self.setup.proposers * self.setup.clients_per_proposer) as u64 * self.setup.requests_per_client;
        self.acked.len() as u64 + self.gave_up == total
    }

    fn kill_due(&mut self) {
        for i in 0..self.setup.restarts.len() {
            let (r, at) = self.setup.restarts[i];
            if at <= self.now && self.dead.remove(&learner_addr(r)) {
                self.setup.kills.retain(|&(a, _)| a != learner_addr(r));
                let replica = &mut self.replicas[r];
                let config = replica.learner.config().clone();
                let next: Vec<u64> = (0..self.setup.partitions)
                    .map(|pid| {
                        replica
                            .log
                            .range((pid, 0)..(pid + 1, 0))
                            .next_back()
                            .map_or(0, |(&(_, i), _)| i + 1)
                    })
                    .collect();
                replica.learner = Learner::new(config, &next);
                replica.learner.rejoin(self.now);
                self.restarted += 1;
            }
        }
        for &(addr, at) in &self.setup.kills {
            if at <= self.now && self.dead.insert(addr) && self.acked_at_kill.is_none() {
                self.acked_at_kill = Some(self.acked.len());
            }
        }
    }

    fn alive(&self, a: Addr) -> bool {
        !self.dead.contains(&a)
    }

    fn next_timer(&self) -> Option<Instant> {
        let c = self
            .coordinators
            .iter()
            .filter(|(a, _)| self.alive(*a))
            .filter_map(|(_, c)| c.poll_timeout());
        let l = self
            .replicas
            .iter()
            .enumerate()
            .filter(|(i, _)| self.alive(learner_addr(*i)))
            .filter_map(|(_, r)| r.learner.poll_timeout());
        let p = self.proposers.iter().filter_map(Proposer::poll_timeout);
        c.chain(l).chain(p).min()
    }

    fn fire_timers(&mut self) {
        let now = self.now;
        let mut out = Vec::new();
        let mut push = |m: &Message<'_>| out.push(m.to_vec());
        for (addr, c) in &mut self.coordinators {
            if !self.dead.contains(addr) && c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now, &mut push);
            }
        }
        for (i, r) in self.replicas.iter_mut().enumerate() {
            if !self.dead.contains(&learner_addr(i)) && r.learner.poll_timeout().is_some_and(|t| t <= now) {
                r.learner.handle_timeout(now, &mut push);
            }
        }
        let mut done = Vec::new();
        for p in &mut self.proposers {
            if p.poll_timeout().is_some_and(|t| t <= now) {
                p.handle_timeout(now, &mut push, &mut done);
            }
        }
        self.post(out);
        for c in done {
            if let Completion::GaveUp { client, .. } = c {
                self.gave_up += 1;
                self.submit_next((client / 1000) as usize, client);
            }
        }
    }

    fn deliver(&mut self, to: Addr, frame: &[u8]) {
        if !self.alive(to) {
            return;
        }
        let msg = Message::parse(frame).expect("the roles emit well-formed messages");
        let now = self.now;
        let mut out = Vec::new();
        let mut push = |m: &Message<'_>| out.push(m.to_vec());
        if let Some((_, c)) = self.coordinators.iter_mut().find(|(a, _)| *a == to) {
            c.handle(now, &msg, &mut push);
        } else if let Some(a) = self.acceptors.iter_mut().find(|a| a.config().me == to) {
            a.handle(&msg, &mut push);
        } else if let Some(i) = (0..self.replicas.len()).find(|&i| learner_addr(i) == to) {
            self.replica_handle(i, &msg, &mut push);
        } else if let Some(i) = (0..self.proposers.len()).find(|&i| proposer_addr(i) == to) {
            if let Some(Completion::Replied { client, request, .. }) = self.proposers[i].handle(&msg) {
                self.acked.push(value_of(client, request));
                self.post(out);
                self.submit_next(i, client);
                return;
            }
        }
        self.post(out);
    }

    fn replica_handle(&mut self, i: usize, msg: &Message<'_>, push: &mut dyn FnMut(&Message<'_>)) {
        let now = self.now;
        let r = &mut self.replicas[i];
        r.learner.handle(now, msg, push);
        while let Some(d) = r.learner.poll_delivery(now) {
            r.log.insert((d.pid, d.inst), d.value.clone());
            if let Some((client, request)) = parse_value(&d.value) {
                let last = r.sessions.entry(client).or_insert(0);
                *last = (*last).max(request);
                let proposer = proposer_addr((client / 1000) as usize);
                push(&Message {
                    inst: d.inst,
                    a: request,
                    b: client,
                    value: b"ok",
                    ..Message::new(MsgType::Reply, d.pid, learner_addr(i), proposer)
                });
            }
            r.learner.applied(now, d.pid, d.inst + 1, push);
        }
    }

    pub fn invariants(&self) {
        self.coordinators.iter().for_each(|(_, c)| c.invariants());
        self.acceptors.iter().for_each(Acceptor::invariants);
        self.replicas.iter().for_each(|r| r.learner.invariants());
    }

    /// Agreement: no two replicas applied different values for one instance. Validity: every
    /// value applied was proposed (or is a no-op). Durability: every acknowledged value was
    /// applied by some live replica.
    pub fn check(&self) -> Result<(), String> {
        let mut chosen: HashMap<(u16, u64), &Vec<u8>> = HashMap::new();
        for (i, r) in self.replicas.iter().enumerate() {
            for (k, v) in &r.log {
                if let Some(other) = chosen.insert(*k, v)
                    && other != v
                {
                    return Err(format!("replica {i} applied {v:?} at {k:?}, another {other:?}"));
                }
                if !v.is_empty() && !self.submitted.contains(v) {
                    return Err(format!("replica {i} applied {v:?}, never proposed"));
                }
            }
        }
        let applied: HashSet<&Vec<u8>> = self
            .replicas
            .iter()
            .enumerate()
            .filter(|(i, _)| self.alive(learner_addr(*i)))
            .flat_map(|(_, r)| r.log.values())
            .collect();
        for v in &self.acked {
            if !applied.contains(v) {
                return Err(format!("{v:?} acknowledged but applied by no live replica"));
            }
        }
        let conflicts: u64 = self.replicas.iter().map(|r| r.learner.counters().conflicts).sum();
        if conflicts > 0 {
            return Err(format!("{conflicts} conflicting votes"));
        }
        Ok(())
    }
}

fn parse_value(v: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(v).ok()?.strip_prefix('c')?;
    let (c, r) = s.split_once('r')?;
    Some((c.parse().ok()?, r.parse().ok()?))
}
