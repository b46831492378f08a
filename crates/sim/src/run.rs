//! One simulated run of 1Pipe: build the fabric from a [`SimConfig`], drive it, check the logs,
//! and report.

#![allow(clippy::disallowed_methods)] // wall-clock time only measures the simulator's own speed

use crate::config::{ConfigError, FailTarget, ForgedBeacon, SimConfig};
use crate::dctcp::{Flows, WithBackground};
use crate::engine::{Budget, Engine, EngineError, Model, RestartFn, Role, Stats};
use crate::fault::{Fault, FaultTarget};
use crate::host::SimHost;
use crate::traffic::{Generator, Traffic};
use onepipe::control_node::{
    ControllerNode, Mgmt, RouteCache, management_links, mgmt_port, representative_management_links,
};
use onepipe_check::{ProcessLog, check_all, check_atomicity, check_no_loss};
use onepipe_fabric::{Wiring, routing};
use onepipe_proto::Incarnation;
use onepipe_proto::controller::Member;
use onepipe_proto::endpoint::EndpointConfig;
use onepipe_proto::hash::SplitMix;
use onepipe_proto::representative::Representative;
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_wire::Instant;
use serde::Serialize;

pub use crate::node::SimNode;

/// Virtual time starts here, so that negative clock offsets stay above zero.
pub(crate) const START: Instant = Instant::from_nanos(1_000_000);
/// Beacon intervals before traffic starts, for barriers to flow everywhere.
pub(crate) const WARMUP_INTERVALS: u64 = 20;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("invalid simulation config: `topology`: {0}")]
    Wiring(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A step broke an invariant (or a bug panicked): caught by a campaign, so that the
    /// seed is reported rather than the campaign ended.
    #[error("panicked: {0}")]
    Panicked(String),
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct SimChecks {
    pub total_order: bool,
    pub fifo: bool,
    pub causality: bool,
    pub no_duplicates: bool,
    pub no_creation: bool,
    /// Reliable runs only (true otherwise): every message recorded was delivered exactly once.
    pub no_loss: bool,
    /// Every message sent after the faults healed (plus `settle`) was delivered.
    pub liveness: bool,
    /// With the controller: each scattering was delivered by all of its correct receivers or
    /// by none (true otherwise).
    pub atomicity: bool,
}

/// What the controller made of the failures (runs with the controller only).
#[derive(Clone, Debug, Serialize)]
pub struct SimFailureOutcome {
    /// The processes declared failed, with their failure timestamps (ns).
    pub failed_processes: Vec<(u32, u64)>,
    /// From the first failure to the first link-down report reaching the controller.
    pub detection_us: Option<f64>,
    /// From the first failure to the controller's last Resume.
    pub resume_us: Option<f64>,
    /// The paper's recovery time (Fig. 10): how long the commit barrier of a correct process
    /// stalls, from the failure until it passes the failure time, over correct processes.
    pub recovery_us: Option<StallUs>,
    /// Correct processes whose commit barrier never passed the failure time.
    pub stalled_processes: u64,
    /// Reliable scatterings aborted because a receiver failed (Recall).
    pub aborted: u64,
    /// Reports of frames refused for implausible time that reached the controller.
    pub implausible_reports: u64,
    /// Links between switches the controller took back after their far end returned.
    pub links_readmitted: u64,
    /// Switches failed for not carrying out a cut in time.
    pub switches_unanswering: u64,
    /// Every correct process's stall, for pooling over runs.
    #[serde(skip)]
    pub stalls_us: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StallUs {
    pub mean: f64,
    pub p5: f64,
    pub p95: f64,
}

impl StallUs {
    /// Mean and percentiles of `values` (sorted in place); `None` if empty.
    pub fn of(values: &mut [f64]) -> Option<StallUs> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let quantile = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        Some(StallUs {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p5: quantile(0.05),
            p95: quantile(0.95),
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencyUs {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LagUs {
    pub mean: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub seed: u64,
    pub trace_hash: String,
    pub events: u64,
    pub events_per_s: f64,
    pub wall_s: f64,
    pub virtual_us: f64,
    pub hosts: usize,
    pub processes: usize,
    pub switches: usize,
    pub reliable: bool,
    /// Violations over all checks, liveness included.
    pub violations: u64,
    pub checks: SimChecks,
    /// The first violations, described.
    pub examples: Vec<String>,
    pub scatterings_sent: u64,
    pub scatterings_refused: u64,
    pub delivered: u64,
    /// Deliveries per virtual second while traffic ran (deliveries after it are not counted).
    pub throughput_msgs_per_s: f64,
    pub latency_us: LatencyUs,
    pub beacons_sent: u64,
    /// Bytes of beacon frames put on links.
    pub beacon_bytes: u64,
    /// Share of all links' capacity over the run that beacons took.
    pub beacon_overhead: f64,
    /// How far processes' barriers trail their clocks while traffic runs.
    pub barrier_lag_us: LagUs,
    /// The most any process's best-effort reorder buffer held (payload plus per-entry
    /// overhead), and in messages: what ordering costs in memory (paper Fig. 11).
    pub reorder_bytes_peak: u64,
    pub reorder_messages_peak: u64,
    pub send_failures: u64,
    pub late_drops: u64,
    /// Frames switches and endpoints refused for barriers or timestamps implausibly far
    /// ahead of their clocks (docs/ordering.md, "Implausible time").
    pub implausible_refused: u64,
    pub retransmissions: u64,
    /// Reliable ACKs sent, and of those the ones that rode on a prepare packet.
    pub acks_sent: u64,
    pub acks_piggybacked: u64,
    /// Messages the liveness check covered.
    pub liveness_messages: u64,
    /// Processes with traffic still in flight when the run ended: their messages may yet
    /// have arrived, and a check failing for them may need a longer drain, not a fix.
    pub busy_processes_at_end: u64,
    pub engine: Stats,
    pub peak_memory_bytes: u64,
    /// Runs with the controller: what it decided and how long recovery took.
    pub failure: Option<SimFailureOutcome>,
    /// Runs with background flows: what they carried.
    pub background: Option<crate::dctcp::BackgroundReport>,
}

/// Builds, runs and checks one simulation. `progress` is told the virtual time reached now and
/// then (for a progress bar).
pub fn run(config: &SimConfig, progress: &mut dyn FnMut(Instant, Instant)) -> Result<SimReport, SimError> {
    config.validate()?;
    let wall = std::time::Instant::now();
    let (mut engine, wiring, times) = build(config)?;
    let budget = Budget {
        events_max: config.events_max,
        memory_bytes_max: config.memory_bytes_max,
    };
    // Run in slices so that a progress bar moves, sampling the barrier lag while traffic runs.
    let slices = 100u64;
    let span = times.end.as_nanos() - START.as_nanos();
    let mut lag = LagSamples::default();
    for i in 1..=slices {
        let t = Instant::from_nanos(START.as_nanos() + span * i / slices);
        engine.run_until(t, &budget)?;
        if config.ordering && (times.send_from..times.send_until).contains(&t) {
            lag.sample(&engine, &wiring);
        }
        progress(t, times.end);
    }
    // Past `drain` while traffic is in flight and still moves (see `SimConfig::drain_max`).
    let drain_end = times.send_until + config.drain_max;
    let stall_max = config
        .reliable_config
        .rto_max
        .saturating_mul(4)
        .max(DRAIN_STALL_MIN)
        // A message waits until every clock has passed its timestamp, and nothing moves
        // meanwhile when a clock is far ahead (skew, a step forward).
        .max(onepipe_wire::Duration::from_nanos(config.clock_spread_ns_max()));
    let (mut moved, mut moved_at) = (traffic_progress(&engine, &wiring), engine.now());
    while engine.now() < drain_end
        && engine.now() - moved_at < stall_max
        && busy_processes(&engine, &wiring) > 0
    {
        engine.run_until((engine.now() + DRAIN_STEP).min(drain_end), &budget)?;
        let now_moved = traffic_progress(&engine, &wiring);
        if now_moved != moved {
            (moved, moved_at) = (now_moved, engine.now());
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let end = engine.now();
    for i in wiring.switch_count()..engine.node_count() {
        if let Some(h) = engine.node_mut(i).host_mut() {
            h.drain(end);
        }
    }
    // Every step was checked (SimNode::invariants); the full scans of the reliable senders'
    // bookkeeping are too slow for every step and run once, at the end.
    for h in hosts(&engine, &wiring) {
        h.endpoint.reliable_sender().check_invariants();
    }
    Ok(report(config, &engine, &wiring, &times, wall_s, &lag))
}

/// How often a run past its `drain` looks whether every process is quiescent.
const DRAIN_STEP: onepipe_wire::Duration = onepipe_wire::Duration::from_micros(50);

/// A run past its `drain` stops once traffic has not moved for this long, nor for four times
/// the cap of the retransmission timeout (a retransmission may be all that is left to come).
const DRAIN_STALL_MIN: onepipe_wire::Duration = onepipe_wire::Duration::from_millis(1);

/// Deliveries, acknowledged packets and failed messages of all processes: a sum that grows
/// while traffic in flight still moves.
fn traffic_progress(engine: &Engine<SimNode>, wiring: &Wiring) -> u64 {
    hosts(engine, wiring)
        .map(|h| {
            let sent = h.endpoint.reliable_sender().counters();
            h.endpoint.counters().delivered + sent.packets_acked + sent.messages_failed
        })
        .sum()
}

/// Processes with traffic still on its way (see [`onepipe_proto::endpoint::Endpoint::is_quiescent`]).
fn busy_processes(engine: &Engine<SimNode>, wiring: &Wiring) -> u64 {
    hosts(engine, wiring)
        .filter(|h| !h.endpoint.is_quiescent())
        .count() as u64
}

/// How far each process's barrier trails its own clock, sampled while traffic runs: what
/// ordering costs in delivery delay, and how it grows with the fabric (paper 6.3).
#[derive(Default)]
struct LagSamples {
    sum_ns: u128,
    count: u64,
    max_ns: u64,
}

impl LagSamples {
    fn sample(&mut self, engine: &Engine<SimNode>, wiring: &Wiring) {
        let now = engine.now();
        for h in hosts(engine, wiring) {
            let lag = crate::host::barrier_lag(h, now).as_nanos();
            self.sum_ns += lag as u128;
            self.count += 1;
            self.max_ns = self.max_ns.max(lag);
        }
    }
}

/// When the phases of a run start and end.
pub struct Times {
    pub send_from: Instant,
    pub send_until: Instant,
    pub end: Instant,
    /// `None`: some failure never heals, so liveness is not checked.
    pub liveness_from: Option<Instant>,
    /// Every host's delivery latencies.
    pub latency: crate::host::SharedLatency,
    /// The first failure, if any.
    pub first_failure_at: Option<Instant>,
}

/// A switch that restarts: its first routing tables and none of its state (the management
/// plane's channel stays: it is the switch's port to the controller, not its state).
fn restart_switch(wiring: &Wiring, config: &SwitchConfig) -> Result<RestartFn<SimNode>, SimError> {
    let tables = routing::build(wiring).map_err(|e| SimError::Wiring(e.to_string()))?;
    let (wiring, config) = (wiring.clone(), config.clone());
    Ok(Box::new(move |index, now, node| {
        if let SimNode::Switch(s) = node {
            let routes = tables[index as usize].clone();
            let fresh = Switch::new(index as usize, &wiring, routes, config.clone(), now).restarted();
            s.inner.replace_node(fresh.into_node());
        }
    }))
}

/// A clock step on a process's node (the only nodes with clocks of their own: switches and
/// the controller run on the shared clock).
fn step_host_clock(node: &mut SimNode, now: Instant, delta_ns: i64) {
    if let Some(h) = node.host_mut() {
        h.endpoint.step_clock(now, delta_ns);
    }
}

pub fn build(config: &SimConfig) -> Result<(Engine<SimNode>, Wiring, Times), SimError> {
    let wiring = Wiring::new(config.topology.clone(), config.processes_per_host)
        .map_err(|e| SimError::Wiring(e.to_string()))?;
    let tables = routing::build(&wiring).map_err(|e| SimError::Wiring(e.to_string()))?;
    let send_from = START + config.beacon_interval.saturating_mul(WARMUP_INTERVALS);
    let send_until = send_from + config.send_for;
    let end = send_until + config.drain;
    let mut heal = send_from;
    let mut heals = true;
    if config.loss > 0.0 || config.duplicate > 0.0 || config.reorder > 0.0 {
        match config.faults_for {
            Some(d) => heal = heal.max(send_from + d),
            None => heals = false,
        }
    }
    for f in &config.failures {
        match f.lasts {
            Some(d) => heal = heal.max(send_from + f.at + d),
            None => heals = false,
        }
    }
    let liveness_from = heals.then_some(heal + config.settle);
    let record_until = send_from + config.record_for;

    let switch_config = SwitchConfig {
        beacon_interval: config.beacon_interval,
        dead_after_intervals: config.dead_after_intervals,
        ecmp_seed: config.seed,
        promise_lead: onepipe_wire::Duration::ZERO,
        time_ahead_max: config.time_ahead_max,
        incarnation: config.incarnation,
    };
    let mut nodes: Vec<(SimNode, Role)> =
        Vec::with_capacity(wiring.switch_count() + wiring.process_count() + 1);
    let routes_avoiding = RouteCache::shared(&wiring);
    fn manage<N: onepipe_fabric::Node + onepipe::control::Manage>(
        on: Option<(&Wiring, &onepipe::control_node::SharedRoutes)>,
        node: N,
        member: Member,
        index: usize,
    ) -> Mgmt<N> {
        match on {
            Some((wiring, routes)) => Mgmt::managed(node, member, mgmt_port(wiring, index), routes.clone()),
            None => Mgmt::unmanaged(node),
        }
    }
    let on = config.controller.then_some((&wiring, &routes_avoiding));
    let background = &config.background;
    for (s, routes) in tables.iter().enumerate() {
        let router = background
            .enabled()
            .then(|| crate::dctcp::Router::new(routes.clone(), config.seed));
        let sw = Switch::new(s, &wiring, routes.clone(), switch_config.clone(), START).into_node();
        let node = manage(on, sw, Member::Switch(s), s);
        let node = match router {
            Some(r) => WithBackground::switch(node, r),
            None => WithBackground::plain(node),
        };
        nodes.push((SimNode::Switch(Box::new(node)), Role::Switch));
    }
    let count = wiring.process_count() as u32;
    let mut rng = SplitMix::new(config.seed ^ 0x5eed_c10c);
    let latency = crate::host::shared_latency();
    let traffic = Traffic {
        pattern: config.pattern,
        gap: config.gap,
        message_bytes_min: config.message_bytes_min,
        message_bytes_max: config.message_bytes_max,
        reliable: config.reliable,
        send_from,
        send_until,
        measure_from: send_from + config.measure_after,
        large: config.large_message,
    };
    for p in 0..count {
        let mut ec = EndpointConfig::new(p, count, wiring.processes[p as usize].tor_port);
        ec.beacon_interval = config.beacon_interval;
        ec.mtu_bytes = config.mtu_bytes;
        ec.reliable = config.reliable_config.clone();
        ec.fit_recv_window_to(config.message_bytes_max);
        ec.ordering = config.ordering;
        ec.send_buffer_packets_max = config.send_buffer_packets;
        ec.clock_offset_ns = rng.symmetric(2 * config.skew_mean.as_nanos());
        ec.time_ahead_max = config.time_ahead_max;
        ec.incarnation = config.incarnation;
        let drift = rng.symmetric(config.drift_ppb_max as u64);
        let host = crate::host::sim_host(
            ec,
            drift,
            START,
            Generator::new(p, count, traffic.clone(), config.seed),
            record_until,
            liveness_from.unwrap_or(Instant::from_nanos(u64::MAX)),
            latency.clone(),
        );
        let index = wiring.node_of_process(p);
        let node = manage(on, host, Member::Process(p), index);
        let node = match background.enabled() {
            true => {
                let start = START + background.start_after;
                WithBackground::host(node, Flows::new(p, count, background, config.seed, start))
            }
            false => WithBackground::plain(node),
        };
        nodes.push((SimNode::Host(Box::new(node)), Role::Host));
    }
    let model = model_for(config, send_from);
    let mut links = links_for(&wiring, config);
    let host = config.incarnation == Incarnation::Host;
    if config.controller {
        let index = nodes.len();
        // Representatives come after the controller, a port of its own each.
        let last = index + if host { wiring.switch_count() } else { 0 };
        if last > onepipe_fabric::PortId::MAX as usize {
            return Err(SimError::Wiring(format!(
                "the controller has a port per node and {last} nodes are too many"
            )));
        }
        let mut controller = ControllerNode::new(&wiring, config.controller_config, START);
        links.extend(management_links(&wiring, index, config.control_delay));
        if host {
            controller = controller.with_representatives(index + 1);
            links.extend(representative_management_links(
                wiring.switch_count(),
                index + 1,
                index,
                config.control_delay,
            ));
        }
        nodes.push((SimNode::Controller(Box::new(controller)), Role::Controller));
    }
    if host {
        let on = config.controller.then_some(&routes_avoiding);
        add_representatives(
            &wiring,
            &tables,
            config,
            &switch_config,
            on,
            &mut nodes,
            &mut links,
        )?;
    }
    // Host representatives, if any, are the last nodes, one per switch.
    let representatives_from = nodes.len().saturating_sub(wiring.switch_count());
    let mut engine = Engine::new(nodes, &links, model, config.seed, START)?;
    for f in &config.failures {
        let target = match &f.target {
            FailTarget::Process(p) => FaultTarget::Node(wiring.node_of_process(*p) as u32),
            FailTarget::Switch(name) => FaultTarget::Node(switch_index(&wiring, name)? as u32),
            FailTarget::Representative(name) => {
                FaultTarget::Node((representatives_from + switch_index(&wiring, name)?) as u32)
            }
            FailTarget::Restart(name) => FaultTarget::Restart(switch_index(&wiring, name)? as u32),
            FailTarget::Link(a, b) => {
                let (a, b) = (switch_index(&wiring, a)?, switch_index(&wiring, b)?);
                let links = engine.links_between(a, b);
                if links.is_empty() {
                    return Err(ConfigError {
                        field: "failures",
                        reason: format!(
                            "no link between `{}` and `{}`",
                            wiring.topology.switches[a].name, wiring.topology.switches[b].name
                        ),
                    }
                    .into());
                }
                FaultTarget::Links(links)
            }
        };
        engine.schedule_fault(Fault {
            target,
            at: send_from + f.at,
            heal_at: f.lasts.map(|d| send_from + f.at + d),
        });
    }
    if config
        .failures
        .iter()
        .any(|f| matches!(f.target, FailTarget::Restart(_)))
    {
        engine.on_restart(restart_switch(&wiring, &switch_config)?);
    }
    for c in &config.clock_steps {
        let node = wiring.node_of_process(c.process) as u32;
        engine.schedule_clock_step(send_from + c.at, node, c.delta_ns, step_host_clock);
    }
    for f in &config.forged_beacons {
        forge_beacon(&mut engine, &wiring, send_from, f)?;
    }
    let first_failure_at = config.failures.iter().map(|f| send_from + f.at).min();
    if let Some(at) = first_failure_at {
        for i in wiring.switch_count()..wiring.switch_count() + wiring.process_count() {
            if let Some(h) = engine.node_mut(i).host_mut() {
                crate::host::watch_commit_barrier(h, at);
            }
        }
    }
    let times = Times {
        send_from,
        send_until,
        end,
        liveness_from,
        latency,
        first_failure_at,
    };
    Ok((engine, wiring, times))
}

/// Ports whose beacons one core of a representative takes (paper Fig. 13a).
const REPRESENTATIVE_PORTS_PER_CORE: usize = 32;

/// Host delegation (paper 6.2.3): a representative per switch, after every other node, on a
/// link to a port of its switch two past the fabric ports (`representative_port`), as far
/// from it as a process is from its ToR.
fn add_representatives(
    wiring: &Wiring,
    tables: &[onepipe_fabric::Routes],
    config: &SimConfig,
    switch_config: &SwitchConfig,
    managed: Option<&onepipe::control_node::SharedRoutes>,
    nodes: &mut Vec<(SimNode, Role)>,
    links: &mut Vec<onepipe_fabric::DirectedLink>,
) -> Result<(), SimError> {
    let delay = config.link_delay + config.host_nic_delay;
    for (s, routes) in tables.iter().enumerate() {
        let port = onepipe_proto::representative_port(wiring.switch_ports[s].len()).ok_or_else(|| {
            SimError::Wiring(format!("switch {s} has no port number left for a representative"))
        })?;
        let index = nodes.len();
        let rep = Representative::new(s, wiring, routes.clone(), switch_config.clone(), START);
        let uplink = onepipe_proto::representative::UPLINK;
        let rep = match managed {
            Some(routes) => Mgmt::managed(rep, Member::Switch(s), uplink + 1, routes.clone()),
            None => Mgmt::unmanaged(rep),
        };
        // Paper Fig. 13a sizes a representative for a 32-port switch: one core at 3 us. A
        // ToR of more processes gets a core per 32 ports (the paper's testbed had NIC
        // representatives aggregate each host's processes first, which is not modelled).
        let cores = wiring.switch_ports[s]
            .len()
            .div_ceil(REPRESENTATIVE_PORTS_PER_CORE) as u32;
        nodes.push((
            SimNode::Representative(Box::new(rep)),
            Role::Representative { cores },
        ));
        links.push(onepipe_fabric::DirectedLink {
            from: (s, port),
            to: (index, uplink),
            delay,
        });
        links.push(onepipe_fabric::DirectedLink {
            from: (index, uplink),
            to: (s, port),
            delay,
        });
    }
    Ok(())
}

/// Schedules forged beacon `f` on the link between its process and the process's ToR.
fn forge_beacon(
    engine: &mut Engine<SimNode>,
    wiring: &Wiring,
    send_from: Instant,
    f: &ForgedBeacon,
) -> Result<(), SimError> {
    let bad = |reason: String| ConfigError {
        field: "forged_beacons",
        reason,
    };
    let spec = wiring
        .processes
        .get(f.process as usize)
        .ok_or_else(|| bad(format!("no process {}", f.process)))?;
    let (host, tor) = (wiring.node_of_process(f.process), spec.tor);
    let at = send_from + f.at;
    let barrier = (at + f.ahead).to_wire();
    let (from, to, link_id) = match f.to_tor {
        true => (host, tor, spec.tor_port),
        false => (tor, host, 0),
    };
    let frame = onepipe_wire::packet::Repr::beacon(barrier, barrier, link_id).to_vec();
    if !engine.inject(at, from, to, frame) {
        return Err(bad(format!("process {} has no link to its ToR", f.process)).into());
    }
    Ok(())
}

/// The link and node model of a configuration; faults stop `faults_for` after `send_from`.
pub(crate) fn model_for(config: &SimConfig, send_from: Instant) -> Model {
    Model {
        link_bits_per_s: config.link_bits_per_s,
        fabric_link_bits_per_s: config.fabric_link_bits_per_s.unwrap_or(config.link_bits_per_s),
        queue_capacity_bytes: config.queue_capacity_bytes,
        ecn_threshold_bytes: config.ecn_threshold_bytes,
        switch_delay: config.switch_delay,
        host_frame_cost: config.host_frame_cost,
        representative_frame_cost: config.representative_frame_cost,
        controller_frame_cost: config.controller_frame_cost,
        switch_frame_cost: onepipe_wire::Duration::ZERO,
        loss: config.loss,
        duplicate: config.duplicate,
        reorder: config.reorder,
        reorder_delay: onepipe_wire::Duration::from_micros(2),
        faults_until: config
            .faults_for
            .map_or(Instant::from_nanos(u64::MAX), |d| send_from + d),
        originate_behind_queues: config.background.enabled(),
    }
}

/// The fabric's directed links with the configured delays: a process's NIC and stack add
/// their delay on both ends of its link to the ToR.
pub(crate) fn links_for(wiring: &Wiring, config: &SimConfig) -> Vec<onepipe_fabric::DirectedLink> {
    let mut links = wiring.directed_links(config.link_delay);
    for l in &mut links {
        if l.from.0 >= wiring.switch_count() || l.to.0 >= wiring.switch_count() {
            l.delay = l.delay + config.host_nic_delay;
        }
    }
    links
}

fn switch_index(wiring: &Wiring, name: &str) -> Result<usize, ConfigError> {
    wiring
        .topology
        .switches
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| ConfigError {
            field: "failures",
            reason: format!(
                "no switch named `{name}` in the topology ({})",
                wiring.topology.switch_names_hint()
            ),
        })
}

/// The hosts of an engine built by [`build`].
pub fn hosts<'a>(engine: &'a Engine<SimNode>, wiring: &Wiring) -> impl Iterator<Item = &'a SimHost> {
    (wiring.switch_count()..engine.node_count()).filter_map(|i| engine.node(i).host())
}

fn report(
    config: &SimConfig,
    engine: &Engine<SimNode>,
    wiring: &Wiring,
    times: &Times,
    wall_s: f64,
    lag: &LagSamples,
) -> SimReport {
    let logs: Vec<ProcessLog> = hosts(engine, wiring).map(|h| h.app.log.clone()).collect();
    let checked = check_all(&logs);
    let mut examples: Vec<String> = Vec::new();
    // The unordered baseline promises neither order nor causality, only integrity.
    let promised: &[&onepipe_check::CheckResult] = if config.ordering {
        &[
            &checked.total_order,
            &checked.fifo,
            &checked.causality,
            &checked.no_duplicates,
            &checked.no_creation,
        ]
    } else {
        &[&checked.no_duplicates, &checked.no_creation]
    };
    let mut violations = promised
        .iter()
        .map(|r| {
            examples.extend(r.examples.iter().take(3).map(|v| v.to_string()));
            r.count
        })
        .sum::<u64>();
    let mut no_loss = true;
    // Best-effort scatterings still in a send buffer at the end are a backlog, not a loss:
    // the service promises nothing about them, and they have no timestamp yet.
    let (never_released, never_released_live) = if config.reliable {
        hosts(engine, wiring)
            .map(|h| h.app.never_released())
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    } else {
        (0, 0)
    };
    // Processes the controller declared failed are gone for good (receiver recovery is not
    // simulated): a run that declared any is held to atomicity, not to loss and liveness,
    // whether or not the fault that caused it healed (a restarted ToR's rack stays failed).
    let declared_any = engine
        .nodes()
        .find_map(|n| n.controller())
        .is_some_and(|c| !c.timeline.failures.is_empty());
    let liveness_judged = !declared_any;
    if config.reliable && times.liveness_from.is_some() && liveness_judged {
        let lost = check_no_loss(&logs);
        no_loss = lost.is_empty() && never_released == 0;
        violations += lost.len() as u64 + never_released;
        examples.extend(lost.iter().take(3).map(|v| v.to_string()));
        if never_released > 0 {
            examples.push(format!(
                "{never_released} reliable scatterings accepted but never released nor failed"
            ));
        }
    }
    let liveness_logs: Vec<ProcessLog> = hosts(engine, wiring)
        .map(|h| h.app.liveness_log.clone())
        .collect();
    let liveness_messages = liveness_logs
        .iter()
        .flat_map(|l| &l.events)
        .filter(|e| matches!(e, onepipe_check::Event::Send { .. }))
        .count() as u64;
    let mut stalled = match liveness_judged {
        true => check_no_loss(&liveness_logs),
        false => Vec::new(),
    };
    if !config.reliable {
        // Best effort promises no delivery: a message whose frame a full queue or a lossy
        // link dropped is lost, not stalled. It stalled only if more messages are missing
        // than frames and late messages were dropped.
        let s = engine.stats();
        let late: u64 = hosts(engine, wiring).map(|h| h.endpoint.counters().late).sum();
        let dropped = s.dropped_queue_full + s.dropped_loss + s.dropped_down + late;
        if stalled.len() as u64 <= dropped {
            stalled.clear();
        }
    }
    let never_released_live = if liveness_judged { never_released_live } else { 0 };
    violations += stalled.len() as u64 + never_released_live;
    examples.extend(stalled.iter().take(3).map(|v| format!("liveness: {v}")));
    if never_released_live > 0 {
        examples.push(format!(
            "liveness: {never_released_live} reliable scatterings accepted but never released nor failed"
        ));
    }
    let mut atomicity = true;
    let failure = engine.nodes().find_map(|n| n.controller()).map(|c| {
        let failed: Vec<u32> = c.timeline.failures.iter().map(|f| f.process).collect();
        let partial = check_atomicity(&logs, &failed);
        atomicity = partial.is_empty();
        violations += partial.len() as u64;
        examples.extend(partial.iter().take(3).map(|v| format!("atomicity: {v}")));
        failure_outcome(engine, wiring, times, c, &failed)
    });
    let c = checked.checks();
    let checks = SimChecks {
        total_order: c.total_order,
        fifo: c.fifo,
        causality: c.causality,
        no_duplicates: c.no_duplicates,
        no_creation: c.no_creation,
        no_loss,
        liveness: stalled.is_empty() && never_released_live == 0,
        atomicity,
    };
    let latency = times
        .latency
        .lock()
        .expect("no thread panicked holding it")
        .clone();
    let (mut sent, mut refused, mut delivered, mut failures) = (0, 0, 0, 0);
    let mut in_window = 0;
    let (mut beacons, mut late, mut retransmissions, mut implausible) = (0, 0, 0, 0);
    let (mut acks_sent, mut acks_piggybacked) = (0, 0);
    for h in hosts(engine, wiring) {
        sent += h.app.counters.scatterings_sent;
        refused += h.app.counters.scatterings_refused;
        delivered += h.app.counters.delivered;
        in_window += h.app.counters.delivered_in_window;
        failures += h.app.counters.send_failures;
        let ec = h.endpoint.counters();
        beacons += ec.beacons_sent;
        late += ec.late;
        implausible += ec.time_implausible;
        retransmissions += h.endpoint.reliable_sender().counters().retransmissions;
        let rc = h.endpoint.reliable_receiver().counters();
        acks_sent += rc.acks_sent;
        acks_piggybacked += rc.acks_piggybacked;
    }
    for i in 0..wiring.switch_count() {
        if let Some(s) = engine.node(i).switch() {
            beacons += s.counters().beacons_sent;
            implausible += s.counters().barrier_implausible;
        }
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let stats = engine.stats().clone();
    let send_s = (times.send_until - times.send_from)
        .as_nanos()
        .saturating_sub(config.measure_after.as_nanos()) as f64
        / 1e9;
    SimReport {
        seed: config.seed,
        trace_hash: format!("{:016x}", stats.trace_hash),
        events: stats.events,
        events_per_s: stats.events as f64 / wall_s.max(1e-9),
        wall_s,
        virtual_us: us((engine.now() - START).as_nanos()),
        hosts: wiring.topology.hosts.len(),
        processes: wiring.process_count(),
        switches: wiring.switch_count(),
        reliable: config.reliable,
        violations,
        checks,
        examples,
        scatterings_sent: sent,
        scatterings_refused: refused,
        delivered,
        throughput_msgs_per_s: in_window as f64 / send_s,
        latency_us: LatencyUs {
            p50: us(latency.value_at_quantile(0.5)),
            p99: us(latency.value_at_quantile(0.99)),
            max: us(latency.max()),
            mean: latency.mean() / 1000.0,
        },
        beacons_sent: beacons,
        beacon_bytes: beacons * onepipe_wire::packet::HEADER_LEN as u64,
        beacon_overhead: {
            // Every switch port and every process sends on one directed link.
            let links = wiring.switch_ports.iter().map(Vec::len).sum::<usize>() + wiring.process_count();
            let seconds = (engine.now() - START).as_nanos() as f64 / 1e9;
            let capacity_bits = links as f64 * config.link_bits_per_s as f64 * seconds;
            (beacons * onepipe_wire::packet::HEADER_LEN as u64 * 8) as f64 / capacity_bits.max(1.0)
        },
        barrier_lag_us: LagUs {
            mean: lag.sum_ns as f64 / lag.count.max(1) as f64 / 1000.0,
            max: us(lag.max_ns),
        },
        reorder_bytes_peak: hosts(engine, wiring)
            .map(|h| h.endpoint.reorder().bytes_peak() as u64)
            .max()
            .unwrap_or(0),
        reorder_messages_peak: hosts(engine, wiring)
            .map(|h| h.endpoint.reorder().messages_peak() as u64)
            .max()
            .unwrap_or(0),
        send_failures: failures,
        late_drops: late,
        implausible_refused: implausible,
        retransmissions,
        acks_sent,
        acks_piggybacked,
        liveness_messages,
        busy_processes_at_end: busy_processes(engine, wiring),
        engine: stats,
        peak_memory_bytes: crate::memory::peak_resident_bytes(),
        failure,
        background: crate::dctcp::report(config, engine, wiring, engine.now() - START),
    }
}

fn failure_outcome(
    engine: &Engine<SimNode>,
    wiring: &Wiring,
    times: &Times,
    controller: &ControllerNode,
    failed: &[u32],
) -> SimFailureOutcome {
    let t = &controller.timeline;
    let since = |at: Option<Instant>| {
        let (at, from) = (at?, times.first_failure_at?);
        Some((at.as_nanos() as f64 - from.as_nanos() as f64) / 1e3)
    };
    let mut stalls_us = Vec::new();
    let mut stalled_processes = 0;
    let mut aborted = 0;
    for h in hosts(engine, wiring) {
        aborted += h.app.counters.aborted;
        if failed.contains(&h.endpoint.config().process) {
            continue;
        }
        match (h.app.commit_barrier_passed_at(), times.first_failure_at) {
            (Some(at), Some(from)) => stalls_us.push(at.saturating_since(from).as_nanos() as f64 / 1e3),
            (None, Some(_)) => stalled_processes += 1,
            _ => {}
        }
    }
    SimFailureOutcome {
        failed_processes: t.failures.iter().map(|f| (f.process, f.ts.as_nanos())).collect(),
        detection_us: since(t.first_report_at),
        resume_us: since(t.last_resume_at),
        recovery_us: StallUs::of(&mut stalls_us),
        stalled_processes,
        aborted,
        implausible_reports: controller.controller().counters().implausible_reports,
        links_readmitted: controller.controller().counters().links_readmitted,
        switches_unanswering: controller.controller().counters().switches_unanswering,
        stalls_us,
    }
}
