//! MSET, INCR and its kin, SNAPSHOT, and MULTI / EXEC / DISCARD through the server, with the
//! `redis` client crate and with raw sockets where the exact bytes and their order matter.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::thread;

use common::{TestServer, exchange, send_and_read_to_close, wait_for_connections};
use onepipe_kv::{Bytes, Command, MemStore, Reply, ServeConfig, Snapshot, Store, StoreError, StoreInfo};
use redis::{Connection, Value};

fn query(connection: &mut Connection, words: &[&str]) -> redis::RedisResult<Value> {
    let mut command = redis::cmd(words[0]);
    for word in &words[1..] {
        command.arg(*word);
    }
    command.query(connection)
}

fn ok(connection: &mut Connection, words: &[&str]) -> Value {
    query(connection, words).unwrap_or_else(|error| panic!("{words:?}: {error}"))
}

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn queued() -> Value {
    Value::SimpleString("QUEUED".into())
}

/// The error line the client got: code and text.
fn error_of(connection: &mut Connection, words: &[&str]) -> String {
    let error = query(connection, words).expect_err("an error reply");
    format!("{} {}", error.code().unwrap_or("?"), error.detail().unwrap_or(""))
}

/// Requests as a client library sends them: one RESP array of bulk strings each.
fn resp(requests: &[&[&str]]) -> Vec<u8> {
    let mut out = Vec::new();
    for words in requests {
        out.extend(format!("*{}\r\n", words.len()).bytes());
        for word in *words {
            out.extend(format!("${}\r\n{word}\r\n", word.len()).bytes());
        }
    }
    out
}

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

#[test]
fn mset_then_mget() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["MSET", "a", "1", "b", "2", "a", "3"]), Value::Okay);
    assert_eq!(
        ok(&mut c, &["MGET", "a", "b", "c"]),
        Value::Array(vec![bulk("3"), bulk("2"), Value::Nil])
    );
    for words in [&["MSET"][..], &["MSET", "a"], &["MSET", "a", "1", "b"]] {
        assert_eq!(
            error_of(&mut c, words),
            "ERR wrong number of arguments for 'mset' command"
        );
    }
    let value = "v".repeat(MemStore::VALUE_BYTES_MAX + 1);
    assert!(error_of(&mut c, &["MSET", "a", "x", "b", &value]).starts_with("ERR value of"));
    assert_eq!(
        ok(&mut c, &["GET", "a"]),
        bulk("3"),
        "an oversize MSET sets nothing"
    );
}

