//! A host's clock: the shared time source plus a configured offset (skew injection), behind a
//! monotonic guard and a causality guard.
//!
//! Paper section 2.1: "Each host maintains a monotonically increasing timestamp ... The
//! causality property is: when a receiver delivers a message with timestamp T, the timestamp of
//! the host must be higher than T." The barrier argument already gives this (docs/ordering.md);
//! the guard makes it hold even if a clock or a switch misbehaves.

use onepipe_wire::{Duration, Instant};

/// The largest drift a host clock may have, in parts per billion: 1,000 ppm, ten times what a
/// quartz oscillator strays. It keeps the clock's inverse ([`HostClock::to_shared`]) within a
/// step of its estimate.
pub const DRIFT_PPB_MAX: i64 = 1_000_000;

#[derive(Clone, Debug)]
pub struct HostClock {
    offset_ns: i64,
    /// How fast the clock runs against the shared source, in parts per billion (the
    /// simulator's drifting hosts; 0 on a real runtime, whose source is the host's own clock).
    drift_ppb: i64,
    /// Largest reading handed out; readings never go below it.
    last_read: Instant,
    /// Last message timestamp issued.
    last_issued: Option<Instant>,
    /// Largest timestamp delivered to the application here.
    delivered_max: Option<Instant>,
    /// The host promised never to issue a timestamp below this (see [`HostClock::promise`]).
    promised: Instant,
    /// What the clock read when it last stepped back: until the raw reading is back there,
    /// the guard holds readings (see [`HostClock::schedule_reading`]).
    stepped_back_from: Instant,
}

impl HostClock {
    pub fn new(offset_ns: i64) -> HostClock {
        HostClock::with_drift(offset_ns, 0)
    }

    /// A clock `offset_ns` off the shared source that also runs `drift_ppb` fast (slow if
    /// negative): at shared time `t` it reads `t + t * drift_ppb / 1e9 + offset_ns`.
    pub fn with_drift(offset_ns: i64, drift_ppb: i64) -> HostClock {
        assert!(
            drift_ppb.abs() <= DRIFT_PPB_MAX,
            "clock drift {drift_ppb} ppb is past {DRIFT_PPB_MAX}"
        );
        HostClock {
            offset_ns,
            drift_ppb,
            last_read: Instant::ZERO,
            last_issued: None,
            delivered_max: None,
            promised: Instant::ZERO,
            stepped_back_from: Instant::ZERO,
        }
    }

    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// What the clock reads at shared time `now`, without the guards.
    pub fn reading(&self, now: Instant) -> Instant {
        let ns = drifted(now.as_nanos() as i128, self.drift_ppb) + self.offset_ns as i128;
        Instant::from_nanos(ns.clamp(0, u64::MAX as i128) as u64)
    }

    /// The earliest shared-clock instant at which this host's clock reads `host` or more
    /// (ignoring the guard).
    pub fn to_shared(&self, host: Instant) -> Instant {
        let target = host.as_nanos() as i128 - self.offset_ns as i128;
        if self.drift_ppb == 0 {
            return Instant::from_nanos(target.clamp(0, u64::MAX as i128) as u64);
        }
        let scale = 1_000_000_000i128 + self.drift_ppb as i128;
        let mut v = (target * 1_000_000_000 / scale).clamp(0, u64::MAX as i128);
        // The division rounds: step onto the exact answer (a step or two at most).
        while drifted(v, self.drift_ppb) < target && v < u64::MAX as i128 {
            v += 1;
        }
        while v > 0 && drifted(v - 1, self.drift_ppb) >= target {
            v -= 1;
        }
        Instant::from_nanos(v as u64)
    }

    /// Steps the clock by `delta_ns` at shared time `now` (back if negative), as NTP does when
    /// a clock is too far off to slew: from then on it reads that much more (or less). The
    /// guards stay: after a step back, [`HostClock::read`] holds at its last reading until the
    /// clock catches up, and nothing is issued below what was issued, promised or delivered,
    /// so neither timestamps nor the barriers built from [`HostClock::issue_floor`] go back.
    pub fn step(&mut self, now: Instant, delta_ns: i64) {
        let before = self.read(now);
        if delta_ns < 0 {
            self.stepped_back_from = before;
        }
        self.offset_ns = self.offset_ns.saturating_add(delta_ns);
    }

    /// The reading to schedule periodic work by (beacons at multiples of the interval): the
    /// guarded one, except while a step back holds it, when the next multiple of the held
    /// reading would be as far away as the step was long; then the raw reading.
    pub fn schedule_reading(&mut self, now: Instant) -> Instant {
        let raw = self.reading(now);
        if raw < self.stepped_back_from {
            return raw;
        }
        self.read(now)
    }

    /// The host's time: never lower than an earlier reading.
    pub fn read(&mut self, now: Instant) -> Instant {
        self.last_read = self.last_read.max(self.reading(now));
        self.last_read
    }

    /// A timestamp for a scattering sent now: strictly above the previous one (so that
    /// (timestamp, sender) names one scattering and orders a sender's scatterings as sent),
    /// strictly above every delivered timestamp (causality), and at or above the promise.
    /// Without a promise ahead, readings follow it, so the host clock never runs behind a
    /// timestamp it issued; a promise runs ahead of the clock on purpose and does not move it
    /// (else the clock would gain a lead at every promise).
    pub fn issue(&mut self, now: Instant) -> Instant {
        let read = self.read(now);
        let mut ts = read.max(self.promised);
        let floor = self.last_issued.max(self.delivered_max);
        if let Some(f) = floor
            && ts <= f
        {
            ts = f + Duration::from_nanos(1);
        }
        if ts.is_wire_reserved() {
            // Wire value 0 means "no timestamp"; skip the one nanosecond that would encode so.
            ts += Duration::from_nanos(1);
        }
        if self.promised <= read {
            self.last_read = ts;
        }
        self.last_issued = Some(ts);
        ts
    }

