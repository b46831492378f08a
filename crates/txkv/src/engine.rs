//! The two sides every store of this crate has, so that one runtime adapter drives them all:
//! 1Pipe's ([`Client`](crate::Client), [`Server`](crate::Server)), the non-transactional
//! baseline (the same, unordered) and the OCC baseline ([`crate::occ`]).

use crate::client::{ClientCounters, Outgoing, SnapshotResult, SubmitError};
use crate::server::Service;
use crate::txn::{Completion, Txn};

/// A client side: transactions in, scatterings out, answers in, completions out.
pub trait ClientEngine: Send + 'static {
    /// Whether [`ClientEngine::submit`] would take another transaction now.
    fn has_room(&self) -> bool;
    /// Starts `txn` at `now_ns`; returns its id.
    fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError>;
    /// The next scattering to send.
    fn poll_send(&mut self) -> Option<Outgoing>;
    /// The runtime could not send `out` now: it is offered again first.
    fn unsend(&mut self, out: Outgoing);
    /// `out` left as message `msg_id`.
    fn on_sent(&mut self, out: &Outgoing, msg_id: u64);
    /// Paper Table 1's send-failure callback.
    fn on_send_failure(&mut self, now_ns: u64, msg_id: u64);
    /// Paper Table 1's process-failure callback.
    fn on_process_failure(&mut self, now_ns: u64, process: u32);
    /// A message delivered to this client (by either service).
    fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]);
    fn poll_timeout(&self) -> Option<u64>;
    fn handle_timeout(&mut self, now_ns: u64);
    fn poll_completion(&mut self) -> Option<Completion>;
    fn counters(&self) -> ClientCounters;
    /// Starts a consistent snapshot of the whole store (paper 2.2.4), if the store takes them.
    fn snapshot(&mut self, _now_ns: u64) -> Result<u64, SubmitError> {
        Err(SubmitError::SnapshotsUnsupported)
    }
    fn poll_snapshot(&mut self) -> Option<SnapshotResult> {
        None
    }
    /// Checked after every step, in release builds too.
    fn invariants(&self);
}

/// A server side: deliveries in, unicast answers out.
pub trait ServerEngine: Send + 'static {
    fn on_delivery(&mut self, service: Service, ts: u64, src: u32, payload: &[u8]);
    /// The runtime's clock at this visit, before its deliveries (the OCC primary stamps its
    /// reads with it; 1Pipe's servers need none).
    fn set_now(&mut self, _now_ns: u64) {}
    /// The endpoint's commit barrier (1Pipe's reads wait for it; others ignore it).
    fn on_commit_barrier(&mut self, _barrier: u64) {}
    /// The next answer to send, unicast on the best-effort service: (destination, bytes).
    fn peek_send(&self) -> Option<&(u32, Vec<u8>)>;
    fn pop_send(&mut self) -> Option<(u32, Vec<u8>)>;
    /// A digest of the replica's content, compared across replicas at the end of a run.
    fn digest(&self) -> u64;
    /// Keys held.
    fn keys(&self) -> usize;
    fn invariants(&self);
}

impl ClientEngine for crate::Client {
    fn has_room(&self) -> bool {
        crate::Client::has_room(self)
    }
    fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError> {
        crate::Client::submit(self, now_ns, txn)
    }
    fn poll_send(&mut self) -> Option<Outgoing> {
        crate::Client::poll_send(self)
    }
    fn unsend(&mut self, out: Outgoing) {
        crate::Client::unsend(self, out)
    }
    fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        crate::Client::on_sent(self, out, msg_id)
    }
    fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        crate::Client::on_send_failure(self, now_ns, msg_id)
    }
    fn on_process_failure(&mut self, now_ns: u64, process: u32) {
        crate::Client::on_process_failure(self, now_ns, process)
    }
    fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        crate::Client::on_message(self, now_ns, src, payload)
    }
    fn poll_timeout(&self) -> Option<u64> {
        crate::Client::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        crate::Client::handle_timeout(self, now_ns)
    }
    fn poll_completion(&mut self) -> Option<Completion> {
        crate::Client::poll_completion(self)
    }
    fn counters(&self) -> ClientCounters {
        crate::Client::counters(self).clone()
    }
    fn snapshot(&mut self, now_ns: u64) -> Result<u64, SubmitError> {
        crate::Client::snapshot(self, now_ns)
    }
    fn poll_snapshot(&mut self) -> Option<SnapshotResult> {
        crate::Client::poll_snapshot(self)
    }
    fn invariants(&self) {
        crate::Client::invariants(self)
    }
}

