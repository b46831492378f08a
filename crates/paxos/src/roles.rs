//! The in-network roles a node hosts (a coordinator, an acceptor, or both co-located, thesis
//! 5.2.1), behind one dispatch: a switch program and a host process run the same code, so that
//! the software baseline differs from the in-network deployment only in where the roles run.

use crate::acceptor::Acceptor;
use crate::coordinator::Coordinator;
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Addr, Message, MsgType};

#[derive(Default)]
pub struct Roles {
    pub coordinator: Option<Coordinator>,
    pub acceptor: Option<Acceptor>,
    started: bool,
}

/// Messages one step may produce and hand back to the node itself (a co-located coordinator's
/// 2A to its own acceptor); past this, a bug.
const LOCAL_HOPS_MAX: usize = 1 << 16;

impl Roles {
    pub fn new(coordinator: Option<Coordinator>, acceptor: Option<Acceptor>) -> Roles {
        Roles {
            coordinator,
            acceptor,
            started: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.coordinator.is_none() && self.acceptor.is_none()
    }

    pub fn invariants(&self) {
        if let Some(c) = &self.coordinator {
            c.invariants();
        }
        if let Some(a) = &self.acceptor {
            a.invariants();
        }
    }

    /// Handles a message addressed to `me`; what the roles send goes to `out` as frames, except
    /// what is addressed to `me` again, which is handled here.
    pub fn handle(
        &mut self,
        now: Instant,
        me: Addr,
        frame: &[u8],
        out: &mut dyn FnMut(&Message<'_>),
    ) -> bool {
        let Ok(msg) = Message::parse(frame) else {
            return false;
        };
        let mut local: Vec<Vec<u8>> = Vec::new();
        self.dispatch(now, &msg, &mut |m| route(me, m, &mut local, out));
        self.drain(now, me, local, out);
        true
    }

    /// Handles what the roles sent to `me`, and what that sends to `me`, until none is left.
    fn drain(&mut self, now: Instant, me: Addr, mut local: Vec<Vec<u8>>, out: &mut dyn FnMut(&Message<'_>)) {
        let mut hops = 0;
        while let Some(f) = local.pop() {
            hops += 1;
            assert!(hops <= LOCAL_HOPS_MAX, "local messages do not converge");
            let m = Message::parse(&f).expect("emitted by a role");
            self.dispatch(now, &m, &mut |m| route(me, m, &mut local, out));
        }
    }

    fn dispatch(&mut self, now: Instant, msg: &Message<'_>, out: &mut dyn FnMut(&Message<'_>)) {
        match msg.msgtype {
            MsgType::P1a | MsgType::P2a => {
                if let Some(a) = &mut self.acceptor {
                    a.handle(msg, out);
                }
            }
            MsgType::Request | MsgType::P1b | MsgType::Reinit => {
                if let Some(c) = &mut self.coordinator {
                    c.handle(now, msg, out);
                }
            }
            MsgType::Trim => {
                if let Some(a) = &mut self.acceptor {
                    a.handle(msg, out);
                }
                if let Some(c) = &mut self.coordinator {
                    c.handle(now, msg, out);
                }
            }
            _ => {}
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        let c = self.coordinator.as_ref()?;
        if !self.started {
            Some(Instant::ZERO)
        } else {
            c.poll_timeout()
        }
    }

    /// Starts the coordinator on the first call (Phase 1 at start), then runs its timers.
    pub fn handle_timeout(&mut self, now: Instant, me: Addr, out: &mut dyn FnMut(&Message<'_>)) {
        let Some(c) = &mut self.coordinator else { return };
        let mut local: Vec<Vec<u8>> = Vec::new();
        if !self.started {
            self.started = true;
            c.start(now, &mut |m| route(me, m, &mut local, out));
        } else {
            c.handle_timeout(now, &mut |m| route(me, m, &mut local, out));
        }
        self.drain(now, me, local, out);
    }
}

fn route(me: Addr, m: &Message<'_>, local: &mut Vec<Vec<u8>>, out: &mut dyn FnMut(&Message<'_>)) {
    if m.to == me {
        local.push(m.to_vec());
    } else {
        out(m);
    }
}
