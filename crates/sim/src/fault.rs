//! Failures injected into a run: links and nodes that go down at one time and, optionally,
//! come back at another.

use onepipe_wire::Instant;

/// One change of state, applied by the engine at its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// A directed link stops (or resumes) carrying frames.
    Link { link: u32, up: bool },
    /// A node stops (or resumes) processing.
    Node { node: u32, up: bool },
    /// A node that stopped starts again with none of its state.
    Restart { node: u32 },
    /// A node's clock steps by `delta_ns` (back if negative), as NTP steps a clock.
    ClockStep { node: u32, delta_ns: i64 },
}

impl FaultAction {
    /// Folded into the trace hash.
    pub(crate) fn code(&self) -> u64 {
        match *self {
            FaultAction::Link { link, up } => (link as u64) << 2 | up as u64,
            FaultAction::Node { node, up } => (node as u64) << 2 | 2 | up as u64,
            FaultAction::Restart { node } => (node as u64) << 2 | 3 | 1 << 63,
            FaultAction::ClockStep { node, delta_ns } => {
                onepipe_proto::hash::mix64((node as u64) << 32 ^ delta_ns as u64)
            }
        }
    }
}

/// What fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// Directed links (a cable is both directions).
    Links(Vec<u32>),
    Node(u32),
    /// A node that, when healed, restarts with none of its state.
    Restart(u32),
}

/// A failure from `at`, healed at `heal_at` if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub target: FaultTarget,
    pub at: Instant,
    pub heal_at: Option<Instant>,
}

impl Fault {
    pub(crate) fn actions(&self) -> Vec<(Instant, FaultAction)> {
        let mut out = Vec::new();
        let mut both = |up: bool, at: Instant| match &self.target {
            FaultTarget::Links(links) => {
                for &link in links {
                    out.push((at, FaultAction::Link { link, up }));
                }
            }
            FaultTarget::Node(node) => out.push((at, FaultAction::Node { node: *node, up })),
            FaultTarget::Restart(node) if up => out.push((at, FaultAction::Restart { node: *node })),
            FaultTarget::Restart(node) => out.push((at, FaultAction::Node { node: *node, up })),
        };
        both(false, self.at);
        if let Some(h) = self.heal_at {
            both(true, h);
        }
        out
    }
}
