//! Algorithm 3, one virtual group at a time (paper 5.2, "Minimizing disruptions with virtual
//! groups"). Each step sends its control messages and waits for every acknowledgement:
//!
//! 1. pre-sync: copy every key of the group from the reference to the joining switch (lines
//!    1-2), while the shortened chain serves;
//! 2. stop: the failed switch's neighbours drop the group's writes, and its reads too if the
//!    failed switch was the tail (lines 3-4);
//! 3. drain: wait for queries already past the neighbours to land;
//! 4. sync: copy again (line 5); only newer versions are taken;
//! 5. activate: a new head gets a higher session; the neighbours send the group's queries to
//!    the joining switch instead (lines 6-8). The group's chain in the ring changes.

use super::{Controller, Event, Purpose};
use onepipe_fabric::hash::SplitMix;
use onepipe_wire::Instant;
use onepipe_wire::netchain::{Chain, Opcode, RuleKind};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    PreSync,
    Stop,
    Drain(Instant),
    Sync,
    Activate,
}

#[derive(Clone, Copy, Debug)]
struct Group {
    failed: u16,
    group: u16,
    joining: u16,
    reference: u16,
    /// The failed switch had no live switch before it in the chain (it was the head).
    head: bool,
    /// ... or after it (the tail).
    tail: bool,
    step: Step,
}

pub(super) struct Recovery {
    rng: SplitMix,
    /// Failed switches, each with the groups still to recover.
    queue: VecDeque<(u16, VecDeque<u16>)>,
    current: Option<Group>,
    /// Acknowledgements the current step waits for.
    remaining: usize,
}

impl Recovery {
    pub(super) fn new(seed: u64) -> Recovery {
        Recovery {
            rng: SplitMix::new(seed),
            queue: VecDeque::new(),
            current: None,
            remaining: 0,
        }
    }

    pub(super) fn enqueue(&mut self, failed: u16, groups: Vec<u16>) {
        self.queue.push_back((failed, groups.into()));
    }

    /// The switch joining `group`'s chain, while the group is being recovered.
    pub(super) fn joining(&self, group: u16) -> Option<u16> {
        self.current.filter(|g| g.group == group).map(|g| g.joining)
    }

    pub(super) fn acknowledged(&mut self) {
        self.remaining = self.remaining.saturating_sub(1);
    }

    pub(super) fn expect_ack(&mut self) {
        self.remaining += 1;
    }

    /// Whether a recovery is in progress or waiting.
    pub(super) fn busy(&self) -> bool {
        self.current.is_some() || !self.queue.is_empty()
    }

    pub(super) fn drain_deadline(&self) -> Option<Instant> {
        match self.current?.step {
            Step::Drain(t) => Some(t),
            _ => None,
        }
    }
}

/// Moves recovery on as far as the acknowledgements and the clock allow; recovery starts only
/// once every failover is in (`failover_done`).
pub(super) fn advance(c: &mut Controller, now: Instant, failover_done: bool) {
    // Each pass either waits (returns) or completes a step; a group has five.
    for _ in 0..16 {
        if c.recovery.remaining > 0 {
            return;
        }
        let Some(g) = c.recovery.current else {
            if !failover_done || !start_next_group(c, now) {
                return;
            }
            continue;
        };
        let next = match g.step {
            Step::PreSync => {
                stop(c, now, &g);
                Step::Stop
            }
            Step::Stop => Step::Drain(now + c.config.drain),
            Step::Drain(t) if now < t => return,
            Step::Drain(_) => {
                copy(c, now, &g);
                Step::Sync
            }
            Step::Sync => {
                activate(c, now, &g);
                Step::Activate
            }
            Step::Activate => {
                finish(c, now, &g);
                continue;
            }
        };
        c.recovery.current = Some(Group { step: next, ..g });
    }
}

