//! The routing graph the controller reasons on (paper 5.2): switches and processes joined by
//! links, some of which have been reported down.

use onepipe_fabric::{Peer, Wiring};

/// A node of the graph: switches first, then processes, numbered as
/// [`Wiring::node_of_process`] numbers runtime nodes.
pub type NodeId = usize;

/// One end of a link: a node and its port there (a process has one port, 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct End {
    pub node: NodeId,
    pub port: u16,
}

/// A link, undirected: a failure report names one direction, the controller takes the link as
/// down both ways (a half-working link cannot carry the two-phase commit either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub ends: [End; 2],
}

#[derive(Clone, Debug)]
pub struct Graph {
    switches: usize,
    processes: usize,
    links: Vec<Link>,
    /// `adjacent[node]`: (link index, the node at its other end).
    adjacent: Vec<Vec<(usize, NodeId)>>,
    /// `by_end[node][port]`: the link at that port.
    by_end: Vec<Vec<Option<usize>>>,
    /// Top-layer switches: where the controller's management network meets the fabric.
    roots: Vec<NodeId>,
    /// Each node's layer: processes 0, ToRs 1, and so on up.
    layers: Vec<u8>,
}

impl Graph {
    pub fn new(wiring: &Wiring) -> Graph {
        let switches = wiring.switch_count();
        let processes = wiring.process_count();
        let nodes = switches + processes;
        let mut by_end: Vec<Vec<Option<usize>>> = (0..nodes).map(|_| Vec::new()).collect();
        for (s, ports) in wiring.switch_ports.iter().enumerate() {
            by_end[s] = vec![None; ports.len()];
        }
        for p in 0..processes {
            by_end[switches + p] = vec![None];
        }
        let mut links = Vec::new();
        for (s, ports) in wiring.switch_ports.iter().enumerate() {
            for (port, spec) in ports.iter().enumerate() {
                let far = match spec.peer {
                    Peer::Process(p) => End {
                        node: switches + p as usize,
                        port: 0,
                    },
                    // Each switch-to-switch link is listed from both ends: keep it once.
                    Peer::Switch { switch, port: far } if (switch, far as usize) > (s, port) => End {
                        node: switch,
                        port: far,
                    },
                    Peer::Switch { .. } => continue,
                };
                let near = End {
                    node: s,
                    port: port as u16,
                };
                by_end[near.node][near.port as usize] = Some(links.len());
                by_end[far.node][far.port as usize] = Some(links.len());
                links.push(Link { ends: [near, far] });
            }
        }
        let mut adjacent: Vec<Vec<(usize, NodeId)>> = vec![Vec::new(); nodes];
        for (i, l) in links.iter().enumerate() {
            adjacent[l.ends[0].node].push((i, l.ends[1].node));
            adjacent[l.ends[1].node].push((i, l.ends[0].node));
        }
        let mut layers = vec![0u8; nodes];
        for (s, spec) in wiring.topology.switches.iter().enumerate() {
            layers[s] = spec.layer;
        }
        let top = wiring.topology.layers();
        let roots = (0..switches)
            .filter(|&s| wiring.topology.switches[s].layer == top)
            .collect();
        Graph {
            switches,
            processes,
            links,
            adjacent,
            by_end,
            roots,
            layers,
        }
    }

    pub fn switch_count(&self) -> usize {
        self.switches
    }

    pub fn process_count(&self) -> usize {
        self.processes
    }

    pub fn node_of_process(&self, p: u32) -> NodeId {
        self.switches + p as usize
    }

    /// The process at `node`, if it is one.
    pub fn process_at(&self, node: NodeId) -> Option<u32> {
        (node >= self.switches && node < self.switches + self.processes)
            .then(|| (node - self.switches) as u32)
    }

