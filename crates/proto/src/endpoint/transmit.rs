//! The endpoint's transmit path: what goes on the uplink next (ACKs and NAKs, reliable
//! packets, best-effort data, beacons), each packet stamped with both barriers, and the
//! frames that close a visit of a shared thread (promises, docs/ordering.md).

use super::*;

impl Endpoint {
    /// Promise mode: the runtime is done with this host for a visit (a pass of a shared
    /// thread). Promises to stamp nothing below the clock plus the lead from now on, and asks
    /// to beacon it; returns how many frames close the visit (the rest of a scattering partly
    /// sent, then the beacon), for the runtime to take. A host visited once per pass
    /// otherwise holds every receiver's barrier at its last visit until its next one
    /// (docs/ordering.md, "Promises"). Promises closer together than a quarter of a beacon
    /// interval are skipped: they would move the barrier by less than the beacons do.
    pub fn end_visit(&mut self, now: Instant) -> usize {
        let Some(lead) = self.config.promise_lead.filter(|_| self.config.ordering) else {
            return 0;
        };
        // A scattering half sent holds our barrier at its timestamp: finish it first.
        let rest = match self.send_queue.front() {
            Some(s) if s.ts.is_some() => self.packets_left(s),
            _ => 0,
        };
        if rest > CLOSING_PACKETS_MAX {
            return 0;
        }
        let until = self.clock.read(now) + lead;
        let step = Duration::from_nanos(self.config.beacon_interval.as_nanos() / 4);
        let promise = until >= self.clock.promised() + step;
        if promise {
            self.clock.promise(until);
            self.counters.promises_sent += 1;
        } else if rest == 0 {
            return 0;
        }
        self.closing = true;
        rest + 1
    }

    /// Packets of scattering `s` still to send.
    fn packets_left(&self, s: &OutScattering) -> usize {
        let rest: usize = s.messages[s.next_message..]
            .iter()
            .map(|m| self.packets_for(m.len))
            .sum();
        rest - s.next_fragment as usize
    }

