//! The OCC baseline the paper compares 1Pipe's store with (section 7.3.1, Fig. 14): FaRM-style
//! optimistic concurrency control and two-phase commit [34], on the same layout, transactions,
//! results and runtime as [`crate::Client`] and [`crate::Server`], on endpoints with ordering
//! off, so that a comparison measures the concurrency control alone.
//!
//! - [`OccServer`]: a replica; per key a value, a version and a lock; replica 0 is the primary.
//! - [`OccClient`]: reads, locks, validates and commits in phases, aborts and retries on a
//!   conflict (the protocol and its serialization point are described there).
//! - [`codec`]: the messages (tags 16 and up), every one best-effort and retried when lost.
//!
//! Out of scope, as in the paper's FaRM (which is not replicated): electing a new primary (a
//! failed primary fails the transactions on its shard, and locks it granted stay with it), and
//! bringing a backup up to date (a backup that never receives a commit its primary applied,
//! because every send of it was lost, keeps later commits of those keys parked).

pub mod client;
pub mod codec;
pub mod server;

pub use client::{OccClient, OccClientConfig, OccCounters};
pub use codec::OccMessage;
pub use server::{LockOwner, OccServer, OccServerConfig, OccServerCounters};

use crate::client::{ClientCounters, Outgoing, SubmitError};
use crate::engine::{ClientEngine, ServerEngine};
use crate::server::Service;
use crate::txn::{Completion, Txn};

impl ClientEngine for OccClient {
    fn has_room(&self) -> bool {
        OccClient::has_room(self)
    }
    fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError> {
        OccClient::submit(self, now_ns, txn)
    }
    fn poll_send(&mut self) -> Option<Outgoing> {
        OccClient::poll_send(self)
    }
    fn unsend(&mut self, out: Outgoing) {
        OccClient::unsend(self, out)
    }
    fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        OccClient::on_sent(self, out, msg_id)
    }
    fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        OccClient::on_send_failure(self, now_ns, msg_id)
    }
    fn on_process_failure(&mut self, now_ns: u64, process: u32) {
        OccClient::on_process_failure(self, now_ns, process)
    }
    fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        OccClient::on_message(self, now_ns, src, payload)
    }
    fn poll_timeout(&self) -> Option<u64> {
        OccClient::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        OccClient::handle_timeout(self, now_ns)
    }
    fn poll_completion(&mut self) -> Option<Completion> {
        OccClient::poll_completion(self)
    }
    fn counters(&self) -> ClientCounters {
        OccClient::counters(self).clone()
    }
    fn invariants(&self) {
        OccClient::invariants(self)
    }
}

impl ServerEngine for OccServer {
    fn on_delivery(&mut self, service: Service, ts: u64, src: u32, payload: &[u8]) {
        OccServer::on_delivery(self, service, ts, src, payload)
    }
    fn set_now(&mut self, now_ns: u64) {
        OccServer::set_now(self, now_ns)
    }
    fn peek_send(&self) -> Option<&(u32, Vec<u8>)> {
        OccServer::peek_send(self)
    }
    fn pop_send(&mut self) -> Option<(u32, Vec<u8>)> {
        OccServer::pop_send(self)
    }
    fn digest(&self) -> u64 {
        self.state().digest()
    }
    fn keys(&self) -> usize {
        self.state().len()
    }
    fn invariants(&self) {
        OccServer::invariants(self)
    }
}

#[cfg(test)]
mod tests;
