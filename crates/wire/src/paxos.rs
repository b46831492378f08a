//! In-network Paxos's header (thesis 004, Fig. 5.2, with the fields it leaves open defined; and
//! Partitioned Paxos's `pid` and TRIM, chapter 6; docs/paxos.md, "Wire format").
//!
//! As in the thesis, one header is the union of every message's fields, because a switch can
//! only rewrite the packet it is processing (a request becomes a 2A at the coordinator, a 2A a
//! 2B at an acceptor). All big-endian:
//!
//! ```text
//!  0  u8   protocol PAXOS (high nibble) | message type (low nibble)
//!  1  u8   flags (of a 1B: RANGE, REFUSED, OUT_OF_WINDOW)
//!  2  u16  pid: the partition, one instance space each
//!  4  u32  from: the sender's address (a process, or SWITCH_BIT | switch id)
//!  8  u32  to: the receiver's address
//! 12  u16  swid: the acceptor that voted (1B, 2B), or the learner that trims (TRIM)
//! 14  u16  value length
//! 16  u64  inst
//! 24  u32  rnd
//! 28  u32  vrnd
//! 32  u64  a  } meaning by message type, see [`MsgType`]
//! 40  u64  b  }
//! 48  value
//! ```
//! Addresses are unicast: a role that "multicasts" (the coordinator's 2A, an acceptor's 2B)
//! sends one copy per receiver, so that every switch forwards by `to` alone.
//!
//! [`Message::parse`] never panics on any bytes; [`Message::emit`] never panics into a buffer of
//! [`Message::buffer_len`] bytes.

use crate::protocol::{PAXOS, first_byte};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 48;
/// Largest value the wire carries. Acceptors store at most their slot size (configurable).
pub const VALUE_BYTES_MAX: usize = 4096;
/// The bit of an address that says it names a switch.
pub const SWITCH_BIT: u32 = 0x8000_0000;

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PID: Range<usize> = 2..4;
    pub const FROM: Range<usize> = 4..8;
    pub const TO: Range<usize> = 8..12;
    pub const SWID: Range<usize> = 12..14;
    pub const VALUE_LEN: Range<usize> = 14..16;
    pub const INST: Range<usize> = 16..24;
    pub const RND: Range<usize> = 24..28;
    pub const VRND: Range<usize> = 28..32;
    pub const A: Range<usize> = 32..40;
    pub const B: Range<usize> = 40..48;
}

/// Flag bits in byte 1; only a 1B has any.
pub mod flags {
    /// The summary of an acceptor's answer to a ranged 1A: `inst` and `a` repeat the range,
    /// `b` counts the votes (1Bs with values) it sent before this message.
    pub const RANGE: u8 = 0x01;
    /// The 1A was refused: some instance of the range has promised a round at least `rnd`
    /// (which this 1B carries).
    pub const REFUSED: u8 = 0x02;
    /// The 1A's range is not within the acceptor's window; `b` is the acceptor's floor (every
    /// instance below it is decided and trimmed).
    pub const OUT_OF_WINDOW: u8 = 0x04;
    pub const KNOWN: u8 = RANGE | REFUSED | OUT_OF_WINDOW;
}

/// What a message is; the low nibble of byte 0. What `a`, `b` and the value mean for each:
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// Proposer to coordinator: propose `value`. `a`: the request id, `b`: the client (both
    /// the proposer's, carried back in the [`MsgType::Reply`]).
    Request = 1,
    /// Coordinator to acceptor: Phase 1A for instances `inst .. inst + a` at round `rnd`.
    P1a = 2,
    /// Acceptor to coordinator: a vote found by a 1A (`inst`, `vrnd`, `value`, promised `rnd`),
    /// or, with a flag, the summary, refusal or out-of-window answer of the ranged 1A.
    P1b = 3,
    /// Coordinator to acceptor: Phase 2A, accept `value` for `inst` at round `rnd`.
    P2a = 4,
    /// Acceptor to learner: Phase 2B, the acceptor `swid` voted `value` for `inst` at `rnd`.
    P2b = 5,
    /// Learner to acceptors and coordinators: learner `swid` has applied every instance below
    /// `inst` of partition `pid`.
    Trim = 6,
    /// Replica to proposer: the answer (`value`) to request `a` of client `b`, decided as
    /// instance `inst`.
    Reply = 7,
    /// Replica to replica: send me the decided values from `inst` on, at most `a` of them.
    Catchup = 8,
    /// Replica to replica: the decided value of `inst` (an answer to a catch-up).
    Decided = 9,
    /// Learner to coordinator: instance `inst` has been undecided too long; run it again.
    Reinit = 10,
}

