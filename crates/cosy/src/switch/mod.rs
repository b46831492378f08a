//! cosy's switch program (paper 3.2-4), one program of a software switch's pipeline
//! (`onepipe_fabric::Pipeline`, protocol `COSY`).
//!
//! - A request, a routed reject or complete, and a failure go along any shortest path to
//!   their destination (requests to the receiver, the rest to the sender).
//! - An rsvp, on its way from the receiver to the sender, takes at every switch a virtual link
//!   chosen uniformly at random among the unreserved ones on the shortest paths toward the
//!   sender, records it in the header and reserves it (paper 3.2, 3.3). With none free, the rsvp
//!   becomes a reject to both ends: routed to the sender, and along the recorded hops back to
//!   the receiver, which unreserves them.
//! - Data, the sender's complete and a reject going back follow the recorded hops (source
//!   routing): each switch sends them out where the rsvp came in. Complete and reject release.
//! - A reservation nobody released by `cleanup_after` (delta_cosy) is cleared (paper 4).
//!
//! The "random" choice is a hash of the receiver's nonce (itself drawn at random by the
//! receiver) with the switch's seed, so that `classify` stays pure and the switch owns no RNG.
//! A frame from a host must be sent by that host (the source check); every drop is counted.

mod budget;
mod meter;
pub mod vlinks;

pub use budget::{ECMP_CHOICE, EXPIRY_RESCAN, PICK_THEN_RESERVE};
use meter::RateMeter;
use onepipe_fabric::hash::mix64;
use onepipe_fabric::{Hints, NextHops, Node, PortId, Route, Routes, SwitchPaths, Wiring};
use onepipe_wire::cosy::{Hop, Kind, Repr};
use onepipe_wire::{Duration, Instant};
use std::collections::VecDeque;
use vlinks::{Owner, Reservation, VirtualLinks};

#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Virtual links per physical link.
    pub k: u8,
    /// A reservation not released within this is cleared: delta_cosy for the largest message.
    pub cleanup_after: Duration,
    pub seed: u64,
    /// The bandwidth B of every link, for the rate meter.
    pub link_bits_per_s: u64,
    /// The rate meter's window, and the burst a window may carry above B x window.
    pub meter_window: Duration,
    pub burst_bytes: u64,
    /// Frames this switch originates (rejects going back) waiting per port, at most.
    pub queue_frames_max: usize,
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            k: 4,
            cleanup_after: Duration::from_millis(1),
            seed: 1,
            link_bits_per_s: 100_000_000_000,
            meter_window: Duration::from_micros(100),
            burst_bytes: 64 * 1024,
            queue_frames_max: 1024,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// Routed packets forwarded.
    pub routed: u64,
    /// rsvps that reserved a virtual link here.
    pub reserved: u64,
    /// rsvps that found no free virtual link and became rejects.
    pub blocked: u64,
    /// Virtual links released: by a complete or a reject, or by data that uses fewer than
    /// were reserved.
    pub released: u64,
    /// Reservations cleared because nobody released them in time.
    pub expired: u64,
    /// Packets along the path forwarded (data, completes, rejects going back).
    pub along: u64,
    pub malformed: u64,
    /// Frames from a host that named another process as their origin.
    pub spoofed: u64,
    pub no_route: u64,
    /// Packets along the path whose hop does not name this switch and their input port.
    pub wrong_hop: u64,
    /// Packets along the path on a virtual link not reserved for their message (never
    /// reserved, released, or cleared): the link-capacity check counts these.
    pub unreserved: u64,
    /// Originated frames dropped because the port's queue was full.
    pub queue_full: u64,
}

/// Why a frame is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drop {
    Malformed,
    Spoofed,
    NoRoute,
    WrongHop,
    Unreserved,
}

/// What the switch does with a frame, decided from the state before it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// A routed packet, forwarded as it is.
    Route(PortId),
    /// An rsvp reserves the virtual links `vls` (a bit each) of `port` and goes out there.
    Reserve {
        port: PortId,
        vls: u16,
    },
    /// An rsvp with no free virtual link: a reject to the sender (out on `to_sender`, `None`
    /// if there is no route) and one back along the path.
    Block {
        to_sender: Option<PortId>,
    },
    /// Along the path: out on `out`, releasing the message's virtual links on the port if
    /// `release`, else those its packet does not name (a sender that uses fewer than this
    /// switch reserved).
    Along {
        out: PortId,
        release: bool,
    },
    Drop(Drop),
}

pub struct CosySwitch {
    me: u16,
    config: SwitchConfig,
    routes: Routes,
    /// Per port: the process behind it, for the source check.
    port_process: Vec<Option<u32>>,
    vlinks: VirtualLinks,
    meter: RateMeter,
    queues: Vec<VecDeque<Vec<u8>>>,
    queued_frames: usize,
    counters: SwitchCounters,
    /// Per port: frames along the path that came in on a virtual link not reserved for them.
    unreserved_by_port: Vec<u64>,
}