#[test]
fn incr_decr_and_their_errors() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["INCR", "n"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["INCRBY", "n", "10"]), Value::Int(11));
    assert_eq!(ok(&mut c, &["DECR", "n"]), Value::Int(10));
    assert_eq!(ok(&mut c, &["DECRBY", "n", "25"]), Value::Int(-15));
    assert_eq!(ok(&mut c, &["GET", "n"]), bulk("-15"));
    // Bad arguments, refused when parsed.
    assert_eq!(error_of(&mut c, &["INCRBY", "n", "1.5"]), NOT_AN_INTEGER);
    assert_eq!(error_of(&mut c, &["INCRBY", "n", "+1"]), NOT_AN_INTEGER);
    assert_eq!(
        error_of(&mut c, &["DECRBY", "n", "9223372036854775808"]),
        NOT_AN_INTEGER
    );
    assert_eq!(
        error_of(&mut c, &["DECRBY", "n", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    assert_eq!(
        error_of(&mut c, &["INCR"]),
        "ERR wrong number of arguments for 'incr' command"
    );
    // Bad stored values and overflow, refused by the store; the value stays.
    assert_eq!(ok(&mut c, &["SET", "s", "12 "]), Value::Okay);
    assert_eq!(error_of(&mut c, &["INCR", "s"]), NOT_AN_INTEGER);
    assert_eq!(ok(&mut c, &["GET", "s"]), bulk("12 "));
    assert_eq!(ok(&mut c, &["SET", "max", "9223372036854775807"]), Value::Okay);
    assert_eq!(
        error_of(&mut c, &["INCR", "max"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(ok(&mut c, &["GET", "max"]), bulk("9223372036854775807"));
    assert_eq!(ok(&mut c, &["SET", "min", "-9223372036854775807"]), Value::Okay);
    assert_eq!(ok(&mut c, &["DECR", "min"]), Value::Int(i64::MIN));
    assert_eq!(
        error_of(&mut c, &["DECR", "min"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn multi_exec_answers_every_reply_in_an_array() {
    let server = TestServer::memory();
    // Raw bytes: the client library turns an error inside an array into an error of the whole.
    let mut stream = server.raw();
    exchange(
        &mut stream,
        &resp(&[
            &["SET", "s", "text"],
            &["MULTI"],
            &["SET", "k", "v"],
            &["INCR", "n"],
            &["INCR", "s"],
            &["PING"],
            &["MGET", "k", "n"],
            &["EXEC"],
        ]),
        b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
          *5\r\n+OK\r\n:1\r\n-ERR value is not an integer or out of range\r\n+PONG\r\n\
          *2\r\n$1\r\nv\r\n$1\r\n1\r\n",
    );
    // The failed command did not stop the others, as in Redis.
    let mut c = server.client();
    assert_eq!(
        ok(&mut c, &["MGET", "k", "n", "s"]),
        Value::Array(vec![bulk("v"), bulk("1"), bulk("text")])
    );
}

#[test]
fn an_atomic_pipeline_of_the_client_library() {
    let server = TestServer::memory();
    let mut c = server.client();
    let (set, first, second, both): (String, i64, i64, Vec<Option<String>>) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("a")
        .arg("5")
        .cmd("INCRBY")
        .arg("a")
        .arg("3")
        .cmd("DECR")
        .arg("b")
        .cmd("MGET")
        .arg("a")
        .arg("b")
        .query(&mut c)
        .unwrap();
    assert_eq!((set.as_str(), first, second), ("OK", 8, -1));
    assert_eq!(both, [Some("8".into()), Some("-1".into())]);
}

#[test]
fn discard_and_misplaced_control_commands() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(error_of(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(error_of(&mut c, &["DISCARD"]), "ERR DISCARD without MULTI");
    assert_eq!(error_of(&mut c, &["WATCH", "k"]), "ERR WATCH is not supported");
    assert_eq!(error_of(&mut c, &["UNWATCH"]), "ERR UNWATCH is not supported");
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    assert_eq!(ok(&mut c, &["SET", "k", "v"]), queued());
    assert_eq!(error_of(&mut c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(
        error_of(&mut c, &["WATCH", "k"]),
        "ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(ok(&mut c, &["DISCARD"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    // Refused nested MULTI and WATCH do not doom a transaction, as in Redis.
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    assert_eq!(error_of(&mut c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(ok(&mut c, &["SET", "k", "w"]), queued());
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(vec![Value::Okay]));
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("w"));
}

#[test]
fn a_request_that_does_not_parse_aborts_the_transaction() {
    let server = TestServer::memory();
    let mut c = server.client();
    let long_key = "k".repeat(MemStore::KEY_BYTES_MAX + 1);
    let bad_requests: [&[&str]; 5] = [
        &["BOGUS", "x"],
        &["GET"],
        &["INCRBY", "n", "x"],
        &["GET", &long_key],
        &["PING", "a", "b"],
    ];
    for bad in bad_requests {
        assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
        assert_eq!(ok(&mut c, &["SET", "k", "v"]), queued());
        assert!(query(&mut c, bad).is_err(), "{bad:?} is answered with its error");
        // Later requests are still answered QUEUED, as Redis does.
        assert_eq!(ok(&mut c, &["INCR", "n"]), queued());
        assert_eq!(
            error_of(&mut c, &["EXEC"]),
            "EXECABORT Transaction discarded because of previous errors."
        );
        assert_eq!(
            ok(&mut c, &["MGET", "k", "n"]),
            Value::Array(vec![Value::Nil, Value::Nil])
        );
    }
}

#[test]
fn a_full_queue_aborts_the_transaction() {
    let config = ServeConfig {
        batch_commands_max: 4,
        ..ServeConfig::default()
    };
    let server = TestServer::start(Arc::new(MemStore::new()), config);
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    for _ in 0..4 {
        assert_eq!(ok(&mut c, &["INCR", "n"]), queued());
    }
    assert_eq!(
        error_of(&mut c, &["INCR", "n"]),
        "ERR MULTI queue is full: at most 4 commands"
    );
    assert!(error_of(&mut c, &["EXEC"]).starts_with("EXECABORT"));
    assert_eq!(ok(&mut c, &["GET", "n"]), Value::Nil);
    // Four fit.
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    for _ in 0..4 {
        assert_eq!(ok(&mut c, &["INCR", "n"]), queued());
    }
    let counts: Vec<Value> = (1..=4).map(Value::Int).collect();
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(counts));
}

#[test]
fn a_client_that_leaves_inside_multi_applies_nothing() {
    let server = TestServer::memory();
    // Left after queueing; and left in the middle of the EXEC request itself.
    let tails: [&[u8]; 2] = [b"", b"*1\r\n$4\r\nEX"];
    for tail in tails {
        let mut stream = server.raw();
        exchange(
            &mut stream,
            &resp(&[&["MULTI"], &["SET", "k", "v"], &["INCR", "n"]]),
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n",
        );
        stream.write_all(tail).unwrap();
        drop(stream);
        // The server has seen the close once it no longer counts the connection.
        wait_for_connections(&server, 0);
    }
    // QUIT inside MULTI closes at once, as in Redis, and the queue goes with the connection.
    let answer = send_and_read_to_close(
        &mut server.raw(),
        &resp(&[&["MULTI"], &["SET", "k", "v"], &["QUIT"], &["EXEC"]]),
    );
    assert_eq!(answer, b"+OK\r\n+QUEUED\r\n+OK\r\n");
    wait_for_connections(&server, 0);
    let mut c = server.client();
    assert_eq!(
        ok(&mut c, &["MGET", "k", "n"]),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
    // The next connection starts outside MULTI.
    assert_eq!(error_of(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
}

#[test]
fn pipelined_transactions_keep_the_order_of_replies() {
    let requests = resp(&[
        &["SET", "a", "1"],
        &["MULTI"],
        &["INCR", "a"],
        &["GET", "a"],
        &["EXEC"],
        &["GET", "a"],
        &["INCR", "a"],
        &["MULTI"],
        &["SET", "b", "x"],
        &["DISCARD"],
        &["GET", "b"],
        &["MULTI"],
        &["INCR", "a"],
        &["EXEC"],
        &["MULTI"],
        &["EXEC"],
        &["GET", "a"],
    ]);
    let expected: &[u8] = b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:2\r\n$1\r\n2\r\n$1\r\n2\r\n:3\r\n\
        +OK\r\n+QUEUED\r\n+OK\r\n$-1\r\n+OK\r\n+QUEUED\r\n*1\r\n:4\r\n+OK\r\n*0\r\n$1\r\n4\r\n";
    // Batches cut anywhere, transactions spanning them included.
    for batch_commands_max in [1024, 3, 2] {
        let config = ServeConfig {
            batch_commands_max,
            ..ServeConfig::default()
        };
        let server = TestServer::start(Arc::new(MemStore::new()), config);
        exchange(&mut server.raw(), &requests, expected);
        // The same, one byte per write: the transaction spans reads.
        let mut stream = server.raw();
        exchange(&mut stream, &resp(&[&["DEL", "a", "b"]]), b":1\r\n");
        for byte in &requests {
            stream.write_all(std::slice::from_ref(byte)).unwrap();
        }
        exchange(&mut stream, b"", expected);
    }
}

/// `SNAPSHOT` as the client decodes it: `(ts, keys, digest)`.
fn snapshot(c: &mut Connection) -> (i64, i64, String) {
    let Value::Array(items) = ok(c, &["SNAPSHOT"]) else {
        panic!("SNAPSHOT answers an array")
    };
    let [Value::Int(ts), Value::Int(keys), Value::BulkString(digest)] = &items[..] else {
        panic!("[ts, keys, digest]: {items:?}")
    };
    let digest = String::from_utf8(digest.clone()).unwrap();
    assert_eq!(digest.len(), 16, "{digest}");
    assert!(
        digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{digest}"
    );
    (*ts, *keys, digest)
}

/// `SNAPSHOT DUMP` as a [`Snapshot`], checking the shape and the order.
fn dump(c: &mut Connection) -> Snapshot {
    let Value::Array(items) = ok(c, &["SNAPSHOT", "DUMP"]) else {
        panic!("SNAPSHOT DUMP answers an array")
    };
    let [Value::Int(ts), Value::Array(flat)] = &items[..] else {
        panic!("[ts, [k, v, ...]]: {items:?}")
    };
    assert_eq!(flat.len() % 2, 0);
    let mut keys = Vec::new();
    let mut pairs = std::collections::BTreeMap::new();
    for pair in flat.chunks(2) {
        let [Value::BulkString(key), Value::BulkString(value)] = pair else {
            panic!("bulk keys and values: {pair:?}")
        };
        keys.push(key.clone());
        pairs.insert(Bytes::from(key.clone()), Bytes::from(value.clone()));
    }
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted by key: {keys:?}");
    Snapshot {
        ts: u64::try_from(*ts).unwrap(),
        pairs,
    }
}

#[test]
fn snapshot_shapes_and_a_digest_of_the_contents() {
    let server = TestServer::memory();
    let mut c = server.client();
    let (ts_empty, keys, digest_empty) = snapshot(&mut c);
    assert_eq!(keys, 0);
    assert_eq!(
        dump(&mut c),
        Snapshot {
            ts: ts_empty as u64,
            pairs: Default::default()
        }
    );

    assert_eq!(ok(&mut c, &["MSET", "b", "2", "a", "1", "c", "3"]), Value::Okay);
    let (ts, keys, digest) = snapshot(&mut c);
    assert!(ts > ts_empty, "{ts} after {ts_empty}");
    assert_eq!(keys, 3);
    assert_ne!(digest, digest_empty);
    let dumped = dump(&mut c);
    assert_eq!(dumped.ts, ts as u64);
    let pairs: Vec<(&[u8], &[u8])> = dumped.pairs.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    assert_eq!(pairs, [(&b"a"[..], &b"1"[..]), (b"b", b"2"), (b"c", b"3")]);
    assert_eq!(
        format!("{:016x}", dumped.digest()),
        digest,
        "the digest is Snapshot::digest"
    );

    // One value changes: the digest does; back as it was: the digest is back, the ts moves on.
    assert_eq!(ok(&mut c, &["SET", "b", "20"]), Value::Okay);
    let (ts_changed, _, digest_changed) = snapshot(&mut c);
    assert_ne!(digest_changed, digest);
    assert_eq!(ok(&mut c, &["SET", "b", "2"]), Value::Okay);
    let (ts_back, keys, digest_back) = snapshot(&mut c);
    assert_eq!((keys, &digest_back), (3, &digest));
    assert!(ts_back > ts_changed && ts_changed > ts);

    assert_eq!(error_of(&mut c, &["SNAPSHOT", "ALL"]), "ERR syntax error");
    // Inside a transaction, a snapshot sees what came before it.
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    assert_eq!(ok(&mut c, &["DEL", "a", "b", "c"]), queued());
    assert_eq!(ok(&mut c, &["SNAPSHOT"]), queued());
    let Value::Array(items) = ok(&mut c, &["EXEC"]) else {
        panic!("EXEC answers an array")
    };
    let Value::Array(inner) = &items[1] else {
        panic!("a snapshot: {items:?}")
    };
    assert_eq!(inner[1..], [Value::Int(0), bulk(&digest_empty)]);
}

/// [`MemStore`] without [`Store::transaction`]: what NetChain and Paxos are to the server.
struct NoTransactions(MemStore);

impl Store for NoTransactions {
    fn execute(&self, batch: &[Command]) -> Vec<Result<Reply, StoreError>> {
        self.0.execute(batch)
    }

    fn describe(&self) -> StoreInfo {
        self.0.describe()
    }
}

#[test]
fn a_store_without_transactions_refuses_exec_and_the_connection_goes_on() {
    let server = TestServer::start(Arc::new(NoTransactions(MemStore::new())), ServeConfig::default());
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    assert_eq!(ok(&mut c, &["SET", "k", "v"]), queued());
    assert_eq!(
        error_of(&mut c, &["EXEC"]),
        "ERR command 'EXEC' is not supported by this store"
    );
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "k", "w"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("w"));
    // A transaction of server commands only never reaches the store.
    assert_eq!(ok(&mut c, &["MULTI"]), Value::Okay);
    assert_eq!(ok(&mut c, &["ECHO", "hi"]), queued());
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(vec![bulk("hi")]));
}

#[test]
fn readers_never_see_half_a_transaction() {
    let server = TestServer::memory();
    let mut writer = server.client();
    let mut reader = server.client();
    let writing = thread::spawn(move || {
        for _ in 0..300 {
            let _: () = redis::pipe()
                .atomic()
                .cmd("INCR")
                .arg("x")
                .ignore()
                .cmd("INCR")
                .arg("y")
                .ignore()
                .query(&mut writer)
                .unwrap();
        }
    });
    // At least one read, the last one after every transaction.
    loop {
        let finished = writing.is_finished();
        let Value::Array(values) = ok(&mut reader, &["MGET", "x", "y"]) else {
            panic!("MGET answers an array")
        };
        assert_eq!(values[0], values[1], "x and y change together");
        if finished {
            assert_eq!(values[0], bulk("300"));
            break;
        }
    }
    writing.join().unwrap();
}
