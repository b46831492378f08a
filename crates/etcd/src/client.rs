//! A blocking client for the calls of etcd's v3 JSON gateway this crate makes. Every call has
//! a timeout, and every way it can fail is an [`EtcdError`] naming the endpoint.

use crate::gateway::{
    DeleteRangeRequest, DeleteRangeResponse, ErrorBody, Int, LeaseGrantRequest, LeaseGrantResponse,
    LeaseIdRequest, LeaseKeepAliveResponse, NOT_FOUND, PutRequest, PutResponse, RangeRequest, RangeResponse,
    StreamItem, TxnRequest, TxnResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Answers larger than this are refused (a log page is far smaller).
const MAX_ANSWER: u64 = 64 << 20;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    #[error("etcd at {endpoint} unreachable ({call}): {reason}")]
    Unreachable {
        endpoint: String,
        call: &'static str,
        reason: String,
    },
    #[error("etcd at {endpoint} did not answer {call} within {timeout:?}")]
    Timeout {
        endpoint: String,
        call: &'static str,
        timeout: Duration,
    },
    #[error("etcd at {endpoint} refused {call}: HTTP {status}, gRPC code {code}: {message}")]
    Refused {
        endpoint: String,
        call: &'static str,
        status: u16,
        code: i64,
        message: String,
    },
    #[error("etcd at {endpoint} answered {call} with something the v3 gateway does not send: {reason}")]
    BadAnswer {
        endpoint: String,
        call: &'static str,
        reason: String,
    },
}

impl EtcdError {
    pub fn endpoint(&self) -> &str {
        match self {
            EtcdError::BadEndpoint { endpoint, .. }
            | EtcdError::Unreachable { endpoint, .. }
            | EtcdError::Timeout { endpoint, .. }
            | EtcdError::Refused { endpoint, .. }
            | EtcdError::BadAnswer { endpoint, .. } => endpoint,
        }
    }

    /// Whether the call may have taken effect although it failed: etcd may have applied a
    /// request whose answer was lost or late.
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, EtcdError::Timeout { .. } | EtcdError::Unreachable { .. })
    }
}

/// A lease: keys attached to it are deleted when it expires or is revoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    /// Seconds, as granted (etcd may raise a very short TTL to its minimum).
    pub ttl_secs: i64,
}

/// One etcd endpoint, `http://host:port`. Cheap to clone: clones share connections.
#[derive(Clone, Debug)]
pub struct Client {
    endpoint: String,
    timeout: Duration,
    agent: ureq::Agent,
}

