//! The primitives of the replicated store's binary formats: LEB128 varints and length-prefixed
//! byte strings, read by a [`Reader`] that checks every length against what is left.

use bytes::Bytes;

/// Why bytes are not a valid envelope or encoded reply. Small and `Copy`: a replica counts a
/// value that does not decode and applies it as a no-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// No bytes at all (an empty decided value is a no-op and never reaches the decoder).
    #[error("empty input")]
    Empty,
    /// The first byte names a format version this code does not know.
    #[error("unknown format version {0}")]
    UnknownVersion(u8),
    /// The input ends inside a field.
    #[error("input ends inside a field")]
    Truncated,
    /// A varint longer than 10 bytes or above `u64::MAX`, or a length above `usize::MAX`.
    #[error("integer out of range")]
    IntegerOutOfRange,
    /// A tag byte (command, condition, reply or error kind) with no meaning.
    #[error("unknown tag {0}")]
    UnknownTag(u8),
    /// A `DEL` or `MGET` with no key (the Redis front never makes one).
    #[error("command without keys")]
    NoKeys,
    /// Text (a status or an error reason) that is not UTF-8.
    #[error("text is not UTF-8")]
    NotUtf8,
    /// Arrays nested deeper than [`REPLY_DEPTH_MAX`].
    #[error("reply nested too deep")]
    TooDeep,
    /// Bytes left over after the last field.
    #[error("{0} bytes after the end")]
    TrailingBytes(usize),
}

/// The deepest nesting of arrays a decoded reply may have (the store's replies nest one level).
pub const REPLY_DEPTH_MAX: usize = 8;

/// The longest LEB128 encoding of a `u64`.
const VARINT_BYTES_MAX: usize = 10;

/// Appends `value` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a length-prefixed byte string.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads fields front to back; every read checks the bytes left, so no input can make it panic.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    pub(crate) fn byte(&mut self) -> Result<u8, EnvelopeError> {
        let (&first, rest) = self.rest.split_first().ok_or(EnvelopeError::Truncated)?;
        self.rest = rest;
        Ok(first)
    }

    pub(crate) fn varint(&mut self) -> Result<u64, EnvelopeError> {
        let mut value: u64 = 0;
        for index in 0..VARINT_BYTES_MAX {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            let shift = 7 * index as u32;
            // The tenth byte holds bit 63 only: anything above overflows a u64.
            if index == VARINT_BYTES_MAX - 1 && bits > 1 {
                return Err(EnvelopeError::IntegerOutOfRange);
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(EnvelopeError::IntegerOutOfRange)
    }

    /// A varint that counts items or bytes still to come: it cannot exceed the bytes left, since
    /// each item takes at least one, so a caller may reserve that many without trusting the input.
    pub(crate) fn count(&mut self) -> Result<usize, EnvelopeError> {
        let count = usize::try_from(self.varint()?).map_err(|_| EnvelopeError::IntegerOutOfRange)?;
        if count > self.rest.len() {
            return Err(EnvelopeError::Truncated);
        }
        Ok(count)
    }

    pub(crate) fn slice(&mut self) -> Result<&'a [u8], EnvelopeError> {
        let len = self.count()?;
        let (bytes, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(bytes)
    }

    pub(crate) fn bytes(&mut self) -> Result<Bytes, EnvelopeError> {
        Ok(Bytes::copy_from_slice(self.slice()?))
    }

    pub(crate) fn text(&mut self) -> Result<String, EnvelopeError> {
        let bytes = self.slice()?;
        let text = std::str::from_utf8(bytes).map_err(|_| EnvelopeError::NotUtf8)?;
        Ok(text.to_owned())
    }

    /// Succeeds when every byte was read.
    pub(crate) fn finish(self) -> Result<(), EnvelopeError> {
        match self.rest.len() {
            0 => Ok(()),
            left => Err(EnvelopeError::TrailingBytes(left)),
        }
    }
}

pub(crate) use crate::fnv::Fnv1a;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_golden_bytes_and_bounds() {
        let cases: [(u64, &[u8]); 5] = [
            (0, &[0]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (
                u64::MAX,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for (value, bytes) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out, bytes);
            assert_eq!(Reader::new(bytes).varint(), Ok(value));
        }
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Reader::new(&over).varint(), Err(EnvelopeError::IntegerOutOfRange));
        let long = [0x80; 11];
        assert_eq!(Reader::new(&long).varint(), Err(EnvelopeError::IntegerOutOfRange));
        assert_eq!(Reader::new(&[0x80]).varint(), Err(EnvelopeError::Truncated));
    }

    #[test]
    fn a_length_past_the_end_is_refused() {
        assert_eq!(
            Reader::new(&[3, b'a', b'b']).slice(),
            Err(EnvelopeError::Truncated)
        );
        let mut reader = Reader::new(&[2, b'a', b'b', 9]);
        assert_eq!(reader.slice(), Ok(&b"ab"[..]));
        assert_eq!(reader.finish(), Err(EnvelopeError::TrailingBytes(1)));
    }
}
