//! cosy's switch program as a P4 budget (`onepipe_fabric::budget`, docs/p4-budget.md). The
//! paper's data plane is P4 on the Portable Switch Architecture (paper 003, Fig. 3); the layout
//! here keeps each of a port's K virtual links in an array of its own, so that an rsvp
//! reserving several of one port, or a complete releasing them, reaches each array once.
//!
//! Past the chip, declared in `beyond`: an rsvp chooses uniformly among the free virtual links
//! of every shortest-path port (it reads the free count of each: a loop over ports), and it
//! reads which virtual links are free before it writes the ones it picks (a second pass); a
//! release of the reservation that expires first rescans all of them for the next expiry.
//! Clearing reservations past delta_cosy is a scan on a timer: the control plane's.

use super::CosySwitch;
use onepipe_fabric::budget::{Beyond, Budgeted, ProgramBudget, RegisterArray};
use onepipe_wire::cosy::HEADER_LEN;

pub const ECMP_CHOICE: &str =
    "an rsvp counts the free virtual links of every shortest-path port to choose one uniformly";
pub const PICK_THEN_RESERVE: &str =
    "an rsvp reads which of a port's virtual links are free, then reserves those it picks";
pub const EXPIRY_RESCAN: &str =
    "releasing the reservation that expires first rescans every reservation for the next expiry";

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

impl Budgeted for CosySwitch {
    fn budget(&self) -> ProgramBudget {
        let ports = self.vlinks.ports() as u64;
        let mut arrays = vec![
            array("reserved", 0, 0, ports, 8),
            // The window being counted and its bytes; then the busiest window's bytes.
            array("meter", 0, 0, ports, 128),
            array("meter_peak", 0, 1, ports, 64),
        ];
        let k = u32::from(self.config.k);
        for v in 0..k {
            // Sender, message and the receiver's nonce; then the port back and the expiry.
            arrays.push(array("vlink_owner", v, 2 + 2 * v / 4, ports, 96));
            arrays.push(array("vlink_route", v, 2 + (2 * v + 1) / 4, ports, 64));
        }
        let stages = arrays.iter().map(|a| a.stage + 1).max().unwrap_or(0);
        ProgramBudget {
            program: "cosy",
            stages,
            arrays,
            header_bytes: HEADER_LEN as u32,
            multicast: vec![
                "a blocked rsvp goes on to the sender as a reject and back along its hops (a clone; the software queues it)",
            ],
            control_plane: vec![
                "clearing reservations past delta_cosy: a scan of every virtual link on a timer",
            ],
            beyond: vec![
                Beyond::LoopOverState(ECMP_CHOICE),
                Beyond::SecondPass(PICK_THEN_RESERVE),
                Beyond::LoopOverState(EXPIRY_RESCAN),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::SwitchConfig;
    use onepipe_fabric::budget::{ChipBudget, Excess, check};
    use onepipe_fabric::{Topology, Wiring, routing};
    use onepipe_wire::cosy::VIRTUAL_LINKS_MAX;

    fn switch(k: u8) -> CosySwitch {
        let wiring = Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap();
        let routes = routing::build(&wiring).unwrap().swap_remove(0);
        CosySwitch::new(
            0,
            &wiring,
            routes,
            SwitchConfig {
                k,
                ..SwitchConfig::default()
            },
        )
    }

    /// Memory and stages fit at every K the header can name (16); the three declared
    /// behaviours are what goes past a chip.
    #[test]
    fn cosy_fits_in_memory_and_stages_but_for_its_choice_and_expiry_loops() {
        for (k, stages) in [(4, 4), (VIRTUAL_LINKS_MAX, 10)] {
            let budget = switch(k).budget();
            assert_eq!(budget.stages, stages, "K = {k}");
            assert_eq!(budget.arrays_named("vlink_owner").count(), k as usize);
            assert_eq!(
                check(&budget, &ChipBudget::TOFINO),
                vec![
                    Excess::Beyond(Beyond::LoopOverState(ECMP_CHOICE)),
                    Excess::Beyond(Beyond::SecondPass(PICK_THEN_RESERVE)),
                    Excess::Beyond(Beyond::LoopOverState(EXPIRY_RESCAN)),
                ]
            );
        }
    }
}
