//! `onepipe netchain serve`: a NetChain of its own (the testbed, on the inproc runtime) behind
//! the Redis-protocol front, so that redis-cli, redis-benchmark and client libraries use it
//! unchanged. Each of the four servers runs a service host (a client agent) that takes the
//! front's batches in turn; keys are installed through the controller on their first SET.

use super::fabric::{NetchainRuntime, Running};
use super::nodes::{ControllerHost, Shared};
use super::{CLIENT_PROCESSES, CONTROLLER_PROCESS};
use onepipe_fabric::{Either, Pipeline, Topology, Wiring};
use onepipe_kv::netchain::{Mailbox, NetchainStore, ServiceHost};
use onepipe_kv::{ServeConfig, ServerHandle, Store};
use onepipe_netchain::{
    Agent, AgentConfig, Controller, ControllerConfig, NetchainSwitch, Ring, SwitchConfig,
};
use onepipe_runtime::inproc::Clock;
use onepipe_wire::protocol::NETCHAIN;
use onepipe_wire::{Duration, Instant};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug)]
pub struct NetchainServeConfig {
    pub slots: u32,
    pub value_bytes_max: usize,
    pub chain_len: usize,
    pub vnodes_per_switch: usize,
    pub workers: usize,
    pub agent_timeout: Duration,
    pub attempts_max: u32,
    pub seed: u64,
    pub runtime: NetchainRuntime,
}

impl Default for NetchainServeConfig {
    fn default() -> Self {
        NetchainServeConfig {
            slots: 64 * 1024,
            value_bytes_max: 128,
            chain_len: 3,
            vnodes_per_switch: 16,
            workers: 2,
            agent_timeout: Duration::from_millis(20),
            attempts_max: 3,
            seed: 1,
            runtime: NetchainRuntime::Inproc,
        }
    }
}

type ServeNode = Either<Pipeline<NetchainSwitch>, Either<ControllerHost, ServiceHost>>;

/// Where the service hosts run: in a NetChain of the server's own, or as processes joined to
/// one that `onepipe netchain up` started.
enum Fabric {
    Own(Running<ServeNode>),
    Joined {
        stop: Arc<AtomicBool>,
        threads: Vec<std::thread::JoinHandle<()>>,
    },
}

/// A running NetChain and its Redis-protocol server.
pub struct Serving {
    fabric: Fabric,
    pub server: ServerHandle,
}

impl Serving {
    /// Stops the server, then the fabric (or the joined processes).
    pub fn stop(self) {
        self.server.shutdown();
        match self.fabric {
            Fabric::Own(runtime) => {
                runtime.stop();
            }
            Fabric::Joined { stop, threads } => {
                stop.store(true, Ordering::Release);
                for t in threads {
                    let _ = t.join();
                }
            }
        }
    }
}

/// Serves the Redis protocol on `listener` for a NetChain started by `onepipe netchain up`:
/// a service host joins as each of `processes` (binding its address), on a thread of its own.
pub fn start_joined(
    d: &super::processes::Deployment,
    processes: &[u32],
    c: &NetchainServeConfig,
    listener: TcpListener,
) -> Result<Serving, String> {
    if processes.is_empty()
        || processes
            .iter()
            .any(|&p| p == d.controller || p as usize >= d.wiring.process_count())
    {
        return Err(format!(
            "service processes are 0 to {} (process {} is the controller's)",
            d.wiring.process_count().saturating_sub(1),
            d.controller
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut mailboxes = Vec::new();
    let mut threads = Vec::new();
    for &p in processes {
        let mailbox = Arc::new(Mailbox::default());
        let agent = Agent::new(agent_config(c, p, d.controller), d.ring.clone());
        let mut node = ServiceHost::new(agent, mailbox.clone(), c.attempts_max);
        let mut driver = d.driver(d.wiring.node_of_process(p))?;
        let stop = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("netchain-service-{p}"))
                .spawn(move || {
                    let counters = onepipe_runtime::udp::UdpCounters::default();
                    driver.run(&mut node, &Clock::from_system_time(), &stop, &counters);
                })
                .map_err(|e| e.to_string())?,
        );
        mailboxes.push(mailbox);
    }
    let store: Arc<dyn Store> = Arc::new(NetchainStore::new(mailboxes, c.value_bytes_max, wait(c)));
    let server = onepipe_kv::serve(listener, store, ServeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Serving {
        fabric: Fabric::Joined { stop, threads },
        server,
    })
}

fn agent_config(c: &NetchainServeConfig, process: u32, controller: u32) -> AgentConfig {
    AgentConfig {
        timeout: c.agent_timeout,
        attempts_max: c.attempts_max,
        outstanding_max: 65_536,
        // Above every request an earlier run as this process made (the switches drop a write
        // whose request they have seen): the wall clock moved on since.
        first_request: Clock::from_system_time().now().as_nanos(),
        ..AgentConfig::new(process, controller)
    }
}

/// How long a batch waits: every attempt of its calls, and an install before a first write,
/// with room to spare.
fn wait(c: &NetchainServeConfig) -> std::time::Duration {
    let ns = c
        .agent_timeout
        .as_nanos()
        .saturating_mul(4 * c.attempts_max as u64)
        + 1_000_000_000;
    std::time::Duration::from_nanos(ns)
}

/// Starts the fabric and serves the Redis protocol on `listener`.
pub fn start(c: &NetchainServeConfig, listener: TcpListener) -> Result<Serving, String> {
    let wiring = Arc::new(Wiring::new(Topology::netchain_testbed(), 1).map_err(|e| e.to_string())?);
    let switches: Vec<u16> = (0..wiring.switch_count() as u16).collect();
    let ring = Ring::new(&switches, c.vnodes_per_switch, c.chain_len).map_err(|e| e.to_string())?;
    let switch_config = SwitchConfig {
        slots: c.slots,
        value_bytes_max: c.value_bytes_max,
        controller: Some(CONTROLLER_PROCESS),
        ..SwitchConfig::default()
    };
    let mut nodes: Vec<ServeNode> = Vec::new();
    for s in 0..wiring.switch_count() {
        let program = NetchainSwitch::new(s, wiring.clone(), switch_config.clone());
        nodes.push(Either::Left(
            Pipeline::single(NETCHAIN, program).map_err(|e| e.to_string())?,
        ));
    }
    let mut mailboxes = Vec::new();
    for p in 0..CLIENT_PROCESSES {
        let mailbox = Arc::new(Mailbox::default());
        let agent = Agent::new(agent_config(c, p, CONTROLLER_PROCESS), ring.clone());
        nodes.push(Either::Right(Either::Right(ServiceHost::new(
            agent,
            mailbox.clone(),
            c.attempts_max,
        ))));
        mailboxes.push(mailbox);
    }
    let controller = Controller::new(
        ControllerConfig {
            seed: c.seed,
            ..ControllerConfig::new(CONTROLLER_PROCESS)
        },
        wiring.clone(),
        ring,
    );
    let shared = Arc::new(Shared::default());
    nodes.push(Either::Right(Either::Left(ControllerHost::new(
        controller,
        Vec::new(),
        None,
        shared,
    ))));
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let runtime = Running::start(c.runtime, &wiring, nodes, c.workers, 0.0, c.seed, clock)?;
    let store: Arc<dyn Store> = Arc::new(NetchainStore::new(mailboxes, c.value_bytes_max, wait(c)));
    let server = onepipe_kv::serve(listener, store, ServeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Serving {
        fabric: Fabric::Own(runtime),
        server,
    })
}
