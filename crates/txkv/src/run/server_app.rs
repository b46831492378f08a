use onepipe::Endpoint;
use onepipe::host::Application;
use onepipe::{Instant, SendFailure};

use crate::engine::ServerEngine;
use crate::server::Service;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerAppCounters {
    /// Answers the endpoint refused (a client declared failed): dropped.
    pub refused: u64,
}

/// A replica as a 1Pipe application: deliveries of both services in, answers out as
/// best-effort unicasts.
pub struct ServerApp<S> {
    pub engine: S,
    pub counters: ServerAppCounters,
}

impl<S: ServerEngine> ServerApp<S> {
    pub fn new(engine: S) -> ServerApp<S> {
        ServerApp {
            engine,
            counters: ServerAppCounters::default(),
        }
    }
}

/// What a server takes its deliveries from: the endpoint, or a test's script.
pub(crate) trait Deliveries {
    /// Hands the next best-effort delivery (timestamp ns, sender, payload) to `f`; false if none.
    fn best_effort(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool;
    /// As [`Deliveries::best_effort`], for the reliable service.
    fn reliable(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool;
    /// The commit barrier, once every reliable message below it has been handed over; `None`
    /// while reliable deliveries are held back (registration, recovery).
    fn commit_barrier(&self) -> Option<u64>;
}

impl Deliveries for Endpoint {
    fn best_effort(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool {
        self.poll_deliver_with(|ts, src, _, p| f(ts.as_nanos(), src, p))
            .is_some()
    }
    fn reliable(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool {
        self.poll_deliver_reliable_with(|ts, src, _, p| f(ts.as_nanos(), src, p))
            .is_some()
    }
    fn commit_barrier(&self) -> Option<u64> {
        (!self.reliable_held()).then(|| Endpoint::commit_barrier(self).as_nanos())
    }
}

/// One visit's deliveries, in the order that keeps reads at their positions:
/// - best effort first: reads only queue until the commit barrier passes them (taking writes
///   first would execute, within one visit, writes above reads that were already deliverable,
///   and make those reads late);
/// - then the reliable writes, each executed after the queued reads below it;
/// - then the commit barrier releases the reads below it, but only when every reliable message
///   below it was handed over (not while the endpoint holds them back: in a run's first
///   milliseconds, waiting for registration, a read was served before a write below it).
pub(crate) fn take_deliveries<S: ServerEngine>(engine: &mut S, from: &mut dyn Deliveries) {
    while from.best_effort(&mut |ts, src, p| engine.on_delivery(Service::BestEffort, ts, src, p)) {}
    while from.reliable(&mut |ts, src, p| engine.on_delivery(Service::Reliable, ts, src, p)) {}
    if let Some(barrier) = from.commit_barrier() {
        engine.on_commit_barrier(barrier);
    }
}

impl<S: ServerEngine> Application for ServerApp<S> {
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        self.engine.set_now(now.as_nanos());
        take_deliveries(&mut self.engine, endpoint);
        // A server never asks for its sends' timestamps.
        while endpoint.poll_released_unreliable().is_some() {}
        self.engine.invariants();
    }

    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        while let Some((_, bytes)) = self.engine.peek_send() {
            if endpoint.packets_for(bytes.len()) > endpoint.send_room_packets() {
                break;
            }
            let (dst, bytes) = self.engine.pop_send().expect("peeked");
            if endpoint.send_unreliable(now, &[(dst, &bytes)]).is_err() {
                self.counters.refused += 1;
            }
        }
    }

    fn on_process_failure(&mut self, _process: u32, _ts: Instant) {}

    // Answers are best effort: a lost one is asked for again by its client.
    fn on_send_failure(&mut self, _failure: SendFailure) {}
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use bytes::Bytes;

    use super::*;
    use crate::codec::{FLAG_READ_ONLY, Message, Request, Status};
    use crate::server::{Ordering, Server, ServerConfig};
    use crate::txn::{Op, OpResult};

    /// A visit's deliveries, scripted.
    #[derive(Default)]
    struct Script {
        best_effort: VecDeque<(u64, u32, Vec<u8>)>,
        reliable: VecDeque<(u64, u32, Vec<u8>)>,
        commit: Option<u64>,
    }

    impl Deliveries for Script {
        fn best_effort(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool {
            self.best_effort
                .pop_front()
                .map(|(t, s, p)| f(t, s, &p))
                .is_some()
        }
        fn reliable(&mut self, f: &mut dyn FnMut(u64, u32, &[u8])) -> bool {
            self.reliable.pop_front().map(|(t, s, p)| f(t, s, &p)).is_some()
        }
        fn commit_barrier(&self) -> Option<u64> {
            self.commit
        }
    }

    fn get() -> Vec<u8> {
        let ops = vec![(
            0,
            Op::Get {
                key: Bytes::from_static(b"x"),
            },
        )];
        Message::Request(Request {
            txn: 1,
            attempt: 0,
            flags: FLAG_READ_ONLY,
            ops,
        })
        .encode()
    }

    fn put() -> Vec<u8> {
        let ops = vec![(
            0,
            Op::Put {
                key: Bytes::from_static(b"x"),
                value: Bytes::from_static(b"new"),
            },
        )];
        Message::Request(Request {
            txn: 1,
            attempt: 0,
            flags: 0,
            ops,
        })
        .encode()
    }

    type Answer = (u32, Status, Vec<(u16, OpResult)>);

    fn answers(s: &mut Server) -> Vec<Answer> {
        std::iter::from_fn(|| s.pop_send())
            .map(|(dst, bytes)| match Message::decode(&bytes).unwrap() {
                Message::Reply(r) => (dst, r.status, r.results),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// The redis-benchmark run's bug: a read and a write above it, both deliverable in one
    /// visit. The read must be served at its position, before the write, not answered late.
    #[test]
    fn a_read_and_a_write_above_it_in_one_visit_serve_the_read_first() {
        let mut s = Server::new(ServerConfig::new(0, 0, Ordering::OnePipe));
        let mut visit = Script {
            commit: Some(120),
            ..Script::default()
        };
        visit.best_effort.push_back((100, 7, get()));
        visit.reliable.push_back((110, 8, put()));
        take_deliveries(&mut s, &mut visit);
        let a = answers(&mut s);
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].0, a[0].1),
            (7, Status::Applied),
            "the read was not served first: {a:?}"
        );
        assert_eq!(a[0].2, vec![(0, OpResult::Value(None))]);
    }

    /// The first-milliseconds bug: the commit barrier is past the read, but the endpoint holds
    /// back a write below it (waiting for its registration). The read must wait for the write.
    #[test]
    fn reads_wait_while_reliable_deliveries_are_held() {
        let mut s = Server::new(ServerConfig::new(0, 0, Ordering::OnePipe));
        let mut held = Script::default();
        held.best_effort.push_back((150, 7, get()));
        take_deliveries(&mut s, &mut held);
        assert!(
            answers(&mut s).is_empty(),
            "a read went by a commit barrier that was held"
        );
        let mut released = Script {
            commit: Some(200),
            ..Script::default()
        };
        released.reliable.push_back((140, 8, put()));
        take_deliveries(&mut s, &mut released);
        let a = answers(&mut s);
        assert_eq!(a[1].0, 7);
        assert_eq!(
            a[1].2,
            vec![(0, OpResult::Value(Some(Bytes::from_static(b"new"))))]
        );
    }
}
