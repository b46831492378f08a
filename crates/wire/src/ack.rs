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
//!
//! An ACK riding on a prepare packet (flag `ACK`) is shorter, since nearly every ACK rides:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | cumulative PSN (the stand-alone ACK's header `psn`) |
//! | 4..6 | `window_packets`, at most `u16::MAX` |
//! | 6..8 | `received` |
//! | 8..10 | `ce_marked` |
//! | 10..18 | `sack`, only with flag `SACK`; without it the map is empty |

/// Length of the ACK payload in bytes.
pub const ACK_PAYLOAD_LEN: usize = 16;
/// Length of an ACK piggybacked on a prepare packet (flag `ACK`) without a selective map: the
/// cumulative PSN (4 bytes), `window_packets` (2, saturated), `received` and `ce_marked` (2
/// each), in front of the message bytes. The map almost always is empty in FIFO fabrics, and
/// leaving it out keeps the prepare packets that carry nearly every ACK 8 bytes shorter.
pub const PIGGYBACK_LEN: usize = 10;
/// Length of a piggybacked ACK with its selective map (flags `ACK` and `SACK`): the 8-byte
/// map follows the [`PIGGYBACK_LEN`] bytes.
pub const PIGGYBACK_SACK_LEN: usize = PIGGYBACK_LEN + 8;
/// The most a piggybacked ACK takes: what reliable fragments leave room for.
pub const PIGGYBACK_MAX_LEN: usize = PIGGYBACK_SACK_LEN;

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

    /// Bytes this ACK takes piggybacked: the selective map only when a bit of it is set.
    pub fn piggyback_len(&self) -> usize {
        piggyback_len(self.sack != 0)
    }
}

/// Bytes of a piggybacked ACK, with the packet's `SACK` flag as given.
pub fn piggyback_len(with_sack: bool) -> usize {
    if with_sack {
        PIGGYBACK_SACK_LEN
    } else {
        PIGGYBACK_LEN
    }
}

/// Writes a piggybacked ACK to the front of `out`, which has at least
/// [`AckPayload::piggyback_len`] bytes, and returns its length; the packet's `SACK` flag must
/// say whether it has the map (a non-zero `sack`). A window above `u16::MAX` is sent as
/// `u16::MAX`: a receiver advertising less than it has is always safe.
pub fn emit_piggyback(cumulative: u32, ack: &AckPayload, out: &mut [u8]) -> usize {
    let window = ack.window_packets.min(u16::MAX as u32) as u16;
    out[0..4].copy_from_slice(&cumulative.to_be_bytes());
    out[4..6].copy_from_slice(&window.to_be_bytes());
    out[6..8].copy_from_slice(&ack.received.to_be_bytes());
    out[8..10].copy_from_slice(&ack.ce_marked.to_be_bytes());
    if ack.sack == 0 {
        return PIGGYBACK_LEN;
    }
    out[PIGGYBACK_LEN..PIGGYBACK_SACK_LEN].copy_from_slice(&ack.sack.to_be_bytes());
    PIGGYBACK_SACK_LEN
}

/// Splits a piggybacked ACK off the front of a prepare payload: (cumulative, ACK, message
/// bytes). `with_sack` is the packet's `SACK` flag. `None` if the payload is too short.
pub fn split_piggyback(payload: &[u8], with_sack: bool) -> Option<(u32, AckPayload, &[u8])> {
    let len = piggyback_len(with_sack);
    let b = payload.get(..len)?;
    let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    let ack = AckPayload {
        sack: match b.get(PIGGYBACK_LEN..PIGGYBACK_SACK_LEN) {
            Some(map) => u64::from_be_bytes(map.try_into().ok()?),
            None => 0,
        },
        window_packets: be16(4) as u32,
        received: be16(6),
        ce_marked: be16(8),
    };
    Some((u32::from_be_bytes(b[0..4].try_into().ok()?), ack, &payload[len..]))
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
        fn piggyback_round_trips(
            cumulative: u32,
            sack: u64,
            window_packets in 0u32..=u16::MAX as u32,
            received: u16,
            ce_marked: u16,
            rest in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let a = AckPayload { sack, window_packets, received, ce_marked };
            let mut payload = vec![0u8; PIGGYBACK_MAX_LEN];
            let len = emit_piggyback(cumulative, &a, &mut payload);
            prop_assert_eq!(len, a.piggyback_len());
            prop_assert_eq!(len == PIGGYBACK_SACK_LEN, sack != 0);
            payload.truncate(len);
            payload.extend_from_slice(&rest);
            prop_assert_eq!(split_piggyback(&payload, sack != 0), Some((cumulative, a, &rest[..])));
            prop_assert_eq!(split_piggyback(&payload[..len - 1], sack != 0), None);
        }

        #[test]
        fn piggybacked_windows_saturate(window_packets in u16::MAX as u32.., sack: u64) {
            let a = AckPayload { sack, window_packets, received: 1, ce_marked: 0 };
            let mut payload = [0u8; PIGGYBACK_MAX_LEN];
            let len = emit_piggyback(7, &a, &mut payload);
            let (_, parsed, _) = split_piggyback(&payload[..len], sack != 0).expect("whole");
            prop_assert_eq!(parsed.window_packets, u16::MAX as u32);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let parsed = AckPayload::parse(&bytes);
            prop_assert_eq!(parsed.is_some(), bytes.len() == ACK_PAYLOAD_LEN);
        }
    }
}
