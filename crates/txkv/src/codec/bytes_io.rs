//! Little-endian writing and bounds-checked reading: every read names what it wanted, so a
//! short or forged message becomes a typed error, never a panic.

use bytes::Bytes;

use super::DecodeError;

/// Appends fields to a message.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn with_tag(tag: u8) -> Writer {
        let mut w = Writer {
            buf: Vec::with_capacity(64),
        };
        w.u8(tag);
        w
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) {
        // Message sizes are bounded far below 4 GiB by the endpoint; a longer one cannot be sent.
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
    }
    /// A count of items that follow; callers bound their lists to `u16::MAX`.
    pub fn count(&mut self, n: usize) {
        debug_assert!(n <= usize::from(u16::MAX));
        self.u16(n as u16);
    }
}

/// Reads fields from a received message.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let have = self.bytes.len() - self.at;
        if n > have {
            return Err(DecodeError::Truncated { what, need: n, have });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(a))
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }
    pub fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(self.u64(what)? as i64)
    }
    pub fn bytes(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let n = self.u32(what)? as usize;
        Ok(Bytes::copy_from_slice(self.take(n, what)?))
    }
    /// A count of items, each at least `item_bytes_min` long: a count the rest of the message
    /// cannot hold is refused before anything is allocated for it.
    pub fn count(&mut self, what: &'static str, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let n = usize::from(self.u16(what)?);
        let have = self.bytes.len() - self.at;
        if n * item_bytes_min > have {
            return Err(DecodeError::Truncated {
                what,
                need: n * item_bytes_min,
                have,
            });
        }
        Ok(n)
    }
    /// The whole message was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(DecodeError::Trailing { bytes: n }),
        }
    }
}