impl Client {
    /// A client for `endpoint` whose calls each give up after `timeout`. No call is made yet.
    pub fn new(endpoint: &str, timeout: Duration) -> Result<Client, EtcdError> {
        let endpoint = endpoint.trim_end_matches('/').to_string();
        let bad = |reason: &str| EtcdError::BadEndpoint {
            endpoint: endpoint.clone(),
            reason: reason.to_string(),
        };
        let Some(host) = endpoint.strip_prefix("http://") else {
            return Err(bad(
                "expected http://HOST:PORT (the gateway is reached over plain HTTP)",
            ));
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad("expected http://HOST:PORT, without a path"));
        }
        if timeout.is_zero() {
            return Err(bad("the call timeout must be positive"));
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Ok(Client {
            endpoint,
            timeout,
            agent: ureq::Agent::new_with_config(config),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// POSTs `request` to `path` and decodes the answer's body.
    fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        path: &'static str,
        request: &Q,
    ) -> Result<A, EtcdError> {
        let body = self.exchange(path, request)?;
        serde_json::from_slice(&body).map_err(|e| self.bad_answer(path, format!("{e}: {}", snippet(&body))))
    }

    fn exchange<Q: Serialize>(&self, path: &'static str, request: &Q) -> Result<Vec<u8>, EtcdError> {
        let json = serde_json::to_vec(request).expect("gateway requests always serialize");
        let url = format!("{}{}", self.endpoint, path);
        let mut answer = self
            .agent
            .post(&url)
            .content_type("application/json")
            .send(&json[..])
            .map_err(|e| self.transport(path, e))?;
        let status = answer.status().as_u16();
        let body = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .map_err(|e| self.transport(path, e))?;
        if status == 200 {
            return Ok(body);
        }
        let error: ErrorBody = serde_json::from_slice(&body).unwrap_or_default();
        let message = if error.message.is_empty() {
            snippet(&body)
        } else {
            error.message
        };
        Err(EtcdError::Refused {
            endpoint: self.endpoint.clone(),
            call: path,
            status,
            code: error.code,
            message,
        })
    }

    fn transport(&self, call: &'static str, e: ureq::Error) -> EtcdError {
        match e {
            ureq::Error::Timeout(_) => EtcdError::Timeout {
                endpoint: self.endpoint.clone(),
                call,
                timeout: self.timeout,
            },
            ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => EtcdError::Timeout {
                endpoint: self.endpoint.clone(),
                call,
                timeout: self.timeout,
            },
            ureq::Error::Protocol(e) => self.bad_answer(call, format!("not HTTP ({e})")),
            ureq::Error::BodyExceedsLimit(n) => self.bad_answer(call, format!("answer over {n} bytes")),
            e => EtcdError::Unreachable {
                endpoint: self.endpoint.clone(),
                call,
                reason: e.to_string(),
            },
        }
    }

    fn bad_answer(&self, call: &'static str, reason: String) -> EtcdError {
        EtcdError::BadAnswer {
            endpoint: self.endpoint.clone(),
            call,
            reason,
        }
    }

    pub fn range(&self, request: &RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.call("/v3/kv/range", request)
    }

    pub fn put(&self, request: &PutRequest) -> Result<PutResponse, EtcdError> {
        self.call("/v3/kv/put", request)
    }

    pub fn txn(&self, request: &TxnRequest) -> Result<TxnResponse, EtcdError> {
        self.call("/v3/kv/txn", request)
    }

    pub fn delete_range(&self, request: &DeleteRangeRequest) -> Result<DeleteRangeResponse, EtcdError> {
        self.call("/v3/kv/deleterange", request)
    }

    /// A new lease of `ttl_secs` seconds.
    pub fn grant(&self, ttl_secs: i64) -> Result<Lease, EtcdError> {
        const CALL: &str = "/v3/lease/grant";
        let r: LeaseGrantResponse = self.call(
            CALL,
            &LeaseGrantRequest {
                ttl: Int(ttl_secs),
                id: Int(0),
            },
        )?;
        if !r.error.is_empty() {
            return Err(EtcdError::Refused {
                endpoint: self.endpoint.clone(),
                call: CALL,
                status: 200,
                code: 0,
                message: r.error,
            });
        }
        if r.id.0 == 0 || r.ttl.0 <= 0 {
            return Err(self.bad_answer(CALL, format!("a lease without an id or a TTL ({r:?})")));
        }
        Ok(Lease {
            id: r.id.0,
            ttl_secs: r.ttl.0,
        })
    }

    /// Renews lease `id`: the seconds it has left, or `None` if it no longer exists.
    pub fn keep_alive(&self, id: i64) -> Result<Option<i64>, EtcdError> {
        const CALL: &str = "/v3/lease/keepalive";
        let body = self.exchange(CALL, &LeaseIdRequest { id: Int(id) })?;
        // A stream of one message per line; one request gets one message.
        let first = body
            .split(|&b| b == b'\n')
            .find(|line| !line.iter().all(u8::is_ascii_whitespace))
            .unwrap_or(&[]);
        let item: StreamItem<LeaseKeepAliveResponse> = serde_json::from_slice(first)
            .map_err(|e| self.bad_answer(CALL, format!("{e}: {}", snippet(&body))))?;
        match (item.result, item.error) {
            (_, Some(e)) if e.grpc_code == NOT_FOUND => Ok(None),
            (_, Some(e)) => Err(EtcdError::Refused {
                endpoint: self.endpoint.clone(),
                call: CALL,
                status: 200,
                code: e.grpc_code,
                message: e.message,
            }),
            (Some(r), None) => Ok((r.ttl.0 > 0).then_some(r.ttl.0)),
            (None, None) => Err(self.bad_answer(CALL, format!("no result: {}", snippet(&body)))),
        }
    }

    /// Revokes lease `id`, deleting its keys; a lease already gone is not an error.
    pub fn revoke(&self, id: i64) -> Result<(), EtcdError> {
        match self.call::<_, serde_json::Value>("/v3/lease/revoke", &LeaseIdRequest { id: Int(id) }) {
            Err(EtcdError::Refused { code: NOT_FOUND, .. }) => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

/// The start of an answer, for an error message.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
    if text.is_empty() {
        "(empty)".to_string()
    } else if body.len() > 200 {
        format!("{text}...")
    } else {
        text
    }
}
