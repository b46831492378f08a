//! 1Pipe over the udp runtime: a switch as its own OS process ([`run_switch`], behind
//! `onepipe switch`), and application processes that join a running fabric ([`join`]).
//!
//! Every participant reads the same topology file and derives the same wiring, routes and
//! addresses from it ([`AddressPlan`]), so nothing is negotiated at start. Time is the system
//! clock ([`Clock::from_system_time`]): on one machine every process shares it; across
//! machines, synchronize them with PTP or chrony (skew costs latency, never order).
//!
//! A process that has not joined yet holds its ToR's barrier back until the switch declares
//! its link dead (`dead_after_intervals`), and rejoins when it starts: [`join`] returns once
//! the ToR has heard it, since until then the ToR drops what is sent to it. The reliable service's
//! commit barrier waits for every process of the topology. When the topology names a
//! controller ([`run_controller`], `onepipe controller`), a process that joined and then went
//! silent is declared failed by it and no longer waited for (paper 5.2). Every switch and
//! process then reports to it over a management port of its own (one past its fabric ports,
//! [`mgmt_port`]) that leads to the controller's address; the controller's port `i` leads to
//! node `i`.

#![allow(clippy::disallowed_methods)] // threads and the system clock live here

use crate::api::{HandleLimits, Process, StopOnDrop, link};
use crate::control_node::{ControlEvent, ControllerNode, Mgmt, RouteCache, mgmt_port};
use crate::host::{Application, HostNode};
pub use crate::status::{LinkStatus, PROCESS_PEER, Skew, SwitchStatus, skew};
use crate::system::{Member, SystemConfig};
use onepipe_fabric::{Peer, RoutingError, Topology, Wiring, WiringError, routing};
use onepipe_proto::controller::store::{Store, StoreError};
use onepipe_proto::controller::{ControllerConfig, Member as ControlMember};
use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_proto::switch::{OnePipeProgram, Switch, SwitchConfig, SwitchCounters, SwitchNode};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::local::LocalError;
use onepipe_runtime::udp::plan::{AddressPlan, PlanError};
use onepipe_runtime::udp::{Links, PATH_FRAME_BYTES_MAX, UdpConfig, UdpCounters, UdpDriver, UdpError};
use onepipe_wire::Duration;
use onepipe_wire::packet::HEADER_LEN;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// The default beacon interval over udp, coarser than the inproc runtime's 50 us: each
/// datagram costs a syscall of several microseconds, and each node is a thread that wakes for
/// every beacon tick.
pub const BEACON_INTERVAL: Duration = Duration::from_micros(500);

/// How far ahead of its clock a host promises its barrier at the end of each visit over udp
/// (docs/ordering.md, "Promises"). Nodes share threads here, and a loaded thread's pass over
/// them takes milliseconds (3-7 ms at 32 processes on two cores); without a promise every
/// receiver waits for the host visited longest ago, so ordered messages waited about one
/// pass, long enough to leave the cache. The lead needs to cover a pass; more costs nothing
/// measurable (3, 10 and 20 ms gave the same ratios), less covers only part of one.
pub const PROMISE_LEAD: Duration = Duration::from_millis(5);

/// The floor of the reliable service's retransmission timeout over udp, far above the inproc
/// runtime's 100 us. Nodes share threads, and a loaded thread's pass over its nodes takes
/// milliseconds (docs/notes/2026-11-performance-log.md), so round trips swing by milliseconds from one packet to
/// the next, faster than the RTT estimate follows. At 100 us, saturated all-to-all runs timed
/// out ~9% of their packets without losing any datagram, and each timeout cut its window to
/// one packet: 8 processes delivered 1.1-1.6 M msg/s, 1.8-2.0 M at a 2-5 ms floor; at 32
/// processes a 5 ms floor still timed out ~3,000 times per 2 s run, 10 ms ~100 times. What
/// it delays is the repair of a lost last packet, which over udp here is rare (the links'
/// credits keep them lossless); a later packet's selective ACK repairs the others sooner.
pub const RTO_MIN: Duration = Duration::from_millis(10);

