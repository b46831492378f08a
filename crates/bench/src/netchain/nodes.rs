//! The hosts of a NetChain run: the controller's process, which preloads the keys and learns of
//! a switch's failure when the run says so, and the clients' processes, each an agent driving
//! closed-loop clients (one call outstanding per client) and recording every attempt.

use hdrhistogram::Histogram;
use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_netchain::{Agent, Call, CallId, Controller, Event, Key, Outcome};
use onepipe_wire::Instant;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Latencies up to a minute, in nanoseconds.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// What the run and its nodes share.
#[derive(Debug)]
pub struct Shared {
    /// Set by the controller's node once its preload is acknowledged.
    pub ready: AtomicBool,
    /// Clients submit calls from this time (ns) until `end_ns`; `u64::MAX` until the run
    /// starts measuring.
    pub start_ns: AtomicU64,
    pub end_ns: AtomicU64,
    /// When the failed switch failed (ns); `u64::MAX` if none has.
    pub failed_at_ns: AtomicU64,
    /// Calls completed in the measured window, for the progress bar.
    pub completed: AtomicU64,
    pub events: Mutex<Vec<Event>>,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            ready: AtomicBool::new(false),
            start_ns: AtomicU64::new(u64::MAX),
            end_ns: AtomicU64::new(u64::MAX),
            failed_at_ns: AtomicU64::new(u64::MAX),
            completed: AtomicU64::new(0),
            events: Mutex::new(Vec::new()),
        }
    }
}

/// The controller, plus the run's two inputs to it: the keys to preload and the failure.
pub struct ControllerHost {
    pub controller: Controller,
    preload: Option<Vec<Key>>,
    /// The switch that fails, and how long after its failure the controller learns of it.
    failure: Option<(u16, u64)>,
    failure_reported: bool,
    shared: Arc<Shared>,
    /// Print each event as it happens (a controller process's log).
    print: bool,
}

impl ControllerHost {
    pub fn new(
        controller: Controller,
        preload: Vec<Key>,
        failure: Option<(u16, u64)>,
        shared: Arc<Shared>,
    ) -> Self {
        ControllerHost {
            controller,
            preload: Some(preload),
            failure,
            failure_reported: false,
            shared,
            print: false,
        }
    }

    /// Prints each event on stderr as it happens.
    pub fn printing(mut self) -> Self {
        self.print = true;
        self
    }

    /// The controller of a run: process `process` of `wiring`, placing by `ring`, drawing new
    /// switches from `seed`; it preloads `keys` and learns of `failure` (a switch, and when
    /// after it fails) as [`ControllerHost::new`] says.
    #[allow(clippy::too_many_arguments)]
    pub fn for_run(
        process: u32,
        seed: u64,
        wiring: Arc<onepipe_fabric::Wiring>,
        ring: onepipe_netchain::Ring,
        keys: Vec<Key>,
        failure: Option<(u16, u64)>,
        shared: Arc<Shared>,
    ) -> Self {
        let config = onepipe_netchain::ControllerConfig {
            seed,
            ..onepipe_netchain::ControllerConfig::new(process)
        };
        ControllerHost::new(Controller::new(config, wiring, ring), keys, failure, shared)
    }

    fn step(&mut self, now: Instant) {
        if let Some(keys) = self.preload.take() {
            self.controller.preload(now, keys);
        }
        if let Some((switch, detect_ns)) = self.failure
            && !self.failure_reported
        {
            let failed_at = self.shared.failed_at_ns.load(Ordering::Acquire);
            if failed_at != u64::MAX && now.as_nanos() >= failed_at.saturating_add(detect_ns) {
                self.failure_reported = true;
                self.controller.switch_failed(now, switch);
            }
        }
        if self.controller.outstanding() == 0 && !self.shared.ready.load(Ordering::Relaxed) {
            self.shared.ready.store(true, Ordering::Release);
        }
        let events: Vec<Event> = std::iter::from_fn(|| self.controller.poll_event()).collect();
        if self.print {
            for e in &events {
                eprintln!("netchain controller: {e:?}");
            }
        }
        if !events.is_empty() {
            self.shared.events.lock().expect("events lock").extend(events);
        }
    }
}

