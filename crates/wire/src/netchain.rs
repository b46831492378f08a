//! NetChain's header (paper 002, Fig. 2b; docs/netchain.md, "Wire format").
//!
//! One format carries the data plane's queries (read, write, delete, compare-and-swap: client to
//! chain and back) and the control plane's messages (the controller installing index entries,
//! copying state and setting the failover and recovery rules of paper sections 5.1 and 5.2).
//! The paper leaves widths and order open; ours, all big-endian:
//!
//! ```text
//!  0  u8   protocol NETCHAIN (high nibble) | opcode (low nibble)
//!  1  u8   flags (REPLY, SEQUENCED, VALUE_ABSENT, EXPECT_ABSENT)
//!  2  u8   status (of a reply)
//!  3  u8   SC: switches of the chain still to visit (the next one is chain[len - SC])
//!  4  u32  process that asked: the reply goes back to it (the paper keeps the client's src IP)
//!  8  u64  request id, chosen by that process
//! 16  u8   chain length (0..=CHAIN_MAX)        | rule kind
//! 17  u8   0                                   | 0
//! 18  u16  virtual group                       | virtual group (GROUP_ALL: every group)
//! 20  u64  version: session << 48 | sequence   | switch the rule is about
//!                                              | 22 u16 switch that replaces it | 24 u64 session
//!                                              | 32 u16 switch the rule is for
//! 28  16 B key
//! 44  u16  value length, 46 u16 expect length
//! 48  chain: u16 switch ids, then the value, then the expected value (CAS)
//! ```
//! A rule message ends at byte 34. Contract as [`crate::packet`]: [`Packet::new_checked`]
//! validates every length, after which no getter or setter panics; [`Repr::parse`] never panics
//! on any bytes; [`Repr::emit`] never panics into a buffer of [`Repr::buffer_len`] bytes.

use crate::protocol::{NETCHAIN, first_byte};

/// Keys are fixed-length (paper 4.1: "16-byte fixed keys").
pub const KEY_BYTES: usize = 16;
/// Longest chain a query can name: chains of f + 1 switches tolerate f failures.
pub const CHAIN_MAX: usize = 8;
/// Largest value the wire carries. A switch stores at most its slot size (configurable, 128 B
/// by default as the prototype's 8 stages of 16 B) and answers `ValueTooLarge` above it.
pub const VALUE_BYTES_MAX: usize = 4096;
/// Fixed part of a query.
pub const QUERY_HEADER_LEN: usize = 48;
/// Length of a rule message.
pub const RULE_LEN: usize = 34;
/// A rule's group that means every virtual group.
pub const GROUP_ALL: u16 = u16::MAX;
/// Bits of a version that count writes; the bits above are the session (paper 5.2: "the
/// messages are ordered by the lexicographical order of the (session number, sequence number)
/// tuple", which one u64 compares as is).
pub const SEQUENCE_BITS: u32 = 48;

mod field {
    use core::ops::Range;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const STATUS: usize = 2;
    pub const SC: usize = 3;
    pub const PROCESS: Range<usize> = 4..8;
    pub const REQUEST: Range<usize> = 8..16;
    pub const CHAIN_LEN: usize = 16;
    pub const RULE_KIND: usize = 16;
    pub const PAD: usize = 17;
    pub const GROUP: Range<usize> = 18..20;
    pub const VERSION: Range<usize> = 20..28;
    pub const RULE_SWITCH: Range<usize> = 20..22;
    pub const RULE_REPLACEMENT: Range<usize> = 22..24;
    pub const RULE_SESSION: Range<usize> = 24..32;
    pub const RULE_TARGET: Range<usize> = 32..34;
    pub const KEY: Range<usize> = 28..44;
    pub const VALUE_LEN: Range<usize> = 44..46;
    pub const EXPECT_LEN: Range<usize> = 46..48;
    pub const CHAIN: usize = 48;
}

