//! NetChain's switch program (paper 4, Algorithm 1; 5, Algorithms 2 and 3), one program of a
//! software switch's pipeline (`onepipe_fabric::Pipeline`, protocol `NETCHAIN`).
//!
//! A query names its chain; SC counts the switches still to visit. A switch that is the query's
//! next hop runs Algorithm 1 on it: the head (the first switch to see a write, which has no
//! version yet) gives the write a version and stores it; a replica stores a write only if its
//! version is above the stored one and drops it otherwise; the tail answers the client. Reads
//! travel the chain reversed, so the tail serves them. A switch that is not the next hop
//! forwards the query along a shortest path, after the controller's rules for the next hop
//! (failover, recovery) have had their say.
//!
//! Where software goes past a P4 switch (docs/netchain.md, "What a switch could not do"): a
//! processed query is re-emitted from a queue rather than rewritten in place (a read's answer
//! grows by its value), and the value may be longer than 128 bytes if configured so.

mod budget;
mod replay;
mod rules;
mod store;

pub use budget::{COMPARE_AND_SWAP, READ_ANSWERS};
pub use rules::{Action, Rules, RulesFull};
pub use store::{Slot, Store, StoreError};

use crate::key::Key;
use onepipe_fabric::{Hints, Node, PortId, Route, SwitchPaths, Wiring};
use onepipe_wire::Instant;
use onepipe_wire::netchain::{
    CHAIN_MAX, Chain, GROUP_ALL, Opcode, Packet, Query, Repr, Rule, RuleKind, SEQUENCE_BITS, Status, flags,
};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// Slots of the register arrays (keys this switch can hold).
    pub slots: u32,
    /// Bytes per slot: the largest value.
    pub value_bytes_max: usize,
    /// Frames this program holds per port, waiting for the port.
    pub queue_frames_max: usize,
    /// Failover and recovery rules the table holds.
    pub rules_max: usize,
    /// The only process whose control messages are obeyed (the controller), and where clients'
    /// inserts go.
    pub controller: Option<u32>,
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            slots: 64 * 1024,
            value_bytes_max: 128,
            queue_frames_max: 1024,
            rules_max: 64 * 1024,
            controller: None,
        }
    }
}

/// What the switch did, by reason for drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub reads: u64,
    pub writes: u64,
    /// Queries forwarded toward their next hop without being processed here.
    pub forwarded: u64,
    pub replies: u64,
    pub control: u64,
    /// Frames that are not NetChain messages.
    pub malformed: u64,
    /// Frames from a process that named another process, or sent what only switches send.
    pub spoofed: u64,
    /// Control messages from a process that is not the controller.
    pub control_refused: u64,
    pub no_route: u64,
    pub queue_full: u64,
    /// Writes whose version was not above the stored one (Algorithm 1, line 8).
    pub stale_writes: u64,
    /// Queries dropped by a recovery rule (Algorithm 3, phase 1).
    pub stopped: u64,
    /// Queries whose every remaining chain switch has failed.
    pub chain_exhausted: u64,
    /// Writes that reached a replica without the key (the controller has not installed it).
    pub unknown_at_replica: u64,
    /// Writes to a key whose version is at its maximum.
    pub versions_exhausted: u64,
    /// Writes the head had sequenced already (a network duplicate), or too old to tell.
    pub duplicates: u64,
}

/// Where a frame goes, decided without changing anything (`classify` and `handle_frame` both
/// ask).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Drop(Reason),
    /// Sent on `port` after the rewrite.
    Forward {
        port: PortId,
        rewrite: Option<Rewrite>,
    },
    /// Processed here (a query for which this switch is the next hop, after the rewrite).
    Process {
        rewrite: Option<Rewrite>,
    },
    /// A control message for this switch.
    Control,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    Malformed,
    Spoofed,
    ControlRefused,
    NoRoute,
    Stopped,
    Exhausted,
}

/// What the rules do to a query's header on its way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rewrite {
    sc: u8,
    chain: Chain,
    /// The chain is spent after a write's tail failed: the query is the reply (Algorithm 2,
    /// line 6).
    reply: bool,
}

/// Where the rules leave a query.
enum Resolved {
    /// Next hop after the rewrite (if any).
    Next(u16, Option<Rewrite>),
    Reply(Rewrite),
    Drop(Reason),
}

