//! The run behind `onepipe demo`: all-to-all broadcast over the inproc runtime, once with
//! ordering and once without (the unordered baseline: same runtime, topology and switches,
//! receivers deliver on arrival), so that the difference measures what ordering costs.

#![allow(clippy::disallowed_methods)] // the demo drives real time: it sleeps between progress reports

use crate::demo_drain::{Achieved, DrainWatch};
use crate::soak_stream::ProcessStream;
use crate::workload::{Broadcast, Progress, Schedule};
use hdrhistogram::Histogram;
use onepipe::control::ControlPlane;
use onepipe::system::{self, SystemConfig, SystemError};
use onepipe::udp::{LocalFabric, start_local};
use onepipe_check::{ProcessLog, check_no_loss};
use onepipe_fabric::Either;
use onepipe_fabric::{Topology, Wiring, WiringError};
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::endpoint::{EndpointConfig, EndpointCounters};
use onepipe_proto::hash::SplitMix;
use onepipe_proto::switch::{OnePipeProgram, SwitchConfig, SwitchCounters};
use onepipe_runtime::inproc::{Clock, InprocConfig, LinkFaults};
use onepipe_runtime::udp::UdpConfig;
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
    /// inproc: hosts are visited once in this many worker passes; 0 chooses from the topology
    /// ([`InprocConfig::edge_visit_interval_passes`]).
    pub edge_visit_interval_passes: u32,
    pub send_buffer_packets_max: usize,
    /// Closed loop: at most this many of a process's own broadcasts undelivered back to it
    /// (see [`crate::workload::Schedule::window`]); `None` is open loop.
    pub window_broadcasts: Option<usize>,
    pub reorder_bytes_max: usize,
    /// Use the reliable service (paper 5.1) instead of best effort.
    pub reliable: bool,
    /// Hosts' promise lead ([`EndpointConfig::promise_lead`]).
    pub promise_lead: Option<Duration>,
    /// How far ahead of a node's clock a barrier or timestamp may be
    /// ([`EndpointConfig::time_ahead_max`]).
    pub time_ahead_max: Duration,
    /// Where barriers are aggregated (paper 6.2; docs/incarnations.md).
    pub incarnation: onepipe_proto::Incarnation,
    /// Loss, duplication and jitter on every link.
    pub faults: LinkFaults,
    /// Serialization rate of every link; `None` is as fast as the workers go.
    pub link_bits_per_s: Option<u64>,
    /// Queue depth past which switches mark ECN (DCTCP).
    pub ecn_threshold_bytes: usize,
    /// `None`: the inproc runtime. Some: every node on a thread and a UDP socket of its own
    /// (link faults, rates and ring sizes then do not apply: the kernel's sockets are the links).
    pub udp: Option<UdpConfig>,
    /// Components to fail during the run (inproc runtime, reliable service). With any, a
    /// controller runs the failure procedure of paper 5.2.
    pub failures: Vec<PlannedFailure>,
    /// Process `p`'s events and counters go to `streams[p]` as they come, and not into
    /// [`PhaseResult::logs`] (a soak; empty for every other run).
    pub streams: Vec<Arc<ProcessStream>>,
}

/// A component that fails `at` after sending starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFailure {
    pub target: FailTarget,
    pub at: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailTarget {
    /// Every process of host `h` crashes.
    Host(usize),
    /// Switch `s` (topology index) crashes.
    Switch(usize),
    /// The link between two switches fails both ways.
    Link(usize, usize),
}

