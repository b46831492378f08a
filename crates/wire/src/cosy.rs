//! cosy's header (paper 003, sections 3.2-4, with the fields it leaves open defined;
//! docs/cosy.md, "Wire format").
//!
//! One fixed header serves every packet, because a switch rewrites the packet it is processing
//! (an rsvp records a hop, or becomes a reject). All big-endian:
//!
//! ```text
//!  0  u8   protocol COSY (high nibble) | kind (low nibble)
//!  1  u8   flags (ALONG_PATH, BLOCKED) | slots - 1 (high nibble): the virtual links per hop an
//!          rsvp asks for, 1 to 16
//!  2  u8   hops recorded (0..=HOPS_MAX)
//!  3  u8   hop pointer of a packet sent along the path: hops still to visit (the next one is
//!          hops[pointer - 1]); 0: the receiver is next
//!  4  u32  sender: the process that submitted the message
//!  8  u32  receiver
//! 12  u32  message id, chosen by the sender
//! 16  u32  nonce: the receiver's random number for this rsvp (paper 4: "random sequence number")
//! 20  u32  message bytes (request, rsvp) or the payload's offset in the message (data)
//! 24  8 x hop: u16 switch, u16 port, u16 virtual links (a bit each)
//! 72  payload (data only): the rest of the frame
//! ```
//!
//! A hop is recorded by a switch that reserved virtual links for the rsvp: `port` is the port
//! the rsvp left by, which is where the message's data will come in, and `vls` the virtual links
//! of that port, one bit each (paper 3.3: "a message may be allocated more than one virtual
//! link"). A sender trims every hop to the virtual links it uses, in the data it sends. The hops run from the receiver's ToR (hop 0) to the sender's, so a
//! packet sent along the path (data, the sender's complete, a reject going back) visits them
//! from the last to the first.
//!
//! [`Repr::parse`] never panics on any bytes; [`Repr::emit`] never panics into a buffer of at
//! least [`HEADER_LEN`] bytes plus the payload.

use crate::protocol::{COSY, first_byte};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 72;
/// Switches a path may have: enough for a three-layer fat tree (5) with room to spare.
pub const HOPS_MAX: usize = 8;
/// Virtual links a link may have: a hop records them as 16 bits.
pub const VIRTUAL_LINKS_MAX: u8 = 16;
/// Largest message a sender may submit (the offset field is 32 bits; the host library caps it
/// lower, by its configuration).
pub const MESSAGE_BYTES_MAX: u32 = u32::MAX;

const HOP_LEN: usize = 6;
const HOPS_AT: usize = 24;
const _: () = assert!(HOPS_AT + HOPS_MAX * HOP_LEN == HEADER_LEN);

/// Flag bits in byte 1.
pub mod flags {
    /// The packet follows the recorded hops toward the receiver (data, the sender's complete, a
    /// reject unreserving the links the rsvp reserved); without it, a packet is routed by its
    /// destination along any shortest path.
    pub const ALONG_PATH: u8 = 0x01;
    /// A reject made by a switch that found no free virtual link (not by the receiver).
    pub const BLOCKED: u8 = 0x02;
    pub const KNOWN: u8 = ALONG_PATH | BLOCKED | SLOTS;
    /// The high nibble: the virtual links per hop an rsvp asks for, minus one.
    pub const SLOTS: u8 = 0xf0;
}

/// What a packet is; the low nibble of byte 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Sender to receiver: may I send `size` bytes as message `msg`? Routed.
    Request = 1,
    /// Receiver to sender: yes; every switch on the way reserves a virtual link and records it.
    Rsvp = 2,
    /// No: from the receiver (busy) or a switch (no free virtual link) to the sender, routed;
    /// or, along the path, toward the receiver, unreserving (a switch that could not reserve,
    /// or a sender that is busy).
    Reject = 3,
    /// Along the path from the sender after the last data packet, unreserving; then from the
    /// receiver to the sender, routed: the message is complete.
    Complete = 4,
    /// Receiver to sender, routed, highest priority: data or a reject did not come when due.
    Failure = 5,
    /// Sender to receiver along the path: `size` is the payload's offset in the message.
    Data = 6,
}

