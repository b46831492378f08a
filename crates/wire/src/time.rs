//! Time in nanoseconds, and the 48-bit timestamps carried on the wire.
//!
//! In memory a timestamp is a `u64` count of nanoseconds ([`Instant`]); it does not wrap for
//! 584 years. On the wire it is cut to 48 bits (paper section 6.1: "A timestamp is a 48-bit
//! integer ... We use PAWS to handle the timestamp wrap around"), which wraps every 2^48 ns,
//! about 78 hours. A receiver turns a 48-bit value back into an [`Instant`] by picking the value
//! with those low bits that lies nearest to a reference it trusts (its own clock): correct as
//! long as the sender's clock is within 2^47 ns (39 hours) of the reference.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// Number of bits of a timestamp on the wire.
pub const WIRE_BITS: u32 = 48;
/// Mask of the wire bits.
pub const WIRE_MASK: u64 = (1 << WIRE_BITS) - 1;
const HALF_RANGE: u64 = 1 << (WIRE_BITS - 1);

/// A point in time, in nanoseconds since an arbitrary epoch shared by the whole system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }

    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }

    /// The low 48 bits, as carried on the wire.
    ///
    /// Wire value 0 is reserved for "no timestamp yet" (a barrier before anything is known)
    /// and decodes to [`Instant::ZERO`] wherever the receiver's clock is. A non-zero instant
    /// whose low bits are all zero is therefore sent as one nanosecond earlier, which is safe
    /// for a barrier (a lower bound may always be lowered); hosts never issue such message
    /// timestamps (`HostClock::issue`).
    pub const fn to_wire(self) -> Timestamp48 {
        let low = self.0 & WIRE_MASK;
        if low == 0 && self.0 != 0 {
            Timestamp48(WIRE_MASK)
        } else {
            Timestamp48(low)
        }
    }

    /// Whether this instant has the reserved wire value 0 without being zero.
    pub const fn is_wire_reserved(self) -> bool {
        self.0 != 0 && self.0 & WIRE_MASK == 0
    }

    /// The first multiple of `interval` strictly after `self` (synchronized beacon times,
    /// paper section 4.2). `interval` must be non-zero.
    pub fn next_multiple_of(self, interval: Duration) -> Instant {
        assert!(interval.0 > 0, "interval must be positive");
        Instant((self.0 / interval.0 + 1) * interval.0)
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Duration {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Duration {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Duration {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Duration {
        Duration(s * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }
    pub fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: a later minus an earlier instant is never negative.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1_000_000 {
            write!(f, "{:.3}ms", self.0 as f64 / 1e6)
        } else if self.0 >= 1_000 {
            write!(f, "{:.3}us", self.0 as f64 / 1e3)
        } else {
            write!(f, "{}ns", self.0)
        }
    }
}

/// A timestamp as carried on the wire: the low 48 bits of an [`Instant`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timestamp48(u64);

impl Timestamp48 {
    /// Takes the low 48 bits of `raw`.
    pub const fn new(raw: u64) -> Timestamp48 {
        Timestamp48(raw & WIRE_MASK)
    }

    pub const fn raw(self) -> u64 {
        self.0
    }

    /// Serial-number comparison (RFC 1982 / PAWS): `self` is before `other` if going forward
    /// from `self` reaches `other` in less than half the 48-bit range.
    pub fn is_before(self, other: Timestamp48) -> bool {
        let forward = other.0.wrapping_sub(self.0) & WIRE_MASK;
        forward != 0 && forward < HALF_RANGE
    }

    /// The [`Instant`] whose low 48 bits are `self` and which lies nearest to `reference`.
    pub fn unwrap_near(self, reference: Instant) -> Instant {
        if self.0 == 0 {
            // Reserved: nothing known yet (see `Instant::to_wire`).
            return Instant::ZERO;
        }
        let r = reference.0;
        // Signed distance from the reference's low bits to ours, in (-2^47, 2^47].
        let forward = self.0.wrapping_sub(r & WIRE_MASK) & WIRE_MASK;
        if forward <= HALF_RANGE {
            Instant(r.wrapping_add(forward))
        } else {
            let backward = (1 << WIRE_BITS) - forward;
            // Near zero there is no earlier epoch: stay at the low bits themselves.
            match r.checked_sub(backward) {
                Some(v) => Instant(v),
                None => Instant(r.wrapping_add(forward)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRAP: u64 = 1 << WIRE_BITS;

    #[test]
    fn wire_keeps_low_48_bits() {
        assert_eq!(Instant::from_nanos(WRAP + 5).to_wire().raw(), 5);
        assert_eq!(Instant::from_nanos(WRAP - 1).to_wire().raw(), WRAP - 1);
    }

    /// A zero barrier (nothing known yet) must not decode as "the next epoch" near the wrap;
    /// this was a real bug: a switch's initial zero registers read as 2^48 by its neighbours.
    #[test]
    fn wire_zero_is_reserved_for_nothing_known() {
        let near_wrap = Instant::from_nanos(WRAP - 17_000);
        assert_eq!(Instant::ZERO.to_wire().unwrap_near(near_wrap), Instant::ZERO);
        // An instant on the wrap goes out one nanosecond early (a lower barrier is safe).
        let on_wrap = Instant::from_nanos(3 * WRAP);
        assert!(on_wrap.is_wire_reserved());
        assert_eq!(
            on_wrap.to_wire().unwrap_near(on_wrap),
            Instant::from_nanos(3 * WRAP - 1)
        );
    }

    /// Paper section 6.1: 48-bit timestamps compared with PAWS across the wrap.
    #[test]
    fn comparison_across_the_wrap() {
        let before = Timestamp48::new(WRAP - 10);
        let after = Timestamp48::new(5);
        assert!(before.is_before(after));
        assert!(!after.is_before(before));
        assert!(!before.is_before(before));
        // Just under half the range ahead is "after"; at half it is ambiguous and not before.
        assert!(Timestamp48::new(0).is_before(Timestamp48::new(HALF_RANGE - 1)));
        assert!(!Timestamp48::new(0).is_before(Timestamp48::new(HALF_RANGE)));
    }

    #[test]
    fn unwrap_near_reference_across_the_wrap() {
        let reference = Instant::from_nanos(3 * WRAP + 2);
        // A sender slightly behind, before the wrap.
        let behind = Instant::from_nanos(3 * WRAP - 7);
        assert_eq!(behind.to_wire().unwrap_near(reference), behind);
        // A sender slightly ahead.
        let ahead = Instant::from_nanos(3 * WRAP + 1_000);
        assert_eq!(ahead.to_wire().unwrap_near(reference), ahead);
        // Reference before the wrap, value after it.
        let reference = Instant::from_nanos(WRAP - 3);
        let ahead = Instant::from_nanos(WRAP + 40);
        assert_eq!(ahead.to_wire().unwrap_near(reference), ahead);
    }

    #[test]
    fn unwrap_near_zero_does_not_underflow() {
        let reference = Instant::from_nanos(10);
        let v = Timestamp48::new(WRAP - 5);
        // No epoch before zero: the only representable value is the raw one.
        assert_eq!(v.unwrap_near(reference), Instant::from_nanos(WRAP - 5));
    }

    #[test]
    fn next_multiple_is_strictly_after() {
        let i = Duration::from_micros(10);
        assert_eq!(Instant::from_nanos(0).next_multiple_of(i).as_nanos(), 10_000);
        assert_eq!(Instant::from_nanos(10_000).next_multiple_of(i).as_nanos(), 20_000);
        assert_eq!(Instant::from_nanos(19_999).next_multiple_of(i).as_nanos(), 20_000);
    }

    proptest::proptest! {
        #[test]
        fn unwrap_inverts_to_wire(reference in 0u64..u64::MAX / 2, delta in -(HALF_RANGE as i64 - 1)..(HALF_RANGE as i64)) {
            let value = reference as i64 as i128 + delta as i128;
            proptest::prop_assume!(value >= 0);
            let value = Instant::from_nanos(value as u64);
            proptest::prop_assume!(value.to_wire().raw() != 0 && !value.is_wire_reserved());
            proptest::prop_assert_eq!(value.to_wire().unwrap_near(Instant::from_nanos(reference)), value);
        }

        #[test]
        fn is_before_matches_u64_order_within_half_range(a in 0u64..u64::MAX / 2, d in 1u64..HALF_RANGE) {
            let x = Instant::from_nanos(a).to_wire();
            let y = Instant::from_nanos(a + d).to_wire();
            proptest::prop_assert!(x.is_before(y));
            proptest::prop_assert!(!y.is_before(x));
        }
    }
}
