//! In-network Paxos as separate OS processes over UDP (`onepipe paxos up`): one process per
//! switch (s1 the coordinator, s2..s4 the acceptors, s0 the ToR that forwards), one per replica
//! (its store in a directory of its own), one for the backup coordinator; clients (`onepipe paxos
//! serve --topology`, `onepipe paxos get|set`) join as client processes. What they must agree on
//! without talking (the wiring, the addresses, which process has which role, the protocol's
//! sizes) follows from the topology and the partition count alone: [`Processes`].
//!
//! The processes of a topology with H hosts, in order (`Deployment::testbed`): client hosts
//! 0..H-8, then three replicas, then the backup coordinator, then four processes for the
//! software baseline's roles, which the in-network placement leaves idle (`up` starts none).

#![allow(clippy::disallowed_methods)] // processes read the system clock and wait on it

use super::replica::ReplicaHost;
use onepipe_fabric::{Topology, Wiring};
use onepipe_kv::paxos::{Mailbox, ServiceConfig, ServiceHost};
use onepipe_kv::replicated::{ReplicaConfig, SyncMode};
use onepipe_kv::{Command, Reply, StoreError};
use onepipe_paxos::deployment::{ACCEPTOR_SWITCHES, COORDINATOR_SWITCH, REPLICAS};
use onepipe_paxos::{Deployment, PaxosSwitch, Placement, Proposer, RoleHost, SwitchCounters, Tuning};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::UdpCounters;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::plan::AddressPlan;
use onepipe_runtime::udp::{Links, UdpConfig, UdpDriver};
use onepipe_wire::paxos::Addr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

/// Longest value the acceptors of a served store hold, in bytes: a command's envelope (a SET of a
/// 256-byte key and a 741-byte value at most, `onepipe_kv::paxos::limits`).
pub const LOG_VALUE_BYTES_MAX: usize = 1024;
/// Frames a switch or role host holds for its ports.
const QUEUE_FRAMES_MAX: usize = 1 << 16;
/// Client slots of one service host: as many as the Redis front's connections, so a connection
/// never waits for another's command; with the replicas' 4096 sessions, four hosts fit.
pub const SERVICE_SLOTS: u32 = 1024;

/// The protocol's sizes and timers for a served store of `partitions` partitions: every process
/// of a deployment computes the same.
pub fn serving_tuning(partitions: u16) -> Tuning {
    Tuning {
        partitions,
        value_bytes_max: LOG_VALUE_BYTES_MAX,
        ..Tuning::default()
    }
}

/// What a process of the deployment does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A client host: `serve` and the one-shot clients join as one.
    Client,
    /// Replica number `i` (0, 1, 2).
    Replica(usize),
    Backup,
    /// A software-baseline role, idle in the in-network placement.
    Idle,
}

pub struct Processes {
    pub wiring: Arc<Wiring>,
    pub plan: AddressPlan,
    pub deployment: Deployment,
    pub udp: UdpConfig,
}

impl Processes {
    /// The in-network deployment on `topology`, which must be shaped as the paxos testbed:
    /// switches 1..=4 the coordinator and the acceptors, and at least one client host.
    pub fn new(topology: Topology, auth: Auth, partitions: u16) -> Result<Processes, String> {
        let wiring = Arc::new(Wiring::new(topology, 1).map_err(|e| e.to_string())?);
        let fixed = Deployment::hosts(0);
        let hosts = wiring.process_count();
        if hosts <= fixed {
            return Err(format!(
                "a Paxos deployment needs {} hosts at least (client hosts, {REPLICAS} replicas, a backup coordinator and {} idle software roles); the topology has {hosts}",
                fixed + 1,
                ACCEPTOR_SWITCHES.len() + 1
            ));
        }
        let switches_needed = *ACCEPTOR_SWITCHES.iter().max().expect("acceptors") as usize + 1;
        if wiring.switch_count() < switches_needed {
            return Err(format!(
                "a Paxos deployment needs {switches_needed} switches (switch {COORDINATOR_SWITCH} the coordinator, {ACCEPTOR_SWITCHES:?} the acceptors); the topology has {}",
                wiring.switch_count()
            ));
        }
        if partitions == 0 || partitions > 64 {
            return Err("1 to 64 partitions".into());
        }
        let plan = AddressPlan::new(&wiring).map_err(|e| e.to_string())?;
        let deployment = Deployment::testbed(Placement::InNetwork, hosts - fixed, serving_tuning(partitions));
        let udp = UdpConfig {
            auth,
            ..UdpConfig::default()
        };
        Ok(Processes {
            wiring,
            plan,
            deployment,
            udp,
        })
    }

    /// A driver bound to runtime node `node`'s address, with its links.
    pub fn driver(&self, node: usize) -> Result<UdpDriver, String> {
        let links = Links::of(&self.wiring, &self.plan, node);
        UdpDriver::bind(&links, &self.udp).map_err(|e| format!("{}: {e}", links.local))
    }

    pub fn role(&self, process: u32) -> Result<Role, String> {
        let d = &self.deployment;
        if process as usize >= self.wiring.process_count() {
            return Err(format!(
                "the topology has processes 0 to {}",
                self.wiring.process_count() - 1
            ));
        }
        Ok(if d.clients.contains(&process) {
            Role::Client
        } else if let Some(i) = d.replicas.iter().position(|&p| p == process) {
            Role::Replica(i)
        } else if process == d.backup {
            Role::Backup
        } else {
            Role::Idle
        })
    }

