//! A controller replica taking part in the election: [`Election`] driven against etcd.
// This is the I/O layer: it reads the clock to time lease renewals (a lease's expiry is real
// time at etcd) and sleeps between calls while it waits to lead.
#![allow(clippy::disallowed_methods)]

use crate::Keys;
use crate::client::{Client, EtcdError};
use crate::election::{Action, Campaign, Election, ElectionConfig, Leadership};
use crate::gateway::{Compare, Int, PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::store::EtcdStore;
use onepipe_wire::Instant;

pub struct Replica {
    client: Client,
    keys: Keys,
    id: String,
    election: Election,
    started: std::time::Instant,
}

impl Replica {
    /// Replica `id` of the controller group under `prefix`. It does nothing until
    /// [`Replica::step`].
    pub fn new(client: Client, prefix: &str, id: &str, config: ElectionConfig) -> Replica {
        Replica {
            client,
            keys: Keys::new(prefix),
            id: id.to_string(),
            election: Election::new(id.as_bytes(), config),
            started: std::time::Instant::now(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The replica's clock: time since it was created.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// Makes the calls due now: lease grant and renewal, campaign, revocation. A call that
    /// fails is tried again later; the first failure is returned.
    pub fn step(&mut self) -> Result<(), EtcdError> {
        // A handful of calls at most are due at once (grant, then campaign).
        for _ in 0..4 {
            let sent = self.now();
            let Some(action) = self.election.poll_action(sent) else {
                break;
            };
            if let Err(e) = self.perform(sent, action) {
                self.election.on_failed(self.now(), action);
                return Err(e);
            }
        }
        Ok(())
    }

    fn perform(&mut self, sent: Instant, action: Action) -> Result<(), EtcdError> {
        match action {
            Action::Grant { ttl_secs } => {
                let lease = self.client.grant(ttl_secs as i64)?;
                self.election.on_granted(sent, lease.id, lease.ttl_secs);
            }
            Action::KeepAlive { lease } => {
                let left = self.client.keep_alive(lease)?;
                self.election.on_kept_alive(sent, lease, left);
            }
            Action::Campaign { lease } => {
                let outcome = self.campaign(lease)?;
                self.election.on_campaigned(sent, lease, outcome);
            }
            Action::Revoke { lease } => self.client.revoke(lease)?,
        }
        Ok(())
    }

    /// Creates the leader key with `lease` if it does not exist; else reads who holds it.
    fn campaign(&self, lease: i64) -> Result<Campaign, EtcdError> {
        let leader = self.keys.leader();
        let request = TxnRequest {
            compare: vec![Compare::absent(&leader)],
            success: vec![RequestOp::RequestPut(PutRequest {
                key: leader.as_slice().into(),
                value: self.id.as_str().into(),
                lease: Int(lease),
            })],
            failure: vec![RequestOp::RequestRange(RangeRequest::key(&leader))],
        };
        let answer = self.client.txn(&request)?;
        if answer.succeeded {
            // The put is the transaction's only write: the key was created at its revision.
            let revision = answer.header.revision.0;
            if revision <= 0 {
                return Err(EtcdError::BadAnswer {
                    endpoint: self.client.endpoint().to_string(),
                    call: "/v3/kv/txn",
                    reason: "a transaction that wrote, without a revision".to_string(),
                });
            }
            return Ok(Campaign::Won { revision });
        }
        let holder = answer
            .range(0)
            .and_then(|r| r.kvs.first())
            .map(|kv| (kv.value.0.clone(), kv.lease.0, kv.create_revision.0));
        Ok(Campaign::Held { holder })
    }

    /// This replica's term, if it leads now.
    pub fn leadership(&self) -> Option<Leadership> {
        self.election.leadership(self.now())
    }

    /// Who held the leader key at this replica's last campaign, if not itself.
    pub fn known_leader(&self) -> Option<String> {
        self.election
            .known_leader()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// How long until [`Replica::step`] has something to do.
    pub fn until_next_step(&self) -> std::time::Duration {
        let now = self.now();
        let at = self.election.poll_timeout().unwrap_or(Instant::MAX);
        std::time::Duration::from_nanos(at.saturating_since(now).as_nanos())
    }

    /// Steps until this replica leads or `timeout` has passed, sleeping in between. Calls that
    /// fail are retried; the last failure is returned if it never led.
    pub fn wait_for_leadership(
        &mut self,
        timeout: std::time::Duration,
    ) -> Result<Option<Leadership>, EtcdError> {
        let deadline = std::time::Instant::now() + timeout;
        let mut last = Ok(None);
        loop {
            if let Err(e) = self.step() {
                last = Err(e);
            }
            if let Some(term) = self.leadership() {
                return Ok(Some(term));
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return last;
            }
            std::thread::sleep(self.until_next_step().min(deadline - now));
        }
    }

    /// The log, fenced with this replica's current term; `None` if it does not lead.
    pub fn store(&self) -> Option<EtcdStore> {
        let term = self.leadership()?;
        Some(EtcdStore::new(
            self.client.clone(),
            self.keys.prefix(),
            &self.id,
            term,
        ))
    }

    /// The log refused an append ([`onepipe_proto::controller::store::StoreError::NotLeader`]):
    /// stop leading, and campaign again later as a standby.
    pub fn deposed(&mut self) {
        self.election.on_deposed(self.now());
    }

    /// Gives up leadership for good and revokes the lease, so that a standby can take over
    /// at once.
    pub fn resign(&mut self) -> Result<(), EtcdError> {
        self.election.resign();
        self.step()
    }
}