impl MsgType {
    pub fn from_nibble(n: u8) -> Option<MsgType> {
        Some(match n {
            1 => MsgType::Request,
            2 => MsgType::P1a,
            3 => MsgType::P1b,
            4 => MsgType::P2a,
            5 => MsgType::P2b,
            6 => MsgType::Trim,
            7 => MsgType::Reply,
            8 => MsgType::Catchup,
            9 => MsgType::Decided,
            10 => MsgType::Reinit,
            _ => return None,
        })
    }

    /// Sent by a coordinator (switch or process).
    pub fn is_from_coordinator(self) -> bool {
        matches!(self, MsgType::P1a | MsgType::P2a)
    }

    /// Sent by an acceptor (switch or process).
    pub fn is_from_acceptor(self) -> bool {
        matches!(self, MsgType::P1b | MsgType::P2b)
    }
}

/// A participant's address: a host process or a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Addr {
    Process(u32),
    Switch(u16),
}

impl Addr {
    pub fn to_wire(self) -> u32 {
        match self {
            Addr::Process(p) => p & !SWITCH_BIT,
            Addr::Switch(s) => SWITCH_BIT | s as u32,
        }
    }

    /// `None` for a switch id past 16 bits or a process id with the switch bit.
    pub fn from_wire(w: u32) -> Option<Addr> {
        if w & SWITCH_BIT == 0 {
            Some(Addr::Process(w))
        } else {
            u16::try_from(w & !SWITCH_BIT).ok().map(Addr::Switch)
        }
    }
}

impl core::fmt::Display for Addr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Addr::Process(p) => write!(f, "process {p}"),
            Addr::Switch(s) => write!(f, "switch {s}"),
        }
    }
}

/// Why bytes are not a Paxos message. Small and `Copy`: a node counts it and drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("frame shorter than its header")]
    Truncated,
    #[error("not a Paxos frame")]
    NotPaxos,
    #[error("unknown message type")]
    BadType,
    #[error("unknown flag bits, or flags on a message other than a 1B")]
    BadFlags,
    #[error("an address that names no process or switch")]
    BadAddr,
    #[error("value longer than {VALUE_BYTES_MAX} bytes")]
    BadValue,
    #[error("frame length disagrees with its value length")]
    BadLength,
}

/// A Paxos message, parsed; the value borrows from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub msgtype: MsgType,
    pub flags: u8,
    pub pid: u16,
    pub from: Addr,
    pub to: Addr,
    pub swid: u16,
    pub inst: u64,
    pub rnd: u32,
    pub vrnd: u32,
    pub a: u64,
    pub b: u64,
    pub value: &'a [u8],
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut r = [0u8; 8];
    r.copy_from_slice(&b[..8]);
    u64::from_be_bytes(r)
}