impl Node for ControllerHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.controller.handle_frame(now, frame);
        self.step(now);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.step(now);
        (port == 0)
            .then(|| self.controller.poll_transmit(now, buf))
            .flatten()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.controller.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.controller.handle_timeout(now);
        self.step(now);
    }
}

impl Hints for ControllerHost {}

/// The workload's knobs.
#[derive(Clone, Debug)]
pub struct Workload {
    pub keys: Arc<Vec<Key>>,
    pub write_ratio: f64,
    pub value_bytes: usize,
    /// Attempts recorded per client process, at most (bounds memory on long runs).
    pub record_max: usize,
}

/// One attempt, as the history records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub client: u32,
    pub write: bool,
    pub key: u32,
    /// Written (a write) or returned (a read; `None`: absent).
    pub value: Option<Vec<u8>>,
    pub outcome: Outcome,
    pub call_ns: u64,
    pub return_ns: u64,
}

struct CallInfo {
    /// Index into `clients`; `usize::MAX` for an open-loop call ([`ClientHost::submit_open`]).
    client: usize,
    /// The client the history names.
    id: u32,
    write: bool,
    key: u32,
    value: Option<Vec<u8>>,
}

/// A client process: an agent and its closed-loop clients.
pub struct ClientHost {
    pub agent: Agent,
    /// Global ids of this process's clients, and whether each has a call outstanding.
    clients: Vec<(u32, bool)>,
    calls: HashMap<CallId, CallInfo>,
    rng: SplitMix,
    workload: Workload,
    shared: Arc<Shared>,
    seq: u64,
    pub ops: Vec<Op>,
    /// Attempts not recorded for lack of room.
    pub ops_unrecorded: u64,
    pub read_latency_ns: Histogram<u64>,
    pub write_latency_ns: Histogram<u64>,
    /// Calls completed as `Unknown` (every attempt timed out) and refused.
    pub unknown: u64,
    pub refused: u64,
    /// Calls completed `Ok` in the measured window, in all and per interval of
    /// `ok_interval_ns` from the window's start (a throughput time series; 0: not kept).
    pub ok: u64,
    pub ok_interval_ns: u64,
    pub ok_per_interval: Vec<u64>,
    /// History ids of open-loop calls: each call is a client of its own, from here up.
    open_client_next: u32,
}

impl ClientHost {
    pub fn new(
        agent: Agent,
        clients: std::ops::Range<u32>,
        seed: u64,
        workload: Workload,
        shared: Arc<Shared>,
    ) -> Self {
        let histogram = || Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid bounds");
        ClientHost {
            agent,
            clients: clients.map(|c| (c, false)).collect(),
            calls: HashMap::new(),
            rng: SplitMix::new(seed),
            workload,
            shared,
            seq: 0,
            ops: Vec::new(),
            ops_unrecorded: 0,
            read_latency_ns: histogram(),
            write_latency_ns: histogram(),
            unknown: 0,
            refused: 0,
            ok: 0,
            ok_interval_ns: 0,
            ok_per_interval: Vec::new(),
            open_client_next: 0,
        }
    }

    /// Keeps a count of `Ok` completions per `interval_ns` of the measured window.
    pub fn count_per_interval(&mut self, interval_ns: u64) {
        self.ok_interval_ns = interval_ns;
    }

    /// One open-loop call (a generator that does not wait for answers, as the paper's client
    /// sends at line rate), named in the history as client `open_client_first + n` for its
    /// n-th call; `false` outside the measured window or when the agent is full.
    pub fn submit_open(&mut self, now: Instant, open_client_first: u32) -> bool {
        if !self.measuring(now) {
            return false;
        }
        let id = open_client_first.wrapping_add(self.open_client_next);
        let key = (self.rng.next_u64() % self.workload.keys.len() as u64) as u32;
        let write = self.rng.chance(self.workload.write_ratio);
        let k = self.workload.keys[key as usize];
        let value = write.then(|| self.value(id));
        let call = match &value {
            Some(v) => Call::Write(k, v.clone()),
            None => Call::Read(k),
        };
        let Ok(call_id) = self.agent.submit(now, call) else {
            return false;
        };
        self.open_client_next += 1;
        self.calls.insert(
            call_id,
            CallInfo {
                client: usize::MAX,
                id,
                write,
                key,
                value,
            },
        );
        true
    }

