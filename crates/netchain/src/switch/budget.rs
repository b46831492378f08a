//! NetChain's switch program as a P4 budget (`onepipe_fabric::budget`, docs/p4-budget.md),
//! laid out as the paper's prototype (paper 002, sections 4.1 and 7): the index table (a
//! match table, not counted) gives a key's slot; `version[]` and `length[]` decide a write
//! before the value's 16-byte pieces, a stage each, are read or written.
//!
//! Within the chip: one read-modify-write of each array per query; the per-process replay
//! window (a register pair per process); the rule resolution, at most `CHAIN_MAX + 1` lookups
//! of the rules table, which a P4 program unrolls into as many table stages. Past it, declared
//! in `beyond` and shown by the tests: a read's answer grows by its value and is re-emitted
//! from a queue; a compare-and-swap compares the whole value before writing any piece of it;
//! a value larger than the stages hold.

use super::NetchainSwitch;
use onepipe_fabric::budget::{Beyond, Budgeted, ChipBudget, ProgramBudget, RegisterArray, pieces};
use onepipe_wire::netchain::{CHAIN_MAX, QUERY_HEADER_LEN};

pub const READ_ANSWERS: &str =
    "a processed query is re-emitted from a per-port queue, since a read's answer grows by its value";
pub const COMPARE_AND_SWAP: &str =
    "a compare-and-swap compares every piece of the value before it writes the first";

fn array(name: &'static str, stage: u32, entries: u64, entry_bits: u32) -> RegisterArray {
    RegisterArray {
        name,
        part: 0,
        stage,
        entries,
        entry_bits,
        accesses: 1,
    }
}

impl Budgeted for NetchainSwitch {
    fn budget(&self) -> ProgramBudget {
        let chip = ChipBudget::TOFINO;
        let slots = u64::from(self.config.slots);
        let processes = self.wiring.process_count() as u64;
        let mut arrays = vec![
            // Highest request id and a bit for each of the 63 below it.
            array("replay", 0, processes, 128),
            // Per virtual group (a u16): the session the head's versions start at.
            array("session", 0, 1 << 16, 64),
            array("version", 1, slots, 64),
            array("length", 1, slots, 16),
        ];
        let value_bits = self.config.value_bytes_max as u64 * 8;
        let (values, next) = pieces("value", slots, value_bits, 2, &chip);
        arrays.extend(values);
        ProgramBudget {
            program: "netchain",
            stages: next,
            arrays,
            // The chain's switch ids, then a compare-and-swap's value and expected value.
            header_bytes: (QUERY_HEADER_LEN + 2 * CHAIN_MAX + 2 * self.config.value_bytes_max) as u32,
            multicast: Vec::new(),
            control_plane: vec![
                "installing keys and rules, failover and recovery (the controller through the switch agent)",
            ],
            beyond: vec![
                Beyond::QueuedPackets(READ_ANSWERS),
                Beyond::SecondPass(COMPARE_AND_SWAP),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::SwitchConfig;
    use onepipe_fabric::budget::{Excess, check};
    use onepipe_fabric::{Node, Route, Topology, Wiring};
    use onepipe_wire::Instant;
    use onepipe_wire::netchain::Opcode;
    use std::sync::Arc;

    fn switch(config: SwitchConfig) -> NetchainSwitch {
        let wiring = Arc::new(Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap());
        NetchainSwitch::new(0, wiring, config)
    }

    /// Paper 002, section 7: 64K slots of 128 bytes in 8 stages fit a Tofino; what goes past
    /// it is the two declared per-packet behaviours, nothing of memory or stages.
    #[test]
    fn the_prototypes_sizes_fit_but_for_read_answers_and_compare_and_swap() {
        let budget = switch(SwitchConfig::default()).budget();
        assert_eq!(budget.arrays_named("value").count(), 8);
        assert_eq!(budget.stages, 10);
        assert_eq!(
            check(&budget, &ChipBudget::TOFINO),
            vec![
                Excess::Beyond(Beyond::QueuedPackets(READ_ANSWERS)),
                Excess::Beyond(Beyond::SecondPass(COMPARE_AND_SWAP)),
            ]
        );
    }

    /// docs/netchain.md: "Values may be configured above 128 bytes." Past 160 bytes the
    /// pieces need more stages than a Tofino has; past 224 a compare-and-swap's header (chain,
    /// value and expected value) passes the parser's 512 bytes.
    #[test]
    fn values_above_160_bytes_need_more_stages_than_a_tofino_has() {
        let at = |bytes| {
            let budget = switch(SwitchConfig {
                value_bytes_max: bytes,
                ..SwitchConfig::default()
            })
            .budget();
            check(&budget, &ChipBudget::TOFINO)
                .into_iter()
                .filter(|e| !matches!(e, Excess::Beyond(_)))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(160), Vec::new());
        assert_eq!(at(176), vec![Excess::Stages { used: 13, max: 12 }]);
        assert_eq!(
            at(1024),
            vec![
                Excess::Stages { used: 66, max: 12 },
                Excess::HeaderBytes {
                    bytes: 2112,
                    max: 512
                },
            ]
        );
    }

    /// The declared queue, on the code path: a read the tail serves is consumed, and its
    /// answer, longer by the value, waits in the queue of the client's port.
    #[test]
    fn a_read_answer_grows_by_its_value_and_leaves_from_a_queue() {
        let mut s = switch(SwitchConfig::default());
        let key = crate::Key::new(b"k").unwrap();
        let slot = s.store.install(key).unwrap();
        s.store.write(slot, Some(b"value"), 1).unwrap();
        let mut frame = crate::testing::query(Opcode::Read, 0, 1, &[0], b"k", None, None, 1);
        let route = s.classify(Instant::ZERO, 0, &frame);
        assert_eq!(route, Route::Consume);
        s.handle_frame(Instant::ZERO, 0, &mut frame, route);
        let mut buf = vec![0u8; 2048];
        let answer_bytes = s
            .poll_transmit(Instant::ZERO, 0, &mut buf)
            .expect("an answer queued");
        assert!(answer_bytes > frame.len());
        assert_eq!(
            answer_bytes,
            QUERY_HEADER_LEN + b"value".len(),
            "no chain, the value"
        );
    }
}
