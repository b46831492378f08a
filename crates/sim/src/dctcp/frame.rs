//! The background flows' frames: simulator traffic only, never seen by a 1Pipe program (the
//! node wrapper takes them before the pipeline does, [`super::node`]).
//!
//! ```text
//! byte 0      protocol nibble (EXPERIMENTAL) | flags (ACK, CE, ECE)
//! bytes 1-4   source process, u32 LE
//! bytes 5-8   destination process, u32 LE
//! bytes 9-10  flow index at the source, u16 LE
//! bytes 11-18 data: sequence number of the frame; ACK: next frame expected (cumulative)
//! ```
//! A data frame is padded to the flow's frame size; an ACK is [`ACK_BYTES`] long.

use onepipe_wire::protocol::{self, Protocol};

/// The protocol nibble of background frames. `EXPERIMENTAL` is never assigned to a system, and
/// only runs with background flows (whose nodes intercept it) send it.
pub const BACKGROUND: Protocol = protocol::EXPERIMENTAL;

pub const HEADER_BYTES: usize = 19;
/// An ACK as a minimum Ethernet frame.
pub const ACK_BYTES: usize = 64;

const FLAG_ACK: u8 = 1;
/// Congestion experienced: a switch marked this data frame (ECN CE).
const FLAG_CE: u8 = 2;
/// ECN echo: the data frame this ACK answers was marked.
const FLAG_ECE: u8 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub ack: bool,
    pub ce: bool,
    pub ece: bool,
    pub src: u32,
    pub dst: u32,
    pub flow: u16,
    /// Data: the frame's sequence number; ACK: the next frame expected.
    pub seq: u64,
}

/// Whether `frame` is a background frame (by its protocol nibble alone).
pub fn is_background(frame: &[u8]) -> bool {
    protocol::protocol_of(frame) == Some(BACKGROUND)
}

impl Repr {
    /// `None` for anything not a whole background header. Never panics.
    pub fn parse(frame: &[u8]) -> Option<Repr> {
        if !is_background(frame) || frame.len() < HEADER_BYTES {
            return None;
        }
        let flags = frame[0] & 0x0f;
        let u32_at = |i: usize| u32::from_le_bytes(frame[i..i + 4].try_into().expect("4 bytes"));
        Some(Repr {
            ack: flags & FLAG_ACK != 0,
            ce: flags & FLAG_CE != 0,
            ece: flags & FLAG_ECE != 0,
            src: u32_at(1),
            dst: u32_at(5),
            flow: u16::from_le_bytes(frame[9..11].try_into().expect("2 bytes")),
            seq: u64::from_le_bytes(frame[11..19].try_into().expect("8 bytes")),
        })
    }

    /// Writes the header and zero padding to `len` bytes (at least the header) into `buf`;
    /// returns the length written, `None` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        let len = len.max(HEADER_BYTES);
        let out = buf.get_mut(..len)?;
        let flags = (self.ack as u8 * FLAG_ACK) | (self.ce as u8 * FLAG_CE) | (self.ece as u8 * FLAG_ECE);
        out[0] = protocol::first_byte(BACKGROUND, flags);
        out[1..5].copy_from_slice(&self.src.to_le_bytes());
        out[5..9].copy_from_slice(&self.dst.to_le_bytes());
        out[9..11].copy_from_slice(&self.flow.to_le_bytes());
        out[11..19].copy_from_slice(&self.seq.to_le_bytes());
        out[HEADER_BYTES..].fill(0);
        Some(len)
    }
}

/// Sets CE on a background data frame (ACKs are not ECN-capable, as in DCTCP); anything else
/// is left alone.
pub fn mark_ce(frame: &mut [u8]) {
    if let Some(r) = Repr::parse(frame)
        && !r.ack
    {
        frame[0] |= FLAG_CE;
    }
}

/// The destination process of a background frame, for routing.
pub fn destination(frame: &[u8]) -> Option<u32> {
    Repr::parse(frame).map(|r| r.dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes_of_a_marked_data_frame() {
        let r = Repr {
            ack: false,
            ce: false,
            ece: false,
            src: 1,
            dst: 0x0203,
            flow: 7,
            seq: 9,
        };
        let mut buf = [0xffu8; 32];
        assert_eq!(r.emit(&mut buf, 24), Some(24));
        mark_ce(&mut buf[..24]);
        assert_eq!(
            &buf[..HEADER_BYTES],
            &[0xf2, 1, 0, 0, 0, 3, 2, 0, 0, 7, 0, 9, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(&buf[HEADER_BYTES..24], &[0; 5]);
        assert_eq!(Repr::parse(&buf[..24]), Some(Repr { ce: true, ..r }));
    }

    #[test]
    fn acks_are_never_marked_and_short_or_foreign_frames_do_not_parse() {
        let ack = Repr {
            ack: true,
            ce: false,
            ece: true,
            src: 3,
            dst: 4,
            flow: 0,
            seq: 10,
        };
        let mut buf = [0u8; ACK_BYTES];
        ack.emit(&mut buf, ACK_BYTES).unwrap();
        mark_ce(&mut buf);
        assert_eq!(Repr::parse(&buf), Some(ack));
        assert_eq!(Repr::parse(&buf[..HEADER_BYTES - 1]), None);
        let beacon = onepipe_wire::packet::Repr::beacon(
            onepipe_wire::Timestamp48::new(1),
            onepipe_wire::Timestamp48::new(1),
            0,
        )
        .to_vec();
        assert!(!is_background(&beacon));
        assert_eq!(Repr::parse(&beacon), None);
        assert_eq!(ack.emit(&mut [0u8; 10], ACK_BYTES), None);
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64),
                                              src: u32, dst: u32, flow: u16, seq: u64, flags in 0u8..8) {
            let _ = Repr::parse(&bytes);
            let r = Repr { ack: flags & 1 != 0, ce: flags & 2 != 0, ece: flags & 4 != 0, src, dst, flow, seq };
            let mut buf = [0u8; 64];
            let len = r.emit(&mut buf, 40).unwrap();
            prop_assert_eq!(Repr::parse(&buf[..len]), Some(r));
        }
    }
}