/// Takes the next group of a failed switch and starts its pre-sync; `false` if there is none.
fn start_next_group(c: &mut Controller, now: Instant) -> bool {
    loop {
        let Some((failed, groups)) = c.recovery.queue.front_mut() else {
            return false;
        };
        let failed = *failed;
        let Some(group) = groups.pop_front() else {
            c.recovery.queue.pop_front();
            c.events.push_back(Event::Recovered {
                switch: failed,
                at: now,
            });
            continue;
        };
        let chain = c.ring.chain(group).expect("own group");
        let Some(g) = plan(c, failed, group, chain) else {
            c.events.push_back(Event::Unrecoverable { group });
            continue;
        };
        c.recovery.current = Some(g);
        copy(c, now, &g);
        return true;
    }
}

/// The reference and joining switch for `group`, whose chain holds `failed`.
fn plan(c: &mut Controller, failed: u16, group: u16, chain: Chain) -> Option<Group> {
    let ids = chain.as_slice();
    let at = ids.iter().position(|&s| s == failed)?;
    let live = |s: &&u16| !c.failed.contains(*s);
    let after = ids[at + 1..].iter().find(live).copied();
    let before = ids[..at].iter().rev().find(live).copied();
    let reference = after.or(before)?;
    let candidates: Vec<u16> = c
        .live_switches()
        .into_iter()
        .filter(|s| !ids.contains(s))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let joining = candidates[(c.recovery.rng.next_u64() % candidates.len() as u64) as usize];
    Some(Group {
        failed,
        group,
        joining,
        reference,
        head: before.is_none(),
        tail: after.is_none(),
        step: Step::PreSync,
    })
}

/// Reads every key of the group at the reference; each answer is written to the joining switch.
fn copy(c: &mut Controller, now: Instant, g: &Group) {
    let keys: Vec<_> = c
        .keys
        .get(&g.group)
        .map(|k| k.iter().copied().collect())
        .unwrap_or_default();
    for key in keys {
        c.recovery.expect_ack();
        c.send_query(
            now,
            g.reference,
            Opcode::StateRead,
            key,
            g.group,
            None,
            0,
            Purpose::SyncRead,
        );
    }
}

fn stop(c: &mut Controller, now: Instant, g: &Group) {
    let kind = if g.tail {
        RuleKind::StopAll
    } else {
        RuleKind::StopWrites
    };
    for n in c.live_neighbours(g.failed) {
        c.recovery.expect_ack();
        c.send_rule(now, n, kind, g.group, g.failed, 0, 0, Purpose::Recovery);
    }
}

fn activate(c: &mut Controller, now: Instant, g: &Group) {
    if g.head {
        let session = c.sessions.entry(g.group).or_insert(0);
        *session += 1;
        let session = *session;
        c.recovery.expect_ack();
        c.send_rule(
            now,
            g.joining,
            RuleKind::Session,
            g.group,
            g.failed,
            0,
            session,
            Purpose::Recovery,
        );
    }
    for n in c.live_neighbours(g.failed) {
        c.recovery.expect_ack();
        c.send_rule(
            now,
            n,
            RuleKind::Replace,
            g.group,
            g.failed,
            g.joining,
            0,
            Purpose::Recovery,
        );
    }
}

fn finish(c: &mut Controller, now: Instant, g: &Group) {
    let chain = c.ring.chain(g.group).expect("own group");
    let at = chain
        .as_slice()
        .iter()
        .position(|&s| s == g.failed)
        .expect("planned on it");
    let chain = chain.replaced(at, g.joining);
    c.ring.set_chain(g.group, chain);
    c.recovery.current = None;
    c.events.push_back(Event::GroupRecovered {
        group: g.group,
        chain,
        at: now,
    });
    if c.recovery
        .queue
        .front()
        .is_some_and(|(_, groups)| groups.is_empty())
    {
        c.recovery.queue.pop_front();
        c.events.push_back(Event::Recovered {
            switch: g.failed,
            at: now,
        });
    }
}