/// One port's record of the invariants of paper 3.3, for the link-capacity check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortUse {
    pub port: PortId,
    /// The most virtual links reserved at once (at most K).
    pub peak_reserved: u8,
    /// Frames along the path that came in on a virtual link not reserved for them.
    pub unreserved_frames: u64,
    /// The busiest meter window's data over what the link carries in a window.
    pub peak_rate_over_capacity: f64,
}

impl CosySwitch {
    pub fn new(me: usize, wiring: &Wiring, routes: Routes, config: SwitchConfig) -> CosySwitch {
        assert!(me < wiring.switch_count() && me < u16::MAX as usize);
        let paths = SwitchPaths::new(wiring, me, &|_| false);
        let ports = wiring.switch_ports[me].len();
        let port_process = (0..ports)
            .map(|p| paths.process_at(wiring, p as PortId))
            .collect();
        CosySwitch {
            me: me as u16,
            routes,
            port_process,
            vlinks: VirtualLinks::new(ports, config.k),
            meter: RateMeter::new(
                ports,
                config.meter_window,
                config.link_bits_per_s,
                config.burst_bytes,
            ),
            queues: vec![VecDeque::new(); ports],
            queued_frames: 0,
            counters: SwitchCounters::default(),
            unreserved_by_port: vec![0; ports],
            config,
        }
    }

    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    pub fn vlinks(&self) -> &VirtualLinks {
        &self.vlinks
    }

    /// Every port's record of the invariants (paper 3.3).
    pub fn port_uses(&self) -> Vec<PortUse> {
        let peaks = self.vlinks.peak_reserved();
        self.meter
            .peak_over_capacity()
            .enumerate()
            .map(|(p, rate)| PortUse {
                port: p as PortId,
                peak_reserved: peaks[p],
                unreserved_frames: self.unreserved_by_port[p],
                peak_rate_over_capacity: rate,
            })
            .collect()
    }

