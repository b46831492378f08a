//! The shape every participant of the fabric has, so that one runtime (inproc, udp, sim) can
//! drive switches and endpoints alike without knowing what they do.
//!
//! A node owns no socket, thread, clock or RNG. The runtime calls, in any order it likes:
//! - [`Node::classify`] then [`Node::handle_frame`] for each frame that arrives on a port.
//!   `classify` is pure, so a runtime may ask where a frame goes, find that port's queue full,
//!   and leave the frame where it is (backpressure, like PFC in a lossless fabric);
//! - [`Node::poll_transmit`] per port, whenever that port has room, until it returns `None`;
//! - [`Node::handle_timeout`] when [`Node::poll_timeout`] has passed (an extra call is harmless).
//!
//! Besides, one optional hook, [`Hints`]: what a runtime may ask to schedule a node well.

use onepipe_wire::Instant;

/// A port of a node; endpoints have one port, 0.
pub type PortId = u16;

/// Largest frame a node may hand to a runtime or receive from one.
pub const FRAME_MAX: usize = 9216;

/// Priority classes a runtime serves at each output port ([`Hints::priority`]): class 0
/// first, `PRIORITY_CLASSES - 1` (best effort) last. Four, as cosy needs (paper 003 section 4,
/// footnote 4: failure, control, data, best effort).
pub const PRIORITY_CLASSES: usize = 4;

/// What happens to an arriving frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Rewritten in place by `handle_frame` and sent on this port.
    Forward(PortId),
    /// Taken by the node itself (delivered, or a beacon absorbed).
    Consume,
    /// Discarded; `handle_frame` still sees it, to count why.
    Drop,
}

pub trait Node: Hints + Send {
    /// Where `frame`, arriving on `port`, will go. Must not change state.
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route;

    /// Processes a frame after the runtime made room for the route `classify` gave. For
    /// `Route::Forward` the node may rewrite the frame in place before the runtime sends it.
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route);

    /// A frame has arrived on `port` but cannot move on yet: the port `classify` chose is full
    /// (backpressure). It will be offered again through `handle_frame`. A node may learn from
    /// it meanwhile (a switch takes its barrier and counts the link alive: the frame is in its
    /// ingress buffer). Must be idempotent.
    fn handle_stalled(&mut self, _now: Instant, _port: PortId, _frame: &[u8]) {}

    /// The output queue a forwarded frame joins is past its ECN threshold: mark the frame if
    /// its protocol carries congestion marks (DCTCP, paper 6.1). Called after `handle_frame`.
    fn mark_congestion(&self, _frame: &mut [u8]) {}

    /// The next frame the node itself originates on `port` (beacons, data, NAKs), written into
    /// `buf` (of at least [`FRAME_MAX`] bytes); returns its length.
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize>;

    /// When the node next wants [`Node::handle_timeout`].
    fn poll_timeout(&self) -> Option<Instant>;

    fn handle_timeout(&mut self, now: Instant);
}

/// The one optional hook of a node: what a runtime may ask to schedule it well. Every method
/// has a default that is correct, only slower (or, for `peer_gone`, more patient), so a node
/// that cannot tell writes `impl Hints for MyNode {}`. No state machine's correctness may
/// depend on a runtime asking.
pub trait Hints {
    /// Whether [`Node::poll_transmit`] may give a frame on some port now, so that a runtime
    /// can skip asking every port of a switch after every frame. `false` must be exact.
    fn wants_transmit(&self) -> bool {
        true
    }

    /// Whether the neighbour behind `port` is gone: the node has heard nothing from it for
    /// longer than a live neighbour stays silent (a switch's dead-link timeout). A runtime whose
    /// links hold frames until the next hop has room (the udp runtime's credits) drops what is
    /// forwarded there instead, as a switch drops frames for a link that is down: waiting for
    /// credit that never comes would hold back every input that carries frames for that port.
    fn peer_gone(&self, _port: PortId) -> bool {
        false
    }

    /// How many units of CPU work receiving or sending `frame` is, for a runtime that models a
    /// CPU (the simulator charges its per-frame cost once per unit). One for most frames.
    fn work_units(&self, _frame: &[u8]) -> u32 {
        1
    }

