//! A small deterministic fabric for the crate's tests: cosy switches and hosts on a leaf-spine,
//! every link a fixed delay (no serialization, no queues: the simulator models those), events in
//! time order, crashed nodes silent. Enough to follow the protocol across hosts and switches.

use crate::host::{CosyHost, HostConfig};
use crate::switch::{CosySwitch, SwitchConfig};
use crate::timing::Timing;
use onepipe_fabric::{Node, Peer, PortId, Route, Topology, Wiring, routing};
use onepipe_wire::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A frame reaching (node, port) at a time; the sequence number keeps ties in send order.
type Arrival = (Instant, u64, usize, PortId, Vec<u8>);

/// Switches are nodes 0..switches, process p is node switches + p.
pub struct Net {
    pub wiring: Wiring,
    pub switches: Vec<CosySwitch>,
    pub hosts: Vec<CosyHost>,
    pub down: Vec<bool>,
    pub now: Instant,
    pub hop_delay: Duration,
    events: BinaryHeap<Reverse<Arrival>>,
    seq: u64,
}

/// The timing of a [`Net`] with `hop_delay` per link: four links between hosts on two leaves.
pub fn timing(k: u8, hop_delay: Duration) -> Timing {
    Timing {
        k,
        hrtt: Duration::from_nanos(8 * hop_delay.as_nanos()),
        ..Timing::default()
    }
}

impl Net {
    /// `leaves` leaves, `spines` spines, `per_leaf` processes under each.
    pub fn new(leaves: usize, spines: usize, per_leaf: usize, timing: Timing, seed: u64) -> Net {
        Net::new_with(leaves, spines, per_leaf, timing, seed, |_| {})
    }

    /// The same, with every host's configuration changed by `host`.
    pub fn new_with(
        leaves: usize,
        spines: usize,
        per_leaf: usize,
        timing: Timing,
        seed: u64,
        host: impl Fn(&mut HostConfig),
    ) -> Net {
        let wiring = Wiring::new(Topology::leaf_spine(leaves, spines, per_leaf).unwrap(), 1).unwrap();
        let routes = routing::build(&wiring).unwrap();
        let processes = wiring.process_count() as u32;
        let switch_config = SwitchConfig {
            k: timing.k,
            cleanup_after: timing.delta(1 << 20),
            seed,
            ..SwitchConfig::default()
        };
        let switches = routes
            .into_iter()
            .enumerate()
            .map(|(i, r)| CosySwitch::new(i, &wiring, r, switch_config.clone()))
            .collect();
        let hosts = (0..processes)
            .map(|p| {
                let mut c = HostConfig::new(p, processes, timing.clone());
                c.seed = seed ^ p as u64;
                host(&mut c);
                CosyHost::new(c).unwrap()
            })
            .collect();
        let nodes = wiring.switch_count() + processes as usize;
        Net {
            wiring,
            switches,
            hosts,
            down: vec![false; nodes],
            now: Instant::from_nanos(1_000_000),
            hop_delay: Duration::from_nanos(timing.hrtt.as_nanos() / 8),
            events: BinaryHeap::new(),
            seq: 0,
        }
    }

    fn node_of_host(&self, p: u32) -> usize {
        self.wiring.switch_count() + p as usize
    }

    pub fn crash_host(&mut self, p: u32) {
        let n = self.node_of_host(p);
        self.down[n] = true;
    }

    /// Sends what a node has for its ports now.
    fn drain(&mut self, node: usize) {
        let mut buf = vec![0u8; onepipe_fabric::node::FRAME_MAX];
        let s = self.wiring.switch_count();
        if node < s {
            for port in 0..self.wiring.switch_ports[node].len() as PortId {
                while let Some(n) = self.switches[node].poll_transmit(self.now, port, &mut buf) {
                    self.send(node, port, buf[..n].to_vec());
                }
            }
        } else {
            while let Some(n) = self.hosts[node - s].poll_transmit(self.now, 0, &mut buf) {
                self.send(node, 0, buf[..n].to_vec());
            }
        }
    }

    /// A frame leaving `node` by `port`.
    fn send(&mut self, node: usize, port: PortId, frame: Vec<u8>) {
        let s = self.wiring.switch_count();
        let (to, to_port) = if node < s {
            match self.wiring.switch_ports[node][port as usize].peer {
                Peer::Switch { switch, port } => (switch, port),
                Peer::Process(p) => (s + p as usize, 0),
            }
        } else {
            let spec = self.wiring.processes[node - s];
            (spec.tor, spec.tor_port)
        };
        self.seq += 1;
        self.events
            .push(Reverse((self.now + self.hop_delay, self.seq, to, to_port, frame)));
    }

    fn arrive(&mut self, node: usize, port: PortId, mut frame: Vec<u8>) {
        if self.down[node] {
            return;
        }
        let s = self.wiring.switch_count();
        if node < s {
            let sw = &mut self.switches[node];
            let route = sw.classify(self.now, port, &frame);
            sw.handle_frame(self.now, port, &mut frame, route);
            sw.invariants();
            if let Route::Forward(out) = route {
                self.send(node, out, frame);
            }
        } else {
            let h = &mut self.hosts[node - s];
            h.handle_frame(self.now, 0, &mut frame, Route::Consume);
            h.invariants();
        }
        self.drain(node);
    }

    /// The earliest timer of a live node.
    fn next_timer(&self) -> Option<(Instant, usize)> {
        let s = self.wiring.switch_count();
        let switches = self
            .switches
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.poll_timeout().map(|t| (t, i)));
        let hosts = self
            .hosts
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.poll_timeout().map(|t| (t, s + i)));
        switches.chain(hosts).filter(|&(_, n)| !self.down[n]).min()
    }

    fn fire(&mut self, node: usize) {
        let s = self.wiring.switch_count();
        if node < s {
            self.switches[node].handle_timeout(self.now);
        } else {
            self.hosts[node - s].handle_timeout(self.now);
        }
        self.drain(node);
    }

    /// Lets host `p` send what its application just submitted.
    pub fn kick(&mut self, p: u32) {
        let n = self.node_of_host(p);
        if !self.down[n] {
            self.drain(n);
        }
    }

    /// Runs every event and timer up to `until`.
    pub fn run_until(&mut self, until: Instant) {
        loop {
            let event = self.events.peek().map(|Reverse(e)| e.0);
            let timer = self.next_timer();
            let next = match (event, timer) {
                (Some(e), Some((t, _))) => e.min(t),
                (Some(e), None) => e,
                (None, Some((t, _))) => t,
                (None, None) => break,
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if let Some((t, node)) = timer
                && t <= next
            {
                self.fire(node);
                continue;
            }
            let Reverse((_, _, node, port, frame)) = self.events.pop().expect("peeked");
            self.arrive(node, port, frame);
        }
        self.now = self.now.max(until);
    }

    pub fn reserved(&self) -> usize {
        self.switches.iter().map(|s| s.vlinks().reserved_total()).sum()
    }
}