/// What the controller did about the planned failures.
#[derive(Clone, Debug, Default)]
pub struct FailureOutcome {
    /// The processes the controller declared failed, with their failure timestamps (ns).
    pub failed_processes: Vec<(u32, u64)>,
    /// From the first failure to the first link-down report reaching the controller; negative
    /// if a report came before it (a false detection).
    pub detection_us: Option<f64>,
    /// From the first failure to the controller's first and last Resume.
    pub first_resume_us: Option<f64>,
    pub resume_us: Option<f64>,
    /// The paper's recovery time (Fig. 10): how long the commit barrier of correct processes
    /// stalls, from the failure to their first delivery of a message stamped after it, on
    /// average over the correct processes that delivered one.
    pub recovery_us: Option<f64>,
    /// Correct processes that delivered nothing stamped after the failure.
    pub stalled_processes: u64,
    /// Reliable scatterings aborted because a receiver failed.
    pub aborted: u64,
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
            // ones amortize more per visit but add milliseconds (docs/notes/2026-11-performance-log.md).
            link_capacity_bytes: 2048,
            edge_visit_interval_passes: 0,
            send_buffer_packets_max: 32,
            window_broadcasts: None,
            reorder_bytes_max: 64 << 20,
            reliable: false,
            promise_lead: None,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
            faults: LinkFaults::default(),
            link_bits_per_s: None,
            ecn_threshold_bytes: 1024,
            udp: None,
            failures: Vec::new(),
            streams: Vec::new(),
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
    Udp(#[from] onepipe::udp::UdpSystemError),
    #[error("message size must be between 8 and {max} bytes (it carries an 8-byte send time)")]
    MessageSize { max: usize },
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("failures are injected in the inproc runtime with the reliable service only")]
    FailuresNeedReliableInproc,
    #[error("no such component to fail: {0}")]
    NoSuchComponent(String),
    #[error("the controller could not start: {0}")]
    Controller(String),
}

/// What one phase (ordered or unordered) measured.
pub struct PhaseResult {
    pub ordering: bool,
    pub processes: usize,
    pub seconds: f64,
    /// How long the fabric ran: the sending window and the drain after it. Counters that
    /// run all along (beacons, frames) are rates over this, not over `seconds`: a drain can
    /// last up to a second (a reliable message under repair), and idle links beacon meanwhile.
    pub run_seconds: f64,
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
    /// Recorded reliable scatterings accepted but never released nor reported failed:
    /// lost, though the logs cannot show it (no S lines). See [`PhaseResult::lost`].
    pub never_released: u64,
    pub retransmissions: u64,
    /// Why packets went again: retransmission timeouts (one per connection and expiry),
    /// packets resent because later ones were acknowledged first, and timeouts an ACK of the
    /// first copy later showed were spurious.
    pub timeouts: u64,
    pub fast_retransmits: u64,
    pub spurious_timeouts: u64,
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
    pub udp: Option<onepipe_runtime::udp::local::UdpTotals>,
    /// With planned failures: what the controller did.
    pub failure: Option<FailureOutcome>,
}

impl PhaseResult {
    pub fn throughput_msgs_per_s(&self) -> f64 {
        self.delivered_in_window as f64 / self.seconds
    }
    pub fn latency_us(&self, quantile: f64) -> f64 {
        self.latency_ns.value_at_quantile(quantile) as f64 / 1_000.0
    }
    /// Reliable messages not delivered exactly once: the checker's violations over the logs,
    /// and the scatterings that never left the send buffer (each one counts once, whatever
    /// its number of receivers).
    pub fn lost(&self) -> Vec<String> {
        let mut lost: Vec<String> = check_no_loss(&self.logs).iter().map(|v| v.to_string()).collect();
        if self.never_released > 0 {
            lost.push(format!(
                "{} reliable scatterings were accepted but never released nor failed",
                self.never_released
            ));
        }
        lost
    }
}

enum PhaseRuntime {
    Inproc(onepipe_runtime::inproc::Runtime<onepipe::system::Member<Broadcast>>),
    Udp(LocalFabric<Broadcast>),
}

/// Largest demo message (the endpoint's default limit).
pub const MESSAGE_BYTES_MAX: usize = 1 << 20;

const DRAIN_POLL: std::time::Duration = std::time::Duration::from_millis(2);
/// Broadcasts the reliable send buffer holds (best effort holds one). The buffer keeps a
/// scattering until it is acknowledged, an RTT longer than best effort keeps it, so it needs
/// more than one to keep the pipe full; but in the inproc runtime the CPU is the bottleneck and
/// what is in flight beyond that only adds memory for every step to miss in cache: 2 delivered
/// more than 4 in 14 of 14 alternating rounds (median ratio to best effort 0.63 against 0.54).
/// Over udp the round trip is milliseconds long and 8 are needed: `bench fig8 --runtime udp`
/// reliable rows at 8 and 32 processes delivered 1.36 and 1.17 M msg/s with 4, 1.52 and 1.45
/// with 8 (p50 latency then near best effort's), 1.61 and 1.59 with 16 (twice the latency
/// again). Before the udp RTO floor (`udp::RTO_MIN`) spurious timeouts kept windows small and
/// more than 4 delivered no more. See docs/notes/2026-11-performance-log.md.
fn reliable_buffer_broadcasts(udp: bool) -> usize {
    if udp { 8 } else { 2 }
}
const PROGRESS_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);

