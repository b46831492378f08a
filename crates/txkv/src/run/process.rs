use onepipe::host::Application;
use onepipe::{Endpoint, Instant, SendFailure};

use super::{ClientApp, ServerApp, TxnSource};
use crate::engine::{ClientEngine, ServerEngine};

/// One process of a store: a replica or a client. The runtime needs one application type for
/// all its processes.
pub enum StoreProcess<S, C, W> {
    Server(ServerApp<S>),
    Client(ClientApp<C, W>),
}

impl<S: ServerEngine, C: ClientEngine, W: TxnSource> StoreProcess<S, C, W> {
    pub fn server(&self) -> Option<&ServerApp<S>> {
        match self {
            StoreProcess::Server(s) => Some(s),
            StoreProcess::Client(_) => None,
        }
    }

    pub fn client(&self) -> Option<&ClientApp<C, W>> {
        match self {
            StoreProcess::Client(c) => Some(c),
            StoreProcess::Server(_) => None,
        }
    }
}

/// Static dispatch to the application inside.
macro_rules! each {
    ($self:ident, $a:ident => $e:expr) => {
        match $self {
            StoreProcess::Server($a) => $e,
            StoreProcess::Client($a) => $e,
        }
    };
}

impl<S: ServerEngine, C: ClientEngine, W: TxnSource> Application for StoreProcess<S, C, W> {
    fn drain(&mut self, now: Instant, endpoint: &mut Endpoint) {
        each!(self, a => a.drain(now, endpoint))
    }
    fn refill(&mut self, now: Instant, endpoint: &mut Endpoint) {
        each!(self, a => a.refill(now, endpoint))
    }
    fn on_process_failure(&mut self, process: u32, ts: Instant) {
        each!(self, a => a.on_process_failure(process, ts))
    }
    fn on_send_failure(&mut self, failure: SendFailure) {
        each!(self, a => a.on_send_failure(failure))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        each!(self, a => a.poll_timeout())
    }
    fn on_timeout(&mut self, now: Instant, endpoint: &mut Endpoint) {
        each!(self, a => a.on_timeout(now, endpoint))
    }
}
