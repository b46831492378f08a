//! NetChain's controller (paper 5): installs inserted keys on their chains, and handles a
//! switch's failure in two steps:
//! - **fast failover** (Algorithm 2): the network routes around the failed switch, and its
//!   neighbours skip it in every chain;
//! - **failure recovery** (Algorithm 3), one virtual group at a time: a live switch outside the
//!   group's chain is chosen; the group's state is copied to it from a reference (the failed
//!   switch's successor, or its predecessor if it was the tail) while the shortened chain
//!   serves; the neighbours stop the group's writes (its reads too, for a tail); after a drain
//!   the copy is finished; a new head gets a higher session; the neighbours send the group's
//!   queries to the new switch.
//!
//! The controller is a process of the fabric and speaks NetChain's control messages in band,
//! each retransmitted until acknowledged (every one is idempotent at the switch), at most
//! `window` at once. Detecting the failure is not NetChain's part (paper 5: "detected by the
//! network controller using existing techniques"): the runtime reports it
//! ([`Controller::switch_failed`]).

mod probe;
mod recovery;

pub use probe::ProbeConfig;

use crate::key::Key;
use crate::ring::Ring;
use onepipe_fabric::{Hints, Node, Peer, PortId, Route, Wiring};
use onepipe_wire::netchain::{Chain, GROUP_ALL, Opcode, Query, Repr, Rule, RuleKind, Status, flags};
use onepipe_wire::{Duration, Instant};
use recovery::Recovery;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// The controller's process.
    pub process: u32,
    /// How long a control message waits for its acknowledgement before it is sent again.
    pub retransmit_after: Duration,
    /// Control messages in flight at once.
    pub window: usize,
    /// How long phase 1 of a recovery waits, after the stop rules are in, for queries already
    /// past them to land, before the final copy.
    pub drain: Duration,
    /// Seeds the choice of the switch that takes a failed one's place.
    pub seed: u64,
    /// Detect failed switches by heartbeat ([`ProbeConfig`]); `None`: the runtime reports them
    /// ([`Controller::switch_failed`]).
    pub probe: Option<ProbeConfig>,
}

impl ControllerConfig {
    pub fn new(process: u32) -> ControllerConfig {
        ControllerConfig {
            process,
            retransmit_after: Duration::from_millis(10),
            window: 64,
            drain: Duration::from_millis(1),
            seed: 1,
            probe: None,
        }
    }
}

/// Clients' inserts in progress at once; more are dropped (their clients retry), so that a flood
/// of inserts cannot grow the controller's queues without bound.
pub const INSERTS_IN_PROGRESS_MAX: usize = 16 * 1024;

/// What the controller reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Every neighbour skips the switch: its chains serve again (Algorithm 2 done).
    FailedOver { switch: u16, at: Instant },
    /// A virtual group's chain has its full length again.
    GroupRecovered { group: u16, chain: Chain, at: Instant },
    /// Every group of the failed switch is recovered.
    Recovered { switch: u16, at: Instant },
    /// A group could not be recovered: no live switch is outside its chain.
    Unrecoverable { group: u16 },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerCounters {
    pub inserts: u64,
    pub control_sent: u64,
    pub retransmits: u64,
    pub acks: u64,
    /// Frames that were neither acknowledgements it waits for nor inserts.
    pub ignored: u64,
    /// Switches failed because they stopped answering probes.
    pub detected: u64,
    /// Clients' inserts dropped because [`INSERTS_IN_PROGRESS_MAX`] were in progress.
    pub inserts_refused: u64,
}

/// Why a control message was sent: what its acknowledgement advances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Insert(u64),
    Failover(u16),
    Recovery,
    /// A read of the reference's slot, whose answer is copied to the new switch.
    SyncRead,
}

struct Pending {
    frame: Vec<u8>,
    target: u16,
    purpose: Purpose,
    deadline: Instant,
}

