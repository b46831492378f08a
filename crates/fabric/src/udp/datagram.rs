//! What a udp-runtime datagram carries: many fabric frames packed behind one small header, so
//! that one syscall moves many 1Pipe packets (a syscall here costs about as much as handling
//! twenty packets).
//!
//! ```text
//! 0..2   magic "OP"
//! 2      version (1)
//! 3      kind: 0 frames
//! 4..8   sequence number of the datagram on its link, u32 little-endian
//! 8..    frames, each [len: u16 little-endian][len bytes]
//! ```
//!
//! The sequence number keeps links FIFO, which barrier aggregation needs (paper 4.1): UDP may
//! reorder across a real network, so a datagram older than one already taken is dropped and
//! counted, turning reordering into loss, which best effort tolerates and reliable repairs.

pub const HEADER_LEN: usize = 8;
const MAGIC: [u8; 2] = *b"OP";
const VERSION: u8 = 1;
const KIND_FRAMES: u8 = 0;
const FRAME_LEN_BYTES: usize = 2;

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramError {
    /// Shorter than the header, another protocol, another version, or a frame running past
    /// the end.
    Malformed,
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

    /// The finished datagram, stamped with `seq`.
    pub fn seal(&mut self, seq: u32) -> &[u8] {
        self.buf[0..2].copy_from_slice(&MAGIC);
        self.buf[2] = VERSION;
        self.buf[3] = KIND_FRAMES;
        self.buf[4..8].copy_from_slice(&seq.to_le_bytes());
        &self.buf
    }

    /// Empties the packer after its datagram went out.
    pub fn clear(&mut self) {
        self.buf.truncate(HEADER_LEN);
        self.frames = 0;
    }
}

/// The sequence number of a frames datagram.
pub fn parse_header(datagram: &[u8]) -> Result<u32, DatagramError> {
    if datagram.len() < HEADER_LEN
        || datagram[0..2] != MAGIC
        || datagram[2] != VERSION
        || datagram[3] != KIND_FRAMES
    {
        return Err(DatagramError::Malformed);
    }
    Ok(u32::from_le_bytes(datagram[4..8].try_into().expect("4 bytes")))
}

/// Calls `f` with each frame of a datagram whose header [`parse_header`] accepted. Frames
/// before a malformed one are handed out; the error says the rest was dropped.
pub fn for_each_frame(datagram: &[u8], mut f: impl FnMut(&[u8])) -> Result<(), DatagramError> {
    let mut at = HEADER_LEN;
    while at < datagram.len() {
        let Some(len_bytes) = datagram.get(at..at + FRAME_LEN_BYTES) else {
            return Err(DatagramError::Malformed);
        };
        let len = u16::from_le_bytes([len_bytes[0], len_bytes[1]]) as usize;
        let start = at + FRAME_LEN_BYTES;
        let Some(frame) = datagram.get(start..start + len).filter(|_| len > 0) else {
            return Err(DatagramError::Malformed);
        };
        f(frame);
        at = start + len;
    }
    Ok(())
}

/// Whether sequence number `a` comes before `b` (wrapping).
pub fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damage_is_detected() {
        let mut p = Packer::new(64);
        p.push(b"abc");
        p.push(&[7; 10]);
        assert!(p.fits(64 - HEADER_LEN - 2 * 2 - 3 - 10 - 2));
        assert!(!p.fits(64 - HEADER_LEN - 2 * 2 - 3 - 10 - 1));
        let d = p.seal(41).to_vec();
        assert_eq!(parse_header(&d), Ok(41));
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
        assert_eq!(parse_header(&d[..7]), Err(DatagramError::Malformed));
        let mut other = d.clone();
        other[0] = b'X';
        assert_eq!(parse_header(&other), Err(DatagramError::Malformed));
        p.clear();
        assert!(p.is_empty());
        assert_eq!(p.seal(0).len(), HEADER_LEN);
    }

    #[test]
    fn sequence_numbers_wrap() {
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(0, u32::MAX));
        assert!(seq_before(5, 6));
    }
}
