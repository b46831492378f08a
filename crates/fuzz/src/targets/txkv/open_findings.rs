//! Payloads that crash crates/txkv today: findings of this target, reported (issue 45) and not
//! fixed yet. The target still draws them but does not deliver them, so that it runs clean (in
//! `.ci/run` and the seed test) and keeps looking for other bugs. When a fix lands, its test
//! goes from here and its input joins `crates/fuzz/regressions/txkv/`.

use onepipe_txkv::Service;
use onepipe_txkv::codec::{FLAG_READ_ONLY, Message};
use onepipe_txkv::occ::OccMessage;
use std::collections::HashSet;

/// Snapshot chunks a client allocates room for: a count past this is a finding.
const CHUNKS_MAX: u32 = 1 << 16;

/// An ordered 1Pipe replica: a best-effort request flagged read-only that writes is executed as
/// a read, outside the total order (the replica's content diverges from its peers'); a
/// best-effort snapshot request moves the replica's executed position above reads still
/// waiting for the commit barrier ("a pending read sits below an executed write").
pub fn ordered_server(service: Service, payload: &[u8]) -> bool {
    if service == Service::Reliable {
        return false;
    }
    match Message::decode(payload) {
        Ok(Message::Request(r)) => r.flags & FLAG_READ_ONLY != 0 && r.ops.iter().any(|(_, op)| op.is_write()),
        Ok(Message::SnapshotRequest(_)) => true,
        _ => false,
    }
}

/// An OCC replica: a commit whose bases name one key twice passes the readiness check and then
/// fails "a commit applied off its base" (an assertion) on the second.
pub fn occ_server(_service: Service, payload: &[u8]) -> bool {
    let Ok(OccMessage::Commit(c)) = OccMessage::decode(payload) else {
        return false;
    };
    let mut keys = HashSet::new();
    !c.bases.iter().all(|(k, _)| keys.insert(k))
}

/// A 1Pipe client: a snapshot chunk's `count` sizes a vector before anything bounds it
/// (`count = u32::MAX` asks for about 100 GB and aborts the process).
pub fn onepipe_client(payload: &[u8]) -> bool {
    matches!(Message::decode(payload), Ok(Message::SnapshotChunk(c)) if c.count > CHUNKS_MAX)
}

/// Nothing known.
pub fn none_for_server(_service: Service, _payload: &[u8]) -> bool {
    false
}

pub fn none_for_client(_payload: &[u8]) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use onepipe_txkv::Op;
    use onepipe_txkv::codec::{Request, SnapshotChunk, SnapshotRequest};
    use onepipe_txkv::occ::codec::Commit;

    fn request(flags: u8, op: Op) -> Vec<u8> {
        let ops = vec![(0, op)];
        Message::Request(Request {
            txn: 1,
            attempt: 0,
            flags,
            ops,
        })
        .encode()
    }

    #[test]
    fn only_the_reported_payloads_are_held_back() {
        let a = Bytes::from_static(b"a");
        let put = Op::Put {
            key: a.clone(),
            value: a.clone(),
        };
        let get = Op::Get { key: a.clone() };
        let best = Service::BestEffort;
        assert!(ordered_server(best, &request(FLAG_READ_ONLY, put.clone())));
        assert!(!ordered_server(best, &request(FLAG_READ_ONLY, get)));
        assert!(!ordered_server(Service::Reliable, &request(0, put.clone())));
        let snapshot = Message::SnapshotRequest(SnapshotRequest {
            id: 1,
            chunk_pairs: 1,
        })
        .encode();
        assert!(ordered_server(best, &snapshot));
        assert!(!ordered_server(Service::Reliable, &snapshot));

        let commit = |bases: Vec<(Bytes, u64)>| {
            let ops = vec![(0, put.clone())];
            OccMessage::Commit(Commit {
                txn: 1,
                attempt: 0,
                ops,
                bases,
            })
            .encode()
        };
        assert!(occ_server(best, &commit(vec![(a.clone(), 0), (a.clone(), 0)])));
        assert!(!occ_server(best, &commit(vec![(a.clone(), 0)])));

        let chunk = |count| {
            let c = SnapshotChunk {
                id: 1,
                shard: 0,
                replica: 0,
                ts: 1,
                index: 0,
                count,
                pairs: Vec::new(),
            };
            Message::SnapshotChunk(c).encode()
        };
        assert!(onepipe_client(&chunk(u32::MAX)));
        assert!(!onepipe_client(&chunk(2)));
    }
}
