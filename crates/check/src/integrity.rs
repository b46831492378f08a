//! no_duplicates.

use crate::index::FastMap;
use crate::log::{Event, MsgId, ProcessId, ProcessLog};
use crate::violation::{Violation, ViolationKind};

/// no_duplicates: no process delivers the same `(src, msg_id)` twice.
pub fn check_no_duplicates(logs: &[ProcessLog]) -> Vec<Violation> {
    let mut out = Vec::new();
    no_duplicates(logs, &mut |v| out.push(v));
    out
}

/// Senders number messages with a growing sequence and FIFO delivery keeps it, so per receiver
/// we first only track the highest `msg_id` per sender: while every delivery exceeds it, there
/// is no duplicate and no per-message state. At the first delivery that does not, the receiver
/// switches to an exact map of every `(src, msg_id)` delivered so far (rebuilt from the prefix
/// once, so still linear). The fast path avoids a random hash-map access per delivery, which
/// dominates on tens of millions of events.
pub(crate) fn no_duplicates(logs: &[ProcessLog], sink: &mut impl FnMut(Violation)) {
    let mut max_id: FastMap<ProcessId, MsgId> = FastMap::default();
    let mut first: FastMap<(ProcessId, MsgId), usize> = FastMap::default();
    for log in logs {
        let process = log.process;
        max_id.clear();
        first.clear();
        let mut exact = false;
        for (index, event) in log.events.iter().enumerate() {
            let Event::Deliver { src, msg_id, .. } = *event else {
                continue;
            };
            if !exact {
                match max_id.get_mut(&src) {
                    None => {
                        max_id.insert(src, msg_id);
                        continue;
                    }
                    Some(max) if msg_id > *max => {
                        *max = msg_id;
                        continue;
                    }
                    Some(_) => {}
                }
                exact = true;
                for (i, e) in log.events[..index].iter().enumerate() {
                    if let Event::Deliver { src, msg_id, .. } = *e {
                        first.insert((src, msg_id), i);
                    }
                }
            }
            let &mut first_index = first.entry((src, msg_id)).or_insert(index);
            if first_index != index {
                sink(Violation {
                    process,
                    index,
                    kind: ViolationKind::Duplicate {
                        src,
                        msg_id,
                        first_index,
                    },
                });
            }
        }
    }
}
