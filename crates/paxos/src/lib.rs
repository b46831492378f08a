//! In-network Paxos (thesis 004: chapter 5, "Paxos Made Switch-y"; chapter 6, "Partitioned
//! Paxos"): the coordinator and the acceptors run as switch programs, the proposers and the
//! learners as host libraries. The same role code runs on hosts for the software baseline.
//!
//! Sans-IO like every protocol crate here: no socket, thread, clock or RNG; time is an input.
//! docs/paxos.md is the user's page.

pub mod acceptor;
pub mod coordinator;

pub use acceptor::{Acceptor, AcceptorConfig, AcceptorCounters};
pub use coordinator::{Coordinator, CoordinatorConfig, CoordinatorCounters};
pub mod learner;
pub mod proposer;

pub use learner::{Delivery, Learner, LearnerConfig, LearnerCounters};
pub use proposer::{
    Completion, Proposer, ProposerConfig, ProposerCounters, SubmitError, client_id, client_process,
    client_slot,
};
pub mod roles;
pub mod switch;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

pub use roles::Roles;
pub use switch::{PaxosSwitch, SwitchCounters};
pub mod host;

pub use host::{RoleHost, RoleHostCounters};
pub mod deployment;

pub use deployment::{Deployment, Placement, Tuning};
pub mod netpaxos;
