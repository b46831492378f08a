//! Recall (paper 5.2) against the order PSNs are taken in: bugs found by simulator campaigns
//! with several concurrent failures.

use super::tests::{ack, drain_full, release, sender, t};
use onepipe_wire::{AckPayload, Instant};

/// Campaign seeds 90111467 and 90117483 (`crates/sim/tests/faults.rs`): a recall takes its
/// PSN after the packets of newer scatterings. Selectively acknowledged ahead of one of those,
/// it let its scattering be done and retired while the entry still waited in `in_flight` for
/// the cumulative ACK; the freed slot went to a new scattering, and the entry named a message
/// of it (the invariants check found "entry on its message's connection", or an index out
/// of bounds). The slot now stays taken until its last entry leaves.
#[test]
fn a_selectively_acknowledged_recall_keeps_its_slot_until_the_cumulative_ack() {
    let mut s = sender(8);
    s.submit(1, &[(1, b"a"), (2, b"a")]);
    s.submit(2, &[(2, b"b")]);
    assert_eq!(release(&mut s), 2, "timestamps 1 and 2");
    assert_eq!(
        drain_full(&mut s, t(0)),
        vec![(1, 0, false, 1), (2, 0, false, 1), (2, 1, false, 2)]
    );
    s.on_process_failed(1);
    assert_eq!(
        drain_full(&mut s, t(1)),
        vec![(2, 2, true, 1)],
        "recall behind scattering 2"
    );
    // Receiver 2 has PSN 0 and the recall (2), not scattering 2's packet (1).
    let sack = AckPayload { sack: 0b1, ..ack(8) };
    s.on_ack(t(2), 2, 1, &sack);
    s.check_invariants();
    assert!(s.recall_complete(1), "scattering 1 is done");
    assert_eq!(s.commit_barrier(t(3)), Instant::from_nanos(2), "and retired");
    // A new scattering must not take the slot the recall's entry names.
    s.submit(3, &[(3, b"c")]);
    release(&mut s);
    s.check_invariants();
    s.on_ack(t(4), 2, 3, &ack(8));
    s.check_invariants();
    assert_eq!(drain_full(&mut s, t(4)), vec![(3, 0, false, 3)]);
    s.on_ack(t(5), 3, 1, &ack(8));
    s.check_invariants();
    assert!(s.is_idle(), "every slot freed once its entries left");
}
