//! The run behind `onepipe demo`: all-to-all broadcast over the inproc runtime, once with
//! ordering and once without (the unordered baseline: same runtime, topology and switches,
//! receivers deliver on arrival), so that the difference measures what ordering costs.

#![allow(clippy::disallowed_methods)] // the demo drives real time: it sleeps between progress reports

use crate::endpoint::{EndpointConfig, EndpointCounters};
use crate::hash::SplitMix;
use crate::host::App;
use crate::switch::{SwitchConfig, SwitchCounters};
use crate::system::{self, SystemConfig, SystemError};
use crate::udp::{LocalFabric, start_local};
use crate::workload::{Broadcast, Schedule};
use hdrhistogram::Histogram;
use onepipe_check::ProcessLog;
use onepipe_fabric::Either;
use onepipe_fabric::inproc::{Clock, InprocConfig, LinkFaults};
use onepipe_fabric::udp::UdpConfig;
use onepipe_fabric::{Topology, Wiring, WiringError};
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Debug)]
pub struct DemoConfig {
    pub topology: Topology,
    pub processes_per_host: u32,
    pub message_bytes: usize,
    pub beacon_interval: Duration,
    /// Each host's clock offset is drawn uniformly from [-skew, +skew].
    pub skew: Duration,
    pub seed: u64,
    pub duration: Duration,
    /// Broadcasts per second per process; 0 sends as fast as the fabric takes them.
    pub rate_per_process: f64,
    /// Added to every link's own delay.
    pub link_delay: Duration,
    pub workers: usize,
    pub dead_after_intervals: u32,
    /// Events are recorded for the checker only for messages sent in the first part of the run
    /// (bounds memory on long runs).
    pub record_window: Duration,
    /// Where the shared clock starts; set near 2^48 ns to run across the wire wrap.
    pub clock_start: Instant,
    pub mtu_bytes: usize,
    pub link_capacity_bytes: usize,
    pub send_buffer_packets_max: usize,
    pub reorder_bytes_max: usize,
    /// Use the reliable service (paper 5.1) instead of best effort.
    pub reliable: bool,
    /// Loss, duplication and jitter on every link.
    pub faults: LinkFaults,
    /// Serialization rate of every link; `None` is as fast as the workers go.
    pub link_bits_per_s: Option<u64>,
    /// Queue depth past which switches mark ECN (DCTCP).
    pub ecn_threshold_bytes: usize,
    /// `None`: the inproc runtime. Some: every node on a thread and a UDP socket of its own
    /// (link faults, rates and ring sizes then do not apply: the kernel's sockets are the links).
    pub udp: Option<UdpConfig>,
}

