//! What a udp-runtime datagram carries: many fabric frames packed behind one small header, so
//! that one syscall moves many 1Pipe packets (a syscall here costs about as much as handling
//! twenty packets), the credit that keeps the link lossless, and a tag that authenticates it
//! all (see `auth`).
//!
//! ```text
//! 0..2    magic "OP"
//! 2       version (3)
//! 3       flags: 1 = carries frames (and takes a sequence number), 2 = the limit is valid;
//!         neither: an announcement (the sender's epoch, nothing else)
//! 4       key id: the key of the tag at the end; 0 = no tag (authentication off)
//! 5..8    zero
//! 8..16   epoch: the sender's run (its start, ns since 1970), u64 little-endian
//! 16..24  peer epoch: the receiver's run as the sender last heard of it (0: not yet)
//! 24..32  sent at: the sender's clock when it sent the datagram (ns since 1970)
//! 32..36  sequence number of the datagram on its link, u32 little-endian
//! 36..40  limit: the reverse link's credit, the first sequence number its sender may not
//!         send yet (see `link`), u32 little-endian
//! 40..    frames, each [len: u16 little-endian][len bytes]
//! last 16 tag (key id not 0): keyed BLAKE3 of everything before it and of the address the
//!         datagram is sent to
//! ```
//!
//! The sequence number keeps links FIFO, which barrier aggregation needs (paper 4.1): UDP may
//! reorder across a real network, so a datagram older than one already taken is dropped and
//! counted, turning reordering into loss, which best effort tolerates and reliable repairs.
//! The epochs say which runs of the two ends a datagram belongs to: a datagram of an earlier
//! run of its sender, or meant for an earlier run of its receiver, is dropped and counted, so
//! a replayed datagram changes nothing (docs/udp.md, "Authentication"). A sender that has not
//! heard from its receiver yet names no run of it; its datagram counts only if it was sent
//! after the receiver started (`link::meant_for`).
//! A datagram with only the limit flag is a credit: it carries no frames and no sequence.

use super::auth::{Auth, TAG_BYTES};
use std::net::SocketAddr;

pub const HEADER_LEN: usize = 40;
/// Bytes a datagram may need past its frames: the tag. Kept free whether or not the fabric
/// authenticates, so that the largest frame is the same either way.
pub const TRAILER_LEN: usize = TAG_BYTES;
const MAGIC: [u8; 2] = *b"OP";
const VERSION: u8 = 3;
const FLAG_FRAMES: u8 = 1;
const FLAG_LIMIT: u8 = 2;
/// Each frame in a datagram follows its length, two bytes.
pub const FRAME_LEN_BYTES: usize = 2;
/// The largest datagram without frames: a credit or an announcement, with its tag.
pub const CONTROL_LEN_MAX: usize = HEADER_LEN + TRAILER_LEN;

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramError {
    /// Shorter than the header, another protocol, another version, unknown flags, or a frame
    /// running past the end.
    Malformed,
    /// No tag where the fabric requires one, or a key id this node does not hold.
    Unauthenticated,
    /// A tag that does not match: forged, damaged, or sent to another address.
    BadTag,
}

/// What a datagram's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender's run.
    pub epoch: u64,
    /// The receiver's run as the sender knows it (0: it has not heard from the receiver).
    pub peer_epoch: u64,
    /// The sender's clock when it sent the datagram, ns since 1970.
    pub sent_at_ns: u64,
    /// Sequence number of a datagram that carries frames; `None` for a credit.
    pub seq: Option<u32>,
    /// The sender's credit for the reverse link, if it has one to give yet.
    pub limit: Option<u32>,
}

/// A datagram without frames (a credit, or an announcement if `limit` is `None`), signed for
/// `to`: the buffer and its length.
pub fn control(header: &Header, auth: &Auth, to: SocketAddr) -> ([u8; CONTROL_LEN_MAX], usize) {
    debug_assert!(header.seq.is_none());
    let mut d = [0u8; CONTROL_LEN_MAX];
    let flags = if header.limit.is_some() { FLAG_LIMIT } else { 0 };
    let len = sign(&mut d, HEADER_LEN, flags, header, auth, to);
    (d, len)
}

