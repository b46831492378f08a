//! The switch program: the roles this switch hosts (coordinator, acceptor, or none) plus
//! forwarding by address along shortest paths, one program of a software switch's pipeline
//! (`onepipe_fabric::Pipeline`, protocol `PAXOS`).
//!
//! A frame from a host must carry that host's own address as its sender (the source check that
//! keeps a host from speaking as a switch or as another host); the roles then accept each
//! message type only from the addresses their configuration names. Every drop is counted.

mod budget;

use crate::roles::Roles;
use onepipe_fabric::{Hints, Node, PortId, Route, SwitchPaths, Wiring};
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Addr, Message};
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    pub forwarded: u64,
    /// Messages for this switch's roles.
    pub processed: u64,
    /// Messages the roles sent.
    pub originated: u64,
    pub malformed: u64,
    /// Frames from a host that named another sender.
    pub spoofed: u64,
    pub no_route: u64,
    pub queue_full: u64,
}

pub use budget::{CO_LOCATED, HELD_REQUESTS, PHASE1_CLOSE, PHASE1_RANGE, TRIM_FLOOR};

pub struct PaxosSwitch {
    me: u16,
    /// Per port: the process behind it, for the source check.
    port_process: Vec<Option<u32>>,
    roles: Roles,
    ports: Ports,
}

/// Where frames go: the paths and the frames each port holds. Apart from the roles, so that a
/// role's messages go straight into a queue.
struct Ports {
    paths: SwitchPaths,
    queues: Vec<VecDeque<Vec<u8>>>,
    queued_frames: usize,
    queue_frames_max: usize,
    counters: SwitchCounters,
}

impl Ports {
    fn port_to(&self, to: Addr) -> Option<PortId> {
        match to {
            Addr::Switch(s) => self.paths.port_to_switch(s as usize),
            Addr::Process(p) => self.paths.port_to_process(p),
        }
    }

    fn enqueue(&mut self, m: &Message<'_>) {
        let Some(port) = self.port_to(m.to) else {
            self.counters.no_route += 1;
            return;
        };
        let queue = &mut self.queues[port as usize];
        if queue.len() >= self.queue_frames_max {
            self.counters.queue_full += 1;
            return;
        }
        queue.push_back(m.to_vec());
        self.queued_frames += 1;
        self.counters.originated += 1;
    }
}

impl PaxosSwitch {
    pub fn new(me: usize, wiring: Arc<Wiring>, roles: Roles, queue_frames_max: usize) -> PaxosSwitch {
        assert!(me < wiring.switch_count() && me < u16::MAX as usize);
        let paths = SwitchPaths::new(&wiring, me, &|_| false);
        let ports = wiring.switch_ports[me].len();
        let port_process = (0..ports)
            .map(|p| paths.process_at(&wiring, p as PortId))
            .collect();
        PaxosSwitch {
            me: me as u16,
            port_process,
            roles,
            ports: Ports {
                paths,
                queues: vec![VecDeque::new(); ports],
                queued_frames: 0,
                queue_frames_max,
                counters: SwitchCounters::default(),
            },
        }
    }

    pub fn addr(&self) -> Addr {
        Addr::Switch(self.me)
    }
    pub fn roles(&self) -> &Roles {
        &self.roles
    }
    pub fn counters(&self) -> &SwitchCounters {
        &self.ports.counters
    }

    pub fn invariants(&self) {
        self.roles.invariants();
        let p = &self.ports;
        assert_eq!(p.queued_frames, p.queues.iter().map(VecDeque::len).sum::<usize>());
        assert!(p.queues.iter().all(|q| q.len() <= p.queue_frames_max));
    }

    fn decide(&self, port: PortId, frame: &[u8]) -> Result<Route, Drop> {
        let msg = Message::parse(frame).map_err(|_| Drop::Malformed)?;
        if let Some(&Some(process)) = self.port_process.get(port as usize)
            && msg.from != Addr::Process(process)
        {
            return Err(Drop::Spoofed);
        }
        if msg.to == self.addr() {
            return Ok(Route::Consume);
        }
        self.ports
            .port_to(msg.to)
            .map(Route::Forward)
            .ok_or(Drop::NoRoute)
    }
}

#[derive(Clone, Copy, Debug)]
enum Drop {
    Malformed,
    Spoofed,
    NoRoute,
}

impl Node for PaxosSwitch {
    fn classify(&self, _: Instant, port: PortId, frame: &[u8]) -> Route {
        self.decide(port, frame).unwrap_or(Route::Drop)
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        match (self.decide(port, frame), route) {
            (Err(Drop::Malformed), _) => self.ports.counters.malformed += 1,
            (Err(Drop::Spoofed), _) => self.ports.counters.spoofed += 1,
            (Err(Drop::NoRoute), _) => self.ports.counters.no_route += 1,
            (Ok(Route::Forward(_)), Route::Forward(_)) => self.ports.counters.forwarded += 1,
            (Ok(Route::Consume), Route::Consume) => {
                self.ports.counters.processed += 1;
                let (me, ports) = (self.addr(), &mut self.ports);
                self.roles.handle(now, me, frame, &mut |m| ports.enqueue(m));
            }
            // The runtime dropped it (no link on that port): count it where it was going.
            _ => self.ports.counters.no_route += 1,
        }
    }

    fn poll_transmit(&mut self, _: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let frame = self.ports.queues.get_mut(port as usize)?.pop_front()?;
        self.ports.queued_frames -= 1;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.roles.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.roles.poll_timeout().is_some_and(|t| t <= now) {
            let (me, ports) = (self.addr(), &mut self.ports);
            self.roles.handle_timeout(now, me, &mut |m| ports.enqueue(m));
        }
    }
}

impl Hints for PaxosSwitch {
    fn wants_transmit(&self) -> bool {
        self.ports.queued_frames > 0
    }
}

#[cfg(test)]
mod tests;
