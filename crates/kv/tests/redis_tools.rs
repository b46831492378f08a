//! The real redis-cli and redis-benchmark (Debian's redis-tools) against the server, unchanged.
//!
//! Run when both are on PATH; otherwise the tests say they did not run them, or fail when
//! `ONEPIPE_REQUIRE_REDIS_TOOLS=1` (CI sets it after installing redis-tools).

mod common;

use std::io::{Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::TestServer;

const TOOLS: [&str; 2] = ["redis-cli", "redis-benchmark"];

/// Whether the tools are there; panics when they must be and are not.
fn tools_present(test: &str) -> bool {
    let missing: Vec<&str> = TOOLS
        .into_iter()
        .filter(|tool| Command::new(tool).arg("--version").output().is_err())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let required = std::env::var("ONEPIPE_REQUIRE_REDIS_TOOLS").is_ok_and(|value| value == "1");
    assert!(
        !required,
        "{test}: {missing:?} not on PATH, and ONEPIPE_REQUIRE_REDIS_TOOLS=1 asks for them: \
         install Debian's redis-tools (apt-get install -y redis-tools)"
    );
    // Straight to stderr, past the test harness's capture, so that a plain `cargo test` shows it.
    let _ = writeln!(
        std::io::stderr(),
        "{test}: did not run: {missing:?} not on PATH (install redis-tools; ONEPIPE_REQUIRE_REDIS_TOOLS=1 makes this fail)"
    );
    false
}

/// Runs a tool to its end, killing it after `limit` (a hung tool fails the test, not CI's clock).
fn run(command: &mut Command, limit: Duration) -> Output {
    let mut child: Child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the tool");
    let rounds = limit.as_millis() / 10;
    for _ in 0..rounds {
        if child.try_wait().expect("poll the tool").is_some() {
            return child.wait_with_output().expect("collect the tool's output");
        }
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let mut stdout = String::new();
    let _ = child.stdout.take().expect("piped").read_to_string(&mut stdout);
    panic!("{command:?} did not finish within {limit:?}; its output: {stdout}");
}

fn cli(server: &TestServer, words: &[&str]) -> String {
    let address = server.handle.local_addr();
    let output = run(
        Command::new("redis-cli")
            .args(["-h", &address.ip().to_string(), "-p", &address.port().to_string()])
            .args(words),
        Duration::from_secs(60),
    );
    assert!(output.status.success(), "redis-cli {words:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn redis_cli_runs_commands() {
    if !tools_present("redis_cli_runs_commands") {
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
}

#[test]
fn redis_benchmark_sets_and_gets() {
    if !tools_present("redis_benchmark_sets_and_gets") {
        return;
    }
    let server = TestServer::memory();
    let address = server.handle.local_addr();
    let port = address.port().to_string();
    let output = run(
        Command::new("redis-benchmark")
            .args(["-h", &address.ip().to_string(), "-p", &port])
            .args(["-t", "set,get", "-n", "20000", "-q"]),
        Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "redis-benchmark failed: {stdout} {stderr}"
    );
    println!("redis-benchmark against the memory store:\n{stdout}");
    for test in ["SET:", "GET:"] {
        assert!(
            stdout
                .lines()
                .any(|line| line.contains(test) && line.contains("requests per second")),
            "no {test} rate in: {stdout}"
        );
    }
    assert!(!stderr.contains("WARN"), "redis-benchmark warned: {stderr}");
    // Without -r every SET writes the one key `key:__rand_int__`.
    assert_eq!(
        cli(&server, &["DBSIZE"]),
        "1\n",
        "the benchmark's SETs were stored"
    );
}
