//! What a switch keeps per input: the barrier registers of each half, with their running
//! minimum (eq. 4.1), and the clock samples behind `InputRegister::clock_ahead_ns`.

use super::Half;
use onepipe_fabric::PortDirection;
use onepipe_wire::{Duration, Instant};

/// How long a clock sample counts towards [`InputRegister::clock_ahead_ns`].
pub(super) const CLOCK_WINDOW: Duration = Duration::from_secs(1);

/// A two-bucket windowed maximum of (barrier - arrival) on one input.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ClockSamples {
    pub(super) current: Option<i64>,
    pub(super) previous: Option<i64>,
    pub(super) since: Instant,
}

impl ClockSamples {
    pub(super) fn add(&mut self, now: Instant, sample: i64) {
        if now.saturating_since(self.since) >= CLOCK_WINDOW {
            let stale = now.saturating_since(self.since) >= CLOCK_WINDOW + CLOCK_WINDOW;
            self.previous = if stale { None } else { self.current };
            self.current = None;
            self.since = now;
        }
        self.current = Some(self.current.map_or(sample, |c| c.max(sample)));
    }

    pub(super) fn max(&self, now: Instant) -> Option<i64> {
        let age = now.saturating_since(self.since);
        let current = (age < CLOCK_WINDOW + CLOCK_WINDOW)
            .then_some(self.current)
            .flatten();
        let previous = (age < CLOCK_WINDOW).then_some(self.previous).flatten();
        current.max(previous)
    }
}

/// The registers of one half, laid out flat; a dead input's register holds `u64::MAX` (not
/// counted), a joining one holds the output it froze (see `Switch::hear`). The minimum is kept
/// up to date on every write, so stamping a packet is O(1) and
/// only a write to the register that held the minimum costs a rescan.
#[derive(Clone, Debug)]
pub(super) struct HalfRegisters {
    pub(super) counted: Vec<u64>,
    pub(super) min: u64,
    /// Last barrier this half stamped: the output never goes below it.
    pub(super) output: Instant,
}

impl Default for HalfRegisters {
    fn default() -> HalfRegisters {
        HalfRegisters {
            counted: Vec::new(),
            min: u64::MAX,
            output: Instant::ZERO,
        }
    }
}

impl HalfRegisters {
    pub(super) fn push(&mut self, value: u64) -> usize {
        self.counted.push(value);
        self.min = self.min.min(value);
        self.counted.len() - 1
    }

    pub(super) fn set(&mut self, slot: usize, value: u64) {
        let old = std::mem::replace(&mut self.counted[slot], value);
        if value < self.min {
            self.min = value;
        } else if old == self.min && value != old {
            self.min = self.counted.iter().copied().min().unwrap_or(u64::MAX);
        }
        debug_assert_eq!(self.min, self.counted.iter().copied().min().unwrap_or(u64::MAX));
    }

    pub(super) fn minimum(&self) -> Option<Instant> {
        (self.min != u64::MAX).then_some(Instant::from_nanos(self.min))
    }
}

/// One access to a lane's registers, logged in the switch's own tests for the P4 budget
/// check (`switch/budget`): an input's register in a half (with the path of the half's minimum
/// tree above it), or a half's output register.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Touch {
    Input(Half),
    Output(Half),
}

/// The registers of one lane: an uplink half and a downlink half.
#[derive(Clone, Debug, Default)]
pub(super) struct Registers {
    pub(super) up: HalfRegisters,
    pub(super) down: HalfRegisters,
    /// The accesses since the budget test last took them; `None` (nothing kept) elsewhere.
    #[cfg(test)]
    pub(super) touches: Option<Vec<Touch>>,
}

impl Registers {
    #[cfg(test)]
    fn touch(&mut self, touch: Touch) {
        if let Some(log) = &mut self.touches {
            log.push(touch);
        }
    }

    /// A half's registers, to write an input's (every caller does, or reads the minimum
    /// before it writes).
    pub(super) fn half(&mut self, half: Half) -> &mut HalfRegisters {
        #[cfg(test)]
        self.touch(Touch::Input(half));
        match half {
            Half::Up => &mut self.up,
            Half::Down => &mut self.down,
        }
    }

    /// An uplink half with no counted input (every input below it dead, removed, or never
    /// heard) advances on the switch's own clock: nothing can come up through it below its
    /// output that a receiver would take for on time, and an input that returns is admitted
    /// only once its barrier passes the output (docs/ordering.md, "A half with no inputs").
    /// Without this, a rack with no live process holds its uplink barrier where it was, and
    /// every spine above it, and so the whole fabric, waits for ever (issue 42). The downlink
    /// half always counts the loopback from the uplink half, so it is never empty.
    pub(super) fn advance_empty(&mut self, now: Instant) -> bool {
        let empty = self.up.minimum().is_none() && self.up.output < now;
        if empty {
            #[cfg(test)]
            self.touch(Touch::Output(Half::Up));
            self.up.output = now;
        }
        empty
    }

    /// Barrier of the uplink half (eq. 4.1); holds its last value while no input counts,
    /// until the next tick advances it ([`Registers::advance_empty`]).
    pub(super) fn up_output(&mut self) -> Instant {
        #[cfg(test)]
        self.touch(Touch::Output(Half::Up));
        if let Some(m) = self.up.minimum() {
            debug_assert!(m >= self.up.output, "uplink barrier went back");
            self.up.output = self.up.output.max(m);
        }
        self.up.output
    }

    /// Barrier of the downlink half: inputs from above and the loopback from the uplink half.
    pub(super) fn down_output(&mut self) -> Instant {
        let loopback = self.up_output();
        #[cfg(test)]
        self.touch(Touch::Output(Half::Down));
        let m = self.down.minimum().map_or(loopback, |m| m.min(loopback));
        debug_assert!(m >= self.down.output, "downlink barrier went back");
        self.down.output = self.down.output.max(m);
        self.down.output
    }

    /// Barrier for a packet leaving on a port facing `direction`.
    pub(super) fn output(&mut self, direction: PortDirection) -> Instant {
        match direction {
            PortDirection::Up => self.up_output(),
            PortDirection::Down => self.down_output(),
        }
    }
}
