//! The phases of a transaction: what each sends, and where each leads.

use bytes::Bytes;

use super::plan::backoff_ns;
use super::{OccClient, Phase};
use crate::client::Outgoing;
use crate::occ::codec::{Abort, Commit, Lock, OccMessage, Read, Validate};
use crate::txn::{OpResult, Outcome};

impl OccClient {
    /// Starts attempt `p.attempt` from the top.
    pub(super) fn start(&mut self, now_ns: u64, id: u64) {
        let failed_primary = {
            let p = &self.pending[&id];
            p.plan.shards().any(|s| self.failed[self.primary(s) as usize])
        };
        if failed_primary {
            let why = "the primary of a shard it touches has failed".to_string();
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        let p = self
            .pending
            .get_mut(&id)
            .expect("started transactions are pending");
        p.read.clear();
        p.read_ns = 0;
        p.bases.clear();
        p.locked_shards.clear();
        p.results.iter_mut().for_each(|r| *r = None);
        if p.plan.reads.is_empty() {
            return self.start_lock(now_ns, id);
        }
        let messages = p
            .plan
            .reads
            .iter()
            .map(|(&shard, keys)| {
                let m = OccMessage::Read(Read {
                    txn: id,
                    attempt: p.attempt,
                    keys: keys.clone(),
                });
                (self.config.layout.process(shard, 0), m.encode())
            })
            .collect();
        self.send_phase(now_ns, id, Phase::Read, messages);
    }

    fn start_lock(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("locking transactions are pending");
        p.locked_shards = p.plan.writes.keys().copied().collect();
        let messages = p
            .plan
            .writes
            .iter()
            .map(|(&shard, w)| {
                let items = w
                    .keys
                    .iter()
                    .map(|k| (k.clone(), p.read.get(k).map(|(_, version)| *version)))
                    .collect();
                let m = OccMessage::Lock(Lock {
                    txn: id,
                    attempt: p.attempt,
                    items,
                });
                (self.config.layout.process(shard, 0), m.encode())
            })
            .collect();
        self.send_phase(now_ns, id, Phase::Lock, messages);
    }

    /// Validates the keys read and not written (those written were checked by their lock);
    /// with none, goes on to commit.
    fn start_validate(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("validating transactions are pending");
        let mut messages = Vec::new();
        for (&shard, keys) in &p.plan.reads {
            let items: Vec<(Bytes, u64)> = keys
                .iter()
                .filter(|k| !p.plan.is_written(k))
                .map(|k| (k.clone(), p.read[k].1))
                .collect();
            if items.is_empty() {
                continue;
            }
            let m = OccMessage::Validate(Validate {
                txn: id,
                attempt: p.attempt,
                items,
            });
            messages.push((self.config.layout.process(shard, 0), m.encode()));
        }
        if messages.is_empty() {
            return self.start_commit(now_ns, id);
        }
        self.send_phase(now_ns, id, Phase::Validate, messages);
    }

    fn start_commit(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("committing transactions are pending");
        let mut messages = Vec::new();
        for (&shard, w) in &p.plan.writes {
            let bases = w.keys.iter().map(|k| (k.clone(), p.bases[k])).collect();
            let m = OccMessage::Commit(Commit {
                txn: id,
                attempt: p.attempt,
                ops: w.ops.clone(),
                bases,
            })
            .encode();
            let live = self
                .config
                .layout
                .replicas_of(shard)
                .filter(|&r| !self.failed[r as usize]);
            messages.extend(live.map(|r| (r, m.clone())));
        }
        self.send_phase(now_ns, id, Phase::Commit, messages);
    }

    /// Releases the attempt's locks, if it may hold any, then backs off (or gives up).
    pub(super) fn abort(&mut self, now_ns: u64, id: u64, give_up: Option<String>) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("aborting transactions are pending");
        if give_up.is_none() {
            p.aborts += 1;
            self.occ.aborts += 1;
        }
        p.give_up = give_up;
        let attempt = p.attempt;
        let messages: Vec<(u32, Vec<u8>)> = p
            .locked_shards
            .iter()
            .map(|shard| {
                let m = OccMessage::Abort(Abort {
                    txn: id,
                    attempt,
                    keys: p.plan.writes[shard].keys.clone(),
                });
                (self.config.layout.process(*shard, 0), m.encode())
            })
            .collect();
        if messages.is_empty() {
            return self.after_abort(now_ns, id);
        }
        self.send_phase(now_ns, id, Phase::Abort, messages);
    }