/// Flag bits in byte 1.
pub mod flags {
    /// An answer: from the tail to the client, or from a switch to the controller.
    pub const REPLY: u8 = 0x01;
    /// The head has given this write its version (paper Algorithm 1, line 5); replicas after
    /// it accept it only if the version is above theirs.
    pub const SEQUENCED: u8 = 0x02;
    /// The value field means "no value": the key is absent (a read's answer) or is being
    /// deleted. Its length is then 0.
    pub const VALUE_ABSENT: u8 = 0x04;
    /// A compare-and-swap that expects the key to be absent.
    pub const EXPECT_ABSENT: u8 = 0x08;
    pub const KNOWN: u8 = REPLY | SEQUENCED | VALUE_ABSENT | EXPECT_ABSENT;
}

/// What a message asks for; the low nibble of byte 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Served by the tail (the chain list is reversed: tail first).
    Read = 1,
    Write = 2,
    /// A write of "absent" (paper 4.1: delete invalidates in the data plane).
    Delete = 3,
    /// Compare-and-swap, the lock primitive of paper 8.5: a write whose value the head chooses.
    Cas = 4,
    /// Client to controller: install `key` on its chain, then the client writes it.
    Insert = 5,
    /// Controller to switch: add `key` to the index table (an empty slot, version 0).
    Install = 8,
    /// Controller to switch: drop `key` from the index table, freeing its slot.
    Remove = 9,
    /// Controller to switch: the slot of `key`, answered with its value and version.
    StateRead = 10,
    /// Controller to switch: set the slot of `key` (installing it if needed) to the value and
    /// version carried, if that version is above the stored one.
    StateWrite = 11,
    /// Controller to switch: a failover or recovery rule ([`Rule`]).
    Rule = 12,
}

impl Opcode {
    pub fn from_nibble(n: u8) -> Option<Opcode> {
        Some(match n {
            1 => Opcode::Read,
            2 => Opcode::Write,
            3 => Opcode::Delete,
            4 => Opcode::Cas,
            5 => Opcode::Insert,
            8 => Opcode::Install,
            9 => Opcode::Remove,
            10 => Opcode::StateRead,
            11 => Opcode::StateWrite,
            12 => Opcode::Rule,
            _ => return None,
        })
    }

    /// A query of the data plane, which travels a chain.
    pub fn is_query(self) -> bool {
        matches!(self, Opcode::Read | Opcode::Write | Opcode::Delete | Opcode::Cas)
    }

    /// A query that changes the key: it goes head to tail and the head gives it a version.
    pub fn is_write(self) -> bool {
        matches!(self, Opcode::Write | Opcode::Delete | Opcode::Cas)
    }

    /// Sent by the controller to a switch.
    pub fn is_control(self) -> bool {
        matches!(
            self,
            Opcode::Install | Opcode::Remove | Opcode::StateRead | Opcode::StateWrite | Opcode::Rule
        )
    }
}

/// The outcome a reply carries; byte 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    Ok = 0,
    /// A compare-and-swap found another value (the reply carries it); a delete found the key
    /// absent already.
    CasFailed = 1,
    /// The key has no slot on the switch that answered: a read of it finds it absent, a write
    /// changes nothing (insert it first).
    UnknownKey = 2,
    /// The value is longer than the switch's slot.
    ValueTooLarge = 3,
    /// The index table is full: the key cannot be installed.
    TableFull = 4,
}

impl Status {
    pub fn from_byte(b: u8) -> Option<Status> {
        Some(match b {
            0 => Status::Ok,
            1 => Status::CasFailed,
            2 => Status::UnknownKey,
            3 => Status::ValueTooLarge,
            4 => Status::TableFull,
            _ => return None,
        })
    }
}

/// What a rule does to queries whose next chain hop is `switch` (paper Algorithms 2 and 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RuleKind {
    /// Fast failover (Algorithm 2): skip the failed switch; a query with no switch left after
    /// it becomes the reply (the failed switch was the tail).
    Skip = 1,
    /// Recovery phase 1 (Algorithm 3, line 4) for a head or middle switch: drop the group's
    /// writes; reads still pass.
    StopWrites = 2,
    /// Recovery phase 1 for a tail: drop the group's reads and writes.
    StopAll = 3,
    /// Recovery phase 2 (Algorithm 3, line 8): send the group's queries to the replacement.
    Replace = 4,
    /// Remove every rule about `switch` for the group.
    Clear = 5,
    /// Routing (the network controller's part, not NetChain's): carry no traffic through
    /// `switch`; a query still addressed to it goes to a neighbour, whose rules apply.
    RouteAround = 6,
    /// The head of the group's chains gives versions of at least `session << 48` (paper 5.2:
    /// a new head's session number).
    Session = 7,
}

