//! Which links' peers have answered: granted credit for a datagram of this run, so their
//! node has taken it. A process that joins a running fabric waits for its ToR's answer: until
//! the ToR has heard the process, it counts the link as gone and drops what is sent to it
//! (found by the udp integration test: a process missed its neighbour's first broadcast).

use onepipe_fabric::node::PortId;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shared between a driver, which marks its ports, and whoever waits on them.
#[derive(Debug, Default)]
pub struct LinkAnswers {
    answered: Vec<AtomicBool>,
}

impl LinkAnswers {
    pub(super) fn new(ports: usize) -> LinkAnswers {
        LinkAnswers {
            answered: (0..ports).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub(super) fn mark(&self, port: PortId) {
        if let Some(a) = self.answered.get(port as usize) {
            a.store(true, Ordering::Release);
        }
    }

    /// Whether the peer behind `port` has answered (false for a port that does not exist).
    pub fn answered(&self, port: PortId) -> bool {
        self.answered
            .get(port as usize)
            .is_some_and(|a| a.load(Ordering::Acquire))
    }
}
