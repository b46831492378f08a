//! The nodes of a cosy run: the switch program, and hosts that submit Poisson all-to-all
//! messages to their cosy host library and record every completion (the run's message log).

use onepipe_check::cosy::{Flag as LogFlag, MessageRecord};
use onepipe_cosy::{CosyHost, CosySwitch, Flag};
use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::{Either, Hints, Node, PortId, Route};
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A switch or a host of a cosy run.
pub type CosyNode = Either<CosySwitch, WorkloadHost>;

/// Poisson arrivals of fixed-size messages to uniformly chosen other processes.
#[derive(Clone, Debug)]
pub struct Workload {
    pub message_bytes: usize,
    /// Mean gap between two submissions of one host.
    pub mean_gap: Duration,
    /// Submissions from `start` (inclusive) to `end` (exclusive).
    pub start: Instant,
    pub end: Instant,
    pub processes: u32,
}

impl Workload {
    /// The mean gap that offers `load` of a link of `link_bits_per_s` with `message_bytes`
    /// messages (paper 2.1: load is the traffic over the access links' bandwidth).
    pub fn mean_gap_for(load: f64, message_bytes: usize, link_bits_per_s: u64) -> Duration {
        let message_ns = message_bytes as f64 * 8.0 * 1e9 / link_bits_per_s as f64;
        Duration::from_nanos((message_ns / load.max(1e-9)) as u64)
    }
}

/// Progress the run shows while it runs (inproc and udp run on other threads).
#[derive(Debug, Default)]
pub struct Progress {
    pub submitted: AtomicU64,
    pub flagged: AtomicU64,
}

/// A host: the cosy library, the workload that feeds it, and the log of what became of each
/// message.
pub struct WorkloadHost {
    pub host: CosyHost,
    workload: Workload,
    rng: SplitMix,
    next_submit: Instant,
    /// The run's message log, in completion order.
    pub records: Vec<MessageRecord>,
    /// Records kept at most (the rest are counted, not kept).
    records_max: usize,
    pub records_dropped: u64,
    /// Messages delivered here whose length was not the workload's.
    pub wrong_deliveries: u64,
    /// Round trips from a submission to its rsvp (request out, rsvp back), in ns: what a run
    /// calibrates hRTT from. Kept up to `records_max`.
    pub rsvp_rtts_ns: Vec<u64>,
    /// The host stops for good at this time on its own clock (fail-stop): it takes no frame,
    /// sends none and runs no timer. The same on every runtime.
    crash_at: Option<Instant>,
    crashed: bool,
    progress: Arc<Progress>,
}

impl WorkloadHost {
    pub fn new(
        host: CosyHost,
        workload: Workload,
        seed: u64,
        records_max: usize,
        progress: Arc<Progress>,
    ) -> Self {
        let mut rng = SplitMix::new(seed);
        let next_submit = workload.start + rng.exponential(workload.mean_gap);
        WorkloadHost {
            host,
            workload,
            rng,
            next_submit,
            records: Vec::new(),
            records_max,
            records_dropped: 0,
            wrong_deliveries: 0,
            rsvp_rtts_ns: Vec::new(),
            crash_at: None,
            crashed: false,
            progress,
        }
    }

    /// Crashes the host at `at`.
    pub fn crashing_at(mut self, at: Instant) -> Self {
        self.crash_at = Some(at);
        self
    }

    fn down(&self, now: Instant) -> bool {
        self.crash_at.is_some_and(|t| now >= t)
    }

    fn me(&self) -> u32 {
        self.host.config().me
    }

    /// Submits what is due by `now`.
    fn submit_due(&mut self, now: Instant) {
        while self.next_submit <= now && self.next_submit < self.workload.end {
            let others = self.workload.processes - 1;
            let pick = (self.rng.next_u64() % others as u64) as u32;
            let dst = if pick >= self.me() { pick + 1 } else { pick };
            let body = vec![0u8; self.workload.message_bytes];
            // Submitted at its arrival time, even if the host is late to see it: a host that
            // falls behind shows in the flags' times, not hidden by its own lateness.
            if self.host.submit(self.next_submit, dst, body).is_ok() {
                self.progress.submitted.fetch_add(1, Ordering::Relaxed);
            }
            self.next_submit += self
                .rng
                .exponential(self.workload.mean_gap)
                .max(Duration::from_nanos(1));
        }
    }

    /// Takes the host's completions into the log and its deliveries off its queue.
    pub fn collect(&mut self) {
        while let Some(c) = self.host.poll_completion() {
            self.progress.flagged.fetch_add(1, Ordering::Relaxed);
            if let Some(rsvp_at) = c.rsvp_at
                && self.rsvp_rtts_ns.len() < self.records_max
            {
                self.rsvp_rtts_ns
                    .push(rsvp_at.as_nanos() - c.submitted_at.as_nanos());
            }
            if self.records.len() >= self.records_max {
                self.records_dropped += 1;
                continue;
            }
            self.records.push(MessageRecord {
                msg_id: c.msg as u64,
                src: self.me(),
                dst: c.dst,
                bytes: c.bytes as u64,
                submit_ns: c.submitted_at.as_nanos(),
                flag: match c.flag {
                    Flag::Complete => LogFlag::Complete,
                    Flag::Reject => LogFlag::Reject,
                    Flag::Failure => LogFlag::Failure,
                },
                flag_ns: c.flagged_at.as_nanos(),
            });
        }
        while let Some(d) = self.host.poll_delivery() {
            if d.message.len() != self.workload.message_bytes {
                self.wrong_deliveries += 1;
            }
        }
    }
}

impl Node for WorkloadHost {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        match self.down(now) {
            true => Route::Drop,
            false => self.host.classify(now, port, frame),
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        if self.down(now) {
            return;
        }
        self.host.handle_frame(now, port, frame, route);
        self.collect();
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if self.down(now) {
            return None;
        }
        self.submit_due(now);
        self.host.poll_transmit(now, port, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let submit = (self.next_submit < self.workload.end).then_some(self.next_submit);
        if self.crashed {
            return None;
        }
        // A timer at the crash, so that the host sees it and goes quiet.
        [self.host.poll_timeout(), submit, self.crash_at]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.down(now) {
            self.crashed = true;
            return;
        }
        self.submit_due(now);
        self.host.handle_timeout(now);
        self.collect();
    }
}

impl Hints for WorkloadHost {
    fn wants_transmit(&self) -> bool {
        self.host.wants_transmit()
    }

    fn priority(&self, frame: &[u8]) -> u8 {
        self.host.priority(frame)
    }
}
