//! A small deterministic network for tests: switches and endpoints in virtual time, FIFO links
//! with per-link delay, every step driven in a fixed order. (The full simulator with queues,
//! loss and failures is its own crate; this is just enough to check ordering end to end.)

#![allow(dead_code)]

use onepipe_check::{Event, ProcessLog};
use onepipe_fabric::{Node, Peer, PortId, Route, Topology, Wiring, routing};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_wire::{Duration, Instant};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Switch(usize, PortId),
    Process(u32),
}

pub struct Link {
    pub to: End,
    pub delay: Duration,
    pub queue: VecDeque<(Instant, Vec<u8>)>,
    /// Breaks per-link FIFO on purpose: frames are held and released in batches every 8
    /// steps, newest first.
    pub reorder: bool,
    /// Probability that a frame is lost, and that it is delivered twice.
    pub loss: f64,
    pub dup: f64,
    /// Extra delay drawn uniformly up to this, FIFO kept (a frame never passes the previous one).
    pub jitter: Duration,
}

pub struct Net {
    pub now: Instant,
    pub ticks: u64,
    pub step: Duration,
    pub wiring: Wiring,
    pub switches: Vec<Switch>,
    pub endpoints: Vec<Endpoint>,
    /// Output links of switch ports: `switch_out[s][port]`.
    pub switch_out: Vec<Vec<usize>>,
    /// Uplink of each process.
    pub process_out: Vec<usize>,
    pub links: Vec<Link>,
    pub logs: Vec<ProcessLog>,
    pub failures: Vec<Vec<onepipe::SendFailure>>,
    /// Destinations of reliable scatterings not yet released, by message id, per sender.
    pub pending: Vec<std::collections::HashMap<u64, Vec<u32>>>,
    pub rng: onepipe_proto::hash::SplitMix,
    /// Steps between visits of each process (see [`NetConfig::visit_intervals`]).
    pub visit_intervals: Vec<u64>,
    pub visit_budget_frames: usize,
}

pub struct NetConfig {
    pub beacon_interval: Duration,
    pub step: Duration,
    pub ecmp_seed: u64,
    pub mtu_bytes: usize,
    /// Per process clock offsets; missing ones are zero.
    pub offsets_ns: Vec<i64>,
    /// Delay of each link, by link index in creation order, cycled.
    pub delays: Vec<Duration>,
    pub start: Instant,
    /// Applied to every link.
    pub loss: f64,
    pub dup: f64,
    pub jitter: Duration,
    pub seed: u64,
    pub reliable: onepipe_proto::reliable::ReliableConfig,
    /// Promise mode for every endpoint ([`EndpointConfig::promise_lead`]).
    pub promise_lead: Option<Duration>,
    /// Each process is visited (times out, transmits, delivers) once in this many steps,
    /// cycled over the processes, as hosts sharing a thread are; a visit ends with
    /// [`Endpoint::end_visit`] and the frames that close it.
    pub visit_intervals: Vec<u64>,
    /// Most frames a process sends in one visit before the frames that close it.
    pub visit_budget_frames: usize,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            beacon_interval: Duration::from_micros(3),
            step: Duration::from_nanos(500),
            ecmp_seed: 0,
            mtu_bytes: 256,
            offsets_ns: Vec::new(),
            delays: vec![Duration::from_micros(1)],
            start: Instant::from_nanos(1_000_000),
            loss: 0.0,
            dup: 0.0,
            jitter: Duration::ZERO,
            seed: 0,
            reliable: onepipe_proto::reliable::ReliableConfig::default(),
            promise_lead: None,
            visit_intervals: vec![1],
            visit_budget_frames: usize::MAX,
        }
    }
}