/// Writes the header into `d[..HEADER_LEN]` and the tag after `body_len` bytes; returns the
/// datagram's length.
fn sign(d: &mut [u8], body_len: usize, flags: u8, h: &Header, auth: &Auth, to: SocketAddr) -> usize {
    d[0..2].copy_from_slice(&MAGIC);
    d[2] = VERSION;
    d[3] = flags;
    d[5..8].fill(0);
    d[8..16].copy_from_slice(&h.epoch.to_le_bytes());
    d[16..24].copy_from_slice(&h.peer_epoch.to_le_bytes());
    d[24..32].copy_from_slice(&h.sent_at_ns.to_le_bytes());
    d[32..36].copy_from_slice(&h.seq.unwrap_or(0).to_le_bytes());
    d[36..40].copy_from_slice(&h.limit.unwrap_or(0).to_le_bytes());
    match auth {
        Auth::Off => {
            d[4] = 0;
            body_len
        }
        Auth::Keys(ring) => {
            let key = ring.signing();
            d[4] = key.id;
            let tag = key.tag(&d[..body_len], to);
            d[body_len..body_len + TAG_BYTES].copy_from_slice(&tag);
            body_len + TAG_BYTES
        }
    }
}

/// Frames being packed into one datagram for one link.
pub struct Packer {
    buf: Vec<u8>,
    /// Header and frames, without the tag of a sealed datagram.
    body_len: usize,
    frames: usize,
    capacity: usize,
}

impl Packer {
    /// A packer for datagrams of at most `capacity` bytes.
    pub fn new(capacity: usize) -> Packer {
        assert!(
            capacity > HEADER_LEN + FRAME_LEN_BYTES + TRAILER_LEN,
            "datagram too small for any frame"
        );
        let mut buf = Vec::with_capacity(capacity);
        buf.extend_from_slice(&[0; HEADER_LEN]);
        Packer {
            buf,
            body_len: HEADER_LEN,
            frames: 0,
            capacity,
        }
    }

