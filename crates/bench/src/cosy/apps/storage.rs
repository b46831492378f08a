//! Predictable wakeups for a storage client (paper 003, 6.1): a latency-sensitive client
//! (LS) reads from a storage server with `depth` reads outstanding, on one CPU core shared with
//! a throughput-bound job (TB) that gets the core whenever LS does not use it.
//!
//! Modelled, not run: LS's CPU. Polling (SPDK with LS at high priority) keeps the core from
//! the first read until no read is outstanding, and sees a reply the instant it arrives.
//! Predictable wakeup (cosy): LS submits a batch of reads and sleeps until the latest of their
//! bounds, delta(request) + service + delta(reply), each known at submission; it costs the core
//! `wakeup_cost` per wakeup (the switch in and out) and `issue_cost` per read (submit it, take
//! its reply), and sees every reply of the batch when it wakes. A read with no reply by its
//! bound (a reject on the way there or back) is sent again; its latency counts from the first
//! try. The server answers each read `service` after it arrives (a RAM disk: a fixed time).
//!
//! Two wakeup bounds: the completion's (`Wakeup`: delta(request) + service + delta(reply), the
//! bound cosy promises), and the delivery's (`WakeupDelivery`): a receiver delivers a message
//! when its complete arrives and sends its own complete back, so a message is delivered one
//! control leg (hRTT/2 plus the control class's queueing) before its completion's bound
//! ([`Timing::delivery_slack`]); LS can wake that much earlier on each of the two messages.

use super::{App, AppSim, Quantiles, START, us};
use crate::cosy::CosyFabric;
use crate::cosy::sim::CosySimConfig;
use onepipe_cosy::{CosyHost, Flag, Timing};
use onepipe_sim::Budget;
use onepipe_wire::{Duration, Instant};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// How LS waits for its replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    Polling,
    /// Polling on a core shared fairly with TB: LS and TB take turns of `slice` each (a
    /// time-sharing scheduler), and LS sees a reply when its turn comes.
    PollingShared,
    Wakeup,
    WakeupDelivery,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Polling => "polling",
            Mode::PollingShared => "polling-shared",
            Mode::Wakeup => "wakeup",
            Mode::WakeupDelivery => "wakeup-delivery",
        }
    }
}

fn earlier(at: Instant, by: Duration) -> Instant {
    Instant::from_nanos(at.as_nanos().saturating_sub(by.as_nanos()))
}

/// Latency samples kept at most per run (the rest are counted).
const SAMPLES_MAX: usize = 1 << 20;
/// Replies a server holds back at most (a client has `depth` reads out, retries included).
const SERVER_QUEUE_MAX: usize = 4096;

#[derive(Clone, Debug)]
struct Read {
    /// Its first submission: latency counts from here.
    issued_at: Instant,
    /// Its reply is in by then unless cosy rejected the read or its reply.
    expect_by: Instant,
    reply_at: Option<Instant>,
    /// Cosy flagged the read's own message other than complete: no reply will come.
    lost: bool,
}

/// The parameters both sides of a storage run share.
#[derive(Clone, Debug)]
pub struct StorageParams {
    pub depth: usize,
    pub request_bytes: usize,
    pub reply_bytes: usize,
    pub service: Duration,
    pub issue_cost: Duration,
    pub wakeup_cost: Duration,
    /// A turn of LS or TB on the shared core (`PollingShared`).
    pub slice: Duration,
}

