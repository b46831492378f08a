//! What a cosy run reports: the bound, what became of the messages, slowdowns, and the three
//! checks (every flag within delta; the links' invariants; the switch queues within Lemma 3.3),
//! each judged by `onepipe_check::cosy` from the run's log and counters.

use super::nodes::{CosyNode, WorkloadHost};
use onepipe_check::cosy::{
    BoundReport, Flag, LinkReport, LinkUse, MessageRecord, QueueReport, check_bound, check_link_capacity,
    check_queue_bound,
};
use onepipe_cosy::{HostCounters, SwitchCounters, Timing, theory};
use onepipe_fabric::Either;
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Slowdown {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Checks {
    /// Every completion, reject and failure within delta of its submission.
    pub bound_held: bool,
    /// No link with more than K reservations at once, no data outside a reservation, no
    /// window above B.
    pub link_capacity: bool,
    /// No switch queue above Lemma 3.3's bound (`null` where the runtime cannot see queues).
    pub queue_bound: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CosyReport {
    pub runtime: String,
    pub hosts: usize,
    pub k: u8,
    pub load: f64,
    pub message_bytes: usize,
    pub duration_s: f64,
    pub link_gbps: f64,
    pub hrtt_us: f64,
    /// The bound every message got at submission.
    pub delta_us: f64,
    /// Theorem 3.5's delta_cosy = 2 hRTT + s K / B + d for comparison (no hold, control
    /// queueing, headroom or processing).
    pub theorem_delta_cosy_us: f64,
    pub submitted: u64,
    pub completed: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Rejects the sender posted by itself at delta (nothing came back in time).
    pub timed_out: u64,
    /// Messages of hosts that crashed before flagging them (no sender left to flag them).
    pub unflagged: u64,
    /// Messages of live hosts not flagged when the run ended (none if every bound passed).
    pub in_flight: u64,
    pub max_completion_over_delta: f64,
    /// Completion time over the ideal hRTT + s/B, over completed messages.
    pub slowdown: Slowdown,
    /// From a submission to its rsvp (the request's way and the receiver's hold and rsvp), in
    /// us, over messages that got one.
    pub rsvp_rtt_us: Slowdown,
    pub checks: Checks,
    pub bound: BoundReport,
    pub links: LinkReport,
    pub queue: Option<QueueReport>,
    pub host_counters: HostTotals,
    pub switch_counters: SwitchTotals,
    #[serde(skip)]
    pub records: Vec<MessageRecord>,
}

/// Summed over hosts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostTotals {
    pub rejected_receiver_busy: u64,
    pub rejected_blocked: u64,
    pub rejected_sender_busy: u64,
    pub rejected_too_late: u64,
    pub rejected_unbounded: u64,
    pub data_sent: u64,
    pub data_received: u64,
    pub delivered: u64,
    pub rsvps_sent: u64,
    pub failures_sent: u64,
    pub malformed: u64,
    pub stray: u64,
    pub wrong_deliveries: u64,
    pub records_dropped: u64,
}

/// Summed over switches.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct SwitchTotals {
    pub reserved: u64,
    pub blocked: u64,
    pub released: u64,
    pub expired: u64,
    pub malformed: u64,
    pub spoofed: u64,
    pub no_route: u64,
    pub wrong_hop: u64,
    pub unreserved: u64,
    /// Reservations still held when the run ended.
    pub still_reserved: u64,
}

/// What a run hands to [`build`] besides its nodes.
pub struct RunFacts {
    pub runtime: String,
    pub load: f64,
    pub duration: Duration,
    pub timing: Timing,
    pub message_bytes: usize,
    /// The deepest switch queue of data seen, if the runtime sees queues.
    pub queue_peak_bytes: Option<u64>,
    /// Hosts that crashed during the run.
    pub crashed: Vec<u32>,
}

