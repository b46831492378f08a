//! A blocking client for the calls of etcd's v3 JSON gateway this crate makes. Every call has
//! a timeout, and every way it can fail is an [`EtcdError`] naming the endpoint.
//!
//! With credentials, the client authenticates once and sends the token etcd gave with every
//! call; a token etcd no longer takes (a simple token lapses after 5 minutes unused, and with
//! every restart of etcd) is replaced once and the call retried.

use crate::connect::{Connect, Credentials, tls_config};
use crate::gateway::{
    AuthenticateRequest, AuthenticateResponse, DeleteRangeRequest, DeleteRangeResponse, ErrorBody, Int,
    LeaseGrantRequest, LeaseGrantResponse, LeaseIdRequest, LeaseKeepAliveResponse, NOT_FOUND, PutRequest,
    PutResponse, RangeRequest, RangeResponse, StreamItem, TxnRequest, TxnResponse, UNAUTHENTICATED,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Answers larger than this are refused (a log page is far smaller).
const MAX_ANSWER: u64 = 64 << 20;

/// Where etcd says a call needs a user: no token was sent.
const USER_EMPTY: &str = "user name is empty";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    #[error("etcd endpoint {endpoint:?}: {reason}")]
    BadEndpoint { endpoint: String, reason: String },
    #[error("etcd at {endpoint}: {what} {path}: {reason}")]
    BadFile {
        endpoint: String,
        what: &'static str,
        path: String,
        reason: String,
    },
    #[error("etcd at {endpoint} unreachable ({call}): {reason}")]
    Unreachable {
        endpoint: String,
        call: &'static str,
        reason: String,
    },
    #[error("etcd at {endpoint}: no TLS session ({call}): {reason}")]
    Tls {
        endpoint: String,
        call: &'static str,
        reason: String,
    },
    #[error(
        "etcd at {endpoint} refused {call}: it has authentication on and this client has no \
         credentials ({message}); name a credentials file (docs/udp.md, \"Securing etcd\")"
    )]
    NoCredentials {
        endpoint: String,
        call: &'static str,
        message: String,
    },
    #[error("etcd at {endpoint} refused user `{user}` of credentials file {path}: {message}")]
    BadCredentials {
        endpoint: String,
        user: String,
        path: String,
        message: String,
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
            | EtcdError::BadFile { endpoint, .. }
            | EtcdError::Unreachable { endpoint, .. }
            | EtcdError::Tls { endpoint, .. }
            | EtcdError::NoCredentials { endpoint, .. }
            | EtcdError::BadCredentials { endpoint, .. }
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

    /// etcd did not take the token sent: it lapsed, or etcd restarted. Nothing was applied.
    fn stale_token(&self) -> bool {
        matches!(
            self,
            EtcdError::Refused {
                code: UNAUTHENTICATED,
                ..
            }
        )
    }
}

/// A lease: keys attached to it are deleted when it expires or is revoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    /// Seconds, as granted (etcd may raise a very short TTL to its minimum).
    pub ttl_secs: i64,
}

/// One etcd endpoint. Cheap to clone: clones share connections and the auth token.
#[derive(Clone, Debug)]
pub struct Client {
    endpoint: String,
    timeout: Duration,
    agent: ureq::Agent,
    login: Option<Arc<Login>>,
}

/// What a client with credentials keeps: them, and the token they got.
struct Login {
    credentials: Credentials,
    token: Mutex<Option<String>>,
    authentications: AtomicU64,
}

