//! A whole 1Pipe system on the inproc runtime: one switch pipeline running 1Pipe's [`Switch`]
//! per switch of the topology and one [`HostNode`] per process, wired as the topology says;
//! with host representatives (`Incarnation::Host`), one [`Representative`] per switch after
//! the processes, on a link to its switch.

use crate::control::ChannelLink;
use crate::control_node::Mgmt;
use crate::host::{Application, HostNode};
use onepipe_fabric::{DirectedLink, Either, Peer, PortDirection, RoutingError, Wiring, routing};
use onepipe_proto::Incarnation;
use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_proto::representative::{FabricNode, Representative, UPLINK};
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_runtime::inproc::{Clock, InprocConfig, InprocError, Runtime};
use onepipe_wire::{Duration, Instant};

/// Any participant of the system: switches (and representatives) on the left, processes on
/// the right, each with its channel to the controller when there is one.
pub type Member<A> = Mgmt<Either<Box<FabricNode>, Box<HostNode<A>>>>;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error(transparent)]
    Routing(#[from] RoutingError),
    #[error(transparent)]
    Runtime(#[from] InprocError),
}

/// Knobs shared by every node.
#[derive(Clone, Debug)]
pub struct SystemConfig {
    pub switch: SwitchConfig,
    /// Template for every endpoint; process id, count, port and clock offset are filled in.
    pub endpoint: EndpointConfig,
    pub inproc: InprocConfig,
    /// Extra one-way delay added to every link, on top of the topology's own.
    pub link_delay: Duration,
}

/// Node index of process `p` in the runtime: switches come first.
pub fn node_of_process(wiring: &Wiring, p: u32) -> usize {
    wiring.node_of_process(p)
}

/// Builds nodes and links and starts the runtime. `apps[p]` drives process `p`;
/// `clock_offsets_ns[p]` is its skew.
pub fn start<A: Application>(
    wiring: &Wiring,
    config: &SystemConfig,
    apps: Vec<A>,
    clock_offsets_ns: &[i64],
    clock: Clock,
) -> Result<Runtime<Member<A>>, SystemError> {
    start_managed(wiring, config, apps, clock_offsets_ns, clock, None)
}

/// [`start`], with every node connected to a controller when `control` gives their ports
/// ([`crate::control::ControlPlane::start`]).
pub fn start_managed<A: Application>(
    wiring: &Wiring,
    config: &SystemConfig,
    apps: Vec<A>,
    clock_offsets_ns: &[i64],
    clock: Clock,
    control: Option<Vec<ChannelLink>>,
) -> Result<Runtime<Member<A>>, SystemError> {
    let mut nodes = build(wiring, config, apps, clock_offsets_ns, clock.now())?;
    if let Some(ports) = control {
        attach(&mut nodes, ports);
    }
    let links = links(wiring, config);
    let worker_of = assign_workers(wiring, config, config.inproc.workers.max(1));
    Ok(Runtime::start(nodes, &links, &worker_of, &config.inproc, clock)?)
}

/// Every node of the system, switches first (as [`Wiring::node_of_process`] numbers them),
/// whatever runtime drives them.
pub fn build<A: Application>(
    wiring: &Wiring,
    config: &SystemConfig,
    apps: Vec<A>,
    clock_offsets_ns: &[i64],
    now: Instant,
) -> Result<Vec<Member<A>>, RoutingError> {
    assert_eq!(apps.len(), wiring.process_count(), "one app per process");
    let tables = routing::build(wiring)?;
    let mut nodes = Vec::with_capacity(wiring.switch_count() + wiring.process_count());
    for (s, routes) in tables.iter().enumerate() {
        let switch = Switch::new(s, wiring, routes.clone(), config.switch.clone(), now).into_node();
        nodes.push(fabric_member(Either::Left(Box::new(switch))));
    }
    let count = wiring.process_count() as u32;
    for (p, app) in apps.into_iter().enumerate() {
        let spec = wiring.processes[p];
        let mut ec = config.endpoint.clone();
        ec.process = p as u32;
        ec.process_count = count;
        ec.tor_port = spec.tor_port;
        ec.clock_offset_ns = clock_offsets_ns.get(p).copied().unwrap_or(0);
        nodes.push(Mgmt::unmanaged(Either::Right(Box::new(HostNode {
            endpoint: Endpoint::new(ec, now),
            app,
        }))));
    }
    if config.switch.incarnation == Incarnation::Host {
        for (s, routes) in tables.into_iter().enumerate() {
            let rep = Representative::new(s, wiring, routes, config.switch.clone(), now);
            nodes.push(fabric_member(Either::Right(Box::new(rep))));
        }
    }
    Ok(nodes)
}

fn fabric_member<A: Application>(node: FabricNode) -> Member<A> {
    Mgmt::unmanaged(Either::Left(Box::new(node)))
}

/// Every link between the system's nodes, each with the topology's delay plus
/// `config.link_delay`: the wiring's, and with host representatives, each switch's link to its
/// representative (node `switches + processes + s`, at the switch's `representative_port`).
pub fn links(wiring: &Wiring, config: &SystemConfig) -> Vec<DirectedLink> {
    let mut links = wiring.directed_links(config.link_delay);
    if config.switch.incarnation != Incarnation::Host {
        return links;
    }
    let first = wiring.switch_count() + wiring.process_count();
    for (s, ports) in wiring.switch_ports.iter().enumerate() {
        // A switch of 65534 ports or more has no representative (its beacons go nowhere).
        let Some(port) = onepipe_proto::representative_port(ports.len()) else {
            continue;
        };
        let delay = config.link_delay;
        links.push(DirectedLink {
            from: (s, port),
            to: (first + s, UPLINK),
            delay,
        });
        links.push(DirectedLink {
            from: (first + s, UPLINK),
            to: (s, port),
            delay,
        });
    }
    links
}

/// Connects every node to the controller: `ports` as [`crate::control::ControlPlane::start`]
/// gives them, in node order.
pub fn attach<A: Application>(nodes: &mut [Member<A>], ports: Vec<ChannelLink>) {
    for (n, p) in nodes.iter_mut().zip(ports) {
        n.attach(p);
    }
}

/// Keeps each rack (ToR and its processes) on one worker, and each higher switch on the worker
/// that holds most of the switches below it (ties go round-robin), so that as many links as
/// possible stay within one worker's cache: a link between workers bounces cache lines.
fn assign_workers(wiring: &Wiring, config: &SystemConfig, workers: usize) -> Vec<usize> {
    let topo = &wiring.topology;
    let tors: Vec<usize> = (0..topo.switches.len())
        .filter(|&s| topo.switches[s].layer == 1)
        .collect();
    let mut worker_of = vec![0; wiring.switch_count() + wiring.process_count()];
    for (ordinal, &t) in tors.iter().enumerate() {
        worker_of[t] = ordinal * workers / tors.len();
    }
    let mut tie_breaker = 0;
    for layer in 2..=topo.layers() {
        for s in (0..topo.switches.len()).filter(|&s| topo.switches[s].layer == layer) {
            let mut votes = vec![0usize; workers];
            for port in &wiring.switch_ports[s] {
                if let (Peer::Switch { switch, .. }, PortDirection::Down) = (port.peer, port.direction) {
                    votes[worker_of[switch]] += 1;
                }
            }
            let best = votes.iter().copied().max().unwrap_or(0);
            let candidates: Vec<usize> = (0..workers).filter(|&w| votes[w] == best).collect();
            worker_of[s] = candidates[tie_breaker % candidates.len()];
            tie_breaker += 1;
        }
    }
    for (p, spec) in wiring.processes.iter().enumerate() {
        worker_of[node_of_process(wiring, p as u32)] = worker_of[spec.tor];
    }
    // A representative beside its switch.
    if config.switch.incarnation == Incarnation::Host {
        for s in 0..wiring.switch_count() {
            worker_of.push(worker_of[s]);
        }
    }
    worker_of
}
