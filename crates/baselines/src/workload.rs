//! The workload inside every baseline host, as in onepipe's demo (crates/onepipe/src/workload.rs):
//! all-to-all broadcast of fixed-size messages to every process, itself included.
//!
//! Two modes: paced open loop (Poisson arrivals with a mean gap, drawn from a seeded SplitMix64
//! stream per process) or saturated (a new broadcast whenever the node is asked for frames).
//! Both are closed by a window: at most `window` of a process's own broadcasts may be
//! undelivered back to itself (it is among the receivers), so every queue in the system stays
//! bounded even in a simulator whose queues drop when full.

use onepipe_wire::{Duration, Instant};

/// When the workload sends and records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub send_from: Instant,
    /// No broadcast is offered at or after this instant.
    pub send_until: Instant,
    /// Throughput counts deliveries in `[measure_from, send_until]` and latency counts messages
    /// sent at or after it: a saturated run measures its steady state, once queues have filled.
    pub measure_from: Instant,
    /// Mean gap between broadcasts of one process (open loop, Poisson); zero saturates.
    pub send_gap: Duration,
    /// Events for the checker are recorded only for messages sent before this.
    pub record_until: Instant,
    /// Seeds the paced gaps; each process draws its own stream from it.
    pub seed: u64,
}

impl Schedule {
    /// Saturated sending over `[from, until)`, every message recorded.
    pub fn saturated(from: Instant, until: Instant) -> Schedule {
        Schedule {
            send_from: from,
            send_until: until,
            measure_from: from,
            send_gap: Duration::ZERO,
            record_until: until,
            seed: 1,
        }
    }
}

pub use onepipe_fabric::hash::{SplitMix, mix64};

/// How long a workload waits after its protocol refused a broadcast.
pub const RETRY_AFTER_REFUSAL: Duration = Duration::from_micros(1);

/// A broadcast the workload hands to its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    pub msg_id: u64,
    pub sent: Instant,
    /// Sent before `record_until`: its events go into the log.
    pub record: bool,
}

/// One process's generator.
#[derive(Clone, Debug)]
pub struct Workload {
    schedule: Schedule,
    window: usize,
    next_send_at: Instant,
    rng: SplitMix,
    next_msg_id: u64,
    /// Own broadcasts offered and not yet delivered back here.
    outstanding: usize,
    outstanding_peak: usize,
    /// `send_until` has been seen: nothing more will be offered.
    done: bool,
    /// A paced send fell due while the window was full.
    stalled: bool,
}

impl Workload {
    pub fn new(me: u32, schedule: Schedule, window: usize) -> Workload {
        let mut rng = SplitMix::new(schedule.seed ^ mix64(me as u64));
        // Poisson sending: random gaps keep processes from sending in step.
        let first_gap = rng.exponential(schedule.send_gap);
        Workload {
            schedule,
            window,
            next_send_at: schedule.send_from + first_gap,
            rng,
            next_msg_id: 0,
            outstanding: 0,
            outstanding_peak: 0,
            done: false,
            stalled: false,
        }
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The next broadcast due at `now`, if the window has room. Callers loop until `None`.
    pub fn offer(&mut self, now: Instant) -> Option<Offer> {
        if now >= self.schedule.send_until {
            self.done = true;
        }
        if self.done || now < self.next_send_at {
            return None;
        }
        if self.outstanding >= self.window {
            self.stalled = true;
            return None;
        }
        if self.schedule.send_gap > Duration::ZERO {
            // Keep the schedule (open loop: sends that fell due between two calls all go now),
            // but after the window held sending back, resume from now rather than burst out
            // everything that fell due meanwhile (as onepipe's workload does).
            if self.stalled {
                self.next_send_at = now;
                self.stalled = false;
            }
            self.next_send_at += self.rng.exponential(self.schedule.send_gap);
        }
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        self.outstanding += 1;
        self.outstanding_peak = self.outstanding_peak.max(self.outstanding);
        Some(Offer {
            msg_id,
            sent: now,
            record: now < self.schedule.record_until,
        })
    }

    /// One of our own broadcasts came back through the ordering.
    pub fn on_self_delivered(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// A broadcast that will never come back (dropped by a full sequencer): free its slot.
    pub fn on_lost(&mut self) {
        self.on_self_delivered();
    }

    /// The protocol refused the last offer for lack of room: try again a little later, not at
    /// once (a saturated workload would otherwise ask for a timer that is always due).
    pub fn retry_later(&mut self, now: Instant) {
        self.next_send_at = self.next_send_at.max(now + RETRY_AFTER_REFUSAL);
    }

    /// When the workload next needs a call, if ever. After `offer` returned `None` at `now`,
    /// this is `None` or later than `now`, so a runtime never spins on a due timer: a full
    /// window waits for a delivery (which arrives as a frame), not for time.
    pub fn wake_at(&self) -> Option<Instant> {
        if self.done || self.outstanding >= self.window || self.next_send_at >= self.schedule.send_until {
            return None;
        }
        Some(self.next_send_at)
    }

    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    pub fn outstanding_peak(&self) -> usize {
        self.outstanding_peak
    }

    pub fn offered(&self) -> u64 {
        self.next_msg_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn paced_gaps_average_the_configured_gap() {
        let mut rng = SplitMix::new(7);
        let mean = Duration::from_micros(100);
        let n = 20_000;
        let sum: u64 = (0..n).map(|_| rng.exponential(mean).as_nanos()).sum();
        let avg = sum as f64 / n as f64;
        assert!((avg - 100_000.0).abs() < 3_000.0, "mean gap {avg} ns");
        assert_eq!(rng.exponential(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn saturated_fills_the_window_within_the_schedule() {
        let mut w = Workload::new(3, Schedule::saturated(at(1_000), at(5_000)), 4);
        assert_eq!(w.offer(at(999)), None);
        assert_eq!(w.wake_at(), Some(at(1_000)));
        let ids: Vec<u64> = std::iter::from_fn(|| w.offer(at(1_000)).map(|o| o.msg_id)).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(w.wake_at(), None, "a full window waits for deliveries");
        w.on_self_delivered();
        let o = w.offer(at(2_000)).unwrap();
        assert_eq!((o.msg_id, o.record), (4, true));
        assert_eq!(w.outstanding_peak(), 4);
        w.on_self_delivered();
        assert_eq!(w.offer(at(5_000)), None, "sending stops at send_until");
    }

    #[test]
    fn paced_offers_follow_the_schedule_and_never_spin() {
        let schedule = Schedule {
            send_gap: Duration::from_micros(1),
            record_until: at(50_000),
            ..Schedule::saturated(at(0), at(100_000))
        };
        let mut w = Workload::new(0, schedule, 1_000);
        let mut now = at(0);
        let mut offers = 0;
        while let Some(t) = w.wake_at() {
            assert!(t >= now);
            now = t;
            while let Some(o) = w.offer(now) {
                assert_eq!(o.record, now < at(50_000));
                offers += 1;
                w.on_self_delivered();
            }
            assert!(w.wake_at().is_none_or(|t| t > now), "timer due again at {now}");
        }
        assert!((80..120).contains(&offers), "{offers} offers in 100 gaps");
    }
}
