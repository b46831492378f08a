//! What a udp-runtime datagram carries: many fabric frames packed behind one small header, so
//! that one syscall moves many 1Pipe packets (a syscall here costs about as much as handling
//! twenty packets), and the credit that keeps the link lossless.
//!
//! ```text
//! 0..2   magic "OP"
//! 2      version (2)
//! 3      flags: 1 = carries frames (and takes a sequence number), 2 = the limit is valid
//! 4..8   sequence number of the datagram on its link, u32 little-endian
//! 8..12  limit: the reverse link's credit, the first sequence number its sender may not
//!        send yet (see `link`), u32 little-endian
//! 12..   frames, each [len: u16 little-endian][len bytes]
//! ```
//!
//! The sequence number keeps links FIFO, which barrier aggregation needs (paper 4.1): UDP may
//! reorder across a real network, so a datagram older than one already taken is dropped and
//! counted, turning reordering into loss, which best effort tolerates and reliable repairs.
//! A datagram with only the limit flag is a credit: it carries no frames and no sequence.

pub const HEADER_LEN: usize = 12;
const MAGIC: [u8; 2] = *b"OP";
const VERSION: u8 = 2;
const FLAG_FRAMES: u8 = 1;
const FLAG_LIMIT: u8 = 2;
/// Each frame in a datagram follows its length, two bytes.
pub const FRAME_LEN_BYTES: usize = 2;

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramError {
    /// Shorter than the header, another protocol, another version, unknown flags, or a frame
    /// running past the end.
    Malformed,
}

/// What a datagram's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Sequence number of a datagram that carries frames; `None` for a credit.
    pub seq: Option<u32>,
    /// The sender's credit for the reverse link, if it has one to give yet.
    pub limit: Option<u32>,
}

/// A credit datagram: no frames, only `limit`.
pub fn credit(limit: u32) -> [u8; HEADER_LEN] {
    let mut d = [0u8; HEADER_LEN];
    write_header(&mut d, FLAG_LIMIT, 0, limit);
    d
}

fn write_header(d: &mut [u8], flags: u8, seq: u32, limit: u32) {
    d[0..2].copy_from_slice(&MAGIC);
    d[2] = VERSION;
    d[3] = flags;
    d[4..8].copy_from_slice(&seq.to_le_bytes());
    d[8..12].copy_from_slice(&limit.to_le_bytes());
}

/// Frames being packed into one datagram for one link.
pub struct Packer {
    buf: Vec<u8>,
    frames: usize,
    capacity: usize,
}

impl Packer {
    /// A packer for datagrams of at most `capacity` bytes.
    pub fn new(capacity: usize) -> Packer {
        assert!(
            capacity > HEADER_LEN + FRAME_LEN_BYTES,
            "datagram too small for any frame"
        );
        let mut buf = Vec::with_capacity(capacity);
        buf.extend_from_slice(&[0; HEADER_LEN]);
        Packer {
            buf,
            frames: 0,
            capacity,
        }
    }

