//! The server driven by the `redis` client crate, as an application would.

mod common;

use std::sync::Arc;
use std::thread;

use common::TestServer;
use onepipe_kv::{Command, MemStore, Reply, ServeConfig, Store, StoreError, StoreInfo};
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

/// The error line the client got: code and text.
fn error_of(connection: &mut Connection, words: &[&str]) -> String {
    let error = query(connection, words).expect_err("an error reply");
    format!("{} {}", error.code().unwrap_or("?"), error.detail().unwrap_or(""))
}

#[test]
fn get_set_and_conditional_set() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["GET", "k"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "k", "1"]), Value::Okay);
    assert_eq!(ok(&mut c, &["GET", "k"]), bulk("1"));
    assert_eq!(ok(&mut c, &["SET", "k", "2", "NX"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "other", "2", "XX"]), Value::Nil);
    assert_eq!(ok(&mut c, &["SET", "k", "3", "XX"]), Value::Okay);
    assert_eq!(ok(&mut c, &["SET", "new", "4", "NX"]), Value::Okay);
    assert_eq!(
        ok(&mut c, &["MGET", "k", "missing", "new"]),
        Value::Array(vec![bulk("3"), Value::Nil, bulk("4")])
    );
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(2));
    assert_eq!(ok(&mut c, &["DEL", "k", "missing", "new"]), Value::Int(2));
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(0));
}

#[test]
fn binary_values_round_trip() {
    let server = TestServer::memory();
    let mut c = server.client();
    let value: Vec<u8> = (0..=255).collect();
    let _: () = redis::cmd("SET")
        .arg(b"\r\n\0key")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg(b"\r\n\0key").query(&mut c).unwrap();
    assert_eq!(back, value);
}

#[test]
fn cas_forms_and_a_lock() {
    let server = TestServer::memory();
    let mut c = server.client();
    let swapped = Value::Array(vec![Value::Int(1)]);
    let failed = |current: Value| Value::Array(vec![Value::Int(0), current]);
    // Acquire by CASNX, release by CAD, each telling the current owner when it fails.
    assert_eq!(ok(&mut c, &["CASNX", "lock", "alice"]), swapped);
    assert_eq!(ok(&mut c, &["CASNX", "lock", "bob"]), failed(bulk("alice")));
    assert_eq!(ok(&mut c, &["CAD", "lock", "bob"]), failed(bulk("alice")));
    assert_eq!(ok(&mut c, &["CAS", "lock", "alice", "carol"]), swapped);
    assert_eq!(
        ok(&mut c, &["CAS", "lock", "alice", "dave"]),
        failed(bulk("carol"))
    );
    assert_eq!(ok(&mut c, &["CAD", "lock", "carol"]), swapped);
    assert_eq!(ok(&mut c, &["CAD", "lock", "carol"]), failed(Value::Nil));
    assert_eq!(ok(&mut c, &["CAS", "lock", "carol", "x"]), failed(Value::Nil));
    assert_eq!(ok(&mut c, &["GET", "lock"]), Value::Nil);
    assert_eq!(
        error_of(&mut c, &["CAS", "lock", "x"]),
        "ERR wrong number of arguments for 'cas' command"
    );
}

#[test]
fn server_commands() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
    assert_eq!(ok(&mut c, &["PING", "hi"]), bulk("hi"));
    assert_eq!(ok(&mut c, &["ECHO", "hey"]), bulk("hey"));
    assert_eq!(ok(&mut c, &["SELECT", "0"]), Value::Okay);
    assert_eq!(ok(&mut c, &["CLIENT", "SETNAME", "tester"]), Value::Okay);
    assert_eq!(ok(&mut c, &["CLIENT", "GETNAME"]), bulk("tester"));
    assert_eq!(ok(&mut c, &["COMMAND", "DOCS"]), Value::Array(vec![]));
    assert_eq!(
        ok(&mut c, &["CONFIG", "GET", "save"]),
        Value::Array(vec![bulk("save"), bulk("")])
    );
    let Value::BulkString(info) = ok(&mut c, &["INFO"]) else {
        panic!("INFO is a bulk string")
    };
    let info = String::from_utf8(info).unwrap();
    assert!(info.contains("store:memory\r\n"), "{info}");
    assert!(info.contains("connected_clients:1\r\n"), "{info}");
}

