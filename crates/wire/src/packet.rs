//! The onepipe packet header (docs/wire.md).
//!
//! The first 24 bytes are the 1Pipe header of paper section 6.1: "3 timestamps including
//! message, best-effort barrier, and commit barrier; PSN; an opcode and a flag that marks end of
//! message", each timestamp 48 bits. The next 24 bytes are what a software fabric needs in place
//! of the UD/IP headers the paper rides on: source and destination process, message id,
//! fragment position, the link the packet last crossed, and the payload length.
//!
//! Contract (as smoltcp's `wire`): [`Packet::new_checked`] validates lengths, after which no
//! getter panics; [`Repr::parse`] never panics on any bytes; [`Repr::emit`] never panics into a
//! buffer of at least [`Repr::buffer_len`] bytes. All integers are big-endian.

use crate::time::Timestamp48;
use core::fmt;

/// Length of the fixed header in bytes.
pub const HEADER_LEN: usize = 48;
/// Header format version carried in the high nibble of byte 0. Version 2 (2026-11-27): the
/// piggybacked ACK is shorter and its selective map optional (flag `SACK`); a version-1 peer
/// would misread it, so each drops the other's packets as `bad_version` instead.
pub const VERSION: u8 = 2;
/// Largest payload a single packet can carry (the length field is 16 bits).
pub const PAYLOAD_MAX: usize = u16::MAX as usize;

mod field {
    use core::ops::Range;
    pub const VERSION_OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const MSG_TS: Range<usize> = 2..8;
    pub const BARRIER: Range<usize> = 8..14;
    pub const COMMIT_BARRIER: Range<usize> = 14..20;
    pub const PSN: Range<usize> = 20..24;
    pub const SRC: Range<usize> = 24..28;
    pub const DST: Range<usize> = 28..32;
    pub const MSG_ID: Range<usize> = 32..40;
    pub const FRAG_INDEX: Range<usize> = 40..42;
    pub const FRAG_COUNT: Range<usize> = 42..44;
    pub const LINK_ID: Range<usize> = 44..46;
    pub const PAYLOAD_LEN: Range<usize> = 46..48;
}

/// Flag bits in byte 1.
pub mod flags {
    /// Last fragment of a message (paper 6.1: "a flag that marks end of message").
    pub const END_OF_MESSAGE: u8 = 0x01;
    /// Congestion experienced, set by a fabric queue past its ECN threshold.
    pub const ECN: u8 = 0x02;
    /// A prepare packet whose payload starts with a piggybacked ACK for its destination's
    /// connection to us ([`crate::ack::PIGGYBACK_LEN`] bytes, see [`crate::ack`]).
    pub const ACK: u8 = 0x04;
    /// A prepare packet that recalls message `msg_id` with timestamp `msg_ts` of an aborted
    /// scattering (paper 5.2 Recall): the receiver discards that message and acknowledges the
    /// recall like any prepare packet. Fragment 0 of 1, no payload beyond a piggybacked ACK.
    pub const RECALL: u8 = 0x08;
    /// With `ACK` only: the piggybacked ACK carries its selective map
    /// ([`crate::ack::PIGGYBACK_SACK_LEN`] bytes in all).
    pub const SACK: u8 = 0x10;
    pub const KNOWN: u8 = END_OF_MESSAGE | ECN | ACK | RECALL | SACK;
}

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Best-effort message fragment.
    Data = 1,
    /// Barrier only, one hop (paper 4.2). No payload; source and destination are unused.
    Beacon = 2,
    /// A receiver could not deliver a best-effort message in order (it arrived after the
    /// barrier passed its timestamp, or a fragment was missing); sent back to its sender.
    Nak = 3,
    /// Reliable message fragment (paper 5.1, prepare phase): numbered by `psn` on its
    /// (sender, receiver) connection, acknowledged, delivered once the commit barrier passes.
    Prepare = 4,
    /// Receiver to sender on a reliable connection: `psn` is the next PSN expected (everything
    /// below arrived); the payload is an [`crate::ack::AckPayload`].
    Ack = 5,
}

impl Opcode {
    pub fn from_u8(v: u8) -> Option<Opcode> {
        match v {
            1 => Some(Opcode::Data),
            2 => Some(Opcode::Beacon),
            3 => Some(Opcode::Nak),
            4 => Some(Opcode::Prepare),
            5 => Some(Opcode::Ack),
            _ => None,
        }
    }
}