    pub fn link(&self, i: usize) -> &Link {
        &self.links[i]
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// The link at `port` of `node`; `None` for a node or port that does not exist.
    pub fn link_at(&self, node: NodeId, port: u16) -> Option<usize> {
        *self.by_end.get(node)?.get(port as usize)?
    }

    /// The connected components over the links `up` allows, as a component number per node.
    pub fn components(&self, up: impl Fn(usize) -> bool) -> Vec<usize> {
        let nodes = self.adjacent.len();
        let mut component = vec![usize::MAX; nodes];
        let mut stack = Vec::new();
        let mut next = 0;
        for start in 0..nodes {
            if component[start] != usize::MAX {
                continue;
            }
            component[start] = next;
            stack.push(start);
            while let Some(n) = stack.pop() {
                for &(link, far) in &self.adjacent[n] {
                    if up(link) && component[far] == usize::MAX {
                        component[far] = next;
                        stack.push(far);
                    }
                }
            }
            next += 1;
        }
        component
    }

    /// The component the controller reaches: the one holding the most of `counted` processes
    /// (paper 5.2: under a partition, the greedy choice that keeps as many receivers as
    /// possible), ties going to the one with a top-layer switch, then to the lowest process.
    /// A process cut off alone never is: the controller reaches processes through switches
    /// (found over udp: once every process had exited, each looked like a side of its own with
    /// more processes than the fabric's, and the controller waited for reports from it).
    pub fn controller_component(&self, component: &[usize], counted: impl Fn(u32) -> bool) -> usize {
        let count = component.iter().copied().max().map_or(0, |m| m + 1);
        let mut processes = vec![0usize; count];
        let mut first_process = vec![u32::MAX; count];
        for p in 0..self.processes as u32 {
            let c = component[self.node_of_process(p)];
            if counted(p) {
                processes[c] += 1;
                first_process[c] = first_process[c].min(p);
            }
        }
        let mut rooted = vec![false; count];
        for &r in &self.roots {
            rooted[component[r]] = true;
        }
        let mut switched = vec![false; count];
        for &c in &component[..self.switches] {
            switched[c] = true;
        }
        (0..count)
            .max_by_key(|&c| {
                (
                    switched[c],
                    processes[c],
                    rooted[c],
                    std::cmp::Reverse(first_process[c]),
                )
            })
            .unwrap_or(0)
    }

    /// Switch ends of links over which no correct process can ever send again: the link's
    /// lower node reaches no `correct` process downwards over links `up` allows (a rack whose
    /// hosts all failed, a spine above only such racks). A switch with no source in its uplink
    /// half holds its barrier where it was, so the switch above must stop counting it, as it
    /// would a failed link (paper 5.2, Resume).
    pub fn sourceless_inputs(&self, up: impl Fn(usize) -> bool, correct: impl Fn(u32) -> bool) -> Vec<End> {
        let nodes = self.adjacent.len();
        let mut order: Vec<NodeId> = (0..nodes).collect();
        order.sort_by_key(|&n| self.layers[n]);
        let mut source = vec![false; nodes];
        for &n in &order {
            source[n] = match self.process_at(n) {
                Some(p) => correct(p),
                None => self.adjacent[n]
                    .iter()
                    .any(|&(link, far)| self.layers[far] < self.layers[n] && up(link) && source[far]),
            };
        }
        let mut ends = Vec::new();
        for (i, l) in self.links.iter().enumerate() {
            let [a, b] = l.ends;
            let (lower, upper) = if self.layers[a.node] < self.layers[b.node] {
                (a, b)
            } else {
                (b, a)
            };
            if up(i) && !source[lower.node] && upper.node < self.switches {
                ends.push(upper);
            }
        }
        ends
    }

    /// Uplinks of switches whose processes must fail because they can no longer reach every
    /// other correct process the way packets and barriers travel: up to a switch both ends
    /// reach going up, then down (routes and barrier aggregation follow such paths; ordering.md).
    /// Plain connectivity is not enough: with a ToR's other uplinks down, a spine that is
    /// reachable only through another rack (ToR, spine, ToR, spine) carries nothing between
    /// them, yet the controller took both sides as one and removed the last input that
    /// bounded their commit barriers, with no failure timestamp (found by simulator campaigns
    /// with several faults). `correct` picks the processes to keep if they can; the attachment
    /// switches whose processes conflict with the most others (weighted by processes; ties:
    /// fewer processes, then the higher first process) are dropped one at a time until the
    /// rest all reach each other. Their live uplinks come back, as if down.
    pub fn unreachable_uplinks(
        &self,
        up: impl Fn(usize) -> bool,
        correct: impl Fn(u32) -> bool,
    ) -> Vec<usize> {
        // (attachment switch, processes, first process, switches it reaches going up).
        let mut groups: Vec<(NodeId, usize, u32, Vec<bool>)> = Vec::new();
        for p in 0..self.processes as u32 {
            let node = self.node_of_process(p);
            let Some(&(link, tor)) = self.adjacent[node].first() else {
                continue;
            };
            if !correct(p) || !up(link) {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == tor) {
                Some(g) => g.1 += 1,
                None => groups.push((tor, 1, p, self.reach_up(tor, &up))),
            }
        }
        let meets = |a: &[bool], b: &[bool]| a.iter().zip(b).any(|(x, y)| *x && *y);
        let mut dropped = vec![false; groups.len()];
        loop {
            let conflicts = |i: usize| -> usize {
                (0..groups.len())
                    .filter(|&j| !dropped[j] && !meets(&groups[i].3, &groups[j].3))
                    .map(|j| groups[j].1)
                    .sum()
            };
            let worst = (0..groups.len())
                .filter(|&i| !dropped[i])
                .map(|i| (conflicts(i), std::cmp::Reverse(groups[i].1), groups[i].2, i))
                .max();
            match worst {
                Some((c, _, _, i)) if c > 0 => dropped[i] = true,
                _ => break,
            }
        }
        let mut links = Vec::new();
        for (_, g) in groups.iter().enumerate().filter(|(i, _)| dropped[*i]) {
            for &(link, far) in &self.adjacent[g.0] {
                if up(link) && far < self.switches && self.layers[far] > self.layers[g.0] {
                    links.push(link);
                }
            }
        }
        links
    }

    /// The switches `from` reaches going only up over links `up` allows, itself included.
    fn reach_up(&self, from: NodeId, up: &impl Fn(usize) -> bool) -> Vec<bool> {
        let mut reached = vec![false; self.switches];
        reached[from] = true;
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &(link, far) in &self.adjacent[n] {
                if far < self.switches && self.layers[far] > self.layers[n] && up(link) && !reached[far] {
                    reached[far] = true;
                    stack.push(far);
                }
            }
        }
        reached
    }

    /// The links leaving the set of nodes in component `c`.
    pub fn boundary(&self, component: &[usize], c: usize) -> impl Iterator<Item = usize> + '_ {
        let component = component.to_vec();
        (0..self.links.len()).filter(move |&i| {
            let [a, b] = self.links[i].ends;
            (component[a.node] == c) != (component[b.node] == c)
        })
    }
}