    fn after_abort(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("aborted transactions are pending");
        if let Some(why) = p.give_up.take() {
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        if p.aborts >= self.config.aborts_max {
            self.occ.aborts_exhausted += 1;
            let why = format!("aborted {} times by conflicting transactions", p.aborts);
            return self.finish(now_ns, id, Outcome::Failed(why));
        }
        let c = &self.config;
        let wait_ns = backoff_ns(c.backoff_base_ns, c.backoff_max_ns, c.process, id, p.aborts);
        p.phase = Phase::Backoff;
        p.awaiting.clear();
        p.locked_shards.clear();
        p.deadline_ns = now_ns.saturating_add(wait_ns);
    }

    fn send_phase(&mut self, now_ns: u64, id: u64, phase: Phase, messages: Vec<(u32, Vec<u8>)>) {
        assert!(!messages.is_empty(), "a phase without messages");
        let p = self
            .pending
            .get_mut(&id)
            .expect("a phase of a pending transaction");
        p.phase = phase;
        p.awaiting = messages.into_iter().collect();
        p.sends = 0;
        self.occ.phases += 1;
        self.send(now_ns, id);
    }

    /// Sends (again) the current phase's messages not answered yet.
    fn send(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("sending for a pending transaction");
        p.sends += 1;
        p.round += 1;
        p.deadline_ns = now_ns.saturating_add(self.config.timeout_ns);
        let scatter = p.awaiting.iter().map(|(&dst, m)| (dst, m.clone())).collect();
        self.outbox.push(Outgoing {
            txn: id,
            attempt: p.round,
            reliable: false,
            scatter,
        });
    }

    /// Every message of the current phase was answered.
    pub(super) fn phase_done(&mut self, now_ns: u64, id: u64) {
        let p = self
            .pending
            .get_mut(&id)
            .expect("a phase of a pending transaction");
        match p.phase {
            Phase::Read => {
                for (i, key) in &p.plan.read_results {
                    p.results[usize::from(*i)] = Some(OpResult::Value(p.read[key].0.clone()));
                }
                if !p.plan.is_read_only() {
                    return self.start_lock(now_ns, id);
                }
                if p.plan.reads.len() == 1 {
                    // One primary read every key at one instant: that is the point, on the
                    // clock all processes share (the runtime's), not when the answer came.
                    p.ts = p.read_ns;
                    return self.commit(now_ns, id);
                }
                p.ts = now_ns;
                self.start_validate(now_ns, id)
            }
            Phase::Lock => {
                p.ts = now_ns;
                self.start_validate(now_ns, id)
            }
            Phase::Validate if p.plan.is_read_only() => self.commit(now_ns, id),
            Phase::Validate => self.start_commit(now_ns, id),
            Phase::Commit => self.commit(now_ns, id),
            Phase::Abort => self.after_abort(now_ns, id),
            Phase::Backoff => unreachable!("a back-off awaits no answer"),
        }
    }

    fn commit(&mut self, now_ns: u64, id: u64) {
        let p = &self.pending[&id];
        let Some(results) = p.results.iter().cloned().collect::<Option<Vec<OpResult>>>() else {
            let why = "a server answered without every result".to_string();
            return self.finish(now_ns, id, Outcome::Failed(why));
        };
        let ts = p.ts;
        self.finish(now_ns, id, Outcome::Committed { ts, results });
    }

    pub(super) fn retry(&mut self, now_ns: u64, id: u64) {
        let p = &self.pending[&id];
        if p.sends < self.config.attempts_max {
            self.counters.retries += 1;
            self.pending.get_mut(&id).expect("seen above").resends += 1;
            return self.send(now_ns, id);
        }
        let why = format!("no answer to {:?} after {} sends", p.phase, p.sends);
        match p.phase {
            Phase::Read => self.finish(now_ns, id, Outcome::Failed(why)),
            Phase::Lock | Phase::Validate => self.abort(now_ns, id, Some(why)),
            Phase::Commit => self.finish(now_ns, id, Outcome::Unknown(why)),
            Phase::Abort => {
                self.occ.locks_abandoned += 1;
                let why = p.give_up.clone().unwrap_or(why);
                self.finish(now_ns, id, Outcome::Failed(why))
            }
            Phase::Backoff => unreachable!("a back-off is not sent"),
        }
    }
}
