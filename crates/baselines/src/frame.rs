//! The baselines' own frame format, separate from onepipe's packet header so that a frame of
//! one can never be mistaken for the other: byte 0 is [`MAGIC`], whose high nibble (0xB) is not
//! a version onepipe speaks (its byte 0 carries version 2 in the high nibble).
//!
//! Layout (big-endian, [`HEADER_LEN`] = 40 bytes, then `payload_len` bytes):
//!
//! ```text
//!  0      magic/version 0xB1
//!  1      kind
//!  2..4   payload_len
//!  4..8   src      process that put this frame on the wire ([`NO_PROCESS`] for a switch)
//!  8..12  dst      destination process ([`NO_PROCESS`] for a switch-sequencer request)
//! 12..16  origin   process whose broadcast this is (per kind, see [`FrameKind`])
//! 16..24  seq      global sequence number, Lamport timestamp or token counter
//! 24..32  msg_id   the origin's own message number
//! 32..40  sent_ns  shared-clock send time of the broadcast, for latency
//! ```
//!
//! Payloads are synthetic (the workload measures, it does not interpret): nodes keep only a
//! message's metadata and length, and write the payload anew on every copy, its first 8 bytes
//! the message id and the rest zero. Contract as in onepipe's `wire`: [`Header::parse`] never
//! panics on any bytes; [`Header::emit`] never panics into a buffer of at least
//! [`Header::frame_len`] bytes.

use core::fmt;

pub const MAGIC: u8 = 0xB1;
pub const HEADER_LEN: usize = 40;
/// `src` of frames a switch originates and `dst` of requests addressed to the sequencer switch.
pub const NO_PROCESS: u32 = u32::MAX;

/// What a frame is. Field use per kind:
/// - `Data`: one copy of an ordered broadcast; `seq` orders it (sequence number or Lamport
///   timestamp), `origin`/`msg_id` name it.
/// - `Request`: a broadcast on its way to the host sequencer (`dst`), not yet numbered.
/// - `SwitchRequest`: the same on its way up to the sequencer switch; `dst` is [`NO_PROCESS`].
/// - `Token`: `seq` is the next global sequence number, `msg_id` counts the token's hops (a
///   duplicated token is recognised by an old count), `origin` counts holders in a row that
///   passed it idle after sending stopped (the token parks after a full idle round).
/// - `Exchange`: a Lamport timestamp notice; `seq` is the sender's clock. No payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    Data = 1,
    Request = 2,
    SwitchRequest = 3,
    Token = 4,
    Exchange = 5,
}

impl FrameKind {
    pub fn from_u8(v: u8) -> Option<FrameKind> {
        match v {
            1 => Some(FrameKind::Data),
            2 => Some(FrameKind::Request),
            3 => Some(FrameKind::SwitchRequest),
            4 => Some(FrameKind::Token),
            5 => Some(FrameKind::Exchange),
            _ => None,
        }
    }

    /// Control frames carry no message.
    fn carries_payload(self) -> bool {
        !matches!(self, FrameKind::Token | FrameKind::Exchange)
    }
}

/// Why bytes are not a baseline frame. The frame is dropped and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameError {
    /// Shorter than the header.
    Truncated,
    /// Byte 0 is not [`MAGIC`] (e.g. a onepipe packet).
    BadMagic,
    UnknownKind,
    /// The frame length is not header plus the declared payload.
    BadLength,
    /// A token or exchange frame with a payload.
    UnexpectedPayload,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::Truncated => "truncated",
            FrameError::BadMagic => "bad_magic",
            FrameError::UnknownKind => "unknown_kind",
            FrameError::BadLength => "bad_length",
            FrameError::UnexpectedPayload => "unexpected_payload",
        })
    }
}

impl std::error::Error for FrameError {}

/// A parsed, validated header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub kind: FrameKind,
    pub src: u32,
    pub dst: u32,
    pub origin: u32,
    pub seq: u64,
    pub msg_id: u64,
    pub sent_ns: u64,
    pub payload_len: u16,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(w)
}