fn sum_endpoint(a: &mut EndpointCounters, b: &EndpointCounters) {
    a.scatterings_sent += b.scatterings_sent;
    a.messages_sent += b.messages_sent;
    a.packets_sent += b.packets_sent;
    a.beacons_sent += b.beacons_sent;
    a.promises_sent += b.promises_sent;
    a.released_unpolled_dropped += b.released_unpolled_dropped;
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
    a.time_implausible += b.time_implausible;
    a.oversized += b.oversized;
}

fn sum_switch(a: &mut SwitchCounters, b: &SwitchCounters) {
    a.forwarded += b.forwarded;
    a.beacons_sent += b.beacons_sent;
    a.beacons_received += b.beacons_received;
    a.malformed += b.malformed;
    a.no_route += b.no_route;
    a.spoofed_source += b.spoofed_source;
    a.barrier_regressions += b.barrier_regressions;
    a.links_removed += b.links_removed;
    a.links_joined += b.links_joined;
    a.barrier_implausible += b.barrier_implausible;
}

/// What a run's driver sees every 50 ms while it runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tick {
    /// Of the sending window, 1 during the drain after it.
    pub fraction_done: f64,
    pub delivered: u64,
    pub fabric: FabricDrops,
}

/// What the fabric itself dropped so far (not the endpoints).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FabricDrops {
    /// Frames dropped on links: inproc link faults, or udp frames a sender could not send.
    pub link_frames: u64,
    /// udp: datagrams lost between sockets, dropped by a full inbox, and frames for a
    /// neighbour gone.
    pub lost_datagrams: u64,
    pub overrun_datagrams: u64,
    pub peer_gone_frames: u64,
}

fn fabric_drops(runtime: &PhaseRuntime) -> FabricDrops {
    match runtime {
        PhaseRuntime::Inproc(rt) => FabricDrops {
            link_frames: rt.fault_counters().dropped.load(Ordering::Relaxed),
            ..FabricDrops::default()
        },
        PhaseRuntime::Udp(fabric) => {
            let t = fabric.totals();
            FabricDrops {
                link_frames: t.dropped_frames,
                lost_datagrams: t.lost_datagrams,
                overrun_datagrams: t.overrun_datagrams,
                peer_gone_frames: t.peer_gone_frames,
            }
        }
    }
}

