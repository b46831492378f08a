//! A process in a runtime: the [`Endpoint`] state machine plus what drives it, either an
//! in-worker workload (the demo's all-to-all broadcast) or a link to an application thread
//! holding a [`crate::api::Process`] handle.

use crate::workload::Broadcast;
use onepipe_fabric::{Node, PortId, Route};
use onepipe_proto::endpoint::{Delivery, Endpoint, SendFailure};
use onepipe_wire::Instant;
use rtrb::{Consumer, Producer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What an application thread asks of its endpoint.
pub enum Command {
    Send(Vec<(u32, Vec<u8>)>),
    SendReliable(Vec<(u32, Vec<u8>)>),
    OnSendFailure(Box<dyn FnMut(SendFailure) + Send>),
    OnProcessFailure(Box<dyn FnMut(u32, Instant) + Send>),
}

/// The worker-side end of an application handle.
pub struct AppLink {
    pub commands: Consumer<Command>,
    pub deliveries: Producer<Delivery>,
    pub reliable_deliveries: Producer<Delivery>,
    pub on_failure: Option<Box<dyn FnMut(SendFailure) + Send>>,
    /// Paper Table 1's process-failure callback: (failed process, failure timestamp).
    pub on_process_failure: Option<Box<dyn FnMut(u32, Instant) + Send>>,
    /// Largest delivered timestamp, or one below the endpoint's promise (docs/ordering.md,
    /// "Promises") if higher, published for `Process::timestamp`.
    pub delivered_ts: Arc<AtomicU64>,
    /// When the endpoint last took a valid frame from its switch (shared-clock ns), published
    /// for `Process::fabric_silence`.
    pub heard_ns: Arc<AtomicU64>,
    /// Sends the endpoint refused after the handle accepted them (should stay zero).
    pub refused: u64,
}

pub enum App {
    Workload(Box<Broadcast>),
    Link(Box<AppLink>),
}

pub struct HostNode {
    pub endpoint: Endpoint,
    pub app: App,
}

impl HostNode {
    /// Hands each process failure the controller announced to the application, once.
    pub fn on_process_failures(&mut self) {
        while let Some((process, ts)) = self.endpoint.poll_process_failure() {
            match &mut self.app {
                App::Workload(w) => w.on_process_failure(process),
                App::Link(link) => {
                    if let Some(cb) = link.on_process_failure.as_mut() {
                        cb(process, ts);
                    }
                }
            }
        }
    }

    /// Hands deliveries and failures to the application, as far as it has room.
    fn drain(&mut self, now: Instant) {
        match &mut self.app {
            App::Workload(w) => {
                // Sends logged before the deliveries that follow them in program order.
                w.on_released(&mut self.endpoint);
                if w.is_reliable() {
                    w.on_acked(now, self.endpoint.reliable_sender().counters().packets_acked);
                    while self
                        .endpoint
                        .poll_deliver_reliable_with(|ts, src, id, payload| {
                            w.on_deliver(now, ts, src, id, payload)
                        })
                        .is_some()
                    {}
                } else {
                    while self
                        .endpoint
                        .poll_deliver_with(|ts, src, id, payload| w.on_deliver(now, ts, src, id, payload))
                        .is_some()
                    {}
                }
                while let Some(f) = self.endpoint.poll_failure() {
                    w.on_failure(f);
                }
            }
            App::Link(link) => {
                while link.deliveries.slots() > 0 {
                    let Some(d) = self.endpoint.poll_deliver() else {
                        break;
                    };
                    link.delivered_ts.fetch_max(d.ts.as_nanos(), Ordering::Relaxed);
                    // Room was checked; the handle may have gone, which only drops the message.
                    let _ = link.deliveries.push(d);
                }
                while link.reliable_deliveries.slots() > 0 {
                    let Some(d) = self.endpoint.poll_deliver_reliable() else {
                        break;
                    };
                    link.delivered_ts.fetch_max(d.ts.as_nanos(), Ordering::Relaxed);
                    let _ = link.reliable_deliveries.push(d);
                }
                // Nothing logs releases for linked applications.
                while self.endpoint.poll_released().is_some() {}
                while let Some(f) = self.endpoint.poll_failure() {
                    if let Some(cb) = link.on_failure.as_mut() {
                        cb(f);
                    }
                }
            }
        }
    }

    /// Lets the application queue new scatterings while the send buffer has room.
    fn refill(&mut self, now: Instant) {
        match &mut self.app {
            App::Workload(w) => w.refill(now, &mut self.endpoint),
            App::Link(link) => {
                while let Ok(cmd) = link.commands.peek() {
                    // The handle refuses scatterings larger than the whole buffer, so these
                    // waits always end.
                    let ep = &self.endpoint;
                    let full = match cmd {
                        Command::Send(msgs) => {
                            msgs.iter().map(|(_, m)| ep.packets_for(m.len())).sum::<usize>()
                                > ep.send_room_packets()
                        }
                        Command::SendReliable(msgs) => {
                            msgs.iter()
                                .map(|(_, m)| ep.reliable_packets_for(m.len()))
                                .sum::<usize>()
                                > ep.reliable_room_packets()
                        }
                        Command::OnSendFailure(_) | Command::OnProcessFailure(_) => false,
                    };
                    if full {
                        break;
                    }
                    match link.commands.pop() {
                        Ok(Command::Send(msgs)) => {
                            let scatter: Vec<(u32, &[u8])> = msgs.iter().map(|(d, m)| (*d, &m[..])).collect();
                            if self.endpoint.send_unreliable(now, &scatter).is_err() {
                                link.refused += 1;
                            }
                        }
                        Ok(Command::SendReliable(msgs)) => {
                            let scatter: Vec<(u32, &[u8])> = msgs.iter().map(|(d, m)| (*d, &m[..])).collect();
                            if self.endpoint.send_reliable(now, &scatter).is_err() {
                                link.refused += 1;
                            }
                        }
                        Ok(Command::OnSendFailure(cb)) => link.on_failure = Some(cb),
                        Ok(Command::OnProcessFailure(cb)) => link.on_process_failure = Some(cb),
                        Err(_) => break,
                    }
                }
            }
        }
    }
}

impl Node for HostNode {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        Route::Consume
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
        // Malformed frames are counted by the endpoint and dropped.
        let valid = self.endpoint.handle_frame(now, frame).is_ok();
        if let (true, App::Link(link)) = (valid, &self.app) {
            link.heard_ns.store(now.as_nanos(), Ordering::Relaxed);
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.drain(now);
        self.refill(now);
        self.endpoint.poll_transmit(now, buf)
    }

    fn end_visit(&mut self, now: Instant) -> usize {
        let closing = self.endpoint.end_visit(now);
        if let App::Link(link) = &self.app
            && self.endpoint.config().promise_lead.is_some()
        {
            let floor = self.endpoint.timestamp(now).as_nanos();
            link.delivered_ts
                .fetch_max(floor.saturating_sub(1), Ordering::Relaxed);
        }
        closing
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.endpoint.poll_timeout())
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain(now);
    }
}