impl Default for DemoConfig {
    fn default() -> DemoConfig {
        DemoConfig {
            topology: Topology::paper_testbed(),
            processes_per_host: 1,
            message_bytes: 64,
            beacon_interval: Duration::from_micros(50),
            skew: Duration::from_nanos(300),
            seed: 1,
            duration: Duration::from_secs(3),
            rate_per_process: 0.0,
            link_delay: Duration::ZERO,
            workers: InprocConfig::default().workers,
            // 25 ms at 50 us: a worker on a shared core can be descheduled for milliseconds,
            // and a live link removed turns its sender's next messages into late drops.
            dead_after_intervals: 500,
            record_window: Duration::from_secs(10),
            clock_start: Instant::from_nanos(1_000_000_000),
            mtu_bytes: 1500,
            // Small rings keep queueing delay (and so latency) low under saturation; larger
            // ones amortize more per visit but add milliseconds (docs/performance.md).
            link_capacity_bytes: 2048,
            send_buffer_packets_max: 32,
            reorder_bytes_max: 64 << 20,
            reliable: false,
            faults: LinkFaults::default(),
            link_bits_per_s: None,
            ecn_threshold_bytes: 1024,
            udp: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error(transparent)]
    System(#[from] SystemError),
    #[error(transparent)]
    Udp(#[from] crate::udp::UdpSystemError),
    #[error("message size must be between 8 and {max} bytes (it carries an 8-byte send time)")]
    MessageSize { max: usize },
    #[error("{0} must be positive")]
    NotPositive(&'static str),
}

/// What one phase (ordered or unordered) measured.
pub struct PhaseResult {
    pub ordering: bool,
    pub processes: usize,
    pub seconds: f64,
    /// Deliveries during the sending window (throughput numerator).
    pub delivered_in_window: u64,
    /// All deliveries, including the drain after sending stopped.
    pub delivered: u64,
    pub messages_sent: u64,
    pub latency_ns: Histogram<u64>,
    pub logs: Vec<ProcessLog>,
    pub endpoint: EndpointCounters,
    pub switch: SwitchCounters,
    pub send_failures: u64,
    pub retransmissions: u64,
    /// ACKs sent, and how many of them rode on prepare packets.
    pub acks_sent: u64,
    pub acks_piggybacked: u64,
    /// Frames the links dropped and duplicated on purpose.
    pub link_drops: u64,
    pub link_duplicates: u64,
    /// Frames the links let others pass (non-FIFO faults).
    pub link_reordered: u64,
    /// Frames forwarded into a queue past the ECN threshold.
    pub ecn_marked: u64,
    pub reorder_bytes_peak: usize,
    pub reorder_messages_peak: usize,
    /// Reliable service, largest of any process: packets unacknowledged and retained in its
    /// send buffer, and bytes of prepared messages waiting for the commit barrier.
    pub reliable_unacked_packets_peak: usize,
    pub reliable_retained_packets_peak: usize,
    pub reliable_prepared_bytes_peak: usize,
    /// The sockets' own counts, over the udp runtime.
    pub udp: Option<onepipe_fabric::udp::local::UdpTotals>,
}

impl PhaseResult {
    pub fn throughput_msgs_per_s(&self) -> f64 {
        self.delivered_in_window as f64 / self.seconds
    }
    pub fn latency_us(&self, quantile: f64) -> f64 {
        self.latency_ns.value_at_quantile(quantile) as f64 / 1_000.0
    }
}

enum PhaseRuntime {
    Inproc(onepipe_fabric::inproc::Runtime<crate::system::Member>),
    Udp(LocalFabric),
}

/// Largest demo message (the endpoint's default limit).
pub const MESSAGE_BYTES_MAX: usize = 1 << 20;

/// Time given to in-flight messages after sending stops.
const DRAIN: std::time::Duration = std::time::Duration::from_millis(100);
const RELIABLE_BUFFER_BROADCASTS: usize = 4;
const RELIABLE_DRAIN: std::time::Duration = std::time::Duration::from_millis(1_000);
const PROGRESS_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);

fn sum_endpoint(a: &mut EndpointCounters, b: &EndpointCounters) {
    a.scatterings_sent += b.scatterings_sent;
    a.messages_sent += b.messages_sent;
    a.packets_sent += b.packets_sent;
    a.beacons_sent += b.beacons_sent;
    a.delivered += b.delivered;
    a.malformed += b.malformed;
    a.misdelivered += b.misdelivered;
    a.late += b.late;
    a.incomplete += b.incomplete;
    a.reorder_full += b.reorder_full;
    a.duplicates += b.duplicates;
    a.naks_sent += b.naks_sent;
    a.naks_dropped += b.naks_dropped;
    a.naks_received += b.naks_received;
}

fn sum_switch(a: &mut SwitchCounters, b: &SwitchCounters) {
    a.forwarded += b.forwarded;
    a.beacons_sent += b.beacons_sent;
    a.beacons_received += b.beacons_received;
    a.malformed += b.malformed;
    a.no_route += b.no_route;
    a.barrier_regressions += b.barrier_regressions;
    a.links_removed += b.links_removed;
    a.links_joined += b.links_joined;
}

/// Runs one phase. `progress(fraction_done, delivered_so_far)` is called every 50 ms.
pub fn run_phase(
    config: &DemoConfig,
    ordering: bool,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<PhaseResult, DemoError> {
    if !(8..=MESSAGE_BYTES_MAX).contains(&config.message_bytes) {
        return Err(DemoError::MessageSize {
            max: MESSAGE_BYTES_MAX,
        });
    }
    if config.duration == Duration::ZERO {
        return Err(DemoError::NotPositive("duration"));
    }
    if config.beacon_interval == Duration::ZERO {
        return Err(DemoError::NotPositive("beacon interval"));
    }
    if config.dead_after_intervals == 0 {
        return Err(DemoError::NotPositive("dead-after beacon count"));
    }
    let wiring = Wiring::new(config.topology.clone(), config.processes_per_host)?;
    let count = wiring.process_count() as u32;
    let mut endpoint = EndpointConfig::new(0, count, 0);
    endpoint.beacon_interval = config.beacon_interval;
    endpoint.mtu_bytes = config.mtu_bytes;
    endpoint.ordering = ordering;
    let per_broadcast = count as usize * config.message_bytes.div_ceil(config.mtu_bytes - 48).max(1);
    endpoint.send_buffer_packets_max = config.send_buffer_packets_max.max(per_broadcast);
    endpoint.reorder_bytes_max = config.reorder_bytes_max;
    // The reliable buffer holds a scattering until it is acknowledged, an RTT longer than
    // best effort holds it; a few broadcasts keep the pipe full.
    endpoint.reliable.send_buffer_packets_max = RELIABLE_BUFFER_BROADCASTS * endpoint.send_buffer_packets_max;
    let system_config = SystemConfig {
        switch: SwitchConfig {
            beacon_interval: config.beacon_interval,
            dead_after_intervals: config.dead_after_intervals,
            ecmp_seed: config.seed,
        },
        endpoint,
        inproc: InprocConfig {
            workers: config.workers.max(1),
            link_capacity_bytes: config.link_capacity_bytes,
            frame_max_bytes: config.mtu_bytes,
            faults: config.faults.clone(),
            link_bits_per_s: config.link_bits_per_s,
            ecn_threshold_bytes: config.ecn_threshold_bytes,
        },
        link_delay: config.link_delay,
    };
    let mut rng = SplitMix::new(config.seed);
    let offsets: Vec<i64> = wiring
        .processes
        .iter()
        .map(|_| rng.symmetric(config.skew.as_nanos()))
        .collect();
    let clock = Clock::new(config.clock_start);
    let start = clock.now();
    // Processes start sending a little after the runtime is up, all at once.
    let send_from = start;
    let send_until = send_from + config.duration;
    let record_until = send_from + config.record_window.min(config.duration);
    let delivered = Arc::new(AtomicU64::new(0));
    let send_gap = if config.rate_per_process > 0.0 {
        Duration::from_nanos((1e9 / config.rate_per_process) as u64)
    } else {
        Duration::ZERO
    };
    let apps = (0..count)
        .map(|p| {
            App::Workload(Box::new(Broadcast::new(
                p,
                count,
                config.message_bytes,
                Schedule {
                    send_from,
                    send_until,
                    send_gap,
                    record_until,
                    seed: config.seed,
                    reliable: config.reliable,
                },
                delivered.clone(),
            )))
        })
        .collect();
    let runtime = match &config.udp {
        None => PhaseRuntime::Inproc(system::start(&wiring, &system_config, apps, &offsets, clock)?),
        Some(udp) => PhaseRuntime::Udp(start_local(&wiring, &system_config, udp, apps, &offsets, clock)?),
    };
    let total = config.duration.as_nanos() as f64;
    while clock.now() < send_until {
        std::thread::sleep(PROGRESS_PERIOD);
        let done = (clock.now().saturating_since(send_from).as_nanos() as f64 / total).min(1.0);
        progress(done, delivered.load(Ordering::Relaxed));
    }
    let seconds = clock.now().saturating_since(send_from).as_nanos() as f64 / 1e9;
    // Reliable messages may still be waiting for retransmission after sending stops.
    std::thread::sleep(if config.reliable { RELIABLE_DRAIN } else { DRAIN });
    let mut udp_totals = None;
    let (link_drops, link_duplicates, link_reordered, ecn_marked, nodes) = match runtime {
        PhaseRuntime::Inproc(runtime) => {
            let faults = runtime.fault_counters();
            let counts = (
                faults.dropped.load(Ordering::Relaxed),
                faults.duplicated.load(Ordering::Relaxed),
                faults.reordered.load(Ordering::Relaxed),
                faults.ecn_marked.load(Ordering::Relaxed),
            );
            (counts.0, counts.1, counts.2, counts.3, runtime.stop())
        }
        PhaseRuntime::Udp(fabric) => {
            // Frames the sockets lost count as link drops; a datagram holds many frames, so
            // lost datagrams are reported as such in the JSON's udp figures.
            let t = fabric.totals();
            udp_totals = Some(t.clone());
            (t.dropped_frames, 0, t.reordered_datagrams, 0, fabric.stop())
        }
    };

    let mut result = PhaseResult {
        ordering,
        processes: count as usize,
        seconds,
        delivered_in_window: 0,
        delivered: 0,
        messages_sent: 0,
        latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        logs: Vec::with_capacity(count as usize),
        endpoint: EndpointCounters::default(),
        switch: SwitchCounters::default(),
        send_failures: 0,
        retransmissions: 0,
        acks_sent: 0,
        acks_piggybacked: 0,
        link_drops,
        link_duplicates,
        link_reordered,
        ecn_marked,
        reorder_bytes_peak: 0,
        reorder_messages_peak: 0,
        reliable_unacked_packets_peak: 0,
        reliable_retained_packets_peak: 0,
        reliable_prepared_bytes_peak: 0,
        udp: udp_totals,
    };
    for node in nodes {
        match node {
            Either::Left(s) => sum_switch(&mut result.switch, s.counters()),
            Either::Right(h) => {
                let ep = &h.endpoint;
                sum_endpoint(&mut result.endpoint, ep.counters());
                result.retransmissions += ep.reliable_sender().counters().retransmissions;
                let r = ep.reliable_receiver().counters();
                result.acks_sent += r.acks_sent;
                result.acks_piggybacked += r.acks_piggybacked;
                result.reorder_bytes_peak = result.reorder_bytes_peak.max(ep.reorder().bytes_peak());
                result.reorder_messages_peak = result.reorder_messages_peak.max(ep.reorder().messages_peak());
                let (unacked, retained) = ep.reliable_sender().packets_peak();
                result.reliable_unacked_packets_peak = result.reliable_unacked_packets_peak.max(unacked);
                result.reliable_retained_packets_peak = result.reliable_retained_packets_peak.max(retained);
                result.reliable_prepared_bytes_peak = result
                    .reliable_prepared_bytes_peak
                    .max(ep.prepared().bytes_peak());
                if let App::Workload(w) = h.app {
                    let w = *w;
                    result.delivered += w.delivered;
                    result.delivered_in_window += w.delivered_in_window;
                    result.send_failures += w.send_failures;
                    result.latency_ns.add(&w.latency_ns).expect("same bounds");
                    result.logs.push(ProcessLog {
                        process: w.process(),
                        events: w.events,
                    });
                }
            }
        }
    }
    result.messages_sent = result.endpoint.messages_sent;
    Ok(result)
}