/// Judges a run from its stopped nodes.
pub fn build(facts: RunFacts, nodes: &[CosyNode]) -> CosyReport {
    let t = &facts.timing;
    let delta = t.delta(facts.message_bytes);
    let mut records = Vec::new();
    let (mut hosts, mut switches) = (HostTotals::default(), SwitchTotals::default());
    let (mut submitted, mut unflagged, mut in_flight, mut timed_out, mut host_count) = (0, 0, 0, 0, 0);
    let mut links = Vec::new();
    let mut rtts_ns: Vec<f64> = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        match node {
            Either::Left(s) => {
                add_switch(&mut switches, s.counters(), s.vlinks().reserved_total() as u64);
                links.extend(s.port_uses().into_iter().map(|u| LinkUse {
                    link: format!("switch {index} port {}", u.port),
                    peak_reserved: u.peak_reserved as u32,
                    unreserved_frames: u.unreserved_frames,
                    peak_bytes_per_window_over_capacity: u.peak_rate_over_capacity,
                }));
            }
            Either::Right(h) => {
                host_count += 1;
                let c = h.host.counters();
                add_host(&mut hosts, &c, h);
                submitted += c.submitted;
                timed_out += c.timed_out;
                if facts.crashed.contains(&h.host.config().me) {
                    unflagged += h.host.in_flight() as u64;
                } else {
                    in_flight += h.host.in_flight() as u64;
                }
                records.extend_from_slice(&h.records);
                rtts_ns.extend(h.rsvp_rtts_ns.iter().map(|&ns| ns as f64 / 1e3));
            }
        }
    }
    records.sort_by_key(|r| (r.submit_ns, r.src, r.msg_id));
    let bound = check_bound(&records, delta.as_nanos());
    let link_report = check_link_capacity(&links, t.k as u32);
    let queue = facts
        .queue_peak_bytes
        .map(|peak| check_queue_bound(peak, t.data_queue_bytes_bound()));
    let ideal = t.hrtt + theory::transmission_time(facts.message_bytes as u64, t.link_bits_per_s);
    let delta_cosy = theory::delta_cosy(
        t.hrtt,
        facts.message_bytes as u64,
        t.k as u32,
        t.link_bits_per_s,
        t.data_queueing(),
    );
    CosyReport {
        runtime: facts.runtime,
        hosts: host_count,
        k: t.k,
        load: facts.load,
        message_bytes: facts.message_bytes,
        duration_s: facts.duration.as_nanos() as f64 / 1e9,
        link_gbps: t.link_bits_per_s as f64 / 1e9,
        hrtt_us: us(t.hrtt),
        delta_us: us(delta),
        theorem_delta_cosy_us: us(delta_cosy),
        submitted,
        completed: bound.completed,
        rejected: bound.rejected,
        failed: bound.failed,
        timed_out,
        unflagged,
        in_flight,
        max_completion_over_delta: bound.max_completion_over_delta,
        slowdown: slowdown(&records, ideal),
        rsvp_rtt_us: percentiles(rtts_ns),
        checks: Checks {
            bound_held: bound.held,
            link_capacity: link_report.held,
            queue_bound: queue.as_ref().map(|q| q.held),
        },
        bound,
        links: link_report,
        queue,
        host_counters: hosts,
        switch_counters: switches,
        records,
    }
}

fn us(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e3
}

fn slowdown(records: &[MessageRecord], ideal: Duration) -> Slowdown {
    let s: Vec<f64> = records
        .iter()
        .filter(|r| r.flag == Flag::Complete)
        .map(|r| (r.flag_ns - r.submit_ns) as f64 / ideal.as_nanos().max(1) as f64)
        .collect();
    percentiles(s)
}

fn percentiles(mut s: Vec<f64>) -> Slowdown {
    if s.is_empty() {
        return Slowdown::default();
    }
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    Slowdown {
        p50: at(0.5),
        p99: at(0.99),
        max: s[s.len() - 1],
    }
}

fn add_host(t: &mut HostTotals, c: &HostCounters, h: &WorkloadHost) {
    t.rejected_receiver_busy += c.rejected_receiver_busy;
    t.rejected_blocked += c.rejected_blocked;
    t.rejected_sender_busy += c.rejected_sender_busy;
    t.rejected_too_late += c.rejected_too_late;
    t.rejected_unbounded += c.rejected_unbounded;
    t.data_sent += c.data_sent;
    t.data_received += c.data_received;
    t.delivered += c.delivered;
    t.rsvps_sent += c.rsvps_sent;
    t.failures_sent += c.failures_sent;
    t.malformed += c.malformed;
    t.stray += c.stray;
    t.wrong_deliveries += h.wrong_deliveries;
    t.records_dropped += h.records_dropped;
}

fn add_switch(t: &mut SwitchTotals, c: &SwitchCounters, still_reserved: u64) {
    t.reserved += c.reserved;
    t.blocked += c.blocked;
    t.released += c.released;
    t.expired += c.expired;
    t.malformed += c.malformed;
    t.spoofed += c.spoofed;
    t.no_route += c.no_route;
    t.wrong_hop += c.wrong_hop;
    t.unreserved += c.unreserved;
    t.still_reserved += still_reserved;
}
