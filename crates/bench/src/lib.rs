//! onepipe-bench: the demo, its workload and the benchmarks, as a library that the `onepipe`
//! command parses arguments for and prints.
//!
//! - [`demo`]: the all-to-all broadcast run behind `onepipe demo` (the [`workload`] runs
//!   inside each endpoint's worker as its [`onepipe::host::Application`]).

pub mod demo;
mod demo_drain;
pub mod fig8;
pub mod modes;
pub mod plot;
pub mod recovery;
pub mod runtimes;
pub mod udp_limit;
pub mod workload;
