//! What `onepipe demo` reports: the ordered phase's counters and every check on its event
//! logs, next to the unordered baseline, as one [`Summary`].

use crate::demo::{DemoConfig, PhaseResult};
use onepipe_check::{Checks, Report, Violation, check_all};
use serde::Serialize;
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

#[derive(Serialize)]
pub struct Summary {
    pub topology: String,
    pub processes: usize,
    pub seconds: f64,
    pub message_bytes: usize,
    pub delivered: u64,
    pub messages_sent: u64,
    pub throughput_msgs_per_s: f64,
    pub throughput_per_process_msgs_per_s: f64,
    pub unordered_throughput_msgs_per_s: Option<f64>,
    pub ordered_to_unordered_throughput_ratio: Option<f64>,
    pub latency_us: Percentiles,
    pub unordered_latency_us: Option<Percentiles>,
    pub beacon_interval_us: f64,
    /// How far ahead hosts promised their barriers; absent: no promises.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promise_lead_us: Option<f64>,
    /// Beacons sent per second by hosts and switches together (the cost of the barrier), over
    /// the whole phase: the sending window and the drain after it (see `run_seconds`).
    pub beacons_per_s: f64,
    /// Of those, hosts' promises (`--promise-lead-us`).
    pub promises_per_s: f64,
    /// How long the ordered phase's fabric ran, drain included.
    pub run_seconds: f64,
    /// Beacons among all frames put on links (data frames are counted once per hop), over the
    /// whole phase.
    pub beacon_share_of_frames: f64,
    pub skew_us: f64,
    pub send_failures: u64,
    pub late_drops: u64,
    pub incomplete_drops: u64,
    pub reorder_full_drops: u64,
    /// Frames switches and endpoints refused for barriers or timestamps implausibly far ahead
    /// of their clocks (docs/ordering.md, "Implausible time"); fragments no sender makes.
    pub implausible_refused: u64,
    pub oversized_drops: u64,
    pub links_removed: u64,
    pub malformed: u64,
    /// Packets switches dropped as sent in another process's name (docs/wire.md, "Sources").
    pub spoofed_sources: u64,
    pub reorder_bytes_peak: usize,
    pub reorder_messages_peak: usize,
    pub events_checked: usize,
    pub service: &'static str,
    pub retransmissions: u64,
    /// Reliable runs: why packets went again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmit_causes: Option<RetransmitCauses>,
    pub link_drops: u64,
    pub link_duplicates: u64,
    pub link_reordered: u64,
    pub ecn_marked: u64,
    /// Over the udp runtime: datagrams and frames the sockets carried and lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<onepipe_runtime::udp::local::UdpTotals>,
    pub checks: AllChecks,
    /// Runs with --fail: the processes the controller declared failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_processes: Option<Vec<u32>>,
    /// Runs with --fail: from the first failure to the first report reaching the controller,
    /// and to the controller's first and last Resume (a later Resume than the failure's own
    /// answers a later event, such as a link declared dead on a stalled worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detection_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_resume_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_us: Option<f64>,
    /// Runs with --fail: the barrier stall correct processes saw, from the failure to their
    /// first delivery of a message stamped after it (mean over them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_us: Option<f64>,
    /// Runs with --fail: reliable scatterings aborted because a receiver failed (Recall).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<u64>,
    /// Reliable runs: recorded scatterings accepted but never released from the send buffer
    /// nor reported failed (lost without a trace in the logs; counted by `checks.no_loss`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never_released: Option<u64>,
}

#[derive(Serialize)]
pub struct RetransmitCauses {
    /// Retransmission timeouts, one per connection and expiry (each resends every packet of
    /// it that was due).
    pub timeouts: u64,
    /// Packets resent because later ones on their connection were acknowledged first.
    pub fast_retransmits: u64,
    /// Timeouts an ACK of the first copy showed were spurious (the packet was late, not lost).
    pub spurious_timeouts: u64,
}

#[derive(Serialize)]
pub struct AllChecks {
    #[serde(flatten)]
    pub order: Checks,
    /// Reliable runs where no process failed: every message sent was delivered exactly once
    /// by its destination.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_loss: Option<bool>,
    /// Runs with --fail: every scattering was delivered by all of its correct receivers or by
    /// none (paper 2.1, restricted failure atomicity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub atomicity: Option<bool>,
}

/// A demo run judged: its summary, the ordering checks, and the losses and partial
/// scatterings found.
pub struct DemoOutcome {
    pub summary: Summary,
    pub report: Report,
    /// Reliable runs where no process failed: messages not delivered exactly once.
    pub lost: Vec<String>,
    /// Runs with failures: scatterings delivered by some correct receivers only.
    pub partial: Vec<Violation>,
}

impl DemoOutcome {
    /// Every check passed.
    pub fn ok(&self) -> bool {
        self.report.ok() && self.lost.is_empty() && self.partial.is_empty()
    }
}

