//! The demo's workload: every process broadcasts fixed-size messages to every process
//! (itself included), as fast as its send buffer drains (or paced, or closed by a window of
//! its own broadcasts in flight: [`Schedule`]), and records what it sends and delivers for
//! the checker.
//!
//! The first 8 payload bytes carry the shared-clock send time, so delivery latency is measured
//! on one clock whatever skew the hosts have.

use crate::soak_stream::ProcessStream;
use hdrhistogram::Histogram;
use onepipe::host::Application;
use onepipe_check::Event;
use onepipe_proto::endpoint::{Endpoint, FailureReason, SendFailure};
use onepipe_proto::hash::SplitMix;
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Deliveries (and sent messages, and acknowledged packets) between updates of the shared
/// progress counters, while sending lasts; afterwards every one is reported at once, so that a
/// driver waiting for the last deliveries sees them as they happen.
const PROGRESS_BATCH: u64 = 256;

/// What all processes of a run sent and delivered so far, counted in messages (a broadcast
/// to 32 processes is 32), shared with the driver: it shows progress, and it ends the drain
/// after sending stops once every message sent has been delivered.
#[derive(Debug, Default)]
pub struct Progress {
    pub sent: AtomicU64,
    pub delivered: AtomicU64,
    /// Reliable packets acknowledged, reported in batches: a bulk transfer acknowledges
    /// packets for seconds before the commit barrier lets a message through.
    pub acked: AtomicU64,
    /// Processes past their sending window that have reported everything they sent.
    pub senders_done: AtomicU64,
}

impl Progress {
    /// Whether all `processes` stopped sending and every message they sent was delivered.
    pub fn all_delivered(&self, processes: u64) -> bool {
        self.senders_done.load(Ordering::Acquire) >= processes
            && self.delivered.load(Ordering::Acquire) >= self.sent.load(Ordering::Acquire)
    }
}
/// Longest a paced sender catches up on broadcasts that came due while its host was not
/// visited (a thread waiting for a core); behind by more, it drops the backlog.
const CATCH_UP_MAX: Duration = Duration::from_millis(5);
/// Latencies above this are clamped into the histogram's top bucket.
const LATENCY_NS_MAX: u64 = 60_000_000_000;

pub struct Broadcast {
    me: u32,
    destinations: Vec<u32>,
    payload: Vec<u8>,
    /// Stop generating at this shared-clock time.
    send_until: Instant,
    /// Open-loop pacing: the mean gap between broadcasts, or zero to send whenever there is room.
    send_gap: Duration,
    next_send_at: Instant,
    /// The last refill: a broadcast due by then that is still unsent waits for room.
    refilled_at: Instant,
    /// Draws the exponential gaps of paced sending.
    rng: SplitMix,
    reliable: bool,
    /// See [`Schedule::window`].
    window: Option<usize>,
    /// Own broadcasts sent and not yet delivered back (or failed).
    own_outstanding: usize,
    /// Broadcasts in the send buffer, not yet timestamped, whose S lines are owed.
    unreleased_recorded: std::collections::HashSet<u64>,
    /// Broadcasts sent whose release the endpoint has not reported yet (recorded or
    /// not). While none are, there is nothing to ask it for: asking touched a few cold lines
    /// of the endpoint on every visit of the host (~3% of a saturated reliable run).
    unreleased: usize,
    /// Record events only for messages sent before this time (bounds checker memory).
    record_until: Instant,
    pub events: Vec<Event>,
    pub latency_ns: Histogram<u64>,
    pub delivered: u64,
    /// Deliveries before sending stopped (the throughput window).
    pub delivered_in_window: u64,
    pub send_failures: u64,
    /// Reliable scatterings aborted because a receiver failed (paper 5.2, Recall).
    pub aborted: u64,
    /// Deliveries and sent messages not yet added to `progress`.
    unreported: u64,
    unreported_sent: u64,
    /// The endpoint's `packets_acked` as far as `progress` has it.
    acked_reported: u64,
    /// Everything sent has been reported, and `senders_done` counts this process.
    sending_reported: bool,
    progress: Arc<Progress>,
    /// When a failure was injected (shared-clock ns, 0 before), set by whoever injects it.
    failure_at_ns: Option<Arc<AtomicU64>>,
    /// The first delivery of a message stamped at or after the failure: the commit barrier
    /// had passed the failure (the end of the stall the paper's Fig. 10 measures).
    pub delivered_past_failure_at: Option<Instant>,
    /// Where events go at the end of every visit instead of piling up in `events` (a soak).
    stream: Option<Arc<ProcessStream>>,
}

