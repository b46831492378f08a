//! The encoding of a command's outcome, as a replica caches it in a client's session and hands
//! it to whoever answers the client.
//!
//! Format, version 1 (varints and byte strings as in [`Envelope`](super::Envelope)):
//!
//! ```text
//! 0x01 0x00 reply    |    0x01 0x01 error
//! reply: 1 OK | 2 STATUS text | 3 NIL | 4 BULK bytes | 5 INTEGER zigzag-varint
//!      | 6 ARRAY count reply...          (arrays nest at most REPLY_DEPTH_MAX deep)
//! error: 1 UNSUPPORTED text | 2 KEY_TOO_LARGE len max | 3 VALUE_TOO_LARGE len max
//!      | 4 UNAVAILABLE text | 5 OUTCOME_UNKNOWN text | 6 INTERNAL text | 7 CROSSSLOT
//!      | 8 WRONG_PARTITION key_partition partition | 9 STALE_REQUEST client request last_request
//!      | 10 NOT_AN_INTEGER | 11 OVERFLOW
//! ```

use super::codec::{EnvelopeError, REPLY_DEPTH_MAX, Reader, put_bytes, put_varint};
use crate::reply::Reply;
use crate::store::StoreError;

/// The first byte of an encoded reply in this format.
pub const REPLY_VERSION: u8 = 1;

const OUTCOME_OK: u8 = 0;
const OUTCOME_ERROR: u8 = 1;

/// The encoding of `result`.
pub fn encode_reply(result: &Result<Reply, StoreError>) -> Vec<u8> {
    let mut out = vec![REPLY_VERSION];
    match result {
        Ok(reply) => {
            out.push(OUTCOME_OK);
            put_reply(&mut out, reply);
        }
        Err(error) => {
            out.push(OUTCOME_ERROR);
            put_error(&mut out, error);
        }
    }
    out
}

/// The outcome encoded in `bytes`; an error, never a panic, for anything else.
pub fn decode_reply(bytes: &[u8]) -> Result<Result<Reply, StoreError>, EnvelopeError> {
    let mut reader = Reader::new(bytes);
    let version = reader.byte().map_err(|_| EnvelopeError::Empty)?;
    if version != REPLY_VERSION {
        return Err(EnvelopeError::UnknownVersion(version));
    }
    let result = match reader.byte()? {
        OUTCOME_OK => Ok(read_reply(&mut reader, 0)?),
        OUTCOME_ERROR => Err(read_error(&mut reader)?),
        other => return Err(EnvelopeError::UnknownTag(other)),
    };
    reader.finish()?;
    Ok(result)
}

fn put_reply(out: &mut Vec<u8>, reply: &Reply) {
    match reply {
        Reply::Ok => out.push(1),
        Reply::Status(text) => {
            out.push(2);
            put_bytes(out, text.as_bytes());
        }
        Reply::Nil => out.push(3),
        Reply::Bulk(bytes) => {
            out.push(4);
            put_bytes(out, bytes);
        }
        Reply::Integer(value) => {
            out.push(5);
            // Zigzag: small negative numbers stay short.
            put_varint(out, ((value << 1) ^ (value >> 63)) as u64);
        }
        Reply::Array(items) => {
            out.push(6);
            put_varint(out, items.len() as u64);
            for item in items {
                put_reply(out, item);
            }
        }
    }
}

fn read_reply(reader: &mut Reader<'_>, depth: usize) -> Result<Reply, EnvelopeError> {
    let reply = match reader.byte()? {
        1 => Reply::Ok,
        2 => Reply::Status(reader.text()?),
        3 => Reply::Nil,
        4 => Reply::Bulk(reader.bytes()?),
        5 => {
            let zigzag = reader.varint()?;
            Reply::Integer(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64))
        }
        6 => {
            // Bounding the depth bounds the recursion: hostile bytes cannot overflow the stack.
            if depth >= REPLY_DEPTH_MAX {
                return Err(EnvelopeError::TooDeep);
            }
            let count = reader.count()?;
            let mut items = Vec::with_capacity(count);
            for _ in 0..count {
                items.push(read_reply(reader, depth + 1)?);
            }
            Reply::Array(items)
        }
        other => return Err(EnvelopeError::UnknownTag(other)),
    };
    Ok(reply)
}

fn put_error(out: &mut Vec<u8>, error: &StoreError) {
    match error {
        StoreError::Unsupported(text) => put_text(out, 1, text),
        StoreError::KeyTooLarge { len_bytes, max_bytes } => {
            put_numbers(out, 2, &[*len_bytes as u64, *max_bytes as u64])
        }
        StoreError::ValueTooLarge { len_bytes, max_bytes } => {
            put_numbers(out, 3, &[*len_bytes as u64, *max_bytes as u64])
        }
        StoreError::Unavailable(text) => put_text(out, 4, text),
        StoreError::OutcomeUnknown(text) => put_text(out, 5, text),
        StoreError::Internal(text) => put_text(out, 6, text),
        StoreError::CrossSlot => out.push(7),
        StoreError::WrongPartition {
            key_partition,
            partition,
        } => put_numbers(out, 8, &[u64::from(*key_partition), u64::from(*partition)]),
        StoreError::StaleRequest {
            client,
            request,
            last_request,
        } => put_numbers(out, 9, &[*client, *request, *last_request]),
        StoreError::NotAnInteger => out.push(10),
        StoreError::Overflow => out.push(11),
    }
}

fn put_text(out: &mut Vec<u8>, tag: u8, text: &str) {
    out.push(tag);
    put_bytes(out, text.as_bytes());
}

