//! The Redis-protocol front over the store, driven by the `redis` client crate: commands,
//! errors, MULTI/EXEC, snapshots, atomicity across shards, and a replica failure that loses no
//! acknowledged write.

#![allow(clippy::disallowed_methods)] // the test waits on real time for the runtime

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use onepipe::Topology;
use onepipe_kv::{ServeConfig, ServerHandle, serve};
use onepipe_txkv::Layout;
use onepipe_txkv::front::{Cluster, ClusterOptions, TxStore};
use redis::{Commands, Connection, Value};

struct Front {
    cluster: Cluster,
    server: ServerHandle,
}

impl Front {
    fn start() -> Front {
        let options = ClusterOptions {
            topology: Topology::single_switch(10).unwrap(),
            shards: 2,
            replicas: 3,
            window: 16,
            seed: 3,
        };
        let cluster = Cluster::start(&options).unwrap();
        let store = TxStore::new(cluster.mailboxes(), Duration::from_secs(5), Vec::new());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = serve(listener, Arc::new(store), ServeConfig::default()).unwrap();
        Front { cluster, server }
    }

    fn client(&self) -> Connection {
        let url = format!("redis://{}/", self.server.local_addr());
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }
}

/// Two keys on different shards of the test's layout.
fn keys_on_two_shards() -> (String, String) {
    let layout = Layout::new(2, 3).unwrap();
    let on = |shard| {
        (0..)
            .map(|i| format!("key{i}"))
            .find(|k| layout.shard_of(k.as_bytes()) == shard)
            .unwrap()
    };
    (on(0), on(1))
}

fn error(result: redis::RedisResult<Value>) -> String {
    let e = result.expect_err("an error reply");
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

#[test]
fn commands_errors_and_transactions() {
    let front = Front::start();
    let mut c = front.client();
    let (a, b) = keys_on_two_shards();
    let _: () = c.set(&a, "1").unwrap();
    assert_eq!(c.get::<_, String>(&a).unwrap(), "1");
    let _: () = redis::cmd("MSET")
        .arg(&a)
        .arg("x")
        .arg(&b)
        .arg("y")
        .query(&mut c)
        .unwrap();
    let both: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&a)
        .arg(&b)
        .arg("absent")
        .query(&mut c)
        .unwrap();
    assert_eq!(both, vec![Some("x".into()), Some("y".into()), None]);
    assert_eq!(c.incr::<_, _, i64>("n", 5).unwrap(), 5);
    assert_eq!(
        error(redis::cmd("INCR").arg(&a).query(&mut c)),
        "ERR value is not an integer or out of range"
    );
    // The connection stays usable after errors and unknown commands.
    assert!(error(redis::cmd("NOSUCH").query(&mut c)).starts_with("ERR unknown command"));
    assert_eq!(c.get::<_, String>(&b).unwrap(), "y");
    let replies: Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("t")
        .arg("v")
        .cmd("INCRBY")
        .arg("n")
        .arg(2)
        .cmd("GET")
        .arg("t")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        replies,
        Value::Array(vec![Value::Okay, Value::Int(7), Value::BulkString(b"v".to_vec())])
    );
    let deleted: i64 = redis::cmd("DEL")
        .arg(&a)
        .arg("t")
        .arg("absent")
        .query(&mut c)
        .unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap(), 2); // b and n
    let dump: Value = redis::cmd("SNAPSHOT").arg("DUMP").query(&mut c).unwrap();
    let Value::Array(parts) = dump else {
        panic!("{dump:?}")
    };
    let Value::Array(pairs) = &parts[1] else {
        panic!("{parts:?}")
    };
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    let big = vec![b'v'; onepipe_txkv::front::VALUE_BYTES_MAX + 1];
    assert!(error(redis::cmd("SET").arg("big").arg(big).query(&mut c)).starts_with("ERR value of"));
    drop(front.cluster);
}

#[test]
fn mset_is_atomic_across_shards() {
    let front = Front::start();
    let (a, b) = keys_on_two_shards();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (mut c, stop, a, b) = (front.client(), stop.clone(), a.clone(), b.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let _: () = redis::cmd("MSET")
                    .arg(&a)
                    .arg(i)
                    .arg(&b)
                    .arg(i)
                    .query(&mut c)
                    .unwrap();
            }
            i
        })
    };
    let mut c = front.client();
    let mut seen_changes = 0;
    let mut last = None;
    for _ in 0..300 {
        let v: Vec<Option<u64>> = redis::cmd("MGET").arg(&a).arg(&b).query(&mut c).unwrap();
        assert_eq!(v[0], v[1], "a read saw half of an MSET");
        seen_changes += u32::from(last != Some(v[0]));
        last = Some(v[0]);
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(
        writes > 10 && seen_changes > 5,
        "{writes} writes, {seen_changes} changes seen"
    );
}

#[test]
fn a_replica_failure_loses_no_acknowledged_write() {
    let mut front = Front::start();
    let mut c = front.client();
    let mut acknowledged = Vec::new();
    for i in 0..400u32 {
        if i == 100 {
            // Shard 0's replica 1: the controller announces it, clients stop waiting for it.
            assert!(front.cluster.crash_server(1));
        }
        let key = format!("k{i}");
        if c.set::<_, _, ()>(&key, i).is_ok() {
            acknowledged.push((key, i));
        }
    }
    assert!(
        acknowledged.len() >= 390,
        "only {} writes acknowledged",
        acknowledged.len()
    );
    for (key, i) in &acknowledged {
        assert_eq!(c.get::<_, Option<u32>>(key).unwrap(), Some(*i), "{key} lost");
    }
}

/// A pipelined batch is stamped in order by one front client: a GET after a SET of the same
/// key in one batch sees it (docs/redis.md, "The transactional store").
#[test]
fn a_get_after_a_set_in_one_pipeline_sees_it() {
    let front = Front::start();
    let mut c = front.client();
    for i in 0..200u32 {
        let mut pipe = redis::pipe();
        for j in 0..4 {
            pipe.cmd("SET").arg(format!("p{j}")).arg(i).ignore();
            pipe.cmd("GET").arg(format!("p{j}"));
        }
        let got: Vec<u32> = pipe.query(&mut c).unwrap();
        assert_eq!(got, vec![i; 4], "round {i}");
    }
}