    /// The next packet for the uplink: ACKs and NAKs first, then reliable packets (new and
    /// retransmitted), then best-effort data, then a beacon when one is due. Every packet
    /// carries both our barriers.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.closing {
            // The frames that close a visit (`end_visit`): the rest of the scattering that
            // holds our barrier, then the beacon that carries the promise.
            if self.send_queue.front().is_some_and(|s| s.ts.is_some()) {
                return self.next_data_packet(now, buf);
            }
            return Some(self.beacon(now, buf));
        }
        // Where only beacons carry barriers, a busy host's would otherwise wait behind its data
        // and hold every receiver's barrier back.
        if self.beacon_due && !self.config.incarnation.stamps_data() {
            return Some(self.beacon(now, buf));
        }
        // ACKs that waited long enough for a prepare packet to carry them go on their own.
        let delay = self.config.reliable.ack_delay_max;
        if let Some(len) = self.next_ack(now, AckRelease::OlderThan(delay), buf) {
            return Some(len);
        }
        if let Some(mut nak) = self.naks.pop_front() {
            nak.barrier = self.outgoing_barrier(now).to_wire();
            nak.commit_barrier = self.outgoing_commit(now).to_wire();
            return Some(self.emit(now, &nak, &[], buf));
        }
        self.release(now);
        if let Some(len) = self.next_prepare_packet(now, buf) {
            return Some(len);
        }
        if let Some(len) = self.next_data_packet(now, buf) {
            return Some(len);
        }
        // Nothing left to ride on. A loaded sender will send again soon, when ACKs free its
        // buffer, and its next scattering can carry the lone ACKs.
        let hold_lone = self.sender.is_loaded();
        if let Some(len) = self.next_ack(now, AckRelease::Idle { hold_lone }, buf) {
            return Some(len);
        }
        if self.beacon_due {
            return Some(self.beacon(now, buf));
        }
        None
    }

    /// A beacon with our barriers; it answers a due beacon and a pending promise alike. A due
    /// beacon makes no promise of its own: it goes when the host has nothing else to send,
    /// mid-visit, and a promise then would stamp the rest of the visit's scatterings too high
    /// (they would wait for every other host's next visit). The visit's end promises.
    fn beacon(&mut self, now: Instant, buf: &mut [u8]) -> usize {
        self.beacon_due = false;
        self.closing = false;
        let b = self.outgoing_barrier(now).to_wire();
        let c = self.outgoing_commit(now).to_wire();
        let repr = Repr::beacon(b, c, self.config.tor_port);
        self.counters.beacons_sent += 1;
        self.emit(now, &repr, &[], buf)
    }

    fn next_ack(&mut self, now: Instant, release: AckRelease, buf: &mut [u8]) -> Option<usize> {
        let (to, cumulative, ack) = self.receiver.poll_ack(now, release)?;
        let mut payload = [0u8; ACK_PAYLOAD_LEN];
        ack.emit(&mut payload);
        let barriers = (
            self.outgoing_barrier(now).to_wire(),
            self.outgoing_commit(now).to_wire(),
        );
        let repr = self.ack_repr(to, cumulative, barriers);
        Some(self.emit(now, &repr, &payload, buf))
    }

    /// A stand-alone ACK to `to`, cumulative up to `cumulative`, carrying `(barrier,
    /// commit_barrier)`; its payload is the selective part, [`ACK_PAYLOAD_LEN`] bytes.
    pub(super) fn ack_repr(&self, to: u32, cumulative: u32, barriers: (Timestamp48, Timestamp48)) -> Repr {
        Repr {
            opcode: Opcode::Ack,
            end_of_message: true,
            ecn: false,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: Timestamp48::default(),
            barrier: barriers.0,
            commit_barrier: barriers.1,
            psn: cumulative,
            src: self.config.process,
            dst: to,
            msg_id: 0,
            frag_index: 0,
            frag_count: 1,
            link_id: self.config.tor_port,
            payload_len: ACK_PAYLOAD_LEN as u16,
        }
    }

    fn next_prepare_packet(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        // The barriers are read before the sender lends out its packet; skip the clock reads
        // on the best-effort path, which asks here first on every packet.
        if !self.sender.has_transmit() {
            return None;
        }
        let barrier = self.outgoing_barrier(now).to_wire();
        let commit_barrier = self.outgoing_commit(now).to_wire();
        let t = self.sender.poll_transmit(now)?;
        let piggyback = if self.piggyback {
            self.receiver.take_ack(t.dst)
        } else {
            None
        };
        let ack = piggyback.map(|(_, ack)| ack);
        let repr = prepare_repr(&self.config, &t, (barrier, commit_barrier), ack.as_ref());
        let total = repr.buffer_len();
        let mut packet = Packet::new_unchecked(&mut buf[..total]);
        repr.emit(&mut packet);
        let payload = packet.payload_mut();
        // Written in place: built in a local array and copied, the copy's wide loads waited
        // on the array's narrow stores (about a seventh of this function's samples, on one
        // store; gone in `perf` since).
        let head = match piggyback {
            Some((cumulative, ack)) => emit_piggyback(cumulative, &ack, payload),
            None => 0,
        };
        payload[head..].copy_from_slice(t.payload);
        self.counters.packets_sent += 1;
        self.last_sent = now;
        Some(total)
    }

    fn next_data_packet(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let commit_barrier = self.outgoing_commit(now).to_wire();
        let frag_bytes = self.config.fragment_payload_bytes();
        let s = self.send_queue.front_mut()?;
        let ts = match s.ts {
            Some(ts) => ts,
            None => {
                let ts = self.clock.issue(now);
                s.ts = Some(ts);
                if self.released.len() == RELEASED_UNPOLLED_MAX {
                    self.released.pop_front();
                    self.counters.released_unpolled_dropped += 1;
                }
                self.released.push_back((s.msg_id, ts));
                ts
            }
        };
        let m = &s.messages[s.next_message];
        let frag_count = m.len.div_ceil(frag_bytes).max(1) as u16;
        let start = m.start + s.next_fragment as usize * frag_bytes;
        let len = frag_bytes.min(m.start + m.len - start);
        let repr = Repr {
            opcode: Opcode::Data,
            end_of_message: s.next_fragment + 1 == frag_count,
            ecn: false,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: ts.to_wire(),
            // Everything queued behind this packet will be stamped above ts.
            barrier: ts.to_wire(),
            commit_barrier,
            psn: 0,
            src: self.config.process,
            dst: m.dst,
            msg_id: s.msg_id,
            frag_index: s.next_fragment,
            frag_count,
            link_id: self.config.tor_port,
            payload_len: len as u16,
        };
        let total = repr.buffer_len();
        let mut packet = Packet::new_unchecked(&mut buf[..total]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(&s.data[start..start + len]);
        s.next_fragment += 1;
        if s.next_fragment == frag_count {
            s.next_fragment = 0;
            s.next_message += 1;
            if s.next_message == s.messages.len() {
                self.send_queue.pop_front();
            }
        }
        self.queued_packets -= 1;
        self.counters.packets_sent += 1;
        self.last_sent = now;
        Some(total)
    }

    fn emit(&mut self, now: Instant, repr: &Repr, payload: &[u8], buf: &mut [u8]) -> usize {
        let total = repr.buffer_len();
        let mut packet = Packet::new_unchecked(&mut buf[..total]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(payload);
        self.last_sent = now;
        total
    }

    pub(super) fn queue_nak(&mut self, dst: u32, ts: Timestamp48, msg_id: u64) {
        if self.naks.len() >= self.config.nak_queue_max {
            self.counters.naks_dropped += 1;
            return;
        }
        self.counters.naks_sent += 1;
        self.naks.push_back(Repr {
            opcode: Opcode::Nak,
            end_of_message: true,
            ecn: false,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: ts,
            barrier: Timestamp48::default(),
            commit_barrier: Timestamp48::default(),
            psn: 0,
            src: self.config.process,
            dst,
            msg_id,
            frag_index: 0,
            frag_count: 1,
            link_id: self.config.tor_port,
            payload_len: 0,
        });
    }
}

/// The header of reliable packet `t` from `config`'s process, carrying `(barrier,
/// commit_barrier)`, with `ack` piggybacked before its payload, if any. The fabric path and
/// the controller-forwarded one (zero barriers, no ACK) share it.
pub(crate) fn prepare_repr(
    config: &EndpointConfig,
    t: &Transmit<'_>,
    barriers: (Timestamp48, Timestamp48),
    ack: Option<&AckPayload>,
) -> Repr {
    let piggyback_len = ack.map_or(0, AckPayload::piggyback_len);
    Repr {
        opcode: Opcode::Prepare,
        end_of_message: t.frag_index + 1 == t.frag_count,
        ecn: false,
        ack: ack.is_some(),
        sack: ack.is_some_and(|a| a.sack != 0),
        recall: t.recall,
        msg_ts: t.ts.to_wire(),
        barrier: barriers.0,
        commit_barrier: barriers.1,
        psn: t.psn,
        src: config.process,
        dst: t.dst,
        msg_id: t.msg_id,
        frag_index: t.frag_index,
        frag_count: t.frag_count,
        link_id: config.tor_port,
        payload_len: (piggyback_len + t.payload.len()) as u16,
    }
}
