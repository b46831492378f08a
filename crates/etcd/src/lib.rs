//! etcd as the production backend of the controller's log, and leader election among
//! controller replicas (issue 6, items 2 and 3).
//!
//! - [`EtcdStore`]: the controller's log ([`onepipe_proto::controller::store::Store`]) in etcd, one
//!   key per record. Appends are fenced: etcd takes them only while the leader key still names
//!   the term that writes them, so a deposed controller cannot log an input, and
//!   [`onepipe_proto::controller::store::Service`] never acts on an input it could not log.
//! - [`Election`]: when to grant, renew and revoke the lease and when to campaign, sans-IO;
//!   [`Replica`] runs it against etcd.
//! - [`group`]: who leads a group, and clearing its log (for `onepipe up`).
//! - [`replica_loop`]: one controller replica as `onepipe controller` runs it: stands by, then
//!   serves as the controller while it leads.
//! - [`Client`]: the few calls of etcd's v3 JSON gateway (`/v3/kv/*`, `/v3/lease/*`) over
//!   HTTP or HTTPS, each with a timeout. The gateway, not gRPC, so that building needs no
//!   `protoc`. [`Connect`] says how to reach a secured etcd: TLS with client certificates,
//!   and etcd's user/password authentication (docs/udp.md, "Securing etcd").
//!
//! Keys, under a prefix shared by the replicas (e.g. `/onepipe/controller`):
//! - `<prefix>/leader`: the leader's id, attached to its lease;
//! - `<prefix>/log/<seq>`: record `seq` (zero-padded to 20 digits, so key order is log order),
//!   the record's JSON. A compacted log starts past 0, at a snapshot (`Store::compact`).

pub mod client;
pub mod connect;
pub mod election;
pub mod gateway;
pub mod group;
mod replica;
pub mod replica_loop;
mod store;
pub mod testing;

pub use client::{Client, EtcdError, Lease};
pub use connect::{Connect, Credentials, USER_FILE_ENV};
pub use election::{Action, Campaign, Election, ElectionConfig, Leadership};
pub use replica::Replica;
pub use store::EtcdStore;

/// The keys of one controller group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// `prefix` without a trailing `/`.
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn leader(&self) -> Vec<u8> {
        format!("{}/leader", self.prefix).into_bytes()
    }

    pub fn log_prefix(&self) -> Vec<u8> {
        format!("{}/log/", self.prefix).into_bytes()
    }

    pub fn log(&self, seq: u64) -> Vec<u8> {
        format!("{}/log/{seq:020}", self.prefix).into_bytes()
    }

    /// The sequence number of a log key.
    pub fn seq_of(&self, key: &[u8]) -> Option<u64> {
        let digits = key.strip_prefix(self.log_prefix().as_slice())?;
        if digits.len() != 20 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn log_keys_sort_in_log_order_and_parse_back() {
        let k = Keys::new("/onepipe/ctl/");
        assert_eq!(k.leader(), b"/onepipe/ctl/leader");
        assert_eq!(k.log(7), b"/onepipe/ctl/log/00000000000000000007");
        assert!(k.log(9) < k.log(10) && k.log(99_999) < k.log(u64::MAX));
        assert_eq!(k.seq_of(&k.log(123_456)), Some(123_456));
        assert_eq!(k.seq_of(&k.log(u64::MAX)), Some(u64::MAX));
        assert_eq!(k.seq_of(b"/onepipe/ctl/log/12"), None);
        assert_eq!(k.seq_of(b"/onepipe/ctl/log/0000000000000000000x"), None);
        assert_eq!(k.seq_of(b"/other/log/00000000000000000007"), None);
    }
}
