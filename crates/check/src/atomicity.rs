//! Restricted failure atomicity (paper 2.1, 5.2): each scattering is delivered by all of its
//! correct receivers or by none of them, whoever failed.

use std::collections::HashMap;

use crate::log::{Event, MsgId, ProcessId, ProcessLog};
use crate::violation::{Violation, ViolationKind};

/// atomicity: for every scattering in a sender's log, its receivers that are not in `failed`
/// delivered it all or none. Failed processes' own deliveries are not judged (a process that
/// failed may have delivered anything before it did), but their sends are. Violations sit at
/// the scattering's first send event.
pub fn check_atomicity(logs: &[ProcessLog], failed: &[ProcessId]) -> Vec<Violation> {
    let correct = |p: ProcessId| !failed.contains(&p);
    // (sender, msg_id) -> (first send index, correct receivers, of which delivered).
    let mut scatterings: HashMap<(ProcessId, MsgId), (usize, u32, u32)> = HashMap::new();
    for log in logs {
        for (at, e) in log.events.iter().enumerate() {
            if let Event::Send { dst, msg_id, .. } = *e {
                let s = scatterings.entry((log.process, msg_id)).or_insert((at, 0, 0));
                s.1 += u32::from(correct(dst));
            }
        }
    }
    for log in logs.iter().filter(|l| correct(l.process)) {
        for e in &log.events {
            if let Event::Deliver { src, msg_id, .. } = *e
                && let Some(s) = scatterings.get_mut(&(src, msg_id))
            {
                s.2 += 1;
            }
        }
    }
    let mut out: Vec<Violation> = scatterings
        .into_iter()
        .filter(|(_, (_, receivers, delivered))| *delivered > 0 && delivered < receivers)
        .map(|((process, msg_id), (index, receivers, delivered))| Violation {
            process,
            index,
            kind: ViolationKind::PartlyDelivered {
                msg_id,
                receivers,
                delivered,
            },
        })
        .collect();
    out.sort_by_key(|v| (v.process, v.index));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(dst: ProcessId, msg_id: MsgId) -> Event {
        Event::Send {
            ts_ns: 10,
            dst,
            msg_id,
        }
    }

    fn deliver(src: ProcessId, msg_id: MsgId) -> Event {
        Event::Deliver {
            ts_ns: 10,
            src,
            msg_id,
        }
    }

    fn log(process: ProcessId, events: Vec<Event>) -> ProcessLog {
        ProcessLog { process, events }
    }

    #[test]
    fn all_or_none_of_the_correct_receivers() {
        // 0 scatters msg 1 to 1, 2, 3 and msg 2 to 1, 2; process 3 failed.
        let logs = vec![
            log(
                0,
                vec![send(1, 1), send(2, 1), send(3, 1), send(1, 2), send(2, 2)],
            ),
            log(1, vec![deliver(0, 1)]),
            log(2, vec![deliver(0, 1)]),
            log(3, vec![]),
        ];
        // Msg 1 reached both correct receivers (3 failed); msg 2 neither: atomic.
        assert!(check_atomicity(&logs, &[3]).is_empty());
        // Had 3 been correct, msg 1 would be partly delivered.
        let v = check_atomicity(&logs, &[]);
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].kind,
            ViolationKind::PartlyDelivered {
                msg_id: 1,
                receivers: 3,
                delivered: 2
            }
        );
        assert_eq!((v[0].process, v[0].index), (0, 0));
    }

    #[test]
    fn a_failed_senders_scattering_must_be_atomic_too_and_failed_deliveries_do_not_count() {
        let logs = vec![
            log(0, vec![send(1, 7), send(2, 7)]),
            log(1, vec![deliver(0, 7)]),
            log(2, vec![]),
        ];
        assert_eq!(check_atomicity(&logs, &[0]).len(), 1);
        assert!(check_atomicity(&logs, &[2]).is_empty());
    }
}
