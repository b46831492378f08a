//! The value a client proposes to the replicated log: a command with the client's session
//! coordinates, and the partition its keys live in.
//!
//! Format, version 1 (every integer an unsigned LEB128 varint, every byte string a varint length
//! then the bytes; nothing may follow the last field):
//!
//! ```text
//! 0x01 client request tag fields
//!   tag 1 GET    key
//!   tag 2 SET    condition(1 byte: 0 always, 1 NX, 2 XX) key value
//!   tag 3 DEL    count(>= 1) key...
//!   tag 4 MGET   count(>= 1) key...
//!   tag 5 CAS    flags(1 byte: bit 0 `expect` present, bit 1 `new` present) key [expect] [new]
//!   tag 6 DBSIZE
//! ```

use bytes::Bytes;

use super::codec::{EnvelopeError, Fnv1a, Reader, put_bytes, put_varint};
use crate::command::{Command, SetCondition};
use crate::store::StoreError;

/// The first byte of an envelope in this format.
pub const ENVELOPE_VERSION: u8 = 1;

const TAG_GET: u8 = 1;
const TAG_SET: u8 = 2;
const TAG_DEL: u8 = 3;
const TAG_MGET: u8 = 4;
const TAG_CAS: u8 = 5;
const TAG_DBSIZE: u8 = 6;

const CAS_EXPECT: u8 = 1;
const CAS_NEW: u8 = 2;

/// One client request as a decided value: who sent it, its number in the client's session, and
/// the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The client's id, unique among the store's clients (the session key).
    pub client: u64,
    /// The request's number in the client's session: each new request takes a higher one, and a
    /// retry keeps the number of the request it retries.
    pub request: u64,
    /// What to run.
    pub command: Command,
}

impl Envelope {
    /// Appends the encoding of the envelope to `out`.
    ///
    /// # Panics
    ///
    /// On a command the log does not carry (`MSET`, `INCRBY`, `SNAPSHOT`): callers ask
    /// [`partition_of_command`] first, which refuses them.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(ENVELOPE_VERSION);
        put_varint(out, self.client);
        put_varint(out, self.request);
        encode_command(&self.command, out);
    }

    /// The envelope in `bytes`; an error, never a panic, for anything else.
    pub fn decode(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        let mut reader = Reader::new(bytes);
        let version = reader.byte().map_err(|_| EnvelopeError::Empty)?;
        if version != ENVELOPE_VERSION {
            return Err(EnvelopeError::UnknownVersion(version));
        }
        let client = reader.varint()?;
        let request = reader.varint()?;
        let command = decode_command(&mut reader)?;
        reader.finish()?;
        Ok(Envelope {
            client,
            request,
            command,
        })
    }
}

fn encode_command(command: &Command, out: &mut Vec<u8>) {
    match command {
        Command::Get { key } => {
            out.push(TAG_GET);
            put_bytes(out, key);
        }
        Command::Set {
            key,
            value,
            condition,
        } => {
            out.push(TAG_SET);
            out.push(match condition {
                SetCondition::Always => 0,
                SetCondition::IfAbsent => 1,
                SetCondition::IfPresent => 2,
            });
            put_bytes(out, key);
            put_bytes(out, value);
        }
        Command::Del { keys } => encode_keys(TAG_DEL, keys, out),
        Command::MGet { keys } => encode_keys(TAG_MGET, keys, out),
        Command::Cas { key, expect, new } => {
            out.push(TAG_CAS);
            let flags =
                if expect.is_some() { CAS_EXPECT } else { 0 } | if new.is_some() { CAS_NEW } else { 0 };
            out.push(flags);
            put_bytes(out, key);
            for value in expect.iter().chain(new.iter()) {
                put_bytes(out, value);
            }
        }
        Command::DbSize => out.push(TAG_DBSIZE),
        Command::MSet { .. } | Command::IncrBy { .. } | Command::Snapshot { .. } => {
            panic!(
                "{} is not in the log format: partition_of_command refuses it",
                command.name()
            )
        }
    }
}

fn encode_keys(tag: u8, keys: &[Bytes], out: &mut Vec<u8>) {
    out.push(tag);
    put_varint(out, keys.len() as u64);
    for key in keys {
        put_bytes(out, key);
    }
}