/// Runs one phase. `progress(fraction_done, delivered_so_far)` is called every 50 ms.
pub fn run_phase(
    config: &DemoConfig,
    ordering: bool,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<PhaseResult, DemoError> {
    run_phase_watched(config, ordering, &mut |t| progress(t.fraction_done, t.delivered))
}

/// [`run_phase`], showing the driver a [`Tick`] every 50 ms.
pub fn run_phase_watched(
    config: &DemoConfig,
    ordering: bool,
    watch: &mut dyn FnMut(&Tick),
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
    if !config.failures.is_empty() && (config.udp.is_some() || !config.reliable) {
        return Err(DemoError::FailuresNeedReliableInproc);
    }
    let wiring = Wiring::new(config.topology.clone(), config.processes_per_host)?;
    let injections = config
        .failures
        .iter()
        .map(|f| Ok((f.at, fault_targets(&wiring, &f.target)?)))
        .collect::<Result<Vec<_>, DemoError>>()?;
    let count = wiring.process_count() as u32;
    let mut endpoint = EndpointConfig::new(0, count, 0);
    endpoint.beacon_interval = config.beacon_interval;
    endpoint.mtu_bytes = config.mtu_bytes;
    endpoint.ordering = ordering;
    endpoint.promise_lead = config.promise_lead;
    endpoint.time_ahead_max = config.time_ahead_max;
    endpoint.incarnation = config.incarnation;
    let per_broadcast = count as usize * config.message_bytes.div_ceil(config.mtu_bytes - 48).max(1);
    endpoint.send_buffer_packets_max = config.send_buffer_packets_max.max(per_broadcast);
    endpoint.reorder_bytes_max = config.reorder_bytes_max;
    endpoint.reliable.send_buffer_packets_max =
        reliable_buffer_broadcasts(config.udp.is_some()) * endpoint.send_buffer_packets_max;
    endpoint.fit_recv_window_to(config.message_bytes);
    if config.udp.is_some() {
        endpoint.reliable.rto_min = onepipe::udp::RTO_MIN;
    }
    let system_config = SystemConfig {
        switch: SwitchConfig {
            beacon_interval: config.beacon_interval,
            dead_after_intervals: config.dead_after_intervals,
            ecmp_seed: config.seed,
            promise_lead: config.promise_lead.unwrap_or(Duration::ZERO),
            time_ahead_max: config.time_ahead_max,
            incarnation: config.incarnation,
        },
        endpoint,
        inproc: InprocConfig {
            workers: config.workers.max(1),
            link_capacity_bytes: config.link_capacity_bytes,
            frame_max_bytes: config.mtu_bytes,
            faults: config.faults.clone(),
            link_bits_per_s: config.link_bits_per_s,
            ecn_threshold_bytes: config.ecn_threshold_bytes,
            edge_visit_interval_passes: config.edge_visit_interval_passes,
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
    let progress_counts = Arc::new(Progress::default());
    let send_gap = if config.rate_per_process > 0.0 {
        Duration::from_nanos((1e9 / config.rate_per_process) as u64)
    } else {
        Duration::ZERO
    };
    let failure_at_ns = Arc::new(AtomicU64::new(0));
    let apps = (0..count)
        .map(|p| {
            let mut w = Broadcast::new(
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
                    window: config.window_broadcasts,
                },
                progress_counts.clone(),
            );
            w.watch_failure(failure_at_ns.clone());
            if let Some(stream) = config.streams.get(p as usize) {
                w.stream_to(stream.clone());
            }
            w
        })
        .collect();
    let (control, ports) = if injections.is_empty() {
        (None, None)
    } else {
        let controller = ControllerConfig {
            // A failure's reports come within a few beacon intervals of each other.
            settle: config.beacon_interval.saturating_mul(20),
            ..ControllerConfig::default()
        };
        let (plane, ports) = ControlPlane::start(&wiring, controller, clock)
            .map_err(|e| DemoError::Controller(e.to_string()))?;
        (Some(plane), Some(ports))
    };
    let runtime = match &config.udp {
        None => PhaseRuntime::Inproc(system::start_managed(
            &wiring,
            &system_config,
            apps,
            &offsets,
            clock,
            ports,
        )?),
        Some(udp) => PhaseRuntime::Udp(start_local(&wiring, &system_config, udp, apps, &offsets, clock)?),
    };
    let total = config.duration.as_nanos() as f64;
    let mut pending: Vec<(Duration, Vec<Fault>)> = injections;
    let mut first_failure_at = None;
    // How long after sending began the first delivery was seen (within a poll).
    let mut first_delivery_after: Option<std::time::Duration> = None;
    let see_first_delivery = |first: &mut Option<std::time::Duration>| {
        if first.is_none() && progress_counts.delivered.load(Ordering::Relaxed) > 0 {
            *first = Some(std::time::Duration::from_nanos(
                clock.now().saturating_since(send_from).as_nanos(),
            ));
        }
    };
    while clock.now() < send_until {
        // Failures are injected within 5 ms of their time.
        std::thread::sleep(if pending.is_empty() {
            PROGRESS_PERIOD
        } else {
            std::time::Duration::from_millis(5)
        });
        let since = clock.now().saturating_since(send_from);
        if let PhaseRuntime::Inproc(rt) = &runtime {
            pending.retain(|(at, faults)| {
                if since < *at {
                    return true;
                }
                let now = *first_failure_at.get_or_insert(clock.now());
                failure_at_ns.store(now.as_nanos(), Ordering::Relaxed);
                for f in faults {
                    match *f {
                        Fault::Node(n) => rt.crash(n),
                        Fault::Link(n, port) => rt.fail_link(n, port),
                    };
                }
                false
            });
        }
        see_first_delivery(&mut first_delivery_after);
        watch(&Tick {
            fraction_done: (since.as_nanos() as f64 / total).min(1.0),
            delivered: progress_counts.delivered.load(Ordering::Relaxed),
            fabric: fabric_drops(&runtime),
        });
    }
    let seconds = clock.now().saturating_since(send_from).as_nanos() as f64 / 1e9;
    // Messages still in flight when sending stops, reliable ones perhaps waiting for a
    // retransmission, are waited for while the run gets somewhere (see `demo_drain`).
    let mut drain_watch = DrainWatch::new(config.reliable);
    let drain_from = std::time::Instant::now();
    let mut last_delivered = u64::MAX;
    let mut last_tick = drain_from;
    while !progress_counts.all_delivered(count as u64) {
        let achieved = Achieved {
            delivered: progress_counts.delivered.load(Ordering::Relaxed),
            acked: progress_counts.acked.load(Ordering::Relaxed),
        };
        if achieved.delivered != last_delivered || last_tick.elapsed() >= PROGRESS_PERIOD {
            last_delivered = achieved.delivered;
            last_tick = std::time::Instant::now();
            watch(&Tick {
                fraction_done: 1.0,
                delivered: achieved.delivered,
                fabric: fabric_drops(&runtime),
            });
        }
        see_first_delivery(&mut first_delivery_after);
        if !drain_watch.keep_waiting(drain_from.elapsed(), achieved, first_delivery_after) {
            break;
        }
        std::thread::sleep(DRAIN_POLL);
    }
    let run_seconds = clock.now().saturating_since(start).as_nanos() as f64 / 1e9;
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
            (
                t.dropped_frames,
                0,
                t.reordered_datagrams,
                t.ecn_marked,
                fabric.stop(),
            )
        }
    };

    let mut result = PhaseResult {
        ordering,
        processes: count as usize,
        seconds,
        run_seconds,
        delivered_in_window: 0,
        delivered: 0,
        messages_sent: 0,
        latency_ns: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        logs: Vec::with_capacity(count as usize),
        endpoint: EndpointCounters::default(),
        switch: SwitchCounters::default(),
        send_failures: 0,
        never_released: 0,
        retransmissions: 0,
        timeouts: 0,
        fast_retransmits: 0,
        spurious_timeouts: 0,
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
        failure: None,
    };
    let mut aborted = 0;
    let mut past_failure: Vec<(u32, Option<Instant>)> = Vec::new();
    for node in nodes {
        match node.node {
            Either::Left(s) => sum_switch(&mut result.switch, s.onepipe().counters()),
            Either::Right(h) => {
                let ep = &h.endpoint;
                sum_endpoint(&mut result.endpoint, ep.counters());
                let sent = ep.reliable_sender().counters();
                result.retransmissions += sent.retransmissions;
                result.timeouts += sent.timeouts;
                result.fast_retransmits += sent.fast_retransmits;
                result.spurious_timeouts += sent.spurious_timeouts;
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
                let w = h.app;
                result.delivered += w.delivered;
                result.delivered_in_window += w.delivered_in_window;
                result.send_failures += w.send_failures;
                result.never_released += w.never_released();
                aborted += w.aborted;
                past_failure.push((w.process(), w.delivered_past_failure_at));
                result.latency_ns.add(&w.latency_ns).expect("same bounds");
                result.logs.push(ProcessLog {
                    process: w.process(),
                    events: w.events,
                });
            }
        }
    }
    result.messages_sent = result.endpoint.messages_sent;
    if let Some(plane) = control {
        let t = plane.timeline();
        // Signed: a report from before the first failure is a false detection (a node stalled
        // past the dead-link timeout), and shows as a negative time.
        let since =
            |at: Option<Instant>| Some((at?.as_nanos() as f64 - first_failure_at?.as_nanos() as f64) / 1e3);
        let (mut stalls_us, mut stalled_processes) = (Vec::new(), 0);
        for (p, at) in past_failure {
            if t.failures.iter().any(|f| f.process == p) {
                continue;
            }
            match since(at) {
                Some(us) => stalls_us.push(us),
                None => stalled_processes += 1,
            }
        }
        result.failure = Some(FailureOutcome {
            failed_processes: t.failures.iter().map(|f| (f.process, f.ts.as_nanos())).collect(),
            detection_us: since(t.first_report_at),
            first_resume_us: since(t.first_resume_at),
            resume_us: since(t.last_resume_at),
            recovery_us: (!stalls_us.is_empty())
                .then(|| stalls_us.iter().sum::<f64>() / stalls_us.len() as f64),
            stalled_processes,
            aborted,
        });
    }
    Ok(result)
}

