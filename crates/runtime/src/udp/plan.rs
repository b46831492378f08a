//! Where each node of a topology listens in the udp runtime.
//!
//! A topology file may give a switch or a host an `addr` (docs/topology.md). Everything else
//! gets a loopback address of its own, so that a whole topology runs on one machine with no
//! configuration: switch `i` at `127.1.x.y:47000`, process `p` at `127.2.x.y:47000`, with
//! `x.y` counting from `0.1` (Linux routes all of 127.0.0.0/8 to the loopback interface).
//! Process `k` of a host with an explicit address listens on the port `k` above it. A
//! controller named without an address listens at `127.3.0.1:47000`.

use onepipe_fabric::wiring::Wiring;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub const DEFAULT_PORT: u16 = 47_000;
/// Addresses per /16 of the default plan; host parts 1..=250 keep clear of .0 and .255.
const PER_SUBNET: usize = 250;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressPlan {
    pub switches: Vec<SocketAddr>,
    pub processes: Vec<SocketAddr>,
    /// Where the controller listens, if the topology names one.
    pub controller: Option<SocketAddr>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("address {addr} is given to both {first} and {second}")]
    DuplicateAddress {
        addr: SocketAddr,
        first: String,
        second: String,
    },
    #[error("host `{host}` at {addr} has {processes} processes: ports past 65535")]
    PortOverflow {
        host: String,
        addr: SocketAddr,
        processes: u32,
    },
    #[error("the default plan has room for {max} nodes of a kind; give addresses in the file")]
    TooManyNodes { max: usize },
}

fn loopback(second_octet: u8, index: usize) -> Result<SocketAddr, PlanError> {
    let max = PER_SUBNET * 256;
    if index >= max {
        return Err(PlanError::TooManyNodes { max });
    }
    let ip = Ipv4Addr::new(
        127,
        second_octet,
        (index / PER_SUBNET) as u8,
        (1 + index % PER_SUBNET) as u8,
    );
    Ok(SocketAddr::new(IpAddr::V4(ip), DEFAULT_PORT))
}

/// Where node `i` beyond the wiring's (a host representative) listens in the default plan:
/// `127.4.x.y`.
pub fn extra_node(i: usize) -> Result<SocketAddr, PlanError> {
    loopback(4, i)
}

impl AddressPlan {
    pub fn new(wiring: &Wiring) -> Result<AddressPlan, PlanError> {
        let t = &wiring.topology;
        let mut owners: HashMap<SocketAddr, String> = HashMap::new();
        let mut claim = |addr: SocketAddr, who: String| match owners.get(&addr) {
            Some(first) => Err(PlanError::DuplicateAddress {
                addr,
                first: first.clone(),
                second: who,
            }),
            None => {
                owners.insert(addr, who);
                Ok(addr)
            }
        };
        let mut switches = Vec::with_capacity(t.switches.len());
        for (i, s) in t.switches.iter().enumerate() {
            let addr = match s.addr {
                Some(a) => a,
                None => loopback(1, i)?,
            };
            switches.push(claim(addr, format!("switch `{}`", s.name))?);
        }
        let mut processes = Vec::with_capacity(wiring.process_count());
        for (p, spec) in wiring.processes.iter().enumerate() {
            let host = &t.hosts[spec.host];
            let addr = match host.addr {
                Some(base) => {
                    let k = p as u32 % wiring.processes_per_host;
                    let port = base.port() as u32 + k;
                    let port = u16::try_from(port).map_err(|_| PlanError::PortOverflow {
                        host: host.name.clone(),
                        addr: base,
                        processes: wiring.processes_per_host,
                    })?;
                    SocketAddr::new(base.ip(), port)
                }
                None => loopback(2, p)?,
            };
            processes.push(claim(addr, format!("process {p} (host `{}`)", host.name))?);
        }
        let controller = match &t.controller {
            Some(c) => Some(claim(c.addr.unwrap_or(loopback(3, 0)?), "the controller".into())?),
            None => None,
        };
        Ok(AddressPlan {
            switches,
            processes,
            controller,
        })
    }

    /// The address of runtime node `node` (switches first, then processes, as in [`Wiring`]).
    pub fn node(&self, node: usize) -> SocketAddr {
        match node.checked_sub(self.switches.len()) {
            None => self.switches[node],
            Some(p) => self.processes[p],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_fabric::Topology;

    #[test]
    fn defaults_are_distinct_loopback_addresses_and_files_override_them() {
        let w = Wiring::new(Topology::paper_testbed(), 2).unwrap();
        let plan = AddressPlan::new(&w).unwrap();
        assert_eq!(plan.switches[0], "127.1.0.1:47000".parse().unwrap());
        assert_eq!(plan.processes[63], "127.2.0.64:47000".parse().unwrap());
        assert_eq!(plan.node(w.switch_count()), plan.processes[0]);

        let file = r#"
            [[switch]]
            name = "tor"
            addr = "10.0.0.1:5000"
            [[host]]
            name = "a"
            switch = "tor"
            addr = "10.0.0.2:6000"
            [[host]]
            name = "b"
            switch = "tor"
        "#;
        let w = Wiring::new(Topology::from_toml(file).unwrap(), 3).unwrap();
        let plan = AddressPlan::new(&w).unwrap();
        assert_eq!(plan.switches[0], "10.0.0.1:5000".parse().unwrap());
        assert_eq!(plan.processes[2], "10.0.0.2:6002".parse().unwrap());
        assert_eq!(plan.processes[3], "127.2.0.4:47000".parse().unwrap());
        assert_eq!(plan.controller, None);

        let named = |table: &str| {
            let w = Wiring::new(Topology::from_toml(&format!("{file}\n{table}")).unwrap(), 1).unwrap();
            AddressPlan::new(&w)
        };
        assert_eq!(
            named("[controller]").unwrap().controller,
            Some("127.3.0.1:47000".parse().unwrap())
        );
        assert_eq!(
            named("[controller]\naddr = \"10.0.0.9:4000\"")
                .unwrap()
                .controller,
            Some("10.0.0.9:4000".parse().unwrap())
        );
    }

    #[test]
    fn a_controller_on_a_nodes_address_is_rejected() {
        let file = r#"
            [[switch]]
            name = "tor"
            hosts = 1
            [controller]
            addr = "127.1.0.1:47000"
        "#;
        let w = Wiring::new(Topology::from_toml(file).unwrap(), 1).unwrap();
        assert_eq!(
            AddressPlan::new(&w).unwrap_err().to_string(),
            "address 127.1.0.1:47000 is given to both switch `tor` and the controller"
        );
        let bad = Topology::from_toml("[[switch]]\nname = \"tor\"\nhosts = 1\n[controller]\naddr = \"x\"");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("`controller` has address `x`")
        );
        let unknown = Topology::from_toml("[[switch]]\nname = \"tor\"\nhosts = 1\n[controller]\nport = 1");
        assert!(matches!(unknown, Err(onepipe_fabric::TopologyError::Syntax(_))));
    }

    #[test]
    fn an_address_given_twice_is_rejected_naming_both() {
        let file = r#"
            [[switch]]
            name = "tor"
            addr = "127.0.0.1:5000"
            [[host]]
            name = "a"
            switch = "tor"
            addr = "127.0.0.1:4999"
        "#;
        let w = Wiring::new(Topology::from_toml(file).unwrap(), 2).unwrap();
        let err = AddressPlan::new(&w).unwrap_err();
        assert_eq!(
            err.to_string(),
            "address 127.0.0.1:5000 is given to both switch `tor` and process 1 (host `a`)"
        );
    }
}