impl Kind {
    pub fn from_nibble(n: u8) -> Option<Kind> {
        Some(match n {
            1 => Kind::Request,
            2 => Kind::Rsvp,
            3 => Kind::Reject,
            4 => Kind::Complete,
            5 => Kind::Failure,
            6 => Kind::Data,
            _ => return None,
        })
    }
}

/// Priority classes (docs/cosy.md, "Priorities"): lower is served first at every port.
pub mod class {
    pub const FAILURE: u8 = 0;
    pub const CONTROL: u8 = 1;
    /// Data and what must stay behind it on its path (the sender's complete).
    pub const DATA: u8 = 2;
    /// Everything that is not cosy's (1Pipe's best-effort service, other systems).
    pub const BEST_EFFORT: u8 = 3;
}

/// One switch's reservation, as recorded in an rsvp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Hop {
    pub switch: u16,
    /// The port the rsvp left by: the data's input port at this switch.
    pub port: u16,
    /// The virtual links of that port, a bit each (bit v: virtual link v).
    pub vls: u16,
}

impl Hop {
    /// Virtual links recorded.
    pub fn count(&self) -> u8 {
        self.vls.count_ones() as u8
    }

    /// The same hop with only its `n` lowest virtual links.
    pub fn first(self, n: u8) -> Hop {
        let mut vls = 0u16;
        let mut left = self.vls;
        for _ in 0..n {
            if left == 0 {
                break;
            }
            let lowest = left & left.wrapping_neg();
            vls |= lowest;
            left &= !lowest;
        }
        Hop { vls, ..self }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("frame of {0} bytes is shorter than the {HEADER_LEN}-byte cosy header")]
    Truncated(usize),
    #[error("not a cosy frame (protocol nibble {0})")]
    NotCosy(u8),
    #[error("unknown kind {0}")]
    UnknownKind(u8),
    #[error("unknown flags {0:#04x}")]
    UnknownFlags(u8),
    #[error("{0} hops recorded, at most {HOPS_MAX}")]
    TooManyHops(u8),
    #[error("hop pointer {pointer} past the {hops} hops recorded")]
    BadPointer { pointer: u8, hops: u8 },
    #[error("a {0:?} carries no payload")]
    UnexpectedPayload(Kind),
}

/// A cosy header, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub kind: Kind,
    pub along_path: bool,
    /// A switch made this reject: no free virtual link on the way (the receiver did not).
    pub blocked: bool,
    /// Virtual links per hop an rsvp asks for (1 to 16); each switch lowers it to what it
    /// reserved.
    pub slots: u8,
    hop_count: u8,
    hops: [Hop; HOPS_MAX],
    /// Hops still to visit along the path (see the module docs).
    pub pointer: u8,
    pub sender: u32,
    pub receiver: u32,
    pub msg: u32,
    pub nonce: u32,
    /// Message bytes (request, rsvp), or the payload's offset (data).
    pub size: u32,
}

impl Repr {
    /// A packet of `kind` with no hops.
    pub fn new(kind: Kind, sender: u32, receiver: u32, msg: u32) -> Repr {
        Repr {
            kind,
            along_path: false,
            blocked: false,
            slots: 1,
            hop_count: 0,
            hops: [Hop::default(); HOPS_MAX],
            pointer: 0,
            sender,
            receiver,
            msg,
            nonce: 0,
            size: 0,
        }
    }

    /// The hops recorded, from the receiver's ToR to the sender's.
    pub fn hops(&self) -> &[Hop] {
        &self.hops[..self.hop_count as usize]
    }

    /// Every hop keeps only its `n` lowest virtual links: what a sender that uses `n` sends
    /// its data along.
    pub fn trim_hops(&mut self, n: u8) {
        for hop in &mut self.hops[..self.hop_count as usize] {
            *hop = hop.first(n);
        }
    }

    /// Records a hop; false (and nothing changes) if the header is full.
    pub fn push_hop(&mut self, hop: Hop) -> bool {
        let Some(slot) = self.hops.get_mut(self.hop_count as usize) else {
            return false;
        };
        *slot = hop;
        self.hop_count += 1;
        true
    }

    /// The same path, to be followed from the sender's end: pointer at the last hop.
    pub fn start_along(&mut self) {
        self.along_path = true;
        self.pointer = self.hop_count;
    }

    /// The hop a packet along the path visits next, if any is left.
    pub fn next_hop(&self) -> Option<Hop> {
        self.pointer.checked_sub(1).map(|i| self.hops[i as usize])
    }