impl Header {
    /// Validates `frame` and reads its header.
    pub fn parse(frame: &[u8]) -> Result<Header, FrameError> {
        if frame.len() < HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        if frame[0] != MAGIC {
            return Err(FrameError::BadMagic);
        }
        let kind = FrameKind::from_u8(frame[1]).ok_or(FrameError::UnknownKind)?;
        let payload_len = u16::from_be_bytes([frame[2], frame[3]]);
        if frame.len() != HEADER_LEN + payload_len as usize {
            return Err(FrameError::BadLength);
        }
        if payload_len > 0 && !kind.carries_payload() {
            return Err(FrameError::UnexpectedPayload);
        }
        Ok(Header {
            kind,
            src: u32_at(frame, 4),
            dst: u32_at(frame, 8),
            origin: u32_at(frame, 12),
            seq: u64_at(frame, 16),
            msg_id: u64_at(frame, 24),
            sent_ns: u64_at(frame, 32),
            payload_len,
        })
    }

    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.payload_len as usize
    }

    /// Writes header and synthetic payload into `buf`; returns the frame length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.frame_len();
        let b = &mut buf[..len];
        b[0] = MAGIC;
        b[1] = self.kind as u8;
        b[2..4].copy_from_slice(&self.payload_len.to_be_bytes());
        b[4..8].copy_from_slice(&self.src.to_be_bytes());
        b[8..12].copy_from_slice(&self.dst.to_be_bytes());
        b[12..16].copy_from_slice(&self.origin.to_be_bytes());
        b[16..24].copy_from_slice(&self.seq.to_be_bytes());
        b[24..32].copy_from_slice(&self.msg_id.to_be_bytes());
        b[32..40].copy_from_slice(&self.sent_ns.to_be_bytes());
        let payload = &mut b[HEADER_LEN..];
        payload.fill(0);
        let id = self.msg_id.to_be_bytes();
        let n = payload.len().min(8);
        payload[..n].copy_from_slice(&id[..n]);
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = FrameKind> {
        prop_oneof![
            Just(FrameKind::Data),
            Just(FrameKind::Request),
            Just(FrameKind::SwitchRequest),
            Just(FrameKind::Token),
            Just(FrameKind::Exchange),
        ]
    }

    proptest! {
        #[test]
        fn emit_parse_round_trip(
            kind in kind(),
            src: u32, dst: u32, origin: u32, seq: u64, msg_id: u64, sent_ns: u64,
            payload_len in 0u16..2000,
        ) {
            let payload_len = if kind.carries_payload() { payload_len } else { 0 };
            let h = Header { kind, src, dst, origin, seq, msg_id, sent_ns, payload_len };
            let mut buf = vec![0xeeu8; h.frame_len() + 7];
            let len = h.emit(&mut buf);
            prop_assert_eq!(len, HEADER_LEN + payload_len as usize);
            prop_assert_eq!(Header::parse(&buf[..len]), Ok(h));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120), magic: bool) {
            let mut bytes = bytes;
            if magic && !bytes.is_empty() {
                bytes[0] = MAGIC;
            }
            let _ = Header::parse(&bytes);
        }
    }

    #[test]
    fn malformed_frames_are_refused() {
        let h = Header {
            kind: FrameKind::Data,
            src: 1,
            dst: 2,
            origin: 1,
            seq: 9,
            msg_id: 3,
            sent_ns: 100,
            payload_len: 8,
        };
        let mut buf = [0u8; 64];
        let len = h.emit(&mut buf);
        assert_eq!(Header::parse(&buf[..HEADER_LEN - 1]), Err(FrameError::Truncated));
        assert_eq!(Header::parse(&buf[..len - 1]), Err(FrameError::BadLength));
        assert_eq!(Header::parse(&buf[..len + 1]), Err(FrameError::BadLength));
        let mut bad = buf;
        bad[0] = onepipe_wire::packet::VERSION << 4; // a onepipe header, opcode 0
        assert_eq!(Header::parse(&bad[..len]), Err(FrameError::BadMagic));
        let mut bad = buf;
        bad[1] = 99;
        assert_eq!(Header::parse(&bad[..len]), Err(FrameError::UnknownKind));
        let mut bad = buf;
        bad[1] = FrameKind::Token as u8;
        assert_eq!(Header::parse(&bad[..len]), Err(FrameError::UnexpectedPayload));
        assert_eq!(&buf[HEADER_LEN..len], &3u64.to_be_bytes());
    }
}
