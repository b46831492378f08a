//! `onepipe paxos serve`'s store (issue 44, item 6) driven by the `redis` client crate (every
//! command), by redis-cli and redis-benchmark when installed, and joined to a deployment whose
//! switches, replicas and backup run on their own sockets as `onepipe paxos up` runs them.

#![allow(clippy::disallowed_methods)] // waits on real time

use onepipe_bench::netchain::fabric::NetchainRuntime;
use onepipe_bench::paxos::serve::{PaxosServeConfig, Serving, start};
use onepipe_kv::redis_tools;
use onepipe_kv::replicated::{ReplicaConfig, ReplicaDb};
use redis::Value;
use std::net::TcpListener;
use std::time::Duration;

fn serving(partitions: u16) -> Serving {
    let config = PaxosServeConfig {
        partitions,
        ..PaxosServeConfig::default()
    };
    start(&config, TcpListener::bind("127.0.0.1:0").unwrap()).unwrap()
}

fn connect(s: &Serving) -> redis::Connection {
    let addr = s.server.local_addr();
    redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn get(c: &mut redis::Connection, k: &str) -> Option<String> {
    redis::cmd("GET").arg(k).query(c).unwrap()
}

/// Every command of docs/redis.md through the agreed log, with the replies MemStore gives.
fn every_command(c: &mut redis::Connection) {
    assert_eq!(get(c, "never"), None, "a key never set is absent");
    let ok: String = redis::cmd("SET").arg("k1").arg("v1").query(c).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(get(c, "k1").as_deref(), Some("v1"));
    let nx: Option<String> = redis::cmd("SET").arg("k1").arg("v3").arg("NX").query(c).unwrap();
    assert_eq!(nx, None, "SET NX on a key with a value");
    let xx: Option<String> = redis::cmd("SET").arg("k9").arg("v").arg("XX").query(c).unwrap();
    assert_eq!(xx, None, "SET XX on an absent key");
    let xx: Option<String> = redis::cmd("SET").arg("k1").arg("v2").arg("XX").query(c).unwrap();
    assert_eq!(xx.as_deref(), Some("OK"));
    let nx: Option<String> = redis::cmd("SET").arg("k2").arg("v").arg("NX").query(c).unwrap();
    assert_eq!(nx.as_deref(), Some("OK"));
    let size: i64 = redis::cmd("DBSIZE").query(c).unwrap();
    assert_eq!(size, 2);
    let values: Vec<Option<String>> = redis::cmd("MGET").arg(&["k1", "k2", "k3"]).query(c).unwrap();
    assert_eq!(values, vec![Some("v2".into()), Some("v".into()), None]);
    let deleted: i64 = redis::cmd("DEL").arg(&["k1", "k2", "k3"]).query(c).unwrap();
    assert_eq!(deleted, 2, "the keys that had values");
    assert_eq!(get(c, "k1"), None);
    let cas: Vec<Value> = redis::cmd("CAS").arg("k1").arg("x").arg("y").query(c).unwrap();
    assert_eq!(cas, vec![Value::Int(0), Value::Nil]);
    let casnx: Vec<Value> = redis::cmd("CASNX").arg("lock").arg("alice").query(c).unwrap();
    assert_eq!(casnx, vec![Value::Int(1)]);
    let casnx: Vec<Value> = redis::cmd("CASNX").arg("lock").arg("bob").query(c).unwrap();
    assert_eq!(casnx, vec![Value::Int(0), Value::BulkString(b"alice".to_vec())]);
    let cas: Vec<Value> = redis::cmd("CAS")
        .arg("lock")
        .arg("alice")
        .arg("carol")
        .query(c)
        .unwrap();
    assert_eq!(cas, vec![Value::Int(1)]);
    let cad: Vec<Value> = redis::cmd("CAD").arg("lock").arg("alice").query(c).unwrap();
    assert_eq!(cad, vec![Value::Int(0), Value::BulkString(b"carol".to_vec())]);
    let cad: Vec<Value> = redis::cmd("CAD").arg("lock").arg("carol").query(c).unwrap();
    assert_eq!(cad, vec![Value::Int(1)]);
    assert_eq!(get(c, "lock"), None);
    let too_long = redis::cmd("SET").arg("k".repeat(257)).arg("v").query::<()>(c);
    assert!(too_long.is_err(), "keys are at most 256 bytes");
}

#[test]
fn every_command_goes_through_the_log() {
    let s = serving(1);
    let mut c = connect(&s);
    every_command(&mut c);
    let info: String = redis::cmd("INFO").query(&mut c).unwrap();
    for line in [
        "store:paxos",
        "key_bytes_max:256",
        "value_bytes_max:741",
        "paxos_log_value_bytes_max:1024",
    ] {
        assert!(
            info.contains(line),
            "docs/redis.md's limits: {line} not in {info}"
        );
    }
    s.stop();
}

#[test]
fn a_pipeline_runs_in_order() {
    let s = serving(1);
    let mut c = connect(&s);
    let mut pipe = redis::pipe();
    for i in 0..50 {
        pipe.cmd("SET").arg("p").arg(i).ignore();
        pipe.cmd("GET").arg("p");
    }
    let seen: Vec<String> = pipe.query(&mut c).unwrap();
    let want: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    assert_eq!(seen, want, "each GET sees the SET just before it");
    s.stop();
}

#[test]
fn multi_key_commands_across_partitions_are_crossslot() {
    let s = serving(4);
    let mut c = connect(&s);
    let keys: Vec<String> = (0..32).map(|i| format!("key{i}")).collect();
    let of = |k: &str| onepipe_kv::replicated::partition_of(k.as_bytes(), 4);
    for (i, k) in keys.iter().enumerate().skip(16) {
        let _: () = redis::cmd("SET").arg(k).arg(i).query(&mut c).unwrap();
    }
    for (i, k) in keys.iter().enumerate().skip(16) {
        assert_eq!(
            get(&mut c, k),
            Some(i.to_string()),
            "every partition serves its keys"
        );
    }
    let in_zero = keys[16..].iter().filter(|k| of(k) == 0).count() as i64;
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, in_zero, "DBSIZE counts partition 0's keys");
    let other = keys[..16].iter().find(|k| of(k) != of(&keys[0])).unwrap();
    let r = redis::cmd("MGET").arg(&keys[0]).arg(other).query::<Value>(&mut c);
    let e = r.unwrap_err();
    assert_eq!(e.code(), Some("CROSSSLOT"), "{e:?}");
    let same = keys[1..16].iter().find(|k| of(k) == of(&keys[0])).unwrap();
    let _: () = redis::cmd("SET").arg(same).arg("v").query(&mut c).unwrap();
    let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys[0]).arg(same).query(&mut c).unwrap();
    assert_eq!(values, vec![None, Some("v".into())], "one partition: served");
    s.stop();
}