/// Why bytes are not a packet. Small and `Copy`: the packet is dropped and a counter bumped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Fewer bytes than the header, or than the header plus the payload length it declares.
    Truncated,
    /// A version this code does not speak.
    BadVersion,
    UnknownOpcode,
    /// Flag bits outside [`flags::KNOWN`].
    UnknownFlags,
    /// Fragment index not below the fragment count, a zero count, or an end-of-message flag
    /// that disagrees with the position.
    BadFragment,
    /// A beacon or NAK with a payload, an ACK whose payload is not an ACK payload, the `ACK`
    /// or `RECALL` flag on anything but a prepare, `SACK` without `ACK`, or a recall carrying
    /// message bytes.
    UnexpectedPayload,
}

impl ParseError {
    pub const ALL: [ParseError; 6] = [
        ParseError::Truncated,
        ParseError::BadVersion,
        ParseError::UnknownOpcode,
        ParseError::UnknownFlags,
        ParseError::BadFragment,
        ParseError::UnexpectedPayload,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ParseError::Truncated => "truncated",
            ParseError::BadVersion => "bad_version",
            ParseError::UnknownOpcode => "unknown_opcode",
            ParseError::UnknownFlags => "unknown_flags",
            ParseError::BadFragment => "bad_fragment",
            ParseError::UnexpectedPayload => "unexpected_payload",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for ParseError {}

/// A zero-copy view of a packet in a buffer.
#[derive(Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn read_u48(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn write_u48(b: &mut [u8], v: u64) {
    b.copy_from_slice(&v.to_be_bytes()[2..8]);
}

fn read_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it; getters may panic until [`Packet::check_len`] passes.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking that it holds the header and the declared payload.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, ParseError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), ParseError> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + self.payload_len() as usize {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.b()[field::VERSION_OPCODE] >> 4
    }
    pub fn opcode_raw(&self) -> u8 {
        self.b()[field::VERSION_OPCODE] & 0x0f
    }
    pub fn flags(&self) -> u8 {
        self.b()[field::FLAGS]
    }
    pub fn msg_ts(&self) -> Timestamp48 {
        Timestamp48::new(read_u48(&self.b()[field::MSG_TS]))
    }
    pub fn barrier(&self) -> Timestamp48 {
        Timestamp48::new(read_u48(&self.b()[field::BARRIER]))
    }
    pub fn commit_barrier(&self) -> Timestamp48 {
        Timestamp48::new(read_u48(&self.b()[field::COMMIT_BARRIER]))
    }
    pub fn psn(&self) -> u32 {
        read_u32(&self.b()[field::PSN])
    }
    pub fn src(&self) -> u32 {
        read_u32(&self.b()[field::SRC])
    }
    pub fn dst(&self) -> u32 {
        read_u32(&self.b()[field::DST])
    }
    pub fn msg_id(&self) -> u64 {
        let b = &self.b()[field::MSG_ID];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    pub fn frag_index(&self) -> u16 {
        read_u16(&self.b()[field::FRAG_INDEX])
    }
    pub fn frag_count(&self) -> u16 {
        read_u16(&self.b()[field::FRAG_COUNT])
    }
    pub fn link_id(&self) -> u16 {
        read_u16(&self.b()[field::LINK_ID])
    }
    /// Declared payload length. Readable on any buffer of at least the header length.
    pub fn payload_len(&self) -> u16 {
        match self.b().get(field::PAYLOAD_LEN) {
            Some(b) => read_u16(b),
            None => 0,
        }
    }
    pub fn payload(&self) -> &[u8] {
        &self.b()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }
    /// Header plus payload: the bytes this packet occupies at the front of the buffer.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len() as usize
    }

    /// Checks the whole header as [`Repr::parse`] does (which calls this), without building a
    /// [`Repr`]: a switch checks every frame it forwards and reads only the few fields it
    /// routes by. Never panics; the opcode on success.
    #[inline]
    pub fn check_header(&self) -> Result<Opcode, ParseError> {
        self.check_len()?;
        if self.version() != VERSION {
            return Err(ParseError::BadVersion);
        }
        let opcode = Opcode::from_u8(self.opcode_raw()).ok_or(ParseError::UnknownOpcode)?;
        let flag_bits = self.flags();
        if flag_bits & !flags::KNOWN != 0 {
            return Err(ParseError::UnknownFlags);
        }
        let end_of_message = flag_bits & flags::END_OF_MESSAGE != 0;
        let (frag_index, frag_count) = (self.frag_index(), self.frag_count());
        if frag_count == 0 || frag_index >= frag_count || end_of_message != (frag_index + 1 == frag_count) {
            return Err(ParseError::BadFragment);
        }
        let payload_len = self.payload_len();
        let ack = flag_bits & flags::ACK != 0;
        let sack = flag_bits & flags::SACK != 0;
        let recall = flag_bits & flags::RECALL != 0;
        // A recall names one whole message: fragment 0 of 1 (END_OF_MESSAGE set, checked above).
        if recall && frag_count != 1 {
            return Err(ParseError::BadFragment);
        }
        let piggyback_len = if ack { crate::ack::piggyback_len(sack) } else { 0 };
        let payload_ok = match opcode {
            _ if sack && !ack => false,
            Opcode::Prepare if recall => payload_len as usize == piggyback_len,
            _ if recall => false,
            Opcode::Prepare if ack => payload_len as usize >= piggyback_len,
            _ if ack => false,
            Opcode::Data | Opcode::Prepare => true,
            Opcode::Ack => payload_len as usize == crate::ack::ACK_PAYLOAD_LEN,
            Opcode::Beacon | Opcode::Nak => payload_len == 0,
        };
        if !payload_ok {
            return Err(ParseError::UnexpectedPayload);
        }
        Ok(opcode)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    pub fn set_version_opcode(&mut self, version: u8, opcode: u8) {
        self.bm()[field::VERSION_OPCODE] = (version << 4) | (opcode & 0x0f);
    }
    pub fn set_flags(&mut self, v: u8) {
        self.bm()[field::FLAGS] = v;
    }
    pub fn set_msg_ts(&mut self, v: Timestamp48) {
        write_u48(&mut self.bm()[field::MSG_TS], v.raw());
    }
    /// Switches rewrite this field on every packet they forward (paper eq. 4.1).
    pub fn set_barrier(&mut self, v: Timestamp48) {
        write_u48(&mut self.bm()[field::BARRIER], v.raw());
    }
    pub fn set_commit_barrier(&mut self, v: Timestamp48) {
        write_u48(&mut self.bm()[field::COMMIT_BARRIER], v.raw());
    }
    pub fn set_psn(&mut self, v: u32) {
        self.bm()[field::PSN].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_src(&mut self, v: u32) {
        self.bm()[field::SRC].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_dst(&mut self, v: u32) {
        self.bm()[field::DST].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_msg_id(&mut self, v: u64) {
        self.bm()[field::MSG_ID].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_frag_index(&mut self, v: u16) {
        self.bm()[field::FRAG_INDEX].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_frag_count(&mut self, v: u16) {
        self.bm()[field::FRAG_COUNT].copy_from_slice(&v.to_be_bytes());
    }
    /// Each sender of a hop stamps the link it transmits on (diagnostics, source checks).
    pub fn set_link_id(&mut self, v: u16) {
        self.bm()[field::LINK_ID].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_payload_len(&mut self, v: u16) {
        self.bm()[field::PAYLOAD_LEN].copy_from_slice(&v.to_be_bytes());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.payload_len() as usize;
        &mut self.bm()[HEADER_LEN..HEADER_LEN + len]
    }
}

/// A parsed, validated header: what the fields mean, independent of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Repr {
    pub opcode: Opcode,
    pub end_of_message: bool,
    pub ecn: bool,
    /// Prepare only: the payload starts with a piggybacked ACK.
    pub ack: bool,
    /// With `ack` only: the piggybacked ACK has its selective map (flag `SACK`).
    pub sack: bool,
    /// Prepare only: a recall of message (`src`, `msg_ts`, `msg_id`) (flag `RECALL`).
    pub recall: bool,
    pub msg_ts: Timestamp48,
    pub barrier: Timestamp48,
    pub commit_barrier: Timestamp48,
    pub psn: u32,
    pub src: u32,
    pub dst: u32,
    pub msg_id: u64,
    pub frag_index: u16,
    pub frag_count: u16,
    pub link_id: u16,
    pub payload_len: u16,
}

impl Repr {
    /// A beacon carrying `barrier` and `commit_barrier` over link `link_id`.
    pub fn beacon(barrier: Timestamp48, commit_barrier: Timestamp48, link_id: u16) -> Repr {
        Repr {
            opcode: Opcode::Beacon,
            end_of_message: true,
            ecn: false,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: barrier,
            barrier,
            commit_barrier,
            psn: 0,
            src: 0,
            dst: 0,
            msg_id: 0,
            frag_index: 0,
            frag_count: 1,
            link_id,
            payload_len: 0,
        }
    }

    /// Validates the header of any byte slice. Never panics.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr, ParseError> {
        let opcode = packet.check_header()?;
        let flag_bits = packet.flags();
        Ok(Repr {
            opcode,
            end_of_message: flag_bits & flags::END_OF_MESSAGE != 0,
            ecn: flag_bits & flags::ECN != 0,
            ack: flag_bits & flags::ACK != 0,
            sack: flag_bits & flags::SACK != 0,
            recall: flag_bits & flags::RECALL != 0,
            msg_ts: packet.msg_ts(),
            barrier: packet.barrier(),
            commit_barrier: packet.commit_barrier(),
            psn: packet.psn(),
            src: packet.src(),
            dst: packet.dst(),
            msg_id: packet.msg_id(),
            frag_index: packet.frag_index(),
            frag_count: packet.frag_count(),
            link_id: packet.link_id(),
            payload_len: packet.payload_len(),
        })
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len as usize
    }

    /// A new frame of [`Repr::buffer_len`] bytes with this header and a zeroed payload: for
    /// tests and rare frames, not the packet path (which emits into buffers it reuses).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = vec![0u8; self.buffer_len()];
        self.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    /// Writes the header. The payload bytes are the caller's (`packet.payload_mut()`).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_opcode(VERSION, self.opcode as u8);
        let mut f = 0;
        if self.end_of_message {
            f |= flags::END_OF_MESSAGE;
        }
        if self.ecn {
            f |= flags::ECN;
        }
        if self.ack {
            f |= flags::ACK;
        }
        if self.sack {
            f |= flags::SACK;
        }
        if self.recall {
            f |= flags::RECALL;
        }
        packet.set_flags(f);
        packet.set_msg_ts(self.msg_ts);
        packet.set_barrier(self.barrier);
        packet.set_commit_barrier(self.commit_barrier);
        packet.set_psn(self.psn);
        packet.set_src(self.src);
        packet.set_dst(self.dst);
        packet.set_msg_id(self.msg_id);
        packet.set_frag_index(self.frag_index);
        packet.set_frag_count(self.frag_count);
        packet.set_link_id(self.link_id);
        packet.set_payload_len(self.payload_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Repr {
        Repr {
            opcode: Opcode::Data,
            end_of_message: false,
            ecn: true,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: Timestamp48::new(0x0102_0304_0506),
            barrier: Timestamp48::new(0x0102_0304_0500),
            commit_barrier: Timestamp48::new(7),
            psn: 9,
            src: 3,
            dst: 17,
            msg_id: 0xdead_beef,
            frag_index: 1,
            frag_count: 3,
            link_id: 12,
            payload_len: 4,
        }
    }

    #[test]
    fn emit_then_parse_round_trips() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut p);
        p.payload_mut().copy_from_slice(b"abcd");
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr);
        assert_eq!(p.payload(), b"abcd");
    }

    #[test]
    fn rejects_truncated_payload() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        let short = &buf[..buf.len() - 1];
        assert_eq!(Packet::new_checked(short).unwrap_err(), ParseError::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(short)),
            Err(ParseError::Truncated)
        );
    }

    #[test]
    fn rejects_inconsistent_end_of_message() {
        let mut repr = sample();
        repr.end_of_message = true; // index 1 of 3 is not the last
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(ParseError::BadFragment)
        );
    }

    #[test]
    fn setters_touch_only_their_field() {
        let repr = sample();
        let mut buf = vec![0u8; repr.buffer_len()];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut p);
        p.set_barrier(Timestamp48::new(0xffff_ffff_ffff));
        let parsed = Repr::parse(&p).unwrap();
        assert_eq!(parsed.barrier.raw(), 0xffff_ffff_ffff);
        assert_eq!(
            Repr {
                barrier: repr.barrier,
                ..parsed
            },
            repr
        );
    }

    /// A recall (paper 5.2): a prepare of fragment 0 of 1 with no payload, or only a piggybacked
    /// ACK.
    fn recall() -> Repr {
        Repr {
            opcode: Opcode::Prepare,
            end_of_message: true,
            ecn: false,
            ack: false,
            sack: false,
            recall: true,
            msg_ts: Timestamp48::new(500),
            barrier: Timestamp48::new(400),
            commit_barrier: Timestamp48::new(300),
            psn: 12,
            src: 2,
            dst: 5,
            msg_id: 77,
            frag_index: 0,
            frag_count: 1,
            link_id: 3,
            payload_len: 0,
        }
    }

    fn parse_repr(repr: &Repr) -> Result<Repr, ParseError> {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        Repr::parse(&Packet::new_unchecked(&buf[..]))
    }

    #[test]
    fn recall_round_trips_with_and_without_a_piggybacked_ack() {
        let r = recall();
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[1], flags::END_OF_MESSAGE | flags::RECALL);
        assert_eq!(parse_repr(&r), Ok(r));
        let with_ack = Repr {
            ack: true,
            payload_len: crate::ack::PIGGYBACK_LEN as u16,
            ..r
        };
        assert_eq!(parse_repr(&with_ack), Ok(with_ack));
        let with_sack = Repr {
            sack: true,
            payload_len: crate::ack::PIGGYBACK_SACK_LEN as u16,
            ..with_ack
        };
        assert_eq!(parse_repr(&with_sack), Ok(with_sack));
    }

    #[test]
    fn the_sack_flag_needs_an_ack_and_room_for_the_map() {
        let prepare = Repr {
            recall: false,
            ack: true,
            sack: true,
            payload_len: crate::ack::PIGGYBACK_SACK_LEN as u16 + 5,
            ..recall()
        };
        let mut buf = vec![0u8; prepare.buffer_len()];
        prepare.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[1], flags::END_OF_MESSAGE | flags::ACK | flags::SACK);
        assert_eq!(parse_repr(&prepare), Ok(prepare));
        let short = Repr {
            payload_len: crate::ack::PIGGYBACK_SACK_LEN as u16 - 1,
            ..prepare
        };
        assert_eq!(parse_repr(&short), Err(ParseError::UnexpectedPayload));
        let without_ack = Repr {
            ack: false,
            ..prepare
        };
        assert_eq!(parse_repr(&without_ack), Err(ParseError::UnexpectedPayload));
        let ack = Repr {
            opcode: Opcode::Ack,
            ack: false,
            payload_len: crate::ack::ACK_PAYLOAD_LEN as u16,
            ..prepare
        };
        assert_eq!(parse_repr(&ack), Err(ParseError::UnexpectedPayload));
    }

    #[test]
    fn malformed_recalls_are_rejected() {
        let r = recall();
        for opcode in [Opcode::Data, Opcode::Beacon, Opcode::Nak] {
            assert_eq!(
                parse_repr(&Repr { opcode, ..r }),
                Err(ParseError::UnexpectedPayload),
                "{opcode:?}"
            );
        }
        let ack = Repr {
            opcode: Opcode::Ack,
            payload_len: crate::ack::ACK_PAYLOAD_LEN as u16,
            ..r
        };
        assert_eq!(parse_repr(&ack), Err(ParseError::UnexpectedPayload));
        assert_eq!(
            parse_repr(&Repr { payload_len: 1, ..r }),
            Err(ParseError::UnexpectedPayload),
            "message bytes"
        );
        let piggyback_and_bytes = Repr {
            ack: true,
            payload_len: crate::ack::PIGGYBACK_LEN as u16 + 1,
            ..r
        };
        assert_eq!(
            parse_repr(&piggyback_and_bytes),
            Err(ParseError::UnexpectedPayload)
        );
        let second_of_two = Repr {
            frag_index: 1,
            frag_count: 2,
            ..r
        };
        assert_eq!(parse_repr(&second_of_two), Err(ParseError::BadFragment));
        // Without the flag the same header is an ordinary (empty) prepare.
        assert!(parse_repr(&Repr { recall: false, ..r }).is_ok());
    }

    proptest! {
        /// smoltcp contract: parse never panics on any bytes.
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let p = Packet::new_unchecked(&bytes[..]);
            let _ = Repr::parse(&p);
            if Packet::new_checked(&bytes[..]).is_ok() {
                let _ = p.payload();
            }
        }

        /// Headers that parse emit back to the same bytes.
        #[test]
        fn parse_emit_is_identity_on_valid_headers(mut bytes in proptest::collection::vec(any::<u8>(), HEADER_LEN..HEADER_LEN + 64)) {
            bytes[0] = (VERSION << 4) | (bytes[0] % 4);
            bytes[1] &= flags::KNOWN;
            if let Ok(repr) = Repr::parse(&Packet::new_unchecked(&bytes[..])) {
                let mut out = vec![0u8; repr.buffer_len()];
                repr.emit(&mut Packet::new_unchecked(&mut out[..]));
                prop_assert_eq!(&out[..HEADER_LEN], &bytes[..HEADER_LEN]);
            }
        }
    }
}
