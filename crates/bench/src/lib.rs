//! onepipe-bench: the demo, its workload and the benchmarks, as a library; the `onepipe`
//! command parses their arguments and prints their reports.
//!
//! - [`demo`]: the all-to-all broadcast run behind `onepipe demo` (the [`workload`] runs
//!   inside each endpoint's worker as its [`onepipe::host::Application`]), judged and
//!   summarized by [`demo_summary`].
//! - [`modes`], [`fig8`], [`recovery`], [`udp_limit`]: the runners of `onepipe bench`, their
//!   statistics and their reports; [`pairs`] compares runs in pairs; [`plot`] draws figures
//!   as PNG.
//! - [`soak`]: `onepipe bench soak`, a long open-loop run at a fraction of the measured
//!   capacity, checked online ([`soak_stream`] hands each process's events out as they come).
//! - [`netchain`]: `onepipe netchain demo`, NetChain's testbed with closed-loop clients.
//! - [`runtimes`]: which runtime a run uses, and each runtime's defaults.

pub mod cosy;
pub mod demo;
mod demo_drain;
pub mod demo_summary;
pub mod etcd_compare;
pub mod fig11;
pub mod fig8;
pub mod modes;
pub mod netchain;
pub mod pairs;
pub mod paxos;
pub mod plot;
pub mod recovery;
pub mod reorder_cost;
pub mod runtimes;
pub mod soak;
pub mod soak_stream;
pub mod txkv;
pub mod udp_limit;
pub mod workload;
