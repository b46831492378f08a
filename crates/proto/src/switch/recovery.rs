//! A failed process's input at its ToR, from Resume until the process recovers (paper 5.2,
//! Receiver Recovery).
//!
//! Once the controller removes a process's input (Resume), the process is failed for the rest
//! of its incarnation: the input is *quarantined*, cut both ways. Taking its frames would let
//! its old commit barrier back into the commit lane; sending it ours would let it deliver its
//! receive buffer up to a barrier that promises nothing about it, before it knows which of
//! those messages the correct receivers discarded. The first frame heard on a quarantined
//! input is reported ([`Switch::poll_event`]): the process is back, and the controller tells
//! it of its failure. When it has recovered, the controller readmits the input
//! ([`Switch::readmit_input`]) and it joins like a new link (paper 4.2): its registers hold the
//! output barriers until its own pass them, so no barrier goes back.

use super::{CommitInput, InputState, Lane, NoSuchPort, Switch};
use onepipe_fabric::PortId;
use onepipe_wire::Instant;

impl Switch {
    /// Cuts input `port` without reporting it (the controller has its report already).
    pub(super) fn quarantine(&mut self, port: usize) {
        let p = &mut self.ports[port];
        if !p.cut {
            p.cut = true;
            p.quarantined = true;
        }
        self.kill_input(port);
    }

    /// A frame arrived on cut input `port`.
    pub(super) fn heard_on_cut(&mut self, port: usize) {
        if std::mem::take(&mut self.ports[port].quarantined) {
            self.heard_again.push(port as PortId);
        }
    }

    /// Quarantined process inputs heard since they were quarantined: what a restarted
    /// controller must hear again.
    pub fn quarantined_heard(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.cut && p.to_process && !p.quarantined)
            .map(|(i, _)| i as PortId)
    }

    /// The controller takes input `port` back: a recovered process rejoins, or a switch has a
    /// process behind it again. The input joins both lanes like a new link: its registers
    /// hold the outputs of this moment until its own barriers pass them. If it stays silent it
    /// is reported dead after the usual timeout, and fails again. An input in use is left
    /// alone (a repeated order).
    pub fn readmit_input(&mut self, now: Instant, port: PortId) -> Result<(), NoSuchPort> {
        let i = self.port_index(port)?;
        let half = self.half_of_input(i);
        let p = &mut self.ports[i];
        if !p.cut && p.commit != CommitInput::Removed {
            return Ok(());
        }
        p.cut = false;
        p.quarantined = false;
        p.reported = false;
        p.heard = true;
        p.last_heard = now;
        let slot = p.slot;
        if p.state == InputState::Dead {
            p.state = InputState::Joining;
            self.freeze(Lane::BestEffort, half, slot);
        }
        if self.ports[i].commit == CommitInput::Removed {
            self.ports[i].commit = CommitInput::Joining;
            self.freeze(Lane::Commit, half, slot);
        }
        self.check_invariants();
        Ok(())
    }
}
