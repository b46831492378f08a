//! The controller's log in etcd, appendable only by the leader of the term it was opened for.

use crate::Keys;
use crate::client::{Client, EtcdError};
use crate::election::Leadership;
use crate::gateway::{
    Compare, DeleteRangeRequest, Int, KeyValue, PutRequest, RangeRequest, RequestOp, SortOrder, SortTarget,
    TxnRequest,
};
use onepipe_proto::controller::store::{Event, Record, Store, StoreError};

/// Records per range call when loading.
const PAGE: i64 = 1000;

pub struct EtcdStore {
    client: Client,
    keys: Keys,
    id: Vec<u8>,
    term: Leadership,
    /// The sequence number of the next append, once known.
    next: Option<u64>,
    /// An append failed in a way that may have written it all the same: the log may hold an
    /// input the controller did not act on, so nothing more is appended until a reload.
    in_doubt: bool,
    page: i64,
}

impl EtcdStore {
    /// The log under `prefix`, appended to by replica `id` while `term` lasts.
    pub fn new(client: Client, prefix: &str, id: &str, term: Leadership) -> EtcdStore {
        EtcdStore {
            client,
            keys: Keys::new(prefix),
            id: id.as_bytes().to_vec(),
            term,
            next: None,
            in_doubt: false,
            page: PAGE,
        }
    }

    /// Loads the log `records` at a time (at least 1).
    pub fn with_page_size(mut self, records: u32) -> EtcdStore {
        self.page = i64::from(records.max(1));
        self
    }

    pub fn term(&self) -> Leadership {
        self.term
    }

    /// Every record of the log under `prefix`, oldest first, without needing to lead.
    pub fn read(client: &Client, prefix: &str) -> Result<Vec<Record>, StoreError> {
        read_log(client, &Keys::new(prefix), PAGE).map(|(_, records)| records)
    }

    fn where_(&self) -> String {
        format!("etcd at {} under {}", self.client.endpoint(), self.keys.prefix())
    }

    fn io(&self, e: EtcdError) -> StoreError {
        StoreError::Io {
            path: self.where_(),
            reason: e.to_string(),
        }
    }

    /// The sequence number after the last record.
    fn find_next(&self) -> Result<u64, StoreError> {
        let request = RangeRequest {
            limit: Int(1),
            sort_order: Some(SortOrder::Descend),
            sort_target: Some(SortTarget::Key),
            keys_only: true,
            ..RangeRequest::prefix(&self.keys.log_prefix())
        };
        let answer = self.client.range(&request).map_err(|e| self.io(e))?;
        let Some(last) = answer.kvs.first() else {
            return Ok(0);
        };
        self.keys
            .seq_of(&last.key.0)
            .map(|s| s + 1)
            .ok_or_else(|| corrupt(&self.client, &last.key.0, 0, "not a log key".to_string()))
    }

    /// Why the leader key no longer names our term.
    fn not_ours(&self, leader: Option<&KeyValue>) -> String {
        match leader {
            None => "no replica leads: this one's lease expired or was revoked".to_string(),
            Some(kv) if kv.value.0 == self.id => format!(
                "this replica ({}) leads again, in a later term (revision {}, not {})",
                String::from_utf8_lossy(&self.id),
                kv.create_revision.0,
                self.term.revision
            ),
            Some(kv) => format!(
                "{} leads since revision {}",
                String::from_utf8_lossy(&kv.value.0),
                kv.create_revision.0
            ),
        }
    }

    fn leads(&self, leader: Option<&KeyValue>) -> bool {
        leader.is_some_and(|kv| {
            kv.value.0 == self.id
                && kv.create_revision.0 == self.term.revision
                && kv.lease.0 == self.term.lease
        })
    }
}