/// LS and its model of the core it shares with TB.
pub struct StorageClient {
    mode: Mode,
    server: u32,
    params: StorageParams,
    /// From a read's submission to its reply, less the request's own bound: service and
    /// the reply's bound (completion or delivery, as the mode says), known in advance.
    after_request: Duration,
    /// What the mode takes off the request's completion bound (its delivery slack, or 0).
    early: Duration,
    start: Instant,
    end: Instant,
    started: bool,
    /// The last time LS's step ran (what its timer is judged from).
    stepped_at: Instant,
    next_id: u64,
    reads: BTreeMap<u64, Read>,
    by_msg: BTreeMap<u32, u64>,
    wake_at: Option<Instant>,
    /// Polling: since when LS holds the core.
    busy_since: Option<Instant>,
    pub busy: Duration,
    pub wakeups: u64,
    /// Per read: latency as LS sees it, and to its reply's arrival.
    pub seen_ns: Vec<u64>,
    pub reply_ns: Vec<u64>,
    pub samples_dropped: u64,
    /// Reads LS saw done before their reply arrived (must be none).
    pub seen_before_reply: u64,
    pub retries: u64,
    pub request_rejects: u64,
}

impl StorageClient {
    pub fn new(
        mode: Mode,
        server: u32,
        params: StorageParams,
        timing: &Timing,
        start: Instant,
        end: Instant,
    ) -> StorageClient {
        assert!(params.depth > 0 && params.request_bytes >= 8 && params.reply_bytes >= 8);
        let early = match mode {
            Mode::WakeupDelivery => timing.delivery_slack(),
            Mode::Polling | Mode::PollingShared | Mode::Wakeup => Duration::ZERO,
        };
        let reply = timing.delta(params.reply_bytes);
        assert!(early < reply, "a delivery comes before its completion's bound");
        let after_request = params.service + Duration::from_nanos(reply.as_nanos() - early.as_nanos());
        StorageClient {
            mode,
            server,
            params,
            after_request,
            early,
            start,
            end,
            started: false,
            stepped_at: start,
            next_id: 0,
            reads: BTreeMap::new(),
            by_msg: BTreeMap::new(),
            wake_at: None,
            busy_since: None,
            busy: Duration::ZERO,
            wakeups: 0,
            seen_ns: Vec::new(),
            reply_ns: Vec::new(),
            samples_dropped: 0,
            seen_before_reply: 0,
            retries: 0,
            request_rejects: 0,
        }
    }

    /// Submits read `id` (first try at `issued_at`); returns its bound.
    fn submit(&mut self, now: Instant, host: &mut CosyHost, id: u64, issued_at: Instant) -> Instant {
        let mut body = vec![0u8; self.params.request_bytes];
        body[..8].copy_from_slice(&id.to_be_bytes());
        let (expect_by, msg) = match host.submit(now, self.server, body) {
            Ok(s) => (earlier(s.deadline, self.early) + self.after_request, Some(s.msg)),
            // Refused outright (the host's completion queue is full): try again shortly.
            Err(_) => (now + Duration::from_micros(1), None),
        };
        if let Some(msg) = msg {
            self.by_msg.insert(msg, id);
        }
        let read = Read {
            issued_at,
            expect_by,
            reply_at: None,
            lost: msg.is_none(),
        };
        self.reads.insert(id, read);
        expect_by
    }

    fn issue_new(&mut self, now: Instant, host: &mut CosyHost) -> Instant {
        let id = self.next_id;
        self.next_id += 1;
        self.submit(now, host, id, now)
    }

    fn record(&mut self, read: &Read, seen_at: Instant) {
        let reply_at = read.reply_at.expect("a read seen done has its reply");
        if seen_at < reply_at {
            self.seen_before_reply += 1;
        }
        if self.seen_ns.len() >= SAMPLES_MAX {
            self.samples_dropped += 1;
            return;
        }
        self.seen_ns.push((seen_at - read.issued_at).as_nanos());
        self.reply_ns.push((reply_at - read.issued_at).as_nanos());
    }

    /// Takes replies and cosy's flags on the reads.
    fn take(&mut self, host: &mut CosyHost) {
        while let Some(d) = host.poll_delivery() {
            if d.sender != self.server || d.message.len() != self.params.reply_bytes {
                continue; // background
            }
            let id = u64::from_be_bytes(d.message[..8].try_into().expect("8 bytes"));
            if let Some(r) = self.reads.get_mut(&id) {
                r.reply_at.get_or_insert(d.at);
            }
        }
        while let Some(c) = host.poll_completion() {
            let Some(id) = self.by_msg.remove(&c.msg) else {
                continue;
            };
            if c.flag != Flag::Complete {
                self.request_rejects += 1;
                if let Some(r) = self.reads.get_mut(&id) {
                    r.lost = r.reply_at.is_none();
                }
            }
        }
    }

