//! The real redis-cli and redis-benchmark (Debian's redis-tools) against the server, unchanged.
//!
//! Run when both are on PATH; otherwise the tests say they did not run them, or fail when
//! `ONEPIPE_REQUIRE_REDIS_TOOLS=1` (CI sets it after installing redis-tools).

mod common;

use onepipe_kv::redis_tools;
use std::time::Duration;

use common::TestServer;

fn cli(server: &TestServer, words: &[&str]) -> String {
    redis_tools::run(
        "redis-cli",
        server.handle.local_addr(),
        words,
        Duration::from_secs(60),
    )
}

#[test]
fn redis_cli_runs_commands() {
    if !redis_tools::tools_present("redis_cli_runs_commands") {
        return;
    }
    let server = TestServer::memory();
    // Its output is not a terminal, so redis-cli prints raw replies: one line per element, nil empty.
    assert_eq!(cli(&server, &["PING"]), "PONG\n");
    assert_eq!(cli(&server, &["SET", "k", "v1"]), "OK\n");
    assert_eq!(cli(&server, &["GET", "k"]), "v1\n");
    assert_eq!(cli(&server, &["SET", "k", "v2", "NX"]), "\n");
    assert_eq!(cli(&server, &["CAS", "k", "v1", "v2"]), "1\n");
    assert_eq!(cli(&server, &["CAS", "k", "v1", "v3"]), "0\nv2\n");
    assert_eq!(cli(&server, &["CAD", "k", "v2"]), "1\n");
    assert_eq!(cli(&server, &["MGET", "k", "x"]), "\n\n");
    assert_eq!(cli(&server, &["DBSIZE"]), "0\n");
    let error = cli(&server, &["NOSUCH", "a"]);
    assert!(
        error.starts_with("ERR unknown command 'NOSUCH', with args beginning with: 'a' \n"),
        "{error}"
    );
    assert!(cli(&server, &["INFO"]).contains("store:memory"));
    assert_eq!(cli(&server, &["MSET", "b", "2", "a", "1"]), "OK\n");
    assert_eq!(cli(&server, &["INCRBY", "a", "41"]), "42\n");
    assert_eq!(cli(&server, &["DECR", "b"]), "1\n");
    // ts: the memory store's changes, SET, CAS, CAD above and these four.
    assert_eq!(cli(&server, &["SNAPSHOT", "DUMP"]), "7\na\n42\nb\n1\n");
    let snapshot = cli(&server, &["SNAPSHOT"]);
    let lines: Vec<&str> = snapshot.lines().collect();
    assert_eq!(lines[..2], ["7", "2"], "{snapshot}");
    assert_eq!(lines[2].len(), 16, "{snapshot}");
}

#[test]
fn redis_benchmark_incr_and_mset() {
    if !redis_tools::tools_present("redis_benchmark_incr_and_mset") {
        return;
    }
    let server = TestServer::memory();
    let words = ["-t", "incr,mset", "-n", "2000", "-q"];
    let output = redis_tools::output(
        "redis-benchmark",
        server.handle.local_addr(),
        &words,
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    for test in ["INCR:", "MSET (10 keys):"] {
        let rate = stdout
            .lines()
            .any(|l| l.contains(test) && l.contains("requests per second"));
        assert!(rate, "no {test} rate in: {stdout}");
    }
    // Without -r every INCR adds one to the one key `counter:__rand_int__`.
    assert_eq!(cli(&server, &["GET", "counter:__rand_int__"]), "2000\n");
}

#[test]
fn redis_benchmark_sets_and_gets() {
    if !redis_tools::tools_present("redis_benchmark_sets_and_gets") {
        return;
    }
    let server = TestServer::memory();
    let output = redis_tools::benchmark_set_get(server.handle.local_addr(), 20000);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("redis-benchmark against the memory store:\n{stdout}");
    assert!(!stderr.contains("WARN"), "redis-benchmark warned: {stderr}");
    // Without -r every SET writes the one key `key:__rand_int__`.
    assert_eq!(
        cli(&server, &["DBSIZE"]),
        "1\n",
        "the benchmark's SETs were stored"
    );
}
