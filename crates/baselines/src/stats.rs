//! What a baseline host measures: deliveries, latency on the shared clock, counters of what it
//! dropped and why, and (optionally) the event log the checker reads.

use hdrhistogram::Histogram;
use onepipe_check::Event;
use std::collections::VecDeque;

/// Latencies above this are clamped into the histogram's top bucket.
pub const LATENCY_NS_MAX: u64 = 60_000_000_000;

pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid histogram bounds")
}

#[derive(Clone, Debug)]
pub struct HostStats {
    pub process: u32,
    /// Broadcasts this process sent (offers its protocol refused are `offers_refused`).
    pub broadcasts: u64,
    /// Messages delivered (every process's, this one's included).
    pub delivered: u64,
    /// Deliveries at instants within `[measure_from, send_until]` (the throughput window).
    pub delivered_in_window: u64,
    /// Delivery time minus the broadcast's send time, both on the runtime's shared clock.
    pub latency_ns: Histogram<u64>,
    /// Send and deliver events of messages sent before `record_until`, in program order.
    pub events: Vec<Event>,
    /// Recorded broadcasts of this process whose order stamp it has not learned yet (sequencer
    /// kinds learn it when their own copy comes back); see [`crate::collect_logs`].
    pub unconfirmed: VecDeque<u64>,
    /// Most own broadcasts undelivered back here at once (never above the window).
    pub outstanding_peak: usize,
    /// Most messages waiting in the reorder buffer (or Lamport's pending set) at once.
    pub reorder_peak: usize,
    pub frames_sent: u64,
    /// Frames that are not baseline frames (see [`crate::frame::FrameError`]).
    pub malformed: u64,
    /// Well-formed frames addressed elsewhere, or of a kind this baseline does not use here.
    pub misdirected: u64,
    /// Copies of frames already seen (a duplicating link), ignored.
    pub duplicates: u64,
    /// Messages dropped because the reorder buffer (or Lamport's pending set) had no room for
    /// them.
    pub reorder_overflow: u64,
    /// Own broadcasts a full output queue refused: backpressure (the workload offers again),
    /// not a drop.
    pub offers_refused: u64,
    /// Host sequencer only: requests dropped because its output was full.
    pub sequencer_overflow: u64,
    /// Host sequencer only: messages it numbered.
    pub stamped: u64,
    pub requests_sent: u64,
    pub tokens_passed: u64,
    /// Lamport timestamp notices sent (frames, one per destination).
    pub exchanges_sent: u64,
}

impl HostStats {
    pub fn new(process: u32) -> HostStats {
        HostStats {
            process,
            broadcasts: 0,
            delivered: 0,
            delivered_in_window: 0,
            latency_ns: latency_histogram(),
            events: Vec::new(),
            unconfirmed: VecDeque::new(),
            outstanding_peak: 0,
            reorder_peak: 0,
            frames_sent: 0,
            malformed: 0,
            misdirected: 0,
            duplicates: 0,
            reorder_overflow: 0,
            offers_refused: 0,
            sequencer_overflow: 0,
            stamped: 0,
            requests_sent: 0,
            tokens_passed: 0,
            exchanges_sent: 0,
        }
    }
}
