//! Answers from the servers: each counts for its phase's destination, or ends the attempt.

use super::{OccClient, Phase};
use crate::occ::codec::{CommitReply, CommitStatus, LockReply, OccMessage, ReadReply, ValidateReply};
use crate::txn::Outcome;

impl OccClient {
    /// A message delivered to this client.
    pub fn on_message(&mut self, now_ns: u64, src: u32, payload: &[u8]) {
        let Some((message, txn, attempt, phase)) = OccMessage::decode(payload).ok().and_then(answer_of)
        else {
            self.counters.malformed += 1;
            return;
        };
        let expected = self
            .pending
            .get(&txn)
            .is_some_and(|p| p.attempt == attempt && p.phase == phase && p.awaiting.contains_key(&src));
        if !expected {
            self.counters.stale_answers += 1;
            return;
        }
        let shard = src / self.config.layout.replicas;
        let accepted = match message {
            OccMessage::ReadReply(m) => self.on_read_reply(now_ns, shard, m),
            OccMessage::LockReply(m) => self.on_lock_reply(now_ns, shard, m),
            OccMessage::ValidateReply(m) => self.on_validate_reply(now_ns, m),
            OccMessage::CommitReply(m) => self.on_commit_reply(now_ns, shard, m),
            _ => Answer::Counted,
        };
        match accepted {
            Answer::Counted => {
                let p = self.pending.get_mut(&txn).expect("checked above");
                p.awaiting.remove(&src);
                if p.awaiting.is_empty() {
                    self.phase_done(now_ns, txn);
                }
            }
            Answer::Ended => {}
            Answer::Malformed => self.counters.malformed += 1,
        }
    }

    fn on_read_reply(&mut self, now_ns: u64, shard: u32, m: ReadReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        let keys = &p.plan.reads[&shard];
        if keys.len() != m.items.len() {
            return Answer::Malformed;
        }
        if m.items.iter().any(|item| item.locked) {
            self.occ.read_conflicts += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        for (key, item) in keys.iter().zip(m.items) {
            p.read.insert(key.clone(), (item.value, item.version));
        }
        p.read_ns = p.read_ns.max(m.read_ns);
        Answer::Counted
    }

    fn on_lock_reply(&mut self, now_ns: u64, shard: u32, m: LockReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        if !m.ok {
            self.occ.lock_conflicts += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        let keys = &p.plan.writes[&shard].keys;
        if keys.len() != m.versions.len() {
            return Answer::Malformed;
        }
        for (key, version) in keys.iter().zip(m.versions) {
            p.bases.insert(key.clone(), version);
        }
        Answer::Counted
    }

    fn on_validate_reply(&mut self, now_ns: u64, m: ValidateReply) -> Answer {
        if !m.ok {
            self.occ.validation_failures += 1;
            self.abort(now_ns, m.txn, None);
            return Answer::Ended;
        }
        Answer::Counted
    }

    fn on_commit_reply(&mut self, now_ns: u64, shard: u32, m: CommitReply) -> Answer {
        let p = self.pending.get_mut(&m.txn).expect("checked by on_message");
        match m.status {
            CommitStatus::Applied | CommitStatus::Duplicate => {}
            CommitStatus::Forgotten | CommitStatus::Refused => {
                let why = format!("a replica answered the commit {:?}", m.status);
                self.finish(now_ns, m.txn, Outcome::Unknown(why));
                return Answer::Ended;
            }
        }
        let w = &p.plan.writes[&shard];
        let same_ops =
            m.results.len() == w.ops.len() && m.results.iter().zip(&w.ops).all(|((i, _), (j, _))| i == j);
        if !same_ops {
            return Answer::Malformed;
        }
        for (i, r) in m.results {
            p.results[usize::from(i)] = Some(r);
        }
        Answer::Counted
    }
}

/// What an answer did to its transaction.
enum Answer {
    /// It answered its destination's message of the phase.
    Counted,
    /// It ended the phase (an abort) or the transaction.
    Ended,
    Malformed,
}

/// An answer's message, transaction, attempt and the phase it answers; `None` for a request.
fn answer_of(m: OccMessage) -> Option<(OccMessage, u64, u32, Phase)> {
    let (txn, attempt, phase) = match &m {
        OccMessage::ReadReply(a) => (a.txn, a.attempt, Phase::Read),
        OccMessage::LockReply(a) => (a.txn, a.attempt, Phase::Lock),
        OccMessage::ValidateReply(a) => (a.txn, a.attempt, Phase::Validate),
        OccMessage::CommitReply(a) => (a.txn, a.attempt, Phase::Commit),
        OccMessage::AbortReply(a) => (a.txn, a.attempt, Phase::Abort),
        _ => return None,
    };
    Some((m, txn, attempt, phase))
}
