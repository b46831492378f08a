//! A switch's side of the bound on implausible time (docs/ordering.md, "Implausible time"):
//! which barriers no correct sender could have sent, and the reports of the frames refused.

use super::{ImplausibleReport, Switch};
use crate::plausible::implausible_ahead_ns;
use onepipe_fabric::PortId;
use onepipe_wire::Instant;

impl Switch {
    /// How far the furthest of `heard` is ahead of this switch's clock, if further than a
    /// correct sender's could be (see [`super::SwitchConfig::time_ahead_max`]).
    pub(super) fn implausible_ahead_ns(&self, now: Instant, heard: [Instant; 2]) -> Option<u64> {
        let (lead, max) = (self.config.promise_lead, self.config.time_ahead_max);
        heard
            .iter()
            .filter_map(|&b| implausible_ahead_ns(b, now, lead, max))
            .max()
    }

    /// A frame on input `port` refused for a barrier `ahead_ns` ahead: counted, and its input
    /// queued for a report unless one was made within the report interval.
    pub(super) fn refuse_implausible(&mut self, now: Instant, port: usize, ahead_ns: u64) {
        self.counters.barrier_implausible += 1;
        if self.implausible_inputs[port].refuse(now, ahead_ns) {
            self.implausible.push(port as PortId);
        }
    }

    /// The next input's report of frames refused, for the controller.
    pub(super) fn poll_implausible(&mut self) -> Option<ImplausibleReport> {
        let port = self.implausible.pop()?;
        Some(self.implausible_inputs[port as usize].take_report(port))
    }
}