    /// Datagrams of at most `capacity` bytes from now on (a path that takes less than
    /// configured); the caller emptied the packer.
    pub fn set_capacity(&mut self, capacity: usize) {
        debug_assert!(self.is_empty());
        assert!(
            capacity > HEADER_LEN + FRAME_LEN_BYTES,
            "datagram too small for any frame"
        );
        self.capacity = capacity;
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether a frame of `len` bytes still fits.
    pub fn fits(&self, len: usize) -> bool {
        self.buf.len() + FRAME_LEN_BYTES + len <= self.capacity
    }

    /// Whether a frame of `len` bytes fits in an empty datagram.
    pub fn fits_alone(&self, len: usize) -> bool {
        HEADER_LEN + FRAME_LEN_BYTES + len <= self.capacity
    }

    /// Appends a frame; the caller checked [`Packer::fits`].
    pub fn push(&mut self, frame: &[u8]) {
        debug_assert!(self.fits(frame.len()));
        self.buf.extend_from_slice(&(frame.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(frame);
        self.frames += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The finished datagram, stamped with `seq` and carrying the reverse link's `limit`.
    pub fn seal(&mut self, seq: u32, limit: Option<u32>) -> &[u8] {
        let flags = FLAG_FRAMES | if limit.is_some() { FLAG_LIMIT } else { 0 };
        write_header(&mut self.buf, flags, seq, limit.unwrap_or(0));
        &self.buf
    }

    /// Empties the packer after its datagram went out.
    pub fn clear(&mut self) {
        self.buf.truncate(HEADER_LEN);
        self.frames = 0;
    }
}

/// Reads a datagram's header.
pub fn parse_header(datagram: &[u8]) -> Result<Header, DatagramError> {
    if datagram.len() < HEADER_LEN || datagram[0..2] != MAGIC || datagram[2] != VERSION {
        return Err(DatagramError::Malformed);
    }
    let flags = datagram[3];
    let word = |at: usize| u32::from_le_bytes(datagram[at..at + 4].try_into().expect("4 bytes"));
    let header = Header {
        seq: (flags & FLAG_FRAMES != 0).then(|| word(4)),
        limit: (flags & FLAG_LIMIT != 0).then(|| word(8)),
    };
    let credit_only = header.seq.is_none() && datagram.len() == HEADER_LEN;
    if flags & !(FLAG_FRAMES | FLAG_LIMIT) != 0 || (header.seq.is_none() && !credit_only) || flags == 0 {
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

    /// Calls `f` with each frame, as the driver walks them with [`frame_at`].
    fn for_each_frame(datagram: &[u8], mut f: impl FnMut(&[u8])) -> Result<(), DatagramError> {
        let mut at = HEADER_LEN;
        while let Some((range, next)) = frame_at(datagram, at)? {
            f(&datagram[range]);
            at = next;
        }
        Ok(())
    }

    #[test]
    fn frames_round_trip_and_damage_is_detected() {
        let mut p = Packer::new(64);
        p.push(b"abc");
        p.push(&[7; 10]);
        assert!(p.fits(64 - HEADER_LEN - 2 * 2 - 3 - 10 - 2));
        assert!(!p.fits(64 - HEADER_LEN - 2 * 2 - 3 - 10 - 1));
        let d = p.seal(41, Some(7)).to_vec();
        assert_eq!(
            parse_header(&d),
            Ok(Header {
                seq: Some(41),
                limit: Some(7)
            })
        );
        let mut got = Vec::new();
        for_each_frame(&d, |f| got.push(f.to_vec())).unwrap();
        assert_eq!(got, vec![b"abc".to_vec(), vec![7; 10]]);
        // Cut inside the second frame: the first still comes out.
        let mut got = 0;
        assert_eq!(
            for_each_frame(&d[..d.len() - 1], |_| got += 1),
            Err(DatagramError::Malformed)
        );
        assert_eq!(got, 1);
        assert_eq!(parse_header(&d[..HEADER_LEN - 1]), Err(DatagramError::Malformed));
        let mut other = d.clone();
        other[0] = b'X';
        assert_eq!(parse_header(&other), Err(DatagramError::Malformed));
        p.clear();
        assert!(p.is_empty());
        assert_eq!(p.seal(0, None).len(), HEADER_LEN);
    }

    #[test]
    fn credits_carry_a_limit_and_nothing_else() {
        let c = credit(u32::MAX);
        assert_eq!(
            parse_header(&c),
            Ok(Header {
                seq: None,
                limit: Some(u32::MAX)
            })
        );
        // A credit with bytes after it, no flags, or unknown flags is not ours.
        let mut long = c.to_vec();
        long.push(0);
        assert_eq!(parse_header(&long), Err(DatagramError::Malformed));
        for flags in [0u8, 4, 0x80] {
            let mut d = c;
            d[3] = flags;
            assert_eq!(parse_header(&d), Err(DatagramError::Malformed));
        }
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(0, u32::MAX));
        assert!(seq_before(5, 6));
    }
}
