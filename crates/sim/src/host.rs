//! A simulated process: the real [`Endpoint`] state machine with a traffic generator, a
//! drifting clock, and the logs the checkers read.
//!
//! The engine runs in virtual time; a host sees its own clock, `local = virtual * (1 + drift)`
//! (the endpoint adds the configured offset on top). Latency is measured in virtual time from
//! the send time carried in each payload.

use crate::traffic::Generator;
use hdrhistogram::Histogram;
use onepipe::FailureReason;
use onepipe::control::{ControlPort, Manage};
use onepipe_check::{Event, ProcessLog};
use onepipe_fabric::{Node, PortId, Route};
use onepipe_proto::endpoint::{Endpoint, EndpointEvent, SendFailure};
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

pub struct SimHost {
    pub endpoint: Endpoint,
    drift_ppb: i64,
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

impl SimHost {
    pub fn new(
        endpoint: Endpoint,
        drift_ppb: i64,
        traffic: Generator,
        record_until: Instant,
        liveness_from: Instant,
        latency_ns: SharedLatency,
    ) -> SimHost {
        let process = endpoint.config().process;
        SimHost {
            endpoint,
            drift_ppb,
            traffic,
            log: ProcessLog {
                process,
                events: Vec::new(),
            },
            record_until,
            liveness_log: ProcessLog {
                process,
                events: Vec::new(),
            },
            liveness_from,
            unreleased: HashMap::new(),
            latency_ns,
            counters: HostCounters::default(),
            watch: None,
        }
    }

    /// Starts the stall watch for a failure at virtual time `at`.
    pub fn watch_commit_barrier(&mut self, at: Instant) {
        let ns = self.local(at).as_nanos() as i128 + self.endpoint.config().clock_offset_ns as i128;
        self.watch = Some((Instant::from_nanos(ns.clamp(0, u64::MAX as i128) as u64), None));
    }

    /// When the commit barrier passed the watched failure time, if it has.
    pub fn commit_barrier_passed_at(&self) -> Option<Instant> {
        self.watch.and_then(|(_, at)| at)
    }

    fn observe(&mut self, now: Instant) {
        if let Some((from, passed @ None)) = &mut self.watch
            && self.endpoint.commit_barrier() > *from
        {
            *passed = Some(now);
        }
    }

    /// The paper's two callbacks: the generator leaves a failed process out from now on (the
    /// endpoint refuses sends that name it); a failed send is counted, and one aborted in the
    /// send buffer was never released.
    pub fn take_events(&mut self) {
        while let Some(e) = self.endpoint.poll_event() {
            match e {
                EndpointEvent::ProcessFailed { process, .. } => self.traffic.exclude(process),
                EndpointEvent::SendFailed(f) => self.on_send_failure(f),
            }
        }
    }

    /// How far the best-effort barrier trails this host's clock at virtual time `now`.
    pub fn barrier_lag(&self, now: Instant) -> onepipe_wire::Duration {
        self.local(now).saturating_since(self.endpoint.barrier())
    }

    /// The host's clock reading at virtual time `v`.
    pub(crate) fn local(&self, v: Instant) -> Instant {
        let ns = v.as_nanos() as i128;
        let local = ns + ns * self.drift_ppb as i128 / 1_000_000_000;
        Instant::from_nanos(local.clamp(0, u64::MAX as i128) as u64)
    }