/// How every participant of a udp fabric is configured; all must agree on the topology,
/// processes per host, beacon interval and MTU.
#[derive(Clone, Debug)]
pub struct UdpOptions {
    pub topology: Topology,
    pub processes_per_host: u32,
    /// Each datagram costs a syscall of several microseconds here, so the default is coarser
    /// than the inproc runtime's 50 us: ordering costs half an interval of latency.
    pub beacon_interval: Duration,
    pub dead_after_intervals: u32,
    /// The largest frame an endpoint sends (header included); longer messages are fragmented.
    /// The default, [`PATH_FRAME_BYTES_MAX`] (1182), fits in a datagram on any path between
    /// machines, down to IPv6's minimum MTU: a frame no datagram of some path could carry
    /// would be dropped there on every retransmission.
    pub mtu_bytes: usize,
    pub message_bytes_max: usize,
    pub send_queue_max: usize,
    pub recv_queue_max: usize,
    /// Added to this participant's clock, to test skew.
    pub clock_offset_ns: i64,
    /// Added to a switch's clock, to test skew across machines: the switch then reports a
    /// clock of its own ([`SwitchStatus::clock_id`]).
    pub switch_clock_offset_ns: i64,
    pub ecmp_seed: u64,
    pub udp: UdpConfig,
    /// How long [`join`] waits for the process's ToR to answer before it gives up; zero
    /// returns at once (what is sent to the process before its ToR hears it is then lost).
    pub join_timeout: Duration,
    /// The reliable service's retransmission timeout floor ([`RTO_MIN`]).
    pub rto_min: Duration,
    /// Promise mode ([`PROMISE_LEAD`]; `None` turns it off).
    pub promise_lead: Option<Duration>,
    /// How far ahead of a switch's or process's clock, beyond the promise lead, a barrier or
    /// timestamp may be before it is refused: the fabric's clock skew bound plus a margin
    /// ([`onepipe_proto::plausible::TIME_AHEAD_MAX`]; docs/ordering.md, "Implausible time").
    pub time_ahead_max: Duration,
    /// Where barriers are aggregated (paper 6.2; docs/incarnations.md).
    pub incarnation: onepipe_proto::Incarnation,
}

fn topology_cpu_delay(topology: &Topology) -> Option<Duration> {
    topology.switch_cpu_delay_ns.map(Duration::from_nanos)
}

impl UdpOptions {
    pub fn new(topology: Topology) -> UdpOptions {
        UdpOptions {
            processes_per_host: 1,
            beacon_interval: BEACON_INTERVAL,
            dead_after_intervals: 1_000,
            mtu_bytes: PATH_FRAME_BYTES_MAX,
            message_bytes_max: 1 << 20,
            send_queue_max: 1024,
            recv_queue_max: 65_536,
            clock_offset_ns: 0,
            switch_clock_offset_ns: 0,
            ecmp_seed: 1,
            udp: UdpConfig::default(),
            join_timeout: Duration::from_secs(10),
            rto_min: RTO_MIN,
            promise_lead: Some(PROMISE_LEAD),
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            // From the file, which every switch and process of the fabric reads.
            incarnation: match topology_cpu_delay(&topology) {
                Some(delay) => onepipe_proto::Incarnation::SwitchCpu { delay },
                None => onepipe_proto::Incarnation::Chip,
            },
            topology,
        }
    }