    /// Polling: LS sees each reply as it arrives and sends the next read at once; a read cosy
    /// flagged, or with no reply by its bound, goes again.
    fn step_polling(&mut self, now: Instant, host: &mut CosyHost) {
        let done: Vec<u64> = self
            .reads
            .iter()
            .filter(|(_, r)| r.reply_at.is_some())
            .map(|(&id, _)| id)
            .collect();
        for id in done {
            let read = self.reads.remove(&id).expect("listed");
            self.record(&read, now);
        }
        let again: Vec<(u64, Instant)> = self
            .reads
            .iter()
            .filter(|(_, r)| r.lost || r.expect_by <= now)
            .map(|(&id, r)| (id, r.issued_at))
            .collect();
        for (id, issued_at) in again {
            self.retries += 1;
            self.submit(now, host, id, issued_at);
        }
        while now < self.end && self.reads.len() < self.params.depth {
            self.issue_new(now, host);
        }
        match (self.busy_since, self.reads.is_empty()) {
            (None, false) => self.busy_since = Some(now),
            (Some(since), true) => {
                self.busy = self.busy + (now.min(self.end) - since.min(self.end));
                self.busy_since = None;
            }
            _ => {}
        }
    }

    /// Predictable wakeup: at the latest bound of its batch (plus the switch in), LS takes
    /// every reply, sends again what has none, tops the batch up and sleeps again.
    fn step_wakeup(&mut self, now: Instant, host: &mut CosyHost) {
        // No timer set: before the first batch, or after the last.
        let due = self.wake_at.map_or(self.wakeups == 0, |at| at <= now);
        if !due {
            return;
        }
        let reads = std::mem::take(&mut self.reads);
        let mut latest = now;
        let mut cpu = self.params.wakeup_cost;
        for (id, read) in reads {
            if read.reply_at.is_some() {
                self.record(&read, now);
            } else {
                self.retries += 1;
                latest = latest.max(self.submit(now, host, id, read.issued_at));
                cpu = cpu + self.params.issue_cost;
            }
        }
        while now < self.end && self.reads.len() < self.params.depth {
            latest = latest.max(self.issue_new(now, host));
            cpu = cpu + self.params.issue_cost;
        }
        self.wakeups += 1;
        self.busy = self.busy + cpu;
        // The timer fires at the bound; LS runs once switched in.
        self.wake_at = (!self.reads.is_empty()).then_some(latest + self.params.wakeup_cost);
    }

    /// Whether LS has the shared core at `at` (its turns start at `start`).
    fn ls_turn(&self, at: Instant) -> bool {
        (at - self.start).as_nanos() / self.params.slice.as_nanos().max(1) % 2 == 0
    }

    /// The start of LS's next turn after `at` (turns alternate, LS's are the even ones).
    fn next_ls_turn(&self, at: Instant) -> Instant {
        let slice = self.params.slice.as_nanos().max(1);
        let turn = (at - self.start).as_nanos() / slice;
        self.start + Duration::from_nanos((turn + 1 + (turn + 1) % 2) * slice)
    }

    /// LS's share of the core over its window (a poll still going counts to the window's end).
    pub fn cpu_share(&self) -> f64 {
        if self.mode == Mode::PollingShared {
            // LS always has reads out, so it polls through each of its turns: half the core.
            return 0.5;
        }
        let polling = self
            .busy_since
            .map_or(Duration::ZERO, |since| self.end - since.min(self.end));
        let window = (self.end - self.start).as_nanos().max(1);
        ((self.busy + polling).as_nanos() as f64 / window as f64).min(1.0)
    }
}

