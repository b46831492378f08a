//! Up/down routing in multi-rooted trees with ECMP (paper section 3.1).
//!
//! A packet climbs until it reaches a switch from which its destination ToR lies below, then
//! descends. At every hop all next hops that stay on such a path are equal-cost candidates;
//! which one a packet takes is the switch's choice (per-packet spraying is fine for 1Pipe, which
//! needs only per-link FIFO, paper section 4.1). Because packets only go up then down, the
//! barrier graph of uplink halves and downlink halves is a DAG.

use crate::topology::SwitchIndex;
use crate::wiring::{Peer, PortDirection, Wiring};
use std::sync::Arc;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RoutingError {
    #[error("no up/down path from ToR `{from}` to ToR `{to}`")]
    Unreachable { from: String, to: String },
}

/// Why a destination has no next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRoute {
    UnknownProcess,
    /// The destination is below no live next hop from here (e.g. a packet from above whose
    /// destination is not under this switch).
    NotBelow,
}

/// Global facts every switch's table shares.
#[derive(Debug)]
struct Shared {
    processes_per_host: u32,
    /// ToR ordinal of each host.
    host_tor: Vec<u32>,
}

/// One switch's forwarding table.
#[derive(Clone, Debug)]
pub struct Routes {
    shared: Arc<Shared>,
    /// This switch's ordinal among ToRs, if it is one.
    tor_ordinal: Option<u32>,
    /// Hosts under this ToR and the port of their first process, sorted by host.
    local_hosts: Vec<(u32, u16)>,
    /// Per destination ToR ordinal: range into `choices`.
    by_tor: Vec<(u32, u16)>,
    choices: Vec<u16>,
    /// Per destination ToR ordinal: its `choices` as a bit per port, so that
    /// [`Routes::leads_to`] is O(1). Empty where a choice is port 64 or above (then it searches
    /// `choices`); as large as `by_tor` otherwise.
    port_masks: Vec<u64>,
}

/// Bitset over ToR ordinals.
#[derive(Clone)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn union(&mut self, other: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a |= *b;
        }
    }
}

/// Builds every switch's table. Fails if some ToR cannot reach another over up/down paths.
pub fn build(wiring: &Wiring) -> Result<Vec<Routes>, RoutingError> {
    build_tables(wiring, &|_, _| false, true)
}

/// Tables that avoid failed links (the controller's reroute, paper 2: "reconfigure routing
/// tables on failures"): `down(switch, port)` says a switch-to-switch link is out of use at
/// either end. ToRs cut off from each other get no route (their packets are dropped and
/// counted) instead of an error.
pub fn build_avoiding(wiring: &Wiring, down: &dyn Fn(SwitchIndex, u16) -> bool) -> Vec<Routes> {
    build_tables(wiring, down, false).expect("reachability is not checked")
}

