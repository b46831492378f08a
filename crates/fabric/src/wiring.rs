//! Wiring: a topology expanded into ports, with every process attached to its ToR.
//!
//! Paper section 6.1: "Processes within a host are exposed directly to the Top-of-Rack switch",
//! so each process is its own endpoint with its own link to the ToR, and the ToR aggregates
//! barriers over processes, not hosts. Process `p` lives on host `p / processes_per_host`.
//!
//! Ports of a switch are numbered: process ports first (ToRs only), then links to lower
//! switches, then links to upper switches. A packet carries, as its link id, the port number at
//! the receiving end, so a receiver that shares one socket among links (the udp runtime) knows
//! the input link without a lookup.

use crate::node::PortId;
use crate::topology::{HostIndex, SwitchIndex, Topology};
use onepipe_wire::Duration;

/// Where the peer of a port sits relative to the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortDirection {
    /// A process or a lower-layer switch: packets from it enter the uplink half.
    Down,
    /// A higher-layer switch: packets from it enter the downlink half.
    Up,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Process(u32),
    Switch { switch: SwitchIndex, port: u16 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortSpec {
    pub peer: Peer,
    pub direction: PortDirection,
    pub delay_ns: u64,
}

impl PortSpec {
    /// The port number at the peer's end, stamped as link id on packets sent here.
    pub fn peer_port(&self) -> u16 {
        match self.peer {
            Peer::Process(_) => 0,
            Peer::Switch { port, .. } => port,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessSpec {
    pub host: HostIndex,
    pub tor: SwitchIndex,
    pub tor_port: u16,
    pub delay_ns: u64,
}

#[derive(Clone, Debug)]
pub struct Wiring {
    pub topology: Topology,
    pub processes_per_host: u32,
    pub switch_ports: Vec<Vec<PortSpec>>,
    pub processes: Vec<ProcessSpec>,
}

pub use crate::limits::{PROCESSES_MAX, PROCESSES_PER_HOST_MAX};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WiringError {
    #[error("processes per host must be at least 1")]
    NoProcesses,
    #[error("{0} processes, more than the limit of {PROCESSES_MAX} (docs/topology.md)")]
    TooManyProcesses(usize),
    #[error("{0} processes per host, more than the limit of {PROCESSES_PER_HOST_MAX} (docs/topology.md)")]
    TooManyProcessesPerHost(u32),
    #[error("switch `{name}` would have {ports} ports with these processes; at most 65535 are supported")]
    TooManyPorts { name: String, ports: usize },
}

/// Refuses a switch of more ports than a port number holds, counted before the ports are
/// made.
fn check_ports(topology: &Topology, processes_per_host: u32) -> Result<(), WiringError> {
    let mut ports = vec![0usize; topology.switches.len()];
    for h in &topology.hosts {
        ports[h.tor] += processes_per_host as usize;
    }
    for l in &topology.links {
        ports[l.lower] += 1;
        ports[l.upper] += 1;
    }
    match ports.iter().position(|&p| p > u16::MAX as usize) {
        Some(s) => Err(WiringError::TooManyPorts {
            name: topology.switches[s].name.clone(),
            ports: ports[s],
        }),
        None => Ok(()),
    }
}

impl Wiring {
    pub fn new(topology: Topology, processes_per_host: u32) -> Result<Wiring, WiringError> {
        if processes_per_host == 0 {
            return Err(WiringError::NoProcesses);
        }
        if processes_per_host > PROCESSES_PER_HOST_MAX {
            return Err(WiringError::TooManyProcessesPerHost(processes_per_host));
        }
        let total = topology.hosts.len().saturating_mul(processes_per_host as usize);
        if total > PROCESSES_MAX {
            return Err(WiringError::TooManyProcesses(total));
        }
        check_ports(&topology, processes_per_host)?;
        let mut switch_ports: Vec<Vec<PortSpec>> = vec![Vec::new(); topology.switches.len()];
        let mut processes = Vec::with_capacity(total);
        for (host, h) in topology.hosts.iter().enumerate() {
            for k in 0..processes_per_host {
                let pid = host as u32 * processes_per_host + k;
                let ports = &mut switch_ports[h.tor];
                processes.push(ProcessSpec {
                    host,
                    tor: h.tor,
                    tor_port: ports.len() as u16,
                    delay_ns: h.delay_ns,
                });
                ports.push(PortSpec {
                    peer: Peer::Process(pid),
                    direction: PortDirection::Down,
                    delay_ns: h.delay_ns,
                });
            }
        }
        // Down-facing links first on every switch, then up-facing ones, so port numbers group by
        // direction; the peer port numbers are filled in a second pass.
        let mut link_ports = Vec::with_capacity(topology.links.len());
        for l in &topology.links {
            let at_upper = switch_ports[l.upper].len();
            switch_ports[l.upper].push(PortSpec {
                peer: Peer::Switch {
                    switch: l.lower,
                    port: 0,
                },
                direction: PortDirection::Down,
                delay_ns: l.delay_ns,
            });
            link_ports.push(at_upper);
        }
        for (i, l) in topology.links.iter().enumerate() {
            let at_lower = switch_ports[l.lower].len();
            switch_ports[l.lower].push(PortSpec {
                peer: Peer::Switch {
                    switch: l.upper,
                    port: link_ports[i] as u16,
                },
                direction: PortDirection::Up,
                delay_ns: l.delay_ns,
            });
            switch_ports[l.upper][link_ports[i]].peer = Peer::Switch {
                switch: l.lower,
                port: at_lower as u16,
            };
        }
        assert!(
            switch_ports.iter().all(|p| p.len() <= u16::MAX as usize),
            "port counts were checked before the ports were made"
        );
        Ok(Wiring {
            topology,
            processes_per_host,
            switch_ports,
            processes,
        })
    }

    pub fn process_count(&self) -> usize {
        self.processes.len()
    }

    pub fn switch_count(&self) -> usize {
        self.switch_ports.len()
    }

    /// Node index of process `p` in a runtime: switches come first, then processes.
    pub fn node_of_process(&self, p: u32) -> usize {
        self.switch_count() + p as usize
    }

    /// Every directed link of the fabric between runtime nodes (numbered as in
    /// [`Wiring::node_of_process`]), each with its topology delay plus `extra_delay`.
    pub fn directed_links(&self, extra_delay: Duration) -> Vec<DirectedLink> {
        let mut links = Vec::new();
        for (s, ports) in self.switch_ports.iter().enumerate() {
            for (port, spec) in ports.iter().enumerate() {
                let delay = Duration::from_nanos(spec.delay_ns) + extra_delay;
                let to = match spec.peer {
                    Peer::Process(p) => {
                        // The process's uplink, in the other direction.
                        links.push(DirectedLink {
                            from: (self.node_of_process(p), 0),
                            to: (s, port as PortId),
                            delay,
                        });
                        (self.node_of_process(p), 0)
                    }
                    Peer::Switch {
                        switch,
                        port: peer_port,
                    } => (switch, peer_port),
                };
                links.push(DirectedLink {
                    from: (s, port as PortId),
                    to,
                    delay,
                });
            }
        }
        links
    }
}

/// A directed link from one runtime node's port to another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectedLink {
    pub from: (usize, PortId),
    pub to: (usize, PortId),
    pub delay: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_point_at_each_other() {
        let w = Wiring::new(Topology::paper_testbed(), 2).unwrap();
        assert_eq!(w.process_count(), 64);
        for (s, ports) in w.switch_ports.iter().enumerate() {
            for (p, spec) in ports.iter().enumerate() {
                match spec.peer {
                    Peer::Switch { switch, port } => {
                        let back = w.switch_ports[switch][port as usize];
                        assert_eq!(
                            back.peer,
                            Peer::Switch {
                                switch: s,
                                port: p as u16
                            }
                        );
                        assert_ne!(back.direction, spec.direction);
                    }
                    Peer::Process(pid) => {
                        let proc_ = w.processes[pid as usize];
                        assert_eq!((proc_.tor, proc_.tor_port as usize), (s, p));
                        assert_eq!(spec.direction, PortDirection::Down);
                    }
                }
            }
        }
        // A ToR of the testbed: 8 hosts x 2 processes + 2 spines.
        assert_eq!(w.switch_ports[w.processes[0].tor].len(), 18);
    }

    #[test]
    fn rejects_zero_processes() {
        assert_eq!(
            Wiring::new(Topology::paper_testbed(), 0).unwrap_err(),
            WiringError::NoProcesses
        );
    }
}