    /// Datagrams of at most `capacity` bytes from now on (a path that takes less than
    /// configured); the caller emptied the packer.
    pub fn set_capacity(&mut self, capacity: usize) {
        debug_assert!(self.is_empty());
        assert!(
            capacity > HEADER_LEN + FRAME_LEN_BYTES + TRAILER_LEN,
            "datagram too small for any frame"
        );
        self.capacity = capacity;
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The largest frame a datagram of this packer carries.
    pub fn frame_max(&self) -> usize {
        self.capacity - HEADER_LEN - FRAME_LEN_BYTES - TRAILER_LEN
    }

    /// Whether a frame of `len` bytes still fits.
    pub fn fits(&self, len: usize) -> bool {
        self.body_len + FRAME_LEN_BYTES + len + TRAILER_LEN <= self.capacity
    }

    /// Whether a frame of `len` bytes fits in an empty datagram.
    pub fn fits_alone(&self, len: usize) -> bool {
        len <= self.frame_max()
    }

    /// Appends a frame; the caller checked [`Packer::fits`].
    pub fn push(&mut self, frame: &[u8]) {
        debug_assert!(self.fits(frame.len()));
        self.buf.truncate(self.body_len);
        self.buf.extend_from_slice(&(frame.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(frame);
        self.body_len = self.buf.len();
        self.frames += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The finished datagram for `to`, stamped with `header` (whose `seq` it must have) and
    /// signed under `auth`. Sealing again (the socket would not take it) reseals the frames.
    pub fn seal(&mut self, header: &Header, auth: &Auth, to: SocketAddr) -> &[u8] {
        debug_assert!(header.seq.is_some());
        let flags = FLAG_FRAMES | if header.limit.is_some() { FLAG_LIMIT } else { 0 };
        self.buf.resize(self.body_len + TRAILER_LEN, 0);
        let len = sign(&mut self.buf, self.body_len, flags, header, auth, to);
        &self.buf[..len]
    }

    /// Empties the packer after its datagram went out.
    pub fn clear(&mut self) {
        self.buf.truncate(HEADER_LEN);
        self.body_len = HEADER_LEN;
        self.frames = 0;
    }
}

/// Checks a datagram received at `local` under `auth` and reads its header: the header and
/// the datagram without its tag (whose frames start at [`HEADER_LEN`]). A node without
/// authentication takes tagged datagrams too, without checking their tags.
pub fn open<'a>(
    datagram: &'a [u8],
    auth: &Auth,
    local: SocketAddr,
) -> Result<(Header, &'a [u8]), DatagramError> {
    if datagram.len() < HEADER_LEN || datagram[0..2] != MAGIC || datagram[2] != VERSION {
        return Err(DatagramError::Malformed);
    }
    let body = match (datagram[4], auth) {
        (0, Auth::Off) => datagram,
        (0, Auth::Keys(_)) => return Err(DatagramError::Unauthenticated),
        (id, _) => {
            let Some(split) = datagram.len().checked_sub(TAG_BYTES).filter(|&s| s >= HEADER_LEN) else {
                return Err(DatagramError::Malformed);
            };
            let (body, tag) = datagram.split_at(split);
            if let Auth::Keys(ring) = auth {
                let key = ring.find(id).ok_or(DatagramError::Unauthenticated)?;
                if !key.verify(body, local, tag) {
                    return Err(DatagramError::BadTag);
                }
            }
            body
        }
    };
    Ok((parse_header(body)?, body))
}

/// Reads the header of a datagram without its tag (what [`open`] returns).
pub fn parse_header(body: &[u8]) -> Result<Header, DatagramError> {
    if body.len() < HEADER_LEN || body[0..2] != MAGIC || body[2] != VERSION || body[5..8] != [0; 3] {
        return Err(DatagramError::Malformed);
    }
    let flags = body[3];
    let word = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes"));
    let epoch = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let header = Header {
        epoch: epoch(8),
        peer_epoch: epoch(16),
        sent_at_ns: epoch(24),
        seq: (flags & FLAG_FRAMES != 0).then(|| word(32)),
        limit: (flags & FLAG_LIMIT != 0).then(|| word(36)),
    };
    // Only a datagram with frames has anything after its header.
    let bare = header.seq.is_none() && body.len() == HEADER_LEN;
    if flags & !(FLAG_FRAMES | FLAG_LIMIT) != 0 || (header.seq.is_none() && !bare) || header.epoch == 0 {
        return Err(DatagramError::Malformed);
    }
    Ok(header)
}

/// The frame starting at offset `at` of a datagram (the first is at [`HEADER_LEN`]), as its
/// byte range and the offset of the next; `None` past the last frame.
pub fn frame_at(
    datagram: &[u8],
    at: usize,
) -> Result<Option<(std::ops::Range<usize>, usize)>, DatagramError> {
    if at >= datagram.len() {
        return Ok(None);
    }
    let Some(len_bytes) = datagram.get(at..at + FRAME_LEN_BYTES) else {
        return Err(DatagramError::Malformed);
    };
    let len = u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as usize;
    let start = at + FRAME_LEN_BYTES;
    if len == 0 || start + len > datagram.len() {
        return Err(DatagramError::Malformed);
    }
    Ok(Some((start..start + len, start + len)))
}

/// Whether sequence number `a` comes before `b` (wrapping).
pub fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::auth::{KEY_BYTES, Key, KeyRing};
    use std::sync::Arc;

    /// Calls `f` with each frame, as the driver walks them with [`frame_at`].
    fn for_each_frame(datagram: &[u8], mut f: impl FnMut(&[u8])) -> Result<(), DatagramError> {
        let mut at = HEADER_LEN;
        while let Some((range, next)) = frame_at(datagram, at)? {
            f(&datagram[range]);
            at = next;
        }
        Ok(())
    }

    fn ring(keys: &[(u8, u8)]) -> Auth {
        let keys = keys.iter().map(|&(id, b)| Key::new(id, [b; KEY_BYTES])).collect();
        Auth::Keys(Arc::new(KeyRing::new(keys).unwrap()))
    }

    const TO: &str = "127.0.0.1:7000";

    fn to() -> SocketAddr {
        TO.parse().unwrap()
    }

    fn header(seq: Option<u32>, limit: Option<u32>) -> Header {
        Header {
            epoch: 5,
            peer_epoch: 9,
            sent_at_ns: 11,
            seq,
            limit,
        }
    }

    fn sealed(auth: &Auth, frames: &[&[u8]]) -> Vec<u8> {
        let mut p = Packer::new(128);
        for f in frames {
            p.push(f);
        }
        p.seal(&header(Some(41), Some(7)), auth, to()).to_vec()
    }

    #[test]
    fn frames_round_trip_and_damage_is_detected() {
        for auth in [Auth::Off, ring(&[(1, 1)])] {
            let mut p = Packer::new(96);
            p.push(b"abc");
            p.push(&[7; 10]);
            let room = 96 - HEADER_LEN - 2 * 2 - 3 - 10 - 2 - TRAILER_LEN;
            assert!(p.fits(room));
            assert!(!p.fits(room + 1));
            let d = p.seal(&header(Some(41), Some(7)), &auth, to()).to_vec();
            // Sealing again (the socket was full) gives the same datagram.
            assert_eq!(p.seal(&header(Some(41), Some(7)), &auth, to()), &d[..]);
            let (h, body) = open(&d, &auth, to()).unwrap();
            assert_eq!(h, header(Some(41), Some(7)));
            assert_eq!(body.len(), d.len() - if auth.is_on() { TRAILER_LEN } else { 0 });
            let mut got = Vec::new();
            for_each_frame(body, |f| got.push(f.to_vec())).unwrap();
            assert_eq!(got, vec![b"abc".to_vec(), vec![7; 10]]);
            // Cut inside the second frame: the first still comes out.
            let mut got = 0;
            assert_eq!(
                for_each_frame(&body[..body.len() - 1], |_| got += 1),
                Err(DatagramError::Malformed)
            );
            assert_eq!(got, 1);
            assert_eq!(
                open(&d[..HEADER_LEN - 1], &auth, to()),
                Err(DatagramError::Malformed)
            );
            let mut other = d.clone();
            other[0] = b'X';
            assert_eq!(open(&other, &auth, to()), Err(DatagramError::Malformed));
            p.clear();
            assert!(p.is_empty());
        }
    }

    #[test]
    fn a_tag_must_match_its_key_its_bytes_and_its_destination() {
        let auth = ring(&[(1, 1)]);
        let d = sealed(&auth, &[b"frame"]);
        assert!(open(&d, &auth, to()).is_ok());
        // Another key with the same id, another destination, any bit flipped.
        assert_eq!(open(&d, &ring(&[(1, 2)]), to()), Err(DatagramError::BadTag));
        let elsewhere: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        assert_eq!(open(&d, &auth, elsewhere), Err(DatagramError::BadTag));
        for i in [3, 8, 16, 24, 32, 36, HEADER_LEN + 3, d.len() - 1] {
            let mut bad = d.clone();
            bad[i] ^= 1;
            assert!(open(&bad, &auth, to()).is_err(), "byte {i} flipped");
        }
        // A key this node does not hold, no tag at all, a tag cut short.
        assert_eq!(
            open(&d, &ring(&[(2, 1)]), to()),
            Err(DatagramError::Unauthenticated)
        );
        let untagged = sealed(&Auth::Off, &[b"frame"]);
        assert_eq!(open(&untagged, &auth, to()), Err(DatagramError::Unauthenticated));
        assert!(open(&d[..d.len() - 1], &auth, to()).is_err());
        // Without authentication a tagged datagram is taken as it is.
        assert_eq!(open(&d, &Auth::Off, to()).unwrap().0, header(Some(41), Some(7)));
    }

    #[test]
    fn during_a_rotation_both_keys_are_accepted_and_the_new_one_signs() {
        let old = ring(&[(1, 1)]);
        let rotating = ring(&[(2, 2), (1, 1)]);
        let new = ring(&[(2, 2)]);
        let from_old = sealed(&old, &[b"a"]);
        let from_rotating = sealed(&rotating, &[b"a"]);
        assert_eq!(from_rotating[4], 2, "signed with the first key");
        assert!(open(&from_old, &rotating, to()).is_ok());
        assert!(open(&from_rotating, &rotating, to()).is_ok());
        assert!(open(&from_rotating, &new, to()).is_ok());
        assert_eq!(open(&from_old, &new, to()), Err(DatagramError::Unauthenticated));
    }

    #[test]
    fn credits_and_announcements_carry_epochs_and_nothing_else() {
        let auth = ring(&[(1, 1)]);
        let (c, len) = control(&header(None, Some(u32::MAX)), &auth, to());
        assert_eq!(len, CONTROL_LEN_MAX);
        assert_eq!(
            open(&c[..len], &auth, to()).unwrap().0,
            header(None, Some(u32::MAX))
        );
        let (a, len) = control(&header(None, None), &Auth::Off, to());
        assert_eq!(len, HEADER_LEN);
        assert_eq!(open(&a[..len], &Auth::Off, to()).unwrap().0, header(None, None));
        // A credit with bytes after it, unknown flags, nonzero padding or epoch 0 is not ours.
        let (c, len) = control(&header(None, Some(3)), &Auth::Off, to());
        let mut long = c[..len].to_vec();
        long.push(0);
        assert_eq!(open(&long, &Auth::Off, to()), Err(DatagramError::Malformed));
        for (at, value) in [(3, 4u8), (3, 0x80), (5, 1), (8, 0)] {
            let mut d = c[..len].to_vec();
            if at == 8 {
                d[8..16].fill(0);
            } else {
                d[at] = value;
            }
            assert_eq!(
                open(&d, &Auth::Off, to()),
                Err(DatagramError::Malformed),
                "byte {at}"
            );
        }
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(0, u32::MAX));
        assert!(seq_before(5, 6));
    }
}
