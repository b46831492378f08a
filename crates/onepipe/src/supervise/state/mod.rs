//! Where `onepipe up` keeps what `onepipe down`, `inspect` and `cut-link` need: a private
//! runtime directory ([`runtime_dir`]), and in it, per topology file, the record of the
//! processes it started and the switches' status files.
//!
//! The directory is ours alone: `$XDG_RUNTIME_DIR/onepipe` when the session has one, else
//! `/run/user/UID/onepipe` when that exists, else `onepipe-UID` in the temporary directory;
//! created with mode 0700, and refused if it exists as anything but a directory of this user
//! with that mode (another user could otherwise plant a record naming any process). Each
//! process is recorded with its start time (`/proc/PID/stat` field 22, clock ticks since
//! boot) and its executable, and `down` signals a pid only while both still match: a pid
//! reused by another process after ours exited is left alone.

use serde::{Deserialize, Serialize};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The private directory of this user's `onepipe` runtime state, created if absent. The one
/// place that decides where it is.
pub fn runtime_dir() -> Result<PathBuf, String> {
    let uid = nix::unistd::getuid().as_raw();
    let session = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| Some(PathBuf::from(format!("/run/user/{uid}"))).filter(|d| d.is_dir()));
    let dir = match session {
        Some(d) => d.join("onepipe"),
        None => std::env::temp_dir().join(format!("onepipe-{uid}")),
    };
    private_dir(&dir, uid)?;
    Ok(dir)
}

/// Creates `dir` with mode 0700, or checks that it is a directory (not a link) owned by
/// `uid` with that mode.
pub fn private_dir(dir: &Path, uid: u32) -> Result<(), String> {
    let created = std::fs::DirBuilder::new().mode(0o700).create(dir);
    if let Err(e) = created
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(format!("cannot create {}: {e}", dir.display()));
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    if !meta.is_dir() || meta.uid() != uid || mode != 0o700 {
        return Err(format!(
            "{} is not a private directory of user {uid} (a {}, owner {}, mode {mode:o}; expected \
             a directory of mode 700): remove it or fix it",
            dir.display(),
            if meta.is_dir() {
                "directory"
            } else {
                "non-directory"
            },
            meta.uid()
        ));
    }
    Ok(())
}

/// The name under which `onepipe up FILE` keeps its state: a hash of the file's path.
fn key_of(topology: &Path) -> Result<String, String> {
    let canonical = std::fs::canonicalize(topology)
        .map_err(|e| format!("cannot read topology file {}: {e}", topology.display()))?;
    let key = onepipe_fabric::hash::mix64(
        canonical
            .to_string_lossy()
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(8) ^ b as u64),
    );
    Ok(format!("up-{key:016x}"))
}

/// Where `onepipe up FILE` records what it started, for `onepipe down FILE`.
pub fn state_path(topology: &Path) -> Result<PathBuf, String> {
    Ok(runtime_dir()?.join(format!("{}.pids", key_of(topology)?)))
}

/// Where the switches that `onepipe up FILE` started write their status.
pub fn status_dir(topology: &Path) -> Result<PathBuf, String> {
    Ok(runtime_dir()?.join(format!("{}.status", key_of(topology)?)))
}

/// A process `onepipe up` started (or `up` itself), as `down` recognizes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    pub pid: u32,
    /// `/proc/PID/stat` field 22: when it started, in clock ticks since boot.
    pub start_ticks: u64,
    pub exe: PathBuf,
}

impl Recorded {
    /// Process `pid` as it runs now; `None` if it does not (or is a zombie).
    pub fn of(pid: u32) -> Option<Recorded> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 2 is the command in parentheses, which may hold spaces and parentheses.
        let (_, rest) = stat.rsplit_once(") ")?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?;
        if state == "Z" || state == "X" {
            return None;
        }
        // `rest` starts at field 3; field 22 is 19 further.
        let start_ticks = fields.nth(18)?.parse().ok()?;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
        Some(Recorded {
            pid,
            start_ticks,
            exe: without_deleted(exe),
        })
    }

    /// Whether the process recorded still runs: its pid names a process started at the same
    /// tick from the same executable.
    pub fn is_running(&self) -> bool {
        Recorded::of(self.pid).is_some_and(|now| now == *self)
    }

    /// Sends `signal` if the process recorded still runs; whether it was sent.
    pub fn signal(&self, signal: nix::sys::signal::Signal) -> bool {
        self.is_running()
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), signal).is_ok()
    }
}

/// An executable replaced while it runs (a rebuild) reads as `PATH (deleted)`: still ours.
fn without_deleted(exe: PathBuf) -> PathBuf {
    match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(s) => PathBuf::from(s),
        None => exe,
    }
}

/// Writes the record of `processes` (`up` first) to `path`, replacing it whole.
pub fn write_record(path: &Path, processes: &[Recorded]) -> std::io::Result<()> {
    let aside = path.with_extension("pids.part");
    let json = serde_json::to_vec(processes).expect("a record serializes");
    std::fs::write(&aside, json)?;
    std::fs::rename(&aside, path)
}

/// The record at `path`; empty if there is none or it does not parse (nothing is signalled).
pub fn read_record(path: &Path) -> Vec<Recorded> {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Stops the recorded processes still running: SIGTERM, then SIGKILL to those left after
/// `grace`. Only processes that still match their record are signalled.
pub fn stop_recorded(processes: &[Recorded], grace: std::time::Duration) {
    use nix::sys::signal::Signal;
    for p in processes {
        p.signal(Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    while processes.iter().any(Recorded::is_running) {
        if std::time::Instant::now() >= deadline {
            for p in processes {
                p.signal(Signal::SIGKILL);
            }
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests;
