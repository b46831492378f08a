//! `onepipe paxos serve`: the in-network Paxos store behind the Redis-protocol front, so that
//! redis-cli, redis-benchmark and client libraries use it unchanged. By default over a
//! deployment of its own in this process (the paxos testbed on the inproc or udp runtime: the
//! coordinator and acceptor switches, three replicas with durable stores, the backup
//! coordinator); or joined, as client processes, to one `onepipe paxos up` started.

use super::processes::{self, Processes, SERVICE_SLOTS, command_wait, serving_tuning};
use super::replica::ReplicaHost;
use super::{DataDir, PaxosDemoConfig};
use crate::netchain::fabric::{NetchainRuntime, Running};
use onepipe_fabric::{Either, Pipeline, Topology, Wiring};
use onepipe_kv::paxos::{Mailbox, PaxosStore, ServiceHost};
use onepipe_kv::replicated::{ReplicaConfig, SyncMode};
use onepipe_kv::{ServeConfig, ServerHandle, Store};
use onepipe_paxos::{Deployment, PaxosSwitch, Placement, RoleHost};
use onepipe_runtime::inproc::Clock;
use onepipe_wire::Instant;
use onepipe_wire::paxos::Addr;
use onepipe_wire::protocol::PAXOS;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Client hosts of a deployment of the server's own: one service host each, taking the
/// connections' batches in turn.
pub const SERVICE_HOSTS: usize = 2;

#[derive(Clone, Debug)]
pub struct PaxosServeConfig {
    pub runtime: NetchainRuntime,
    pub partitions: u16,
    /// Where the replicas keep their stores (`replica-N` under it), which must hold none yet
    /// ([`processes::check_fresh`]); a temporary directory, removed at the end, if `None`.
    pub data_dir: Option<PathBuf>,
    pub sync: SyncMode,
    pub workers: usize,
}

impl Default for PaxosServeConfig {
    fn default() -> Self {
        PaxosServeConfig {
            runtime: NetchainRuntime::Inproc,
            partitions: 1,
            data_dir: None,
            sync: SyncMode::Buffered,
            workers: 2,
        }
    }
}

type ServeNode = Either<Pipeline<PaxosSwitch>, Either<RoleHost, Either<ServiceHost, ReplicaHost>>>;

/// Where the service hosts run.
enum Fabric {
    /// A deployment of the server's own, and its data directory (kept until it stops).
    Own(Running<ServeNode>, DataDir),
    Joined {
        stop: Arc<AtomicBool>,
        threads: Vec<std::thread::JoinHandle<()>>,
    },
}

/// A running deployment (or joined processes) and its Redis-protocol server.
pub struct Serving {
    fabric: Fabric,
    pub server: ServerHandle,
}

