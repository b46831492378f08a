//! A host process running the in-network roles in software (the baseline the thesis compares
//! with, libpaxos's place; and the backup coordinator of 6.x): the same [`Roles`] as a switch,
//! behind one port.

use crate::roles::Roles;
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_wire::Instant;
use onepipe_wire::paxos::{Addr, Message};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoleHostCounters {
    pub processed: u64,
    pub sent: u64,
    /// Frames that do not parse, or are not for this process.
    pub dropped: u64,
    pub queue_full: u64,
}

pub struct RoleHost {
    me: Addr,
    roles: Roles,
    queue: VecDeque<Vec<u8>>,
    queue_frames_max: usize,
    counters: RoleHostCounters,
}

impl RoleHost {
    pub fn new(process: u32, roles: Roles, queue_frames_max: usize) -> RoleHost {
        RoleHost {
            me: Addr::Process(process),
            roles,
            queue: VecDeque::new(),
            queue_frames_max,
            counters: RoleHostCounters::default(),
        }
    }

    pub fn roles(&self) -> &Roles {
        &self.roles
    }
    pub fn counters(&self) -> &RoleHostCounters {
        &self.counters
    }

    fn send(queue: &mut VecDeque<Vec<u8>>, max: usize, counters: &mut RoleHostCounters, m: &Message<'_>) {
        if queue.len() >= max {
            counters.queue_full += 1;
        } else {
            counters.sent += 1;
            queue.push_back(m.to_vec());
        }
    }
}

impl Node for RoleHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }

    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        if Message::peek_to(frame) != Some(self.me) {
            self.counters.dropped += 1;
            return;
        }
        let (queue, max, counters) = (&mut self.queue, self.queue_frames_max, &mut self.counters);
        if self
            .roles
            .handle(now, self.me, frame, &mut |m| Self::send(queue, max, counters, m))
        {
            self.counters.processed += 1;
        } else {
            self.counters.dropped += 1;
        }
    }

    fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        let frame = self.queue.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.roles.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.roles.poll_timeout().is_some_and(|t| t <= now) {
            let (queue, max, counters) = (&mut self.queue, self.queue_frames_max, &mut self.counters);
            self.roles
                .handle_timeout(now, self.me, &mut |m| Self::send(queue, max, counters, m));
        }
    }
}

impl Hints for RoleHost {
    fn wants_transmit(&self) -> bool {
        !self.queue.is_empty()
    }
}