struct Insert {
    client: u32,
    request: u64,
    key: Key,
    group: u16,
    remaining: usize,
    status: Status,
}

pub struct Controller {
    config: ControllerConfig,
    wiring: Arc<Wiring>,
    ring: Ring,
    /// Installed keys, by virtual group: what a recovery copies.
    keys: HashMap<u16, BTreeSet<Key>>,
    failed: BTreeSet<u16>,
    /// Per group: the session of its current head.
    sessions: HashMap<u16, u64>,
    next_request: u64,
    /// Messages to send (not yet in flight), and those awaiting acknowledgement.
    queued: VecDeque<(u64, Pending)>,
    in_flight: HashMap<u64, Pending>,
    /// Messages in flight whose deadline passed at a `handle_timeout`, to send again at the next
    /// `poll_transmit`: once handled, a deadline is no longer a timeout (`poll_timeout` must
    /// not stay in the past, or a runtime that cannot transmit at once spins on the timer).
    due: VecDeque<u64>,
    /// Frames to send that expect no acknowledgement (answers to clients).
    answers: VecDeque<Vec<u8>>,
    inserts: HashMap<u64, Insert>,
    next_insert: u64,
    failovers: HashMap<u16, usize>,
    recovery: Recovery,
    events: VecDeque<Event>,
    counters: ControllerCounters,
    probes: Option<probe::Probes>,
}

impl Controller {
    pub fn new(config: ControllerConfig, wiring: Arc<Wiring>, ring: Ring) -> Controller {
        assert!(config.window >= 1);
        let probes = config
            .probe
            .map(|p| probe::Probes::new(p, wiring.switch_count(), Instant::ZERO));
        Controller {
            recovery: Recovery::new(config.seed),
            config,
            wiring,
            ring,
            keys: HashMap::new(),
            failed: BTreeSet::new(),
            sessions: HashMap::new(),
            next_request: 1,
            queued: VecDeque::new(),
            in_flight: HashMap::new(),
            due: VecDeque::new(),
            answers: VecDeque::new(),
            inserts: HashMap::new(),
            next_insert: 0,
            failovers: HashMap::new(),
            events: VecDeque::new(),
            counters: ControllerCounters::default(),
            probes,
        }
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }
    pub fn counters(&self) -> &ControllerCounters {
        &self.counters
    }
    pub fn failed(&self) -> &BTreeSet<u16> {
        &self.failed
    }
    /// Control messages not yet acknowledged.
    pub fn outstanding(&self) -> usize {
        self.queued.len() + self.in_flight.len()
    }
    /// Whether a recovery is in progress or waiting for one to finish.
    pub fn recovering(&self) -> bool {
        self.recovery.busy()
    }
    pub fn keys(&self) -> usize {
        self.keys.values().map(BTreeSet::len).sum()
    }

    /// Installs `keys` on their chains (the store's initial contents); nobody is answered.
    pub fn preload(&mut self, now: Instant, keys: impl IntoIterator<Item = Key>) {
        for key in keys {
            self.insert(now, key, None);
        }
    }

    /// Algorithm 2, then Algorithm 3 once every earlier recovery is done.
    pub fn switch_failed(&mut self, now: Instant, switch: u16) {
        if (switch as usize) >= self.wiring.switch_count() || !self.failed.insert(switch) {
            return;
        }
        // Messages to the failed switch will never be acknowledged.
        self.forget_target(now, switch);
        let mut sent = 0;
        for s in self.live_switches() {
            self.send_rule(
                now,
                s,
                RuleKind::RouteAround,
                GROUP_ALL,
                switch,
                0,
                1,
                Purpose::Failover(switch),
            );
            sent += 1;
        }
        for n in self.live_neighbours(switch) {
            self.send_rule(
                now,
                n,
                RuleKind::Skip,
                GROUP_ALL,
                switch,
                0,
                0,
                Purpose::Failover(switch),
            );
            sent += 1;
        }
        if sent == 0 {
            self.events.push_back(Event::FailedOver { switch, at: now });
        } else {
            self.failovers.insert(switch, sent);
        }
        let groups: Vec<u16> = self.ring.groups_of(switch).collect();
        self.recovery.enqueue(switch, groups);
        self.invariants();
    }

