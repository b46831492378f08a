//! Client sessions: exactly-once execution of retried requests, as Raft's client sessions
//! (Ongaro's thesis, section 6.3). Kept in memory (at most `sessions_max`), written through to
//! the partition's batch.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::db::ReplicaError;

/// What a partition remembers of one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    /// The highest request id executed for the client.
    pub(crate) request: u64,
    /// Its encoded reply ([`encode_reply`](super::encode_reply)).
    pub(crate) reply: Vec<u8>,
    /// The instance that executed it: the session's age, for eviction.
    pub(crate) applied_inst: u64,
}

impl Session {
    /// request (8 bytes LE), applied instance (8 bytes LE), reply.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.reply.len());
        out.extend_from_slice(&self.request.to_le_bytes());
        out.extend_from_slice(&self.applied_inst.to_le_bytes());
        out.extend_from_slice(&self.reply);
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Session, ReplicaError> {
        let corrupt = ReplicaError::Corrupt("session record");
        let (request, rest) = bytes.split_first_chunk::<8>().ok_or(corrupt)?;
        let corrupt = ReplicaError::Corrupt("session record");
        let (applied_inst, reply) = rest.split_first_chunk::<8>().ok_or(corrupt)?;
        Ok(Session {
            request: u64::from_le_bytes(*request),
            reply: reply.to_vec(),
            applied_inst: u64::from_le_bytes(*applied_inst),
        })
    }
}

/// How a request relates to its client's session.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Check<'a> {
    /// Not seen: execute it.
    New,
    /// The request executed last: answer its cached reply.
    Duplicate(&'a [u8]),
    /// Older than the one executed last: refuse it.
    Stale { last_request: u64 },
}

/// The sessions of one partition.
#[derive(Debug)]
pub(crate) struct Sessions {
    by_client: HashMap<u64, Session>,
    /// applied instance -> client: the oldest session first. One command per instance, so the
    /// instances are distinct.
    by_age: BTreeMap<u64, u64>,
    sessions_max: usize,
    /// Clients whose session changed or was evicted since [`Sessions::take_changed`].
    changed: HashSet<u64>,
}

impl Sessions {
    pub(crate) fn new(sessions_max: usize) -> Sessions {
        assert!(sessions_max >= 1, "the configuration was checked");
        Sessions {
            by_client: HashMap::new(),
            by_age: BTreeMap::new(),
            sessions_max,
            changed: HashSet::new(),
        }
    }

    /// Adds a session read back from the disk.
    pub(crate) fn restore(&mut self, client: u64, session: Session) -> Result<(), ReplicaError> {
        if self.by_age.insert(session.applied_inst, client).is_some()
            || self.by_client.insert(client, session).is_some()
        {
            return Err(ReplicaError::Corrupt("two sessions at one instance"));
        }
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.by_client.len()
    }

    pub(crate) fn check(&self, client: u64, request: u64) -> Check<'_> {
        match self.by_client.get(&client) {
            Some(session) if request == session.request => Check::Duplicate(&session.reply),
            Some(session) if request < session.request => Check::Stale {
                last_request: session.request,
            },
            _ => Check::New,
        }
    }

    /// Records that instance `inst` executed `request` of `client` with `reply`, evicting the
    /// oldest sessions first if a new one would exceed the limit. Only the log decides which,
    /// so every replica evicts the same.
    pub(crate) fn record(&mut self, client: u64, request: u64, reply: Vec<u8>, inst: u64) {
        if let Some(old) = self.by_client.get(&client) {
            assert!(request > old.request, "only new requests execute");
            assert!(inst > old.applied_inst, "instances only grow");
            let removed = self.by_age.remove(&old.applied_inst);
            assert_eq!(removed, Some(client));
        } else {
            // A limit lowered since the last restart may leave more than one to evict.
            while self.by_client.len() >= self.sessions_max {
                self.evict_oldest();
            }
        }
        let session = Session {
            request,
            reply,
            applied_inst: inst,
        };
        self.by_client.insert(client, session);
        let previous = self.by_age.insert(inst, client);
        assert!(previous.is_none(), "one command per instance");
        self.changed.insert(client);
        assert!(self.by_client.len() <= self.sessions_max);
        self.check_invariants();
    }

    fn evict_oldest(&mut self) {
        let (_, client) = self.by_age.pop_first().expect("sessions to evict");
        let evicted = self.by_client.remove(&client);
        assert!(evicted.is_some(), "the two indexes agree");
        self.changed.insert(client);
    }

    /// The clients changed since the last call, each with its session now (`None`: evicted).
    pub(crate) fn take_changed(&mut self) -> Vec<(u64, Option<&Session>)> {
        let changed = std::mem::take(&mut self.changed);
        let mut changed: Vec<u64> = changed.into_iter().collect();
        changed.sort_unstable();
        changed
            .into_iter()
            .map(|client| (client, self.by_client.get(&client)))
            .collect()
    }

    pub(crate) fn check_invariants(&self) {
        assert_eq!(self.by_client.len(), self.by_age.len());
        debug_assert!(
            self.by_age
                .iter()
                .all(|(inst, client)| self.by_client[client].applied_inst == *inst)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_session_goes_first() {
        let mut sessions = Sessions::new(2);
        sessions.record(1, 10, vec![1], 0);
        sessions.record(2, 20, vec![2], 1);
        // Client 1 executes again: client 2's session is now the oldest.
        sessions.record(1, 11, vec![3], 2);
        sessions.record(3, 30, vec![4], 3);
        assert_eq!(sessions.len(), 2);
        assert_eq!(sessions.check(2, 20), Check::New);
        assert_eq!(sessions.check(1, 11), Check::Duplicate(&[3]));
        assert_eq!(sessions.check(1, 10), Check::Stale { last_request: 11 });
        let changed: Vec<_> = sessions
            .take_changed()
            .into_iter()
            .map(|(c, s)| (c, s.is_some()))
            .collect();
        assert_eq!(changed, [(1, true), (2, false), (3, true)]);
        assert!(sessions.take_changed().is_empty());
    }

    #[test]
    fn a_session_record_round_trips() {
        let session = Session {
            request: 7,
            reply: vec![1, 0, 1],
            applied_inst: 9,
        };
        assert_eq!(Session::decode(&session.encode()).unwrap(), session);
        assert!(matches!(Session::decode(&[0; 15]), Err(ReplicaError::Corrupt(_))));
    }
}
