//! What the store holds after a run, judged against the history: an acknowledged write is
//! lost if the value a key ends with was written by a write that had returned before the
//! acknowledged one began (or the key ends absent, or with a value nobody wrote). Values are
//! unique per write (`c<client>s<seq>`), so each final value names its writer. A write whose
//! outcome is unknown may have taken effect at any time after its call, so it is never older.

use super::nodes::Op;
use onepipe_netchain::{Key, NetchainSwitch, Outcome, Ring};
use std::collections::HashMap;

/// Per key: the value at the tail of its chain in the controller's final ring.
pub fn tail_values(ring: &Ring, switches: &[&NetchainSwitch], keys: &[Key]) -> Vec<Option<Vec<u8>>> {
    keys.iter()
        .map(|k| {
            let chain = ring.chain(ring.group_of(k)).expect("own group");
            let tail = *chain.as_slice().last().expect("chains are not empty");
            let store = switches[tail as usize].store();
            store
                .slot_of(k)
                .and_then(|s| store.read(s).value.map(<[u8]>::to_vec))
        })
        .collect()
}

/// Acknowledged writes that the final state does not reflect.
pub fn acknowledged_writes_lost(history: &[Op], finals: &[Option<Vec<u8>>]) -> u64 {
    let mut writes: HashMap<u32, Vec<&Op>> = HashMap::new();
    for op in history.iter().filter(|o| o.write) {
        writes.entry(op.key).or_default().push(op);
    }
    let mut lost = 0;
    for (key, ops) in writes {
        let acked = ops.iter().filter(|o| matches!(o.outcome, Outcome::Ok(_)));
        let writer = finals[key as usize]
            .as_ref()
            .and_then(|v| ops.iter().find(|o| o.value.as_ref() == Some(v)));
        // When the final value was certainly in place: never, for an unknown write.
        let settled_ns = match writer {
            Some(w) if w.outcome == Outcome::Unknown => u64::MAX,
            Some(w) => w.return_ns,
            None => 0,
        };
        lost += acked
            .filter(|o| o.call_ns > settled_ns || writer.is_none())
            .count() as u64;
    }
    lost
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(key: u32, value: &str, outcome: Outcome, call_ns: u64, return_ns: u64) -> Op {
        Op {
            client: 0,
            write: true,
            key,
            value: Some(value.as_bytes().to_vec()),
            outcome,
            call_ns,
            return_ns,
        }
    }

    #[test]
    fn a_final_value_older_than_an_acknowledged_write_loses_it() {
        let ok = || Outcome::Ok(None);
        let history = [write(0, "a", ok(), 0, 10), write(0, "b", ok(), 20, 30)];
        assert_eq!(acknowledged_writes_lost(&history, &[Some(b"b".to_vec())]), 0);
        assert_eq!(
            acknowledged_writes_lost(&history, &[Some(b"a".to_vec())]),
            1,
            "b came after a returned"
        );
        assert_eq!(acknowledged_writes_lost(&history, &[None]), 2);
        assert_eq!(
            acknowledged_writes_lost(&history, &[Some(b"z".to_vec())]),
            2,
            "nobody wrote z"
        );
        let overlapping = [write(0, "a", ok(), 0, 25), write(0, "b", ok(), 20, 30)];
        assert_eq!(
            acknowledged_writes_lost(&overlapping, &[Some(b"a".to_vec())]),
            0,
            "concurrent: either order"
        );
        let unknown = [
            write(0, "a", ok(), 0, 10),
            write(0, "u", Outcome::Unknown, 5, 6),
            write(0, "b", ok(), 20, 30),
        ];
        assert_eq!(
            acknowledged_writes_lost(&unknown, &[Some(b"u".to_vec())]),
            0,
            "an unknown write may land late"
        );
    }
}