impl App for StorageClient {
    fn step(&mut self, now: Instant, host: &mut CosyHost) {
        if now < self.start {
            return;
        }
        self.started = true;
        self.take(host);
        match self.mode {
            Mode::Polling => self.step_polling(now, host),
            Mode::PollingShared if self.ls_turn(now) => self.step_polling(now, host),
            Mode::PollingShared => {}
            Mode::Wakeup | Mode::WakeupDelivery => self.step_wakeup(now, host),
        }
        self.stepped_at = now;
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.started {
            return Some(self.start);
        }
        match self.mode {
            Mode::Polling => self.reads.values().map(|r| r.expect_by).min(),
            // In TB's turn LS does nothing until its own; in its own it also retries.
            Mode::PollingShared => {
                let retry = self.reads.values().map(|r| r.expect_by).min();
                let retry = retry.filter(|_| self.ls_turn(self.stepped_at));
                [retry, Some(self.next_ls_turn(self.stepped_at))]
                    .into_iter()
                    .flatten()
                    .min()
            }
            Mode::Wakeup | Mode::WakeupDelivery => self.wake_at,
        }
    }
}

/// The storage server: each read from the client is answered `service` after it arrived.
pub struct StorageServer {
    client: u32,
    params: StorageParams,
    due: VecDeque<(Instant, u64)>,
    pub replies: u64,
    pub reply_rejects: u64,
    pub dropped: u64,
    by_msg: BTreeMap<u32, u64>,
}

impl StorageServer {
    pub fn new(client: u32, params: StorageParams) -> StorageServer {
        StorageServer {
            client,
            params,
            due: VecDeque::new(),
            replies: 0,
            reply_rejects: 0,
            dropped: 0,
            by_msg: BTreeMap::new(),
        }
    }
}