    /// The switches `up` starts, by name.
    pub fn switch_names(&self) -> Vec<String> {
        self.wiring
            .topology
            .switches
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// The processes `up` starts: the replicas and the backup coordinator.
    pub fn server_processes(&self) -> Vec<u32> {
        let d = &self.deployment;
        d.replicas.iter().copied().chain([d.backup]).collect()
    }
}

/// Runs switch `name` (the coordinator, an acceptor, or a switch that only forwards) until
/// `stop`; its counters at the end.
pub fn run_switch(p: &Processes, name: &str, stop: &AtomicBool) -> Result<SwitchCounters, String> {
    let t = &p.wiring.topology;
    let index = t
        .switches
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(|| format!("no switch `{name}` ({})", t.switch_names_hint()))?;
    let roles = p.deployment.roles_at(Addr::Switch(index as u16));
    let mut node = PaxosSwitch::new(index, p.wiring.clone(), roles, QUEUE_FRAMES_MAX);
    let mut driver = p.driver(index)?;
    driver.run(
        &mut node,
        &Clock::from_system_time(),
        stop,
        &UdpCounters::default(),
    );
    Ok(*node.counters())
}

/// Runs process `process` (a replica with its store in `data_dir/replica-N`, or the backup
/// coordinator) until `stop`.
pub fn run_process(
    p: &Processes,
    process: u32,
    data_dir: &Path,
    sync: SyncMode,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut driver = p.driver(p.wiring.node_of_process(process))?;
    let clock = Clock::from_system_time();
    let counters = UdpCounters::default();
    match p.role(process)? {
        Role::Replica(i) => {
            let config = ReplicaConfig {
                partitions: p.deployment.tuning.partitions,
                sync,
                ..ReplicaConfig::default()
            };
            let dir = data_dir.join(format!("replica-{i}"));
            let mut node = ReplicaHost::open(&dir, config, p.deployment.learner_config(i), 0, true)?;
            driver.run(&mut node, &clock, stop, &counters);
            node.stop_workers(); // the store closed before the process ends
            match node.store_error {
                Some(e) => Err(format!("replica {i}: {e}")),
                None => Ok(()),
            }
        }
        Role::Backup => {
            let roles = p.deployment.roles_at(Addr::Process(process));
            let mut node = RoleHost::new(process, roles, QUEUE_FRAMES_MAX);
            driver.run(&mut node, &clock, stop, &counters);
            Ok(())
        }
        role => Err(format!("process {process} is a {role:?} process: nothing to run")),
    }
}

/// Checks that `data_dir` holds no replica's store: a new deployment's acceptors are empty, so
/// its log starts again at instance 0, which replicas reopened from an earlier deployment's
/// stores have applied already (they would skip, or mix, the new log's first instances). A
/// replica restarted into a running deployment (`paxos node --process N`) is another matter: it
/// rejoins the log that goes on.
pub fn check_fresh(data_dir: &Path) -> Result<(), String> {
    for i in 0..REPLICAS {
        let dir = data_dir.join(format!("replica-{i}"));
        let used = std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some());
        if used {
            return Err(format!(
                "{} holds a store of an earlier deployment, whose log a new deployment would start again at instance 0: remove it, or give another --data-dir",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// The service host a client process runs: its proposer and slots.
pub fn service_host(d: &Deployment, process: u32, mailbox: Arc<Mailbox>, slots: u32) -> ServiceHost {
    let config = ServiceConfig {
        process,
        partitions: d.tuning.partitions,
        slots,
        // Above every request an earlier run as this process made (the clock moved on since),
        // which the replicas' sessions remember.
        first_request: Clock::from_system_time().now().as_nanos(),
        log_value_bytes_max: d.tuning.value_bytes_max,
    };
    ServiceHost::new(Proposer::new(d.proposer_config(process)), mailbox, config)
}

/// How long a command may take: every try of its request, with room to spare.
pub fn command_wait(t: &Tuning) -> std::time::Duration {
    let ns = t
        .retry_timeout
        .as_nanos()
        .saturating_mul(u64::from(t.tries_max) + 2);
    std::time::Duration::from_nanos(ns) + std::time::Duration::from_secs(1)
}

/// Runs `command` as client process `process` (whose address it binds) and gives its result.
pub fn call(p: &Processes, process: u32, command: Command) -> Result<Result<Reply, StoreError>, String> {
    if p.role(process)? != Role::Client {
        return Err(format!(
            "process {process} is not a client host (they are {:?})",
            p.deployment.clients
        ));
    }
    let mailbox = Arc::new(Mailbox::default());
    let mut node = service_host(&p.deployment, process, mailbox.clone(), 1);
    let mut driver = p.driver(p.wiring.node_of_process(process))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    mailbox.push(vec![command], tx);
    let s = stop.clone();
    let wait = command_wait(&p.deployment.tuning);
    let waiter = std::thread::spawn(move || {
        let result = rx.recv_timeout(wait);
        s.store(true, Ordering::Release);
        result
    });
    driver.run(
        &mut node,
        &Clock::from_system_time(),
        &stop,
        &UdpCounters::default(),
    );
    let results = waiter
        .join()
        .map_err(|_| "the waiting thread panicked".to_string())?;
    match results {
        Ok(mut r) => Ok(r.remove(0)),
        Err(_) => Ok(Err(StoreError::OutcomeUnknown(format!(
            "no answer within {wait:?}"
        )))),
    }
}
