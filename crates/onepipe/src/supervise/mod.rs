//! Supervision of a topology run as separate OS processes over UDP (docs/udp.md): `onepipe
//! up` starts the controller (or its replicas) and every switch as child processes, waits
//! until the fabric is ready ([`ready`]), supervises them and stops them; `onepipe down` stops
//! what `up` started; [`serve`] runs the controller itself. The command line that starts a
//! child is the caller's ([`Children`]), as is where the lines for the operator go ([`Say`]).

#![allow(clippy::disallowed_methods)] // supervision waits on real time

pub mod ready;
mod serve;
pub mod state;

pub use serve::serve;
use state::{Recorded, read_record, stop_recorded, write_record};
pub use state::{runtime_dir, state_path, status_dir};

use crate::status::SwitchStatus;
use onepipe_fabric::{Topology, Wiring};
use onepipe_runtime::udp::plan::AddressPlan;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A line for the operator: for standard output, or for standard error.
pub enum Note {
    Out(String),
    Err(String),
}

/// Where the lines for the operator go.
pub type Say = fn(Note);

/// Where in etcd the replicas of `topology`'s controller keep their log and leader key.
pub fn controller_prefix(topology: &Topology) -> String {
    format!("/onepipe/{}/controller", topology.name)
}

/// What `onepipe up` runs.
pub struct UpPlan {
    /// The topology file, as given: children are told it, and it names the state.
    pub topology_file: PathBuf,
    pub topology: Topology,
    pub processes_per_host: u32,
    /// Where the controller keeps its log; by default a file next to the switches' status
    /// files, removed with them. Not with etcd in the [controller] table.
    pub controller_log: Option<PathBuf>,
    /// The replicas' lease TTL, only for topologies whose [controller] names etcd.
    pub lease_ttl_secs: Option<u64>,
    /// Switches whose clocks run off the system clock, in microseconds (skew injection).
    pub switch_clock_offsets: Vec<(String, i64)>,
}

/// How `onepipe up` starts its children, and prepares and forgets the controller replicas'
/// group in etcd (the etcd client is not this crate's).
pub trait Children {
    /// Starts the controller: replica `replica` on etcd, or the one controller keeping its
    /// log in `log`. It must exit when this process goes.
    fn controller(&mut self, replica: Option<&str>, log: &Path) -> std::io::Result<Child>;

    /// Starts switch `name`, writing its status to `status_file` and reading the links to
    /// cut from `cut_file`, its clock `clock_offset_us` off. It must exit when this process goes.
    fn switch(
        &mut self,
        name: &str,
        status_file: &Path,
        cut_file: &Path,
        clock_offset_us: i64,
    ) -> std::io::Result<Child>;

    /// Before replicas start on etcd at `url`: etcd answers, no replica of an earlier run
    /// still leads, and that run's log is gone.
    fn prepare_group(&mut self, url: &str) -> Res<()>;

    /// After every replica stopped: their log goes with the fabric.
    fn forget_group(&mut self, url: &str);
}

