//! Controller forwarding at the endpoint (paper 5.2): packets that the fabric keeps losing go
//! through the controller, and so do their ACKs.
//!
//! A sender with a controller hands it each reliable packet retransmitted
//! `forward_after_retries` times ([`Endpoint::poll_forward`]). The receiver takes a forwarded
//! packet exactly as one from its ToR, PSNs suppressing duplicates, and answers at once with the
//! ACK it owes ([`Endpoint::handle_forwarded`]); the sender takes that ACK as one from the
//! fabric. Barriers are not forwarded: a forwarded packet's barrier fields are zero and
//! ignored, since a barrier means something only on the link it crossed. The message is
//! delivered when the commit barrier passes it, as any other.

use super::{Endpoint, Repr};
use onepipe_wire::ack::split_piggyback;
use onepipe_wire::packet::{Opcode, Packet, ParseError};
use onepipe_wire::{ACK_PAYLOAD_LEN, AckPayload, Instant, Timestamp48};

impl Endpoint {
    /// A controller can forward for this endpoint. Packets larger than the controller forwards
    /// (an MTU past [`crate::controller::forward::FORWARD_PACKET_BYTES_MAX`]) are not offered.
    pub fn enable_forwarding(&mut self) {
        let fits = self.config.mtu_bytes <= crate::controller::forward::FORWARD_PACKET_BYTES_MAX;
        self.sender.set_forwarding(fits);
    }

    /// The next packet to hand to the controller for forwarding, written to `buf` (at least
    /// the MTU): (its destination, its length).
    pub fn poll_forward(&mut self, buf: &mut [u8]) -> Option<(u32, usize)> {
        let t = self.sender.poll_forward()?;
        let repr = Repr {
            opcode: Opcode::Prepare,
            end_of_message: t.frag_index + 1 == t.frag_count,
            ecn: false,
            ack: false,
            recall: t.recall,
            msg_ts: t.ts.to_wire(),
            barrier: Timestamp48::default(),
            commit_barrier: Timestamp48::default(),
            psn: t.psn,
            src: self.config.process,
            dst: t.dst,
            msg_id: t.msg_id,
            frag_index: t.frag_index,
            frag_count: t.frag_count,
            link_id: self.config.tor_port,
            payload_len: t.payload.len() as u16,
        };
        let total = repr.buffer_len();
        let mut packet = Packet::new_unchecked(&mut buf[..total]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(t.payload);
        Some((t.dst, total))
    }

    /// A packet the controller forwards: a prepare or recall for us, or an ACK of ours. Taken
    /// as if it came from the ToR, barriers aside. Returns the length of the ACK written to
    /// `buf` (at least the MTU) that answers a prepare, for the controller to carry back.
    pub fn handle_forwarded(
        &mut self,
        now: Instant,
        frame: &[u8],
        buf: &mut [u8],
    ) -> Result<Option<usize>, ParseError> {
        let packet = Packet::new_checked(frame).inspect_err(|_| self.counters.malformed += 1)?;
        let repr = Repr::parse(&packet).inspect_err(|_| self.counters.malformed += 1)?;
        if repr.dst != self.config.process || !matches!(repr.opcode, Opcode::Prepare | Opcode::Ack) {
            self.counters.misdelivered += 1;
            return Ok(None);
        }
        if self.is_process_failed(repr.src) {
            self.counters.from_failed += 1;
            return Ok(None);
        }
        self.counters.forwarded_received += 1;
        let host_now = self.clock.read(now);
        if repr.opcode == Opcode::Ack {
            let ack = AckPayload::parse(packet.payload()).expect("parse checked the length");
            self.sender.on_ack(now, repr.src, repr.psn, &ack);
            return Ok(None);
        }
        let data = if repr.ack {
            let (cumulative, ack, data) =
                split_piggyback(packet.payload()).expect("parse checked the length");
            self.sender.on_ack(now, repr.src, cumulative, &ack);
            data
        } else {
            packet.payload()
        };
        self.on_prepare(now, &repr, data, host_now);
        let Some((cumulative, ack)) = self.receiver.take_ack_forwarded(repr.src) else {
            return Ok(None); // not acknowledged (late, or refused): nothing to say
        };
        let mut payload = [0u8; ACK_PAYLOAD_LEN];
        ack.emit(&mut payload);
        let answer = Repr {
            opcode: Opcode::Ack,
            end_of_message: true,
            ecn: false,
            ack: false,
            recall: false,
            msg_ts: Timestamp48::default(),
            barrier: Timestamp48::default(),
            commit_barrier: Timestamp48::default(),
            psn: cumulative,
            src: self.config.process,
            dst: repr.src,
            msg_id: 0,
            frag_index: 0,
            frag_count: 1,
            link_id: self.config.tor_port,
            payload_len: ACK_PAYLOAD_LEN as u16,
        };
        let total = answer.buffer_len();
        let mut out = Packet::new_unchecked(&mut buf[..total]);
        answer.emit(&mut out);
        out.payload_mut().copy_from_slice(&payload);
        Ok(Some(total))
    }
}
