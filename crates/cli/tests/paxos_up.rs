//! `onepipe paxos up` runs every switch, the replicas and the backup coordinator as processes of
//! their own over loopback UDP; `onepipe paxos get|set` join as a client process for one
//! command each, and `onepipe paxos serve --topology` as a Redis front (issue 44, item 6).

#![allow(clippy::disallowed_methods)] // waits on real time

mod common;

use common::KillOnDrop;
use onepipe_kv::redis_tools;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The paxos testbed (s0 the ToR, s1 the coordinator, s2-s4 the acceptors, 10 hosts) on
/// addresses no other test uses.
fn write_topology(dir: &Path, port: u16) -> PathBuf {
    let net = format!("127.64.{}", 1 + std::process::id() % 250);
    let mut file = format!("name = \"paxos-test-{port}\"\n");
    for s in 0..5 {
        file += &format!("[[switch]]\nname = \"s{s}\"\naddr = \"{net}.{}:{port}\"\n", 1 + s);
    }
    for h in 0..10 {
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"s0\"\naddr = \"{net}.{}:{port}\"\n",
            10 + h
        );
    }
    for s in 1..5 {
        file += &format!("[[link]]\nbetween = [\"s0\", \"s{s}\"]\n");
    }
    let path = dir.join("paxos.toml");
    std::fs::write(&path, file).unwrap();
    path
}

/// `onepipe paxos up FILE`, running.
struct Up;

impl Up {
    fn start(file: &Path, data: &Path) -> common::Watched {
        let mut cmd = common::onepipe();
        cmd.args(["paxos", "up"]).arg(file).arg("--data-dir").arg(data);
        common::Watched::start(cmd, "Ctrl-C stops them")
    }
}

/// `onepipe paxos WORDS --topology FILE`: its output line and exit code.
fn paxos(file: &Path, words: &[&str]) -> (String, i32) {
    let out = common::onepipe()
        .arg("paxos")
        .args(&words[..1])
        .arg("--topology")
        .arg(file)
        .args(&words[1..])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (stdout, out.status.code().unwrap_or(-1))
}

#[test]
fn up_then_set_and_get_from_the_command_line_through_a_coordinator_failure() {
    let dir = std::env::temp_dir().join(format!("onepipe-paxos-up-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = write_topology(&dir, 7500);
    let data = dir.join("data");
    let _up = Up::start(&file, &data);
    assert_eq!(paxos(&file, &["get", "k"]), ("(nil)".into(), 0), "never written");
    assert_eq!(paxos(&file, &["set", "k", "v1"]), ("OK".into(), 0));
    assert_eq!(paxos(&file, &["get", "k", "--process", "1"]), ("v1".into(), 0));
    let (_, code) = paxos(&file, &["get", "k", "--process", "2"]);
    assert_ne!(code, 0, "process 2 is a replica, not a client host");
    for i in 0..3 {
        assert!(data.join(format!("replica-{i}")).is_dir(), "replica {i}'s store");
    }
    // The coordinator switch dies: the backup coordinator takes over, nothing acknowledged is
    // lost.
    let needle = format!("--switch s1 --topology {}", file.display());
    let s1 = common::processes_naming(&needle);
    assert_eq!(s1.len(), 1, "one s1 process: {s1:?}");
    std::process::Command::new("kill")
        .args(["-9", &s1[0].0.to_string()])
        .status()
        .unwrap();
    assert_eq!(
        paxos(&file, &["get", "k"]),
        ("v1".into(), 0),
        "through the backup"
    );
    assert_eq!(paxos(&file, &["set", "k", "v2"]), ("OK".into(), 0));
    assert_eq!(paxos(&file, &["get", "k", "--process", "1"]), ("v2".into(), 0));
    drop(_up);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `onepipe paxos serve WORDS --port 0`, running, and the address it serves on.
fn serve(words: &[&str]) -> (KillOnDrop, SocketAddr) {
    let mut all = vec!["paxos", "serve"];
    all.extend_from_slice(words);
    common::serving(&all)
}

fn redis_tool(tool: &str, addr: SocketAddr, words: &[&str]) -> String {
    redis_tools::run(tool, addr, words, std::time::Duration::from_secs(120))
}

/// The binary's own deployment, and one `paxos up` started, both behind redis-cli and
/// redis-benchmark unchanged.
#[test]
fn redis_tools_against_paxos_serve_alone_and_joined_to_up() {
    if !redis_tools::tools_present("redis_tools_against_paxos_serve_alone_and_joined_to_up") {
        return;
    }
    let (_alone, addr) = serve(&[]);
    assert_eq!(redis_tool("redis-cli", addr, &["SET", "a", "1"]), "OK\n");
    assert_eq!(redis_tool("redis-cli", addr, &["GET", "a"]), "1\n");
    drop(_alone);

    let dir = std::env::temp_dir().join(format!("onepipe-paxos-serve-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = write_topology(&dir, 7510);
    let _up = Up::start(&file, &dir.join("data"));
    let topology = file.display().to_string();
    let (_joined, addr) = serve(&["--topology", &topology, "--processes", "0"]);
    assert_eq!(redis_tool("redis-cli", addr, &["CASNX", "lock", "me"]), "1\n");
    redis_tools::benchmark_set_get(addr, 2000);
    // What the joined server wrote, a one-shot client as the other client process reads.
    assert_eq!(paxos(&file, &["get", "lock", "--process", "1"]), ("me".into(), 0));
    let (value, code) = paxos(&file, &["get", "key:__rand_int__", "--process", "1"]);
    assert_eq!(
        (value.len(), code),
        (3, 0),
        "redis-benchmark's 3-byte value: {value}"
    );
    drop(_joined);
    drop(_up);
    let _ = std::fs::remove_dir_all(&dir);
}
