//! What etcd's unavailability or nonsense looks like to a caller: typed errors that name the
//! endpoint, never a panic or a hang. Fake servers on loopback stand in for a broken etcd.
// These tests measure that a call gives up in time, on the real clock.
#![allow(clippy::disallowed_methods)]

use onepipe_etcd::gateway::RangeRequest;
use onepipe_etcd::{Client, Connect, ElectionConfig, EtcdError, EtcdStore, Leadership, Replica};
use onepipe_proto::controller::store::{Event, Record, Store, StoreError};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(300);

/// A server on loopback that reads a request on each of its first connections and answers it
/// with the next of `answers` (raw bytes); `None` never answers, until the client gave up. It
/// returns the requests it read.
fn fake_seq(answers: Vec<Option<&'static [u8]>>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for answer in answers {
            let Ok((mut conn, _)) = listener.accept() else {
                return requests;
            };
            conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then as much body as Content-Length says.
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
                if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            requests.push(String::from_utf8_lossy(&request).into_owned());
            match answer {
                Some(bytes) => {
                    let _ = conn.write_all(bytes);
                }
                // Hold the connection until the client hangs up.
                None => {
                    let _ = conn.read(&mut buf);
                }
            }
        }
        requests
    });
    (endpoint, server)
}

fn fake(answer: Option<&'static [u8]>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    fake_seq(vec![answer])
}

fn http(status: &str, body: &str) -> &'static [u8] {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    Box::leak(text.into_bytes().into_boxed_slice())
}

fn term() -> Leadership {
    Leadership {
        lease: 1,
        revision: 2,
    }
}