    /// The earliest virtual time at which the host's clock reads `l` or more.
    fn to_virtual(&self, l: Instant) -> Instant {
        let scale = 1_000_000_000i128 + self.drift_ppb as i128;
        let guess = (l.as_nanos() as i128 * 1_000_000_000 / scale).clamp(0, u64::MAX as i128) as u64;
        // `local` rounds; step the estimate onto the exact answer (a step or two at most).
        let mut v = Instant::from_nanos(guess);
        while self.local(v) < l && v.as_nanos() < u64::MAX {
            v = Instant::from_nanos(v.as_nanos() + 1);
        }
        while v.as_nanos() > 0 && self.local(Instant::from_nanos(v.as_nanos() - 1)) >= l {
            v = Instant::from_nanos(v.as_nanos() - 1);
        }
        v
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
    fn generate(&mut self, now: Instant) {
        let local = self.local(now);
        let reliable = self.traffic.reliable();
        let saturating = self.traffic.saturating();
        while let Some((dsts, payload)) = self.traffic.draw(now) {
            if dsts.is_empty() {
                // Every destination drawn has failed.
                self.traffic.advance(now);
                continue;
            }
            if saturating && !fits(&self.endpoint, reliable, dsts.len(), payload.len()) {
                // A saturated process asks after every frame it sends; at 512 processes building
                // a broadcast only to have it refused was a fifth of the simulator's time.
                self.counters.scatterings_refused += 1;
                return;
            }
            let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, payload)).collect();
            let sent = if reliable {
                self.endpoint.send_reliable(local, &scatter)
            } else {
                self.endpoint.send_unreliable(local, &scatter)
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

    /// Logs releases, deliveries and failures.
    fn drain(&mut self, now: Instant) {
        while let Some((msg_id, ts)) = self.endpoint.poll_released() {
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
                self.endpoint
                    .poll_deliver_reliable_with(|ts, src, id, p| (ts, src, id, sent_time(p)))
            } else {
                self.endpoint
                    .poll_deliver_with(|ts, src, id, p| (ts, src, id, sent_time(p)))
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
        self.take_events();
    }

    fn on_send_failure(&mut self, f: SendFailure) {
        match f.reason {
            FailureReason::ReceiverFailed { .. } => self.counters.aborted += 1,
            _ => self.counters.send_failures += 1,
        }
        if f.ts == Instant::ZERO {
            // Aborted in the send buffer: never released, and reported so.
            self.unreleased.remove(&f.msg_id);
        }
    }
}

fn sent_time(payload: &[u8]) -> u64 {
    payload
        .get(..8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

impl Manage for SimHost {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        let local = self.local(now);
        port.exchange_endpoint(local, &mut self.endpoint);
        self.take_events();
    }
}

impl Node for SimHost {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        Route::Consume
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
        // Malformed frames are counted by the endpoint and dropped.
        let _ = self.endpoint.handle_frame(self.local(now), frame);
        self.drain(now);
        self.observe(now);
    }

    fn poll_transmit(&mut self, now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        if self.traffic.saturating() {
            self.generate(now);
        }
        let len = self.endpoint.poll_transmit(self.local(now), buf);
        self.drain(now);
        len
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let endpoint = self.to_virtual(self.endpoint.poll_timeout());
        Some(match self.traffic.next_at() {
            Some(t) if !self.traffic.saturating() => t.min(endpoint),
            _ => endpoint,
        })
    }

    fn handle_timeout(&mut self, now: Instant) {
        let local = self.local(now);
        if !self.traffic.saturating() {
            self.generate(now);
        }
        if self.endpoint.poll_timeout() <= local {
            self.endpoint.handle_timeout(local);
        }
        self.drain(now);
        self.observe(now);
    }
}

/// Whether a scattering of `messages` messages of `len` bytes has room in `ep`'s send buffer.
fn fits(ep: &Endpoint, reliable: bool, messages: usize, len: usize) -> bool {
    if reliable {
        messages * ep.reliable_sender().packets_for(len) as usize <= ep.reliable_room_packets()
    } else {
        messages * ep.packets_for(len) <= ep.send_room_packets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{Pattern, Traffic};
    use onepipe_proto::endpoint::EndpointConfig;
    use onepipe_wire::Duration;

    fn host(drift_ppb: i64) -> SimHost {
        let traffic = Traffic {
            pattern: Pattern::Broadcast,
            gap: Duration::from_micros(10),
            message_bytes_min: 64,
            message_bytes_max: 64,
            reliable: false,
            send_from: Instant::ZERO,
            send_until: Instant::ZERO,
            measure_from: Instant::ZERO,
        };
        SimHost::new(
            Endpoint::new(EndpointConfig::new(0, 1, 0), Instant::ZERO),
            drift_ppb,
            Generator::new(0, 1, traffic, 1),
            Instant::ZERO,
            Instant::ZERO,
            shared_latency(),
        )
    }

    #[test]
    fn drifting_clock_round_trips() {
        for drift in [-50_000, -1, 0, 1, 20_000] {
            let h = host(drift);
            for v in [0u64, 1, 999, 1_000_000_007, 3_000_000_000_123] {
                let v = Instant::from_nanos(v);
                let l = h.local(v);
                let back = h.to_virtual(l);
                assert!(back <= v, "drift {drift}: {v:?} -> {l:?} -> {back:?}");
                assert!(h.local(back) >= l, "drift {drift}: reading reached by {back:?}");
                if back.as_nanos() > 0 {
                    assert!(h.local(Instant::from_nanos(back.as_nanos() - 1)) < l, "earliest");
                }
            }
        }
        // 20 ppm fast: one second of virtual time reads 20 us more.
        let h = host(20_000);
        assert_eq!(
            h.local(Instant::from_nanos(1_000_000_000)).as_nanos(),
            1_000_020_000
        );
    }
}