impl Net {
    pub fn new(topology: Topology, processes_per_host: u32, cfg: &NetConfig) -> Net {
        let wiring = Wiring::new(topology, processes_per_host).unwrap();
        let tables = routing::build(&wiring).unwrap();
        let now = cfg.start;
        let switch_config = SwitchConfig {
            beacon_interval: cfg.beacon_interval,
            dead_after_intervals: 10_000,
            ecmp_seed: cfg.ecmp_seed,
            promise_lead: cfg.promise_lead.unwrap_or(Duration::ZERO),
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
        };
        let switches: Vec<Switch> = tables
            .into_iter()
            .enumerate()
            .map(|(s, r)| Switch::new(s, &wiring, r, switch_config.clone(), now))
            .collect();
        let count = wiring.process_count() as u32;
        let endpoints = (0..count)
            .map(|p| {
                let mut ec = EndpointConfig::new(p, count, wiring.processes[p as usize].tor_port);
                ec.beacon_interval = cfg.beacon_interval;
                ec.mtu_bytes = cfg.mtu_bytes;
                ec.clock_offset_ns = cfg.offsets_ns.get(p as usize).copied().unwrap_or(0);
                ec.reliable = cfg.reliable.clone();
                ec.promise_lead = cfg.promise_lead;
                Endpoint::new(ec, now)
            })
            .collect();
        let mut links = Vec::new();
        let mut delay_of = {
            let delays = cfg.delays.clone();
            let mut i = 0;
            move || {
                i += 1;
                delays[(i - 1) % delays.len()]
            }
        };
        let mut switch_out = vec![Vec::new(); wiring.switch_count()];
        let mut process_out = vec![0; count as usize];
        for (s, ports) in wiring.switch_ports.iter().enumerate() {
            for (port, spec) in ports.iter().enumerate() {
                let to = match spec.peer {
                    Peer::Process(p) => {
                        process_out[p as usize] = links.len();
                        links.push(Link {
                            to: End::Switch(s, port as PortId),
                            delay: delay_of(),
                            queue: VecDeque::new(),
                            reorder: false,
                            loss: cfg.loss,
                            dup: cfg.dup,
                            jitter: cfg.jitter,
                        });
                        End::Process(p)
                    }
                    Peer::Switch { switch, port } => End::Switch(switch, port),
                };
                switch_out[s].push(links.len());
                links.push(Link {
                    to,
                    delay: delay_of(),
                    queue: VecDeque::new(),
                    reorder: false,
                    loss: cfg.loss,
                    dup: cfg.dup,
                    jitter: cfg.jitter,
                });
            }
        }
        let logs = (0..count)
            .map(|p| ProcessLog {
                process: p,
                events: Vec::new(),
            })
            .collect();
        Net {
            now,
            ticks: 0,
            step: cfg.step,
            wiring,
            switches,
            endpoints,
            switch_out,
            process_out,
            links,
            logs,
            failures: vec![Vec::new(); count as usize],
            pending: vec![Default::default(); count as usize],
            rng: onepipe_proto::hash::SplitMix::new(cfg.seed),
            visit_intervals: (0..count as usize)
                .map(|p| cfg.visit_intervals[p % cfg.visit_intervals.len()].max(1))
                .collect(),
            visit_budget_frames: cfg.visit_budget_frames,
        }
    }

    /// Sends a scattering from `src`; its S lines are logged when it leaves with its timestamp.
    pub fn send(&mut self, src: u32, scatter: &[(u32, &[u8])]) -> Result<u64, onepipe::SendError> {
        let id = self.endpoints[src as usize].send_unreliable(self.now, scatter)?;
        self.pending[src as usize].insert(id, scatter.iter().map(|&(d, _)| d).collect());
        Ok(id)
    }

    /// Sends a reliable scattering from `src`; its S lines are logged when it is released.
    pub fn send_reliable(&mut self, src: u32, scatter: &[(u32, &[u8])]) -> Result<u64, onepipe::SendError> {
        let id = self.endpoints[src as usize].send_reliable(self.now, scatter)?;
        self.pending[src as usize].insert(id, scatter.iter().map(|&(d, _)| d).collect());
        self.log_released(src as usize);
        Ok(id)
    }