fn build_tables(
    wiring: &Wiring,
    down_link: &dyn Fn(SwitchIndex, u16) -> bool,
    check_reachable: bool,
) -> Result<Vec<Routes>, RoutingError> {
    let topo = &wiring.topology;
    let n = topo.switches.len();
    let mut tor_of_switch = vec![None; n];
    let mut tors = Vec::new();
    for (s, spec) in topo.switches.iter().enumerate() {
        if spec.layer == 1 {
            tor_of_switch[s] = Some(tors.len() as u32);
            tors.push(s);
        }
    }
    let t = tors.len();
    let layers = topo.layers();
    let by_layer = |l: u8| (0..n).filter(move |&s| topo.switches[s].layer == l);
    let switch_neighbors = |s: SwitchIndex, dir: PortDirection| {
        wiring.switch_ports[s]
            .iter()
            .enumerate()
            .filter_map(move |(port, p)| match p.peer {
                Peer::Switch { switch, port: far }
                    if p.direction == dir && !down_link(s, port as u16) && !down_link(switch, far) =>
                {
                    Some((port as u16, switch))
                }
                _ => None,
            })
    };
    // down[s]: ToRs reachable from s going only down.
    let mut down = vec![Bits::new(t); n];
    for l in 1..=layers {
        for s in by_layer(l) {
            let mut bits = Bits::new(t);
            if let Some(o) = tor_of_switch[s] {
                bits.set(o as usize);
            }
            for (_, m) in switch_neighbors(s, PortDirection::Down) {
                bits.union(&down[m]);
            }
            down[s] = bits;
        }
    }
    // updown[s]: ToRs reachable from s over up*down* paths.
    let mut updown = down.clone();
    for l in (1..=layers).rev() {
        for s in by_layer(l) {
            let mut bits = down[s].clone();
            for (_, m) in switch_neighbors(s, PortDirection::Up) {
                bits.union(&updown[m]);
            }
            updown[s] = bits;
        }
    }
    for &a in tors.iter().filter(|_| check_reachable) {
        for (o, &b) in tors.iter().enumerate() {
            if !updown[a].get(o) {
                return Err(RoutingError::Unreachable {
                    from: topo.switches[a].name.clone(),
                    to: topo.switches[b].name.clone(),
                });
            }
        }
    }
    let shared = Arc::new(Shared {
        processes_per_host: wiring.processes_per_host,
        host_tor: topo
            .hosts
            .iter()
            .map(|h| tor_of_switch[h.tor].expect("hosts hang under ToRs"))
            .collect(),
    });
    let mut tables = Vec::with_capacity(n);
    for s in 0..n {
        let mut local_hosts = Vec::new();
        for (port, p) in wiring.switch_ports[s].iter().enumerate() {
            if let Peer::Process(pid) = p.peer
                && pid % wiring.processes_per_host == 0
            {
                local_hosts.push((pid / wiring.processes_per_host, port as u16));
            }
        }
        local_hosts.sort_unstable();
        let mut by_tor = Vec::with_capacity(t);
        let mut choices = Vec::new();
        for dst in 0..t {
            let start = choices.len() as u32;
            if down[s].get(dst) {
                choices.extend(
                    switch_neighbors(s, PortDirection::Down)
                        .filter(|&(_, m)| down[m].get(dst))
                        .map(|(p, _)| p),
                );
            } else {
                choices.extend(
                    switch_neighbors(s, PortDirection::Up)
                        .filter(|&(_, m)| updown[m].get(dst))
                        .map(|(p, _)| p),
                );
            }
            by_tor.push((start, (choices.len() as u32 - start) as u16));
        }
        let port_masks = port_masks(&by_tor, &choices);
        tables.push(Routes {
            shared: shared.clone(),
            tor_ordinal: tor_of_switch[s],
            local_hosts,
            by_tor,
            choices,
            port_masks,
        });
    }
    Ok(tables)
}

/// Each destination ToR's next hops as a bit per port; empty if some port does not fit in 64.
fn port_masks(by_tor: &[(u32, u16)], choices: &[u16]) -> Vec<u64> {
    if choices.iter().any(|&p| p >= 64) {
        return Vec::new();
    }
    by_tor
        .iter()
        .map(|&(start, len)| {
            let ports = &choices[start as usize..start as usize + len as usize];
            ports.iter().fold(0, |mask, &p| mask | 1 << p)
        })
        .collect()
}