impl App for StorageServer {
    fn step(&mut self, now: Instant, host: &mut CosyHost) {
        while let Some(d) = host.poll_delivery() {
            if d.sender != self.client || d.message.len() != self.params.request_bytes {
                continue; // background
            }
            if self.due.len() >= SERVER_QUEUE_MAX {
                self.dropped += 1;
                continue;
            }
            let id = u64::from_be_bytes(d.message[..8].try_into().expect("8 bytes"));
            // A fixed service time keeps the queue in arrival order.
            self.due.push_back((d.at + self.params.service, id));
        }
        while let Some(&(at, id)) = self.due.front() {
            if at > now {
                break;
            }
            self.due.pop_front();
            let mut body = vec![0u8; self.params.reply_bytes];
            body[..8].copy_from_slice(&id.to_be_bytes());
            if let Ok(s) = host.submit(now, self.client, body) {
                self.by_msg.insert(s.msg, id);
                self.replies += 1;
            } else {
                self.reply_rejects += 1;
            }
        }
        while let Some(c) = host.poll_completion() {
            if self.by_msg.remove(&c.msg).is_some() && c.flag != Flag::Complete {
                self.reply_rejects += 1;
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.due.front().map(|&(at, _)| at)
    }
}

/// The client or the server of a storage run.
pub enum StorageApp {
    Client(StorageClient),
    Server(StorageServer),
}

impl App for StorageApp {
    fn step(&mut self, now: Instant, host: &mut CosyHost) {
        match self {
            StorageApp::Client(c) => c.step(now, host),
            StorageApp::Server(s) => s.step(now, host),
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            StorageApp::Client(c) => c.poll_timeout(),
            StorageApp::Server(s) => s.poll_timeout(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// The fabric, K, the background load and message size, the seed. Its `duration` is the
    /// client's window (it sends reads during it).
    pub sim: CosySimConfig,
    pub client: u32,
    pub server: u32,
    pub params: StorageParams,
}

impl StorageConfig {
    /// The paper's setup (6.1): client and server under one switch (the testbed's first leaf)
    /// at 100 Gbps, K = 8, 4 KB reads, depth 8; a 2 us RAM-disk service time.
    pub fn paper(load: f64, seed: u64) -> StorageConfig {
        StorageConfig {
            sim: CosySimConfig {
                fabric: CosyFabric::testbed(100_000_000_000),
                k: 8,
                load,
                seed,
                duration: Duration::from_millis(10),
                ..CosySimConfig::default()
            },
            client: 0,
            server: 1,
            params: StorageParams {
                depth: 8,
                request_bytes: 64,
                reply_bytes: 4096,
                service: Duration::from_micros(2),
                issue_cost: Duration::from_nanos(500),
                wakeup_cost: Duration::from_micros(2),
                slice: Duration::from_micros(750),
            },
        }
    }
}

/// One mode's run.
#[derive(Clone, Debug, Serialize)]
pub struct ModeReport {
    pub mode: Mode,
    pub reads: usize,
    /// As LS sees them: a reply's arrival (polling), its wakeup (predictable wakeup).
    pub latency_us: Quantiles,
    /// To the reply's arrival at LS's host.
    pub reply_latency_us: Quantiles,
    /// Reads LS saw done before their reply arrived (must be 0).
    pub seen_before_reply: u64,
    pub retries: u64,
    pub request_rejects: u64,
    pub reply_rejects: u64,
    pub wakeups: u64,
    /// LS's reads per second of its window.
    pub reads_per_s: f64,
    pub ls_cpu_share: f64,
    /// What is left of the core to TB.
    pub tb_cpu_share: f64,
    /// TB's throughput, counting one unit per microsecond of core it gets.
    pub tb_units_per_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct StorageReport {
    pub hosts: usize,
    pub k: u8,
    pub load: f64,
    pub window_us: f64,
    pub depth: usize,
    pub request_bytes: usize,
    pub reply_bytes: usize,
    pub service_us: f64,
    pub issue_cost_us: f64,
    pub wakeup_cost_us: f64,
    pub delta_request_us: f64,
    pub delta_reply_us: f64,
    /// delta(request) + service + delta(reply): when LS wakes after one read.
    pub wakeup_bound_us: f64,
    /// The same less both messages' delivery slack.
    pub wakeup_delivery_bound_us: f64,
    pub slice_us: f64,
    pub polling: ModeReport,
    pub polling_shared: ModeReport,
    pub wakeup: ModeReport,
    pub wakeup_delivery: ModeReport,
}

/// One run in `mode`.
pub fn run_mode(config: &StorageConfig, mode: Mode) -> Result<ModeReport, String> {
    let p = &config.params;
    let processes = config.sim.fabric.hosts() as u32;
    if config.client == config.server || config.client.max(config.server) >= processes {
        return Err(format!(
            "client {} and server {} must be two of the {processes} hosts",
            config.client, config.server
        ));
    }
    if p.depth == 0 || p.request_bytes < 8 || p.reply_bytes < 8 {
        return Err("a storage run needs depth >= 1 and messages of 8 bytes at least".into());
    }
    if p.slice == Duration::ZERO {
        return Err("a turn on the shared core (slice) must be longer than zero".into());
    }
    let timing = config.sim.timing();
    let start = START + Duration::from_micros(20);
    let end = START + config.sim.duration;
    let client = StorageClient::new(mode, config.server, p.clone(), &timing, start, end);
    let server = StorageServer::new(config.client, p.clone());
    let apps = vec![
        (config.client, StorageApp::Client(client)),
        (config.server, StorageApp::Server(server)),
    ];
    let mut sim = AppSim::new(&config.sim, apps, p.reply_bytes.max(p.request_bytes))?;
    // Every read sent by the window's end has its bound (and a retry's) passed by then.
    let read_bound = timing.delta(p.request_bytes) + p.service + timing.delta(p.reply_bytes);
    let until = end + read_bound + read_bound + p.wakeup_cost + timing.delta(config.sim.message_bytes);
    let budget = Budget {
        events_max: config.sim.events_max,
        ..Budget::default()
    };
    sim.engine.run_until(until, &budget).map_err(|e| e.to_string())?;
    sim.invariants();
    let (Some(StorageApp::Client(c)), Some(StorageApp::Server(s))) =
        (sim.app(config.client), sim.app(config.server))
    else {
        unreachable!("the client and the server were placed")
    };
    let ls = c.cpu_share();
    Ok(ModeReport {
        mode,
        reads: c.seen_ns.len(),
        latency_us: Quantiles::of_ns(&mut c.seen_ns.clone()),
        reply_latency_us: Quantiles::of_ns(&mut c.reply_ns.clone()),
        seen_before_reply: c.seen_before_reply,
        retries: c.retries,
        request_rejects: c.request_rejects,
        reply_rejects: s.reply_rejects,
        wakeups: c.wakeups,
        reads_per_s: c.seen_ns.len() as f64 / (config.sim.duration.as_nanos() as f64 / 1e9),
        ls_cpu_share: ls,
        tb_cpu_share: 1.0 - ls,
        tb_units_per_s: (1.0 - ls) * 1e6,
    })
}

/// Both modes on the same fabric, seed and background.
pub fn run(config: &StorageConfig) -> Result<StorageReport, String> {
    let timing = config.sim.timing();
    let p = &config.params;
    let polling = run_mode(config, Mode::Polling)?;
    let polling_shared = run_mode(config, Mode::PollingShared)?;
    let wakeup = run_mode(config, Mode::Wakeup)?;
    let wakeup_delivery = run_mode(config, Mode::WakeupDelivery)?;
    let (req, rep) = (timing.delta(p.request_bytes), timing.delta(p.reply_bytes));
    let bound = req + p.service + rep;
    let slack = timing.delivery_slack();
    Ok(StorageReport {
        hosts: config.sim.fabric.hosts(),
        k: config.sim.k,
        load: config.sim.load,
        window_us: us(config.sim.duration),
        depth: p.depth,
        request_bytes: p.request_bytes,
        reply_bytes: p.reply_bytes,
        service_us: us(p.service),
        issue_cost_us: us(p.issue_cost),
        wakeup_cost_us: us(p.wakeup_cost),
        delta_request_us: us(req),
        delta_reply_us: us(rep),
        wakeup_bound_us: us(bound),
        wakeup_delivery_bound_us: us(bound) - 2.0 * us(slack),
        slice_us: us(p.slice),
        polling,
        polling_shared,
        wakeup,
        wakeup_delivery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_turns_alternate_and_the_next_turn_of_ls_is_always_ahead() {
        let mut params = StorageConfig::paper(0.0, 1).params;
        params.slice = Duration::from_micros(10);
        let timing = StorageConfig::paper(0.0, 1).sim.timing();
        let start = START;
        let c = StorageClient::new(
            Mode::PollingShared,
            1,
            params,
            &timing,
            start,
            start + Duration::from_millis(1),
        );
        let t = |us: u64| start + Duration::from_micros(us);
        assert!(
            c.ls_turn(t(0)) && c.ls_turn(t(9)) && !c.ls_turn(t(10)) && !c.ls_turn(t(19)) && c.ls_turn(t(20))
        );
        assert_eq!(c.next_ls_turn(t(0)), t(20));
        assert_eq!(c.next_ls_turn(t(15)), t(20));
        assert_eq!(c.next_ls_turn(t(20)), t(40));
        for us in 0..100 {
            let next = c.next_ls_turn(t(us));
            assert!(next > t(us) && c.ls_turn(next) && !c.ls_turn(Instant::from_nanos(next.as_nanos() - 1)));
        }
    }

    #[test]
    fn the_delivery_slack_is_shorter_than_any_bound() {
        let timing = StorageConfig::paper(0.0, 1).sim.timing();
        let slack = timing.delivery_slack();
        assert!(slack > Duration::ZERO);
        assert!(slack.as_nanos() * 2 < timing.delta(0).as_nanos());
    }
}
