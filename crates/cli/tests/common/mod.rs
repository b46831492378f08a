//! Running the `onepipe` binary from tests.

#![allow(dead_code)]

use std::process::Command;

pub fn onepipe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_onepipe"))
}

/// Runs `onepipe ARGS [--log-dir DIR]`, expects success and one JSON object on stdout.
pub fn run_json(args: &[&str], log_dir: Option<&std::path::Path>) -> serde_json::Value {
    let mut cmd = onepipe();
    cmd.args(args);
    if let Some(dir) = log_dir {
        cmd.arg("--log-dir").arg(dir);
    }
    let out = cmd.output().expect("run onepipe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "onepipe {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).expect("one JSON object")
}

/// Processes whose command line names `needle` (the topology file), with their command lines.
pub fn processes_naming(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && pid != std::process::id() {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Removes what `onepipe up FILE` keeps in the runtime directory, for a test that killed it.
pub fn remove_up_state(topology: &std::path::Path) {
    if let Ok(dir) = onepipe::supervise::status_dir(topology) {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Ok(state) = onepipe::supervise::state_path(topology) {
        let _ = std::fs::remove_file(state);
    }
}

/// Stops a child the test still owns (`onepipe up` and the like) if the test fails half-way:
/// SIGTERM, so that a supervisor stops its own children too.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = Command::new("kill").arg(self.0.id().to_string()).status();
            let _ = self.0.wait();
        }
    }
}

/// A command the test started (`onepipe netchain up`, `onepipe paxos up`), with what it has
/// printed on stderr so far; stopped if the test ends first.
pub struct Watched {
    _child: KillOnDrop,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    pub log: String,
}

impl Watched {
    /// Starts `cmd` and reads its stderr until `ready` appears.
    pub fn start(mut cmd: Command, ready: &str) -> Watched {
        let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut w = Watched {
            _child: KillOnDrop(child),
            stderr,
            log: String::new(),
        };
        w.wait_for(ready);
        w
    }

    /// Reads its output until `text` appears; fails the test if it exits first.
    pub fn wait_for(&mut self, text: &str) {
        use std::io::BufRead;
        while !self.log.contains(text) {
            let mut line = String::new();
            assert!(
                self.stderr.read_line(&mut line).unwrap() > 0,
                "it exited: {}",
                self.log
            );
            self.log += &line;
        }
    }
}

/// `onepipe WORDS --port 0` (a Redis-protocol server), running, and the address it printed in
/// its first line ("... protocol on ADDR ...").
pub fn serving(words: &[&str]) -> (KillOnDrop, std::net::SocketAddr) {
    use std::io::BufRead;
    let mut child = onepipe()
        .args(words)
        .args(["--port", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split("protocol on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (KillOnDrop(child), addr)
}