/// The udp runtime: every node of the deployment its own socket on loopback.
#[test]
fn the_server_runs_its_deployment_over_udp() {
    let config = PaxosServeConfig {
        runtime: NetchainRuntime::Udp,
        ..PaxosServeConfig::default()
    };
    let s = start(&config, TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let mut c = connect(&s);
    for i in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    for i in 0..20 {
        assert_eq!(get(&mut c, &format!("k{i}")), Some(i.to_string()));
    }
    s.stop();
}

/// The replicas' stores are in the data directory; a new deployment refuses one that holds
/// stores already (its log would start again at instance 0, which those replicas applied).
#[test]
fn the_replicas_keep_their_stores_in_the_data_dir() {
    let dir = tempfile_dir("restart");
    let config = PaxosServeConfig {
        data_dir: Some(dir.clone()),
        ..PaxosServeConfig::default()
    };
    let s = start(&config, TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let mut c = connect(&s);
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("kept{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    s.stop();
    // Each replica holds a prefix of the writes (the answer came from the first to apply the
    // last one; another may not have applied it yet), and one holds them all.
    let mut most = 0;
    for i in 0..3 {
        let db = ReplicaDb::open(&dir.join(format!("replica-{i}")), ReplicaConfig::default()).unwrap();
        let p = db.partition(0).unwrap();
        let n = p.key_count();
        for k in 0..n {
            let v = p.get(format!("kept{k}").as_bytes()).unwrap();
            assert_eq!(v.as_deref(), Some(k.to_string().as_bytes()), "replica {i}");
        }
        most = most.max(n);
    }
    assert_eq!(most, 200);
    let again = start(&config, TcpListener::bind("127.0.0.1:0").unwrap());
    let e = again.err().expect("a data directory with stores is refused");
    assert!(e.contains("earlier deployment"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("onepipe-paxos-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn cli(s: &Serving, words: &[&str]) -> String {
    redis_tools::run("redis-cli", s.server.local_addr(), words, Duration::from_secs(60))
}

#[test]
fn redis_cli_runs_every_command() {
    if !redis_tools::tools_present("redis_cli_runs_every_command") {
        return;
    }
    let s = serving(1);
    // Not a terminal: raw replies, one line per element, nil as an empty line.
    assert_eq!(cli(&s, &["GET", "a"]), "\n");
    assert_eq!(cli(&s, &["SET", "a", "1"]), "OK\n");
    assert_eq!(cli(&s, &["SET", "a", "2", "NX"]), "\n");
    assert_eq!(cli(&s, &["SET", "a", "2", "XX"]), "OK\n");
    assert_eq!(cli(&s, &["GET", "a"]), "2\n");
    assert_eq!(cli(&s, &["MGET", "a", "b"]), "2\n\n");
    assert_eq!(cli(&s, &["CASNX", "b", "x"]), "1\n");
    assert_eq!(cli(&s, &["CAS", "b", "y", "z"]), "0\nx\n");
    assert_eq!(cli(&s, &["CAS", "b", "x", "z"]), "1\n");
    assert_eq!(cli(&s, &["CAD", "b", "z"]), "1\n");
    assert_eq!(cli(&s, &["DBSIZE"]), "1\n");
    assert_eq!(cli(&s, &["DEL", "a", "b"]), "1\n");
    assert_eq!(cli(&s, &["DBSIZE"]), "0\n");
    s.stop();
}

/// Debian's redis-benchmark against the Paxos store, unchanged.
#[test]
fn redis_benchmark_sets_and_gets_through_paxos() {
    if !redis_tools::tools_present("redis_benchmark_sets_and_gets_through_paxos") {
        return;
    }
    let s = serving(1);
    redis_tools::benchmark_set_get(s.server.local_addr(), 5000);
    let value = get(&mut connect(&s), "key:__rand_int__");
    assert_eq!(
        value.map(|v| v.len()),
        Some(3),
        "redis-benchmark's SETs wrote its 3-byte value"
    );
    s.stop();
}

/// `paxos serve --topology T` over a deployment whose switches, replicas and backup run on
/// their own sockets (threads here, processes under `paxos up`); then a one-shot client.
#[test]
fn the_server_joins_a_deployment_started_elsewhere() {
    use onepipe_bench::paxos::processes::{Processes, call, run_process, run_switch};
    use onepipe_bench::paxos::serve::start_joined;
    use onepipe_kv::{Bytes, Reply};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let net = format!("127.63.{}", 1 + std::process::id() % 250);
    let mut toml = String::from("name = \"paxos-joined-test\"\n");
    for s in 0..5 {
        toml += &format!("[[switch]]\nname = \"s{s}\"\naddr = \"{net}.{}:7400\"\n", 1 + s);
    }
    for h in 0..10 {
        toml += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"s0\"\naddr = \"{net}.{}:7400\"\n",
            10 + h
        );
    }
    for s in 1..5 {
        toml += &format!("[[link]]\nbetween = [\"s0\", \"s{s}\"]\n");
    }
    let topology = onepipe_fabric::Topology::from_toml(&toml).unwrap();
    let auth = onepipe_runtime::udp::auth::Auth::generate().unwrap();
    let p = Arc::new(Processes::new(topology, auth, 1).unwrap());
    let dir = tempfile_dir("joined");
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for name in p.switch_names() {
        let (p, stop) = (p.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            run_switch(&p, &name, &stop).unwrap();
        }));
    }
    for process in p.server_processes() {
        let (p, stop, dir) = (p.clone(), stop.clone(), dir.clone());
        threads.push(std::thread::spawn(move || {
            run_process(
                &p,
                process,
                &dir,
                onepipe_kv::replicated::SyncMode::Buffered,
                &stop,
            )
            .unwrap();
        }));
    }
    let serving = start_joined(&p, &[0], TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let mut c = connect(&serving);
    every_command(&mut c);
    let _: () = redis::cmd("SET").arg("shared").arg("v").query(&mut c).unwrap();
    let got = call(
        &p,
        1,
        onepipe_kv::Command::Get {
            key: Bytes::from("shared"),
        },
    )
    .unwrap();
    assert_eq!(
        got,
        Ok(Reply::Bulk(Bytes::from("v"))),
        "a one-shot client as process 1"
    );
    assert!(
        call(&p, 2, onepipe_kv::Command::DbSize).is_err(),
        "process 2 is a replica"
    );
    assert!(
        start_joined(&p, &[5], TcpListener::bind("127.0.0.1:0").unwrap()).is_err(),
        "process 5 is the backup coordinator"
    );
    serving.stop();
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An MGET whose reply is longer than one Paxos message carries gets an error reply, and the
/// store keeps serving.
#[test]
fn an_mget_too_long_for_one_reply_is_refused() {
    let s = serving(1);
    let mut c = connect(&s);
    let keys: Vec<String> = (0..8).map(|i| format!("big{i}")).collect();
    for k in &keys {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("x".repeat(700))
            .query(&mut c)
            .unwrap();
    }
    let e = redis::cmd("MGET").arg(&keys).query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("limit of 4096 bytes"), "{e}");
    let two: Vec<String> = redis::cmd("MGET").arg(&keys[..2]).query(&mut c).unwrap();
    assert_eq!(two, vec!["x".repeat(700), "x".repeat(700)]);
    s.stop();
}