    /// The lowest timestamp this host may still issue: what its barrier may say. Never goes
    /// down, so neither do the barriers built from it.
    pub fn issue_floor(&mut self, now: Instant) -> Instant {
        let above = |t: Option<Instant>| t.map_or(Instant::ZERO, |t| t + Duration::from_nanos(1));
        self.read(now)
            .max(self.promised)
            .max(above(self.last_issued))
            .max(above(self.delivered_max))
    }

    /// Promises that nothing issued from now on is stamped below `until` (host time): the
    /// host's barrier may run ahead of its clock up to there (docs/ordering.md, "Promises").
    pub fn promise(&mut self, until: Instant) {
        self.promised = self.promised.max(until);
    }

    /// The current promise ([`Instant::ZERO`] before the first).
    pub fn promised(&self) -> Instant {
        self.promised
    }

    /// Records a delivery of timestamp `ts`.
    pub fn on_deliver(&mut self, ts: Instant) {
        self.delivered_max = Some(self.delivered_max.map_or(ts, |d| d.max(ts)));
    }
}

/// `ns` of the shared source as a clock `drift_ppb` fast counts them.
fn drifted(ns: i128, drift_ppb: i64) -> i128 {
    ns + ns * drift_ppb as i128 / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drifting clock and its inverse: `to_shared` finds the earliest shared instant at which
    /// the clock reads a value, for every drift the simulator draws.
    #[test]
    fn drifting_clock_round_trips() {
        for drift in [-50_000, -1, 0, 1, 20_000] {
            for offset in [0, -700, 1_300] {
                let c = HostClock::with_drift(offset, drift);
                for v in [0u64, 1, 999, 1_000_000_007, 3_000_000_000_123] {
                    let v = Instant::from_nanos(v);
                    let l = c.reading(v);
                    if l == Instant::ZERO {
                        continue; // clamped: a reading below zero has no instant of its own
                    }
                    let back = c.to_shared(l);
                    assert!(back <= v, "drift {drift}: {v:?} -> {l:?} -> {back:?}");
                    assert!(c.reading(back) >= l, "drift {drift}: reading reached by {back:?}");
                    if back.as_nanos() > 0 {
                        let before = Instant::from_nanos(back.as_nanos() - 1);
                        assert!(c.reading(before) < l, "earliest");
                    }
                }
            }
        }
        // 20 ppm fast: one second of shared time reads 20 us more.
        let c = HostClock::with_drift(0, 20_000);
        assert_eq!(
            c.reading(Instant::from_nanos(1_000_000_000)).as_nanos(),
            1_000_020_000
        );
    }

    #[test]
    fn offset_shifts_and_guard_keeps_monotonic() {
        let mut c = HostClock::new(-500);
        assert_eq!(c.read(Instant::from_nanos(1_000)).as_nanos(), 500);
        // The shared source going backwards (or a smaller reading) never moves the clock back.
        assert_eq!(c.read(Instant::from_nanos(900)).as_nanos(), 500);
        assert_eq!(c.read(Instant::from_nanos(2_000)).as_nanos(), 1_500);
    }

    /// A step back holds readings, timestamps and the issue floor where they were until the
    /// clock catches up; a step forward moves them all on at once.
    #[test]
    fn steps_never_take_readings_timestamps_or_the_floor_back() {
        let mut c = HostClock::new(0);
        let t = Instant::from_nanos;
        let ts = c.issue(t(10_000));
        let floor = c.issue_floor(t(10_000));
        c.step(t(10_000), -5_000);
        assert_eq!(
            c.reading(t(11_000)).as_nanos(),
            6_000,
            "the raw reading went back"
        );
        assert_eq!(
            c.schedule_reading(t(11_000)).as_nanos(),
            6_000,
            "schedules follow it"
        );
        assert_eq!(c.read(t(11_000)), ts, "held at the last reading");
        assert!(c.issue_floor(t(11_000)) >= floor);
        let next = c.issue(t(11_000));
        assert!(next > ts, "{next:?} after {ts:?}");
        assert_eq!(c.issue(t(20_000)).as_nanos(), 15_000, "caught up");
        assert_eq!(c.schedule_reading(t(20_000)).as_nanos(), 15_000);
        c.step(t(20_000), 1_000_000);
        assert_eq!(c.read(t(20_000)).as_nanos(), 1_015_000);
        assert_eq!(c.offset_ns(), 995_000);
    }

    #[test]
    fn negative_offset_clamps_at_zero() {
        let mut c = HostClock::new(-5_000);
        assert_eq!(c.read(Instant::from_nanos(1_000)), Instant::ZERO);
    }

    /// Paper section 2.1 (causality): never issue a timestamp at or below a delivered one.
    #[test]
    fn issue_stays_above_delivered() {
        let mut c = HostClock::new(0);
        c.on_deliver(Instant::from_nanos(10_000));
        assert_eq!(c.issue(Instant::from_nanos(5_000)).as_nanos(), 10_001);
        // And readings stay at or above what was issued.
        assert_eq!(c.read(Instant::from_nanos(6_000)).as_nanos(), 10_001);
        assert_eq!(c.issue(Instant::from_nanos(20_000)).as_nanos(), 20_000);
    }

    #[test]
    fn issue_is_strictly_increasing_at_one_instant() {
        let mut c = HostClock::new(0);
        let now = Instant::from_nanos(7_000);
        let a = c.issue(now);
        let b = c.issue(now);
        assert!(b > a);
        assert!(c.read(now) >= b);
    }
}