#[test]
fn errors_print_like_redis_and_the_connection_stays_usable() {
    let server = TestServer::memory();
    let mut c = server.client();
    assert_eq!(
        error_of(&mut c, &["FLUSHALL", "ASYNC"]),
        "ERR unknown command 'FLUSHALL', with args beginning with: 'ASYNC' "
    );
    assert_eq!(
        error_of(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        error_of(&mut c, &["SET", "k", "v", "NX", "XX"]),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(&mut c, &["SET", "k", "v", "EX", "1"]),
        "ERR option 'EX' of 'set' is not supported"
    );
    assert_eq!(error_of(&mut c, &["SELECT", "3"]), "ERR DB index is out of range");
    let key = "k".repeat(MemStore::KEY_BYTES_MAX + 1);
    assert_eq!(
        error_of(&mut c, &["GET", &key]),
        format!(
            "ERR key of {} bytes is over this store's limit of {} bytes",
            key.len(),
            MemStore::KEY_BYTES_MAX
        )
    );
    assert_eq!(ok(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

/// Answers every command with one error, and records the batches it was given.
struct Failing {
    error: StoreError,
    batches: std::sync::Mutex<Vec<usize>>,
}

impl Store for Failing {
    fn execute(&self, batch: &[Command]) -> Vec<Result<Reply, StoreError>> {
        self.batches.lock().unwrap().push(batch.len());
        batch.iter().map(|_| Err(self.error.clone())).collect()
    }

    fn describe(&self) -> StoreInfo {
        StoreInfo {
            name: "failing".into(),
            key_bytes_max: 16,
            value_bytes_max: 64,
            fields: vec![],
        }
    }
}

#[test]
fn store_errors_reach_the_client_with_their_codes() {
    let cases = [
        (StoreError::OutcomeUnknown("timed out".into()), "UNKNOWN"),
        (StoreError::Unavailable("no chain".into()), "UNAVAILABLE"),
        (StoreError::Unsupported("GET".into()), "ERR"),
    ];
    for (error, code) in cases {
        let line = error.to_redis_error();
        let store = Arc::new(Failing {
            error,
            batches: Default::default(),
        });
        let server = TestServer::start(store, ServeConfig::default());
        let mut c = server.client();
        assert_eq!(error_of(&mut c, &["SET", "k", "v"]), line);
        assert!(line.starts_with(code), "{line}");
    }
}

#[test]
fn limits_come_from_the_store() {
    let store = Arc::new(Failing {
        error: StoreError::Internal("unused".into()),
        batches: Default::default(),
    });
    let server = TestServer::start(store.clone(), ServeConfig::default());
    let mut c = server.client();
    let value = "v".repeat(65);
    assert_eq!(
        error_of(&mut c, &["SET", "k", &value]),
        "ERR value of 65 bytes is over this store's limit of 64 bytes"
    );
    assert!(
        store.batches.lock().unwrap().is_empty(),
        "an oversize value never reaches the store"
    );
}

#[test]
fn a_pipeline_of_1000_commands() {
    let server = TestServer::memory();
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("key{i}")).arg(i);
        pipe.cmd("GET").arg(format!("key{i}"));
    }
    let replies: Vec<Value> = pipe.query(&mut c).unwrap();
    assert_eq!(replies.len(), 1000);
    for (i, pair) in replies.chunks(2).enumerate() {
        assert_eq!(pair, [Value::Okay, bulk(&i.to_string())]);
    }
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(500));
}

#[test]
fn a_pipeline_reaches_the_store_in_batches_of_at_most_the_bound() {
    let store = Arc::new(Failing {
        error: StoreError::Internal("x".into()),
        batches: Default::default(),
    });
    let config = ServeConfig {
        batch_commands_max: 64,
        ..ServeConfig::default()
    };
    let server = TestServer::start(store.clone(), config);
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("GET").arg(format!("k{i}")).ignore();
    }
    pipe.cmd("PING");
    // Each GET fails; the pipeline result is the first error.
    assert!(pipe.query::<Vec<Value>>(&mut c).is_err());
    let batches = store.batches.lock().unwrap().clone();
    assert_eq!(batches.iter().sum::<usize>(), 1000);
    assert!(batches.iter().all(|&len| len <= 64), "{batches:?}");
    assert!(batches.len() < 1000, "some commands shared a batch: {batches:?}");
}