/// Sets `stop` once the process that started this one has gone.
pub fn stop_with_parent(stop: &Arc<AtomicBool>) {
    let parent = std::os::unix::process::parent_id();
    let stop = stop.clone();
    std::thread::spawn(move || {
        while std::os::unix::process::parent_id() == parent {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
    });
}

/// What a switch run by `onepipe up` does with each status report: writes it to
/// `status_file` (if any) for `onepipe inspect`, and returns the neighbours `cut_file` (if
/// any) names, for `onepipe cut-link`. Says once if a status cannot be written.
pub fn switch_reporter(
    node: String,
    status_file: Option<PathBuf>,
    cut_file: Option<PathBuf>,
    say: Say,
) -> impl FnMut(&SwitchStatus) -> Vec<String> {
    let mut warned = false;
    move |status: &SwitchStatus| {
        if let Some(path) = &status_file {
            // Written aside and renamed, so a reader never sees half a report.
            let aside = path.with_extension("json.part");
            let json = serde_json::to_vec(status).expect("a status serializes");
            let written = std::fs::write(&aside, json).and_then(|_| std::fs::rename(&aside, path));
            if let Err(e) = written
                && !std::mem::replace(&mut warned, true)
            {
                say(Note::Err(format!(
                    "switch {node}: cannot write {}: {e}",
                    path.display()
                )));
            }
        }
        let asked = cut_file.as_ref().and_then(|f| std::fs::read_to_string(f).ok());
        asked.map_or_else(Vec::new, |a| a.lines().map(|l| l.trim().to_string()).collect())
    }
}

/// Where switch `name` of `onepipe up` reads the links it is to cut (`onepipe cut-link`).
pub fn cut_file(status_dir: &Path, name: &str) -> PathBuf {
    status_dir.join(format!("{name}.cut"))
}

/// Asks our own child `c` to stop (a child not yet waited for keeps its pid: no other
/// process can have it).
fn terminate(c: &Child) {
    let pid = nix::unistd::Pid::from_raw(c.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
}

/// Asks children to stop, waits up to `grace`, then kills what is left.
fn stop_children(children: &mut [(String, Child)], grace: std::time::Duration) {
    for (_, c) in children.iter() {
        terminate(c);
    }
    let deadline = std::time::Instant::now() + grace;
    for (_, c) in children.iter_mut() {
        while c.try_wait().ok().flatten().is_none() {
            if std::time::Instant::now() >= deadline {
                let _ = c.kill();
                let _ = c.wait();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// A controller `onepipe up` started: the only one, or one of the replicas on etcd.
struct ControllerChild {
    /// `controller`, or `controller-rI` for replica `rI`.
    name: String,
    /// Replica `rI`'s name in the election, if on etcd.
    replica: Option<String>,
    child: Child,
    since: std::time::Instant,
}

/// What `onepipe up` started: the controller or its replicas (if any) and the switches.
struct Started {
    controllers: Vec<ControllerChild>,
    switches: Vec<(String, Child)>,
}

impl Started {
    /// The record `onepipe down` reads: this process first, then every child still running.
    fn record(&self) -> Vec<Recorded> {
        let children = self
            .controllers
            .iter()
            .map(|c| &c.child)
            .chain(self.switches.iter().map(|(_, c)| c));
        std::iter::once(std::process::id())
            .chain(children.map(Child::id))
            .filter_map(Recorded::of)
            .collect()
    }

    fn stop(&mut self, grace: std::time::Duration) {
        let mut all: Vec<(String, Child)> = std::mem::take(&mut self.switches);
        all.extend(self.controllers.drain(..).map(|c| (c.name, c.child)));
        stop_children(&mut all, grace);
    }
}

/// Waits until every switch reports and has heard its neighbour switches ([`ready`]), so
/// that what processes send once `up` says so is not lost to a socket not bound yet.
fn wait_until_ready(started: &mut Started, status: &Path, stop: &AtomicBool) -> Result<(), String> {
    let names: Vec<String> = started.switches.iter().map(|(n, _)| n.clone()).collect();
    let since = std::time::Instant::now();
    loop {
        // First: Ctrl-C reaches the switches too, and their exit is then no error of theirs.
        if stop.load(Ordering::Relaxed) {
            return Err("stopped while starting".into());
        }
        let children = started
            .switches
            .iter_mut()
            .map(|(name, c)| (format!("switch {name}"), c))
            .chain(
                started
                    .controllers
                    .iter_mut()
                    .map(|c| (c.name.clone(), &mut c.child)),
            );
        for (name, c) in children {
            if let Ok(Some(exit)) = c.try_wait() {
                return Err(format!("{name} exited ({exit}) while starting"));
            }
        }
        let Some(not_ready) = ready::first_not_ready(status, &names) else {
            return Ok(());
        };
        if since.elapsed() > ready::READY_WITHIN {
            return Err(format!(
                "the fabric did not come up within {} s: {not_ready}",
                ready::READY_WITHIN.as_secs()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A controller that exits with an error this soon after it started is not restarted (it
/// cannot start: a taken address, a bad log). One killed by a signal always is.
const CONTROLLER_RESTART_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs `onepipe up`: starts the controller (or its replicas) and every switch of the
/// topology as child processes (`children` starts them), waits until the fabric is ready,
/// then supervises them until `stop` (restarting a controller that dies) and stops them all.
pub fn up(plan: &UpPlan, children: &mut dyn Children, stop: &AtomicBool, say: Say) -> Res<()> {
    let topology = &plan.topology;
    let wiring = Wiring::new(topology.clone(), plan.processes_per_host)?;
    let addresses = AddressPlan::new(&wiring)?;
    if let Some((name, _)) = plan
        .switch_clock_offsets
        .iter()
        .find(|(name, _)| !topology.switches.iter().any(|s| s.name == *name))
    {
        return Err(format!("--switch-clock-offset: the topology has no switch `{name}`").into());
    }
    let state = state_path(&plan.topology_file)?;
    if let Some(up) = read_record(&state).first().filter(|p| p.is_running()) {
        return Err(format!(
            "{} is already up (process {}); `onepipe down {}` first",
            plan.topology_file.display(),
            up.pid,
            plan.topology_file.display()
        )
        .into());
    }
    let status = status_dir(&plan.topology_file)?;
    let _ = std::fs::remove_dir_all(&status);
    std::fs::create_dir(&status)?;
    // Whichever way `up` returns, its record and status files go.
    let _cleanup = Cleanup(vec![state.clone(), status.clone()]);
    let controller_log = plan
        .controller_log
        .clone()
        .unwrap_or_else(|| status.join("controller.log"));
    let spec = topology.controller.clone();
    let etcd = spec.as_ref().and_then(|c| c.etcd.clone());
    // Replicas on etcd are told their name (the topology names etcd); one controller its log.
    let start_controller = |children: &mut dyn Children, name: &str, replica: Option<&str>| {
        children
            .controller(replica, &controller_log)
            .map(|child| ControllerChild {
                name: name.to_string(),
                replica: replica.map(str::to_string),
                child,
                since: std::time::Instant::now(),
            })
            .map_err(|e| format!("cannot start {name}: {e}"))
    };
    if let Some(url) = &etcd {
        if plan.controller_log.is_some() {
            return Err(format!(
                "the topology keeps the controller's log in etcd ({url}): drop --controller-log"
            )
            .into());
        }
        children.prepare_group(url)?;
    } else if plan.lease_ttl_secs.is_some() {
        return Err(
            "--lease-ttl-secs is for controller replicas on etcd: the topology's [controller] \
                    names no etcd"
                .into(),
        );
    }
    let mut started = Started {
        controllers: Vec::new(),
        switches: Vec::new(),
    };
    // The controller first, so that it hears the switches' and processes' first words.
    match (&spec, &etcd) {
        (Some(spec), Some(_)) => {
            for i in 0..spec.replicas {
                let r = format!("r{i}");
                started
                    .controllers
                    .push(start_controller(children, &format!("controller-{r}"), Some(&r))?);
            }
        }
        (Some(_), None) => started
            .controllers
            .push(start_controller(children, "controller", None)?),
        (None, _) => {}
    }
    for s in &topology.switches {
        let offset_us = plan
            .switch_clock_offsets
            .iter()
            .rfind(|(name, _)| *name == s.name)
            .map_or(0, |&(_, us)| us);
        let child = children.switch(
            &s.name,
            &status.join(format!("{}.json", s.name)),
            &cut_file(&status, &s.name),
            offset_us,
        );
        match child {
            Ok(c) => started.switches.push((s.name.clone(), c)),
            Err(e) => {
                started.stop(std::time::Duration::from_secs(2));
                return Err(format!("cannot start switch {}: {e}", s.name).into());
            }
        }
    }
    write_record(&state, &started.record())?;
    if let Err(why) = wait_until_ready(&mut started, &status, stop) {
        started.stop(std::time::Duration::from_secs(2));
        if let Some(url) = &etcd {
            children.forget_group(url);
        }
        return Err(why.into());
    }
    say(Note::Err(format!(
        "{} switches of `{}` up over UDP ({} processes may join):",
        started.switches.len(),
        topology.name,
        wiring.process_count()
    )));
    for (i, (name, c)) in started.switches.iter().enumerate() {
        say(Note::Err(format!(
            "  {:<14} {:<22} pid {}",
            name,
            addresses.switches[i],
            c.id()
        )));
    }
    if let Some(addr) = addresses.controller {
        let log = match &etcd {
            Some(url) => format!("etcd at {url} under {}", controller_prefix(topology)),
            None => controller_log.display().to_string(),
        };
        for c in &started.controllers {
            say(Note::Err(format!(
                "  {:<14} {:<22} pid {} (log {log})",
                c.name,
                addr,
                c.child.id()
            )));
        }
    }
    say(Note::Err(format!(
        "`onepipe inspect {0}` shows them; Ctrl-C here, or `onepipe down {0}`, stops them.",
        plan.topology_file.display()
    )));
    let mut failed = None;
    while !stop.load(Ordering::Relaxed) && failed.is_none() {
        let managed = !started.controllers.is_empty();
        let mut exited = Vec::new();
        for (i, (name, c)) in started.switches.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                if managed {
                    // A failed switch is what the controller is there for: the rest go on.
                    say(Note::Err(format!(
                        "switch {name} exited ({status}); the controller handles its failure"
                    )));
                    exited.push(i);
                } else {
                    failed = Some(format!("switch {name} exited ({status})"));
                }
            }
        }
        for i in exited.into_iter().rev() {
            started.switches.remove(i);
        }
        for i in 0..started.controllers.len() {
            let c = &mut started.controllers[i];
            let Ok(Some(status)) = c.child.try_wait() else {
                continue;
            };
            let killed = std::os::unix::process::ExitStatusExt::signal(&status).is_some();
            if !killed && c.since.elapsed() < CONTROLLER_RESTART_AFTER {
                failed = Some(format!("{} exited ({status})", c.name));
                break;
            }
            let (name, replica) = (c.name.clone(), c.replica.clone());
            match &replica {
                Some(_) => say(Note::Err(format!(
                    "{name} exited ({status}); restarting it, as a standby"
                ))),
                None => say(Note::Err(format!(
                    "the controller exited ({status}); restarting it on its log"
                ))),
            }
            started.controllers[i] = start_controller(children, &name, replica.as_deref())?;
            write_record(&state, &started.record())?;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    started.stop(std::time::Duration::from_secs(3));
    if let Some(url) = &etcd {
        children.forget_group(url);
    }
    match failed {
        Some(why) => Err(why.into()),
        None => {
            say(Note::Err("stopped".into()));
            Ok(())
        }
    }
}

/// Removes its files and directories when dropped.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p).or_else(|_| std::fs::remove_dir_all(p));
        }
    }
}

/// Runs `onepipe down`: stops what `onepipe up` started for `topology_file` (the supervisor,
/// or its children directly if it is gone), signalling only processes that still match the
/// record ([`state`]). False if it was not up.
pub fn down(topology_file: &Path) -> Res<bool> {
    let state = state_path(topology_file)?;
    let recorded = read_record(&state);
    let Some(up) = recorded.first() else {
        return Ok(false);
    };
    // The supervisor stops its switches; if it is gone, they are stopped directly.
    let targets = if up.is_running() {
        &recorded[..1]
    } else {
        &recorded[1..]
    };
    stop_recorded(targets, std::time::Duration::from_secs(10));
    // What the supervisor did not clean up, gone with it.
    stop_recorded(&recorded, std::time::Duration::from_secs(2));
    let _ = std::fs::remove_file(&state);
    let _ = std::fs::remove_dir_all(status_dir(topology_file)?);
    Ok(true)
}
