//! The sender's part of a failure (paper 5.2): a receiver that stops acknowledging exhausts the
//! retry budget, and a process the controller declares failed has its scatterings aborted and
//! their other messages recalled (Recall).

use super::*;

impl ReliableSender {
    /// The retry budget ran out towards `dst`: every message still open to it fails, and so
    /// will later ones, until the controller (issue 6) says otherwise.
    pub(super) fn give_up(&mut self, dst: u32) {
        let c = self.connections.get_mut(dst).expect("exists");
        c.broken = true;
        // The scatterings that wait for its window need none now.
        credits::mark_dirty(&mut self.dirty, c, dst);
        let mut failed_slots = Vec::new();
        for e in c.in_flight.iter_mut() {
            if !e.acked {
                if !failed_slots.contains(&(e.slot, e.message)) {
                    failed_slots.push((e.slot, e.message));
                }
                Self::ack_entry(&mut self.slots, &mut self.unacked_packets, &mut self.failed, e);
            }
        }
        // Nothing goes on a broken connection again, so it keeps no entries: settled ones left
        // in place outlived their scatterings once the rest was acknowledged, and pointed at
        // freed (or reused) slots (found by `credit_properties`).
        c.close_in_flight(&mut self.slots);
        for (slot, _) in failed_slots {
            let s = self.slots[slot as usize].as_ref().expect("live");
            if s.aborted.is_some() {
                continue; // reported when it was aborted; these were its recalls
            }
            self.counters.messages_failed += 1;
            self.failures.push_back(SendFailure {
                ts: s.ts,
                dst,
                msg_id: s.msg_id,
                reason: FailureReason::GaveUp,
            });
        }
    }

    /// Paper 5.2 Recall: process `process` failed. Every scattering with a message to it that
    /// it has not fully acknowledged is aborted and reported (`FailureReason::ReceiverFailed`):
    /// one still waiting for credits is dropped whole (it never had a timestamp: its failure
    /// carries `Instant::ZERO`); one released has its other messages recalled (see the module
    /// documentation). A scattering whose message to it was acknowledged is not touched (paper
    /// appendix: "R fails after sending ACK in Prepare phase: deliver"). The connection to it
    /// closes: its packets are never sent again and no longer count. Idempotent.
    pub fn on_process_failed(&mut self, process: u32) {
        if self.failed.iter().any(|f| f.0 == process) {
            return;
        }
        self.failed.push((process, 0));
        self.abort_waiting(process);
        // Opened if new, so that it is marked closed whatever comes later.
        let (config, cc) = (&self.config, &self.cc);
        let Some(c) = self
            .connections
            .get_or_open(process, || Connection::new(config, cc))
        else {
            return; // not a process
        };
        let mut aborted: Vec<u32> = c.in_flight.iter().filter(|e| !e.acked).map(|e| e.slot).collect();
        aborted.sort_unstable();
        aborted.dedup();
        // Scatterings aborted for an earlier failure are not aborted again; closing this
        // connection only settles their packets.
        let slots = &self.slots;
        let live = |slot: u32| slots[slot as usize].as_ref().expect("in-flight slot is live");
        aborted.retain(|&slot| live(slot).aborted.is_none());
        self.record_lost_recalls_of_earlier_aborts(process);
        if !aborted.is_empty() {
            self.abort(&aborted, process);
        }
        let c = self.connections.get_mut(process).expect("opened above");
        for e in c.in_flight.iter_mut() {
            Self::ack_entry(&mut self.slots, &mut self.unacked_packets, &mut self.failed, e);
        }
        c.close_in_flight(&mut self.slots);
        debug_assert!(
            c.broken || c.reserved == 0,
            "waiting scatterings to it were dropped"
        );
        c.reserved = 0;
        c.broken = true;
        c.failed = true;
        self.retire_front();
    }

