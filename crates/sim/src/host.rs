//! A simulated process: the real [`Endpoint`] state machine with a traffic generator and the
//! logs the checkers read, as the [`Application`] of the same host node every runtime uses.
//!
//! The engine runs in virtual time; a host's clock drifts (`clock_drift_ppb`) and is offset
//! (`clock_offset_ns`) inside its endpoint. Latency is measured in virtual time from the send
//! time carried in each payload.

use crate::traffic::Generator;
use hdrhistogram::Histogram;
use onepipe::FailureReason;
use onepipe::host::{Application, HostNode};
use onepipe_check::{Event, ProcessLog};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig, SendFailure};
use onepipe_wire::Instant;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Latencies above this are clamped into the histogram's top bucket.
pub const LATENCY_NS_MAX: u64 = 60_000_000_000;

/// One latency histogram for all hosts of a run: a histogram per host is a few hundred KiB,
/// gigabytes at 32K processes. The engine runs on one thread, so the lock is never contended.
pub type SharedLatency = Arc<Mutex<Histogram<u64>>>;

pub fn shared_latency() -> SharedLatency {
    Arc::new(Mutex::new(
        Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid histogram bounds"),
    ))
}

/// What a host counts for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostCounters {
    pub scatterings_sent: u64,
    /// Scatterings the generator drew but the send buffer refused (backpressure).
    pub scatterings_refused: u64,
    pub delivered: u64,
    /// Deliveries while traffic runs (the throughput window).
    pub delivered_in_window: u64,
    pub send_failures: u64,
    /// Reliable scatterings aborted because a receiver failed (paper 5.2, Recall).
    pub aborted: u64,
}

/// A simulated process: the one host node of every runtime ([`HostNode`]) driving the real
/// endpoint, with the simulator's application: the traffic generator, the logs the checkers
/// read, the latency histogram and the stall watch.
pub type SimHost = HostNode<SimApp>;

pub struct SimApp {
    traffic: Generator,
    /// Events of messages sent before `record_until` (checker input).
    pub log: ProcessLog,
    record_until: Instant,
    /// Events of messages sent at or after `liveness_from`, for the liveness check.
    pub liveness_log: ProcessLog,
    liveness_from: Instant,
    /// Reliable scatterings not yet released: destinations by message id, with send time.
    unreleased: HashMap<u64, (Instant, Vec<u32>)>,
    latency_ns: SharedLatency,
    pub counters: HostCounters,
    /// The stall watch: the endpoint-clock reading at a failure, and the virtual time at which
    /// the commit barrier passed it (messages sent at the failure could be delivered).
    watch: Option<(Instant, Option<Instant>)>,
}

/// A simulated process whose endpoint's clock runs `drift_ppb` fast (the endpoint's
/// `clock_drift_ppb`; its offset is the endpoint's `clock_offset_ns`).
pub fn sim_host(
    mut config: EndpointConfig,
    drift_ppb: i64,
    start: Instant,
    traffic: Generator,
    record_until: Instant,
    liveness_from: Instant,
    latency_ns: SharedLatency,
) -> SimHost {
    config.clock_drift_ppb = drift_ppb;
    let process = config.process;
    let log = || ProcessLog {
        process,
        events: Vec::new(),
    };
    HostNode {
        endpoint: Endpoint::new(config, start),
        app: SimApp {
            traffic,
            log: log(),
            record_until,
            liveness_log: log(),
            liveness_from,
            unreleased: HashMap::new(),
            latency_ns,
            counters: HostCounters::default(),
            watch: None,
        },
    }
}

/// Starts `host`'s stall watch for a failure at virtual time `at`.
pub fn watch_commit_barrier(host: &mut SimHost, at: Instant) {
    host.app.watch = Some((host.endpoint.clock_reading(at), None));
}

/// How far the best-effort barrier trails `host`'s clock at virtual time `now`.
pub fn barrier_lag(host: &SimHost, now: Instant) -> onepipe_wire::Duration {
    host.endpoint
        .clock_reading(now)
        .saturating_since(host.endpoint.barrier())
}

impl SimApp {
    /// When the commit barrier passed the watched failure time, if it has.
    pub fn commit_barrier_passed_at(&self) -> Option<Instant> {
        self.watch.and_then(|(_, at)| at)
    }

    fn observe(&mut self, now: Instant, endpoint: &Endpoint) {
        if let Some((from, passed @ None)) = &mut self.watch
            && endpoint.commit_barrier() > *from
        {
            *passed = Some(now);
        }
    }

    /// Scatterings accepted but neither released nor reported failed, sent inside
    /// the recorded window and inside the liveness window: the logs have no S lines for
    /// them, so at the end of a run the checkers cannot see them lost; these counts can.
    pub fn never_released(&self) -> (u64, u64) {
        let recorded = self
            .unreleased
            .values()
            .filter(|(at, _)| *at < self.record_until)
            .count();
        let live = self
            .unreleased
            .values()
            .filter(|(at, _)| *at >= self.liveness_from)
            .count();
        (recorded as u64, live as u64)
    }

