//! The JSON that etcd's v3 gRPC gateway speaks (`POST /v3/...`), checked against etcd 3.4.
//!
//! The gateway maps the protobuf messages of etcd's API to JSON with their proto field names:
//! keys and values are base64 strings, 64-bit integers are decimal strings, enums are their
//! names, and fields holding a default value (0, false, empty) are left out of answers. Only
//! the fields this crate uses are modelled; others are ignored, so a newer etcd adding fields
//! does not break us.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// Bytes, carried as a base64 string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&[u8]> for Bytes {
    fn from(b: &[u8]) -> Bytes {
        Bytes(b.to_vec())
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes(v)
    }
}

impl From<&str> for Bytes {
    fn from(s: &str) -> Bytes {
        Bytes(s.as_bytes().to_vec())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD
            .decode(s.as_bytes())
            .map(Bytes)
            .map_err(|e| de::Error::custom(format!("not base64 ({e})")))
    }
}

/// A protobuf int64: written as a decimal string, read from a string or a number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Int(pub i64);

impl Int {
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
}

impl Serialize for Int {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Int, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 64-bit integer, as a string or a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                i64::try_from(v)
                    .map(Int)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Int, E> {
                v.parse()
                    .map(Int)
                    .map_err(|_| E::custom(format!("not an integer: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ResponseHeader {
    pub revision: Int,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct KeyValue {
    pub key: Bytes,
    pub create_revision: Int,
    pub mod_revision: Int,
    pub version: Int,
    pub value: Bytes,
    /// The lease the key is attached to, 0 for none.
    pub lease: Int,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SortOrder {
    Ascend,
    Descend,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SortTarget {
    Key,
}

/// `/v3/kv/range`: `key` alone, or the keys in [`key`, `range_end`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RangeRequest {
    pub key: Bytes,
    #[serde(skip_serializing_if = "Bytes::is_empty")]
    pub range_end: Bytes,
    #[serde(skip_serializing_if = "Int::is_zero")]
    pub limit: Int,
    /// Read at this revision (0: the latest).
    #[serde(skip_serializing_if = "Int::is_zero")]
    pub revision: Int,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_order: Option<SortOrder>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_target: Option<SortTarget>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keys_only: bool,
}

impl RangeRequest {
    pub fn key(key: &[u8]) -> RangeRequest {
        RangeRequest {
            key: key.into(),
            ..RangeRequest::default()
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: &[u8]) -> RangeRequest {
        RangeRequest {
            key: prefix.into(),
            range_end: Bytes(prefix_end(prefix)),
            ..RangeRequest::default()
        }
    }
}

/// The end of the range of keys starting with `prefix`: `prefix` with its last byte that is
/// not 0xff incremented, and what follows dropped ("\0", every key, if there is none).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RangeResponse {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    /// More keys matched than `limit` let through.
    pub more: bool,
    pub count: Int,
}

/// `/v3/kv/put`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PutRequest {
    pub key: Bytes,
    pub value: Bytes,
    #[serde(skip_serializing_if = "Int::is_zero")]
    pub lease: Int,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PutResponse {
    pub header: ResponseHeader,
}

/// `/v3/kv/deleterange`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeleteRangeRequest {
    pub key: Bytes,
    #[serde(skip_serializing_if = "Bytes::is_empty")]
    pub range_end: Bytes,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DeleteRangeResponse {
    pub header: ResponseHeader,
    pub deleted: Int,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompareResult {
    Equal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompareTarget {
    Create,
    Value,
    Lease,
}

/// One condition of a transaction. The field matching `target` holds the operand (proto's
/// `target_union`); a missing key has create revision 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compare {
    pub result: CompareResult,
    pub target: CompareTarget,
    pub key: Bytes,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_revision: Option<Int>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<Int>,
}

impl Compare {
    fn on(target: CompareTarget, key: &[u8]) -> Compare {
        Compare {
            result: CompareResult::Equal,
            target,
            key: key.into(),
            create_revision: None,
            value: None,
            lease: None,
        }
    }

    /// `key` does not exist.
    pub fn absent(key: &[u8]) -> Compare {
        Compare::created_at(key, 0)
    }

    /// `key` was created at `revision` (and not deleted since).
    pub fn created_at(key: &[u8], revision: i64) -> Compare {
        Compare {
            create_revision: Some(Int(revision)),
            ..Compare::on(CompareTarget::Create, key)
        }
    }

    pub fn value_is(key: &[u8], value: &[u8]) -> Compare {
        Compare {
            value: Some(value.into()),
            ..Compare::on(CompareTarget::Value, key)
        }
    }

    pub fn lease_is(key: &[u8], lease: i64) -> Compare {
        Compare {
            lease: Some(Int(lease)),
            ..Compare::on(CompareTarget::Lease, key)
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestOp {
    RequestRange(RangeRequest),
    RequestPut(PutRequest),
    RequestDeleteRange(DeleteRangeRequest),
}

/// `/v3/kv/txn`: if every `compare` holds, `success` runs, else `failure`; atomically.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub success: Vec<RequestOp>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failure: Vec<RequestOp>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ResponseOp {
    pub response_range: Option<RangeResponse>,
    pub response_put: Option<PutResponse>,
    pub response_delete_range: Option<DeleteRangeResponse>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TxnResponse {
    pub header: ResponseHeader,
    pub succeeded: bool,
    /// One per operation of the branch that ran, in order.
    pub responses: Vec<ResponseOp>,
}

impl TxnResponse {
    /// The `i`-th response, if it is a range's.
    pub fn range(&self, i: usize) -> Option<&RangeResponse> {
        self.responses.get(i)?.response_range.as_ref()
    }
}

/// `/v3/lease/grant`: `ttl` in seconds; `id` 0 lets etcd choose.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LeaseGrantRequest {
    #[serde(rename = "TTL")]
    pub ttl: Int,
    #[serde(rename = "ID")]
    pub id: Int,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseGrantResponse {
    pub header: ResponseHeader,
    #[serde(rename = "ID")]
    pub id: Int,
    #[serde(rename = "TTL")]
    pub ttl: Int,
    pub error: String,
}

/// `/v3/lease/keepalive` and `/v3/lease/revoke`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LeaseIdRequest {
    #[serde(rename = "ID")]
    pub id: Int,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct LeaseKeepAliveResponse {
    pub header: ResponseHeader,
    #[serde(rename = "ID")]
    pub id: Int,
    /// Seconds left; 0 (left out) when the lease no longer exists.
    #[serde(rename = "TTL")]
    pub ttl: Int,
}

/// Keepalive is a streaming call: the gateway answers with one JSON object per message, each
/// `{"result": ...}` or `{"error": ...}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StreamItem<T> {
    pub result: Option<T>,
    pub error: Option<StreamError>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StreamError {
    pub grpc_code: i64,
    pub http_code: i64,
    pub message: String,
}

/// What the gateway answers instead when a call fails (any HTTP status).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    pub error: String,
    pub message: String,
    /// The gRPC status code: 5 not found, 14 unavailable, ...
    pub code: i64,
}

/// gRPC status NOT_FOUND, e.g. "etcdserver: requested lease not found".
pub const NOT_FOUND: i64 = 5;

/// gRPC status UNAUTHENTICATED: "etcdserver: invalid auth token" (it lapsed, or etcd
/// restarted).
pub const UNAUTHENTICATED: i64 = 16;

/// `/v3/auth/authenticate`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct AuthenticateRequest {
    pub name: String,
    pub password: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AuthenticateResponse {
    pub header: ResponseHeader,
    /// Sent as the `Authorization` header of later calls.
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_append_is_the_txn_json_etcd_expects() {
        let req = TxnRequest {
            compare: vec![
                Compare::value_is(b"/p/leader", b"a"),
                Compare::created_at(b"/p/leader", 12),
                Compare::lease_is(b"/p/leader", 7587),
                Compare::absent(b"/p/log/1"),
            ],
            success: vec![RequestOp::RequestPut(PutRequest {
                key: "/p/log/1".into(),
                value: "{}".into(),
                lease: Int(0),
            })],
            failure: vec![RequestOp::RequestRange(RangeRequest {
                keys_only: true,
                ..RangeRequest::key(b"/p/leader")
            })],
        };
        let golden = concat!(
            r#"{"compare":["#,
            r#"{"result":"EQUAL","target":"VALUE","key":"L3AvbGVhZGVy","value":"YQ=="},"#,
            r#"{"result":"EQUAL","target":"CREATE","key":"L3AvbGVhZGVy","create_revision":"12"},"#,
            r#"{"result":"EQUAL","target":"LEASE","key":"L3AvbGVhZGVy","lease":"7587"},"#,
            r#"{"result":"EQUAL","target":"CREATE","key":"L3AvbG9nLzE=","create_revision":"0"}],"#,
            r#""success":[{"request_put":{"key":"L3AvbG9nLzE=","value":"e30="}}],"#,
            r#""failure":[{"request_range":{"key":"L3AvbGVhZGVy","keys_only":true}}]}"#
        );
        assert_eq!(serde_json::to_string(&req).unwrap(), golden);
    }

    #[test]
    fn a_paged_prefix_range_and_lease_calls_encode_as_etcd_expects() {
        let req = RangeRequest {
            limit: Int(100),
            revision: Int(42),
            sort_order: Some(SortOrder::Descend),
            sort_target: Some(SortTarget::Key),
            ..RangeRequest::prefix(b"/p/log/")
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"key":"L3AvbG9nLw==","range_end":"L3AvbG9nMA==","limit":"100","revision":"42","sort_order":"DESCEND","sort_target":"KEY"}"#
        );
        let grant = LeaseGrantRequest {
            ttl: Int(2),
            id: Int(0),
        };
        assert_eq!(serde_json::to_string(&grant).unwrap(), r#"{"TTL":"2","ID":"0"}"#);
        let id = LeaseIdRequest { id: Int(-3) };
        assert_eq!(serde_json::to_string(&id).unwrap(), r#"{"ID":"-3"}"#);
    }

    #[test]
    fn prefix_ends_skip_trailing_ff_bytes() {
        assert_eq!(prefix_end(b"/a/"), b"/a0");
        assert_eq!(prefix_end(&[b'a', 0xff, 0xff]), b"b");
        assert_eq!(prefix_end(&[0xff]), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }

    // Answers captured from etcd 3.4.23.
    #[test]
    fn etcd_answers_decode_with_their_left_out_defaults() {
        let range: RangeResponse = serde_json::from_str(
            r#"{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}"#,
        )
        .unwrap();
        assert_eq!(range.header.revision, Int(2));
        assert_eq!(range.kvs[0].key.0, b"foo");
        assert_eq!(range.kvs[0].value.0, b"bar");
        assert_eq!(range.kvs[0].lease, Int(0));
        assert!(!range.more);
        let empty: RangeResponse =
            serde_json::from_str(r#"{"header":{"revision":"2","raft_term":"2"}}"#).unwrap();
        assert!(empty.kvs.is_empty());
        assert_eq!(empty.count, Int(0));

        // A campaign that lost: the failure branch read the leader key.
        let lost: TxnResponse = serde_json::from_str(
            r#"{"header":{"revision":"3","raft_term":"2"},"responses":[{"response_range":{"header":{"revision":"3"},"kvs":[{"key":"bGVhZA==","create_revision":"3","mod_revision":"3","version":"1","value":"QQ==","lease":"4111120195745327370"}],"count":"1"}}]}"#,
        )
        .unwrap();
        assert!(!lost.succeeded);
        let leader = &lost.range(0).unwrap().kvs[0];
        assert_eq!(
            (leader.value.0.as_slice(), leader.lease),
            (&b"A"[..], Int(4111120195745327370))
        );
        let won: TxnResponse = serde_json::from_str(
            r#"{"header":{"revision":"3"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}}]}"#,
        )
        .unwrap();
        assert!(won.succeeded && won.range(0).is_none());

        let grant: LeaseGrantResponse =
            serde_json::from_str(r#"{"header":{"revision":"1"},"ID":"4111120195745327365","TTL":"5"}"#)
                .unwrap();
        assert_eq!((grant.id, grant.ttl), (Int(4111120195745327365), Int(5)));
        let alive: StreamItem<LeaseKeepAliveResponse> = serde_json::from_str(
            r#"{"result":{"header":{"revision":"4"},"ID":"4111120195745327370","TTL":"3"}}"#,
        )
        .unwrap();
        assert_eq!(alive.result.unwrap().ttl, Int(3));
        // The keepalive of a lease that expired: no TTL.
        let gone: StreamItem<LeaseKeepAliveResponse> =
            serde_json::from_str(r#"{"result":{"header":{"revision":"5"},"ID":"4111120195745327370"}}"#)
                .unwrap();
        assert_eq!(gone.result.unwrap().ttl, Int(0));
        let err: ErrorBody = serde_json::from_str(
            r#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#,
        )
        .unwrap();
        assert_eq!(err.code, NOT_FOUND);
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        for bad in [
            r#"{"kvs":[{"key":"not base64!"}]}"#,
            r#"{"count":"many"}"#,
            r#"{"count":"99999999999999999999"}"#,
            r#"{"kvs":{}}"#,
            r#"[1,2]"#,
            "",
        ] {
            assert!(serde_json::from_str::<RangeResponse>(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::from_str::<Int>("17").unwrap(), Int(17));
        assert!(serde_json::from_str::<Int>("18446744073709551615").is_err());
    }
}