/// What a planned failure breaks in the runtime.
enum Fault {
    Node(usize),
    /// A link's output at (node, port).
    Link(usize, onepipe_fabric::PortId),
}

/// `--fail TARGET@TIME` against the topology.
pub fn parse_failure(spec: &str, topology: &Topology) -> Result<PlannedFailure, String> {
    let (what, when) = spec
        .split_once('@')
        .ok_or_else(|| format!("--fail `{spec}`: expected TARGET@TIME, like host:5@1s"))?;
    let at = onepipe_sim::config::parse_time(when).map_err(|e| format!("--fail `{spec}`: {e}"))?;
    let switch = |name: &str| -> Result<usize, String> {
        let by_layer = |layer: u8, n: &str| {
            let n: usize = n
                .parse()
                .map_err(|_| format!("--fail `{spec}`: `{n}` is not a number"))?;
            let mut of_layer = (0..topology.switches.len()).filter(|&s| topology.switches[s].layer == layer);
            of_layer
                .nth(n)
                .ok_or_else(|| format!("--fail `{spec}`: the topology has no {name}"))
        };
        match name.split_once(':') {
            Some(("tor", n)) => by_layer(1, n),
            Some(("spine", n)) => by_layer(2, n),
            Some(("core", n)) => by_layer(3, n),
            _ => topology
                .switches
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| {
                    format!(
                        "--fail `{spec}`: no switch named `{name}` ({})",
                        topology.switch_names_hint()
                    )
                }),
        }
    };
    let target = match what.split_once(':') {
        Some(("host", h)) => {
            let h: usize = h
                .parse()
                .map_err(|_| format!("--fail `{spec}`: host:H takes a host number"))?;
            if h >= topology.hosts.len() {
                return Err(format!(
                    "--fail `{spec}`: the topology has {} hosts",
                    topology.hosts.len()
                ));
            }
            FailTarget::Host(h)
        }
        Some(("switch", name)) => FailTarget::Switch(switch(name)?),
        Some(("link", ends)) => {
            let (a, b) = ends
                .split_once('-')
                .ok_or_else(|| format!("--fail `{spec}`: a link is named A-B"))?;
            FailTarget::Link(switch(a)?, switch(b)?)
        }
        Some(("tor" | "spine" | "core", _)) => FailTarget::Switch(switch(what)?),
        _ => {
            return Err(format!(
                "--fail `{spec}`: expected host:H, tor:N, spine:N, core:N, switch:NAME or link:A-B"
            ));
        }
    };
    Ok(PlannedFailure { target, at })
}

