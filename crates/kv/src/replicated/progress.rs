//! A partition's progress record: where its log stands, how many keys it holds, and its
//! counters. Written in the same batch as the state it describes.

use super::db::ReplicaError;

/// What a partition's applied log held, one count per instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Commands executed (including those answered with an error, such as `CROSSSLOT`).
    pub applied: u64,
    /// Empty values: the coordinator's no-ops filling gaps.
    pub noops: u64,
    /// Values that do not decode as an [`Envelope`](super::Envelope), applied as no-ops.
    pub malformed: u64,
    /// Requests already executed, answered from the client's session.
    pub duplicates: u64,
    /// Requests older than the client's last executed one, refused.
    pub stale: u64,
}

impl Counters {
    /// The instances counted: every applied instance falls in exactly one counter.
    pub fn entries(&self) -> u64 {
        self.applied + self.noops + self.malformed + self.duplicates + self.stale
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    pub(crate) next_instance: u64,
    pub(crate) first_kept_instance: u64,
    pub(crate) keys: u64,
    pub(crate) counters: Counters,
}

const PROGRESS_VERSION: u8 = 1;
const FIELDS: usize = 8;
const RECORD_BYTES: usize = 1 + 8 * FIELDS;

impl Progress {
    /// The record's key in the meta keyspace.
    pub(crate) fn key(pid: u16) -> Vec<u8> {
        let mut key = b"p".to_vec();
        key.extend_from_slice(&pid.to_be_bytes());
        key
    }

    fn fields(&self) -> [u64; FIELDS] {
        let c = &self.counters;
        [
            self.next_instance,
            self.first_kept_instance,
            self.keys,
            c.applied,
            c.noops,
            c.malformed,
            c.duplicates,
            c.stale,
        ]
    }

    /// The version byte, then each field as 8 bytes little endian.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_BYTES);
        out.push(PROGRESS_VERSION);
        for field in self.fields() {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Progress, ReplicaError> {
        let corrupt = || ReplicaError::Corrupt("progress record");
        let (&version, rest) = bytes.split_first().ok_or_else(corrupt)?;
        if version != PROGRESS_VERSION || rest.len() != 8 * FIELDS {
            return Err(corrupt());
        }
        let mut fields = [0u64; FIELDS];
        for (field, chunk) in fields.iter_mut().zip(rest.chunks_exact(8)) {
            *field = u64::from_le_bytes(chunk.try_into().map_err(|_| corrupt())?);
        }
        let [
            next_instance,
            first_kept_instance,
            keys,
            applied,
            noops,
            malformed,
            duplicates,
            stale,
        ] = fields;
        Ok(Progress {
            next_instance,
            first_kept_instance,
            keys,
            counters: Counters {
                applied,
                noops,
                malformed,
                duplicates,
                stale,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_round_trips_and_refuses_other_lengths() {
        let progress = Progress {
            next_instance: 9,
            first_kept_instance: 4,
            keys: 3,
            counters: Counters {
                applied: 5,
                noops: 1,
                malformed: 1,
                duplicates: 1,
                stale: 1,
            },
        };
        let bytes = progress.encode();
        assert_eq!(bytes.len(), RECORD_BYTES);
        assert_eq!(Progress::decode(&bytes).unwrap(), progress);
        assert!(Progress::decode(&bytes[..RECORD_BYTES - 1]).is_err());
        assert!(Progress::decode(&[2; RECORD_BYTES]).is_err());
    }
}
