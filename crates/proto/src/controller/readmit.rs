//! Links between switches taken back after they return.
//!
//! A link between switches that failed (or whose far switch failed) is taken out of the commit
//! lanes at Resume and out of the routes. When its far end is heard on it again (the switch
//! restarted, or the link healed), the near switch reports it (`Input::Heard`), and the
//! controller readmits it at both ends (`Output::Readmit`: each end takes it like a new link,
//! paper 4.2, so no barrier goes back) and gives every switch routes that use it again.
//!
//! Only while no recovery is in progress (the switch repeats its report), and only a link that
//! gives the controller's side back a path, or a switch with nobody behind
//! it, is taken back: the far side, as the controller sees it without the link, holds no
//! process it has not cut off. Processes on the far side were declared failed (or will be):
//! they come back only through Receiver Recovery, one at a time, never by a link healing
//! under them. A restarted ToR whose hosts are still linked to it in the controller's graph
//! therefore stays out.

use super::Output;
use super::graph::NodeId;
use super::{Controller, ControllerError};

impl Controller {
    /// Input `port` of switch `switch` heard its far end again, and the link leads to another
    /// switch.
    pub(super) fn on_switch_link_heard(&mut self, link: usize, near: NodeId) -> Result<(), ControllerError> {
        let busy =
            !self.undecided.is_empty() || !self.cuts.is_empty() || self.epochs.iter().any(|e| !e.resumed);
        if !self.down[link] || busy {
            // In use already (a repeated report), or a recovery is in progress: the switch
            // reports it again later.
            self.counters.readmissions_stale += 1;
            return Ok(());
        }
        if !self.may_readmit(link, near) {
            self.counters.readmissions_refused += 1;
            return Ok(());
        }
        self.down[link] = false;
        self.reports[link] = [None, None];
        for end in self.graph.link(link).ends {
            self.switches_failed.remove(&end.node);
            // Removed again if it is still sourceless at the next decision.
            self.sourceless.remove(&end);
            self.outputs.push_back(Output::Readmit {
                switch: end.node,
                ports: vec![end.port],
            });
        }
        let far = self.graph.link(link).ends.into_iter().find(|e| e.node != near);
        if let Some(far) = far {
            self.remove_inputs_still_down(far.node);
        }
        self.reroute = true;
        self.counters.links_readmitted += 1;
        Ok(())
    }

    /// A switch taken back was told nothing while it was out: it removes its inputs on the
    /// links still down whose far end is off the controller's side (dead, or a region declared
    /// failed). A restarted switch holds each input in its commit lane until it speaks, and one
    /// whose far end is dead never will (found by a simulator campaign, seed 90117261: a
    /// restarted spine next to a dead ToR was readmitted, and as a joining link it froze its
    /// neighbours' commit barriers for good); behind one whose far end lives may be processes
    /// declared failed. Links still down to the controller's side are left alone: they are
    /// likely to be readmitted next, and an order to remove one that arrived after the one to
    /// readmit it (management frames can be reordered) would take a live input out for good
    /// (seed 90110662). If such a link stays down, the switch reports it and gets its Resume
    /// then (`resend_resume`).
    fn remove_inputs_still_down(&mut self, switch: NodeId) {
        let component = self.graph.components(|l| !self.down[l]);
        let failed = &self.failed;
        let home = self
            .graph
            .controller_component(&component, |p| failed[p as usize].is_none());
        let ports: Vec<u16> = (0..self.graph.link_count())
            .filter(|&l| self.down[l])
            .filter_map(|l| {
                let ends = self.graph.link(l).ends;
                let (near, far) = match ends {
                    [a, b] if a.node == switch => (a, b),
                    [a, b] if b.node == switch => (b, a),
                    _ => return None,
                };
                (component[far.node] != home).then_some(near.port)
            })
            .collect();
        if !ports.is_empty() {
            self.outputs.push_back(Output::RemoveInputs { switch, ports });
        }
    }

    /// Whether taking `link` back is safe: `near` is a correct switch on the controller's side,
    /// and the far end is on that side too or has no process behind it.
    fn may_readmit(&self, link: usize, near: NodeId) -> bool {
        let component = self.graph.components(|l| !self.down[l]);
        let failed = &self.failed;
        let home = self
            .graph
            .controller_component(&component, |p| failed[p as usize].is_none());
        if component[near] != home || self.switches_failed.contains(&near) {
            return false;
        }
        let ends = self.graph.link(link).ends;
        let far = component[ends.iter().find(|e| e.node != near).map_or(near, |e| e.node)];
        far == home
            || (0..self.graph.process_count() as u32).all(|p| component[self.graph.node_of_process(p)] != far)
    }

    /// Whether input `port` of `switch` leads to a link taken out and not yet back: a Resume
    /// resent after a takeover must not take a readmitted link out again.
    pub(super) fn input_out(&self, switch: NodeId, port: u16) -> bool {
        self.graph.link_at(switch, port).is_none_or(|l| self.down[l])
    }
}