    fn live_switches(&self) -> Vec<u16> {
        (0..self.wiring.switch_count() as u16)
            .filter(|s| !self.failed.contains(s))
            .collect()
    }

    fn live_neighbours(&self, switch: u16) -> Vec<u16> {
        let mut n: Vec<u16> = self.wiring.switch_ports[switch as usize]
            .iter()
            .filter_map(|p| match p.peer {
                Peer::Switch { switch, .. } => Some(switch as u16),
                Peer::Process(_) => None,
            })
            .filter(|s| !self.failed.contains(s))
            .collect();
        n.sort_unstable();
        n.dedup();
        n
    }

    fn forget_target(&mut self, now: Instant, switch: u16) {
        let mut gone: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, p)| p.target == switch)
            .map(|(&r, _)| r)
            .collect();
        gone.sort_unstable();
        for r in gone {
            let p = self.in_flight.remove(&r).expect("listed");
            self.acknowledged(now, p.purpose, Status::Ok, None);
        }
        let (gone, kept): (Vec<_>, Vec<_>) = self.queued.drain(..).partition(|(_, p)| p.target == switch);
        self.queued = kept.into();
        for (_, p) in gone {
            self.acknowledged(now, p.purpose, Status::Ok, None);
        }
    }

    /// Installs `key` on its group's chain (and on the switch joining it, if the group is
    /// being recovered); answers `client` when every switch has acknowledged.
    fn insert(&mut self, now: Instant, key: Key, client: Option<(u32, u64)>) {
        self.counters.inserts += 1;
        let group = self.ring.group_of(&key);
        let mut targets: Vec<u16> = self.ring.chain(group).expect("own group").as_slice().to_vec();
        targets.extend(self.recovery.joining(group));
        targets.retain(|s| !self.failed.contains(s));
        let id = self.next_insert;
        self.next_insert += 1;
        let (client, request) = client.unwrap_or((u32::MAX, 0));
        self.inserts.insert(
            id,
            Insert {
                client,
                request,
                key,
                group,
                remaining: targets.len(),
                status: Status::Ok,
            },
        );
        for s in targets {
            self.send_query(now, s, Opcode::Install, key, group, None, 0, Purpose::Insert(id));
        }
        if self.inserts[&id].remaining == 0 {
            self.finish_insert(id);
        }
    }

    fn finish_insert(&mut self, id: u64) {
        let i = self.inserts.remove(&id).expect("in progress");
        if i.status == Status::Ok {
            self.keys.entry(i.group).or_default().insert(i.key);
        }
        if i.client != u32::MAX {
            let answer = Query {
                opcode: Opcode::Insert,
                flags: flags::REPLY,
                status: i.status,
                sc: 0,
                process: i.client,
                request: i.request,
                chain: Chain::default(),
                group: i.group,
                version: 0,
                key: i.key.0,
                value: None,
                expect: None,
            };
            self.answers.push_back(emit(Repr::Query(answer)));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_query(
        &mut self,
        now: Instant,
        target: u16,
        opcode: Opcode,
        key: Key,
        group: u16,
        value: Option<&[u8]>,
        version: u64,
        purpose: Purpose,
    ) {
        let request = self.take_request();
        let q = Query {
            opcode,
            flags: 0,
            status: Status::Ok,
            sc: 1,
            process: self.config.process,
            request,
            chain: Chain::new(&[target]).expect("one switch"),
            group,
            version,
            key: key.0,
            value,
            expect: None,
        };
        self.queue(now, request, target, emit(Repr::Query(q)), purpose);
    }

    #[allow(clippy::too_many_arguments)]
    fn send_rule(
        &mut self,
        now: Instant,
        target: u16,
        kind: RuleKind,
        group: u16,
        switch: u16,
        replacement: u16,
        session: u64,
        purpose: Purpose,
    ) {
        let request = self.take_request();
        let r = Rule {
            flags: 0,
            status: Status::Ok,
            process: self.config.process,
            request,
            target,
            kind,
            group,
            switch,
            replacement,
            session,
        };
        self.queue(now, request, target, emit(Repr::Rule(r)), purpose);
    }

    fn take_request(&mut self) -> u64 {
        let r = self.next_request;
        self.next_request += 1;
        r
    }

    fn queue(&mut self, now: Instant, request: u64, target: u16, frame: Vec<u8>, purpose: Purpose) {
        let pending = Pending {
            frame,
            target,
            purpose,
            deadline: now,
        };
        self.queued.push_back((request, pending));
    }

    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        match Repr::parse(frame) {
            Ok(Repr::Query(q)) if q.flags & flags::REPLY == 0 && q.opcode == Opcode::Insert => {
                if self.inserts.len() >= INSERTS_IN_PROGRESS_MAX {
                    // Busy: the client's attempt times out and it tries again later.
                    self.counters.inserts_refused += 1;
                } else {
                    self.insert(now, Key(q.key), Some((q.process, q.request)));
                }
            }
            Ok(Repr::Query(q)) if q.flags & flags::REPLY != 0 => {
                self.ack(
                    now,
                    q.request,
                    q.status,
                    Some((Key(q.key), q.group, q.value, q.version)),
                );
            }
            Ok(Repr::Rule(r)) if r.flags & flags::REPLY != 0 => {
                if !self.probes.as_mut().is_some_and(|p| p.answered(r.request)) {
                    self.ack(now, r.request, r.status, None);
                }
            }
            _ => self.counters.ignored += 1,
        }
        self.advance(now);
        self.invariants();
    }

    fn ack(&mut self, now: Instant, request: u64, status: Status, slot: Option<Slot<'_>>) {
        let Some(p) = self.in_flight.remove(&request) else {
            self.counters.ignored += 1;
            return;
        };
        self.counters.acks += 1;
        self.acknowledged(now, p.purpose, status, slot);
    }

    fn acknowledged(&mut self, now: Instant, purpose: Purpose, status: Status, slot: Option<Slot<'_>>) {
        match purpose {
            Purpose::Insert(id) => {
                let Some(i) = self.inserts.get_mut(&id) else {
                    return;
                };
                if status != Status::Ok {
                    i.status = status;
                }
                i.remaining -= 1;
                if i.remaining == 0 {
                    self.finish_insert(id);
                }
            }
            Purpose::Failover(switch) => {
                let Some(n) = self.failovers.get_mut(&switch) else {
                    return;
                };
                *n -= 1;
                if *n == 0 {
                    self.failovers.remove(&switch);
                    self.events.push_back(Event::FailedOver { switch, at: now });
                }
            }
            Purpose::Recovery => self.recovery.acknowledged(),
            Purpose::SyncRead => {
                self.recovery.acknowledged();
                if let Some((key, group, value, version)) = slot
                    && status == Status::Ok
                    && let Some(joining) = self.recovery.joining(group)
                {
                    self.recovery.expect_ack();
                    self.send_query(
                        now,
                        joining,
                        Opcode::StateWrite,
                        key,
                        group,
                        value,
                        version,
                        Purpose::Recovery,
                    );
                }
            }
        }
    }

    /// Moves the recovery on when its step is done.
    fn advance(&mut self, now: Instant) {
        let failover_done = self.failovers.is_empty();
        recovery::advance(self, now, failover_done);
    }

    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if let Some(frame) = self.answers.pop_front() {
            buf[..frame.len()].copy_from_slice(&frame);
            return Some(frame.len());
        }
        // A message due again, else a new one if the window has room.
        let due = std::iter::from_fn(|| self.due.pop_front())
            .find(|r| self.in_flight.contains_key(r))
            .or_else(|| {
                self.in_flight
                    .iter()
                    .filter(|(_, p)| p.deadline <= now)
                    .map(|(&r, _)| r)
                    .min()
            });
        let request = match due {
            Some(r) => {
                self.counters.retransmits += 1;
                r
            }
            None if self.in_flight.len() < self.config.window => {
                let (r, p) = self.queued.pop_front()?;
                self.in_flight.insert(r, p);
                self.counters.control_sent += 1;
                r
            }
            None => return None,
        };
        let p = self.in_flight.get_mut(&request).expect("in flight");
        p.deadline = now + self.config.retransmit_after;
        buf[..p.frame.len()].copy_from_slice(&p.frame);
        Some(p.frame.len())
    }

    pub fn wants_transmit(&self, now: Instant) -> bool {
        !self.answers.is_empty()
            || !self.due.is_empty()
            || (!self.queued.is_empty() && self.in_flight.len() < self.config.window)
            || self.in_flight.values().any(|p| p.deadline <= now)
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let retransmit = self
            .in_flight
            .values()
            .map(|p| p.deadline)
            .filter(|&d| d != DUE)
            .min();
        let probe = self.probes.as_ref().and_then(probe::Probes::next_at);
        [retransmit, self.recovery.drain_deadline(), probe]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.probe(now);
        // In request order: the map's order differs from run to run, a simulation's must not.
        let mut due: Vec<u64> = self
            .in_flight
            .iter_mut()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(&r, p)| {
                p.deadline = DUE;
                r
            })
            .collect();
        due.sort_unstable();
        self.due.extend(due);
        self.advance(now);
        self.invariants();
    }

    /// Sends the probes that are due, and fails the switches that missed too many.
    fn probe(&mut self, now: Instant) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        let failed = &self.failed;
        let due = probes.due(now, |s| !failed.contains(&s));
        for d in due {
            match d {
                probe::Due::Fail(s) => {
                    self.counters.detected += 1;
                    self.switch_failed(now, s);
                }
                probe::Due::Send(s) => {
                    let request = self.take_request();
                    // A no-op: clearing the rules about the switch itself, which it never has.
                    let r = Rule {
                        flags: 0,
                        status: Status::Ok,
                        process: self.config.process,
                        request,
                        target: s,
                        kind: RuleKind::Clear,
                        group: GROUP_ALL,
                        switch: s,
                        replacement: 0,
                        session: 0,
                    };
                    self.answers.push_back(emit(Repr::Rule(r)));
                    self.probes.as_mut().expect("probing").sent(s, request);
                }
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn invariants(&self) {
        assert!(self.in_flight.len() <= self.config.window);
        assert!(self.due.len() <= self.config.window + self.in_flight.len());
        assert!(self.inserts.values().all(|i| i.remaining > 0));
        assert!(
            self.failed
                .iter()
                .all(|&s| (s as usize) < self.wiring.switch_count())
        );
    }
}

/// The controller as a process of the fabric (one port, to its ToR).
impl Node for Controller {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        Controller::handle_frame(self, now, frame);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        Controller::poll_transmit(self, now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Controller::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Controller::handle_timeout(self, now);
    }
}

impl Hints for Controller {}

/// The deadline of a message listed in `Controller::due`: sent again at the next transmit.
const DUE: Instant = Instant::from_nanos(u64::MAX);

/// A slot's copy in an acknowledgement: key, group, value, version.
type Slot<'a> = (Key, u16, Option<&'a [u8]>, u64);

fn emit(repr: Repr<'_>) -> Vec<u8> {
    let mut frame = vec![0u8; repr.buffer_len()];
    repr.emit(&mut frame).expect("sized by buffer_len");
    frame
}

#[cfg(test)]
mod tests;