#[test]
fn a_hundred_concurrent_connections() {
    let server = TestServer::memory();
    let workers: Vec<_> = (0..100)
        .map(|worker| {
            let mut c = server.client();
            thread::spawn(move || {
                for i in 0..20 {
                    let key = format!("w{worker}-{i}");
                    assert_eq!(ok(&mut c, &["SET", &key, &key]), Value::Okay);
                    assert_eq!(ok(&mut c, &["GET", &key]), bulk(&key));
                }
                ok(&mut c, &["CASNX", "shared", &worker.to_string()]) == Value::Array(vec![Value::Int(1)])
            })
        })
        .collect();
    let acquired = workers
        .into_iter()
        .map(|w| w.join().expect("a worker"))
        .filter(|&a| a)
        .count();
    assert_eq!(acquired, 1, "one CASNX of the same key swaps");
    let mut c = server.client();
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(100 * 20 + 1));
}

/// The reply a client decoded, as the typed reply the store gave.
fn as_reply(value: Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Okay => Reply::Ok,
        Value::Int(number) => Reply::Integer(number),
        Value::BulkString(bytes) => Reply::Bulk(bytes.into()),
        Value::Array(items) => Reply::Array(items.into_iter().map(as_reply).collect()),
        other => panic!("no store replies {other:?}"),
    }
}

/// Random commands over a few keys, through the server and straight into a second `MemStore`:
/// the same replies, so the front adds and loses nothing.
#[test]
fn the_front_answers_as_the_store_does() {
    let server = TestServer::memory();
    let mut c = server.client();
    let model = MemStore::new();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |bound: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    };
    for _round in 0..50 {
        let mut words_of_round = Vec::new();
        for _ in 0..40 {
            let key = format!("k{}", next(4));
            let value = |n: u64| format!("v{n}");
            let words: Vec<String> = match next(8) {
                0 => vec!["GET".into(), key],
                1 => vec!["SET".into(), key, value(next(3))],
                2 => vec![
                    "SET".into(),
                    key,
                    value(next(3)),
                    ["NX", "XX"][next(2) as usize].into(),
                ],
                3 => vec!["DEL".into(), key, format!("k{}", next(4))],
                4 => vec!["MGET".into(), key, format!("k{}", next(4))],
                5 => vec!["CAS".into(), key, value(next(3)), value(next(3))],
                6 => vec![["CASNX", "CAD"][next(2) as usize].into(), key, value(next(3))],
                _ => vec!["DBSIZE".into()],
            };
            words_of_round.push(words);
        }
        let mut pipe = redis::pipe();
        let mut commands = Vec::new();
        for words in &words_of_round {
            let args: Vec<onepipe_kv::Bytes> = words.iter().map(|w| w.clone().into()).collect();
            commands.push(
                Command::parse(&args)
                    .expect("a store command")
                    .expect("well formed"),
            );
            let command = pipe.cmd(&words[0]);
            for word in &words[1..] {
                command.arg(word);
            }
        }
        let through_server: Vec<Value> = pipe.query(&mut c).unwrap();
        let direct: Vec<Reply> = model.execute(&commands).into_iter().map(|r| r.unwrap()).collect();
        let through_server: Vec<Reply> = through_server.into_iter().map(as_reply).collect();
        assert_eq!(through_server, direct, "commands {words_of_round:?}");
    }
}