    fn switch_config(&self) -> SwitchConfig {
        SwitchConfig {
            beacon_interval: self.beacon_interval,
            dead_after_intervals: self.dead_after_intervals.max(1),
            ecmp_seed: self.ecmp_seed,
            promise_lead: self.promise_lead.unwrap_or(Duration::ZERO),
            time_ahead_max: self.time_ahead_max,
            incarnation: self.incarnation,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UdpSystemError {
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error(transparent)]
    Routing(#[from] RoutingError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("the topology has no switch named `{name}` ({hint})")]
    UnknownSwitch { name: String, hint: String },
    #[error("process {process} does not exist: the topology has {count}")]
    UnknownProcess { process: u32, count: usize },
    #[error("the beacon interval must be positive")]
    ZeroBeaconInterval,
    #[error("the topology names no controller: add a [controller] table (docs/udp.md)")]
    NoController,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the controller has a port per node and {0} nodes are too many")]
    TooManyNodes(usize),
    #[error(
        "process {process}: its switch at {tor} did not answer within {waited_ms} ms; is the \
         fabric up (`onepipe up`), and does this process have its key (docs/udp.md, \
         \"Authentication\")?"
    )]
    NoAnswer {
        process: u32,
        tor: std::net::SocketAddr,
        waited_ms: u64,
    },
    #[error(transparent)]
    Key(#[from] onepipe_runtime::udp::auth::KeyError),
    #[error("process {process}: its endpoint thread stopped while joining (a bug: see its panic above)")]
    EndpointStopped { process: u32 },
}

fn wiring_and_plan(options: &UdpOptions) -> Result<(Wiring, AddressPlan), UdpSystemError> {
    if options.beacon_interval == Duration::ZERO {
        return Err(UdpSystemError::ZeroBeaconInterval);
    }
    let wiring = Wiring::new(options.topology.clone(), options.processes_per_host)?;
    let plan = AddressPlan::new(&wiring)?;
    Ok((wiring, plan))
}

/// The links of runtime node `node`, its management port leading to the controller when the
/// topology names one.
fn links_of(wiring: &Wiring, plan: &AddressPlan, node: usize) -> Links {
    let mut links = Links::of(wiring, plan, node);
    if let Some(controller) = plan.controller {
        let port = mgmt_port(wiring, node) as usize;
        if links.ports.len() <= port {
            links.ports.resize(port + 1, None);
        }
        links.ports[port] = Some(controller);
    }
    links
}

/// `node` (runtime node `index`, `member` to the controller), managed when the topology
/// names a controller.
fn manage<N: onepipe_fabric::Node + crate::control::Manage>(
    wiring: &Wiring,
    plan: &AddressPlan,
    node: N,
    member: ControlMember,
    index: usize,
) -> Mgmt<N> {
    match plan.controller {
        Some(_) => Mgmt::managed(node, member, mgmt_port(wiring, index), RouteCache::shared(wiring)),
        None => Mgmt::unmanaged(node),
    }
}

/// Runs switch `name` on this thread until `stop` is set; returns its counters.
pub fn run_switch(
    options: &UdpOptions,
    name: &str,
    stop: &AtomicBool,
    counters: &UdpCounters,
) -> Result<SwitchCounters, UdpSystemError> {
    run_switch_reporting(options, name, stop, counters, &mut |_| Vec::new())
}

/// How often a running switch reports its [`SwitchStatus`].
pub const STATUS_PERIOD: Duration = Duration::from_millis(200);

/// [`run_switch`], handing `report` the switch's status every [`STATUS_PERIOD`]. `report`
/// returns the neighbours (named as in the status's links) whose links to cut: fault
/// injection, for good, both ways (names it does not know are ignored).
pub fn run_switch_reporting(
    options: &UdpOptions,
    name: &str,
    stop: &AtomicBool,
    counters: &UdpCounters,
    report: &mut dyn FnMut(&SwitchStatus) -> Vec<String>,
) -> Result<SwitchCounters, UdpSystemError> {
    let (wiring, plan) = wiring_and_plan(options)?;
    let index = wiring
        .topology
        .switches
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| UdpSystemError::UnknownSwitch {
            name: name.to_string(),
            hint: wiring.topology.switch_names_hint(),
        })?;
    let routes = routing::build(&wiring)?.swap_remove(index);
    let links = links_of(&wiring, &plan, index);
    let mut driver = UdpDriver::bind(&links, &options.udp)?;
    // A switch told to run its clock off (a test of skew across machines) reads a clock of its
    // own, and says so: `onepipe inspect` then compares it with the others only through links.
    let clock = Clock::from_system_time().shifted(options.switch_clock_offset_ns);
    let switch = Switch::new(index, &wiring, routes, options.switch_config(), clock.now()).into_node();
    let mut switch = manage(&wiring, &plan, switch, ControlMember::Switch(index), index);
    let peers = peer_names(&wiring, index);
    let cuts = driver.link_cuts();
    let clock_id = match options.switch_clock_offset_ns {
        0 => machine_clock_id(),
        off => format!("{} {off:+} ns", machine_clock_id()),
    };
    let mut observe = |s: &mut Mgmt<SwitchNode>, now| {
        let mut status = SwitchStatus::of(&s.node, name, &peers, counters, now);
        let control = s.counters();
        status.control_malformed = control.malformed + control.refused;
        status.clock_id.clone_from(&clock_id);
        for neighbour in report(&status) {
            if let Some(port) = peers.iter().position(|p| *p == neighbour) {
                cuts.cut(port as onepipe_fabric::PortId);
            }
        }
    };
    driver.run_observed(&mut switch, &clock, stop, counters, STATUS_PERIOD, &mut observe);
    Ok(switch.node.onepipe().counters().clone())
}

/// Which clock this process reads: the system clock of this boot of this machine, named by
/// the kernel's boot id (empty if it cannot be read), so that `onepipe inspect` compares the
/// process clock estimates of switches on one machine with each other ([`skew`]).
fn machine_clock_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_string())
        .unwrap_or_default()
}

