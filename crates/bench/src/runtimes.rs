//! Which runtime a benchmark runs on, and each runtime's defaults where a flag is left out.

use crate::demo::DemoConfig;
use onepipe_wire::Duration;

/// The runtime a demo or benchmark runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    /// Links are rings in memory on a worker pool.
    Inproc,
    /// Every node on a thread (or a shared one) and a UDP socket of its own, on loopback.
    Udp,
}

/// The beacon interval: as asked, or the runtime's own. Over udp that is `onepipe up`'s 500
/// us: at the inproc 50 us, dozens of nodes on two cores wake for every tick, and a demo on
/// the 32-process testbed delivered an eighth as much and declared busy links dead.
pub fn beacon_interval(asked_us: Option<f64>, runtime: RuntimeKind) -> Duration {
    match (asked_us, runtime) {
        (Some(us), _) => Duration::from_nanos((us * 1e3) as u64),
        (None, RuntimeKind::Inproc) => DemoConfig::default().beacon_interval,
        (None, RuntimeKind::Udp) => onepipe::udp::BEACON_INTERVAL,
    }
}

/// Hosts' promise lead: as asked (0 turns promises off), or the runtime's own: none inproc,
/// where a worker visits each host every few microseconds, [`onepipe::udp::PROMISE_LEAD`] over
/// udp.
pub fn promise_lead(asked_us: Option<f64>, runtime: RuntimeKind) -> Option<Duration> {
    match (asked_us, runtime) {
        (Some(us), _) if us > 0.0 => Some(Duration::from_nanos((us * 1e3) as u64)),
        (Some(_), _) | (None, RuntimeKind::Inproc) => None,
        (None, RuntimeKind::Udp) => Some(onepipe::udp::PROMISE_LEAD),
    }
}

/// Node threads over udp: as asked, or one per core. A thread per node oversubscribes a
/// machine with fewer cores than processes, and then measures how the kernel schedules dozens
/// of threads more than the systems: a process waiting for a core holds back every barrier,
/// token or sequence it feeds (docs/udp.md).
pub fn udp_threads(asked: Option<usize>) -> usize {
    asked.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// Checks `--datagram-bytes` for every command that runs the udp runtime.
pub fn check_datagram_bytes(bytes: usize) -> Result<(), String> {
    match (64..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT).contains(&bytes) {
        true => Ok(()),
        false => Err("--datagram-bytes must be between 64 and 65507".into()),
    }
}

/// The udp runtime as the demo and the benchmarks run it: every node in this process, on a
/// thread of its own (`threads` 0) or on `threads` shared ones, its datagrams authenticated
/// under a fresh key unless `insecure_no_auth`. Checks the options given.
pub fn udp_config(
    datagram_bytes: usize,
    threads: usize,
    window_datagrams_max: usize,
    insecure_no_auth: bool,
) -> Result<onepipe_runtime::udp::UdpConfig, String> {
    check_datagram_bytes(datagram_bytes)?;
    if window_datagrams_max < 2 {
        return Err("--udp-window-datagrams must be at least 2".into());
    }
    Ok(onepipe_runtime::udp::UdpConfig {
        datagram_bytes_max: datagram_bytes,
        threads: (threads > 0).then_some(threads),
        window_datagrams_max,
        // Dozens of node threads share the cores: park soon.
        idle: onepipe_runtime::udp::IdlePolicy::SpinThenPark { spins: 64 },
        auth: match insecure_no_auth {
            true => onepipe_runtime::udp::auth::Auth::Off,
            false => onepipe_runtime::udp::auth::Auth::generate().map_err(|e| e.to_string())?,
        },
        ..Default::default()
    })
}