impl ServerEngine for crate::Server {
    fn on_delivery(&mut self, service: Service, ts: u64, src: u32, payload: &[u8]) {
        crate::Server::on_delivery(self, service, ts, src, payload)
    }
    fn on_commit_barrier(&mut self, barrier: u64) {
        crate::Server::on_commit_barrier(self, barrier)
    }
    fn peek_send(&self) -> Option<&(u32, Vec<u8>)> {
        crate::Server::peek_send(self)
    }
    fn pop_send(&mut self) -> Option<(u32, Vec<u8>)> {
        crate::Server::pop_send(self)
    }
    fn digest(&self) -> u64 {
        self.state().digest()
    }
    fn keys(&self) -> usize {
        self.state().len()
    }
    fn invariants(&self) {
        crate::Server::invariants(self)
    }
}

/// Boxed engines, so that one process type runs any store (the demo compares three).
impl ClientEngine for Box<dyn ClientEngine> {
    fn has_room(&self) -> bool {
        (**self).has_room()
    }
    fn submit(&mut self, now_ns: u64, txn: Txn) -> Result<u64, SubmitError> {
        (**self).submit(now_ns, txn)
    }
    fn poll_send(&mut self) -> Option<Outgoing> {
        (**self).poll_send()
    }
    fn unsend(&mut self, out: Outgoing) {
        (**self).unsend(out)
    }
    fn on_sent(&mut self, out: &Outgoing, msg_id: u64) {
        (**self).on_sent(out, msg_id)
    }
    fn on_send_failure(&mut self, now_ns: u64, msg_id: u64) {
        (**self).on_send_failure(now_ns, msg_id)
    }
    fn on_process_failure(&mut self, now_ns: u64, process: u32) {
        (**self).on_process_failure(now_ns, process)
    }
    fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        (**self).on_message(now_ns, src, payload)
    }
    fn poll_timeout(&self) -> Option<u64> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        (**self).handle_timeout(now_ns)
    }
    fn poll_completion(&mut self) -> Option<Completion> {
        (**self).poll_completion()
    }
    fn counters(&self) -> ClientCounters {
        (**self).counters()
    }
    fn snapshot(&mut self, now_ns: u64) -> Result<u64, SubmitError> {
        (**self).snapshot(now_ns)
    }
    fn poll_snapshot(&mut self) -> Option<SnapshotResult> {
        (**self).poll_snapshot()
    }
    fn invariants(&self) {
        (**self).invariants()
    }
}

impl ServerEngine for Box<dyn ServerEngine> {
    fn on_delivery(&mut self, service: Service, ts: u64, src: u32, payload: &[u8]) {
        (**self).on_delivery(service, ts, src, payload)
    }
    fn set_now(&mut self, now_ns: u64) {
        (**self).set_now(now_ns)
    }
    fn on_commit_barrier(&mut self, barrier: u64) {
        (**self).on_commit_barrier(barrier)
    }
    fn peek_send(&self) -> Option<&(u32, Vec<u8>)> {
        (**self).peek_send()
    }
    fn pop_send(&mut self) -> Option<(u32, Vec<u8>)> {
        (**self).pop_send()
    }
    fn digest(&self) -> u64 {
        (**self).digest()
    }
    fn keys(&self) -> usize {
        (**self).keys()
    }
    fn invariants(&self) {
        (**self).invariants()
    }
}
