//! Who is where: the addresses of every role of a deployment on the paxos testbed, and the
//! configuration of each role derived from them, for the in-network placement (coordinator and
//! acceptors in switches s1..s4) and the software baseline (the same roles as host processes).
//! The simulator, the runtimes and `onepipe paxos up` build their nodes from one of these.
//!
//! Processes on `Topology::paxos_testbed(hosts)`, in order: the client hosts, the replicas
//! (learners), the backup coordinator, then the software baseline's coordinator and acceptors
//! (idle in the in-network placement).

use crate::acceptor::{Acceptor, AcceptorConfig};
use crate::coordinator::{Coordinator, CoordinatorConfig};
use crate::learner::LearnerConfig;
use crate::proposer::ProposerConfig;
use crate::roles::Roles;
use onepipe_wire::Duration;
use onepipe_wire::paxos::Addr;

/// Where the coordinator and the acceptors run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In the switches (the thesis's design).
    InNetwork,
    /// As host processes (the baseline: libpaxos's place in the thesis).
    Software,
}

/// The protocol's timers and sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    pub partitions: u16,
    /// Acceptor slots per partition.
    pub window: u32,
    /// Instances per Phase 1 range.
    pub range: u32,
    pub value_bytes_max: usize,
    pub retry_timeout: Duration,
    pub failover_after: u32,
    pub tries_max: u32,
    pub phase1_timeout: Duration,
    pub gap_timeout: Duration,
    pub trim_interval: Duration,
    /// Requests a proposer (one client host) keeps pending.
    pub pending_max: usize,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            partitions: 1,
            window: 4096,
            range: 1024,
            value_bytes_max: 256,
            retry_timeout: Duration::from_millis(20),
            failover_after: 3,
            tries_max: 50,
            phase1_timeout: Duration::from_millis(5),
            gap_timeout: Duration::from_millis(2),
            trim_interval: Duration::from_millis(5),
            pending_max: 4096,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployment {
    pub placement: Placement,
    pub tuning: Tuning,
    pub clients: Vec<u32>,
    pub replicas: Vec<u32>,
    pub backup: u32,
    pub coordinator: Addr,
    pub acceptors: Vec<Addr>,
}

/// Switches of the paxos testbed: s0 the ToR, s1 the coordinator, s2..s4 the acceptors.
pub const COORDINATOR_SWITCH: u16 = 1;
pub const ACCEPTOR_SWITCHES: [u16; 3] = [2, 3, 4];
pub const REPLICAS: usize = 3;
/// Round owners: distinct per coordinator.
const PRIMARY_OWNER: u8 = 1;
const BACKUP_OWNER: u8 = 2;

impl Deployment {
    /// Processes the testbed needs for `client_hosts` client hosts.
    pub fn hosts(client_hosts: usize) -> usize {
        client_hosts + REPLICAS + 1 + 1 + ACCEPTOR_SWITCHES.len()
    }

    /// The deployment on `Topology::paxos_testbed(Deployment::hosts(client_hosts))`.
    pub fn testbed(placement: Placement, client_hosts: usize, tuning: Tuning) -> Deployment {
        let c = client_hosts as u32;
        let replicas: Vec<u32> = (c..c + REPLICAS as u32).collect();
        let backup = c + REPLICAS as u32;
        let software = backup + 1;
        let (coordinator, acceptors) = match placement {
            Placement::InNetwork => (
                Addr::Switch(COORDINATOR_SWITCH),
                ACCEPTOR_SWITCHES.iter().map(|&s| Addr::Switch(s)).collect(),
            ),
            Placement::Software => (
                Addr::Process(software),
                (1..=ACCEPTOR_SWITCHES.len() as u32)
                    .map(|i| Addr::Process(software + i))
                    .collect(),
            ),
        };
        Deployment {
            placement,
            tuning,
            clients: (0..c).collect(),
            replicas,
            backup,
            coordinator,
            acceptors,
        }
    }

    pub fn learners(&self) -> Vec<Addr> {
        self.replicas.iter().map(|&p| Addr::Process(p)).collect()
    }