    fn logs_for(&mut self, sent_at: Instant) -> [Option<&mut Vec<Event>>; 2] {
        [
            (sent_at < self.record_until).then_some(&mut self.log.events),
            (sent_at >= self.liveness_from).then_some(&mut self.liveness_log.events),
        ]
    }

    /// Sends what the generator has due; in saturating mode, as long as the buffer has room.
    fn generate(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let reliable = self.traffic.reliable();
        let saturating = self.traffic.saturating();
        while let Some((dsts, payload)) = self.traffic.draw(now) {
            if dsts.is_empty() {
                // Every destination drawn has failed.
                self.traffic.advance(now);
                continue;
            }
            if saturating && !fits(endpoint, reliable, dsts.len(), payload.len()) {
                // A saturated process asks after every frame it sends; at 512 processes building
                // a broadcast only to have it refused was a fifth of the simulator's time.
                self.counters.scatterings_refused += 1;
                return;
            }
            let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, payload)).collect();
            let sent = if reliable {
                endpoint.send_reliable(now, &scatter)
            } else {
                endpoint.send_unreliable(now, &scatter)
            };
            match sent {
                Ok(msg_id) => {
                    // Logged when the scattering leaves the send buffer with its timestamp.
                    self.counters.scatterings_sent += 1;
                    self.unreleased.insert(msg_id, (now, dsts.to_vec()));
                }
                Err(_) => {
                    self.counters.scatterings_refused += 1;
                    if self.traffic.saturating() {
                        // Full: try again when the endpoint has sent something.
                        return;
                    }
                }
            }
            self.traffic.advance(now);
        }
    }
}

impl Application for SimApp {
    /// Logs releases and deliveries, and watches the commit barrier.
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        while let Some((msg_id, ts)) = endpoint.poll_released() {
            let Some((sent_at, dsts)) = self.unreleased.remove(&msg_id) else {
                continue;
            };
            for log in self.logs_for(sent_at).into_iter().flatten() {
                for &dst in &dsts {
                    log.push(Event::Send {
                        ts_ns: ts.as_nanos(),
                        dst,
                        msg_id,
                    });
                }
            }
        }
        loop {
            let reliable = self.traffic.reliable();
            let got = if reliable {
                endpoint.poll_deliver_reliable_with(|ts, src, id, p| (ts, src, id, sent_time(p)))
            } else {
                endpoint.poll_deliver_with(|ts, src, id, p| (ts, src, id, sent_time(p)))
            };
            let Some((ts, src, msg_id, sent_ns)) = got else {
                break;
            };
            self.counters.delivered += 1;
            if self.traffic.measuring(now) {
                self.counters.delivered_in_window += 1;
            }
            if self.traffic.measured(Instant::from_nanos(sent_ns)) {
                let latency = now.as_nanos().saturating_sub(sent_ns).clamp(1, LATENCY_NS_MAX);
                self.latency_ns
                    .lock()
                    .expect("no thread panicked holding it")
                    .record(latency)
                    .expect("clamped into bounds");
            }
            let event = Event::Deliver {
                ts_ns: ts.as_nanos(),
                src,
                msg_id,
            };
            for log in self.logs_for(Instant::from_nanos(sent_ns)).into_iter().flatten() {
                log.push(event);
            }
        }
        self.observe(now, endpoint);
    }

    /// A saturating generator sends whenever the send buffer has room.
    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        if self.traffic.saturating() {
            self.generate(now, endpoint);
        }
    }

    /// The generator leaves a failed process out from now on (the endpoint refuses sends
    /// that name it).
    fn on_process_failure(&mut self, process: u32, _ts: Instant) {
        self.traffic.exclude(process);
    }

    /// A failed send is counted; one aborted in the send buffer was never released.
    fn on_send_failure(&mut self, f: SendFailure) {
        match f.reason {
            FailureReason::ReceiverFailed { .. } => self.counters.aborted += 1,
            _ => self.counters.send_failures += 1,
        }
        if f.ts == Instant::ZERO {
            self.unreleased.remove(&f.msg_id);
        }
    }

    /// A paced generator's next send.
    fn poll_timeout(&self) -> Option<Instant> {
        self.traffic.next_at().filter(|_| !self.traffic.saturating())
    }

    fn on_timeout(&mut self, now: Instant, endpoint: &mut Endpoint) {
        if !self.traffic.saturating() {
            self.generate(now, endpoint);
        }
    }
}

fn sent_time(payload: &[u8]) -> u64 {
    payload
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Whether a scattering of `messages` messages of `len` bytes has room in `ep`'s send buffer.
fn fits(ep: &Endpoint, reliable: bool, messages: usize, len: usize) -> bool {
    if reliable {
        messages * ep.reliable_sender().packets_for(len) as usize <= ep.reliable_room_packets()
    } else {
        messages * ep.packets_for(len) <= ep.send_room_packets()
    }
}
