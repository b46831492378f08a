//! NetChain as separate processes over UDP: `onepipe netchain up` (a process per switch and
//! one for the controller) and the one-call clients `get`, `put`, `del`, `cas`, `lock`,
//! `unlock`, each joining the topology as one of its processes.

use crate::flags::KeyFlags;
use clap::Args;
use onepipe_bench::netchain::processes::{self, Deployment};
use onepipe_fabric::Topology;
use onepipe_netchain::{Call, Key, Outcome, Refusal};
use onepipe_wire::Duration;
use std::process::{Child, Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which NetChain: a topology file or preset, and its keys.
#[derive(Args, Debug, Clone)]
pub struct DeploymentFlags {
    /// A topology file, or a preset name (docs/topology.md); its last process runs the
    /// controller
    #[arg(long, default_value = "netchain-testbed")]
    topology: String,
    #[command(flatten)]
    keys: KeyFlags,
}

/// The NetChain of `topology` (a file, or a preset name) with the fabric's keys.
pub fn deployment(topology: &str, keys: &KeyFlags) -> Result<Deployment, String> {
    let path = std::path::Path::new(topology);
    let topology = match path.exists() {
        true => Topology::from_file(path).map_err(|e| e.to_string())?,
        false => Topology::preset(topology).map_err(|e| e.to_string())?,
    };
    let auth = keys.auth(&topology)?;
    Deployment::new(topology, auth)
}

impl DeploymentFlags {
    fn deployment(&self) -> Result<Deployment, String> {
        deployment(&self.topology, &self.keys)
    }

    /// The flags again, for a child process.
    fn to_cli(&self) -> Vec<String> {
        let mut v = vec!["--topology".to_string(), self.topology.clone()];
        if let Some(k) = &self.keys.key_file {
            v.extend(["--key-file".to_string(), k.display().to_string()]);
        }
        if self.keys.insecure_no_auth {
            v.push("--insecure-no-auth".into());
        }
        v
    }
}

#[derive(Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
}

#[derive(Args, Debug)]
pub struct SwitchArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
    /// The switch to run
    #[arg(long)]
    node: String,
    /// Stop when the process that started this one exits
    #[arg(long)]
    exit_with_parent: bool,
}

#[derive(Args, Debug)]
pub struct ControllerArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
    /// Stop when the process that started this one exits
    #[arg(long)]
    exit_with_parent: bool,
}

/// A one-call client: `onepipe netchain get KEY` and the like.
#[derive(Args, Debug)]
pub struct CallArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
    /// The process of the topology to join as (its address is bound for the call)
    #[arg(long, default_value_t = 0, value_parser = crate::bounds::int::<u32>(0..=crate::bounds::PROCESSES_MAX))]
    process: u32,
    /// How long each of the call's 3 attempts waits for its answer
    #[arg(long, default_value_t = 200, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::MILLIS_MAX))]
    timeout_ms: u64,
    /// KEY, then what the command takes (put: VALUE; cas: EXPECT NEW; lock, unlock: OWNER)
    #[arg(required = true)]
    words: Vec<String>,
}

fn stop_on_signal() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).map_err(|e| e.to_string())?;
    Ok(stop)
}

pub fn switch(args: SwitchArgs) -> Result<ExitCode, String> {
    let d = args.deployment.deployment()?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        onepipe::supervise::stop_with_parent(&stop);
    }
    let c = processes::run_switch(&d, &args.node, &stop)?;
    eprintln!(
        "netchain switch {}: {} reads, {} writes, {} forwarded, {} control; dropped {} malformed, {} spoofed, {} stale",
        args.node, c.reads, c.writes, c.forwarded, c.control, c.malformed, c.spoofed, c.stale_writes
    );
    Ok(ExitCode::SUCCESS)
}

pub fn controller(args: ControllerArgs) -> Result<ExitCode, String> {
    let d = args.deployment.deployment()?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        onepipe::supervise::stop_with_parent(&stop);
    }
    processes::run_controller(&d, &stop)?;
    Ok(ExitCode::SUCCESS)
}

