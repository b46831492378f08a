//! The payload of an ACK (paper 5.1 prepare phase, 6.1 flow and congestion control).
//!
//! The header's `psn` is the cumulative acknowledgment: the next PSN the receiver expects, so
//! every PSN below it arrived. The payload adds what one cumulative number cannot say:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..8 | `sack` | bit i set: PSN `psn + 1 + i` arrived (`psn` itself is the hole) |
//! | 8..12 | `window_packets` | the receiver takes PSNs below `psn + window_packets` |
//! | 12..14 | `received` | packets that arrived since the previous ACK (DCTCP's denominator) |
//! | 14..16 | `ce_marked` | how many of those carried the ECN mark (DCTCP's numerator) |
//!
//! Big-endian like the header. Parsing is total: any 16 bytes are an ACK payload; the
//! endpoint judges whether the numbers make sense for its connection.

/// Length of the ACK payload in bytes.
pub const ACK_PAYLOAD_LEN: usize = 16;
/// Length of an ACK piggybacked on a prepare packet (flag `ACK`): the cumulative PSN (4
/// bytes) then an ACK payload, in front of the message bytes.
pub const PIGGYBACK_LEN: usize = 4 + ACK_PAYLOAD_LEN;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckPayload {
    pub sack: u64,
    pub window_packets: u32,
    pub received: u16,
    pub ce_marked: u16,
}

impl AckPayload {
    /// Reads an ACK payload; `None` unless `bytes` is exactly [`ACK_PAYLOAD_LEN`] long.
    pub fn parse(bytes: &[u8]) -> Option<AckPayload> {
        let b: &[u8; ACK_PAYLOAD_LEN] = bytes.try_into().ok()?;
        Some(AckPayload {
            sack: u64::from_be_bytes(b[0..8].try_into().ok()?),
            window_packets: u32::from_be_bytes(b[8..12].try_into().ok()?),
            received: u16::from_be_bytes([b[12], b[13]]),
            ce_marked: u16::from_be_bytes([b[14], b[15]]),
        })
    }

    pub fn emit(&self, out: &mut [u8; ACK_PAYLOAD_LEN]) {
        out[0..8].copy_from_slice(&self.sack.to_be_bytes());
        out[8..12].copy_from_slice(&self.window_packets.to_be_bytes());
        out[12..14].copy_from_slice(&self.received.to_be_bytes());
        out[14..16].copy_from_slice(&self.ce_marked.to_be_bytes());
    }
}

/// Writes a piggybacked ACK: cumulative PSN, then the payload.
pub fn emit_piggyback(cumulative: u32, ack: &AckPayload, out: &mut [u8; PIGGYBACK_LEN]) {
    out[..4].copy_from_slice(&cumulative.to_be_bytes());
    let mut p = [0u8; ACK_PAYLOAD_LEN];
    ack.emit(&mut p);
    out[4..].copy_from_slice(&p);
}

/// Splits a piggybacked ACK off the front of a prepare payload: (cumulative, ACK, message
/// bytes). `None` if the payload is too short.
pub fn split_piggyback(payload: &[u8]) -> Option<(u32, AckPayload, &[u8])> {
    let cumulative = u32::from_be_bytes(payload.get(..4)?.try_into().ok()?);
    let ack = AckPayload::parse(payload.get(4..PIGGYBACK_LEN)?)?;
    Some((cumulative, ack, &payload[PIGGYBACK_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn emit_parse_round_trips(sack: u64, window_packets: u32, received: u16, ce_marked: u16) {
            let a = AckPayload { sack, window_packets, received, ce_marked };
            let mut buf = [0u8; ACK_PAYLOAD_LEN];
            a.emit(&mut buf);
            prop_assert_eq!(AckPayload::parse(&buf), Some(a));
        }

        #[test]
        fn piggyback_round_trips(cumulative: u32, sack: u64, rest in proptest::collection::vec(any::<u8>(), 0..20)) {
            let a = AckPayload { sack, window_packets: 9, received: 2, ce_marked: 1 };
            let mut head = [0u8; PIGGYBACK_LEN];
            emit_piggyback(cumulative, &a, &mut head);
            let mut payload = head.to_vec();
            payload.extend_from_slice(&rest);
            prop_assert_eq!(split_piggyback(&payload), Some((cumulative, a, &rest[..])));
            prop_assert_eq!(split_piggyback(&payload[..PIGGYBACK_LEN - 1]), None);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let parsed = AckPayload::parse(&bytes);
            prop_assert_eq!(parsed.is_some(), bytes.len() == ACK_PAYLOAD_LEN);
        }
    }
}