impl RuleKind {
    pub fn from_byte(b: u8) -> Option<RuleKind> {
        Some(match b {
            1 => RuleKind::Skip,
            2 => RuleKind::StopWrites,
            3 => RuleKind::StopAll,
            4 => RuleKind::Replace,
            5 => RuleKind::Clear,
            6 => RuleKind::RouteAround,
            7 => RuleKind::Session,
            _ => return None,
        })
    }
}

/// Why bytes are not a NetChain message. Small and `Copy`: the switch counts it and drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("frame shorter than its header")]
    Truncated,
    #[error("not a NetChain frame")]
    NotNetchain,
    #[error("unknown opcode")]
    BadOpcode,
    #[error("unknown flag bits")]
    BadFlags,
    #[error("unknown status")]
    BadStatus,
    #[error("chain longer than {CHAIN_MAX} or SC past its length")]
    BadChain,
    #[error("value longer than {VALUE_BYTES_MAX} bytes, or a value where none may be")]
    BadValue,
    #[error("frame length disagrees with its fields")]
    BadLength,
    #[error("unknown rule kind")]
    BadRule,
}

/// A read-write view of a NetChain frame (smoltcp's shape).
#[derive(Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// A view whose every getter and setter is safe to call: the lengths agree with the
    /// fields, the opcode, flags, status and rule kind are known, and SC is within the chain.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, ParseError> {
        let p = Packet { buffer };
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        let first = *b.first().ok_or(ParseError::Truncated)?;
        if first >> 4 != NETCHAIN {
            return Err(ParseError::NotNetchain);
        }
        let op = Opcode::from_nibble(first & 0x0f).ok_or(ParseError::BadOpcode)?;
        if b.len() < RULE_LEN {
            return Err(ParseError::Truncated);
        }
        if b[field::FLAGS] & !flags::KNOWN != 0 {
            return Err(ParseError::BadFlags);
        }
        Status::from_byte(b[field::STATUS]).ok_or(ParseError::BadStatus)?;
        if b[field::PAD] != 0 {
            return Err(ParseError::BadLength);
        }
        if op == Opcode::Rule {
            if b[field::SC] != 0 {
                return Err(ParseError::BadChain);
            }
            RuleKind::from_byte(b[field::RULE_KIND]).ok_or(ParseError::BadRule)?;
            return if b.len() == RULE_LEN {
                Ok(())
            } else {
                Err(ParseError::BadLength)
            };
        }
        if b.len() < QUERY_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let chain = b[field::CHAIN_LEN] as usize;
        if chain > CHAIN_MAX || b[field::SC] as usize > chain {
            return Err(ParseError::BadChain);
        }
        let value = be16(&b[field::VALUE_LEN]) as usize;
        let expect = be16(&b[field::EXPECT_LEN]) as usize;
        if value > VALUE_BYTES_MAX || expect > VALUE_BYTES_MAX {
            return Err(ParseError::BadValue);
        }
        let f = b[field::FLAGS];
        if (f & flags::VALUE_ABSENT != 0 && value != 0) || (f & flags::EXPECT_ABSENT != 0 && expect != 0) {
            return Err(ParseError::BadValue);
        }
        if b.len() != QUERY_HEADER_LEN + 2 * chain + value + expect {
            return Err(ParseError::BadLength);
        }
        Ok(())
    }

    pub fn opcode(&self) -> Opcode {
        Opcode::from_nibble(self.buffer.as_ref()[field::OPCODE] & 0x0f).unwrap_or(Opcode::Read)
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn is_reply(&self) -> bool {
        self.flags() & flags::REPLY != 0
    }
    pub fn status(&self) -> Status {
        Status::from_byte(self.buffer.as_ref()[field::STATUS]).unwrap_or(Status::Ok)
    }
    pub fn sc(&self) -> u8 {
        self.buffer.as_ref()[field::SC]
    }
    pub fn process(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::PROCESS];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn request(&self) -> u64 {
        let mut r = [0u8; 8];
        r.copy_from_slice(&self.buffer.as_ref()[field::REQUEST]);
        u64::from_be_bytes(r)
    }
    pub fn group(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::GROUP])
    }
    /// Queries only.
    pub fn chain_len(&self) -> usize {
        self.buffer.as_ref()[field::CHAIN_LEN] as usize
    }
    /// Entry `i` of the chain; queries only, `i < chain_len()`.
    pub fn chain(&self, i: usize) -> u16 {
        let at = field::CHAIN + 2 * i.min(self.chain_len().saturating_sub(1));
        be16(&self.buffer.as_ref()[at..at + 2])
    }
    /// The whole chain; queries only.
    pub fn chain_list(&self) -> Chain {
        let mut c = Chain {
            len: self.chain_len() as u8,
            ..Chain::default()
        };
        for i in 0..c.len() {
            c.ids[i] = self.chain(i);
        }
        c
    }
    /// The switch the query goes to next; `None` when SC is 0 (a reply, or spent).
    pub fn next_hop(&self) -> Option<u16> {
        let sc = self.sc() as usize;
        (sc > 0).then(|| self.chain(self.chain_len() - sc))
    }
    pub fn version(&self) -> u64 {
        let mut r = [0u8; 8];
        r.copy_from_slice(&self.buffer.as_ref()[field::VERSION]);
        u64::from_be_bytes(r)
    }
    pub fn key(&self) -> [u8; KEY_BYTES] {
        let mut k = [0u8; KEY_BYTES];
        k.copy_from_slice(&self.buffer.as_ref()[field::KEY]);
        k
    }
    fn value_range(&self) -> core::ops::Range<usize> {
        let b = self.buffer.as_ref();
        let start = field::CHAIN + 2 * self.chain_len();
        start..start + be16(&b[field::VALUE_LEN]) as usize
    }
    /// `None` when the value is absent.
    pub fn value(&self) -> Option<&[u8]> {
        (self.flags() & flags::VALUE_ABSENT == 0).then(|| &self.buffer.as_ref()[self.value_range()])
    }
    pub fn expect(&self) -> Option<&[u8]> {
        let b = self.buffer.as_ref();
        let start = self.value_range().end;
        let len = be16(&b[field::EXPECT_LEN]) as usize;
        (self.flags() & flags::EXPECT_ABSENT == 0).then(|| &b[start..start + len])
    }
    pub fn rule_kind(&self) -> RuleKind {
        RuleKind::from_byte(self.buffer.as_ref()[field::RULE_KIND]).unwrap_or(RuleKind::Clear)
    }
    pub fn rule_switch(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::RULE_SWITCH])
    }
    pub fn rule_replacement(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::RULE_REPLACEMENT])
    }
    /// The switch that is to install the rule.
    pub fn rule_target(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::RULE_TARGET])
    }
    pub fn rule_session(&self) -> u64 {
        let mut r = [0u8; 8];
        r.copy_from_slice(&self.buffer.as_ref()[field::RULE_SESSION]);
        u64::from_be_bytes(r)
    }
}

