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
//!
//! A link to another switch that the controller took out (a switch or a link failed) comes back
//! the same way: the first frame heard on it once it is out is reported, and the controller
//! readmits it at both ends (`controller/readmit.rs`).

use super::{CommitInput, InputState, Lane, NoSuchPort, Switch};
use onepipe_fabric::PortId;
use onepipe_wire::Instant;

/// How many times a link to a switch heard again while out is reported (see
/// `Switch::heard_while_out`): the last goes about 2^7 `dead_after` after the first.
pub const HEARD_OUT_REPORTS: u8 = 8;

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
    pub(super) fn heard_on_cut(&mut self, now: Instant, port: usize) {
        if std::mem::take(&mut self.ports[port].quarantined) {
            self.heard_again.push(port as PortId);
        }
        self.heard_while_out(now, port);
    }

    /// A frame arrived on input `port`: if it is a link to a switch that the controller took
    /// out of the commit lane (or cut) and that had gone silent, the switch at its far end is
    /// back, restarted or healed. The switch takes it back into its lanes by itself (like a
    /// new link, `hear`); the routes avoid it until the controller readmits it, so it is
    /// reported, and again after `dead_after`, doubling, [`HEARD_OUT_REPORTS`] times in all
    /// unless readmitted first (a report can be lost, and the controller may refuse: the far
    /// side holds processes it cut off). A link out of the commit lane that never went silent
    /// (nothing behind it can send, see `Switch::remove_input`) is not news.
    pub(super) fn heard_while_out(&mut self, now: Instant, port: usize) {
        let dead_after = self.config.dead_after();
        let p = &mut self.ports[port];
        if p.to_process {
            return;
        }
        let (at, reports) = match p.heard_out {
            None if p.cut || (p.commit == CommitInput::Removed && p.state == InputState::Dead) => (now, 0),
            None => return,
            Some((at, reports)) => (at, reports),
        };
        let wait = dead_after.saturating_mul((1u64 << reports.min(16)) - 1);
        if reports >= HEARD_OUT_REPORTS || now < at + wait {
            return;
        }
        p.heard_out = Some((at, reports + 1));
        if !self.heard_again.contains(&(port as PortId)) {
            self.heard_again.push(port as PortId);
        }
    }

    /// A controller decides the inputs this switch reports down (paper 5.2). Until it removes
    /// one (Resume) or readmits it, a reported input that speaks again does not move the
    /// commit lane: the controller may be deciding a failure timestamp from the last commit
    /// barrier reported, and the commit barrier must not pass it before every correct receiver
    /// has heard of the failure (found by a simulator campaign, seed 90114189: a ToR restarted
    /// between the decision that failed its rack and the Resume, and the spines' commit
    /// barriers passed the failure timestamp with its processes' messages). Without a
    /// controller nobody would decide, and a returning input counts again at once.
    pub fn set_controlled(&mut self) {
        self.controlled = true;
    }

    /// This switch is starting again after a crash, with none of its state: what its inputs
    /// carried through the crashed incarnation is unknown, so an input silent across the
    /// restart (a process paused with a scattering prepared, a link down) may still hold
    /// prepared messages older than anything this incarnation will hear. Every input is taken
    /// as heard at zero: it holds the commit lane until it speaks, and if it stays silent it is
    /// reported like any dead input, rather than forgotten as an input that never joined
    /// (`forget_unheard`, which is for a fabric starting up; found by a simulator campaign,
    /// seed 90109074: a host paused as its ToR crashed came back with a scattering below the
    /// commit barrier the fresh ToR had let pass, and every commit barrier stalled).
    pub fn restarted(mut self) -> Switch {
        for p in &mut self.ports {
            p.heard = true;
        }
        self.check_invariants();
        self
    }

    /// The controller removes input `port`, a link to a switch that went silent and was heard
    /// again before this order came (the far switch restarted within the controller's
    /// decision): it is back already, and reported as if heard now, or the routes would avoid
    /// it for good.
    pub(super) fn returned_before_removal(&mut self, port: usize) {
        let p = &mut self.ports[port];
        if p.to_process || !p.died || p.state == InputState::Dead || p.heard_out.is_some() {
            return;
        }
        p.heard_out = Some((p.last_heard, 1));
        if !self.heard_again.contains(&(port as PortId)) {
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
        // Taken back: a link to a switch heard again is not reported any more.
        p.heard_out = None;
        p.died = false;
        let held = std::mem::take(&mut p.held);
        let out = matches!(p.commit, CommitInput::Removed | CommitInput::Unheard);
        if !p.cut && !out && !held {
            return Ok(());
        }
        if held && p.commit == CommitInput::Counted {
            // Held at its report: it joins again from there, like a new link.
            p.commit = CommitInput::Removed;
            let slot = p.slot;
            let half = self.half_of_input(i);
            self.lanes[super::Lane::Commit as usize]
                .half(half)
                .set(slot, u64::MAX);
        }
        let p = &mut self.ports[i];
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
        if matches!(self.ports[i].commit, CommitInput::Removed | CommitInput::Unheard) {
            self.ports[i].commit = CommitInput::Joining;
            self.freeze(Lane::Commit, half, slot);
        }
        self.check_invariants();
        Ok(())
    }
}