fn fault_targets(wiring: &Wiring, target: &FailTarget) -> Result<Vec<Fault>, DemoError> {
    let missing = || DemoError::NoSuchComponent(format!("{target:?}"));
    match *target {
        FailTarget::Host(h) => {
            let nodes: Vec<Fault> = (0..wiring.process_count() as u32)
                .filter(|&p| wiring.processes[p as usize].host == h)
                .map(|p| Fault::Node(wiring.node_of_process(p)))
                .collect();
            if nodes.is_empty() {
                Err(missing())
            } else {
                Ok(nodes)
            }
        }
        FailTarget::Switch(s) if s < wiring.switch_count() => Ok(vec![Fault::Node(s)]),
        FailTarget::Switch(_) => Err(missing()),
        FailTarget::Link(a, b) => {
            let port = |from: usize, to: usize| {
                wiring.switch_ports.get(from)?.iter().position(
                    |p| matches!(p.peer, onepipe_fabric::Peer::Switch { switch, .. } if switch == to),
                )
            };
            match (port(a, b), port(b, a)) {
                (Some(pa), Some(pb)) => Ok(vec![
                    Fault::Link(a, pa as onepipe_fabric::PortId),
                    Fault::Link(b, pb as onepipe_fabric::PortId),
                ]),
                _ => Err(missing()),
            }
        }
    }
}
