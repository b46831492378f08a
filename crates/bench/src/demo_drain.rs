//! When a demo run stops waiting for the messages still in flight after sending stopped.
//!
//! It waits while the run gets somewhere: a delivery, or (reliable) a packet acknowledged.
//! Deliveries alone are not enough. Reliable bulk transfers deliver in bursts: a broadcast is
//! delivered only once every older one, from every sender, is acknowledged everywhere, so
//! 200 KB broadcasts on the 32-process testbed beside a CPU hog went seconds without a delivery
//! while their packets were still being acknowledged; a drain that counted deliveries only
//! gave up in 3 of 150 such runs with most messages still on their way, and in none of 60
//! since (docs/reliable.md).

use std::time::Duration;

/// After sending stops, in-flight messages are waited for until every message sent has been
/// delivered, or until nothing progressed for [`DRAIN`] (best effort) or [`RELIABLE_DRAIN`]
/// (reliable) or for twice the time the run's first delivery took, whichever is longer (a
/// message lost for good, to a best-effort link or a failure, is waited for that long), or for
/// [`DRAIN_MAX`] in all. Waiting on progress rather than for a fixed time lets bulk transfers
/// finish: 1 MB broadcasts queue seconds of work in the inproc runtime's fabric.
const DRAIN: Duration = Duration::from_millis(100);
/// The reliable service's quiet time: a retransmission or a recall may take this long.
const RELIABLE_DRAIN: Duration = Duration::from_millis(1_000);
/// The longest drain, progress or not.
const DRAIN_MAX: Duration = Duration::from_secs(60);

/// What a run has achieved so far; each count only grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Achieved {
    pub delivered: u64,
    /// Reliable packets acknowledged (0 for best effort).
    pub acked: u64,
}

#[derive(Debug)]
pub struct DrainWatch {
    quiet_min: Duration,
    last: Option<Achieved>,
    last_progress_at: Duration,
}

impl DrainWatch {
    pub fn new(reliable: bool) -> DrainWatch {
        DrainWatch {
            quiet_min: if reliable { RELIABLE_DRAIN } else { DRAIN },
            last: None,
            last_progress_at: Duration::ZERO,
        }
    }

    /// Whether to wait on, `elapsed` into the drain, with `achieved` so far; the run's first
    /// delivery came `first_delivery_after` after sending began (`None`: none yet, and there
    /// is no telling how long one takes, so only [`DRAIN_MAX`] ends the wait).
    pub fn keep_waiting(
        &mut self,
        elapsed: Duration,
        achieved: Achieved,
        first_delivery_after: Option<Duration>,
    ) -> bool {
        if self.last != Some(achieved) {
            self.last = Some(achieved);
            self.last_progress_at = elapsed;
        }
        let quiet_max = first_delivery_after.map_or(DRAIN_MAX, |t| self.quiet_min.max(2 * t));
        elapsed.saturating_sub(self.last_progress_at) < quiet_max && elapsed < DRAIN_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(delivered: u64, acked: u64) -> Achieved {
        Achieved { delivered, acked }
    }

    /// The failed runs: one delivery after 669 ms, then seconds of acknowledgements and no
    /// delivery. Counting deliveries only, the drain gave up 1.34 s after the last one.
    #[test]
    fn acknowledgements_keep_a_reliable_drain_waiting_without_deliveries() {
        let mut w = DrainWatch::new(true);
        let first = Some(669 * MS);
        for step in 0..100u32 {
            assert!(
                w.keep_waiting(step * 50 * MS, at(32, u64::from(step) * 300), first),
                "step {step}"
            );
        }
        // Then nothing moves: the wait ends once the quiet time (twice the first delivery) is up.
        let since = 99 * 50 * MS;
        assert!(w.keep_waiting(since + 1_337 * MS, at(32, 99 * 300), first));
        assert!(!w.keep_waiting(since + 1_338 * MS, at(32, 99 * 300), first));
    }

    #[test]
    fn a_best_effort_drain_ends_after_its_quiet_time_and_every_drain_at_the_cap() {
        let mut w = DrainWatch::new(false);
        assert!(w.keep_waiting(Duration::ZERO, at(5, 0), Some(MS)));
        assert!(w.keep_waiting(99 * MS, at(5, 0), Some(MS)));
        assert!(!w.keep_waiting(100 * MS, at(5, 0), Some(MS)));

        // No delivery yet: only the cap ends it, progress or not.
        let mut w = DrainWatch::new(true);
        assert!(w.keep_waiting(DRAIN_MAX - MS, at(0, 0), None));
        assert!(!w.keep_waiting(DRAIN_MAX, at(0, 7), None));

        // Acknowledgements that never stop do not outlast the cap either.
        let mut w = DrainWatch::new(true);
        let mut acked = 0;
        for s in 0..DRAIN_MAX.as_secs() {
            acked += 100;
            assert!(w.keep_waiting(Duration::from_secs(s), at(1, acked), Some(MS)));
        }
        assert!(!w.keep_waiting(DRAIN_MAX, at(1, acked + 100), Some(MS)));
    }
}