/// What is behind each port of switch `index`: `process P` or the neighbour switch's name.
fn peer_names(wiring: &Wiring, index: usize) -> Vec<String> {
    wiring.switch_ports[index]
        .iter()
        .map(|p| match p.peer {
            Peer::Process(p) => format!("{PROCESS_PEER}{p}"),
            Peer::Switch { switch, .. } => wiring.topology.switches[switch].name.clone(),
        })
        .collect()
}

/// Joins a running udp fabric as process `process`: binds its address, starts its endpoint on
/// a thread of its own, and returns the handle (paper Table 1). Dropping the handle leaves.
pub fn join(options: &UdpOptions, process: u32) -> Result<(Process, Arc<UdpCounters>), UdpSystemError> {
    let mut handle = None;
    let joined = join_with(options, process, |limits, clock, count| {
        let (app, process) = link(process, count, limits, clock, options.clock_offset_ns);
        handle = Some(process);
        app
    })?;
    let mut handle = handle.expect("join_with makes the application before it starts");
    handle.runtime = Some(joined.runtime);
    Ok((handle, joined.counters))
}

/// A process that joined a udp fabric with an application of its own ([`join_app`]): its
/// endpoint and application run on a thread until this is dropped.
pub struct JoinedApp {
    runtime: StopOnDrop,
    pub counters: Arc<UdpCounters>,
}