impl Routes {
    /// Equal-cost next-hop ports towards `dst` process; never empty on success.
    pub fn next_hops(&self, dst: u32) -> Result<NextHops<'_>, NoRoute> {
        let (host, tor) = self.host_and_tor(dst)?;
        if Some(tor) == self.tor_ordinal {
            return self.local_port(host, dst).map(NextHops::Local);
        }
        let (start, len) = self.by_tor[tor as usize];
        if len == 0 {
            return Err(NoRoute::NotBelow);
        }
        Ok(NextHops::Ecmp(
            &self.choices[start as usize..start as usize + len as usize],
        ))
    }

    /// Whether `port` is one of [`Routes::next_hops`]`(dst)`, in O(1): a switch asks it of
    /// every packet's source and the port it came in on (the reverse path check).
    pub fn leads_to(&self, dst: u32, port: u16) -> bool {
        let Ok((host, tor)) = self.host_and_tor(dst) else {
            return false;
        };
        if Some(tor) == self.tor_ordinal {
            return self.local_port(host, dst) == Ok(port);
        }
        match self.port_masks.get(tor as usize) {
            Some(mask) => port < 64 && mask >> port & 1 == 1,
            None => {
                let (start, len) = self.by_tor[tor as usize];
                self.choices[start as usize..start as usize + len as usize].contains(&port)
            }
        }
    }

    /// The host of process `dst` and the ordinal of its ToR.
    fn host_and_tor(&self, dst: u32) -> Result<(usize, u32), NoRoute> {
        let pph = self.shared.processes_per_host;
        let host = if pph == 1 {
            dst as usize
        } else {
            (dst / pph) as usize
        };
        let tor = *self.shared.host_tor.get(host).ok_or(NoRoute::UnknownProcess)?;
        Ok((host, tor))
    }

    /// The port of process `dst` on `host`, a host under this ToR.
    fn local_port(&self, host: usize, dst: u32) -> Result<u16, NoRoute> {
        let pph = self.shared.processes_per_host;
        let i = self
            .local_hosts
            .binary_search_by_key(&(host as u32), |&(h, _)| h)
            .map_err(|_| NoRoute::UnknownProcess)?;
        Ok(self.local_hosts[i].1 + (dst % pph) as u16)
    }

    pub fn process_count(&self) -> usize {
        self.shared.host_tor.len() * self.shared.processes_per_host as usize
    }
}

/// Where a packet may go next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHops<'a> {
    /// The destination process hangs on this port.
    Local(u16),
    /// Any of these ports.
    Ecmp(&'a [u16]),
}