/// When a broadcast workload sends and records.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub send_from: Instant,
    pub send_until: Instant,
    /// Mean gap between broadcasts (open loop, Poisson), or zero to send whenever there is room.
    pub send_gap: Duration,
    /// Record events for the checker only for messages sent before this.
    pub record_until: Instant,
    /// Seeds the paced gaps; each process draws its own stream from it.
    pub seed: u64,
    /// Send with the reliable service.
    pub reliable: bool,
    /// Closed loop: at most this many of the process's own broadcasts may be undelivered back
    /// to itself (it is among the receivers), as the baselines' workload keeps them. `None`
    /// sends whenever the send buffer has room, and then every queue of the fabric fills.
    pub window: Option<usize>,
}

impl Broadcast {
    pub fn new(
        me: u32,
        process_count: u32,
        message_bytes: usize,
        schedule: Schedule,
        progress: Arc<Progress>,
    ) -> Broadcast {
        let Schedule {
            send_from,
            send_until,
            send_gap,
            record_until,
            seed,
            reliable,
            window,
        } = schedule;
        let mut rng = SplitMix::new(seed ^ (me as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let first_gap = rng.exponential(send_gap);
        assert!(message_bytes >= 8, "messages carry an 8-byte send time");
        Broadcast {
            me,
            destinations: (0..process_count).collect(),
            payload: vec![0; message_bytes],
            send_until,
            send_gap,
            // Poisson sending: a fixed gap would pin every send to the same phase of the beacon
            // interval (a 10 ms gap is a multiple of 50 us) and measure that phase, not the
            // average; random gaps also keep processes from sending in step.
            next_send_at: send_from + first_gap,
            refilled_at: Instant::ZERO,
            rng,
            reliable,
            window,
            own_outstanding: 0,
            unreleased_recorded: Default::default(),
            unreleased: 0,
            record_until,
            events: Vec::new(),
            latency_ns: Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid histogram bounds"),
            delivered: 0,
            delivered_in_window: 0,
            send_failures: 0,
            aborted: 0,
            unreported: 0,
            unreported_sent: 0,
            acked_reported: 0,
            sending_reported: false,
            progress,
            failure_at_ns: None,
            delivered_past_failure_at: None,
            stream: None,
        }
    }

    /// Hands events (and counters) to `stream` as they come, instead of keeping them.
    pub fn stream_to(&mut self, stream: Arc<ProcessStream>) {
        self.stream = Some(stream);
    }

    /// Watches for the first delivery stamped at or after the time stored in `failure_at_ns`
    /// once it is set (non-zero).
    pub fn watch_failure(&mut self, failure_at_ns: Arc<AtomicU64>) {
        self.failure_at_ns = Some(failure_at_ns);
    }

    pub fn process(&self) -> u32 {
        self.me
    }

    /// Queues broadcasts while the send buffer has room for a whole one: one per call when
    /// saturating, every one due when paced.
    pub fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        self.refilled_at = now;
        while self.send_one(now, endpoint) && self.send_gap > Duration::ZERO {}
    }

    /// Sends the next broadcast if it is due and fits; whether it did.
    fn send_one(&mut self, now: Instant, endpoint: &mut Endpoint) -> bool {
        if now >= self.send_until {
            if !self.sending_reported {
                self.sending_reported = true;
                self.report_progress();
                self.progress.senders_done.fetch_add(1, Ordering::Release);
            }
            return false;
        }
        if now < self.next_send_at || self.window.is_some_and(|w| self.own_outstanding >= w) {
            return false;
        }
        let len = self.payload.len();
        let (need, room) = if self.reliable {
            (
                endpoint.reliable_packets_for(len),
                endpoint.reliable_room_packets(),
            )
        } else {
            (endpoint.packets_for(len), endpoint.send_room_packets())
        };
        let need = self.destinations.len() * need;
        if room < need {
            return false;
        }
        self.payload[..8].copy_from_slice(&now.as_nanos().to_le_bytes());
        let scatter: Vec<(u32, &[u8])> = self
            .destinations
            .iter()
            .map(|&d| (d, &self.payload[..]))
            .collect();
        let record = now < self.record_until;
        let messages = scatter.len() as u64;
        let msg_id = if self.reliable {
            endpoint.send_reliable(now, &scatter)
        } else {
            endpoint.send_unreliable(now, &scatter)
        }
        .expect("room was checked, destinations exist");
        if record {
            // The timestamp comes when the scattering leaves the send buffer.
            self.unreleased_recorded.insert(msg_id);
        }
        self.unreleased += 1;
        self.on_released(endpoint);
        if self.destinations.contains(&self.me) {
            self.own_outstanding += 1;
        }
        self.unreported_sent += messages;
        if self.unreported_sent >= PROGRESS_BATCH {
            self.report_progress();
        }
        if self.send_gap > Duration::ZERO {
            // Keep the schedule (open loop): broadcasts that came due between two visits are
            // sent at the next, or a gap shorter than the host's visits would cap the rate at
            // one broadcast per visit. After a stall longer than CATCH_UP_MAX, resume from now
            // rather than burst.
            let gap = self.rng.exponential(self.send_gap);
            self.next_send_at += gap;
            if now.saturating_since(self.next_send_at) > CATCH_UP_MAX {
                self.next_send_at = now;
            }
        }
        true
    }

    /// When the next paced broadcast is due, for the runtime to wake the host then; `None`
    /// when saturating, after sending, and while one already due waits for room (freed room
    /// comes with a visit of its own).
    pub fn next_send_at(&self) -> Option<Instant> {
        let paced = self.send_gap > Duration::ZERO && self.next_send_at < self.send_until;
        (paced && self.next_send_at > self.refilled_at).then_some(self.next_send_at)
    }

    fn record_send(&mut self, ts: Instant, msg_id: u64) {
        for &dst in &self.destinations {
            self.events.push(Event::Send {
                ts_ns: ts.as_nanos(),
                dst,
                msg_id,
            });
        }
    }

    /// Logs scatterings that got their timestamps (program order: a scattering is sent, as far
    /// as the log is concerned, when it leaves the send buffer).
    pub fn on_released(&mut self, endpoint: &mut Endpoint) {
        while self.unreleased > 0 {
            let released = if self.reliable {
                endpoint.poll_released()
            } else {
                endpoint.poll_released_unreliable()
            };
            let Some((msg_id, ts)) = released else {
                break;
            };
            // A scattering aborted while it waited is never released: then this stays above
            // zero, and every visit asks, as before.
            self.unreleased = self.unreleased.saturating_sub(1);
            if self.unreleased_recorded.remove(&msg_id) {
                self.record_send(ts, msg_id);
            }
        }
    }

    pub fn is_reliable(&self) -> bool {
        self.reliable
    }

    pub fn on_deliver(&mut self, now: Instant, ts: Instant, src: u32, msg_id: u64, payload: &[u8]) {
        let sent_ns = payload
            .get(..8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let latency = now.as_nanos().saturating_sub(sent_ns).clamp(1, LATENCY_NS_MAX);
        self.latency_ns.record(latency).expect("clamped into bounds");
        if sent_ns < self.record_until.as_nanos() {
            self.events.push(Event::Deliver {
                ts_ns: ts.as_nanos(),
                src,
                msg_id,
            });
        }
        if self.delivered_past_failure_at.is_none()
            && let Some(at) = &self.failure_at_ns
        {
            let at = at.load(Ordering::Relaxed);
            if at != 0 && ts.as_nanos() >= at {
                self.delivered_past_failure_at = Some(now);
            }
        }
        if src == self.me {
            self.own_outstanding = self.own_outstanding.saturating_sub(1);
        }
        self.delivered += 1;
        if now < self.send_until {
            self.delivered_in_window += 1;
        }
        self.unreported += 1;
        // The first one at once: the driver times its drain by how long a delivery took.
        if self.unreported >= PROGRESS_BATCH || now >= self.send_until || self.delivered == 1 {
            self.report_progress();
        }
    }

    /// The reliable sender has acknowledged `packets_acked` packets in all.
    pub fn on_acked(&mut self, now: Instant, packets_acked: u64) {
        let unreported = packets_acked.saturating_sub(self.acked_reported);
        if unreported >= PROGRESS_BATCH || (unreported > 0 && now >= self.send_until) {
            self.progress.acked.fetch_add(unreported, Ordering::Release);
            self.acked_reported = packets_acked;
        }
    }

    /// Adds what was sent and delivered since the last report to the shared counters.
    fn report_progress(&mut self) {
        if self.unreported_sent > 0 {
            self.progress
                .sent
                .fetch_add(std::mem::take(&mut self.unreported_sent), Ordering::Release);
        }
        if self.unreported > 0 {
            self.progress
                .delivered
                .fetch_add(std::mem::take(&mut self.unreported), Ordering::Release);
        }
    }

    pub fn on_failure(&mut self, f: SendFailure) {
        // Our own copy will not come back: its slot of the window is free.
        if f.dst == self.me {
            self.own_outstanding = self.own_outstanding.saturating_sub(1);
        }
        match f.reason {
            FailureReason::ReceiverFailed { .. } => self.aborted += 1,
            _ => self.send_failures += 1,
        }
        if f.ts == Instant::ZERO {
            // Aborted in the send buffer: it will never be released, and that is reported.
            self.unreleased_recorded.remove(&f.msg_id);
        }
    }

    /// Recorded reliable scatterings that were accepted but neither released (timestamped)
    /// nor reported failed. The log has no S line for them, so the checker cannot see them
    /// lost: at the end of a run, every one is a loss the caller must count.
    pub fn never_released(&self) -> u64 {
        if !self.reliable {
            // Best effort promises nothing about a scattering it has not sent yet.
            return 0;
        }
        self.unreleased_recorded.len() as u64
    }

    /// Paper Table 1's process-failure callback: broadcasts leave out a failed process from now
    /// on (the endpoint refuses sends that name it).
    pub fn on_process_failure(&mut self, process: u32) {
        self.destinations.retain(|&d| d != process);
    }
}

/// The broadcast runs inside its endpoint's worker.
impl Application for Broadcast {
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        // Sends logged before the deliveries that follow them in program order.
        self.on_released(endpoint);
        if self.is_reliable() {
            self.on_acked(now, endpoint.reliable_sender().counters().packets_acked);
            while endpoint
                .poll_deliver_reliable_with(|ts, src, id, payload| self.on_deliver(now, ts, src, id, payload))
                .is_some()
            {}
        } else {
            while endpoint
                .poll_deliver_with(|ts, src, id, payload| self.on_deliver(now, ts, src, id, payload))
                .is_some()
            {}
        }
        if let Some(stream) = &self.stream {
            stream.publish(now, &mut self.events, endpoint.counters(), self.send_failures);
        }
    }

    fn on_send_failure(&mut self, failure: SendFailure) {
        self.on_failure(failure);
    }

    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        Broadcast::refill(self, now, endpoint);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_send_at()
    }