impl<'a> Message<'a> {
    /// A message of `msgtype` with every other field zero and no value.
    pub fn new(msgtype: MsgType, pid: u16, from: Addr, to: Addr) -> Message<'static> {
        Message {
            msgtype,
            flags: 0,
            pid,
            from,
            to,
            swid: 0,
            inst: 0,
            rnd: 0,
            vrnd: 0,
            a: 0,
            b: 0,
            value: &[],
        }
    }

    /// Parses and validates every field; never panics.
    pub fn parse(frame: &'a [u8]) -> Result<Message<'a>, ParseError> {
        let first = *frame.first().ok_or(ParseError::Truncated)?;
        if first >> 4 != PAXOS {
            return Err(ParseError::NotPaxos);
        }
        let msgtype = MsgType::from_nibble(first & 0x0f).ok_or(ParseError::BadType)?;
        if frame.len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let flags = frame[field::FLAGS];
        if flags & !flags::KNOWN != 0 || (flags != 0 && msgtype != MsgType::P1b) {
            return Err(ParseError::BadFlags);
        }
        let len = be16(&frame[field::VALUE_LEN]) as usize;
        if len > VALUE_BYTES_MAX {
            return Err(ParseError::BadValue);
        }
        if frame.len() != HEADER_LEN + len {
            return Err(ParseError::BadLength);
        }
        let addr = |r: core::ops::Range<usize>| Addr::from_wire(be32(&frame[r])).ok_or(ParseError::BadAddr);
        Ok(Message {
            msgtype,
            flags,
            pid: be16(&frame[field::PID]),
            from: addr(field::FROM)?,
            to: addr(field::TO)?,
            swid: be16(&frame[field::SWID]),
            inst: be64(&frame[field::INST]),
            rnd: be32(&frame[field::RND]),
            vrnd: be32(&frame[field::VRND]),
            a: be64(&frame[field::A]),
            b: be64(&frame[field::B]),
            value: &frame[HEADER_LEN..],
        })
    }

    /// The receiver of a frame, read without parsing the rest (what a transit switch needs).
    pub fn peek_to(frame: &[u8]) -> Option<Addr> {
        frame.get(field::TO).and_then(|b| Addr::from_wire(be32(b)))
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.value.len()
    }

    /// Writes the message into `buf` (at least [`Message::buffer_len`] bytes, else `None`);
    /// returns its length. A value past [`VALUE_BYTES_MAX`] is refused too.
    pub fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        if self.value.len() > VALUE_BYTES_MAX || buf.len() < len {
            return None;
        }
        let b = &mut buf[..len];
        b[field::TYPE] = first_byte(PAXOS, self.msgtype as u8);
        b[field::FLAGS] = self.flags & flags::KNOWN;
        b[field::PID].copy_from_slice(&self.pid.to_be_bytes());
        b[field::FROM].copy_from_slice(&self.from.to_wire().to_be_bytes());
        b[field::TO].copy_from_slice(&self.to.to_wire().to_be_bytes());
        b[field::SWID].copy_from_slice(&self.swid.to_be_bytes());
        b[field::VALUE_LEN].copy_from_slice(&(self.value.len() as u16).to_be_bytes());
        b[field::INST].copy_from_slice(&self.inst.to_be_bytes());
        b[field::RND].copy_from_slice(&self.rnd.to_be_bytes());
        b[field::VRND].copy_from_slice(&self.vrnd.to_be_bytes());
        b[field::A].copy_from_slice(&self.a.to_be_bytes());
        b[field::B].copy_from_slice(&self.b.to_be_bytes());
        b[HEADER_LEN..].copy_from_slice(self.value);
        Some(len)
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.buffer_len()];
        let n = self.emit(&mut v);
        debug_assert_eq!(n, Some(v.len()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Message<'static> {
        Message {
            msgtype: MsgType::P2b,
            flags: 0,
            pid: 3,
            from: Addr::Switch(2),
            to: Addr::Process(7),
            swid: 1,
            inst: 0x0102_0304_0506_0708,
            rnd: 0x0000_0101,
            vrnd: 0x0000_0101,
            a: 9,
            b: 10,
            value: b"hi",
        }
    }

    /// The bytes are the documented layout, so other implementations can interoperate.
    #[test]
    fn golden_bytes() {
        let bytes = sample().to_vec();
        let expected: [u8; 50] = [
            0x95, 0, 0, 3, // PAXOS | P2B, flags, pid
            0x80, 0, 0, 2, // from switch 2
            0, 0, 0, 7, // to process 7
            0, 1, 0, 2, // swid, value length
            1, 2, 3, 4, 5, 6, 7, 8, // inst
            0, 0, 1, 1, 0, 0, 1, 1, // rnd, vrnd
            0, 0, 0, 0, 0, 0, 0, 9, // a
            0, 0, 0, 0, 0, 0, 0, 10, // b
            b'h', b'i',
        ];
        assert_eq!(bytes, expected);
        assert_eq!(Message::parse(&bytes), Ok(sample()));
        assert_eq!(Message::peek_to(&bytes), Some(Addr::Process(7)));
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        let good = sample().to_vec();
        assert_eq!(Message::parse(&[]), Err(ParseError::Truncated));
        assert_eq!(Message::parse(&good[..47]), Err(ParseError::Truncated));
        assert_eq!(Message::parse(&good[..49]), Err(ParseError::BadLength));
        let mut bad = good.clone();
        bad[0] = 0x85;
        assert_eq!(Message::parse(&bad), Err(ParseError::NotPaxos));
        bad[0] = 0x9f;
        assert_eq!(Message::parse(&bad), Err(ParseError::BadType));
        let mut bad = good.clone();
        bad[1] = flags::RANGE; // flags on a 2B
        assert_eq!(Message::parse(&bad), Err(ParseError::BadFlags));
        let mut bad = good.clone();
        bad[4..8].copy_from_slice(&(SWITCH_BIT | 0x1_0000).to_be_bytes());
        assert_eq!(Message::parse(&bad), Err(ParseError::BadAddr));
        let mut bad = good;
        bad[14..16].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(Message::parse(&bad), Err(ParseError::BadValue));
    }

    fn any_addr() -> impl Strategy<Value = Addr> {
        prop_oneof![
            (0u32..SWITCH_BIT).prop_map(Addr::Process),
            any::<u16>().prop_map(Addr::Switch)
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = Message::parse(&bytes);
            let _ = Message::peek_to(&bytes);
        }

        #[test]
        fn emit_then_parse_is_identity(
            t in 1u8..=10, f in 0u8..8, pid: u16, from in any_addr(), to in any_addr(), swid: u16,
            inst: u64, rnd: u32, vrnd: u32, a: u64, b: u64,
            value in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let msgtype = MsgType::from_nibble(t).unwrap();
            let flags = if msgtype == MsgType::P1b { f } else { 0 };
            let m = Message { msgtype, flags, pid, from, to, swid, inst, rnd, vrnd, a, b, value: &value };
            let bytes = m.to_vec();
            prop_assert_eq!(Message::parse(&bytes), Ok(m));
        }
    }
}