    /// Drops the waiting scatterings with a message to failed `process`, returning their
    /// credits.
    pub(super) fn abort_waiting(&mut self, process: u32) {
        let mut i = 0;
        while i < self.waiting.len() {
            let slot = self.waiting[i];
            let live = self.slots[slot as usize].as_ref().expect("waiting slot is live");
            if !live.messages.iter().any(|m| m.dst == process) {
                i += 1;
                continue;
            }
            self.waiting.remove(i);
            if i < self.offered {
                self.offered -= 1;
            }
            // Its entries in `needy` queues are skipped from now on: the slot is empty, or
            // holds a scattering with another `seq`.
            let s = self.slots[slot as usize].take().expect("checked");
            for m in &s.messages {
                // Credits on a broken connection are not counted in `reserved` (see `grant`),
                // and the credits returned may go to scatterings waiting behind this one.
                if let Some(c) = self.connections.get_mut(m.dst)
                    && !c.broken
                {
                    c.reserved -= m.credits as u32;
                    if m.credits > 0 {
                        credits::mark_dirty(&mut self.dirty, c, m.dst);
                    }
                }
                self.unacked_packets -= m.unacked as usize;
            }
            self.retained_packets -= s.packets;
            self.free_slots.push(slot);
            self.counters.scatterings_aborted += 1;
            self.failures.push_back(SendFailure {
                ts: Instant::ZERO,
                dst: process,
                msg_id: s.msg_id,
                reason: FailureReason::ReceiverFailed { process },
            });
        }
    }

    /// Aborts released scatterings `aborted` (sorted by slot) because `process` failed:
    /// reports them and recalls their messages to receivers that are neither failed nor
    /// unreachable (a broken connection gave its messages up already). One pass over each
    /// connection, then one over the aborted messages.
    pub(super) fn abort(&mut self, aborted: &[u32], process: u32) {
        let mut by_ts: Vec<(Instant, u32)> = Vec::with_capacity(aborted.len());
        for &slot in aborted {
            let s = self.slots[slot as usize]
                .as_mut()
                .expect("in-flight slot is live");
            assert!(s.aborted.is_none() && s.open_messages > 0);
            s.aborted = Some(process);
            by_ts.push((s.ts, slot));
        }
        let f = self
            .failed
            .iter_mut()
            .find(|f| f.0 == process)
            .expect("announced");
        f.1 += aborted.len();
        // Packets not sent yet hold PSNs their receivers wait for: they go as recalls.
        let mut converted: std::collections::HashSet<(u32, u16)> = Default::default();
        for k in 0..self.connections.peer_count() {
            let dst = self.connections.peer_at(k);
            let c = self.connections.get_mut(dst).expect("listed");
            if dst == process || c.broken {
                continue;
            }
            for e in c.in_flight.iter_mut() {
                if e.sent_at.is_none() && !e.acked && aborted.binary_search(&e.slot).is_ok() {
                    e.recall = true;
                    converted.insert((e.slot, e.message));
                    self.counters.recalls_sent += 1;
                }
            }
        }
        // Reported, and recalled where every packet left, in release order.
        by_ts.sort_unstable();
        for (ts, slot) in by_ts {
            let s = self.slots[slot as usize].as_mut().expect("live");
            self.counters.scatterings_aborted += 1;
            self.failures.push_back(SendFailure {
                ts,
                dst: process,
                msg_id: s.msg_id,
                reason: FailureReason::ReceiverFailed { process },
            });
            // Its receivers that are failed cannot take a recall: the controller keeps it for
            // their recovery.
            for m in &s.messages {
                if self.failed.iter().any(|f| f.0 == m.dst) {
                    self.lost_recalls.push_back((m.dst, ts, s.msg_id));
                }
            }
            for (index, m) in s.messages.iter_mut().enumerate() {
                if m.dst == process || converted.contains(&(slot, index as u16)) {
                    continue;
                }
                let Some(c) = self.connections.get_mut(m.dst) else {
                    continue;
                };
                if c.broken {
                    continue;
                }
                let e = InFlight {
                    slot,
                    message: index as u16,
                    fragment: 0,
                    sent_at: None,
                    retries: 0,
                    acked: false,
                    queued: true,
                    resent: false,
                    recall: true,
                    forwarded_at_retries: 0,
                };
                // Recalls take no buffer space at the receiver: no window, as before; but
                // they keep their place behind held packets.
                c.push_packet(e, false, &mut self.transmit, m.dst);
                s.entries += 1;
                if m.unacked == 0 {
                    s.open_messages += 1;
                }
                m.unacked += 1;
                self.unacked_packets += 1;
                self.counters.recalls_sent += 1;
            }
        }
    }

    /// Whether the Recall for failed `process` is complete: it was announced, and every
    /// scattering aborted for it has its recalls and remaining packets acknowledged.
    pub fn recall_complete(&self, process: u32) -> bool {
        self.failed.iter().any(|&(p, open)| p == process && open == 0)
    }
}
