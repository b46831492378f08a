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
use onepipe_wire::{ACK_PAYLOAD_LEN, AckPayload, Instant};

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
        let mut t = self.sender.poll_forward()?;
        // A packet to ourselves crosses only our own link to the ToR, which the controller
        // does not stand in for (it refuses such a packet): if that link is down, our ToR
        // reports it and we are the one declared failed. Asking only cost a refusal each; a
        // process starting up before its ToR took its link asked dozens of times.
        while t.dst == self.config.process {
            t = self.sender.poll_forward()?;
        }
        // Barriers mean something only on the link they crossed: none go through the controller.
        let repr = super::prepare_repr(&self.config, &t, Default::default(), None);
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
        if !self.plausible_time(now, &repr, host_now, false) {
            return Ok(None);
        }
        if repr.opcode == Opcode::Ack {
            let ack = AckPayload::parse(packet.payload()).expect("parse checked the length");
            self.sender.on_ack(now, repr.src, repr.psn, &ack);
            return Ok(None);
        }
        let data = if repr.ack {
            let (cumulative, ack, data) =
                split_piggyback(packet.payload(), repr.sack).expect("parse checked the length");
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
        // No barriers: a forwarded packet carries none (it did not cross the fabric).
        let answer = self.ack_repr(repr.src, cumulative, Default::default());
        let total = answer.buffer_len();
        let mut out = Packet::new_unchecked(&mut buf[..total]);
        answer.emit(&mut out);
        out.payload_mut().copy_from_slice(&payload);
        Ok(Some(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::EndpointConfig;
    use onepipe_wire::Timestamp48;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(1_000_000 + us * 1_000)
    }

    fn endpoint(process: u32) -> Endpoint {
        Endpoint::new(EndpointConfig::new(process, 2, 0), t(0))
    }

    /// Runs `ep`'s timers up to `until` (microseconds), losing everything it sends.
    fn lose_until(ep: &mut Endpoint, from: u64, until: u64) {
        let mut buf = [0u8; 1600];
        for us in from..=until {
            if ep.poll_timeout() <= t(us) {
                ep.handle_timeout(t(us));
            }
            while ep.poll_transmit(t(us), &mut buf).is_some() {}
        }
    }

    /// Paper 5.2: "S repeatedly retransmits a message but cannot receive ACK from R. In this
    /// case, S asks controller to forward the message to R". Not before `forward_after_retries`
    /// retransmissions, and never without a controller.
    #[test]
    fn a_packet_is_offered_for_forwarding_after_its_retries_and_only_with_a_controller() {
        let mut buf = [0u8; 1600];
        let mut alone = endpoint(0);
        alone.send_reliable(t(0), &[(1, b"m")]).unwrap();
        lose_until(&mut alone, 0, 20_000);
        assert!(alone.reliable_sender().counters().retransmissions >= 3);
        assert_eq!(alone.poll_forward(&mut buf), None, "no controller, no forwarding");

        let mut s = endpoint(0);
        s.enable_forwarding();
        s.send_reliable(t(0), &[(1, b"m")]).unwrap();
        // RTO 1 ms before any sample, doubled per timeout: retransmissions at 1, 3, 7, 15, 31
        // and 51 ms (the cap is 20 ms). Three retries are not enough before the connection has
        // stalled for `forward_after` (50 ms).
        lose_until(&mut s, 0, 50_900);
        assert_eq!(s.reliable_sender().counters().retransmissions, 5);
        assert_eq!(
            s.poll_forward(&mut buf),
            None,
            "five retries in 31 ms are not enough"
        );
        lose_until(&mut s, 50_901, 51_100);
        let (to, len) = s.poll_forward(&mut buf).expect("stalled past 50 ms");
        assert_eq!(to, 1);
        let r = Repr::parse(&Packet::new_checked(&buf[..len]).unwrap()).unwrap();
        assert_eq!(
            (r.opcode, r.src, r.dst, r.psn, r.recall),
            (Opcode::Prepare, 0, 1, 0, false)
        );
        assert_eq!(
            r.commit_barrier,
            Timestamp48::default(),
            "no barrier off the fabric"
        );
        assert_eq!(s.poll_forward(&mut buf), None, "once per three retries");
        lose_until(&mut s, 51_101, 111_100);
        assert_eq!(s.reliable_sender().counters().retransmissions, 9);
        assert_eq!(
            s.poll_forward(&mut buf).map(|f| f.0),
            Some(1),
            "asked again at the ninth"
        );
    }

    /// A packet to ourselves is not offered: the controller refuses to forward it.
    #[test]
    fn a_packet_to_ourselves_is_not_offered_for_forwarding() {
        let mut buf = [0u8; 1600];
        let mut s = endpoint(0);
        s.enable_forwarding();
        s.send_reliable(t(0), &[(0, b"m"), (1, b"m")]).unwrap();
        lose_until(&mut s, 0, 51_100);
        assert_eq!(s.poll_forward(&mut buf).map(|f| f.0), Some(1));
        assert_eq!(s.poll_forward(&mut buf), None);
    }

    /// The receiver takes a forwarded prepare as one from the fabric, duplicates included, and
    /// answers with its ACK; the sender takes that ACK as one from the fabric. Barriers in
    /// forwarded packets are ignored.
    #[test]
    fn a_forwarded_prepare_is_stored_once_and_its_ack_settles_the_sender() {
        let mut buf = [0u8; 1600];
        let mut s = endpoint(0);
        let mut r = endpoint(1);
        s.enable_forwarding();
        s.send_reliable(t(0), &[(1, b"m")]).unwrap();
        lose_until(&mut s, 0, 51_100);
        let (_, len) = s.poll_forward(&mut buf).unwrap();
        let mut prepare = buf[..len].to_vec();
        // A forged barrier must not let the receiver deliver.
        Packet::new_unchecked(&mut prepare[..]).set_commit_barrier(Timestamp48::new(u64::MAX >> 16));
        let mut ack = [0u8; 1600];
        let n = r
            .handle_forwarded(t(51_200), &prepare, &mut ack)
            .unwrap()
            .expect("an ACK");
        assert_eq!(r.prepared().len(), 1);
        assert_eq!(r.poll_deliver_reliable(), None, "the commit barrier did not move");
        let again = r.handle_forwarded(t(51_201), &prepare, &mut buf).unwrap();
        assert!(again.is_some(), "a duplicate is acknowledged again");
        assert_eq!(r.prepared().len(), 1, "and not stored twice");
        assert_eq!(s.handle_forwarded(t(51_300), &ack[..n], &mut buf).unwrap(), None);
        assert!(s.reliable_sender().is_idle(), "acknowledged");
        assert_eq!(s.handle_forwarded(t(51_301), &ack[..n], &mut buf).unwrap(), None);
        assert_eq!(
            (s.counters().forwarded_received, r.counters().forwarded_received),
            (2, 2)
        );
        // Not for us, not reliable, or not a packet: counted, nothing else.
        assert_eq!(s.handle_forwarded(t(51_400), &prepare, &mut buf).unwrap(), None);
        assert_eq!(s.counters().misdelivered, 1);
        assert!(r.handle_forwarded(t(51_400), &[1, 2, 3], &mut buf).is_err());
        assert_eq!(r.counters().malformed, 1);
    }
}