    fn on_timeout(&mut self, now: Instant, endpoint: &mut Endpoint) {
        Broadcast::refill(self, now, endpoint);
    }

    fn on_process_failure(&mut self, process: u32, _ts: Instant) {
        Broadcast::on_process_failure(self, process);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_proto::endpoint::EndpointConfig;

    fn t(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    /// A reliable scattering that is accepted has no S line until it leaves the send buffer;
    /// the workload counts it as never released until then, so that a run ending first is
    /// reported lost instead of passing the checker unseen.
    #[test]
    fn scatterings_in_the_send_buffer_count_as_never_released() {
        let mut config = EndpointConfig::new(0, 2, 0);
        // Room for one broadcast in flight: the rest wait in the send buffer, unreleased.
        config.reliable.recv_window_packets = 1;
        let mut ep = Endpoint::new(config, t(0));
        let schedule = Schedule {
            send_from: t(0),
            send_until: t(1_000_000),
            send_gap: Duration::ZERO,
            record_until: t(1_000_000),
            seed: 1,
            reliable: true,
            window: None,
        };
        let mut w = Broadcast::new(0, 2, 16, schedule, Arc::new(Progress::default()));
        for _ in 0..8 {
            w.refill(t(10), &mut ep);
        }
        let accepted = w.never_released();
        assert!(accepted > 0);
        let sends = |w: &Broadcast| {
            w.events
                .iter()
                .filter(|e| matches!(e, Event::Send { .. }))
                .count()
        };
        assert_eq!(
            sends(&w),
            2,
            "only the first broadcast has a timestamp and S lines"
        );
        assert_eq!(accepted, 7);
        // Its receivers' ACKs never come: nothing else is released, and it stays counted.
        let mut buf = [0u8; 2048];
        while ep.poll_transmit(t(20), &mut buf).is_some() {}
        w.on_released(&mut ep);
        assert_eq!((w.never_released(), sends(&w)), (7, 2));
    }

    /// Paced sending keeps its rate when the host is visited less often than the gap: the
    /// broadcasts that came due in between all go at the next visit (one per visit sent a
    /// fifth of these).
    #[test]
    fn a_paced_sender_visited_every_millisecond_sends_every_broadcast_due() {
        let mut ep = Endpoint::new(EndpointConfig::new(0, 2, 0), t(0));
        let schedule = Schedule {
            send_from: t(0),
            send_until: t(100_000_000),
            send_gap: Duration::from_micros(200),
            record_until: t(0),
            seed: 1,
            reliable: false,
            window: None,
        };
        let mut w = Broadcast::new(0, 2, 16, schedule, Arc::new(Progress::default()));
        let mut buf = [0u8; 2048];
        for ms in 0..100 {
            let now = t(ms * 1_000_000);
            w.refill(now, &mut ep);
            while ep.poll_transmit(now, &mut buf).is_some() {}
            w.on_released(&mut ep);
            let next = w.next_send_at().expect("paced, with room");
            assert!(next > now, "the next broadcast is in the future");
        }
        let broadcasts = ep.counters().scatterings_sent;
        assert!(
            (450..=550).contains(&broadcasts),
            "{broadcasts} broadcasts in 100 ms at one per 200 us"
        );
    }
}
