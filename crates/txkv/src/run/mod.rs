//! The store's processes as 1Pipe applications: [`ServerApp`] and [`ClientApp`] implement
//! `onepipe::host::Application`, so every runtime that drives a host node (inproc through
//! `onepipe::embed`, the simulator) runs them inside its workers, against the real endpoint.

mod client_app;
mod process;
mod server_app;

pub use client_app::{ClientApp, TxnSource};
pub use process::StoreProcess;
pub use server_app::{ServerApp, ServerAppCounters};