impl JoinedApp {
    /// Whether the process's thread still runs.
    pub fn is_running(&self) -> bool {
        self.runtime.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

/// Joins a running udp fabric as process `process`, with `app` driving its endpoint inside the
/// process's thread (as the inproc runtime and the simulator run applications): no queue
/// between them. Returns once the process's ToR has heard it.
pub fn join_app<A: Application>(
    options: &UdpOptions,
    process: u32,
    app: A,
) -> Result<JoinedApp, UdpSystemError> {
    join_with(options, process, |_, _, _| app)
}

/// Binds process `process`, makes its application with `make(limits, clock, process count)`,
/// starts it, and waits until its ToR answers.
fn join_with<A: Application>(
    options: &UdpOptions,
    process: u32,
    make: impl FnOnce(&HandleLimits, Clock, u32) -> A,
) -> Result<JoinedApp, UdpSystemError> {
    let (wiring, plan) = wiring_and_plan(options)?;
    let count = wiring.process_count();
    if process as usize >= count {
        return Err(UdpSystemError::UnknownProcess { process, count });
    }
    let node = wiring.node_of_process(process);
    let links = links_of(&wiring, &plan, node);
    let tor = links.ports[TOR_PORT as usize].expect("a process is wired to its ToR");
    let mut driver = UdpDriver::bind(&links, &options.udp)?;
    let answers = driver.link_answers();
    let spec = wiring.processes[process as usize];
    let mut ec = EndpointConfig::new(process, count as u32, spec.tor_port);
    ec.beacon_interval = options.beacon_interval;
    ec.promise_lead = options.promise_lead;
    ec.time_ahead_max = options.time_ahead_max;
    ec.incarnation = options.incarnation;
    ec.mtu_bytes = options.mtu_bytes;
    ec.message_bytes_max = options.message_bytes_max;
    ec.clock_offset_ns = options.clock_offset_ns;
    ec.reliable.rto_min = options.rto_min;
    let fragment_bytes = options.mtu_bytes - HEADER_LEN;
    ec.send_buffer_packets_max = ec
        .send_buffer_packets_max
        .max(count * options.message_bytes_max.div_ceil(fragment_bytes));
    ec.reliable.send_buffer_packets_max = ec.send_buffer_packets_max;
    let limits = HandleLimits {
        send_queue_max: options.send_queue_max,
        recv_queue_max: options.recv_queue_max,
        message_bytes_max: options.message_bytes_max,
        packets_max: ec.send_buffer_packets_max,
        fragment_bytes,
        silent_max: options.switch_config().dead_after(),
    };
    let clock = Clock::from_system_time();
    let app = make(&limits, clock, count as u32);
    let host = HostNode {
        endpoint: Endpoint::new(ec, clock.now()),
        app,
    };
    let mut host = manage(&wiring, &plan, host, ControlMember::Process(process), node);
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let thread = {
        let (stop, counters) = (stop.clone(), counters.clone());
        std::thread::Builder::new()
            .name(format!("onepipe-p{process}"))
            .spawn(move || driver.run(&mut host, &clock, &stop, &counters))
            .map_err(UdpError::Io)?
    };
    let joined = JoinedApp {
        runtime: StopOnDrop {
            stop,
            thread: Some(thread),
        },
        counters,
    };
    // Until the ToR hears this process it takes the link for gone and drops what is sent to
    // it: joined means heard. The endpoint beacons from its first pass.
    let waited = std::time::Instant::now();
    let timeout = std::time::Duration::from_nanos(options.join_timeout.as_nanos());
    while !timeout.is_zero() && !answers.answered(TOR_PORT) {
        if !joined.is_running() {
            return Err(UdpSystemError::EndpointStopped { process });
        }
        if waited.elapsed() >= timeout {
            return Err(UdpSystemError::NoAnswer {
                process,
                tor,
                waited_ms: timeout.as_millis() as u64,
            });
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    Ok(joined)
}

/// A process node's one fabric port, to its ToR.
const TOR_PORT: onepipe_fabric::PortId = 0;

/// How often [`run_controller`] hands on what the controller did.
pub const EVENT_PERIOD: Duration = Duration::from_millis(10);

/// Runs the controller of the topology's `[controller]` on this thread until `stop` is set,
/// on the log in `store` (replayed first: a controller restarted on its log finishes a
/// recovery in progress). `events` gets the controller and what it did, about every
/// [`EVENT_PERIOD`]. Returns the controller's last state; stops with an error if the log
/// fails (an input it cannot log is not acted on).
pub fn run_controller<S: Store + Send>(
    options: &UdpOptions,
    config: ControllerConfig,
    store: S,
    stop: &AtomicBool,
    counters: &UdpCounters,
    events: &mut dyn FnMut(&ControllerNode<S>, Vec<ControlEvent>),
) -> Result<ControllerNode<S>, UdpSystemError> {
    let (wiring, plan) = wiring_and_plan(options)?;
    let local = plan.controller.ok_or(UdpSystemError::NoController)?;
    let nodes = wiring.switch_count() + wiring.process_count();
    if nodes > onepipe_fabric::PortId::MAX as usize {
        return Err(UdpSystemError::TooManyNodes(nodes));
    }
    let links = Links {
        local,
        ports: (0..nodes).map(|n| Some(plan.node(n))).collect(),
    };
    let mut driver = UdpDriver::bind(&links, &options.udp)?;
    let clock = Clock::from_system_time();
    let mut controller = ControllerNode::open(&wiring, config, store, clock.now())?;
    // Whatever was said while no controller listened (it restarted) is said again.
    controller.greet();
    let happened = controller.take_events();
    events(&controller, happened);
    let mut failed = None;
    let mut observe = |c: &mut ControllerNode<S>, _now| {
        let happened = c.take_events();
        if !happened.is_empty() {
            events(c, happened);
        }
        if let Some(e) = c.take_store_error() {
            failed = Some(e);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    };
    driver.run_observed(
        &mut controller,
        &clock,
        stop,
        counters,
        EVENT_PERIOD,
        &mut observe,
    );
    let happened = controller.take_events();
    events(&controller, happened);
    match failed.or_else(|| controller.take_store_error()) {
        Some(e) => Err(e.into()),
        None => Ok(controller),
    }
}

/// A whole topology over UDP inside this OS process (see [`onepipe_runtime::udp::local`]).
pub type LocalFabric<A> = onepipe_runtime::udp::local::LocalFabric<Member<A>>;

/// Starts 1Pipe's switches and endpoints (running `apps`) as a [`LocalFabric`].
pub fn start_local<A: Application>(
    wiring: &Wiring,
    config: &SystemConfig,
    udp: &UdpConfig,
    apps: Vec<A>,
    clock_offsets_ns: &[i64],
    clock: Clock,
) -> Result<LocalFabric<A>, UdpSystemError> {
    let nodes = crate::system::build(wiring, config, apps, clock_offsets_ns, clock.now())?;
    let links = crate::system::links(wiring, config);
    LocalFabric::start_linked(wiring, nodes, &links, udp, clock).map_err(|e| match e {
        LocalError::Plan(e) => UdpSystemError::Plan(e),
        LocalError::Udp(e) => UdpSystemError::Udp(e),
        e @ LocalError::NodeCount { .. } => unreachable!("system::build makes one node per wiring node: {e}"),
    })
}