    fn log_released(&mut self, p: usize) {
        while let Some((msg_id, ts)) = self.endpoints[p].poll_released() {
            let dsts = self.pending[p].remove(&msg_id).expect("released what was sent");
            for dst in dsts {
                self.logs[p].events.push(Event::Send {
                    ts_ns: ts.as_nanos(),
                    dst,
                    msg_id,
                });
            }
        }
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn push(&mut self, link: usize, frame: Vec<u8>) {
        let (loss, dup, jitter) = (
            self.links[link].loss,
            self.links[link].dup,
            self.links[link].jitter,
        );
        if loss > 0.0 && self.uniform() < loss {
            return;
        }
        let copies = if dup > 0.0 && self.uniform() < dup { 2 } else { 1 };
        let extra = if jitter > Duration::ZERO {
            Duration::from_nanos(self.rng.next_u64() % jitter.as_nanos())
        } else {
            Duration::ZERO
        };
        let mut at = self.now + self.links[link].delay + extra;
        // Jitter never lets a frame pass the one before it: links stay FIFO.
        if let Some(&(last, _)) = self.links[link].queue.back() {
            at = at.max(last);
        }
        for _ in 0..copies {
            self.links[link].queue.push_back((at, frame.clone()));
        }
    }

    /// Advances one step: every link delivers what is due, then every node times out and
    /// transmits.
    pub fn tick(&mut self) {
        self.now += self.step;
        self.ticks += 1;
        let now = self.now;
        for l in 0..self.links.len() {
            if self.links[l].reorder && self.ticks % 8 != 0 {
                continue;
            }
            loop {
                let link = &mut self.links[l];
                // A reordering link hands out the newest due frame first.
                let due = link.queue.iter().take_while(|(at, _)| *at <= now).count();
                let idx = if link.reorder && due > 1 { due - 1 } else { 0 };
                match link.queue.get(idx) {
                    Some((at, _)) if *at <= now => {}
                    _ => break,
                }
                let (_, mut frame) = link.queue.remove(idx).unwrap();
                match link.to {
                    End::Process(p) => {
                        let _ = self.endpoints[p as usize].handle_frame(now, &frame);
                    }
                    End::Switch(s, port) => {
                        let sw = &mut self.switches[s];
                        let route = sw.classify(now, port, &frame);
                        sw.handle_frame(now, port, &mut frame, route);
                        if let Route::Forward(out) = route {
                            let out_link = self.switch_out[s][out as usize];
                            self.push(out_link, frame);
                        }
                    }
                }
            }
        }
        let mut buf = vec![0u8; 9216];
        for s in 0..self.switches.len() {
            if self.switches[s].poll_timeout().is_some_and(|t| t <= now) {
                self.switches[s].handle_timeout(now);
            }
            for port in 0..self.switch_out[s].len() {
                while let Some(len) = self.switches[s].poll_transmit(now, port as PortId, &mut buf) {
                    let link = self.switch_out[s][port];
                    self.push(link, buf[..len].to_vec());
                }
            }
        }
        for p in 0..self.endpoints.len() {
            if self.ticks % self.visit_intervals[p] != 0 {
                continue;
            }
            let ep = &mut self.endpoints[p];
            if ep.poll_timeout() <= now {
                ep.handle_timeout(now);
            }
            for _ in 0..self.visit_budget_frames {
                let Some(len) = self.endpoints[p].poll_transmit(now, &mut buf) else {
                    break;
                };
                let link = self.process_out[p];
                self.push(link, buf[..len].to_vec());
            }
            for _ in 0..self.endpoints[p].end_visit(now) {
                let len = self.endpoints[p]
                    .poll_transmit(now, &mut buf)
                    .expect("end_visit counts the frames it has");
                let link = self.process_out[p];
                self.push(link, buf[..len].to_vec());
            }
            // Stamped as they left, before the deliveries below: program order for the log.
            self.log_released(p);
            while let Some(d) = self.endpoints[p].poll_deliver() {
                self.logs[p].events.push(Event::Deliver {
                    ts_ns: d.ts.as_nanos(),
                    src: d.src,
                    msg_id: d.msg_id,
                });
            }
            while let Some(d) = self.endpoints[p].poll_deliver_reliable() {
                self.logs[p].events.push(Event::Deliver {
                    ts_ns: d.ts.as_nanos(),
                    src: d.src,
                    msg_id: d.msg_id,
                });
            }
            while let Some(e) = self.endpoints[p].poll_event() {
                if let onepipe_proto::EndpointEvent::SendFailed(f) = e {
                    self.failures[p].push(f);
                }
            }
        }
        // Every state machine keeps its invariants after every step, as in the simulator.
        self.switches.iter().for_each(Switch::invariants);
        self.endpoints.iter().for_each(Endpoint::invariants);
    }

    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        while self.now < until {
            self.tick();
        }
    }

    pub fn delivered(&self, p: u32) -> Vec<(u32, u64)> {
        self.logs[p as usize]
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Deliver { src, msg_id, .. } => Some((src, msg_id)),
                _ => None,
            })
            .collect()
    }
}

/// A random scattering for `n` processes: (sender, receivers, payload of up to ~3 fragments at
/// the 256-byte MTU of the test net).
pub fn random_scattering(rng: &mut onepipe_proto::hash::SplitMix, n: u32) -> (u32, Vec<u32>, Vec<u8>) {
    let src = (rng.next_u64() % n as u64) as u32;
    let mut dsts: Vec<u32> = (0..n).filter(|_| rng.next_u64() % 2 == 0).collect();
    if dsts.is_empty() {
        dsts.push((rng.next_u64() % n as u64) as u32);
    }
    let len = (rng.next_u64() % 600) as usize;
    (src, dsts, vec![(src & 0xff) as u8; len])
}