/// The in-place rewrites a switch makes to a query it forwards.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_flags(&mut self, f: u8) {
        self.buffer.as_mut()[field::FLAGS] = f & flags::KNOWN;
    }
    pub fn set_status(&mut self, s: Status) {
        self.buffer.as_mut()[field::STATUS] = s as u8;
    }
    /// Keeps SC within the chain.
    pub fn set_sc(&mut self, sc: u8) {
        let len = self.chain_len() as u8;
        self.buffer.as_mut()[field::SC] = sc.min(len);
    }
    pub fn set_version(&mut self, v: u64) {
        self.buffer.as_mut()[field::VERSION].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets entry `i < chain_len()` of the chain (a recovery rule's replacement).
    pub fn set_chain(&mut self, i: usize, switch: u16) {
        if i < self.chain_len() {
            let at = field::CHAIN + 2 * i;
            self.buffer.as_mut()[at..at + 2].copy_from_slice(&switch.to_be_bytes());
        }
    }
}

/// A query of the data plane or a control message other than a rule: the header fields and
/// borrowed value bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query<'a> {
    pub opcode: Opcode,
    pub flags: u8,
    pub status: Status,
    pub sc: u8,
    pub process: u32,
    pub request: u64,
    pub chain: Chain,
    pub group: u16,
    pub version: u64,
    pub key: [u8; KEY_BYTES],
    /// `None`: absent (flag VALUE_ABSENT).
    pub value: Option<&'a [u8]>,
    /// `None`: expect absent (flag EXPECT_ABSENT); ignored unless the opcode is Cas.
    pub expect: Option<&'a [u8]>,
}