/// The token stays out of logs.
impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for `connect` whose calls each give up after `timeout`. Its files (TLS,
    /// credentials) are read now; no call is made yet.
    pub fn new(connect: &Connect, timeout: Duration) -> Result<Client, EtcdError> {
        let endpoint = connect.endpoint.trim_end_matches('/').to_string();
        let bad = |reason: &str| EtcdError::BadEndpoint {
            endpoint: endpoint.clone(),
            reason: reason.to_string(),
        };
        const EXPECTED: &str = "expected http://HOST:PORT, or https://HOST:PORT over TLS";
        let (host, https) = match (
            endpoint.strip_prefix("http://"),
            endpoint.strip_prefix("https://"),
        ) {
            (Some(host), _) => (host, false),
            (_, Some(host)) => (host, true),
            _ => return Err(bad(EXPECTED)),
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad(&format!("{EXPECTED}, without a path")));
        }
        if timeout.is_zero() {
            return Err(bad("the call timeout must be positive"));
        }
        let files = &connect.files;
        let tls_files = files.ca_file.is_some() || files.cert_file.is_some() || files.key_file.is_some();
        if tls_files && !https {
            return Err(bad(
                "TLS files (CA, client certificate, key) need an https:// endpoint",
            ));
        }
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false);
        if https {
            config = config.tls_config(tls_config(&endpoint, files)?);
        }
        let login = match &files.user_file {
            Some(path) => Some(Arc::new(Login {
                credentials: Credentials::load(&endpoint, path)?,
                token: Mutex::new(None),
                authentications: AtomicU64::new(0),
            })),
            None => None,
        };
        Ok(Client {
            endpoint,
            timeout,
            agent: ureq::Agent::new_with_config(config.build()),
            login,
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
        self.authorized(path, |token| self.post(path, &json, token))
    }

    /// How many times this client (and its clones) got a token from etcd.
    pub fn authentications(&self) -> u64 {
        self.login
            .as_ref()
            .map_or(0, |l| l.authentications.load(Ordering::Relaxed))
    }

    /// Runs `attempt` with the current token (none without credentials); if etcd no longer
    /// takes that token, once more with a new one.
    fn authorized<T>(
        &self,
        call: &'static str,
        attempt: impl Fn(Option<&str>) -> Result<T, EtcdError>,
    ) -> Result<T, EtcdError> {
        let token = self.token(None)?;
        match attempt(token.as_deref()) {
            Err(e) if token.is_some() && e.stale_token() => {
                let fresh = self.token(token.as_deref())?;
                attempt(fresh.as_deref())
            }
            Err(EtcdError::Refused { code, message, .. })
                if token.is_none() && (code == UNAUTHENTICATED || message.contains(USER_EMPTY)) =>
            {
                Err(EtcdError::NoCredentials {
                    endpoint: self.endpoint.clone(),
                    call,
                    message,
                })
            }
            r => r,
        }
    }

    /// The token to send: none without credentials; else the one held, or a new one if none
    /// is held or the one held is `stale`. Clones wait for each other, so one lapsed token
    /// costs one authentication.
    fn token(&self, stale: Option<&str>) -> Result<Option<String>, EtcdError> {
        let Some(login) = &self.login else {
            return Ok(None);
        };
        let mut token = login.token.lock().unwrap_or_else(PoisonError::into_inner);
        if token.is_none() || token.as_deref() == stale {
            *token = Some(self.authenticate(login)?);
        }
        Ok(token.clone())
    }

    fn authenticate(&self, login: &Login) -> Result<String, EtcdError> {
        const CALL: &str = "/v3/auth/authenticate";
        let c = &login.credentials;
        let request = AuthenticateRequest {
            name: c.user.clone(),
            password: c.password.clone(),
        };
        let json = serde_json::to_vec(&request).expect("gateway requests always serialize");
        let body = match self.post(CALL, &json, None) {
            Err(EtcdError::Refused { code, message, .. }) if code != UNAUTHENTICATED => {
                return Err(EtcdError::BadCredentials {
                    endpoint: self.endpoint.clone(),
                    user: c.user.clone(),
                    path: c.path.clone(),
                    message,
                });
            }
            r => r?,
        };
        let answer: AuthenticateResponse = serde_json::from_slice(&body)
            .map_err(|e| self.bad_answer(CALL, format!("{e}: {}", snippet(&body))))?;
        if answer.token.is_empty() {
            return Err(self.bad_answer(CALL, "no token (is authentication on in etcd?)".into()));
        }
        login.authentications.fetch_add(1, Ordering::Relaxed);
        Ok(answer.token)
    }

    /// POSTs `json` to `path`, with `token` if given, and returns the answer's body.
    fn post(&self, path: &'static str, json: &[u8], token: Option<&str>) -> Result<Vec<u8>, EtcdError> {
        let url = format!("{}{}", self.endpoint, path);
        let mut request = self.agent.post(&url).content_type("application/json");
        if let Some(token) = token {
            request = request.header("Authorization", token);
        }
        let mut answer = request.send(json).map_err(|e| self.transport(path, e))?;
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
            // rustls reports a handshake that failed (a certificate refused by either side) as
            // invalid data on the connection.
            ureq::Error::Io(e)
                if self.endpoint.starts_with("https://") && e.kind() == std::io::ErrorKind::InvalidData =>
            {
                EtcdError::Tls {
                    endpoint: self.endpoint.clone(),
                    call,
                    reason: e.to_string(),
                }
            }
            e @ (ureq::Error::Tls(_) | ureq::Error::Rustls(_) | ureq::Error::TlsRequired) => EtcdError::Tls {
                endpoint: self.endpoint.clone(),
                call,
                reason: e.to_string(),
            },
            ureq::Error::BodyExceedsLimit(n) => self.bad_answer(call, format!("answer over {n} bytes")),
            // Under TLS 1.3 etcd refuses a client's certificate after the client has finished
            // its handshake: the client may find the connection closed, not hear why.
            ureq::Error::Io(e)
                if self.endpoint.starts_with("https://")
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                    ) =>
            {
                EtcdError::Unreachable {
                    endpoint: self.endpoint.clone(),
                    call,
                    reason: format!("{e} (did etcd refuse this client's certificate, or its lack of one?)"),
                }
            }
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
        let json = serde_json::to_vec(&LeaseIdRequest { id: Int(id) }).expect("always serializes");
        self.authorized(CALL, |token| {
            let body = self.post(CALL, &json, token)?;
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
        })
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