    /// The process a routed packet goes to: the receiver for a request, the sender otherwise.
    pub fn routed_to(&self) -> u32 {
        match self.kind {
            Kind::Request => self.receiver,
            _ => self.sender,
        }
    }

    /// The process that sends this packet onto the fabric (a switch may also turn an rsvp
    /// into a reject): what a ToR checks against the host behind the port.
    pub fn originator(&self) -> u32 {
        match (self.kind, self.along_path) {
            (Kind::Request | Kind::Data, _) | (Kind::Complete | Kind::Reject, true) => self.sender,
            _ => self.receiver,
        }
    }

    /// The priority class of this packet (docs/cosy.md, "Priorities").
    pub fn class(&self) -> u8 {
        match (self.kind, self.along_path) {
            (Kind::Failure, _) => class::FAILURE,
            (Kind::Data, _) | (Kind::Complete, true) => class::DATA,
            _ => class::CONTROL,
        }
    }

    /// Parses a frame into its header and payload. Never panics.
    pub fn parse(frame: &[u8]) -> Result<(Repr, &[u8]), ParseError> {
        if frame.len() < HEADER_LEN {
            return Err(ParseError::Truncated(frame.len()));
        }
        if frame[0] >> 4 != COSY {
            return Err(ParseError::NotCosy(frame[0] >> 4));
        }
        let kind = Kind::from_nibble(frame[0] & 0x0f).ok_or(ParseError::UnknownKind(frame[0] & 0x0f))?;
        let flag_bits = frame[1];
        if flag_bits & !flags::KNOWN != 0 {
            return Err(ParseError::UnknownFlags(flag_bits));
        }
        let (hop_count, pointer) = (frame[2], frame[3]);
        if hop_count as usize > HOPS_MAX {
            return Err(ParseError::TooManyHops(hop_count));
        }
        if pointer > hop_count {
            return Err(ParseError::BadPointer {
                pointer,
                hops: hop_count,
            });
        }
        let payload = &frame[HEADER_LEN..];
        if kind != Kind::Data && !payload.is_empty() {
            return Err(ParseError::UnexpectedPayload(kind));
        }
        let mut hops = [Hop::default(); HOPS_MAX];
        for (i, hop) in hops.iter_mut().enumerate().take(hop_count as usize) {
            let at = HOPS_AT + i * HOP_LEN;
            *hop = Hop {
                switch: u16_at(frame, at),
                port: u16_at(frame, at + 2),
                vls: u16_at(frame, at + 4),
            };
        }
        let repr = Repr {
            kind,
            along_path: flag_bits & flags::ALONG_PATH != 0,
            blocked: flag_bits & flags::BLOCKED != 0,
            slots: (flag_bits >> 4) + 1,
            hop_count,
            hops,
            pointer,
            sender: u32_at(frame, 4),
            receiver: u32_at(frame, 8),
            msg: u32_at(frame, 12),
            nonce: u32_at(frame, 16),
            size: u32_at(frame, 20),
        };
        Ok((repr, payload))
    }

    /// Writes the header into `buf[..HEADER_LEN]`; the payload, if any, is the caller's.
    /// Returns `HEADER_LEN`, or `None` if `buf` is too short.
    pub fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let out = buf.get_mut(..HEADER_LEN)?;
        out.fill(0);
        out[0] = first_byte(COSY, self.kind as u8);
        let slots = self.slots.clamp(1, VIRTUAL_LINKS_MAX) - 1;
        out[1] =
            (self.along_path as u8 * flags::ALONG_PATH) | (self.blocked as u8 * flags::BLOCKED) | slots << 4;
        out[2] = self.hop_count;
        out[3] = self.pointer;
        out[4..8].copy_from_slice(&self.sender.to_be_bytes());
        out[8..12].copy_from_slice(&self.receiver.to_be_bytes());
        out[12..16].copy_from_slice(&self.msg.to_be_bytes());
        out[16..20].copy_from_slice(&self.nonce.to_be_bytes());
        out[20..24].copy_from_slice(&self.size.to_be_bytes());
        for (i, hop) in self.hops().iter().enumerate() {
            let at = HOPS_AT + i * HOP_LEN;
            out[at..at + 2].copy_from_slice(&hop.switch.to_be_bytes());
            out[at + 2..at + 4].copy_from_slice(&hop.port.to_be_bytes());
            out[at + 4..at + 6].copy_from_slice(&hop.vls.to_be_bytes());
        }
        Some(HEADER_LEN)
    }
}

