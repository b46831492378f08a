//! Window credits for waiting scatterings (paper 6.1): credits go to the oldest scattering
//! first, and one keeps what it acquired while it waits for the rest, so that a large
//! scattering is not starved by small ones.
//!
//! A release pass used to offer every waiting scattering (up to [`RELEASE_LOOKAHEAD`]) credits
//! on every connection it sends to, after every ACK: 256 scatterings of a 32-way broadcast were
//! 8192 connection lookups per ACK, two thirds of a saturated reliable simulation's time. Yet an
//! ACK opens at most its own connection's window. So each connection keeps, oldest first, the
//! messages of waiting scatterings that still lack credits on it (`needy`); a pass hands out the
//! credits of the connections that may have grown (`dirty`) to the fronts of their queues, then
//! makes a first offer to scatterings that never had one. What each scattering gets, and the
//! order releases take timestamps in, are as before.
//!
//! Invariant (checked in `check_invariants`): a connection that is neither broken nor dirty has
//! no credits left for the scattering at the front of its `needy` queue. Everything that can
//! open a window (an ACK, credits returned by an aborted scattering, a connection given up)
//! marks its connection dirty.

use super::{Connection, ReliableSender};
use onepipe_wire::Instant;

/// Waiting scatterings (oldest first) that are offered credits at all.
pub(super) const RELEASE_LOOKAHEAD: usize = 256;

/// A message of a waiting scattering that lacks credits on its connection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Need {
    slot: u32,
    message: u16,
    /// The scattering's `seq`: an entry of one that was aborted is skipped.
    seq: u64,
}

/// Credits for the message first in line on `c`, which holds `own` and lacks `lacking`: what
/// the window has, or, on a connection with nothing in flight and a window open by at least
/// one packet (its own credits may fill it), all it lacks. A message larger than the congestion window (or than what is left of
/// it after a timeout cut it, which only ACKs of traffic grow again) would otherwise wait
/// forever; it goes, and its packets beyond the window are held until ACKs open it
/// (`Connection::send_held`).
fn overdraw(c: &Connection, own: u32, lacking: u32) -> u32 {
    if c.is_idle(own) && c.has_room() {
        lacking
    } else {
        c.available().min(lacking)
    }
}

/// Lists `c` (the connection to `dst`) for the next release pass.
pub(super) fn mark_dirty(dirty: &mut Vec<u32>, c: &mut Connection, dst: u32) {
    if !c.dirty {
        c.dirty = true;
        dirty.push(dst);
    }
}

impl ReliableSender {
    /// Hands out window credits to waiting scatterings, oldest first, and releases each that
    /// holds all it needs with timestamp `issue()`, in the order they were submitted. Returns
    /// how many were released.
    pub fn release(&mut self, mut issue: impl FnMut() -> Instant) -> usize {
        // Credits can have grown only on dirty connections, and only scatterings never offered
        // any can take them on the others.
        if self.dirty.is_empty() && self.offered == self.waiting.len().min(RELEASE_LOOKAHEAD) {
            return 0;
        }
        let mut completed = std::mem::take(&mut self.completed);
        // Scatterings offered before wait in the queues, and are older than any not offered
        // yet: they come first.
        for k in 0..self.dirty.len() {
            let dst = self.dirty[k];
            self.grant(dst, &mut completed);
        }
        self.dirty.clear();
        let mut released = 0;
        loop {
            // Each release lets one more scattering into the lookahead.
            while self.offered < self.waiting.len().min(RELEASE_LOOKAHEAD) {
                let slot = self.waiting[self.offered];
                self.offered += 1;
                if self.offer(slot) {
                    completed.push(slot);
                }
            }
            if completed.is_empty() {
                break;
            }
            let slots = &self.slots;
            completed.sort_unstable_by_key(|&slot| slots[slot as usize].as_ref().expect("waiting").seq);
            for &slot in &completed {
                // Near the front, as a rule: credits go oldest first.
                let at = self.waiting.iter().position(|&s| s == slot).expect("waiting");
                debug_assert!(at < self.offered, "only offered scatterings complete");
                self.waiting.remove(at);
                self.offered -= 1;
                let ts = issue();
                self.launch(slot, ts);
                released += 1;
            }
            completed.clear();
        }
        self.completed = completed;
        released
    }

