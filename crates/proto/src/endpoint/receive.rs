//! The endpoint's receive path: a frame from the ToR is parsed, its barriers taken, and its
//! payload admitted to the reorder buffer (data), the reliable receiver (prepares, recalls) or
//! the reliable sender (ACKs, NAKs).

use super::*;
use crate::plausible::implausible_ahead_ns;

impl Endpoint {
    /// A frame from the ToR.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) -> Result<(), ParseError> {
        let packet = Packet::new_checked(frame).inspect_err(|_| self.counters.malformed += 1)?;
        let repr = Repr::parse(&packet).inspect_err(|_| self.counters.malformed += 1)?;
        // Paper 5.2 Discard: nothing more from a failed process (beacons come from the ToR and
        // name no process).
        if !self.failed.is_empty() && repr.opcode != Opcode::Beacon && self.is_process_failed(repr.src) {
            self.counters.from_failed += 1;
            return Ok(());
        }
        let host_now = self.clock.read(now);
        if !self.plausible_time(now, &repr, host_now, true) {
            return Ok(());
        }
        match repr.opcode {
            Opcode::Beacon => {}
            Opcode::Data if repr.dst != self.config.process => self.counters.misdelivered += 1,
            Opcode::Data => self.on_data(&repr, packet.payload(), host_now),
            Opcode::Nak => {
                self.counters.naks_received += 1;
                self.failures.push_back(SendFailure {
                    ts: repr.msg_ts.unwrap_near(host_now),
                    dst: repr.src,
                    msg_id: repr.msg_id,
                    reason: FailureReason::Nak,
                });
            }
            Opcode::Prepare if repr.dst != self.config.process => self.counters.misdelivered += 1,
            Opcode::Prepare if repr.ack => {
                let (cumulative, ack, data) =
                    split_piggyback(packet.payload(), repr.sack).expect("parse checked the length");
                self.sender.on_ack(now, repr.src, cumulative, &ack);
                self.on_prepare(now, &repr, data, host_now);
            }
            Opcode::Prepare => self.on_prepare(now, &repr, packet.payload(), host_now),
            Opcode::Ack if repr.dst != self.config.process => self.counters.misdelivered += 1,
            Opcode::Ack => {
                let ack = AckPayload::parse(packet.payload()).expect("parse checked the length");
                self.sender.on_ack(now, repr.src, repr.psn, &ack);
            }
        }
        // Only a chip stamps data on every hop; elsewhere a data packet's barriers bound its
        // first link only.
        let carries_barriers = repr.opcode == Opcode::Beacon || self.config.incarnation.stamps_data();
        if self.config.ordering && carries_barriers {
            let c = repr.commit_barrier.unwrap_near(host_now);
            self.commit = self.commit.max(c);
            if !self.tombstones.is_empty() {
                self.expire_tombstones();
            }
            let b = repr.barrier.unwrap_near(host_now);
            if b > self.barrier {
                self.barrier = b;
                self.reorder.expire_incomplete(b, &mut self.lost_scratch);
                let lost = std::mem::take(&mut self.lost_scratch);
                for &(ts, src, msg_id) in &lost {
                    self.counters.incomplete += 1;
                    self.queue_nak(src, ts.to_wire(), msg_id);
                }
                self.lost_scratch = lost;
                self.lost_scratch.clear();
            }
        }
        Ok(())
    }

    /// Whether the frame's barriers (`from_fabric`: a forwarded packet's are ignored) and its
    /// message's timestamp are within reach of a correct sender: at most `promise_lead +
    /// time_ahead_max` ahead of this host's clock. A barrier further ahead would pin this
    /// receiver's barrier there, and a message stamped so would wait in the reorder buffer
    /// until the barrier got there: the frame is refused, counted and reported
    /// ([`Endpoint::poll_implausible`]). Without ordering nothing waits for a barrier, and
    /// nothing is refused.
    pub(super) fn plausible_time(
        &mut self,
        now: Instant,
        repr: &Repr,
        host_now: Instant,
        from_fabric: bool,
    ) -> bool {
        if !self.config.ordering {
            return true;
        }
        let lead = self.config.promise_lead.unwrap_or(Duration::ZERO);
        let max = self.config.time_ahead_max;
        let ahead = |v: Timestamp48| implausible_ahead_ns(v.unwrap_near(host_now), host_now, lead, max);
        // Every frame passes here: plain branches, not an iterator over optional values.
        let mut ahead_ns = None;
        if from_fabric {
            ahead_ns = ahead(repr.barrier).max(ahead(repr.commit_barrier));
        }
        if matches!(repr.opcode, Opcode::Data | Opcode::Prepare) {
            ahead_ns = ahead_ns.max(ahead(repr.msg_ts));
        }
        let Some(ahead_ns) = ahead_ns else {
            return true;
        };
        self.counters.time_implausible += 1;
        if self.implausible.refuse(now, ahead_ns) {
            self.implausible_due = true;
        }
        false
    }

    /// Frames refused for implausible time since the last report, for the controller (the
    /// management plane passes it on): at most one report every
    /// [`crate::plausible::REPORT_INTERVAL`].
    pub fn poll_implausible(&mut self) -> Option<ImplausibleReport> {
        std::mem::take(&mut self.implausible_due).then(|| self.implausible.take_report(0))
    }

    fn on_data(&mut self, repr: &Repr, payload: &[u8], host_now: Instant) {
        let ts = repr.msg_ts.unwrap_near(host_now);
        if self.config.ordering && ts < self.barrier {
            if self.reorder.recently_delivered(repr.src, repr.msg_id) {
                // A second copy of a delivered message (a duplicating link), not a late one.
                self.counters.duplicates += 1;
                return;
            }
            // Paper 4.1: the barrier promised nothing below it would still come; this did, over
            // a non-FIFO path. It cannot be delivered in order.
            self.counters.late += 1;
            self.queue_nak(repr.src, repr.msg_ts, repr.msg_id);
            return;
        }
        match self.reorder.insert(
            ts,
            repr.src,
            repr.msg_id,
            repr.frag_index,
            repr.frag_count,
            payload,
            self.config.ordering,
        ) {
            Insert::Buffered => {}
            Insert::Duplicate | Insert::Inconsistent => self.counters.duplicates += 1,
            // No correct sender made it: nobody to tell.
            Insert::Oversized => self.counters.oversized += 1,
            Insert::Full => {
                self.counters.reorder_full += 1;
                self.queue_nak(repr.src, repr.msg_ts, repr.msg_id);
            }
        }
    }

    /// Paper 5.1: "The receiver stores messages in a receive buffer, and replies with ACKs."
    pub(super) fn on_prepare(&mut self, now: Instant, repr: &Repr, payload: &[u8], host_now: Instant) {
        let ts = repr.msg_ts.unwrap_near(host_now);
        if repr.recall {
            return self.on_recall(now, repr, ts);
        }
        if self.config.ordering && ts < self.commit {
            // The commit barrier passed it: a switch removed its sender's link as dead while
            // the sender was only slow (paper 4.2). Delivering it now would break the order,
            // so it is neither stored nor acknowledged; the sender's retry budget reports it.
            // Recovering such messages is the controller's job (paper 5.2).
            self.counters.late += 1;
            return;
        }
        if !self.prepared.limits().admits(repr.frag_count, payload.len()) {
            // No correct sender made it: not acknowledged, nor given window.
            self.counters.oversized += 1;
            return;
        }
        if self.receiver.on_prepare(now, repr.src, repr.psn, repr.ecn) != Admit::Store {
            return;
        }
        if !self.tombstones.is_empty() && self.tombstones.contains(&(ts, repr.src)) {
            // Its message was recalled before this packet came (paper 5.2 Recall).
            self.counters.recalled_late += 1;
            self.receiver.discard(now, repr.src, repr.psn);
            return;
        }
        let ordered = self.config.ordering;
        let (src, id) = (repr.src, repr.msg_id);
        match self.prepared.insert_numbered(
            ts,
            src,
            id,
            repr.psn,
            repr.frag_index,
            repr.frag_count,
            payload,
            ordered,
        ) {
            Insert::Buffered => {}
            // PSNs make both impossible from a correct sender.
            Insert::Duplicate | Insert::Inconsistent => self.counters.duplicates += 1,
            // Refused above, before it was acknowledged.
            Insert::Oversized => self.counters.oversized += 1,
            // The receive windows bound what senders may have here; a full buffer means the
            // configuration gives them more than `reorder_bytes_max`. Counted; the packet is
            // already acknowledged, so this is a loss the configuration must prevent.
            Insert::Full => self.counters.reorder_full += 1,
        }
    }

    /// Paper 5.2 Recall, at a receiver: "each of the receivers discards the messages in the
    /// receive buffer and responds ACK to the sender". A recall is numbered, acknowledged and
    /// duplicate-suppressed like any prepare packet; it takes no buffer space. Its message may
    /// not have arrived yet (lost and retransmitted, or still partial): a tombstone drops the
    /// late packets until the commit barrier passes it, after which they are dropped as late.
    fn on_recall(&mut self, now: Instant, repr: &Repr, ts: Instant) {
        let src = repr.src;
        let tombstone = self.config.ordering && ts >= self.commit;
        if tombstone && self.tombstones.len() >= TOMBSTONES_MAX && !self.tombstones.contains(&(ts, src)) {
            // Not acknowledged: the sender sends it again, when tombstones may have expired.
            self.counters.recalls_refused += 1;
            return;
        }
        if self.receiver.on_prepare(now, src, repr.psn, repr.ecn) != Admit::Store {
            return; // a duplicate is acknowledged again; out of window, sent again
        }
        self.receiver.discard(now, src, repr.psn);
        self.counters.recalls_received += 1;
        let receiver = &mut self.receiver;
        if self
            .prepared
            .remove(ts, src, repr.msg_id, |psn| receiver.discard(now, src, psn))
        {
            self.counters.recalled += 1;
        }
        if tombstone {
            self.tombstones.insert((ts, src));
        } else if self.config.ordering {
            self.counters.recalls_too_late += 1;
        }
    }

    /// Tombstones below the commit barrier are not needed: packets below it are dropped as late.
    fn expire_tombstones(&mut self) {
        while let Some(&(ts, _)) = self.tombstones.first()
            && ts < self.commit
        {
            self.tombstones.pop_first();
        }
    }

    /// Recalled messages still guarded against a late copy.
    pub fn tombstones(&self) -> usize {
        self.tombstones.len()
    }
}
