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