impl Serving {
    /// Stops the server, then the fabric (or the joined processes).
    pub fn stop(self) {
        self.server.shutdown();
        match self.fabric {
            Fabric::Own(runtime, data) => {
                for node in runtime.stop() {
                    if let Either::Right(Either::Right(Either::Right(mut replica))) = node {
                        // Joins the replica's worker threads, which own its store: closed
                        // before the data directory is reused or removed.
                        replica.stop_workers();
                    }
                }
                drop(data);
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

/// Starts a deployment of its own and serves the Redis protocol on `listener`.
pub fn start(c: &PaxosServeConfig, listener: TcpListener) -> Result<Serving, String> {
    if c.partitions == 0 || c.partitions > 64 {
        return Err("1 to 64 partitions".into());
    }
    let tuning = serving_tuning(c.partitions);
    let d = Deployment::testbed(Placement::InNetwork, SERVICE_HOSTS, tuning.clone());
    let topology = Topology::paxos_testbed(Deployment::hosts(SERVICE_HOSTS));
    let wiring = Arc::new(Wiring::new(topology, 1).map_err(|e| e.to_string())?);
    if let Some(dir) = &c.data_dir {
        processes::check_fresh(dir)?;
    }
    let data = DataDir::new(&PaxosDemoConfig {
        data_dir: c.data_dir.clone(),
        ..PaxosDemoConfig::default()
    })?;
    let (nodes, mailboxes) = build(c, &d, &wiring, &data)?;
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let runtime = Running::start(c.runtime, &wiring, nodes, c.workers, 0.0, 1, clock)?;
    let store: Arc<dyn Store> = Arc::new(PaxosStore::new(
        mailboxes,
        c.partitions,
        tuning.value_bytes_max,
        command_wait(&tuning),
    ));
    let server = onepipe_kv::serve(listener, store, ServeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Serving {
        fabric: Fabric::Own(runtime, data),
        server,
    })
}

/// The deployment's nodes (switches, then processes, as `wiring` numbers them) and the service
/// hosts' mailboxes.
fn build(
    c: &PaxosServeConfig,
    d: &Deployment,
    wiring: &Arc<Wiring>,
    data: &DataDir,
) -> Result<(Vec<ServeNode>, Vec<Arc<Mailbox>>), String> {
    let mut nodes: Vec<ServeNode> = Vec::new();
    for s in 0..wiring.switch_count() {
        let program = PaxosSwitch::new(s, wiring.clone(), d.roles_at(Addr::Switch(s as u16)), 1 << 16);
        nodes.push(Either::Left(
            Pipeline::single(PAXOS, program).map_err(|e| e.to_string())?,
        ));
    }
    let mut mailboxes = Vec::new();
    for p in 0..wiring.process_count() as u32 {
        let node = if d.clients.contains(&p) {
            let mailbox = Arc::new(Mailbox::default());
            mailboxes.push(mailbox.clone());
            Either::Left(processes::service_host(d, p, mailbox, SERVICE_SLOTS))
        } else if let Some(i) = d.replicas.iter().position(|&x| x == p) {
            let config = ReplicaConfig {
                partitions: c.partitions,
                sync: c.sync,
                ..ReplicaConfig::default()
            };
            let dir = data.path.join(format!("replica-{i}"));
            Either::Right(ReplicaHost::open(&dir, config, d.learner_config(i), 0, true)?)
        } else {
            // The backup coordinator (the software baseline's processes stay idle).
            let roles = d.roles_at(Addr::Process(p));
            nodes.push(Either::Right(Either::Left(RoleHost::new(p, roles, 1 << 16))));
            continue;
        };
        nodes.push(Either::Right(Either::Right(node)));
    }
    Ok((nodes, mailboxes))
}

/// Serves the Redis protocol on `listener` for a deployment `onepipe paxos up` started: a
/// service host joins as each of `clients` (client processes, binding their addresses), on a
/// thread of its own.
pub fn start_joined(p: &Processes, clients: &[u32], listener: TcpListener) -> Result<Serving, String> {
    if clients.is_empty() {
        return Err("join as one client process at least".into());
    }
    for &c in clients {
        if p.role(c)? != processes::Role::Client {
            return Err(format!(
                "process {c} is not a client host (they are {:?})",
                p.deployment.clients
            ));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut mailboxes = Vec::new();
    let mut threads = Vec::new();
    for &c in clients {
        let mailbox = Arc::new(Mailbox::default());
        let mut node = processes::service_host(&p.deployment, c, mailbox.clone(), SERVICE_SLOTS);
        let mut driver = p.driver(p.wiring.node_of_process(c))?;
        let stop = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("paxos-service-{c}"))
                .spawn(move || {
                    let counters = onepipe_runtime::udp::UdpCounters::default();
                    driver.run(&mut node, &Clock::from_system_time(), &stop, &counters);
                })
                .map_err(|e| e.to_string())?,
        );
        mailboxes.push(mailbox);
    }
    let t = &p.deployment.tuning;
    let store: Arc<dyn Store> = Arc::new(PaxosStore::new(
        mailboxes,
        t.partitions,
        t.value_bytes_max,
        command_wait(t),
    ));
    let server = onepipe_kv::serve(listener, store, ServeConfig::default()).map_err(|e| e.to_string())?;
    Ok(Serving {
        fabric: Fabric::Joined { stop, threads },
        server,
    })
}
