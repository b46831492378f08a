//! docs/udp.md's first example, run as written: `onepipe up topologies/two-racks.toml`, the
//! printer as process 1, the broadcaster as process 0, `onepipe down`. Processes 2 and 3 never
//! join, so rack 1 has no live process: until issue 42 its switch held its barrier at zero for
//! ever, the spine waited on it, and the printer printed nothing.

#![allow(clippy::disallowed_methods)] // waits on real time

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const COUNT: usize = 1000;

/// Kills a child the test still owns when it fails half-way.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The examples the docs run with `cargo run --example`, built by the tests' cargo if this
/// test runs alone (a plain `cargo test` builds them already).
fn example(name: &str) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_onepipe"));
    let path = bin.parent().unwrap().join("examples").join(name);
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "onepipe-cli", "--example", name])
            .current_dir(repo())
            .status()
            .unwrap();
        assert!(status.success(), "cannot build example {name}");
    }
    let mut cmd = Command::new(path);
    cmd.current_dir(repo());
    cmd
}

#[test]
fn the_two_racks_example_delivers_with_half_the_processes_joined() {
    let topology = "topologies/two-racks.toml";
    let mut up = KillOnDrop(
        common::onepipe()
            .args(["up", topology])
            .current_dir(repo())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut up_said = BufReader::new(up.0.stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("stops them") {
        let mut line = String::new();
        assert!(up_said.read_line(&mut line).unwrap() > 0, "up exited: {banner}");
        banner += &line;
    }
    let up_rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = up_said.read_to_string(&mut rest);
        rest
    });

    let mut print = KillOnDrop(
        example("print")
            .args(["--topology", topology, "--process", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stdout = print.0.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let broadcast = example("broadcast")
        .args([
            "--topology",
            topology,
            "--process",
            "0",
            "--count",
            &COUNT.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        broadcast.status.success(),
        "broadcast failed: {}",
        String::from_utf8_lossy(&broadcast.stderr)
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while got.len() < COUNT && Instant::now() < deadline {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
            got.push(line);
        }
    }
    let down = common::onepipe()
        .args(["down", topology])
        .current_dir(repo())
        .output()
        .unwrap();
    let _ = up.0.wait();
    let said = up_rest.join().unwrap();
    assert!(
        down.status.success(),
        "down: {}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert_eq!(
        got.len(),
        COUNT,
        "the printer printed {} of {COUNT} messages; up said:\n{banner}{said}",
        got.len()
    );
    // `timestamp source message_id payload`: all from process 0, in its send order (FIFO is
    // part of the total order), with timestamps rising.
    let mut last = (0u64, 0u64);
    for line in &got {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.get(1), Some(&"0"), "{line}");
        let ts: u64 = fields[0].parse().unwrap();
        let id: u64 = fields[2].parse().unwrap();
        assert!((ts, id) > last, "out of order: {line} after {last:?}");
        last = (ts, id);
    }
}
