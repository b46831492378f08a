//! In-network Paxos's switch program as a P4 budget (`onepipe_fabric::budget`,
//! docs/p4-budget.md), laid out as the thesis's acceptor (thesis 004, Fig. 5.4: registers
//! `rnds`, `vrnds`, `values` indexed by instance; here a ring of `window` slots per partition)
//! and coordinator (`reg_inst`: the next instance, per partition).
//!
//! Within the chip: a 2A is one read-modify-write of its slot's arrays, and its 2Bs to the
//! learners, like a request's 2As to the acceptors, are a multicast. Past it, declared in
//! `beyond`: a 1A for a range loops over the range and answers one 1B per vote; a TRIM
//! recomputes the floor over every learner's; the coordinator holds requests while Phase 1 runs
//! and, closing a range, proposes again every vote found (a loop); a co-located coordinator's
//! 2A reaches its own acceptor in the same step (a second pass); and the value rides in the
//! header, so a value above 464 bytes exceeds the parser.

use super::PaxosSwitch;
use onepipe_fabric::budget::{Beyond, Budgeted, ChipBudget, ProgramBudget, RegisterArray, pieces};
use onepipe_wire::paxos::{HEADER_LEN, VALUE_BYTES_MAX};

pub const PHASE1_RANGE: &str = "a 1A for a range promises every instance of it and answers one 1B per vote";
pub const TRIM_FLOOR: &str = "a TRIM recomputes the floor from every learner's applied index";
pub const HELD_REQUESTS: &str = "requests wait in the coordinator's hold while Phase 1 runs";
pub const PHASE1_CLOSE: &str =
    "closing a range's Phase 1 proposes again every vote found and a no-op for every hole below the highest";
pub const CO_LOCATED: &str = "a co-located coordinator's 2A reaches its own acceptor in the same step";

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

impl Budgeted for PaxosSwitch {
    fn budget(&self) -> ProgramBudget {
        let chip = ChipBudget::TOFINO;
        let mut b = ProgramBudget {
            program: "paxos",
            stages: 0,
            arrays: Vec::new(),
            header_bytes: HEADER_LEN as u32,
            multicast: Vec::new(),
            control_plane: Vec::new(),
            beyond: Vec::new(),
        };
        if let Some(c) = &self.roles.coordinator {
            let config = c.config();
            let partitions = u64::from(config.partitions);
            b.arrays.push(array("next_instance", 0, partitions, 64));
            b.arrays.push(array("prepared_round", 0, partitions, 32));
            b.stages = 1;
            // A request's value is copied into its 2A; any value the wire carries.
            b.header_bytes = (HEADER_LEN + VALUE_BYTES_MAX) as u32;
            b.multicast.push("a request's 2A to every acceptor");
            b.control_plane
                .push("Phase 1 at start and its retries on timeout");
            b.beyond.push(Beyond::QueuedPackets(HELD_REQUESTS));
            b.beyond.push(Beyond::LoopOverState(PHASE1_CLOSE));
        }
        if let Some(a) = &self.roles.acceptor {
            let config = a.config();
            let partitions = u64::from(config.partitions);
            let slots = partitions * u64::from(config.window);
            let first = b.stages;
            b.arrays.push(array("floor", first, partitions, 64));
            b.arrays.push(array(
                "applied",
                first,
                partitions * config.learners.len() as u64,
                64,
            ));
            b.arrays.push(array("slot_instance", first + 1, slots, 64));
            b.arrays.push(array("rnd", first + 1, slots, 32));
            b.arrays.push(array("vrnd", first + 2, slots, 32));
            b.arrays.push(array("value_length", first + 2, slots, 16));
            let (values, next) = pieces(
                "value",
                slots,
                config.value_bytes_max as u64 * 8,
                first + 3,
                &chip,
            );
            b.arrays.extend(values);
            b.stages = next;
            b.header_bytes = b.header_bytes.max((HEADER_LEN + config.value_bytes_max) as u32);
            b.multicast.push("a vote's 2B to every learner");
            b.beyond.push(Beyond::LoopOverState(PHASE1_RANGE));
            b.beyond.push(Beyond::LoopOverState(TRIM_FLOOR));
        }
        if self.roles.coordinator.is_some() && self.roles.acceptor.is_some() {
            b.beyond.push(Beyond::SecondPass(CO_LOCATED));
        }
        b
    }
}