    /// The priority class of `frame`, which this node forwards or originates, for a runtime
    /// that serves its output queues by strict priority (the simulator): 0 is served first,
    /// `PRIORITY_CLASSES - 1` last; a runtime takes a larger value as the last class. The
    /// default, best effort for every frame, keeps one FIFO per port.
    fn priority(&self, _frame: &[u8]) -> u8 {
        (PRIORITY_CLASSES - 1) as u8
    }

    /// A runtime that runs nodes in turn (one visit of each per pass of a shared thread) calls
    /// this when it has taken the node's frames for the visit. Returns how many more frames
    /// the node wants to originate to close the visit, which the runtime then asks for: a host
    /// finishes a scattering it began and promises what it will not stamp below until its next
    /// visit. Runtimes that give every node its own thread of control need not call it.
    fn end_visit(&mut self, _now: Instant) -> usize {
        0
    }
}

impl<T: Node + ?Sized> Node for Box<T> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        (**self).classify(now, port, frame)
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        (**self).handle_frame(now, port, frame, route)
    }
    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        (**self).handle_stalled(now, port, frame)
    }
    fn mark_congestion(&self, frame: &mut [u8]) {
        (**self).mark_congestion(frame)
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        (**self).poll_transmit(now, port, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now)
    }
}

impl<T: Hints + ?Sized> Hints for Box<T> {
    fn peer_gone(&self, port: PortId) -> bool {
        (**self).peer_gone(port)
    }
    fn wants_transmit(&self) -> bool {
        (**self).wants_transmit()
    }
    fn work_units(&self, frame: &[u8]) -> u32 {
        (**self).work_units(frame)
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        (**self).priority(frame)
    }
    fn end_visit(&mut self, now: Instant) -> usize {
        (**self).end_visit(now)
    }
}

/// One of two kinds of node, so that a runtime can drive, say, switches and hosts in one
/// vector without boxing each call.
pub enum Either<L, R> {
    Left(L),
    Right(R),
}

impl<L: Node, R: Node> Node for Either<L, R> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        match self {
            Either::Left(n) => n.classify(now, port, frame),
            Either::Right(n) => n.classify(now, port, frame),
        }
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        match self {
            Either::Left(n) => n.handle_frame(now, port, frame, route),
            Either::Right(n) => n.handle_frame(now, port, frame, route),
        }
    }
    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        match self {
            Either::Left(n) => n.handle_stalled(now, port, frame),
            Either::Right(n) => n.handle_stalled(now, port, frame),
        }
    }
    fn mark_congestion(&self, frame: &mut [u8]) {
        match self {
            Either::Left(n) => n.mark_congestion(frame),
            Either::Right(n) => n.mark_congestion(frame),
        }
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        match self {
            Either::Left(n) => n.poll_transmit(now, port, buf),
            Either::Right(n) => n.poll_transmit(now, port, buf),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Either::Left(n) => n.poll_timeout(),
            Either::Right(n) => n.poll_timeout(),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            Either::Left(n) => n.handle_timeout(now),
            Either::Right(n) => n.handle_timeout(now),
        }
    }
}

impl<L: Hints, R: Hints> Hints for Either<L, R> {
    fn peer_gone(&self, port: PortId) -> bool {
        match self {
            Either::Left(n) => n.peer_gone(port),
            Either::Right(n) => n.peer_gone(port),
        }
    }
    fn wants_transmit(&self) -> bool {
        match self {
            Either::Left(n) => n.wants_transmit(),
            Either::Right(n) => n.wants_transmit(),
        }
    }
    fn work_units(&self, frame: &[u8]) -> u32 {
        match self {
            Either::Left(n) => n.work_units(frame),
            Either::Right(n) => n.work_units(frame),
        }
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        match self {
            Either::Left(n) => n.priority(frame),
            Either::Right(n) => n.priority(frame),
        }
    }
    fn end_visit(&mut self, now: Instant) -> usize {
        match self {
            Either::Left(n) => n.end_visit(now),
            Either::Right(n) => n.end_visit(now),
        }
    }
}
