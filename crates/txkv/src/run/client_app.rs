use onepipe::Endpoint;
use onepipe::host::Application;
use onepipe::{Instant, SendFailure};

use crate::engine::ClientEngine;
use crate::txn::{Completion, Txn};

/// Where a client's transactions come from and where their completions go: a workload
/// generator, or the Redis front's requests.
pub trait TxnSource: Send + 'static {
    /// The next transaction to start at `now_ns`, if there is one now.
    fn next(&mut self, now_ns: u64) -> Option<Txn>;
    /// `txn` was submitted as `id`.
    fn submitted(&mut self, id: u64, txn: Txn);
    fn completed(&mut self, completion: Completion);
    /// When the source will have a transaction without being asked (a paced workload).
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
    /// Whether to start a snapshot of the whole store now (asked once per visit).
    fn wants_snapshot(&mut self) -> bool {
        false
    }
    /// A snapshot finished (or could not be taken: `result.outcome` says why).
    fn snapshot_done(&mut self, _result: crate::client::SnapshotResult) {}
}

/// A client process as a 1Pipe application.
pub struct ClientApp<C, W> {
    pub engine: C,
    pub source: W,
    /// The runtime's time at the last visit (callbacks carry none).
    now_ns: u64,
    /// Scatterings the endpoint refused (a destination declared failed meanwhile): left to the
    /// engine's timeout.
    pub refused: u64,
    /// Send failures the fabric reported, by reason: NAK, gave up, receiver failed, own failure.
    pub send_failures: [u64; 4],
}

impl<C: ClientEngine, W: TxnSource> ClientApp<C, W> {
    pub fn new(engine: C, source: W) -> ClientApp<C, W> {
        ClientApp {
            engine,
            source,
            now_ns: 0,
            refused: 0,
            send_failures: [0; 4],
        }
    }

    fn take_completions(&mut self) {
        while let Some(c) = self.engine.poll_completion() {
            self.source.completed(c);
        }
        while let Some(s) = self.engine.poll_snapshot() {
            self.source.snapshot_done(s);
        }
    }

    fn submit_what_fits(&mut self, now_ns: u64) {
        if self.source.wants_snapshot()
            && let Err(e) = self.engine.snapshot(now_ns)
        {
            let outcome = Err(e.to_string());
            self.source
                .snapshot_done(crate::client::SnapshotResult { id: 0, outcome });
        }
        while self.engine.has_room() {
            let Some(txn) = self.source.next(now_ns) else {
                break;
            };
            match self.engine.submit(now_ns, txn.clone()) {
                Ok(id) => self.source.submitted(id, txn),
                // Empty or oversized: the source made it, the source hears of it.
                Err(e) => self.source.completed(Completion {
                    id: 0,
                    outcome: crate::txn::Outcome::Failed(e.to_string()),
                    call_ns: now_ns,
                    return_ns: now_ns,
                    attempts: 0,
                    aborts: 0,
                    ts: None,
                }),
            }
        }
    }

    fn send_what_fits(&mut self, now: Instant, endpoint: &mut Endpoint) {
        while let Some(out) = self.engine.poll_send() {
            let (need, room) = if out.reliable {
                let need: usize = out
                    .scatter
                    .iter()
                    .map(|(_, m)| endpoint.reliable_packets_for(m.len()))
                    .sum();
                (need, endpoint.reliable_room_packets())
            } else {
                let need: usize = out
                    .scatter
                    .iter()
                    .map(|(_, m)| endpoint.packets_for(m.len()))
                    .sum();
                (need, endpoint.send_room_packets())
            };
            if need > room {
                self.engine.unsend(out);
                break;
            }
            let scatter: Vec<(u32, &[u8])> = out.scatter.iter().map(|(d, m)| (*d, &m[..])).collect();
            let sent = if out.reliable {
                endpoint.send_reliable(now, &scatter)
            } else {
                endpoint.send_unreliable(now, &scatter)
            };
            match sent {
                Ok(msg_id) => self.engine.on_sent(&out, msg_id),
                Err(_) => self.refused += 1,
            }
        }
    }
}

impl<C: ClientEngine, W: TxnSource> Application for ClientApp<C, W> {
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        self.now_ns = now.as_nanos();
        let (engine, now_ns) = (&mut self.engine, self.now_ns);
        while endpoint
            .poll_deliver_with(|_, src, _, p| engine.on_message(now_ns, src, p))
            .is_some()
        {}
        while endpoint
            .poll_deliver_reliable_with(|_, src, _, p| engine.on_message(now_ns, src, p))
            .is_some()
        {}
        while endpoint.poll_released().is_some() {}
        self.take_completions();
        self.engine.invariants();
    }

    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        self.now_ns = now.as_nanos();
        self.submit_what_fits(self.now_ns);
        self.send_what_fits(now, endpoint);
        self.take_completions();
    }

    fn on_process_failure(&mut self, process: u32, _ts: Instant) {
        self.engine.on_process_failure(self.now_ns, process);
        self.take_completions();
    }

    fn on_send_failure(&mut self, failure: SendFailure) {
        let reason = match failure.reason {
            onepipe::FailureReason::Nak => 0,
            onepipe::FailureReason::GaveUp => 1,
            onepipe::FailureReason::ReceiverFailed { .. } => 2,
            onepipe::FailureReason::OwnFailure => 3,
        };
        self.send_failures[reason] += 1;
        self.engine.on_send_failure(self.now_ns, failure.msg_id);
        self.take_completions();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let t = match (self.engine.poll_timeout(), self.source.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        t.map(Instant::from_nanos)
    }

    fn on_timeout(&mut self, now: Instant, endpoint: &mut Endpoint) {
        self.now_ns = now.as_nanos();
        self.engine.handle_timeout(self.now_ns);
        self.take_completions();
        self.submit_what_fits(self.now_ns);
        self.send_what_fits(now, endpoint);
    }
}
