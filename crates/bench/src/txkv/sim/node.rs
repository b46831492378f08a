//! What a node of the simulated store is: a 1Pipe switch, or a process (a replica or a client
//! of the store) on the real endpoint, with its CPU's cost per frame.

use onepipe::host::HostNode;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_proto::switch::{OnePipeProgram, SwitchNode};
use onepipe_txkv::run::StoreProcess;
use onepipe_txkv::{ClientEngine, ServerEngine};
use onepipe_wire::Instant;
use onepipe_wire::packet::HEADER_LEN;

use super::classes::ClassedWorkload;

pub type SimProcess = StoreProcess<Box<dyn ServerEngine>, Box<dyn ClientEngine>, ClassedWorkload>;

/// A host's CPU time per frame it receives or sends, in nanoseconds (the engine's unit of
/// work, see `KvSimConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameCost {
    /// A frame with a payload: a message of the store, or a packet of one.
    pub data_ns: u32,
    /// A frame of the header alone (a beacon, an ACK): the endpoint's own bookkeeping.
    pub control_ns: u32,
}

pub enum KvNode {
    Switch(Box<SwitchNode>),
    Host(Box<HostNode<SimProcess>>, FrameCost),
}

impl KvNode {
    pub fn host(&self) -> Option<&HostNode<SimProcess>> {
        match self {
            KvNode::Host(h, _) => Some(h),
            KvNode::Switch(_) => None,
        }
    }

    /// The state machines' `invariants()`, checked after every step into a node (in release
    /// builds too: a broken invariant is a bug to stop at, with the seed that reproduces it).
    pub fn invariants(&self) {
        match self {
            KvNode::Switch(s) => {
                s.invariants();
                s.onepipe().invariants();
            }
            KvNode::Host(h, _) => {
                h.endpoint.invariants();
                match &h.app {
                    StoreProcess::Server(s) => s.engine.invariants(),
                    StoreProcess::Client(c) => c.engine.invariants(),
                }
            }
        }
    }
}

macro_rules! each {
    ($self:ident, $n:ident => $e:expr) => {
        match $self {
            KvNode::Switch($n) => $e,
            KvNode::Host($n, _) => $e,
        }
    };
}

impl Node for KvNode {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        each!(self, n => n.classify(now, port, frame))
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        each!(self, n => n.handle_frame(now, port, frame, route));
        self.invariants();
    }
    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        each!(self, n => n.handle_stalled(now, port, frame));
        self.invariants();
    }
    fn mark_congestion(&self, frame: &mut [u8]) {
        each!(self, n => n.mark_congestion(frame))
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let sent = each!(self, n => n.poll_transmit(now, port, buf));
        self.invariants();
        sent
    }
    fn poll_timeout(&self) -> Option<Instant> {
        each!(self, n => n.poll_timeout())
    }
    fn handle_timeout(&mut self, now: Instant) {
        each!(self, n => n.handle_timeout(now));
        self.invariants();
    }
}

impl Hints for KvNode {
    fn wants_transmit(&self) -> bool {
        each!(self, n => n.wants_transmit())
    }
    fn work_units(&self, frame: &[u8]) -> u32 {
        match self {
            KvNode::Switch(s) => s.work_units(frame),
            KvNode::Host(_, cost) if frame.len() > HEADER_LEN => cost.data_ns,
            KvNode::Host(_, cost) => cost.control_ns,
        }
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        each!(self, n => n.priority(frame))
    }
}