fn decode_command(reader: &mut Reader<'_>) -> Result<Command, EnvelopeError> {
    let command = match reader.byte()? {
        TAG_GET => Command::Get { key: reader.bytes()? },
        TAG_SET => {
            let condition = match reader.byte()? {
                0 => SetCondition::Always,
                1 => SetCondition::IfAbsent,
                2 => SetCondition::IfPresent,
                other => return Err(EnvelopeError::UnknownTag(other)),
            };
            Command::Set {
                key: reader.bytes()?,
                value: reader.bytes()?,
                condition,
            }
        }
        TAG_DEL => Command::Del {
            keys: decode_keys(reader)?,
        },
        TAG_MGET => Command::MGet {
            keys: decode_keys(reader)?,
        },
        TAG_CAS => {
            let flags = reader.byte()?;
            if flags & !(CAS_EXPECT | CAS_NEW) != 0 {
                return Err(EnvelopeError::UnknownTag(flags));
            }
            let key = reader.bytes()?;
            let expect = if flags & CAS_EXPECT != 0 {
                Some(reader.bytes()?)
            } else {
                None
            };
            let new = if flags & CAS_NEW != 0 {
                Some(reader.bytes()?)
            } else {
                None
            };
            Command::Cas { key, expect, new }
        }
        TAG_DBSIZE => Command::DbSize,
        other => return Err(EnvelopeError::UnknownTag(other)),
    };
    Ok(command)
}

fn decode_keys(reader: &mut Reader<'_>) -> Result<Vec<Bytes>, EnvelopeError> {
    // `count` is at most the bytes left, so the reservation is bounded by the input.
    let count = reader.count()?;
    if count == 0 {
        return Err(EnvelopeError::NoKeys);
    }
    let mut keys = Vec::with_capacity(count);
    for _ in 0..count {
        keys.push(reader.bytes()?);
    }
    Ok(keys)
}

/// The partition of `key` among `partitions`: FNV-1a (64 bits) of the key's bytes, modulo
/// `partitions`. Part of the format: clients, coordinators and replicas must agree on it, so it
/// never changes for a given store. `partitions` 0 is taken as 1.
pub fn partition_of(key: &[u8], partitions: u16) -> u16 {
    let mut hash = Fnv1a::new();
    hash.write(key);
    let partition = hash.finish() % u64::from(partitions.max(1));
    u16::try_from(partition).expect("a remainder below a u16 fits a u16")
}

