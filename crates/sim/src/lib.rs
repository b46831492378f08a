//! A deterministic discrete-event simulator: the same switch and endpoint state machines as the
//! runtimes, driven in virtual nanoseconds, so that a seed reproduces a run exactly.

pub mod engine;
pub mod fault;
pub mod host;
pub mod memory;
pub mod node;
pub mod traffic;

pub use engine::{Budget, Engine, EngineError, Model, Role, Stats};
pub use fault::{Fault, FaultAction, FaultTarget};
pub mod baseline;
pub mod campaign;
pub mod config;
pub mod dctcp;
pub mod fig10;
pub mod fig11;
pub mod fig12;
pub mod figures;
pub mod large_message;
pub mod latency_model;
pub mod recovery;
pub mod run;

pub use config::{ClockStep, ConfigError, FailTarget, Failure, ForgedBeacon, SimConfig};
pub use run::{SimChecks, SimError, SimReport, run};
