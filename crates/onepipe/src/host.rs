//! A process in a runtime: the [`Endpoint`] state machine plus the [`Application`] that drives
//! it, either a link to an application thread holding a [`crate::api::Process`] handle
//! ([`AppLink`]) or a workload running inside the worker (the demo's all-to-all broadcast, in
//! onepipe-bench).

use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_proto::endpoint::{Delivery, Endpoint, EndpointEvent, SendFailure};
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

/// What drives an endpoint inside its worker: the application side of a [`HostNode`].
///
/// The runtime calls these on every visit of the node (per frame, per transmit opportunity,
/// per timer), so [`HostNode`] is generic over it rather than boxing it: static dispatch on
/// the hot path. [`AppLink`] implements it for an application thread holding a
/// [`crate::api::Process`]; a workload may implement it to run inside the worker itself.
pub trait Application: Send + 'static {
    /// Takes from `endpoint` the deliveries and releases waiting for the application, as far
    /// as it has room. (Events come through the two callbacks below.)
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint);

    /// Queues new scatterings on `endpoint` while its send buffer has room.
    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint);

    /// Paper Table 1's process-failure callback: `process` failed at timestamp `ts`, as the
    /// controller announced. Called once per failure.
    fn on_process_failure(&mut self, process: u32, ts: Instant);

    /// Paper Table 1's send-failure callback: a message of ours was not delivered.
    fn on_send_failure(&mut self, failure: SendFailure);

    /// The endpoint took a valid frame from its switch at `now`.
    fn on_heard(&mut self, _now: Instant) {}

    /// The runtime finished a visit of the node at `now` (after [`Endpoint::end_visit`]).
    fn on_end_visit(&mut self, _now: Instant, _endpoint: &mut Endpoint) {}

    /// When the application next wants [`Application::on_timeout`] (a paced workload's next
    /// send); `None` while it has no timer.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// The application's timer is due (an extra call is harmless).
    fn on_timeout(&mut self, _now: Instant, _endpoint: &mut Endpoint) {}
}

pub struct HostNode<A> {
    pub endpoint: Endpoint,
    pub app: A,
}

impl<A: Application> HostNode<A> {
    /// Hands the endpoint's events to the application: each process failure the controller
    /// announced and each send failure, once.
    pub fn take_events(&mut self) {
        while let Some(e) = self.endpoint.poll_event() {
            match e {
                EndpointEvent::ProcessFailed { process, ts } => self.app.on_process_failure(process, ts),
                EndpointEvent::SendFailed(f) => self.app.on_send_failure(f),
            }
        }
    }

    /// Hands the application what the endpoint has for it: deliveries and releases, then
    /// events. Runtimes do it after every step; a run that ends calls it once more, for what
    /// its last step left (the release of a scattering whose last packet just left).
    pub fn drain(&mut self, now: Instant) {
        self.app.drain(now, &mut self.endpoint);
        self.take_events();
    }
}

impl Application for AppLink {
    fn drain(&mut self, _now: Instant, endpoint: &mut Endpoint) {
        while self.deliveries.slots() > 0 {
            let Some(d) = endpoint.poll_deliver() else {
                break;
            };
            self.delivered_ts.fetch_max(d.ts.as_nanos(), Ordering::Relaxed);
            // Room was checked; the handle may have gone, which only drops the message.
            let _ = self.deliveries.push(d);
        }
        while self.reliable_deliveries.slots() > 0 {
            let Some(d) = endpoint.poll_deliver_reliable() else {
                break;
            };
            self.delivered_ts.fetch_max(d.ts.as_nanos(), Ordering::Relaxed);
            let _ = self.reliable_deliveries.push(d);
        }
        // Nothing logs releases for linked applications.
        while endpoint.poll_released().is_some() {}
    }

    fn on_send_failure(&mut self, failure: SendFailure) {
        if let Some(cb) = self.on_failure.as_mut() {
            cb(failure);
        }
    }

    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        while let Ok(cmd) = self.commands.peek() {
            // The handle refuses scatterings larger than the whole buffer, so these
            // waits always end.
            let ep = &*endpoint;
            let full = match cmd {
                Command::Send(msgs) => {
                    msgs.iter().map(|(_, m)| ep.packets_for(m.len())).sum::<usize>() > ep.send_room_packets()
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
            match self.commands.pop() {
                Ok(Command::Send(msgs)) => {
                    let scatter: Vec<(u32, &[u8])> = msgs.iter().map(|(d, m)| (*d, &m[..])).collect();
                    if endpoint.send_unreliable(now, &scatter).is_err() {
                        self.refused += 1;
                    }
                }
                Ok(Command::SendReliable(msgs)) => {
                    let scatter: Vec<(u32, &[u8])> = msgs.iter().map(|(d, m)| (*d, &m[..])).collect();
                    if endpoint.send_reliable(now, &scatter).is_err() {
                        self.refused += 1;
                    }
                }
                Ok(Command::OnSendFailure(cb)) => self.on_failure = Some(cb),
                Ok(Command::OnProcessFailure(cb)) => self.on_process_failure = Some(cb),
                Err(_) => break,
            }
        }
    }

    fn on_process_failure(&mut self, process: u32, ts: Instant) {
        if let Some(cb) = self.on_process_failure.as_mut() {
            cb(process, ts);
        }
    }

    fn on_heard(&mut self, now: Instant) {
        self.heard_ns.store(now.as_nanos(), Ordering::Relaxed);
    }

    fn on_end_visit(&mut self, now: Instant, endpoint: &mut Endpoint) {
        if endpoint.config().promise_lead.is_some() {
            let floor = endpoint.timestamp(now).as_nanos();
            self.delivered_ts
                .fetch_max(floor.saturating_sub(1), Ordering::Relaxed);
        }
    }
}

impl<A: Application> Node for HostNode<A> {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        Route::Consume
    }

    fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
        // Malformed frames are counted by the endpoint and dropped.
        if self.endpoint.handle_frame(now, frame).is_ok() {
            self.app.on_heard(now);
        }
        self.drain(now);
    }

    fn poll_transmit(&mut self, now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.drain(now);
        self.app.refill(now, &mut self.endpoint);
        self.endpoint.poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let endpoint = self.endpoint.poll_timeout();
        Some(self.app.poll_timeout().map_or(endpoint, |t| t.min(endpoint)))
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.app.poll_timeout().is_some_and(|t| t <= now) {
            self.app.on_timeout(now, &mut self.endpoint);
        }
        if self.endpoint.poll_timeout() <= now {
            self.endpoint.handle_timeout(now);
        }
        self.drain(now);
    }
}

impl<A: Application> Hints for HostNode<A> {
    fn end_visit(&mut self, now: Instant) -> usize {
        let closing = self.endpoint.end_visit(now);
        self.app.on_end_visit(now, &mut self.endpoint);
        closing
    }
}
