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

impl<S: ServerEngine> Application for ServerApp<S> {
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let engine = &mut self.engine;
        engine.set_now(now.as_nanos());
        // Best effort first: reads only queue until the commit barrier passes them. Then the
        // reliable writes, each executed after the queued reads below it. (Writes first would
        // execute, within one visit, writes above reads that were already deliverable, and
        // make those reads late.)
        while endpoint
            .poll_deliver_with(|ts, src, _, p| engine.on_delivery(Service::BestEffort, ts.as_nanos(), src, p))
            .is_some()
        {}
        while endpoint
            .poll_deliver_reliable_with(|ts, src, _, p| {
                engine.on_delivery(Service::Reliable, ts.as_nanos(), src, p)
            })
            .is_some()
        {}
        // Every reliable message below the commit barrier was just delivered, unless the
        // endpoint holds them back (registration, recovery): reads below it may go now.
        if !endpoint.reliable_held() {
            engine.on_commit_barrier(endpoint.commit_barrier().as_nanos());
        }
        // A server never asks for its sends' timestamps.
        while endpoint.poll_released_unreliable().is_some() {}
        engine.invariants();
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