/// The priority class of any frame: cosy's by its header, everything else best effort. Never
/// panics; a malformed cosy frame is best effort (a switch drops it anyway).
pub fn class_of(frame: &[u8]) -> u8 {
    match Repr::parse(frame) {
        Ok((repr, _)) => repr.class(),
        Err(_) => class::BEST_EFFORT,
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsvp() -> Repr {
        let mut r = Repr::new(Kind::Rsvp, 3, 9, 77);
        r.nonce = 0xdead_beef;
        r.blocked = true;
        r.slots = 16;
        r.size = 128 * 1024;
        assert!(r.push_hop(Hop {
            switch: 1,
            port: 4,
            vls: 0b100
        }));
        assert!(r.push_hop(Hop {
            switch: 7,
            port: 0,
            vls: 0b1000
        }));
        r
    }

    #[test]
    fn a_header_round_trips() {
        let r = rsvp();
        let mut buf = [0u8; HEADER_LEN];
        assert_eq!(r.emit(&mut buf), Some(HEADER_LEN));
        let (back, payload) = Repr::parse(&buf).unwrap();
        assert_eq!(back, r);
        assert!(payload.is_empty());
        assert_eq!(back.hops().len(), 2);
    }

    #[test]
    fn a_path_is_followed_from_the_senders_end() {
        let mut r = rsvp();
        r.kind = Kind::Data;
        r.start_along();
        assert_eq!(r.next_hop().map(|h| h.switch), Some(7), "the sender's ToR first");
        r.pointer -= 1;
        assert_eq!(r.next_hop().map(|h| h.switch), Some(1));
        r.pointer -= 1;
        assert_eq!(r.next_hop(), None, "then the receiver");
    }

    #[test]
    fn a_sender_trims_every_hop_to_the_links_it_uses() {
        let mut r = rsvp();
        r.push_hop(Hop {
            switch: 2,
            port: 1,
            vls: 0b1011_0000,
        });
        r.trim_hops(2);
        let counts: Vec<u8> = r.hops().iter().map(Hop::count).collect();
        assert_eq!(counts, vec![1, 1, 2]);
        assert_eq!(r.hops()[2].vls, 0b0011_0000, "the lowest ones");
    }

    #[test]
    fn the_header_holds_at_most_hops_max_hops() {
        let mut r = Repr::new(Kind::Rsvp, 0, 1, 0);
        for _ in 0..HOPS_MAX {
            assert!(r.push_hop(Hop::default()));
        }
        assert!(!r.push_hop(Hop::default()));
    }

    #[test]
    fn classes_put_failures_first_and_keep_the_complete_behind_its_data() {
        let mut complete = Repr::new(Kind::Complete, 0, 1, 0);
        assert_eq!(complete.class(), class::CONTROL, "the receiver's complete");
        complete.start_along();
        assert_eq!(complete.class(), class::DATA, "the sender's, behind its data");
        assert_eq!(Repr::new(Kind::Failure, 0, 1, 0).class(), class::FAILURE);
        assert_eq!(class_of(&[0x20; 80]), class::BEST_EFFORT, "a 1Pipe frame");
    }

    #[test]
    fn malformed_headers_are_typed_errors() {
        let mut buf = [0u8; HEADER_LEN];
        rsvp().emit(&mut buf).unwrap();
        assert_eq!(Repr::parse(&buf[..10]), Err(ParseError::Truncated(10)));
        let mut bad = buf;
        bad[0] = first_byte(COSY, 0);
        assert_eq!(Repr::parse(&bad), Err(ParseError::UnknownKind(0)));
        let mut bad = buf;
        bad[2] = 9;
        assert_eq!(Repr::parse(&bad), Err(ParseError::TooManyHops(9)));
        let mut bad = buf;
        bad[3] = 3;
        assert!(matches!(Repr::parse(&bad), Err(ParseError::BadPointer { .. })));
        let mut long = buf.to_vec();
        long.push(0);
        assert_eq!(Repr::parse(&long), Err(ParseError::UnexpectedPayload(Kind::Rsvp)));
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = Repr::parse(&bytes);
            let _ = class_of(&bytes);
        }
    }
}
