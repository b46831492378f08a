//! Leader election among controller replicas, sans-IO: when to grant a lease, keep it alive,
//! campaign or give up leadership, given the time and the answers of earlier calls.
//!
//! Each replica holds a lease and keeps it alive every `keepalive_every`. It campaigns by
//! creating the leader key, attached to its lease, if the key does not exist; a standby tries
//! again every `campaign_every`. The leader key goes away when its lease expires (the leader
//! stopped renewing it: crashed, hung or cut off from etcd) or is revoked (it resigned), and
//! the next campaign wins. The leader key's create revision names the term: the log takes
//! appends only while the leader key still has the value and create revision of the term that
//! wrote them (fencing, [`crate::EtcdStore`]), so a deposed leader can never write, whatever
//! it believes.
//!
//! Locally, a replica counts itself leader only until its lease could have expired, counted
//! from when it *sent* the last keepalive that etcd answered: etcd starts the TTL later than
//! that, so the replica stops first.

use onepipe_wire::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    /// Lease TTL, whole seconds (etcd's unit). A standby takes over at most about this long
    /// after the leader stopped (plus `campaign_every`).
    pub ttl_secs: u64,
    pub keepalive_every: Duration,
    pub campaign_every: Duration,
    /// How long to wait before trying a call again after it failed.
    pub retry_after: Duration,
}

impl ElectionConfig {
    /// Renewals and campaigns three times per TTL.
    pub fn with_ttl_secs(ttl_secs: u64) -> ElectionConfig {
        let third = Duration::from_secs(ttl_secs.max(1)).as_nanos() / 3;
        ElectionConfig {
            ttl_secs: ttl_secs.max(1),
            keepalive_every: Duration::from_nanos(third),
            campaign_every: Duration::from_nanos(third),
            retry_after: Duration::from_nanos(third / 2),
        }
    }
}

impl Default for ElectionConfig {
    fn default() -> ElectionConfig {
        ElectionConfig::with_ttl_secs(5)
    }
}

/// What the replica must ask etcd now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Grant a lease of `ttl_secs`: then [`Election::on_granted`].
    Grant { ttl_secs: u64 },
    /// Keep `lease` alive: then [`Election::on_kept_alive`].
    KeepAlive { lease: i64 },
    /// Create the leader key with `lease` if absent, else read it: then
    /// [`Election::on_campaigned`].
    Campaign { lease: i64 },
    /// Revoke `lease` (resigning): nothing to report back.
    Revoke { lease: i64 },
}

/// This replica's term as leader: what its appends to the log are fenced with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    pub lease: i64,
    /// The leader key's create revision: unique to this term.
    pub revision: i64,
}

/// What a campaign found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Campaign {
    /// The leader key was created, at `revision`.
    Won { revision: i64 },
    /// The leader key exists: its value, lease and create revision (`None` if it vanished
    /// between the compare and the read, which a transaction rules out, but an answer is not
    /// trusted to be sane).
    Held { holder: Option<(Vec<u8>, i64, i64)> },
}

#[derive(Clone, Copy, Debug)]
struct HeldLease {
    id: i64,
    /// When the lease may have expired, counted from the sending of the last renewal etcd
    /// answered.
    expires: Instant,
    next_keepalive: Instant,
}

#[derive(Clone, Debug)]
pub struct Election {
    id: Vec<u8>,
    config: ElectionConfig,
    lease: Option<HeldLease>,
    term: Option<i64>,
    next_campaign: Instant,
    /// No grant before this (a failed grant waits `retry_after`).
    next_grant: Instant,
    /// The last holder of the leader key seen, other than us.
    leader: Option<Vec<u8>>,
    resigned: bool,
    revoke: Option<i64>,
}

impl Election {
    /// A replica named `id`, which is the leader key's value while it leads.
    pub fn new(id: &[u8], config: ElectionConfig) -> Election {
        Election {
            id: id.to_vec(),
            config,
            lease: None,
            term: None,
            next_campaign: Instant::ZERO,
            next_grant: Instant::ZERO,
            leader: None,
            resigned: false,
            revoke: None,
        }
    }