pub struct NetchainSwitch {
    me: u16,
    wiring: Arc<Wiring>,
    paths: SwitchPaths,
    avoided: Vec<bool>,
    /// Per port: the process behind it, for the source check.
    port_process: Vec<Option<u32>>,
    store: Store,
    rules: Rules,
    /// Per virtual group: the session this switch's versions start at when it is the head.
    sessions: HashMap<u16, u64>,
    replay: replay::Replay,
    queues: Vec<VecDeque<Vec<u8>>>,
    queued_frames: usize,
    config: SwitchConfig,
    counters: Counters,
}

impl NetchainSwitch {
    pub fn new(me: usize, wiring: Arc<Wiring>, config: SwitchConfig) -> NetchainSwitch {
        assert!(me < wiring.switch_count() && me < u16::MAX as usize);
        let paths = SwitchPaths::new(&wiring, me, &|_| false);
        let ports = wiring.switch_ports[me].len();
        let port_process = (0..ports)
            .map(|p| paths.process_at(&wiring, p as PortId))
            .collect();
        NetchainSwitch {
            me: me as u16,
            avoided: vec![false; wiring.switch_count()],
            paths,
            port_process,
            store: Store::new(config.slots, config.value_bytes_max),
            rules: Rules::new(config.rules_max),
            sessions: HashMap::new(),
            replay: replay::Replay::new(wiring.process_count()),
            queues: vec![VecDeque::new(); ports],
            queued_frames: 0,
            wiring,
            config,
            counters: Counters::default(),
        }
    }