/// The partition that runs `command`: that of its keys, which must all be in one partition
/// ([`StoreError::CrossSlot`] otherwise, as Redis Cluster answers a multi-key command across
/// slots). `DBSIZE` goes to partition 0, and with more than one partition it counts the keys of
/// partition 0 only: a count of the whole store would need every partition at one point of
/// their logs, which separate logs do not give.
pub fn partition_of_command(command: &Command, partitions: u16) -> Result<u16, StoreError> {
    let keys: &[Bytes] = match command {
        Command::Get { key } | Command::Set { key, .. } | Command::Cas { key, .. } => {
            std::slice::from_ref(key)
        }
        Command::Del { keys } | Command::MGet { keys } => keys,
        Command::DbSize => &[],
        // Commands added to the front after this format: the replicated store does not carry
        // them, and answers them as unsupported before anything is encoded.
        Command::MSet { .. } | Command::IncrBy { .. } | Command::Snapshot { .. } => {
            return Err(StoreError::Unsupported(command.name().into()));
        }
    };
    let mut partitions_of_keys = keys.iter().map(|key| partition_of(key, partitions));
    let first = partitions_of_keys.next().unwrap_or(0);
    if partitions_of_keys.any(|partition| partition != first) {
        return Err(StoreError::CrossSlot);
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicated::tests::arb_command;
    use proptest::prelude::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn encoded(envelope: &Envelope) -> Vec<u8> {
        let mut out = Vec::new();
        envelope.encode(&mut out);
        out
    }

    #[test]
    fn golden_bytes() {
        let set = Envelope {
            client: 300,
            request: 1,
            command: Command::Set {
                key: b("k"),
                value: b("vv"),
                condition: SetCondition::IfAbsent,
            },
        };
        assert_eq!(
            encoded(&set),
            [1, 0xac, 0x02, 1, TAG_SET, 1, 1, b'k', 2, b'v', b'v']
        );
        let cad = Envelope {
            client: 0,
            request: 0,
            command: Command::Cas {
                key: b("k"),
                expect: Some(b("x")),
                new: None,
            },
        };
        assert_eq!(encoded(&cad), [1, 0, 0, TAG_CAS, CAS_EXPECT, 1, b'k', 1, b'x']);
        let dbsize = Envelope {
            client: 1,
            request: 2,
            command: Command::DbSize,
        };
        assert_eq!(encoded(&dbsize), [1, 1, 2, TAG_DBSIZE]);
    }

    #[test]
    fn malformed_inputs_have_their_errors() {
        let decode = Envelope::decode;
        assert_eq!(decode(&[]), Err(EnvelopeError::Empty));
        assert_eq!(decode(&[2, 0, 0, 6]), Err(EnvelopeError::UnknownVersion(2)));
        assert_eq!(decode(&[1, 0, 0]), Err(EnvelopeError::Truncated));
        assert_eq!(decode(&[1, 0, 0, 9]), Err(EnvelopeError::UnknownTag(9)));
        assert_eq!(decode(&[1, 0, 0, 6, 0]), Err(EnvelopeError::TrailingBytes(1)));
        assert_eq!(decode(&[1, 0, 0, TAG_DEL, 0]), Err(EnvelopeError::NoKeys));
        assert_eq!(
            decode(&[1, 0, 0, TAG_SET, 3, 0, 0]),
            Err(EnvelopeError::UnknownTag(3))
        );
        assert_eq!(
            decode(&[1, 0, 0, TAG_CAS, 4, 0]),
            Err(EnvelopeError::UnknownTag(4))
        );
        // A key count larger than the bytes left is refused before anything is reserved.
        assert_eq!(
            decode(&[1, 0, 0, TAG_MGET, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(EnvelopeError::Truncated)
        );
    }

    #[test]
    fn partition_is_fnv1a_modulo() {
        // FNV-1a("a") = 0xaf63dc4c8601ec8c.
        assert_eq!(partition_of(b"a", 7), (0xaf63_dc4c_8601_ec8c_u64 % 7) as u16);
        assert_eq!(partition_of(b"a", 1), 0);
        assert_eq!(partition_of(b"a", 0), 0);
    }

    #[test]
    fn a_command_across_partitions_is_crossslot() {
        let partitions = 8;
        let key_in = |wanted: u16| {
            (0..1000)
                .map(|i| b(&format!("key{i}")))
                .find(|key| partition_of(key, partitions) == wanted)
                .expect("some key falls in each of 8 partitions")
        };
        let (a, b2) = (key_in(2), key_in(5));
        let same = Command::MGet {
            keys: vec![a.clone(), a.clone()],
        };
        assert_eq!(partition_of_command(&same, partitions), Ok(2));
        let across = Command::Del { keys: vec![a, b2] };
        let error = partition_of_command(&across, partitions).unwrap_err();
        assert_eq!(error, StoreError::CrossSlot);
        assert!(error.to_redis_error().starts_with("CROSSSLOT "));
        assert_eq!(partition_of_command(&Command::DbSize, partitions), Ok(0));
        assert_eq!(partition_of_command(&across_one(), 1), Ok(0));
    }

    fn across_one() -> Command {
        Command::Del {
            keys: vec![b("x"), b("y"), b("z")],
        }
    }

    proptest! {
        #[test]
        fn every_command_round_trips(client: u64, request: u64, command in arb_command()) {
            let envelope = Envelope { client, request, command };
            let bytes = encoded(&envelope);
            prop_assert_eq!(Envelope::decode(&bytes), Ok(envelope));
            // Every strict prefix is refused: a truncated value is never taken for another one.
            for len in 0..bytes.len() {
                prop_assert!(Envelope::decode(&bytes[..len]).is_err());
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(envelope) = Envelope::decode(&bytes) {
                // What decodes re-encodes to a value that decodes the same.
                prop_assert_eq!(Envelope::decode(&encoded(&envelope)), Ok(envelope));
            }
        }

        #[test]
        fn random_bytes_after_a_valid_header_never_panic(
            tag in 0u8..8,
            tail in proptest::collection::vec(any::<u8>(), 0..48),
        ) {
            let mut bytes = vec![ENVELOPE_VERSION, 5, 9, tag];
            bytes.extend_from_slice(&tail);
            let _ = Envelope::decode(&bytes);
        }
    }
}
