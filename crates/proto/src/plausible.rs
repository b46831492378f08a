//! Plausibility bounds on time (docs/ordering.md, "Implausible time").
//!
//! A barrier promises that nothing below it will come, and a receiver's register only ever
//! rises: one barrier far in the future pins the register there, after which the real barriers
//! of the link are ignored as regressions, the minimum over the inputs moves without that link,
//! and its messages arrive below barriers already passed (late, or committed at some receivers
//! and not others). A correct sender's barriers and timestamps are its clock, plus at most its
//! promise lead; clocks of one fabric differ by at most their skew. So a switch or an endpoint
//! refuses a frame whose barrier (or message timestamp) is further ahead of its own clock than
//! `promise lead + time_ahead_max`, counts it, and reports the input to the controller.

use onepipe_fabric::PortId;
use onepipe_wire::{Duration, Instant};

/// The default `time_ahead_max` of switches and endpoints: the largest skew between two clocks
/// of a fabric plus a margin. One second is far above what NTP keeps machines within (a few ms;
/// PTP, microseconds) and above the stalls a node's thread sees on a loaded machine (hundreds
/// of ms here), whose `now` is then that much stale; a forged barrier within it holds a link's
/// register ahead of the truth for at most this long.
pub const TIME_AHEAD_MAX: Duration = Duration::from_secs(1);

/// An input's refusals are reported at most once in this long; the ones in between are summed
/// into the next report. A flood of forged frames must not become a flood of reports (each is
/// written to the controller's log).
pub const REPORT_INTERVAL: Duration = Duration::from_millis(100);

/// How far `value` is ahead of `clock`, in ns, if it is further than `lead + ahead_max`: a
/// value no correct sender could have stamped.
pub fn implausible_ahead_ns(
    value: Instant,
    clock: Instant,
    lead: Duration,
    ahead_max: Duration,
) -> Option<u64> {
    (value > clock + lead + ahead_max).then(|| value.saturating_since(clock).as_nanos())
}

/// Frames refused on one input for time implausibly far ahead, as reported to the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImplausibleReport {
    /// The input: a switch's port, or 0 for an endpoint (its link from the ToR).
    pub port: PortId,
    /// The furthest ahead of the receiver's clock a refused value was, in ns.
    pub ahead_ns: u64,
    /// Frames refused since the last report.
    pub refused: u64,
}

/// One input's refusals since its last report, and when that was.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImplausibleInput {
    refused: u64,
    ahead_ns_max: u64,
    reported_at: Option<Instant>,
    /// A report is queued and not yet taken.
    pending: bool,
}

impl ImplausibleInput {
    /// Counts a refusal `ahead_ns` ahead; whether a report is now due (at most one every
    /// [`REPORT_INTERVAL`], and one at a time): the caller then queues this input once.
    pub fn refuse(&mut self, now: Instant, ahead_ns: u64) -> bool {
        self.refused += 1;
        self.ahead_ns_max = self.ahead_ns_max.max(ahead_ns);
        let recent = self.reported_at.is_some_and(|t| now < t + REPORT_INTERVAL);
        if self.pending || recent {
            return false;
        }
        self.pending = true;
        self.reported_at = Some(now);
        true
    }

    /// The queued report, with everything refused since the last one.
    pub fn take_report(&mut self, port: PortId) -> ImplausibleReport {
        debug_assert!(self.pending, "a report is taken once it was queued");
        self.pending = false;
        ImplausibleReport {
            port,
            ahead_ns: std::mem::take(&mut self.ahead_ns_max),
            refused: std::mem::take(&mut self.refused),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_lead_plus_the_allowance_and_equal_is_plausible() {
        let clock = Instant::from_nanos(1_000_000);
        let (lead, max) = (Duration::from_nanos(500), Duration::from_nanos(1_000));
        assert_eq!(
            implausible_ahead_ns(clock + Duration::from_nanos(1_500), clock, lead, max),
            None
        );
        assert_eq!(
            implausible_ahead_ns(clock + Duration::from_nanos(1_501), clock, lead, max),
            Some(1_501)
        );
        assert_eq!(
            implausible_ahead_ns(Instant::ZERO, clock, lead, max),
            None,
            "behind"
        );
        // Near the end of time the bound saturates instead of wrapping.
        assert_eq!(implausible_ahead_ns(Instant::MAX, Instant::MAX, lead, max), None);
    }

    /// A flood is one report per interval, carrying the count and the furthest value.
    #[test]
    fn refusals_are_reported_at_most_once_per_interval_and_summed() {
        let t = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        let mut input = ImplausibleInput::default();
        assert!(input.refuse(t(1), 10));
        assert!(!input.refuse(t(2), 30), "one queued at a time");
        assert_eq!(
            input.take_report(3),
            ImplausibleReport {
                port: 3,
                ahead_ns: 30,
                refused: 2
            }
        );
        assert!(!input.refuse(t(50), 5), "within the interval");
        assert!(input.refuse(t(101), 7));
        let r = input.take_report(3);
        assert_eq!((r.ahead_ns, r.refused), (7, 2));
    }
}
