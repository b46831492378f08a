//! What a simulated node is: a switch, a process, the controller, or a switch's host
//! representative (host delegation, paper 6.2.3).

use crate::dctcp::WithBackground;
use crate::host::SimHost;
use onepipe::control_node::{ControllerNode, Mgmt};
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_proto::representative::Representative;
use onepipe_proto::switch::{OnePipeProgram, Switch, SwitchNode};
use onepipe_wire::Instant;

/// Switches and hosts carry background traffic beside 1Pipe's in runs that have it
/// ([`crate::dctcp`]).
pub enum SimNode {
    Switch(Box<WithBackground<Mgmt<SwitchNode>>>),
    Host(Box<WithBackground<Mgmt<SimHost>>>),
    Controller(Box<ControllerNode>),
    Representative(Box<Mgmt<Representative>>),
}

impl SimNode {
    pub fn switch(&self) -> Option<&Switch> {
        match self {
            SimNode::Switch(s) => Some(s.inner.node.onepipe()),
            _ => None,
        }
    }
    /// The 1Pipe program of a host representative.
    pub fn representative(&self) -> Option<&Switch> {
        match self {
            SimNode::Representative(r) => Some(r.node.program()),
            _ => None,
        }
    }
    pub fn host(&self) -> Option<&SimHost> {
        match self {
            SimNode::Host(h) => Some(&h.inner.node),
            _ => None,
        }
    }
    /// A host's background flows, if the run has them.
    pub fn background_flows(&self) -> Option<&crate::dctcp::Flows> {
        match self {
            SimNode::Host(h) => h.flows(),
            _ => None,
        }
    }
    pub fn host_mut(&mut self) -> Option<&mut SimHost> {
        match self {
            SimNode::Host(h) => Some(&mut h.inner.node),
            _ => None,
        }
    }
    pub fn controller(&self) -> Option<&ControllerNode> {
        match self {
            SimNode::Controller(c) => Some(c),
            _ => None,
        }
    }

    /// The state machine's `invariants()`, which the engine's every step into a node is
    /// followed by (in release builds too: a broken invariant is a bug to stop at, with the
    /// seed that reproduces it).
    pub fn invariants(&self) {
        match self {
            SimNode::Switch(s) => {
                s.inner.node.invariants();
                s.inner.node.onepipe().invariants();
            }
            SimNode::Host(h) => {
                h.inner.node.endpoint.invariants();
                h.invariants();
            }
            SimNode::Controller(c) => c.controller().invariants(),
            SimNode::Representative(r) => r.node.invariants(),
        }
    }
}

/// Static dispatch to the node inside: this is the engine's innermost loop.
macro_rules! each {
    ($self:ident, $n:ident => $e:expr) => {
        match $self {
            SimNode::Switch($n) => $e,
            SimNode::Host($n) => $e,
            SimNode::Controller($n) => $e,
            SimNode::Representative($n) => $e,
        }
    };
}

impl Node for SimNode {
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

impl Hints for SimNode {
    fn wants_transmit(&self) -> bool {
        each!(self, n => n.wants_transmit())
    }
    fn work_units(&self, frame: &[u8]) -> u32 {
        each!(self, n => n.work_units(frame))
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        each!(self, n => n.priority(frame))
    }
}