/// A chain of switch ids, at most [`CHAIN_MAX`], kept inline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Chain {
    ids: [u16; CHAIN_MAX],
    len: u8,
}

impl Chain {
    /// `None` if longer than [`CHAIN_MAX`].
    pub fn new(ids: &[u16]) -> Option<Chain> {
        if ids.len() > CHAIN_MAX {
            return None;
        }
        let mut c = Chain {
            ids: [0; CHAIN_MAX],
            len: ids.len() as u8,
        };
        c.ids[..ids.len()].copy_from_slice(ids);
        Some(c)
    }
    pub fn as_slice(&self) -> &[u16] {
        &self.ids[..self.len as usize]
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The chain with entry `i` (if there is one) set to `id`.
    pub fn replaced(&self, i: usize, id: u16) -> Chain {
        let mut c = *self;
        if i < c.len() {
            c.ids[i] = id;
        }
        c
    }
    /// The chain in the order reads travel it: tail first (paper 4.2).
    pub fn reversed(&self) -> Chain {
        let mut c = *self;
        c.ids[..self.len as usize].reverse();
        c
    }
}

/// A rule message (opcode Rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub flags: u8,
    pub status: Status,
    pub process: u32,
    pub request: u64,
    /// The switch that is to install the rule.
    pub target: u16,
    pub kind: RuleKind,
    pub group: u16,
    pub switch: u16,
    pub replacement: u16,
    pub session: u64,
}

/// A parsed NetChain message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr<'a> {
    Query(Query<'a>),
    Rule(Rule),
}

