//! causality.

use crate::log::{Event, ProcessLog};
use crate::violation::{Violation, ViolationKind};

/// causality: once a process has delivered a message with timestamp `T`, each of its later sends
/// has `ts_ns > T` (so a reply is ordered after what caused it); and a process's send timestamps
/// never decrease in program order (equal is fine: one scattering, or one message spanning many
/// packets, yields several sends with one timestamp).
pub fn check_causality(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut out = Vec::new();
    causality(logs, &mut |v| out.push(v));
    out
}

pub(crate) fn causality(logs: &[ProcessLog], sink: &mut impl FnMut(Violation)) {
    for log in logs {
        let process = log.process;
        // (event index, ts_ns) of the highest-timestamp delivery so far and of the last send.
        let mut max_delivered: Option<(usize, u64)> = None;
        let mut last_send: Option<(usize, u64)> = None;
        for (index, event) in log.events.iter().enumerate() {
            match *event {
                Event::Deliver { ts_ns, .. } => {
                    if max_delivered.is_none_or(|(_, max)| ts_ns > max) {
                        max_delivered = Some((index, ts_ns));
                    }
                }
                Event::Send { ts_ns, dst, msg_id } => {
                    if let Some((delivered_index, delivered_ts_ns)) = max_delivered {
                        if ts_ns <= delivered_ts_ns {
                            let kind = ViolationKind::SendNotAfterDelivery {
                                dst,
                                msg_id,
                                ts_ns,
                                delivered_index,
                                delivered_ts_ns,
                            };
                            sink(Violation { process, index, kind });
                        }
                    }
                    if let Some((prev_index, prev_ts_ns)) = last_send {
                        if ts_ns < prev_ts_ns {
                            let kind = ViolationKind::SendTsDecreased {
                                dst,
                                msg_id,
                                ts_ns,
                                prev_index,
                                prev_ts_ns,
                            };
                            sink(Violation { process, index, kind });
                        }
                    }
                    last_send = Some((index, ts_ns));
                }
            }
        }
    }
}