/// Judges the `ordered` phase of a demo run with `config` (and `skew_us`, the skew asked
/// for), next to the `unordered` baseline if it ran.
pub fn summarize(
    config: &DemoConfig,
    skew_us: f64,
    ordered: &PhaseResult,
    unordered: Option<&PhaseResult>,
) -> DemoOutcome {
    let report: Report = check_all(&ordered.logs);
    let failure = ordered.failure.as_ref();
    let failed: Vec<u32> = failure.map_or(Vec::new(), |f| f.failed_processes.iter().map(|p| p.0).collect());
    // With failed processes, messages to and from them and aborted scatterings are not
    // delivered on purpose: atomicity is the check then. With none (a link or a switch with
    // a way around it), nothing may be lost.
    let lost = if config.reliable && failed.is_empty() {
        ordered.lost()
    } else {
        Vec::new()
    };
    let partial = if failure.is_some() {
        onepipe_check::check_atomicity(&ordered.logs, &failed)
    } else {
        Vec::new()
    };
    let events_checked = ordered.logs.iter().map(|l| l.events.len()).sum();
    let percentiles = |r: &PhaseResult| Percentiles {
        p50: r.latency_us(0.5),
        p99: r.latency_us(0.99),
    };
    let beacons = ordered.endpoint.beacons_sent + ordered.switch.beacons_sent;
    let data_frames = ordered.endpoint.packets_sent + ordered.switch.forwarded;
    let summary = Summary {
        topology: config.topology.name.clone(),
        processes: ordered.processes,
        seconds: ordered.seconds,
        message_bytes: config.message_bytes,
        delivered: ordered.delivered,
        messages_sent: ordered.messages_sent,
        throughput_msgs_per_s: ordered.throughput_msgs_per_s(),
        throughput_per_process_msgs_per_s: ordered.throughput_msgs_per_s() / ordered.processes as f64,
        unordered_throughput_msgs_per_s: unordered.map(|u| u.throughput_msgs_per_s()),
        ordered_to_unordered_throughput_ratio: unordered
            .as_ref()
            .map(|u| ordered.throughput_msgs_per_s() / u.throughput_msgs_per_s().max(1.0)),
        latency_us: percentiles(ordered),
        unordered_latency_us: unordered.map(percentiles),
        beacon_interval_us: config.beacon_interval.as_micros_f64(),
        promise_lead_us: config.promise_lead.map(|d| d.as_micros_f64()),
        beacons_per_s: beacons as f64 / ordered.run_seconds,
        promises_per_s: ordered.endpoint.promises_sent as f64 / ordered.run_seconds,
        run_seconds: ordered.run_seconds,
        beacon_share_of_frames: beacons as f64 / (beacons + data_frames).max(1) as f64,
        skew_us,
        send_failures: ordered.send_failures,
        late_drops: ordered.endpoint.late,
        incomplete_drops: ordered.endpoint.incomplete,
        reorder_full_drops: ordered.endpoint.reorder_full,
        implausible_refused: ordered.endpoint.time_implausible + ordered.switch.barrier_implausible,
        oversized_drops: ordered.endpoint.oversized,
        links_removed: ordered.switch.links_removed,
        malformed: ordered.endpoint.malformed + ordered.switch.malformed,
        spoofed_sources: ordered.switch.spoofed_source,
        reorder_bytes_peak: ordered.reorder_bytes_peak,
        reorder_messages_peak: ordered.reorder_messages_peak,
        events_checked,
        service: if config.reliable {
            "reliable"
        } else {
            "best-effort"
        },
        retransmissions: ordered.retransmissions,
        retransmit_causes: config.reliable.then_some(RetransmitCauses {
            timeouts: ordered.timeouts,
            fast_retransmits: ordered.fast_retransmits,
            spurious_timeouts: ordered.spurious_timeouts,
        }),
        link_drops: ordered.link_drops,
        link_duplicates: ordered.link_duplicates,
        link_reordered: ordered.link_reordered,
        ecn_marked: ordered.ecn_marked,
        udp: ordered.udp.clone(),
        checks: AllChecks {
            order: report.checks(),
            no_loss: (config.reliable && failed.is_empty()).then_some(lost.is_empty()),
            atomicity: failure.map(|_| partial.is_empty()),
        },
        failed_processes: failure.map(|_| failed.clone()),
        detection_us: failure.and_then(|f| f.detection_us),
        first_resume_us: failure.and_then(|f| f.first_resume_us),
        resume_us: failure.and_then(|f| f.resume_us),
        recovery_us: failure.and_then(|f| f.recovery_us),
        aborted: failure.map(|f| f.aborted),
        never_released: config.reliable.then_some(ordered.never_released),
    };
    DemoOutcome {
        summary,
        report,
        lost,
        partial,
    }
}

/// Writes `DIR/<process-id>.log` with the S and D lines of every process (docs/logs.md).
pub fn write_logs(dir: &Path, result: &PhaseResult) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for log in &result.logs {
        let file = std::fs::File::create(dir.join(format!("{}.log", log.process)))?;
        let mut w = BufWriter::new(file);
        for e in &log.events {
            onepipe_check::write_event(&mut w, e)?;
        }
        w.flush()?;
    }
    Ok(())
}