    fn count_ok(&mut self, completed_at: Instant) {
        self.ok += 1;
        if self.ok_interval_ns == 0 {
            return;
        }
        let start = self.shared.start_ns.load(Ordering::Acquire);
        let i = (completed_at.as_nanos().saturating_sub(start) / self.ok_interval_ns) as usize;
        if self.ok_per_interval.len() <= i {
            self.ok_per_interval.resize(i + 1, 0);
        }
        self.ok_per_interval[i] += 1;
    }

    fn measuring(&self, now: Instant) -> bool {
        let t = now.as_nanos();
        t >= self.shared.start_ns.load(Ordering::Acquire) && t < self.shared.end_ns.load(Ordering::Acquire)
    }

    /// Every idle client makes its next call.
    fn submit(&mut self, now: Instant) {
        if !self.measuring(now) {
            return;
        }
        for i in 0..self.clients.len() {
            if self.clients[i].1 {
                continue;
            }
            let key = (self.rng.next_u64() % self.workload.keys.len() as u64) as u32;
            let write = self.rng.chance(self.workload.write_ratio);
            let k = self.workload.keys[key as usize];
            let value = write.then(|| self.value(self.clients[i].0));
            let call = match &value {
                Some(v) => Call::Write(k, v.clone()),
                None => Call::Read(k),
            };
            let Ok(id) = self.agent.submit(now, call) else {
                return; // the agent is full: the client waits
            };
            self.clients[i].1 = true;
            self.calls.insert(
                id,
                CallInfo {
                    client: i,
                    id: self.clients[i].0,
                    write,
                    key,
                    value,
                },
            );
        }
    }

    /// A value that names its writer and is unique: `c<client>s<seq>` padded to the size.
    fn value(&mut self, client: u32) -> Vec<u8> {
        self.seq += 1;
        let mut v = format!("c{client}s{}", self.seq).into_bytes();
        v.resize(self.workload.value_bytes.max(v.len()), b'.');
        v
    }

    fn drain(&mut self) {
        while let Some(a) = self.agent.poll_attempt() {
            let Some(info) = self.calls.get(&a.call) else {
                continue;
            };
            if self.ops.len() >= self.workload.record_max {
                self.ops_unrecorded += 1;
                continue;
            }
            let value = match (&a.outcome, info.write) {
                (_, true) => info.value.clone(),
                (Outcome::Ok(v), false) => v.clone(),
                _ => None,
            };
            self.ops.push(Op {
                client: info.id,
                write: info.write,
                key: info.key,
                value,
                outcome: a.outcome,
                call_ns: a.sent_at.as_nanos(),
                return_ns: a.returned_at.as_nanos(),
            });
        }
        while let Some(done) = self.agent.poll_completion() {
            let Some(info) = self.calls.remove(&done.call) else {
                continue;
            };
            if let Some(c) = self.clients.get_mut(info.client) {
                c.1 = false;
            }
            match done.outcome {
                Outcome::Unknown => self.unknown += 1,
                Outcome::Refused(_) => self.refused += 1,
                _ => {}
            }
            if self.measuring(done.submitted_at) {
                if matches!(done.outcome, Outcome::Ok(_)) {
                    self.count_ok(done.completed_at);
                }
                let ns = done
                    .completed_at
                    .saturating_since(done.submitted_at)
                    .as_nanos()
                    .max(1);
                let h = if info.write {
                    &mut self.write_latency_ns
                } else {
                    &mut self.read_latency_ns
                };
                h.saturating_record(ns);
                self.shared.completed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Node for ClientHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.agent.handle_frame(now, frame);
        self.drain();
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        self.submit(now);
        self.agent.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.agent.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.agent.handle_timeout(now);
        self.drain();
    }
}

impl Hints for ClientHost {}