    /// The first offer to scattering `slot`: what credits its connections have, and a place in
    /// the `needy` queue of each that has too few. True when it holds all it needs.
    fn offer(&mut self, slot: u32) -> bool {
        let mut s = self.slots[slot as usize].take().expect("waiting slot is live");
        for (index, m) in s.messages.iter_mut().enumerate() {
            let c = self.connection(m.dst);
            if c.broken {
                // Fails at launch; it needs no window.
                m.credits = m.packets;
                s.missing -= m.packets as usize;
                continue;
            }
            // Behind older scatterings that wait here, it gets nothing before they do.
            let take = if c.needy.is_empty() {
                overdraw(c, 0, m.packets as u32)
            } else {
                0
            };
            m.overdrawn |= take > c.available();
            c.reserved += take;
            m.credits += take as u16;
            s.missing -= take as usize;
            if m.credits < m.packets {
                c.needy.push_back(Need {
                    slot,
                    message: index as u16,
                    seq: s.seq,
                });
            }
        }
        let complete = s.missing == 0;
        self.slots[slot as usize] = Some(s);
        complete
    }

    /// Hands the credits of the connection to `dst` to the scatterings waiting for it, oldest
    /// first, and adds those that now hold all they need to `completed`.
    fn grant(&mut self, dst: u32, completed: &mut Vec<u32>) {
        let Some(c) = self.connections.get_mut(dst) else {
            return;
        };
        c.dirty = false;
        while let Some(&need) = c.needy.front() {
            let live = self.slots[need.slot as usize]
                .as_mut()
                .filter(|s| s.seq == need.seq);
            let Some(s) = live else {
                c.needy.pop_front(); // aborted
                continue;
            };
            let m = &mut s.messages[need.message as usize];
            let lacking = m.packets - m.credits;
            if c.broken {
                // Fails at launch; it needs no window, and broken connections count no credits.
                c.reserved -= m.credits as u32;
                m.credits = m.packets;
                s.missing -= lacking as usize;
            } else {
                let take = overdraw(c, m.credits as u32, lacking as u32);
                m.overdrawn |= take > c.available();
                c.reserved += take;
                m.credits += take as u16;
                s.missing -= take as usize;
                if m.credits < m.packets {
                    break; // the window is used up
                }
            }
            c.needy.pop_front();
            if s.missing == 0 {
                completed.push(need.slot);
            }
        }
    }

    /// Checks the credit bookkeeping (part of `check_invariants`).
    pub(super) fn check_credit_invariants(&self) {
        assert!(
            self.offered <= self.waiting.len().min(RELEASE_LOOKAHEAD),
            "offered scatterings"
        );
        for (i, &slot) in self.waiting.iter().enumerate() {
            let s = self.slots[slot as usize].as_ref().expect("waiting slot is live");
            let lacking: usize = s.messages.iter().map(|m| (m.packets - m.credits) as usize).sum();
            assert_eq!(s.missing, lacking, "credits missing for scattering {}", s.msg_id);
            for (index, m) in s.messages.iter().enumerate() {
                let c = self.connections.get(m.dst);
                let queued = c.is_some_and(|c| {
                    c.needy
                        .iter()
                        .any(|n| n.slot == slot && n.seq == s.seq && n.message as usize == index)
                });
                let expected = i < self.offered && m.credits < m.packets;
                assert_eq!(
                    queued, expected,
                    "scattering {} queued for credits to {}",
                    s.msg_id, m.dst
                );
            }
        }
        for k in 0..self.connections.peer_count() {
            let dst = self.connections.peer_at(k);
            let c = self.connections.get(dst).expect("listed");
            let live = |n: &&Need| {
                self.slots[n.slot as usize]
                    .as_ref()
                    .is_some_and(|s| s.seq == n.seq)
            };
            // Oldest first: behind the first scattering that waits here, none holds a credit.
            for n in c.needy.iter().filter(live).skip(1) {
                let s = self.slots[n.slot as usize].as_ref().expect("live");
                assert_eq!(
                    s.messages[n.message as usize].credits, 0,
                    "credits on {dst} out of turn"
                );
            }
            let waited_for = c.needy.iter().any(|n| live(&n));
            if waited_for && !c.broken && !c.dirty {
                assert_eq!(
                    c.available(),
                    0,
                    "credits left on {dst} while scatterings wait for it"
                );
            }
            assert_eq!(c.dirty, self.dirty.contains(&dst), "dirty flag of {dst}");
        }
    }
}