    /// The coordinator first, then the backup: the order proposers try them.
    pub fn coordinators(&self) -> Vec<Addr> {
        vec![self.coordinator, Addr::Process(self.backup)]
    }

    fn trim_quorum(&self) -> usize {
        self.replicas.len() / 2 + 1
    }

    fn coordinator_config(&self, me: Addr, owner: u8, active: bool) -> CoordinatorConfig {
        let t = &self.tuning;
        CoordinatorConfig {
            me,
            owner,
            acceptors: self.acceptors.clone(),
            learners: self.learners(),
            trim_quorum: self.trim_quorum(),
            partitions: t.partitions,
            window: t.window,
            range: t.range,
            phase1_timeout: t.phase1_timeout,
            held_max: 4096,
            reinits_max: 64,
            active,
        }
    }

    fn acceptor_config(&self, i: usize) -> AcceptorConfig {
        let t = &self.tuning;
        AcceptorConfig {
            swid: i as u16,
            me: self.acceptors[i],
            partitions: t.partitions,
            window: t.window,
            value_bytes_max: t.value_bytes_max,
            coordinators: self.coordinators(),
            learners: self.learners(),
            trim_quorum: self.trim_quorum(),
        }
    }

    /// The roles of the node at `addr` (a switch, or a process of the software baseline or the
    /// backup); empty for every other node.
    pub fn roles_at(&self, addr: Addr) -> Roles {
        let coordinator = if addr == self.coordinator {
            Some(Coordinator::new(self.coordinator_config(
                addr,
                PRIMARY_OWNER,
                true,
            )))
        } else if addr == Addr::Process(self.backup) {
            Some(Coordinator::new(self.coordinator_config(
                addr,
                BACKUP_OWNER,
                false,
            )))
        } else {
            None
        };
        let acceptor = self
            .acceptors
            .iter()
            .position(|&a| a == addr)
            .map(|i| Acceptor::new(self.acceptor_config(i)));
        Roles::new(coordinator, acceptor)
    }

    /// The learner of replica number `i`.
    pub fn learner_config(&self, i: usize) -> LearnerConfig {
        let t = &self.tuning;
        let learners = self.learners();
        LearnerConfig {
            me: learners[i],
            index: i as u16,
            acceptors: self.acceptors.clone(),
            coordinators: self.coordinators(),
            peers: learners.iter().copied().filter(|&l| l != learners[i]).collect(),
            partitions: t.partitions,
            window: t.window,
            retain: 4 * t.window as usize,
            trim_every: (t.window / 8).max(1) as u64,
            trim_interval: t.trim_interval,
            gap_timeout: t.gap_timeout,
            catchup_max: 256,
        }
    }

    /// The proposer of client host `process`.
    pub fn proposer_config(&self, process: u32) -> ProposerConfig {
        let t = &self.tuning;
        ProposerConfig {
            me: Addr::Process(process),
            coordinators: self.coordinators(),
            retry_timeout: t.retry_timeout,
            failover_after: t.failover_after,
            tries_max: t.tries_max,
            pending_max: t.pending_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_placement_puts_the_roles_where_it_says() {
        for placement in [Placement::InNetwork, Placement::Software] {
            let d = Deployment::testbed(placement, 2, Tuning::default());
            assert_eq!(d.replicas, vec![2, 3, 4]);
            assert_eq!(d.backup, 5);
            let switch_roles = |s| !d.roles_at(Addr::Switch(s)).is_empty();
            let process_roles = |p| !d.roles_at(Addr::Process(p)).is_empty();
            let in_switches = (1..5).all(switch_roles);
            let in_hosts = (6..10).all(process_roles);
            assert_eq!(in_switches, placement == Placement::InNetwork);
            assert_eq!(in_hosts, placement == Placement::Software);
            assert!(!switch_roles(0), "the ToR only forwards");
            assert!(process_roles(5), "the backup coordinator is always there");
            assert!(
                d.roles_at(Addr::Process(5))
                    .coordinator
                    .as_ref()
                    .is_some_and(|c| !c.config().active)
            );
            assert_eq!(Deployment::hosts(2), 10);
        }
    }
}