    pub fn id(&self) -> u16 {
        self.me
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    pub fn store(&self) -> &Store {
        &self.store
    }
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    pub fn invariants(&self) {
        self.store.invariants();
        assert!(self.rules.len() <= self.config.rules_max);
        assert_eq!(
            self.queued_frames,
            self.queues.iter().map(VecDeque::len).sum::<usize>()
        );
        assert!(
            self.queues
                .iter()
                .all(|q| q.len() <= self.config.queue_frames_max)
        );
    }

    fn decide(&self, port: PortId, frame: &[u8]) -> Decision {
        let Ok(p) = Packet::new_checked(frame) else {
            return Decision::Drop(Reason::Malformed);
        };
        let op = p.opcode();
        if let Some(&Some(process)) = self.port_process.get(port as usize)
            && self.config.controller != Some(process)
        {
            // A client speaks only for itself, never as a switch or the tail, and does not
            // control. (The controller also answers clients' inserts.)
            if op.is_control() {
                return Decision::Drop(Reason::ControlRefused);
            }
            if p.process() != process || p.is_reply() {
                return Decision::Drop(Reason::Spoofed);
            }
        }
        let to_process = |process: Option<u32>| match process.and_then(|p| self.paths.port_to_process(p)) {
            Some(port) => Decision::Forward { port, rewrite: None },
            None => Decision::Drop(Reason::NoRoute),
        };
        if p.is_reply() {
            return to_process(Some(p.process()));
        }
        if op == Opcode::Insert {
            return to_process(self.config.controller);
        }
        let next = if op == Opcode::Rule {
            Some(p.rule_target())
        } else {
            p.next_hop()
        };
        let Some(next) = next else {
            return Decision::Drop(Reason::Malformed);
        };
        if op.is_control() {
            return match self.port_to_switch(next) {
                _ if next == self.me => Decision::Control,
                Some(port) => Decision::Forward { port, rewrite: None },
                None => Decision::Drop(Reason::NoRoute),
            };
        }
        let chain = p.chain_list();
        let sequenced = p.flags() & flags::SEQUENCED != 0;
        match self.resolve(op, p.group(), p.sc(), chain, sequenced) {
            Resolved::Drop(reason) => Decision::Drop(reason),
            Resolved::Next(dst, rewrite) if dst == self.me => Decision::Process { rewrite },
            Resolved::Next(dst, rewrite) => match self.port_to_switch(dst) {
                Some(port) => Decision::Forward { port, rewrite },
                None => Decision::Drop(Reason::NoRoute),
            },
            Resolved::Reply(rewrite) => match self.paths.port_to_process(p.process()) {
                Some(port) => Decision::Forward {
                    port,
                    rewrite: Some(rewrite),
                },
                None => Decision::Drop(Reason::NoRoute),
            },
        }
    }

    fn port_to_switch(&self, switch: u16) -> Option<PortId> {
        self.paths.port_to_switch(switch as usize)
    }

    /// Applies the rules for the query's next hop until it names a switch with no rule here
    /// (at most once per chain entry, plus one: a replacement may itself be skipped).
    fn resolve(&self, op: Opcode, group: u16, mut sc: u8, mut chain: Chain, sequenced: bool) -> Resolved {
        let mut rewritten = false;
        for _ in 0..=CHAIN_MAX {
            if sc == 0 {
                // Every switch left was skipped: a write that some switch stored is answered by
                // the last of them (Algorithm 2, line 6); anything else has nowhere to go.
                return match (op.is_write(), sequenced) {
                    (true, true) => Resolved::Reply(Rewrite {
                        sc,
                        chain,
                        reply: true,
                    }),
                    _ => Resolved::Drop(Reason::Exhausted),
                };
            }
            let at = chain.len() - sc as usize;
            let next = chain.as_slice()[at];
            let rewrite = rewritten.then_some(Rewrite {
                sc,
                chain,
                reply: false,
            });
            if next == self.me {
                return Resolved::Next(next, rewrite);
            }
            match self.rules.lookup(next, group) {
                None => return Resolved::Next(next, rewrite),
                Some(Action::Skip) => sc -= 1,
                Some(Action::StopAll) => return Resolved::Drop(Reason::Stopped),
                Some(Action::StopWrites) if op.is_write() => return Resolved::Drop(Reason::Stopped),
                Some(Action::StopWrites) => return Resolved::Next(next, rewrite),
                Some(Action::Replace(x)) => chain = chain.replaced(at, x),
            }
            rewritten = true;
        }
        Resolved::Drop(Reason::Exhausted)
    }

    fn count_drop(&mut self, reason: Reason) {
        let c = &mut self.counters;
        match reason {
            Reason::Malformed => c.malformed += 1,
            Reason::Spoofed => c.spoofed += 1,
            Reason::ControlRefused => c.control_refused += 1,
            Reason::NoRoute => c.no_route += 1,
            Reason::Stopped => c.stopped += 1,
            Reason::Exhausted => c.chain_exhausted += 1,
        }
    }

    /// Writes the rewrite into the frame's header.
    fn apply(frame: &mut [u8], rewrite: &Rewrite) {
        let mut p = Packet::new_unchecked(frame);
        for (i, &id) in rewrite.chain.as_slice().iter().enumerate() {
            p.set_chain(i, id);
        }
        p.set_sc(rewrite.sc);
        if rewrite.reply {
            let f = p.flags();
            p.set_flags(f | flags::REPLY);
        }
    }

    /// Algorithm 1 for a query whose next hop is this switch.
    fn process(&mut self, frame: &[u8]) {
        let Ok(Repr::Query(q)) = Repr::parse(frame) else {
            self.counters.malformed += 1;
            return;
        };
        let key = Key(q.key);
        if q.opcode == Opcode::Read {
            self.counters.reads += 1;
            let (status, value, version) = match self.store.slot_of(&key) {
                Some(s) => {
                    let slot = self.store.read(s);
                    (Status::Ok, slot.value.map(<[u8]>::to_vec), slot.version)
                }
                None => (Status::UnknownKey, None, 0),
            };
            self.reply(&q, status, value.as_deref(), version);
            return;
        }
        self.counters.writes += 1;
        if q.flags & flags::SEQUENCED == 0 {
            self.process_at_head(q, key);
        } else {
            self.process_at_replica(q, key);
        }
    }

    /// Lines 4-6: the head gives the write its version. A compare-and-swap is decided here; one
    /// that fails still goes down the chain, as a write of the value it found, so that its
    /// answer comes from the tail like every write's (a failed compare is a read of that value).
    fn process_at_head(&mut self, q: Query<'_>, key: Key) {
        if !self.replay.check_and_mark(q.process, q.request) {
            self.counters.duplicates += 1;
            return;
        }
        let Some(slot) = self.store.slot_of(&key) else {
            self.reply(&q, Status::UnknownKey, None, 0);
            return;
        };
        let new_value = if q.opcode == Opcode::Delete { None } else { q.value };
        if new_value.is_some_and(|v| v.len() > self.store.value_bytes_max()) {
            self.reply(&q, Status::ValueTooLarge, None, 0);
            return;
        }
        let current = self.store.read(slot);
        // A failed compare, or a delete of an absent key (its answer says so: Redis's DEL
        // counts the keys that existed).
        let failed_compare = match q.opcode {
            Opcode::Cas => current.value != q.expect,
            Opcode::Delete => current.value.is_none(),
            _ => false,
        };
        let (status, value) = if failed_compare {
            (Status::CasFailed, current.value.map(<[u8]>::to_vec))
        } else {
            (Status::Ok, new_value.map(<[u8]>::to_vec))
        };
        let session = self.sessions.get(&q.group).copied().unwrap_or(0) << SEQUENCE_BITS;
        // A key at the last version (2^48 writes in the top session, or a hostile frame) takes
        // no more writes: a drop, counted, rather than a version its replicas would refuse.
        let Some(next) = current.version.checked_add(1) else {
            self.counters.versions_exhausted += 1;
            return;
        };
        let version = next.max(session);
        self.store
            .write(slot, value.as_deref(), version)
            .expect("value size checked");
        let sequenced = Query {
            flags: q.flags | flags::SEQUENCED,
            status,
            version,
            value: value.as_deref(),
            ..q
        };
        self.pass_on(sequenced);
    }

    /// Lines 7-9: a replica stores a write only if it is newer.
    fn process_at_replica(&mut self, q: Query<'_>, key: Key) {
        let Some(slot) = self.store.slot_of(&key) else {
            // The head stored it, so "fail" would be a lie: the client must time out instead.
            self.counters.unknown_at_replica += 1;
            return;
        };
        if q.version <= self.store.read(slot).version {
            self.counters.stale_writes += 1;
            return;
        }
        // Known here too, should this switch become the head (failover).
        self.replay.check_and_mark(q.process, q.request);
        let value = if q.opcode == Opcode::Delete { None } else { q.value };
        if self.store.write(slot, value, q.version).is_err() {
            self.counters.malformed += 1;
            return;
        }
        self.pass_on(q);
    }

    /// Line 10: on to the next hop, or the answer if this switch is the tail.
    fn pass_on(&mut self, q: Query<'_>) {
        let sc = q.sc - 1;
        if sc == 0 {
            let value = if q.status == Status::CasFailed {
                q.value
            } else {
                None
            };
            self.reply(&q, q.status, value, q.version);
            return;
        }
        match self.resolve(q.opcode, q.group, sc, q.chain, true) {
            Resolved::Drop(reason) => self.count_drop(reason),
            Resolved::Reply(_) => {
                let value = if q.status == Status::CasFailed {
                    q.value
                } else {
                    None
                };
                self.reply(&q, q.status, value, q.version);
            }
            Resolved::Next(dst, rewrite) => {
                let chain = rewrite.map_or(q.chain, |r| r.chain);
                let sc = rewrite.map_or(sc, |r| r.sc);
                let next = Query { sc, chain, ..q };
                match self.port_to_switch(dst) {
                    Some(port) => self.enqueue(port, Repr::Query(next)),
                    None => self.counters.no_route += 1,
                }
            }
        }
    }

    /// Answers the process that asked.
    fn reply(&mut self, q: &Query<'_>, status: Status, value: Option<&[u8]>, version: u64) {
        let answer = Query {
            flags: flags::REPLY | (q.flags & flags::SEQUENCED),
            status,
            sc: 0,
            chain: Chain::default(),
            version,
            value,
            expect: None,
            ..*q
        };
        match self.paths.port_to_process(q.process) {
            Some(port) => {
                self.counters.replies += 1;
                self.enqueue(port, Repr::Query(answer));
            }
            None => self.counters.no_route += 1,
        }
    }

    fn enqueue(&mut self, port: PortId, repr: Repr<'_>) {
        let queue = &mut self.queues[port as usize];
        if queue.len() >= self.config.queue_frames_max {
            self.counters.queue_full += 1;
            return;
        }
        let mut frame = vec![0u8; repr.buffer_len()];
        repr.emit(&mut frame).expect("sized by buffer_len");
        queue.push_back(frame);
        self.queued_frames += 1;
    }

    /// A message of the controller's for this switch; answered with the same message, marked
    /// a reply, with its status.
    fn control(&mut self, frame: &[u8]) {
        self.counters.control += 1;
        match Repr::parse(frame) {
            Ok(Repr::Rule(r)) => {
                let status = self.apply_rule(&r);
                let ack = Rule {
                    flags: flags::REPLY,
                    status,
                    ..r
                };
                if let Some(port) = self.paths.port_to_process(r.process) {
                    self.enqueue(port, Repr::Rule(ack));
                }
            }
            Ok(Repr::Query(q)) => self.control_query(q),
            Err(_) => self.counters.malformed += 1,
        }
    }

    fn control_query(&mut self, q: Query<'_>) {
        let key = Key(q.key);
        let (status, value, version) = match q.opcode {
            Opcode::Install => (self.install(key), None, 0),
            Opcode::Remove => match self.store.remove(&key) {
                true => (Status::Ok, None, 0),
                false => (Status::UnknownKey, None, 0),
            },
            Opcode::StateRead => match self.store.slot_of(&key) {
                Some(s) => {
                    let slot = self.store.read(s);
                    (Status::Ok, slot.value.map(<[u8]>::to_vec), slot.version)
                }
                None => (Status::UnknownKey, None, 0),
            },
            Opcode::StateWrite => (self.state_write(key, q.value, q.version), None, 0),
            _ => {
                self.counters.malformed += 1;
                return;
            }
        };
        self.reply(&q, status, value.as_deref(), version);
    }

    fn install(&mut self, key: Key) -> Status {
        match self.store.install(key) {
            Ok(_) => Status::Ok,
            Err(_) => Status::TableFull,
        }
    }

    /// The controller's copy of a slot (Algorithm 3, lines 2 and 5): taken if newer.
    fn state_write(&mut self, key: Key, value: Option<&[u8]>, version: u64) -> Status {
        let slot = match self.store.install(key) {
            Ok(s) => s,
            Err(_) => return Status::TableFull,
        };
        if version <= self.store.read(slot).version {
            return Status::Ok;
        }
        match self.store.write(slot, value, version) {
            Ok(()) => Status::Ok,
            Err(_) => Status::ValueTooLarge,
        }
    }

    fn apply_rule(&mut self, r: &Rule) -> Status {
        let group = (r.group != GROUP_ALL).then_some(r.group);
        let set = |rules: &mut Rules, action| match rules.set(r.switch, group, action) {
            Ok(()) => Status::Ok,
            Err(RulesFull) => Status::TableFull,
        };
        match r.kind {
            RuleKind::Skip => set(&mut self.rules, Action::Skip),
            RuleKind::StopWrites => set(&mut self.rules, Action::StopWrites),
            RuleKind::StopAll => set(&mut self.rules, Action::StopAll),
            RuleKind::Replace => set(&mut self.rules, Action::Replace(r.replacement)),
            RuleKind::Clear => {
                self.rules.clear(r.switch, group);
                Status::Ok
            }
            RuleKind::RouteAround => {
                let Some(mark) = self.avoided.get_mut(r.switch as usize) else {
                    return Status::UnknownKey;
                };
                *mark = r.session != 0;
                let avoided = &self.avoided;
                self.paths = SwitchPaths::new(&self.wiring, self.me as usize, &|s| avoided[s]);
                Status::Ok
            }
            RuleKind::Session => {
                if r.group == GROUP_ALL {
                    return Status::UnknownKey;
                }
                self.sessions.insert(r.group, r.session);
                Status::Ok
            }
        }
    }
}

impl Node for NetchainSwitch {
    fn classify(&self, _: Instant, port: PortId, frame: &[u8]) -> Route {
        match self.decide(port, frame) {
            Decision::Drop(_) => Route::Drop,
            Decision::Forward { port, .. } => Route::Forward(port),
            Decision::Process { .. } | Decision::Control => Route::Consume,
        }
    }

    fn handle_frame(&mut self, _: Instant, port: PortId, frame: &mut [u8], route: Route) {
        let decision = self.decide(port, frame);
        match (decision, route) {
            (Decision::Drop(reason), _) => self.count_drop(reason),
            (Decision::Forward { rewrite, .. }, Route::Forward(_)) => {
                if let Some(r) = rewrite {
                    Self::apply(frame, &r);
                }
                self.counters.forwarded += 1;
            }
            (Decision::Process { rewrite }, Route::Consume) => {
                if let Some(r) = rewrite {
                    Self::apply(frame, &r);
                }
                self.process(frame);
            }
            (Decision::Control, Route::Consume) => self.control(frame),
            // The runtime dropped it (no link on that port): count it where it was going.
            _ => self.counters.no_route += 1,
        }
    }

    fn poll_transmit(&mut self, _: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let frame = self.queues.get_mut(port as usize)?.pop_front()?;
        self.queued_frames -= 1;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for NetchainSwitch {
    fn wants_transmit(&self) -> bool {
        self.queued_frames > 0
    }
}

#[cfg(test)]
mod tests;
