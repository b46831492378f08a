//! Shortest paths to switches, for programs that address a switch rather than a process
//! (NetChain's chain hops, paper 002 section 4: "dst IP = next chain node").
//!
//! 1Pipe's up/down routing ([`crate::routing`]) only leads to processes. A query bound for a
//! switch takes a shortest path over the switch graph instead, found by a breadth-first search
//! from this switch. Switches marked as avoided (failed ones) carry no traffic through them, but
//! a path still leads *to* one: its neighbour is where a NetChain failover rule catches the
//! query (paper Algorithm 2).

use crate::node::PortId;
use crate::topology::SwitchIndex;
use crate::wiring::{Peer, Wiring};
use std::collections::VecDeque;

/// One switch's next hop toward every switch and process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPaths {
    me: SwitchIndex,
    /// Per destination switch: the port of a shortest path; `None` for this switch and for
    /// switches it cannot reach.
    port_to_switch: Vec<Option<PortId>>,
    /// Per process: its ToR and that ToR's port to it.
    process_tor: Vec<(SwitchIndex, PortId)>,
}

impl SwitchPaths {
    /// Paths from switch `me` that pass through no switch `s` with `avoid(s)`.
    pub fn new(wiring: &Wiring, me: SwitchIndex, avoid: &dyn Fn(SwitchIndex) -> bool) -> SwitchPaths {
        let count = wiring.switch_count();
        assert!(me < count, "switch {me} of {count}");
        let mut port_to_switch: Vec<Option<PortId>> = vec![None; count];
        let mut seen = vec![false; count];
        seen[me] = true;
        let mut queue = VecDeque::new();
        for (port, spec) in wiring.switch_ports[me].iter().enumerate() {
            if let Peer::Switch { switch, .. } = spec.peer
                && !seen[switch]
            {
                seen[switch] = true;
                port_to_switch[switch] = Some(port as PortId);
                queue.push_back(switch);
            }
        }
        // Each switch enters the queue once: the search is bounded by the switch count.
        while let Some(s) = queue.pop_front() {
            if avoid(s) {
                continue;
            }
            let first_hop = port_to_switch[s];
            for spec in &wiring.switch_ports[s] {
                if let Peer::Switch { switch, .. } = spec.peer
                    && !seen[switch]
                {
                    seen[switch] = true;
                    port_to_switch[switch] = first_hop;
                    queue.push_back(switch);
                }
            }
        }
        let process_tor = wiring.processes.iter().map(|p| (p.tor, p.tor_port)).collect();
        SwitchPaths {
            me,
            port_to_switch,
            process_tor,
        }
    }

    pub fn me(&self) -> SwitchIndex {
        self.me
    }

    /// The port toward `switch`; `None` for this switch itself, an unknown one, or one no
    /// path reaches.
    pub fn port_to_switch(&self, switch: SwitchIndex) -> Option<PortId> {
        self.port_to_switch.get(switch).copied().flatten()
    }

    /// The port toward `process`: its own port at its ToR, or the way to the ToR.
    pub fn port_to_process(&self, process: u32) -> Option<PortId> {
        let &(tor, port) = self.process_tor.get(process as usize)?;
        if tor == self.me {
            Some(port)
        } else {
            self.port_to_switch(tor)
        }
    }

    /// The process at `port` of this switch, if a process is there.
    pub fn process_at(&self, wiring: &Wiring, port: PortId) -> Option<u32> {
        match wiring.switch_ports[self.me].get(port as usize)?.peer {
            Peer::Process(p) => Some(p),
            Peer::Switch { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    fn leaf_spine() -> Wiring {
        Wiring::new(Topology::leaf_spine(2, 2, 1).unwrap(), 1).unwrap()
    }

    #[test]
    fn every_switch_is_reached_by_a_shortest_path() {
        let w = leaf_spine();
        // leaf0 = 0, leaf1 = 1, spine0 = 2, spine1 = 3.
        let p = SwitchPaths::new(&w, 0, &|_| false);
        assert_eq!(p.port_to_switch(0), None, "no port to itself");
        let to_spine0 = p.port_to_switch(2).unwrap();
        assert_eq!(
            w.switch_ports[0][to_spine0 as usize].peer,
            Peer::Switch { switch: 2, port: 0 }
        );
        let to_leaf1 = p.port_to_switch(1).unwrap();
        assert!(matches!(
            w.switch_ports[0][to_leaf1 as usize].peer,
            Peer::Switch { switch: 2 | 3, .. }
        ));
        assert_eq!(p.port_to_process(0), Some(0), "its own host");
        assert_eq!(
            p.port_to_process(1),
            Some(to_leaf1),
            "the other leaf's host, via a spine"
        );
        assert_eq!(p.port_to_process(9), None);
        assert_eq!(p.port_to_switch(99), None);
    }

    /// A failed spine carries nothing through it, yet stays reachable as a destination.
    #[test]
    fn avoided_switches_are_reached_but_not_crossed() {
        let w = leaf_spine();
        let p = SwitchPaths::new(&w, 0, &|s| s == 2);
        let to_leaf1 = p.port_to_switch(1).unwrap();
        assert!(matches!(
            w.switch_ports[0][to_leaf1 as usize].peer,
            Peer::Switch { switch: 3, .. }
        ));
        assert!(
            p.port_to_switch(2).is_some(),
            "its neighbour is where rules catch queries"
        );
        let cut = SwitchPaths::new(&w, 0, &|s| s >= 2);
        assert_eq!(
            cut.port_to_switch(1),
            None,
            "both spines avoided: leaf1 is cut off"
        );
    }
}