#[test]
fn an_unreachable_etcd_is_an_error_naming_it() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let client = Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap();
    let e = client.grant(2).unwrap_err();
    assert!(matches!(e, EtcdError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains(&endpoint), "{e}");
    // The store says where the log is and that it could not reach it.
    let mut store = EtcdStore::new(client.clone(), "/t", "a", term());
    match store.load() {
        Err(StoreError::Io { path, reason }) => {
            assert!(path.contains(&endpoint) && path.contains("/t"), "{path}");
            assert!(reason.contains("unreachable"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A replica that cannot reach etcd keeps trying and never leads.
    let mut r = Replica::new(client, "/t", "a", ElectionConfig::with_ttl_secs(2));
    assert!(r.step().is_err());
    assert!(r.leadership().is_none() && r.store().is_none());
}

#[test]
fn an_etcd_that_does_not_answer_times_out() {
    let (endpoint, server) = fake(None);
    let client = Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap();
    let started = std::time::Instant::now();
    let e = client.keep_alive(7).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        e,
        EtcdError::Timeout {
            endpoint: endpoint.clone(),
            call: "/v3/lease/keepalive",
            timeout: TIMEOUT
        }
    );
    assert!(e.outcome_unknown());
    server.join().unwrap();
}

#[test]
fn an_append_that_timed_out_stops_appends_until_the_log_is_reloaded() {
    // The append finds the end of the log (empty), then its write gets no answer.
    let empty = http("200 OK", r#"{"header":{"revision":"3"}}"#);
    let (endpoint, server) = fake_seq(vec![Some(empty), None, Some(empty)]);
    let mut store = EtcdStore::new(
        Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap(),
        "/t",
        "a",
        term(),
    );
    let record = Record {
        at_ns: 1,
        event: Event::Tick,
    };
    match store.append(&record) {
        Err(StoreError::Io { reason, .. }) => assert!(reason.contains("did not answer"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // It may have been written: no further append is even tried.
    match store.append(&record) {
        Err(StoreError::Io { reason, .. }) => assert!(reason.contains("reopen"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Reloading the log is what ends the doubt.
    assert_eq!(store.load().unwrap(), vec![]);
    server.join().unwrap();
}

#[test]
fn http_errors_and_bad_json_are_typed_errors() {
    let (endpoint, server) = fake(Some(http(
        "503 Service Unavailable",
        r#"{"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14}"#,
    )));
    let client = Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap();
    match client.grant(2).unwrap_err() {
        EtcdError::Refused {
            status: 503,
            code: 14,
            message,
            ..
        } => assert_eq!(message, "etcdserver: no leader"),
        other => panic!("{other:?}"),
    }
    server.join().unwrap();

    for (status, body) in [
        ("200 OK", "not json at all"),
        ("200 OK", r#"{"kvs":[{"key":"!!"}]}"#),
        (
            "200 OK",
            r#"{"kvs":[{"key":"L3QvbG9nLzAwMDAwMDAwMDAwMDAwMDAwMDAw","value":"bm90IGEgcmVjb3Jk"}]}"#,
        ),
        (
            "200 OK",
            r#"{"kvs":[{"key":"L3QvbG9nLzAwMDAwMDAwMDAwMDAwMDAwMDA1","value":"e30="}]}"#,
        ),
        ("200 OK", r#"{"more":true}"#),
        ("404 Not Found", "404 page not found"),
    ] {
        let (endpoint, server) = fake(Some(http(status, body)));
        let mut store = EtcdStore::new(
            Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap(),
            "/t",
            "a",
            term(),
        );
        let e = store.load().unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&endpoint), "{text}");
        match (status, body) {
            ("404 Not Found", _) => assert!(
                text.contains("HTTP 404") && text.contains("page not found"),
                "{text}"
            ),
            (_, b) if b.contains("bm90") => {
                assert!(matches!(e, StoreError::Corrupt { line: 1, .. }), "{e:?}")
            }
            // Key 5 first: a compacted log starts at its snapshot, so key 5 is read (and is
            // not a record).
            (_, b) if b.contains("e30") => {
                assert!(matches!(e, StoreError::Corrupt { line: 6, .. }), "{e:?}")
            }
            _ => assert!(text.contains("does not send"), "{text}"),
        }
        server.join().unwrap();
    }

    // Something that is not HTTP.
    let (endpoint, server) = fake(Some(b"SSH-2.0-OpenSSH\r\n"));
    let e = Client::new(&Connect::new(&endpoint), TIMEOUT)
        .unwrap()
        .revoke(3)
        .unwrap_err();
    assert!(
        matches!(e, EtcdError::BadAnswer { .. } | EtcdError::Unreachable { .. }),
        "{e:?}"
    );
    server.join().unwrap();
}

#[test]
fn endpoints_must_be_http_or_https_addresses() {
    for bad in [
        "127.0.0.1:2379",
        "ftp://127.0.0.1:2379",
        "http://",
        "https://",
        "http://h:1/v3",
    ] {
        let e = Client::new(&Connect::new(bad), TIMEOUT).unwrap_err();
        assert!(matches!(e, EtcdError::BadEndpoint { .. }), "{bad}: {e:?}");
        assert!(e.to_string().contains(bad), "{e}");
    }
    assert!(Client::new(&Connect::new("http://127.0.0.1:2379"), Duration::ZERO).is_err());
    assert!(Client::new(&Connect::new("https://127.0.0.1:2379"), TIMEOUT).is_ok());
    let mut tls_over_http = Connect::new("http://127.0.0.1:2379");
    tls_over_http.files.ca_file = Some("/ca.pem".into());
    let e = Client::new(&tls_over_http, TIMEOUT).unwrap_err();
    assert!(e.to_string().contains("need an https:// endpoint"), "{e}");
    assert_eq!(
        Client::new(&Connect::new("http://127.0.0.1:2379/"), TIMEOUT)
            .unwrap()
            .endpoint(),
        "http://127.0.0.1:2379"
    );
}

/// A log whose first key is past 0 is a compacted one, and must start with a snapshot: a record
/// there means the records before it are missing.
#[test]
fn a_log_starting_past_0_without_a_snapshot_is_refused() {
    // Key /t/log/00000000000000000005 holding {"at_ns":1,"event":"Tick"}.
    let body = r#"{"kvs":[{"key":"L3QvbG9nLzAwMDAwMDAwMDAwMDAwMDAwMDA1","value":"eyJhdF9ucyI6MSwiZXZlbnQiOiJUaWNrIn0="}]}"#;
    let (endpoint, server) = fake(Some(http("200 OK", body)));
    let mut store = EtcdStore::new(
        Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap(),
        "/t",
        "a",
        term(),
    );
    let e = store.load().unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt { line: 6, ref reason, .. } if reason.contains("no snapshot")),
        "{e:?}"
    );
    server.join().unwrap();
}

/// A credentials file of mode 600 in a directory of its own, removed when dropped.
struct UserFile(std::path::PathBuf);

impl UserFile {
    fn new(test: &str) -> UserFile {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("onepipe-etcd-faults-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("user");
        std::fs::write(&path, "user = \"root\"\npassword = \"secret\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        UserFile(path)
    }

    fn client(&self, endpoint: &str) -> Client {
        let mut connect = Connect::new(endpoint);
        connect.files.user_file = Some(self.0.clone());
        Client::new(&connect, TIMEOUT).unwrap()
    }
}

impl Drop for UserFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

fn header<'a>(request: &'a str, name: &str) -> Option<&'a str> {
    request.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A token etcd no longer takes (it lapsed, or etcd restarted) is replaced once, and the call
/// made again with the new one; the password goes only to /v3/auth/authenticate.
#[test]
fn a_lapsed_token_is_renewed_once_and_the_call_retried() {
    let stale =
        r#"{"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16}"#;
    let (endpoint, server) = fake_seq(vec![
        Some(http("200 OK", r#"{"header":{"revision":"1"},"token":"first.1"}"#)),
        Some(http("401 Unauthorized", stale)),
        Some(http(
            "200 OK",
            r#"{"header":{"revision":"1"},"token":"second.2"}"#,
        )),
        Some(http("200 OK", r#"{"header":{"revision":"1"},"count":"0"}"#)),
    ]);
    let user = UserFile::new("renew");
    let client = user.client(&endpoint);
    let answer = client.range(&RangeRequest::key(b"/k")).unwrap();
    assert!(answer.kvs.is_empty());
    assert_eq!(client.authentications(), 2);
    let requests = server.join().unwrap();
    assert_eq!(requests.len(), 4);
    assert!(
        requests[0].starts_with("POST /v3/auth/authenticate "),
        "{}",
        requests[0]
    );
    assert!(requests[0].contains(r#""name":"root""#) && requests[0].contains("secret"));
    assert_eq!(header(&requests[0], "authorization"), None);
    assert!(requests[1].starts_with("POST /v3/kv/range "), "{}", requests[1]);
    assert_eq!(header(&requests[1], "authorization"), Some("first.1"));
    assert_eq!(header(&requests[3], "authorization"), Some("second.2"));
    assert!(
        requests[1..]
            .iter()
            .all(|r| r.contains("/v3/auth/") || !r.contains("secret"))
    );
}

/// A token that is still refused after one renewal is an error, not a loop.
#[test]
fn a_token_refused_twice_is_an_error() {
    let stale = r#"{"message":"etcdserver: invalid auth token","code":16}"#;
    let token = r#"{"token":"t.1"}"#;
    let (endpoint, server) = fake_seq(vec![
        Some(http("200 OK", token)),
        Some(http("401 Unauthorized", stale)),
        Some(http("200 OK", token)),
        Some(http("401 Unauthorized", stale)),
    ]);
    let user = UserFile::new("twice");
    let e = user.client(&endpoint).keep_alive(7).unwrap_err();
    assert!(matches!(e, EtcdError::Refused { code: 16, .. }), "{e:?}");
    assert_eq!(server.join().unwrap().len(), 4);
}

#[test]
fn a_wrong_password_and_missing_credentials_are_errors_that_say_so() {
    let failed = r#"{"message":"etcdserver: authentication failed, invalid user ID or password","code":3}"#;
    let (endpoint, server) = fake(Some(http("400 Bad Request", failed)));
    let user = UserFile::new("wrong");
    let e = user.client(&endpoint).grant(5).unwrap_err();
    assert!(matches!(e, EtcdError::BadCredentials { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("`root`") && text.contains(&user.0.display().to_string()),
        "{text}"
    );
    assert!(
        text.contains("invalid user ID or password") && !text.contains("secret"),
        "{text}"
    );
    server.join().unwrap();

    let empty = r#"{"message":"etcdserver: user name is empty","code":3}"#;
    let (endpoint, server) = fake(Some(http("400 Bad Request", empty)));
    let client = Client::new(&Connect::new(&endpoint), TIMEOUT).unwrap();
    let e = client.put(&Default::default()).unwrap_err();
    assert!(matches!(e, EtcdError::NoCredentials { .. }), "{e:?}");
    assert!(e.to_string().contains("Securing etcd"), "{e}");
    server.join().unwrap();
}
