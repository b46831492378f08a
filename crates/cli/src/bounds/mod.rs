//! Upper (and lower) bounds of every number the command line takes: clap refuses a value
//! outside them with an error naming the range (`86401 is not in 0..=86400`) before anything
//! runs. The bounds are far above any sensible use and below what would overflow, allocate
//! without end or run for ever; the limits of a topology are the fabric's own
//! (`onepipe_fabric::limits`). Every numeric flag has one (`tests::every_numeric_flag_is_bounded`).

use clap::builder::RangedU64ValueParser;
use std::ops::RangeInclusive;

/// `--seconds` and other run lengths: a day.
pub const SECONDS_MAX: f64 = 86_400.0;
/// Rates in messages per second per process.
pub const RATE_PER_S_MAX: f64 = 1e9;
/// Times in microseconds (beacon intervals, promises, skew, delays, jitter): 10 s.
pub const MICROS_MAX: f64 = 1e7;
/// Times in milliseconds (settle, answer timeout, stall): an hour.
pub const MILLIS_MAX: u64 = 3_600_000;
/// Simulated times (`sim --send 2ms`): an hour of virtual time.
pub const SIM_SECONDS_MAX: u64 = 3_600;
/// A clock offset injected into a switch, either way: an hour.
pub const CLOCK_OFFSET_US_MAX: i64 = 3_600_000_000;
/// Link rates.
pub const GBPS_MAX: f64 = 10_000.0;
/// Repetitions and counts of runs (pairs, seeds of a figure point).
pub const REPEATS_MAX: u64 = 1_000;
/// Seeds of a campaign.
pub const SEEDS_MAX: u64 = 1_000_000_000;
/// Worker threads.
pub const THREADS_MAX: u64 = 1_024;
/// Queue and buffer sizes in bytes: 16 GiB.
pub const BYTES_MAX: u64 = 1 << 34;
/// A message's payload.
pub const MESSAGE_BYTES_MAX: u64 = 1 << 20;
/// Packets of a send buffer, and a broadcast window.
pub const PACKETS_MAX: u64 = 1 << 24;
/// Closed-loop clients of a store's run.
pub const CLIENTS_MAX: u64 = 65_536;
/// `--dead-after-intervals`.
pub const INTERVALS_MAX: u64 = 1_000_000;
/// The etcd lease TTL.
pub const LEASE_TTL_SECS_MAX: u64 = onepipe_etcd::replica_loop::LEASE_TTL_SECS_MAX;
/// Messages of one measurement (`sim fig11 --host-messages`).
pub const MESSAGES_MAX: u64 = 1 << 34;
/// Simulated events of one run.
pub const EVENTS_MAX: u64 = 1 << 44;
/// Memory of one run, MB: 1 TiB.
pub const MEMORY_MB_MAX: u64 = 1 << 20;
/// How far before the 48-bit wire timestamps wrap a run may start.
pub const BEFORE_WRAP_NS_MAX: u64 = 1 << 48;
/// Processes or hosts of a run (`bench fig8 --processes`, `sim scale` points).
pub const PROCESSES_MAX: u64 = onepipe_fabric::limits::PROCESSES_MAX as u64;

/// An integer of type `T` in `range`.
pub fn int<T>(range: RangeInclusive<u64>) -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: Send + Sync + 'static + std::error::Error + ToString,
{
    RangedU64ValueParser::<T>::new().range(range)
}

/// A finite number in `min..=max`.
pub fn float(min: f64, max: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s| {
        let v: f64 = s.parse().map_err(|e| format!("`{s}` is not a number: {e}"))?;
        if v.is_finite() && (min..=max).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is not in {min}..={max}"))
        }
    }
}

/// A probability.
pub fn probability() -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    float(0.0, 1.0)
}

/// A run length in seconds.
pub fn seconds() -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    float(0.0, SECONDS_MAX)
}

#[cfg(test)]
mod tests;