    pub fn id(&self) -> &[u8] {
        &self.id
    }

    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// This replica's term, if it leads at `now`.
    pub fn leadership(&self, now: Instant) -> Option<Leadership> {
        let lease = self.lease.filter(|l| l.expires > now)?;
        Some(Leadership {
            lease: lease.id,
            revision: self.term?,
        })
    }

    /// The holder of the leader key at the last campaign, when that was not us.
    pub fn known_leader(&self) -> Option<&[u8]> {
        self.leader.as_deref()
    }

    /// The call to make now, if any. Call it again after reporting the answer.
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        if let Some(lease) = self.revoke.take() {
            return Some(Action::Revoke { lease });
        }
        if self.resigned {
            return None;
        }
        if self.lease.is_some_and(|l| l.expires <= now) {
            // Whatever etcd says, the lease may be gone and someone else may lead.
            self.lease = None;
            self.term = None;
        }
        let Some(lease) = self.lease else {
            return (now >= self.next_grant).then_some(Action::Grant {
                ttl_secs: self.config.ttl_secs,
            });
        };
        if now >= lease.next_keepalive {
            return Some(Action::KeepAlive { lease: lease.id });
        }
        if self.term.is_none() && now >= self.next_campaign {
            return Some(Action::Campaign { lease: lease.id });
        }
        None
    }

    /// When [`Election::poll_action`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.revoke.is_some() {
            return Some(Instant::ZERO);
        }
        if self.resigned {
            return None;
        }
        let Some(lease) = self.lease else {
            return Some(self.next_grant);
        };
        let campaign = self.term.is_none().then_some(self.next_campaign);
        [Some(lease.next_keepalive), Some(lease.expires), campaign]
            .into_iter()
            .flatten()
            .min()
    }

    /// etcd granted lease `id` for `ttl_secs` to a request sent at `sent`.
    pub fn on_granted(&mut self, sent: Instant, id: i64, ttl_secs: i64) {
        if self.resigned {
            self.revoke = Some(id);
            return;
        }
        self.lease = Some(HeldLease {
            id,
            expires: sent + Duration::from_secs(ttl_secs.max(0) as u64),
            next_keepalive: sent + self.config.keepalive_every,
        });
        self.term = None;
        self.next_campaign = sent;
    }

    /// etcd answered the keepalive of `lease` sent at `sent`: `ttl_secs` left, or `None` if
    /// the lease no longer exists.
    pub fn on_kept_alive(&mut self, sent: Instant, lease: i64, ttl_secs: Option<i64>) {
        let Some(held) = self.lease.as_mut().filter(|l| l.id == lease) else {
            return;
        };
        match ttl_secs {
            Some(ttl) if ttl > 0 => {
                held.expires = held.expires.max(sent + Duration::from_secs(ttl as u64));
                held.next_keepalive = sent + self.config.keepalive_every;
            }
            _ => {
                self.lease = None;
                self.term = None;
                self.next_grant = sent;
            }
        }
    }

    /// The outcome of a campaign sent at `sent` with `lease`.
    pub fn on_campaigned(&mut self, sent: Instant, lease: i64, outcome: Campaign) {
        if self.lease.is_none_or(|l| l.id != lease) {
            return;
        }
        match outcome {
            Campaign::Won { revision } => {
                self.term = Some(revision);
                self.leader = None;
            }
            // An earlier campaign whose answer was lost may have won: the key is ours.
            Campaign::Held {
                holder: Some((value, held_by, revision)),
            } if value == self.id && held_by == lease => {
                self.term = Some(revision);
                self.leader = None;
            }
            Campaign::Held { holder } => {
                self.leader = holder.map(|(value, _, _)| value);
                self.next_campaign = sent + self.config.campaign_every;
            }
        }
    }

    /// The call for `action` made at `now` failed (etcd unreachable, slow or refusing).
    pub fn on_failed(&mut self, now: Instant, action: Action) {
        let retry = now + self.config.retry_after;
        match action {
            Action::Grant { .. } => self.next_grant = retry,
            // The lease stays counted as expiring when it was; renewals are tried again.
            Action::KeepAlive { .. } => {
                if let Some(l) = self.lease.as_mut() {
                    l.next_keepalive = retry;
                }
            }
            Action::Campaign { .. } => self.next_campaign = retry,
            Action::Revoke { .. } => {}
        }
    }

    /// The log refused an append of this term: another replica leads now.
    pub fn on_deposed(&mut self, now: Instant) {
        self.term = None;
        self.next_campaign = now + self.config.campaign_every;
    }

    /// Gives up leadership and the lease for good: the next action revokes it, so a standby
    /// takes over at once instead of after the TTL.
    pub fn resign(&mut self) {
        self.resigned = true;
        self.term = None;
        if let Some(lease) = self.lease.take() {
            self.revoke = Some(lease.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ElectionConfig {
        ElectionConfig::with_ttl_secs(3)
    }

    fn s(ms: u64) -> Instant {
        Instant::from_nanos(5_000_000_000 + ms * 1_000_000)
    }

    /// Grants a lease of 3 s at `at` and campaigns right away.
    fn granted(e: &mut Election, at: Instant) -> i64 {
        assert_eq!(e.poll_action(at), Some(Action::Grant { ttl_secs: 3 }));
        e.on_granted(at, 77, 3);
        assert_eq!(e.poll_action(at), Some(Action::Campaign { lease: 77 }));
        77
    }

    #[test]
    fn a_replica_that_wins_leads_while_it_renews_its_lease() {
        let mut e = Election::new(b"a", config());
        let lease = granted(&mut e, s(0));
        e.on_campaigned(s(5), lease, Campaign::Won { revision: 9 });
        assert_eq!(e.leadership(s(5)), Some(Leadership { lease, revision: 9 }));
        assert_eq!(e.poll_action(s(5)), None);
        assert_eq!(e.poll_timeout(), Some(s(1000)));
        assert_eq!(e.poll_action(s(1000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(1000), lease, Some(3));
        // Leads until 3 s after the last renewal was sent.
        assert!(e.leadership(s(3999)).is_some());
        assert_eq!(e.leadership(s(4000)), None);
        assert_eq!(e.poll_action(s(2000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(2000), lease, Some(3));
        assert!(e.leadership(s(4500)).is_some());
    }

    #[test]
    fn a_leader_that_cannot_renew_stops_leading_when_its_lease_may_expire() {
        let mut e = Election::new(b"a", config());
        let lease = granted(&mut e, s(0));
        e.on_campaigned(s(0), lease, Campaign::Won { revision: 9 });
        for at in [1000, 1500, 2000, 2500] {
            assert_eq!(e.poll_action(s(at)), Some(Action::KeepAlive { lease }));
            e.on_failed(s(at), Action::KeepAlive { lease });
        }
        assert!(e.leadership(s(2999)).is_some());
        assert_eq!(e.poll_timeout(), Some(s(3000)));
        assert_eq!(e.leadership(s(3000)), None);
        // It starts over with a new lease, and must win a new term.
        assert_eq!(e.poll_action(s(3000)), Some(Action::Grant { ttl_secs: 3 }));
        e.on_granted(s(3000), 78, 3);
        assert_eq!(e.leadership(s(3000)), None);
        assert_eq!(e.poll_action(s(3000)), Some(Action::Campaign { lease: 78 }));
    }

    #[test]
    fn a_standby_campaigns_until_the_leader_key_is_gone() {
        let mut e = Election::new(b"b", config());
        let lease = granted(&mut e, s(0));
        let holder = Some((b"a".to_vec(), 12, 4));
        e.on_campaigned(
            s(0),
            lease,
            Campaign::Held {
                holder: holder.clone(),
            },
        );
        assert_eq!(e.known_leader(), Some(&b"a"[..]));
        assert_eq!(e.leadership(s(0)), None);
        assert_eq!(e.poll_action(s(999)), None);
        assert_eq!(e.poll_action(s(1000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(1000), lease, Some(3));
        assert_eq!(e.poll_action(s(1000)), Some(Action::Campaign { lease }));
        e.on_campaigned(s(1000), lease, Campaign::Held { holder });
        assert_eq!(e.poll_action(s(2000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(2000), lease, Some(3));
        assert_eq!(e.poll_action(s(2000)), Some(Action::Campaign { lease }));
        e.on_campaigned(s(2001), lease, Campaign::Won { revision: 30 });
        assert_eq!(e.leadership(s(2001)).map(|l| l.revision), Some(30));
        assert_eq!(e.known_leader(), None);
    }

    #[test]
    fn a_campaign_whose_answer_was_lost_is_recognised_as_won() {
        let mut e = Election::new(b"b", config());
        let lease = granted(&mut e, s(0));
        e.on_failed(s(0), Action::Campaign { lease });
        assert_eq!(e.poll_action(s(499)), None);
        assert_eq!(e.poll_action(s(500)), Some(Action::Campaign { lease }));
        // The key holds our id with our lease: the first campaign did create it.
        e.on_campaigned(
            s(500),
            lease,
            Campaign::Held {
                holder: Some((b"b".to_vec(), lease, 21)),
            },
        );
        assert_eq!(e.leadership(s(500)), Some(Leadership { lease, revision: 21 }));
        // Our id under another lease is an older term of ours, not this one.
        let mut e = Election::new(b"b", config());
        let lease = granted(&mut e, s(0));
        e.on_campaigned(
            s(0),
            lease,
            Campaign::Held {
                holder: Some((b"b".to_vec(), lease + 1, 21)),
            },
        );
        assert_eq!(e.leadership(s(0)), None);
    }

    #[test]
    fn a_lease_etcd_no_longer_has_ends_the_term_at_once() {
        let mut e = Election::new(b"a", config());
        let lease = granted(&mut e, s(0));
        e.on_campaigned(s(0), lease, Campaign::Won { revision: 9 });
        assert_eq!(e.poll_action(s(1000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(1000), lease, None);
        assert_eq!(e.leadership(s(1000)), None);
        assert_eq!(e.poll_action(s(1000)), Some(Action::Grant { ttl_secs: 3 }));
        // A late answer about an old lease changes nothing.
        e.on_granted(s(1001), 80, 3);
        e.on_kept_alive(s(1002), lease, Some(3));
        e.on_campaigned(s(1002), lease, Campaign::Won { revision: 10 });
        assert_eq!(e.leadership(s(1002)), None);
    }

    #[test]
    fn a_refused_append_deposes_and_resigning_revokes_once() {
        let mut e = Election::new(b"a", config());
        let lease = granted(&mut e, s(0));
        e.on_campaigned(s(0), lease, Campaign::Won { revision: 9 });
        e.on_deposed(s(10));
        assert_eq!(e.leadership(s(10)), None);
        assert_eq!(e.poll_action(s(10)), None);
        assert_eq!(e.poll_action(s(1000)), Some(Action::KeepAlive { lease }));
        e.on_kept_alive(s(1000), lease, Some(3));
        assert_eq!(e.poll_action(s(1010)), Some(Action::Campaign { lease }));
        e.resign();
        assert_eq!(e.poll_timeout(), Some(Instant::ZERO));
        assert_eq!(e.poll_action(s(1010)), Some(Action::Revoke { lease }));
        assert_eq!(e.poll_action(s(1010)), None);
        assert_eq!(e.poll_timeout(), None);
        // A grant answered after resigning is handed straight back.
        e.on_granted(s(1011), 81, 3);
        assert_eq!(e.poll_action(s(1011)), Some(Action::Revoke { lease: 81 }));
    }

    #[test]
    fn failed_grants_are_retried_later() {
        let mut e = Election::new(b"a", config());
        assert_eq!(e.poll_action(s(0)), Some(Action::Grant { ttl_secs: 3 }));
        e.on_failed(s(0), Action::Grant { ttl_secs: 3 });
        assert_eq!(e.poll_action(s(1)), None);
        assert_eq!(e.poll_timeout(), Some(s(500)));
        assert_eq!(e.poll_action(s(500)), Some(Action::Grant { ttl_secs: 3 }));
    }
}
