//! A node with background traffic beside it: background frames are taken before the node
//! inside sees them. A switch forwards them as plain IP traffic, by per-flow ECMP over the
//! fabric's up/down routes (a 1Pipe program never sees them, as a 1Pipe switch's program sees
//! only 1Pipe packets); a host runs its flows and shares its link with the node inside,
//! taking turns frame by frame. Background frames cost no host CPU: TCP runs on other cores
//! (and the NIC's offloads), not on the 1Pipe process's.

use super::frame::{self, is_background};
use super::host::Flows;
use onepipe_fabric::hash::mix64;
use onepipe_fabric::routing::Routes;
use onepipe_fabric::{Hints, Node, PRIORITY_CLASSES, PortId, Route};
use onepipe_wire::Instant;

/// A switch's forwarding of background frames.
pub struct Router {
    routes: Routes,
    /// ECMP's hash seed, so that a run's seed moves flows between paths.
    seed: u64,
}

impl Router {
    pub fn new(routes: Routes, seed: u64) -> Router {
        Router { routes, seed }
    }

    fn route(&self, frame: &[u8]) -> Route {
        let Some(r) = frame::Repr::parse(frame) else {
            return Route::Drop;
        };
        // Per flow, both directions of a flow hashed apart: ECMP on the 5-tuple.
        let key = (r.src as u64) << 32 ^ (r.dst as u64) << 16 ^ r.flow as u64 ^ (r.ack as u64) << 63;
        match self.routes.next_hops(r.dst) {
            Ok(hops) => Route::Forward(hops.pick(mix64(key ^ self.seed))),
            Err(_) => Route::Drop,
        }
    }
}

enum Part {
    None,
    Router(Box<Router>),
    Flows(Box<Flows>),
}

/// `inner` with background traffic beside it; see the module's comment.
pub struct WithBackground<N> {
    pub inner: N,
    part: Part,
    /// A host's link alternates between its two sources, frame by frame.
    background_next: bool,
}

/// A host's link to its ToR.
const FABRIC_PORT: PortId = 0;

impl<N> WithBackground<N> {
    /// No background traffic: every call goes to `inner`.
    pub fn plain(inner: N) -> WithBackground<N> {
        WithBackground {
            inner,
            part: Part::None,
            background_next: false,
        }
    }

    pub fn switch(inner: N, router: Router) -> WithBackground<N> {
        WithBackground {
            part: Part::Router(Box::new(router)),
            ..WithBackground::plain(inner)
        }
    }

    pub fn host(inner: N, flows: Flows) -> WithBackground<N> {
        WithBackground {
            part: Part::Flows(Box::new(flows)),
            ..WithBackground::plain(inner)
        }
    }

    pub fn flows(&self) -> Option<&Flows> {
        match &self.part {
            Part::Flows(f) => Some(f),
            _ => None,
        }
    }

    /// Whether `frame` is for the background part (there is one, and the frame is of it).
    fn takes(&self, frame: &[u8]) -> bool {
        !matches!(self.part, Part::None) && is_background(frame)
    }

    pub fn invariants(&self) {
        if let Part::Flows(f) = &self.part {
            f.invariants();
        }
    }
}

impl<N: Node> Node for WithBackground<N> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        if !self.takes(frame) {
            return self.inner.classify(now, port, frame);
        }
        match &self.part {
            Part::Router(r) => r.route(frame),
            _ => Route::Consume,
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        if !self.takes(frame) {
            return self.inner.handle_frame(now, port, frame, route);
        }
        if let Part::Flows(f) = &mut self.part {
            f.handle_frame(now, frame);
        }
    }

    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if !self.takes(frame) {
            self.inner.handle_stalled(now, port, frame);
        }
    }

    fn mark_congestion(&self, frame: &mut [u8]) {
        if self.takes(frame) {
            frame::mark_ce(frame);
        } else {
            self.inner.mark_congestion(frame);
        }
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let Part::Flows(flows) = &mut self.part else {
            return self.inner.poll_transmit(now, port, buf);
        };
        if port != FABRIC_PORT {
            return self.inner.poll_transmit(now, port, buf);
        }
        let background_first = self.background_next;
        self.background_next = !background_first;
        if background_first && let Some(len) = flows.poll_transmit(now, buf) {
            return Some(len);
        }
        if let Some(len) = self.inner.poll_transmit(now, port, buf) {
            return Some(len);
        }
        if background_first {
            return None;
        }
        flows.poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let inner = self.inner.poll_timeout();
        match &self.part {
            Part::Flows(f) => [inner, f.poll_timeout()].into_iter().flatten().min(),
            _ => inner,
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Part::Flows(f) = &mut self.part
            && f.poll_timeout().is_some_and(|t| t <= now)
        {
            f.handle_timeout(now);
        }
        if self.inner.poll_timeout().is_some_and(|t| t <= now) {
            self.inner.handle_timeout(now);
        }
    }
}

impl<N: Hints> Hints for WithBackground<N> {
    fn wants_transmit(&self) -> bool {
        self.inner.wants_transmit() || matches!(&self.part, Part::Flows(f) if f.may_transmit())
    }
    fn peer_gone(&self, port: PortId) -> bool {
        self.inner.peer_gone(port)
    }
    /// Background frames take no CPU of the node inside (see the module's comment).
    fn work_units(&self, frame: &[u8]) -> u32 {
        if self.takes(frame) {
            0
        } else {
            self.inner.work_units(frame)
        }
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        if self.takes(frame) {
            (PRIORITY_CLASSES - 1) as u8
        } else {
            self.inner.priority(frame)
        }
    }
    fn end_visit(&mut self, now: Instant) -> usize {
        self.inner.end_visit(now)
    }
}
