//! Checks every baseline run must pass, whatever drove it.

use onepipe_baselines::{BaselineConfig, BaselineNode, collect_logs, totals};
use onepipe_check::{Event, ProcessLog, check_all};

pub fn deliveries(log: &ProcessLog) -> Vec<(u64, u32, u64)> {
    log.events
        .iter()
        .filter_map(|e| match *e {
            Event::Deliver { ts_ns, src, msg_id } => Some((ts_ns, src, msg_id)),
            Event::Send { .. } => None,
        })
        .collect()
}

/// What every run must show: deliveries, a clean check, one sequence delivered everywhere, no
/// drops, and the window respected.
pub fn assert_sound(config: &BaselineConfig, nodes: &[BaselineNode]) {
    let logs = collect_logs(nodes);
    let report = check_all(&logs);
    assert!(report.ok(), "{}: {report}", config.kind);
    let first = deliveries(&logs[0]);
    assert!(!first.is_empty(), "{}: nothing delivered", config.kind);
    for log in &logs {
        let d = deliveries(log);
        let same = d.len().min(first.len());
        assert_eq!(
            d[..same],
            first[..same],
            "{}: process {} disagrees",
            config.kind,
            log.process
        );
        assert_eq!(
            d.len(),
            first.len(),
            "{}: process {} delivered a prefix",
            config.kind,
            log.process
        );
    }
    let t = totals(nodes);
    assert_eq!(t.processes, logs.len());
    assert_eq!(t.dropped, 0, "{}: frames or messages dropped", config.kind);
    assert!(
        t.outstanding_peak <= config.window,
        "{}: window exceeded",
        config.kind
    );
    assert_eq!(
        t.delivered,
        t.broadcasts * t.processes as u64,
        "{}: not all delivered",
        config.kind
    );
    assert_eq!(t.latency_ns.len(), t.delivered);
    for node in nodes.iter().filter_map(BaselineNode::host_stats) {
        assert!(
            node.unconfirmed.is_empty(),
            "{}: sends still owed after the drain",
            config.kind
        );
    }
}