    /// Asserted after every step in tests and by the runtimes' checks.
    pub fn invariants(&self) {
        self.vlinks.check();
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

    /// The frame's header, parsed once for both the decision and its application, and what
    /// to do with it.
    fn decide(&self, port: PortId, frame: &[u8]) -> (Action, Option<Repr>) {
        match Repr::parse(frame) {
            Ok((repr, _)) => (self.decide_for(port, &repr), Some(repr)),
            Err(_) => (Action::Drop(Drop::Malformed), None),
        }
    }

    fn decide_for(&self, port: PortId, repr: &Repr) -> Action {
        if let Some(&Some(process)) = self.port_process.get(port as usize)
            && repr.originator() != process
        {
            return Action::Drop(Drop::Spoofed);
        }
        match (repr.kind, repr.along_path) {
            (Kind::Request | Kind::Failure | Kind::Reject | Kind::Complete, false) => {
                match self.route_to(repr.routed_to(), repr) {
                    Some(out) => Action::Route(out),
                    None => Action::Drop(Drop::NoRoute),
                }
            }
            (Kind::Rsvp, false) => self.reserve_for(repr),
            (Kind::Data | Kind::Reject | Kind::Complete, true) => self.along(port, repr),
            _ => Action::Drop(Drop::Malformed),
        }
    }

    /// A shortest-path port toward `process`, spread by the message.
    fn route_to(&self, process: u32, repr: &Repr) -> Option<PortId> {
        let hops = self.routes.next_hops(process).ok()?;
        Some(hops.pick(self.hash(repr)))
    }

    fn hash(&self, repr: &Repr) -> u64 {
        let who = (repr.sender as u64) << 32 | repr.msg as u64;
        mix64(self.config.seed ^ mix64(who ^ mix64(repr.nonce as u64 ^ (repr.kind as u64) << 40)))
    }

    /// Paper 3.2: "uniform randomly chooses one of the unreserved outgoing links along one of
    /// the shortest paths to the sender"; with K virtual links each (3.3), one of the free
    /// virtual links of those ports, and with it up to `slots - 1` more free ones of the same
    /// port, so that a message may go faster than B/K ("a message may be allocated more than
    /// one virtual link").
    fn reserve_for(&self, repr: &Repr) -> Action {
        let Ok(hops) = self.routes.next_hops(repr.sender) else {
            return Action::Drop(Drop::NoRoute);
        };
        let ports: &[PortId] = match &hops {
            NextHops::Local(p) => std::slice::from_ref(p),
            NextHops::Ecmp(c) => c,
        };
        let free: usize = ports.iter().map(|&p| self.vlinks.free_count(p)).sum();
        let room_in_header = repr.hops().len() < onepipe_wire::cosy::HOPS_MAX;
        if free == 0 || !room_in_header {
            return Action::Block {
                to_sender: Some(hops.pick(self.hash(repr))),
            };
        }
        let mut nth = (self.hash(repr) % free as u64) as usize;
        for &port in ports {
            let count = self.vlinks.free_count(port);
            if nth < count {
                let first = self.vlinks.free_on(port).nth(nth).expect("counted free");
                let more = self.vlinks.free_on(port).filter(|&v| v != first);
                let want = repr.slots.min(self.config.k) as usize;
                let vls = more.take(want - 1).fold(1u16 << first, |m, v| m | 1 << v);
                return Action::Reserve { port, vls };
            }
            nth -= count;
        }
        unreachable!("nth < free")
    }

    /// A packet following the recorded hops: its next hop must be this switch, entered by the
    /// port the rsvp left by, on a virtual link reserved for its message.
    fn along(&self, port: PortId, repr: &Repr) -> Action {
        let Some(hop) = repr.next_hop() else {
            return Action::Drop(Drop::WrongHop);
        };
        if hop.switch != self.me || hop.port != port {
            return Action::Drop(Drop::WrongHop);
        }
        match self.vlinks.held_by(hop.port, hop.vls, Owner::of(repr)) {
            Some(r) => Action::Along {
                out: r.out_port,
                release: repr.kind != Kind::Data,
            },
            None => Action::Drop(Drop::Unreserved),
        }
    }

    fn count_drop(&mut self, why: Drop) {
        let c = &mut self.counters;
        match why {
            Drop::Malformed => c.malformed += 1,
            Drop::Spoofed => c.spoofed += 1,
            Drop::NoRoute => c.no_route += 1,
            Drop::WrongHop => c.wrong_hop += 1,
            Drop::Unreserved => c.unreserved += 1,
        }
    }

    fn enqueue(&mut self, port: PortId, repr: &Repr) {
        let Some(queue) = self.queues.get_mut(port as usize) else {
            self.counters.no_route += 1;
            return;
        };
        if queue.len() >= self.config.queue_frames_max {
            self.counters.queue_full += 1;
            return;
        }
        let mut frame = vec![0; onepipe_wire::cosy::HEADER_LEN];
        repr.emit(&mut frame).expect("a header's room");
        queue.push_back(frame);
        self.queued_frames += 1;
    }

    fn apply(&mut self, now: Instant, in_port: PortId, frame: &mut [u8], action: Action, repr: Option<Repr>) {
        let Some(mut repr) = repr else {
            return self.count_drop(Drop::Malformed);
        };
        match action {
            Action::Drop(why) => self.count_drop(why),
            Action::Route(_) => self.counters.routed += 1,
            Action::Reserve { port, vls } => {
                let r = Reservation {
                    owner: Owner::of(&repr),
                    out_port: in_port,
                    expires_at: now + self.config.cleanup_after,
                };
                for vl in (0..self.config.k).filter(|v| vls >> v & 1 == 1) {
                    assert!(self.vlinks.reserve(port, vl, r), "decided on free virtual links");
                }
                let hop = Hop {
                    switch: self.me,
                    port,
                    vls,
                };
                assert!(repr.push_hop(hop));
                // The next switches reserve no more than this one could.
                repr.slots = hop.count();
                repr.emit(frame);
                self.counters.reserved += 1;
            }
            Action::Block { to_sender } => {
                self.counters.blocked += 1;
                repr.kind = Kind::Reject;
                repr.blocked = true;
                let mut back = repr;
                back.start_along();
                self.enqueue(in_port, &back);
                repr.emit(frame);
                if to_sender.is_none() {
                    self.counters.no_route += 1;
                }
            }
            Action::Along { release, .. } => {
                let hop = repr.next_hop().expect("decided on a hop");
                if repr.class() == onepipe_wire::cosy::class::DATA {
                    self.meter.add(now, in_port, frame.len());
                }
                let keep = if release { 0 } else { hop.vls };
                self.counters.released += self.vlinks.release_all_but(hop.port, keep, Owner::of(&repr));
                repr.pointer -= 1;
                repr.emit(frame);
                self.counters.along += 1;
            }
        }
    }
}

fn route_of(action: Action) -> Route {
    match action {
        Action::Route(port) | Action::Reserve { port, .. } | Action::Along { out: port, .. } => {
            Route::Forward(port)
        }
        Action::Block {
            to_sender: Some(port),
        } => Route::Forward(port),
        Action::Block { to_sender: None } | Action::Drop(_) => Route::Drop,
    }
}

impl Node for CosySwitch {
    fn classify(&self, _: Instant, port: PortId, frame: &[u8]) -> Route {
        route_of(self.decide(port, frame).0)
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        let (action, repr) = self.decide(port, frame);
        if action == Action::Drop(Drop::Unreserved)
            && let Some(count) = self.unreserved_by_port.get_mut(port as usize)
        {
            *count += 1;
        }
        if route_of(action) != route {
            // The runtime dropped it (no link on that port): change nothing, count it.
            self.counters.no_route += 1;
            return;
        }
        self.apply(now, port, frame, action, repr);
    }

    fn poll_transmit(&mut self, _: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let frame = self.queues.get_mut(port as usize)?.pop_front()?;
        self.queued_frames -= 1;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.vlinks.next_expiry()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.counters.expired += self.vlinks.expire(now);
    }
}

impl Hints for CosySwitch {
    fn wants_transmit(&self) -> bool {
        self.queued_frames > 0
    }

    /// Failure > control > data (paper 4, footnote 4).
    fn priority(&self, frame: &[u8]) -> u8 {
        onepipe_wire::cosy::class_of(frame)
    }
}

#[cfg(test)]
mod tests;
