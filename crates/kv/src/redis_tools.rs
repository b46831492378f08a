//! For tests: Debian's redis-cli and redis-benchmark (redis-tools) against a server, unchanged.
//! Tests run them when they are on PATH; otherwise they say they did not, or fail when
//! `ONEPIPE_REQUIRE_REDIS_TOOLS=1` (CI sets it after installing redis-tools).

#![allow(clippy::disallowed_methods)] // waits for a child process in real time

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const TOOLS: [&str; 2] = ["redis-cli", "redis-benchmark"];

/// Whether both tools are there; panics when they must be and are not. `test` names the caller
/// in what it prints.
pub fn tools_present(test: &str) -> bool {
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

/// Runs `tool` (redis-cli or redis-benchmark) against `server` with `words`, to its end; kills
/// it after `limit` (a hung tool fails the test, not CI's clock). Panics unless it succeeds;
/// returns its stdout.
pub fn run(tool: &str, server: SocketAddr, words: &[&str], limit: Duration) -> String {
    String::from_utf8_lossy(&output(tool, server, words, limit).stdout).into_owned()
}

/// [`run`], returning all the tool's output.
pub fn output(tool: &str, server: SocketAddr, words: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(tool)
        .args(["-h", &server.ip().to_string(), "-p", &server.port().to_string()])
        .args(words)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the tool");
    let began = std::time::Instant::now();
    while child.try_wait().expect("poll the tool").is_none() {
        if began.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect the tool's output");
            panic!("{tool} {words:?} did not finish within {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect the tool's output");
    assert!(out.status.success(), "{tool} {words:?}: {}", text(&out));
    out
}

fn text(out: &Output) -> String {
    format!(
        "{} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// redis-benchmark's SET and GET tests, `requests` each, quiet; checks that both reported a
/// rate, and returns its output.
pub fn benchmark_set_get(server: SocketAddr, requests: u32) -> Output {
    let n = requests.to_string();
    let words = ["-t", "set,get", "-n", &n, "-q"];
    let out = output("redis-benchmark", server, &words, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for test in ["SET:", "GET:"] {
        let rate = stdout
            .lines()
            .any(|l| l.contains(test) && l.contains("requests per second"));
        assert!(rate, "no {test} rate in: {stdout}");
    }
    out
}