fn put_numbers(out: &mut Vec<u8>, tag: u8, numbers: &[u64]) {
    out.push(tag);
    for &number in numbers {
        put_varint(out, number);
    }
}

fn read_error(reader: &mut Reader<'_>) -> Result<StoreError, EnvelopeError> {
    let error = match reader.byte()? {
        1 => StoreError::Unsupported(reader.text()?),
        2 => StoreError::KeyTooLarge {
            len_bytes: read_usize(reader)?,
            max_bytes: read_usize(reader)?,
        },
        3 => StoreError::ValueTooLarge {
            len_bytes: read_usize(reader)?,
            max_bytes: read_usize(reader)?,
        },
        4 => StoreError::Unavailable(reader.text()?),
        5 => StoreError::OutcomeUnknown(reader.text()?),
        6 => StoreError::Internal(reader.text()?),
        7 => StoreError::CrossSlot,
        8 => StoreError::WrongPartition {
            key_partition: read_u16(reader)?,
            partition: read_u16(reader)?,
        },
        9 => StoreError::StaleRequest {
            client: reader.varint()?,
            request: reader.varint()?,
            last_request: reader.varint()?,
        },
        10 => StoreError::NotAnInteger,
        11 => StoreError::Overflow,
        other => return Err(EnvelopeError::UnknownTag(other)),
    };
    Ok(error)
}

fn read_usize(reader: &mut Reader<'_>) -> Result<usize, EnvelopeError> {
    usize::try_from(reader.varint()?).map_err(|_| EnvelopeError::IntegerOutOfRange)
}

fn read_u16(reader: &mut Reader<'_>) -> Result<u16, EnvelopeError> {
    u16::try_from(reader.varint()?).map_err(|_| EnvelopeError::IntegerOutOfRange)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        assert_eq!(encode_reply(&Ok(Reply::Ok)), [1, 0, 1]);
        assert_eq!(encode_reply(&Ok(Reply::Integer(-1))), [1, 0, 5, 1]);
        assert_eq!(encode_reply(&Ok(Reply::Integer(1))), [1, 0, 5, 2]);
        assert_eq!(
            encode_reply(&Ok(Reply::cas_failed(Some(Bytes::from_static(b"x"))))),
            [1, 0, 6, 2, 5, 0, 4, 1, b'x']
        );
        assert_eq!(encode_reply(&Err(StoreError::CrossSlot)), [1, 1, 7]);
    }

    #[test]
    fn hostile_inputs_are_refused() {
        assert_eq!(decode_reply(&[]), Err(EnvelopeError::Empty));
        assert_eq!(decode_reply(&[2, 0, 1]), Err(EnvelopeError::UnknownVersion(2)));
        assert_eq!(decode_reply(&[1, 2, 1]), Err(EnvelopeError::UnknownTag(2)));
        assert_eq!(decode_reply(&[1, 0, 2, 1, 0xff]), Err(EnvelopeError::NotUtf8));
        assert_eq!(
            decode_reply(&[1, 1, 8, 0x80, 0x80, 0x04, 0]),
            Err(EnvelopeError::IntegerOutOfRange)
        );
        // Arrays of one array, nested past the limit.
        let mut deep = vec![1, 0];
        for _ in 0..=REPLY_DEPTH_MAX {
            deep.extend_from_slice(&[6, 1]);
        }
        deep.push(3);
        assert_eq!(decode_reply(&deep), Err(EnvelopeError::TooDeep));
    }

    fn arb_reply() -> impl Strategy<Value = Reply> {
        let leaf = prop_oneof![
            Just(Reply::Ok),
            "[a-z ]{0,8}".prop_map(Reply::Status),
            Just(Reply::Nil),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(|v| Reply::Bulk(Bytes::from(v))),
            any::<i64>().prop_map(Reply::Integer),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Reply::Array)
        })
    }

    fn arb_error() -> impl Strategy<Value = StoreError> {
        let text = "[a-z\u{e9} ]{0,8}";
        prop_oneof![
            text.prop_map(StoreError::Unsupported),
            (any::<usize>(), any::<usize>())
                .prop_map(|(len_bytes, max_bytes)| { StoreError::KeyTooLarge { len_bytes, max_bytes } }),
            (any::<usize>(), any::<usize>())
                .prop_map(|(len_bytes, max_bytes)| { StoreError::ValueTooLarge { len_bytes, max_bytes } }),
            text.prop_map(StoreError::Unavailable),
            text.prop_map(StoreError::OutcomeUnknown),
            text.prop_map(StoreError::Internal),
            Just(StoreError::CrossSlot),
            Just(StoreError::NotAnInteger),
            Just(StoreError::Overflow),
            (any::<u16>(), any::<u16>()).prop_map(|(key_partition, partition)| {
                StoreError::WrongPartition {
                    key_partition,
                    partition,
                }
            }),
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(client, request, last_request)| {
                StoreError::StaleRequest {
                    client,
                    request,
                    last_request,
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn every_outcome_round_trips(result in prop_oneof![
            arb_reply().prop_map(Ok),
            arb_error().prop_map(Err),
        ]) {
            let bytes = encode_reply(&result);
            prop_assert_eq!(decode_reply(&bytes), Ok(result));
            for len in 0..bytes.len() {
                prop_assert!(decode_reply(&bytes[..len]).is_err());
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(result) = decode_reply(&bytes) {
                prop_assert_eq!(decode_reply(&encode_reply(&result)), Ok(result));
            }
        }
    }
}