impl NextHops<'_> {
    /// Picks one candidate by a caller-supplied hash (per-packet spraying or per-flow ECMP).
    pub fn pick(self, hash: u64) -> u16 {
        match self {
            NextHops::Local(p) => p,
            // Multiply-shift instead of a division: uniform enough, and on every packet.
            NextHops::Ecmp(c) => c[(((hash >> 32) * c.len() as u64) >> 32) as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    fn walk(wiring: &Wiring, tables: &[Routes], src: u32, dst: u32, hash: u64) -> Vec<usize> {
        let mut at = wiring.processes[src as usize].tor;
        let mut path = vec![at];
        for _ in 0..16 {
            let port = tables[at]
                .next_hops(dst)
                .unwrap()
                .pick(hash.rotate_left(path.len() as u32));
            match wiring.switch_ports[at][port as usize].peer {
                Peer::Process(p) => {
                    assert_eq!(p, dst);
                    return path;
                }
                Peer::Switch { switch, .. } => {
                    at = switch;
                    path.push(at);
                }
            }
        }
        panic!("routing loop from {src} to {dst}");
    }

    /// Paper section 3.1: shortest paths go up to a lowest common ancestor, then down.
    #[test]
    fn testbed_paths_are_up_then_down_and_shortest() {
        let w = Wiring::new(Topology::paper_testbed(), 1).unwrap();
        let tables = build(&w).unwrap();
        let layer = |s: usize| w.topology.switches[s].layer;
        for src in 0..32 {
            for dst in 0..32 {
                for hash in [0u64, 1, 7, 12345] {
                    let path = walk(&w, &tables, src, dst, hash);
                    let peak = path.iter().map(|&s| layer(s)).max().unwrap();
                    let expected_peak = if src / 8 == dst / 8 {
                        1
                    } else if src / 16 == dst / 16 {
                        2
                    } else {
                        3
                    };
                    assert_eq!(peak, expected_peak, "{src}->{dst}");
                    assert_eq!(path.len(), 2 * peak as usize - 1);
                    let top = path.iter().position(|&s| layer(s) == peak).unwrap();
                    assert!(path[..=top].windows(2).all(|w2| layer(w2[0]) < layer(w2[1])));
                    assert!(path[top..].windows(2).all(|w2| layer(w2[0]) > layer(w2[1])));
                }
            }
        }
    }

    /// `leads_to` answers as `next_hops` does, for every switch, process and port, also where
    /// a switch has more than 64 ports (the search instead of the masks).
    #[test]
    fn leads_to_agrees_with_next_hops() {
        for (topology, pph) in [
            (Topology::paper_testbed(), 1),
            (Topology::leaf_spine(3, 2, 2).unwrap(), 2),
            (Topology::fat_tree(4).unwrap(), 1),
            (Topology::leaf_spine(2, 70, 1).unwrap(), 1),
        ] {
            let w = Wiring::new(topology, pph).unwrap();
            let tables = build(&w).unwrap();
            let processes = w.process_count() as u32;
            for (s, table) in tables.iter().enumerate() {
                for dst in 0..processes + 2 {
                    for port in 0..w.switch_ports[s].len() as u16 + 2 {
                        let expected = match table.next_hops(dst) {
                            Ok(NextHops::Local(p)) => p == port,
                            Ok(NextHops::Ecmp(c)) => c.contains(&port),
                            Err(_) => false,
                        };
                        assert_eq!(
                            table.leads_to(dst, port),
                            expected,
                            "switch {s} dst {dst} port {port}"
                        );
                    }
                }
            }
            let wide = tables.iter().any(|t| t.port_masks.is_empty());
            assert_eq!(wide, w.switch_ports.iter().any(|p| p.len() > 64));
        }
    }

    #[test]
    fn ecmp_offers_every_uplink() {
        let w = Wiring::new(Topology::paper_testbed(), 1).unwrap();
        let tables = build(&w).unwrap();
        let tor = w.processes[0].tor;
        match tables[tor].next_hops(31).unwrap() {
            NextHops::Ecmp(c) => assert_eq!(c.len(), 2),
            other => panic!("expected ECMP, got {other:?}"),
        }
        assert_eq!(tables[tor].next_hops(3).unwrap(), NextHops::Local(3));
        assert_eq!(tables[tor].next_hops(32).unwrap_err(), NoRoute::UnknownProcess);
    }

    #[test]
    fn fat_tree_k4_all_pairs_route() {
        let w = Wiring::new(Topology::fat_tree(4).unwrap(), 2).unwrap();
        let tables = build(&w).unwrap();
        for src in 0..w.process_count() as u32 {
            for dst in 0..w.process_count() as u32 {
                walk(&w, &tables, src, dst, (src * 31 + dst) as u64);
            }
        }
    }

    /// The controller's reroute: with leaf 0's link to spine 0 down, nothing is sent over it
    /// from either end, and leaf 1 reaches leaf 0 only through spine 1.
    #[test]
    fn tables_avoiding_a_failed_link_route_around_it() {
        let wiring = Wiring::new(Topology::leaf_spine(2, 2, 1).unwrap(), 1).unwrap();
        // Switches: leaf0, leaf1, spine0, spine1; hosts 0 (leaf0) and 1 (leaf1).
        let port_to = |a: usize, b: usize| {
            wiring.switch_ports[a]
                .iter()
                .position(|p| matches!(p.peer, Peer::Switch { switch, .. } if switch == b))
                .unwrap() as u16
        };
        let (l0s0, s0l0) = (port_to(0, 2), port_to(2, 0));
        let tables = build_avoiding(&wiring, &|s, p| (s, p) == (0, l0s0));
        assert_eq!(tables[0].next_hops(1).unwrap(), NextHops::Ecmp(&[port_to(0, 3)]));
        assert_eq!(tables[1].next_hops(0).unwrap(), NextHops::Ecmp(&[port_to(1, 3)]));
        assert!(
            tables[2].next_hops(0).is_err(),
            "spine 0 has no way down to leaf 0"
        );
        // Marked at the other end, the same link is avoided the same way.
        let other = build_avoiding(&wiring, &|s, p| (s, p) == (2, s0l0));
        assert_eq!(other[1].next_hops(0).unwrap(), NextHops::Ecmp(&[port_to(1, 3)]));
        // Nothing down: the ordinary tables.
        let all = build_avoiding(&wiring, &|_, _| false);
        assert_eq!(
            all[1].next_hops(0).unwrap(),
            build(&wiring).unwrap()[1].next_hops(0).unwrap()
        );
    }
}
