//! 1Pipe's switch program on a chip (paper 000, section 6.2.1), as a P4 budget
//! (`onepipe_fabric::budget`, docs/p4-budget.md).
//!
//! The layout a chip would use, and what each array stands for in this software switch:
//! - stage 0, per input: `input_barrier_be` and `input_barrier_commit` (R_i, `Port::barrier`),
//!   `input_state` (live, dead, joining; the commit lane's state: `Port::state`, `commit`, ...)
//!   and `last_heard` (for the control plane's dead-link scan);
//! - stages 1..=L, per lane and half: `min_tree_*`, a binary tree of minimums whose nodes
//!   hold their two children's values, one level per stage, L = log2 of the half's inputs
//!   (the paper's "binary tree of registers with O(log N) pipeline stages"). The software keeps
//!   the same minimum in `HalfRegisters` by rescanning the half when the register that held it
//!   rises: the tree is the chip's form of that rescan, and a packet writes one path of it;
//! - stage L+1: `output_up_*` (a half's last barrier stamped, which never goes back) and
//!   `clock_ahead` (the clock samples); stage L+2: `output_down_*`, which takes the uplink
//!   output as its loopback input;
//! - egress, per output port: `last_sent`, `last_barrier_sent`, `beacon_state` (a beacon
//!   owed, eager beacons left).
//!
//! Barriers are 48 bits, as on the wire. Counters (`SwitchCounters`, the refusals of
//! implausible barriers) are a chip's counter arrays and are not counted here.

use super::Switch;
use onepipe_fabric::PortDirection;
use onepipe_fabric::budget::{Beyond, Budgeted, ProgramBudget, RegisterArray, tree_levels};
use onepipe_wire::packet::HEADER_LEN;

/// Bits of a barrier in a register, as on the wire.
const BARRIER_BITS: u32 = 48;

/// The tree arrays of each lane and half, by (lane, half): one name, a part per level.
const TREES: [[&str; 2]; 2] = [
    ["min_tree_be_up", "min_tree_be_down"],
    ["min_tree_commit_up", "min_tree_commit_down"],
];
const OUTPUTS: [[&str; 2]; 2] = [
    ["output_up_be", "output_down_be"],
    ["output_up_commit", "output_down_commit"],
];
const INPUT_BARRIERS: [&str; 2] = ["input_barrier_be", "input_barrier_commit"];

/// A second pass: a frame on an input that comes back (heard again after it went dead, heard
/// for the first time after it timed out unheard, readmitted) freezes its register at the
/// half's output, then admits it once its barrier passes that output; the output is computed
/// stages after the register is written. Once per return of an input.
pub const JOINING_INPUT: &str =
    "a frame on an input coming back freezes its register at the half's output, computed stages later";

fn array(name: &'static str, part: u32, stage: u32, entries: u64, entry_bits: u32) -> RegisterArray {
    RegisterArray {
        name,
        part,
        stage,
        entries,
        entry_bits,
        accesses: 1,
    }
}

impl Switch {
    /// Inputs feeding each half: `[up, down]`.
    fn inputs_per_half(&self) -> [u64; 2] {
        let below = self
            .ports
            .iter()
            .filter(|p| p.direction == PortDirection::Down)
            .count() as u64;
        [below, self.ports.len() as u64 - below]
    }
}

impl Budgeted for Switch {
    fn budget(&self) -> ProgramBudget {
        let ports = self.ports.len() as u64;
        let inputs = self.inputs_per_half();
        let levels = inputs.map(tree_levels);
        let tree_stages = levels[0].max(levels[1]);
        let mut arrays = vec![
            array(INPUT_BARRIERS[0], 0, 0, ports, BARRIER_BITS),
            array(INPUT_BARRIERS[1], 0, 0, ports, BARRIER_BITS),
            array("input_state", 0, 0, ports, 8),
            array("last_heard", 0, 0, ports, BARRIER_BITS),
        ];
        for trees in TREES {
            for (half, name) in trees.into_iter().enumerate() {
                for level in 1..=levels[half] {
                    let nodes = inputs[half].div_ceil(1u64 << level);
                    arrays.push(array(name, level, level, nodes, 2 * BARRIER_BITS));
                }
            }
        }
        let outputs = tree_stages + 1;
        for lane in OUTPUTS {
            arrays.push(array(lane[0], 0, outputs, 1, BARRIER_BITS));
            arrays.push(array(lane[1], 0, outputs + 1, 1, BARRIER_BITS));
        }
        // Two windows of the largest (barrier - arrival) seen, 32 bits each.
        arrays.push(array("clock_ahead", 0, outputs, ports, 64));
        let egress = outputs + 2;
        arrays.push(array("last_sent", 0, egress, ports, BARRIER_BITS));
        arrays.push(array("last_barrier_sent", 0, egress, ports, 2 * BARRIER_BITS));
        arrays.push(array("beacon_state", 0, egress, ports, 8));
        ProgramBudget {
            program: "1pipe",
            stages: egress + 1,
            arrays,
            header_bytes: HEADER_LEN as u32,
            multicast: vec![
                "eager beacons: a beacon that completes a wave goes out on every port of the half that rose (Switch::propagate)",
            ],
            control_plane: vec![
                "beacons at each tick on idle links (the packet generator)",
                "dead-link detection over last_heard, reports and their repeats (Switch::handle_timeout)",
                "an uplink half with no counted input advancing on the switch's clock",
                "management orders: remove, cut, readmit an input; new routes",
            ],
            beyond: vec![Beyond::SecondPass(JOINING_INPUT)],
        }
    }
}

#[cfg(test)]
mod tests;
