//! Keys: 16 bytes, fixed (paper 4.1). A user's key of up to 16 bytes is padded with zeros; a key
//! that ends in a zero byte would be indistinguishable from a shorter one, so it is refused.

use onepipe_wire::netchain::KEY_BYTES;

/// A key as the switches match it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(pub [u8; KEY_BYTES]);

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("key is empty")]
    Empty,
    #[error("key is {0} bytes, longer than NetChain's {KEY_BYTES}")]
    TooLong(usize),
    #[error("key ends in a zero byte, which padding would make ambiguous")]
    TrailingZero,
}

impl Key {
    pub fn new(bytes: &[u8]) -> Result<Key, KeyError> {
        match bytes {
            [] => Err(KeyError::Empty),
            b if b.len() > KEY_BYTES => Err(KeyError::TooLong(b.len())),
            [.., 0] => Err(KeyError::TrailingZero),
            b => {
                let mut k = [0u8; KEY_BYTES];
                k[..b.len()].copy_from_slice(b);
                Ok(Key(k))
            }
        }
    }

    /// The user's bytes, without the padding.
    pub fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        &self.0[..len]
    }

    /// Where the key sits on the consistent-hashing ring.
    pub fn ring_position(&self) -> u64 {
        let a = u64::from_be_bytes(self.0[..8].try_into().expect("8 bytes"));
        let b = u64::from_be_bytes(self.0[8..].try_into().expect("8 bytes"));
        onepipe_fabric::hash::mix64(onepipe_fabric::hash::mix64(a) ^ b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pad_and_refuse_what_padding_would_confuse() {
        let k = Key::new(b"key:000000000042").unwrap();
        assert_eq!(k.as_bytes(), b"key:000000000042");
        assert_eq!(Key::new(b"ab").unwrap().as_bytes(), b"ab");
        assert_eq!(Key::new(b""), Err(KeyError::Empty));
        assert_eq!(Key::new(&[1; 17]), Err(KeyError::TooLong(17)));
        assert_eq!(Key::new(b"ab\0"), Err(KeyError::TrailingZero));
        assert_ne!(
            Key::new(b"a").unwrap().ring_position(),
            Key::new(b"b").unwrap().ring_position()
        );
    }
}