impl EtcdStore {
    /// Runs `ops` and a put of `record` at the log's end in one transaction, while this
    /// replica's term lasts and the slot is free.
    fn write_at_end(&mut self, mut ops: Vec<RequestOp>, record: &Record) -> Result<(), StoreError> {
        if self.in_doubt {
            return Err(StoreError::Io {
                path: self.where_(),
                reason: "an earlier append may or may not have been written: reopen the service on \
                         this log before acting on anything else"
                    .to_string(),
            });
        }
        let seq = match self.next {
            Some(n) => n,
            None => self.find_next()?,
        };
        let (leader, key) = (self.keys.leader(), self.keys.log(seq));
        ops.push(RequestOp::RequestPut(PutRequest {
            key: key.as_slice().into(),
            value: serde_json::to_vec(record)
                .expect("records always serialize")
                .into(),
            lease: Int(0),
        }));
        let request = TxnRequest {
            compare: vec![
                Compare::value_is(&leader, &self.id),
                Compare::created_at(&leader, self.term.revision),
                Compare::lease_is(&leader, self.term.lease),
                Compare::absent(&key),
            ],
            success: ops,
            failure: vec![
                RequestOp::RequestRange(RangeRequest::key(&leader)),
                RequestOp::RequestRange(RangeRequest {
                    keys_only: true,
                    ..RangeRequest::key(&key)
                }),
            ],
        };
        let answer = match self.client.txn(&request) {
            Ok(a) => a,
            Err(e) => {
                // etcd may have applied it and the answer been lost.
                self.in_doubt = true;
                return Err(self.io(e));
            }
        };
        if answer.succeeded {
            self.next = Some(seq + 1);
            return Ok(());
        }
        let leader = answer.range(0).and_then(|r| r.kvs.first());
        if !self.leads(leader) {
            return Err(StoreError::NotLeader {
                store: self.where_(),
                reason: self.not_ours(leader),
            });
        }
        // Still our term, yet the slot is taken: our idea of the log's end is wrong.
        self.in_doubt = true;
        Err(StoreError::Io {
            path: self.where_(),
            reason: format!("log entry {seq} exists already: reopen the service on this log"),
        })
    }
}

impl Store for EtcdStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.write_at_end(Vec::new(), record)
    }

    /// Deletes every record and puts the snapshot after them, in one fenced transaction: the
    /// log's first key is then the snapshot's, past 0. A snapshot larger than etcd takes in one
    /// request (`--max-request-bytes`, 1.5 MiB by default) is refused, and the log stays whole.
    fn compact(&mut self, snapshot: &Record) -> Result<(), StoreError> {
        let seq = match self.next {
            Some(n) => n,
            None => self.find_next()?,
        };
        let delete = RequestOp::RequestDeleteRange(DeleteRangeRequest {
            key: self.keys.log_prefix().into(),
            range_end: self.keys.log(seq).into(),
        });
        self.write_at_end(vec![delete], snapshot)
    }

    fn load(&mut self) -> Result<Vec<Record>, StoreError> {
        let (first, records) = read_log(&self.client, &self.keys, self.page)?;
        self.next = Some(first + records.len() as u64);
        self.in_doubt = false;
        Ok(records)
    }
}

fn corrupt(client: &Client, key: &[u8], seq: u64, reason: String) -> StoreError {
    StoreError::Corrupt {
        path: format!(
            "etcd at {}, key {}",
            client.endpoint(),
            String::from_utf8_lossy(key)
        ),
        line: (seq as usize).saturating_add(1),
        reason,
    }
}

/// The log, a page at a time, all pages read at the revision of the first, and the sequence
/// number of its first record: 0, or a snapshot's (a compacted log).
fn read_log(client: &Client, keys: &Keys, page: i64) -> Result<(u64, Vec<Record>), StoreError> {
    let io = |e: EtcdError| StoreError::Io {
        path: format!("etcd at {} under {}", client.endpoint(), keys.prefix()),
        reason: e.to_string(),
    };
    let mut request = RangeRequest {
        limit: Int(page),
        ..RangeRequest::prefix(&keys.log_prefix())
    };
    let mut records: Vec<Record> = Vec::new();
    let mut first = None;
    loop {
        let answer = client.range(&request).map_err(io)?;
        if request.revision.is_zero() {
            request.revision = answer.header.revision;
        }
        for kv in &answer.kvs {
            let seq_of = keys.seq_of(&kv.key.0);
            let base = *first.get_or_insert(seq_of.unwrap_or(0));
            let expected = base.saturating_add(records.len() as u64);
            match seq_of {
                Some(seq) if seq == expected => {}
                Some(seq) => {
                    return Err(corrupt(
                        client,
                        &kv.key.0,
                        expected,
                        format!("record {expected} is missing (the next is {seq})"),
                    ));
                }
                None => return Err(corrupt(client, &kv.key.0, expected, "not a log key".to_string())),
            }
            let record: Record = serde_json::from_slice(&kv.value.0)
                .map_err(|e| corrupt(client, &kv.key.0, expected, e.to_string()))?;
            if records.is_empty() && base > 0 && !matches!(record.event, Event::Snapshot(_)) {
                let reason = format!(
                    "records 0 to {} are missing, and no snapshot replaces them",
                    base - 1
                );
                return Err(corrupt(client, &kv.key.0, expected, reason));
            }
            records.push(record);
        }
        if !answer.more {
            return Ok((first.unwrap_or(0), records));
        }
        let Some(last) = answer.kvs.last() else {
            return Err(io(EtcdError::BadAnswer {
                endpoint: client.endpoint().to_string(),
                call: "/v3/kv/range",
                reason: "more keys announced, but none given".to_string(),
            }));
        };
        let mut after = last.key.0.clone();
        after.push(0);
        request.key = after.into();
    }
}