impl<'a> Repr<'a> {
    /// Never panics, whatever the bytes.
    pub fn parse(bytes: &'a [u8]) -> Result<Repr<'a>, ParseError> {
        let p = Packet::new_checked(bytes)?;
        if p.opcode() == Opcode::Rule {
            return Ok(Repr::Rule(Rule {
                flags: p.flags(),
                status: p.status(),
                process: p.process(),
                request: p.request(),
                target: p.rule_target(),
                kind: p.rule_kind(),
                group: p.group(),
                switch: p.rule_switch(),
                replacement: p.rule_replacement(),
                session: p.rule_session(),
            }));
        }
        let value_range = p.value_range();
        let absent = p.flags() & flags::VALUE_ABSENT != 0;
        let expect_absent = p.flags() & flags::EXPECT_ABSENT != 0;
        let expect_len = be16(&bytes[field::EXPECT_LEN]) as usize;
        Ok(Repr::Query(Query {
            opcode: p.opcode(),
            flags: p.flags() & !(flags::VALUE_ABSENT | flags::EXPECT_ABSENT),
            status: p.status(),
            sc: p.sc(),
            process: p.process(),
            request: p.request(),
            chain: p.chain_list(),
            group: p.group(),
            version: p.version(),
            key: p.key(),
            value: (!absent).then(|| &bytes[value_range.clone()]),
            expect: (!expect_absent).then(|| &bytes[value_range.end..value_range.end + expect_len]),
        }))
    }

    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Rule(_) => RULE_LEN,
            Repr::Query(q) => {
                QUERY_HEADER_LEN
                    + 2 * q.chain.len()
                    + q.value.map_or(0, <[u8]>::len)
                    + q.expect.map_or(0, <[u8]>::len)
            }
        }
    }

    /// Writes the message into `buf[..buffer_len()]` and returns its length; `None` if `buf`
    /// is too short or a value is longer than [`VALUE_BYTES_MAX`].
    pub fn emit(&self, buf: &mut [u8]) -> Option<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len)?;
        b.fill(0);
        match self {
            Repr::Rule(r) => {
                b[field::OPCODE] = first_byte(NETCHAIN, Opcode::Rule as u8);
                b[field::FLAGS] = r.flags & flags::KNOWN;
                b[field::STATUS] = r.status as u8;
                b[field::PROCESS].copy_from_slice(&r.process.to_be_bytes());
                b[field::REQUEST].copy_from_slice(&r.request.to_be_bytes());
                b[field::RULE_KIND] = r.kind as u8;
                b[field::GROUP].copy_from_slice(&r.group.to_be_bytes());
                b[field::RULE_SWITCH].copy_from_slice(&r.switch.to_be_bytes());
                b[field::RULE_REPLACEMENT].copy_from_slice(&r.replacement.to_be_bytes());
                b[field::RULE_SESSION].copy_from_slice(&r.session.to_be_bytes());
                b[field::RULE_TARGET].copy_from_slice(&r.target.to_be_bytes());
            }
            Repr::Query(q) => {
                let value = q.value.unwrap_or(&[]);
                let expect = q.expect.unwrap_or(&[]);
                if value.len() > VALUE_BYTES_MAX || expect.len() > VALUE_BYTES_MAX {
                    return None;
                }
                let mut f = q.flags & (flags::REPLY | flags::SEQUENCED);
                if q.value.is_none() {
                    f |= flags::VALUE_ABSENT;
                }
                if q.expect.is_none() {
                    f |= flags::EXPECT_ABSENT;
                }
                b[field::OPCODE] = first_byte(NETCHAIN, q.opcode as u8);
                b[field::FLAGS] = f;
                b[field::STATUS] = q.status as u8;
                b[field::SC] = q.sc.min(q.chain.len() as u8);
                b[field::PROCESS].copy_from_slice(&q.process.to_be_bytes());
                b[field::REQUEST].copy_from_slice(&q.request.to_be_bytes());
                b[field::CHAIN_LEN] = q.chain.len() as u8;
                b[field::GROUP].copy_from_slice(&q.group.to_be_bytes());
                b[field::VERSION].copy_from_slice(&q.version.to_be_bytes());
                b[field::KEY].copy_from_slice(&q.key);
                b[field::VALUE_LEN].copy_from_slice(&(value.len() as u16).to_be_bytes());
                b[field::EXPECT_LEN].copy_from_slice(&(expect.len() as u16).to_be_bytes());
                let mut at = field::CHAIN;
                for id in q.chain.as_slice() {
                    b[at..at + 2].copy_from_slice(&id.to_be_bytes());
                    at += 2;
                }
                b[at..at + value.len()].copy_from_slice(value);
                at += value.len();
                b[at..at + expect.len()].copy_from_slice(expect);
            }
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_query() -> Query<'static> {
        Query {
            opcode: Opcode::Cas,
            flags: flags::SEQUENCED,
            status: Status::Ok,
            sc: 2,
            process: 7,
            request: 0x0102_0304_0506_0708,
            chain: Chain::new(&[3, 1, 2]).unwrap(),
            group: 9,
            version: (1 << SEQUENCE_BITS) | 5,
            key: *b"0123456789abcdef",
            value: Some(b"new"),
            expect: None,
        }
    }

    /// Golden bytes: the layout of the module comment, field by field.
    #[test]
    fn a_query_has_the_documented_layout() {
        let q = write_query();
        let mut buf = [0u8; 64];
        let len = Repr::Query(q).emit(&mut buf).unwrap();
        assert_eq!(len, 48 + 6 + 3);
        assert_eq!(buf[0], 0x84, "NETCHAIN << 4 | Cas");
        assert_eq!(buf[1], flags::SEQUENCED | flags::EXPECT_ABSENT);
        assert_eq!(buf[3], 2);
        assert_eq!(&buf[4..8], &[0, 0, 0, 7]);
        assert_eq!(&buf[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf[16], 3);
        assert_eq!(&buf[18..20], &[0, 9]);
        assert_eq!(&buf[20..28], &[0, 1, 0, 0, 0, 0, 0, 5]);
        assert_eq!(&buf[28..44], b"0123456789abcdef");
        assert_eq!(&buf[44..48], &[0, 3, 0, 0]);
        assert_eq!(&buf[48..54], &[0, 3, 0, 1, 0, 2]);
        assert_eq!(&buf[54..57], b"new");
        let p = Packet::new_checked(&buf[..len]).unwrap();
        assert_eq!(p.next_hop(), Some(1), "SC 2 of 3: entry 1");
        assert_eq!(Repr::parse(&buf[..len]).unwrap(), Repr::Query(q));
    }

    #[test]
    fn a_rule_round_trips_and_is_fixed_length() {
        let r = Rule {
            flags: 0,
            status: Status::Ok,
            process: 1,
            request: 2,
            target: 3,
            kind: RuleKind::Replace,
            group: GROUP_ALL,
            switch: 4,
            replacement: 5,
            session: 6,
        };
        let mut buf = [0u8; RULE_LEN];
        assert_eq!(Repr::Rule(r).emit(&mut buf), Some(RULE_LEN));
        assert_eq!(Repr::parse(&buf).unwrap(), Repr::Rule(r));
        let mut longer = [0u8; RULE_LEN + 1];
        longer[..RULE_LEN].copy_from_slice(&buf);
        assert_eq!(Repr::parse(&longer), Err(ParseError::BadLength));
    }

    #[test]
    fn malformed_frames_are_typed_errors() {
        let mut buf = [0u8; 64];
        let len = Repr::Query(write_query()).emit(&mut buf).unwrap();
        let good = &buf[..len];
        assert_eq!(Repr::parse(&good[..len - 1]), Err(ParseError::BadLength));
        assert_eq!(Repr::parse(&good[..20]), Err(ParseError::Truncated));
        assert_eq!(Repr::parse(&[]), Err(ParseError::Truncated));
        let mut bad = good.to_vec();
        bad[0] = 0x21;
        assert_eq!(Repr::parse(&bad), Err(ParseError::NotNetchain));
        let mut bad = good.to_vec();
        bad[0] = 0x8f;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadOpcode));
        let mut bad = good.to_vec();
        bad[3] = 4;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadChain));
        let mut bad = good.to_vec();
        bad[16] = 9;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadChain));
        let mut bad = good.to_vec();
        bad[1] |= 0x80;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadFlags));
        let mut bad = good.to_vec();
        bad[1] |= flags::VALUE_ABSENT;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadValue));
        let mut bad = good.to_vec();
        bad[2] = 99;
        assert_eq!(Repr::parse(&bad), Err(ParseError::BadStatus));
    }

    #[test]
    fn in_place_rewrites_change_only_their_field() {
        let mut buf = [0u8; 64];
        let len = Repr::Query(write_query()).emit(&mut buf).unwrap();
        let mut p = Packet::new_checked(&mut buf[..len]).unwrap();
        p.set_chain(1, 6);
        p.set_sc(1);
        p.set_version(11);
        p.set_sc(200);
        assert_eq!(p.sc(), 3, "SC stays within the chain");
        p.set_sc(1);
        let Repr::Query(q) = Repr::parse(&buf[..len]).unwrap() else {
            panic!("a query")
        };
        assert_eq!(q.chain.as_slice(), &[3, 6, 2]);
        assert_eq!((q.sc, q.version, q.value), (1, 11, Some(&b"new"[..])));
    }

    proptest! {
        /// parse never panics, and what it accepts emits back to the same bytes.
        #[test]
        fn parse_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(r) = Repr::parse(&bytes) {
                let mut out = vec![0u8; r.buffer_len()];
                prop_assert_eq!(r.emit(&mut out), Some(bytes.len()));
                prop_assert_eq!(out, bytes);
            }
        }

        #[test]
        fn queries_round_trip(
            op in 1u8..5, sc in 0u8..4, chain in proptest::collection::vec(any::<u16>(), 3..4),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            expect in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            version in any::<u64>(), key in any::<[u8; 16]>(),
        ) {
            let q = Query {
                opcode: Opcode::from_nibble(op).unwrap(),
                flags: flags::REPLY,
                status: Status::CasFailed,
                sc: sc.min(3),
                process: 1,
                request: 2,
                chain: Chain::new(&chain).unwrap(),
                group: 3,
                version,
                key,
                value: value.as_deref(),
                expect: expect.as_deref(),
            };
            let mut out = vec![0u8; Repr::Query(q).buffer_len()];
            Repr::Query(q).emit(&mut out).unwrap();
            prop_assert_eq!(Repr::parse(&out).unwrap(), Repr::Query(q));
        }
    }
}