/// Starts every switch and the controller as processes of their own; Ctrl-C stops them.
pub fn up(args: UpArgs) -> Result<ExitCode, String> {
    let d = args.deployment.deployment()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let stop = stop_on_signal()?;
    let spawn = |words: &[&str]| -> Result<Child, String> {
        Command::new(&exe)
            .arg("netchain")
            .args(words)
            .args(args.deployment.to_cli())
            .arg("--exit-with-parent")
            .spawn()
            .map_err(|e| format!("cannot start {words:?}: {e}"))
    };
    let mut children = Vec::new();
    for s in &d.wiring.topology.switches {
        children.push(spawn(&["switch", "--node", &s.name])?);
    }
    children.push(spawn(&["controller"])?);
    eprintln!(
        "netchain: {} switches and the controller (process {}) are up on {}; `onepipe netchain get|put|del|cas|lock|unlock --topology {} ...` talks to them; Ctrl-C stops them",
        d.wiring.switch_count(),
        d.controller,
        d.wiring.topology.name,
        args.deployment.topology
    );
    // A switch that exits is a failure NetChain handles (the controller's probes find it);
    // the controller exiting ends the deployment.
    let names: Vec<String> = d
        .wiring
        .topology
        .switches
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let mut reported = vec![false; children.len()];
    while !stop.load(Ordering::Relaxed) {
        for (i, c) in children.iter_mut().enumerate() {
            if reported[i] || !matches!(c.try_wait(), Ok(Some(_))) {
                continue;
            }
            reported[i] = true;
            match names.get(i) {
                Some(name) => eprintln!("netchain: switch {name} exited; the controller will fail it over"),
                None => eprintln!("netchain: the controller exited; stopping the switches"),
            }
        }
        if reported.last() == Some(&true) {
            break;
        }
        #[allow(clippy::disallowed_methods)] // the supervisor waits for Ctrl-C
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for c in &mut children {
        let _ = Command::new("kill").arg(c.id().to_string()).status();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    Ok(ExitCode::SUCCESS)
}

/// The call a command names, from its words.
fn parse_call(command: &str, words: &[String]) -> Result<Call, String> {
    let key = |w: &str| Key::new(w.as_bytes()).map_err(|e| format!("key `{w}`: {e}"));
    let bytes = |w: &String| w.as_bytes().to_vec();
    let arity = |n: usize, usage: &str| match words.len() == n {
        true => Ok(()),
        false => Err(format!("usage: onepipe netchain {command} {usage}")),
    };
    Ok(match command {
        "get" => {
            arity(1, "KEY")?;
            Call::Read(key(&words[0])?)
        }
        "put" => {
            arity(2, "KEY VALUE")?;
            Call::Insert(key(&words[0])?, bytes(&words[1]))
        }
        "del" => {
            arity(1, "KEY")?;
            Call::Delete(key(&words[0])?)
        }
        "cas" => {
            arity(3, "KEY EXPECT NEW")?;
            Call::Cas {
                key: key(&words[0])?,
                expect: Some(bytes(&words[1])),
                new: Some(bytes(&words[2])),
            }
        }
        "lock" | "unlock" => {
            arity(2, "KEY OWNER")?;
            let owner = Some(bytes(&words[1]));
            let (expect, new) = match command {
                "lock" => (None, owner),
                _ => (owner, None),
            };
            Call::Cas {
                key: key(&words[0])?,
                expect,
                new,
            }
        }
        other => return Err(format!("unknown command {other}")),
    })
}

/// Runs one call and prints its outcome; exit status 0 when it did what was asked, 1 when the
/// store said no (a compare that failed, a lock held by another, a refusal), 2 when the outcome
/// is unknown.
pub fn call(command: &str, args: CallArgs) -> Result<ExitCode, String> {
    let call = parse_call(command, &args.words)?;
    let d = args.deployment.deployment()?;
    let done = processes::call(&d, args.process, call, Duration::from_millis(args.timeout_ms))?;
    let text = |v: &Option<Vec<u8>>| {
        v.as_deref()
            .map_or("(absent)".into(), |b| String::from_utf8_lossy(b).into_owned())
    };
    let (line, code) = match (&done.outcome, command) {
        (Outcome::Ok(v), "get") => (text(v), 0),
        (Outcome::Ok(_), "lock") => ("acquired".into(), 0),
        (Outcome::Ok(_), "unlock") => ("released".into(), 0),
        (Outcome::Ok(_), _) => ("OK".into(), 0),
        (Outcome::CasFailed(_), "del") => ("absent already".into(), 1),
        (Outcome::CasFailed(v), "lock" | "unlock") => (format!("held by {}", text(v)), 1),
        (Outcome::CasFailed(v), _) => (format!("not swapped: the value is {}", text(v)), 1),
        // A key never installed has no value: nothing to delete, swap or release.
        (Outcome::Refused(Refusal::UnknownKey), "del") => ("absent already".into(), 1),
        (Outcome::Refused(Refusal::UnknownKey), "cas" | "unlock") => {
            ("not swapped: the value is (absent)".into(), 1)
        }
        (Outcome::Refused(r), _) => (format!("refused: {r}"), 1),
        (Outcome::Unknown, _) => (
            "unknown: no answer after every attempt; it may or may not have taken effect".into(),
            2,
        ),
    };
    println!("{line}");
    let us = done
        .completed_at
        .saturating_since(done.submitted_at)
        .as_micros_f64();
    eprintln!("({us:.0} us)");
    Ok(ExitCode::from(code))
}
