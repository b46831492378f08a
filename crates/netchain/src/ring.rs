//! Placement (paper 4.3): consistent hashing with virtual nodes. The ring holds `m` virtual
//! nodes, `m / n` per switch; a key belongs to the segment ending at the first virtual node at
//! or after its position, and that segment is stored on the chain of the `f + 1` virtual nodes
//! from there on that sit on distinct switches. A segment is a *virtual group*: the unit the
//! controller recovers one at a time (paper 5.2), named by the index of its virtual node.
//!
//! The ring lives in the controller; client agents keep a copy to write chains into queries.

use crate::key::Key;
use onepipe_fabric::hash::mix64;
use onepipe_wire::netchain::{CHAIN_MAX, Chain, GROUP_ALL};

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("chains of {chain} switches need at least {chain} switches; there are {switches}")]
    TooFewSwitches { chain: usize, switches: usize },
    #[error("chains have 1 to {CHAIN_MAX} switches, not {0}")]
    ChainLength(usize),
    #[error("{0} virtual nodes: the ring holds 1 to {max}", max = GROUP_ALL - 1)]
    VirtualNodes(usize),
    #[error("switch {0} is listed twice")]
    DuplicateSwitch(u16),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// (position, virtual node), sorted by position.
    points: Vec<(u64, u16)>,
    /// Per virtual group (virtual node index): the chain storing its segment, head first.
    chains: Vec<Chain>,
}

impl Ring {
    /// A ring of `vnodes_per_switch` virtual nodes on each of `switches`, with chains of
    /// `chain_len` (f + 1) distinct switches.
    pub fn new(switches: &[u16], vnodes_per_switch: usize, chain_len: usize) -> Result<Ring, RingError> {
        if chain_len == 0 || chain_len > CHAIN_MAX {
            return Err(RingError::ChainLength(chain_len));
        }
        if switches.len() < chain_len {
            return Err(RingError::TooFewSwitches {
                chain: chain_len,
                switches: switches.len(),
            });
        }
        if let Some(&d) = switches
            .iter()
            .enumerate()
            .find_map(|(i, s)| switches[..i].contains(s).then_some(s))
        {
            return Err(RingError::DuplicateSwitch(d));
        }
        let m = switches.len().saturating_mul(vnodes_per_switch);
        if m == 0 || m >= GROUP_ALL as usize {
            return Err(RingError::VirtualNodes(m));
        }
        let owner = |v: usize| switches[v % switches.len()];
        let mut points: Vec<(u64, u16)> = (0..m)
            .map(|v| (mix64(0x6e65_7463_6861_696e ^ v as u64), v as u16))
            .collect();
        points.sort_unstable();
        let mut chains = vec![Chain::default(); m];
        for (i, &(_, v)) in points.iter().enumerate() {
            let mut ids = Vec::with_capacity(chain_len);
            // At most one lap: every switch owns a virtual node, so a lap finds `chain_len`.
            for k in 0..points.len() {
                let s = owner(points[(i + k) % points.len()].1 as usize);
                if !ids.contains(&s) {
                    ids.push(s);
                    if ids.len() == chain_len {
                        break;
                    }
                }
            }
            chains[v as usize] = Chain::new(&ids).expect("chain_len <= CHAIN_MAX");
        }
        let ring = Ring { points, chains };
        ring.invariants(chain_len);
        Ok(ring)
    }

    fn invariants(&self, chain_len: usize) {
        assert_eq!(self.points.len(), self.chains.len());
        assert!(self.points.windows(2).all(|w| w[0] <= w[1]));
        for c in &self.chains {
            assert_eq!(c.len(), chain_len);
            let ids = c.as_slice();
            assert!(
                ids.iter().enumerate().all(|(i, s)| !ids[..i].contains(s)),
                "distinct switches"
            );
        }
    }

    /// The virtual group `key` belongs to.
    pub fn group_of(&self, key: &Key) -> u16 {
        let pos = key.ring_position();
        let i = self.points.partition_point(|&(p, _)| p < pos);
        self.points[i % self.points.len()].1
    }

    /// The chain of `group`, head first; `None` for a group the ring does not have.
    pub fn chain(&self, group: u16) -> Option<Chain> {
        self.chains.get(group as usize).copied()
    }

    /// Replaces the chain of `group` (recovery, paper 5.2); `false` for an unknown group.
    pub fn set_chain(&mut self, group: u16, chain: Chain) -> bool {
        match self.chains.get_mut(group as usize) {
            Some(c) => {
                *c = chain;
                true
            }
            None => false,
        }
    }

    pub fn groups(&self) -> usize {
        self.chains.len()
    }

    /// The groups whose chain includes `switch`.
    pub fn groups_of(&self, switch: u16) -> impl Iterator<Item = u16> + '_ {
        (0..self.chains.len() as u16).filter(move |&g| self.chains[g as usize].as_slice().contains(&switch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_have_distinct_switches_and_spread_the_load() {
        let ring = Ring::new(&[0, 1, 2, 3], 16, 3).unwrap();
        assert_eq!(ring.groups(), 64);
        // A switch is in m (f + 1) / n chains (paper 4.3) on average.
        let per_switch: Vec<usize> = (0..4).map(|s| ring.groups_of(s).count()).collect();
        assert_eq!(per_switch.iter().sum::<usize>(), 64 * 3);
        assert!(per_switch.iter().all(|&c| c > 24), "{per_switch:?}");
        let mut heads = [0usize; 4];
        for g in 0..64 {
            heads[ring.chain(g).unwrap().as_slice()[0] as usize] += 1;
        }
        assert_eq!(heads, [16; 4], "each virtual node heads its own segment");
    }

    #[test]
    fn a_key_maps_to_the_first_virtual_node_at_or_after_it() {
        let ring = Ring::new(&[5, 6, 7], 4, 2).unwrap();
        for i in 0..200u32 {
            let key = Key::new(format!("k{i}").as_bytes()).unwrap();
            let g = ring.group_of(&key);
            let pos = key.ring_position();
            let (p, v) = *ring
                .points
                .iter()
                .find(|(p, _)| *p >= pos)
                .unwrap_or(&ring.points[0]);
            assert_eq!(g, v);
            assert!(p >= pos || pos > ring.points.last().unwrap().0);
        }
    }

    #[test]
    fn impossible_rings_are_refused() {
        assert_eq!(
            Ring::new(&[0, 1], 4, 3),
            Err(RingError::TooFewSwitches {
                chain: 3,
                switches: 2
            })
        );
        assert_eq!(Ring::new(&[0, 1], 4, 0), Err(RingError::ChainLength(0)));
        assert_eq!(Ring::new(&[0, 1], 0, 1), Err(RingError::VirtualNodes(0)));
        assert_eq!(Ring::new(&[0, 0], 1, 1), Err(RingError::DuplicateSwitch(0)));
    }
}
