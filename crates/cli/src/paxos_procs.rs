//! The in-network Paxos store served and deployed: `onepipe paxos serve` (the Redis-protocol
//! front), `onepipe paxos up` (every switch, replica and the backup coordinator as processes of
//! their own over UDP), `onepipe paxos node` (one of them, what `up` starts), and the one-shot
//! clients `onepipe paxos get|set`.

use crate::flags::KeyFlags;
use clap::Args;
use onepipe_bench::paxos::processes::{self, Processes};
use onepipe_bench::paxos::serve;
use onepipe_fabric::Topology;
use onepipe_kv::replicated::SyncMode;
use onepipe_kv::{Bytes, Command, Reply, SetCondition, StoreError};
use std::path::PathBuf;
use std::process::{Child, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The paxos testbed with two client hosts: processes 0-1 clients, 2-4 replicas, 5 the backup.
const DEFAULT_TOPOLOGY: &str = "paxos-testbed:10";

/// Which deployment: a topology file or preset, its partitions, and the fabric's keys.
#[derive(Args, Debug, Clone)]
pub struct DeploymentFlags {
    /// A topology file, or a preset name (docs/topology.md), shaped as the paxos testbed
    #[arg(long, default_value = DEFAULT_TOPOLOGY)]
    topology: String,
    /// Partitions (independent logs); every process of a deployment must be given the same
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: u16,
    #[command(flatten)]
    keys: KeyFlags,
}

pub(crate) fn topology(name: &str) -> Result<Topology, String> {
    let path = std::path::Path::new(name);
    match path.exists() {
        true => Topology::from_file(path).map_err(|e| e.to_string()),
        false => Topology::preset(name).map_err(|e| e.to_string()),
    }
}

impl DeploymentFlags {
    fn processes(&self) -> Result<Processes, String> {
        processes_of(&self.topology, self.partitions, &self.keys)
    }

    /// The flags again, for a child process (the key file pinned, so that every child reads
    /// the one `up` made or found).
    fn to_cli(&self) -> Result<Vec<String>, String> {
        let mut keys = self.keys.clone();
        keys.pin(&topology(&self.topology)?);
        let mut v = vec![
            "--topology".to_string(),
            self.topology.clone(),
            "--partitions".into(),
            self.partitions.to_string(),
        ];
        v.extend(keys.to_cli());
        Ok(v)
    }
}

fn processes_of(name: &str, partitions: u16, keys: &KeyFlags) -> Result<Processes, String> {
    let t = topology(name)?;
    let auth = keys.auth(&t)?;
    Processes::new(t, auth, partitions)
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    listen: crate::flags::ListenFlags,
    /// inproc or udp (every node of the server's own deployment its own socket on loopback)
    #[arg(long, default_value = "inproc", value_parser = ["inproc", "udp"])]
    runtime: String,
    /// Partitions (independent logs, keys hashed to them); a multi-key command across them is
    /// answered CROSSSLOT
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: u16,
    /// Keep the replicas' stores in DIR/replica-N, which must not hold stores yet (default: a
    /// temporary directory, removed)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// fsync each replica's journal before it answers (default: written, not fsynced)
    #[arg(long)]
    sync: bool,
    /// Worker threads of the server's own deployment (default: 2)
    #[arg(long, default_value_t = 2, value_parser = crate::bounds::int::<usize>(1..=crate::bounds::THREADS_MAX))]
    workers: usize,
    /// Serve a deployment that `onepipe paxos up` started (a file or preset) instead of one of
    /// the server's own, joining it as client processes
    #[arg(long)]
    topology: Option<String>,
    /// With --topology: the client processes of the topology the server joins as
    #[arg(long, value_delimiter = ',', default_value = "0", value_parser = crate::bounds::int::<u32>(0..=crate::bounds::PROCESSES_MAX))]
    processes: Vec<u32>,
    #[command(flatten)]
    keys: KeyFlags,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// A topology file, or a preset name, shaped as the paxos testbed
    #[arg(default_value = DEFAULT_TOPOLOGY)]
    topology: String,
    /// Partitions (independent logs); `serve`, `get` and `set` must be given the same
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u16>(1..=64))]
    partitions: u16,
    /// Keep the replicas' stores in DIR/replica-N, which must not hold stores yet (default: a
    /// temporary directory, removed when `up` stops)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// fsync each replica's journal before it answers
    #[arg(long)]
    sync: bool,
    #[command(flatten)]
    keys: KeyFlags,
}

#[derive(Args, Debug)]
pub struct NodeArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
    /// Run this switch (its roles: the coordinator, an acceptor, or forwarding only)
    #[arg(long, conflicts_with = "process", required_unless_present = "process")]
    switch: Option<String>,
    /// Run this process (a replica, or the backup coordinator)
    #[arg(long, value_parser = crate::bounds::int::<u32>(0..=crate::bounds::PROCESSES_MAX))]
    process: Option<u32>,
    /// Where the replicas keep their stores (DIR/replica-N)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// fsync each replica's journal before it answers
    #[arg(long)]
    sync: bool,
    /// Stop when the process that started this one exits
    #[arg(long)]
    exit_with_parent: bool,
}

/// A one-command client: `onepipe paxos get KEY`, `onepipe paxos set KEY VALUE`.
#[derive(Args, Debug)]
pub struct CallArgs {
    #[command(flatten)]
    deployment: DeploymentFlags,
    /// The client process of the topology to join as (its address is bound for the call)
    #[arg(long, default_value_t = 0, value_parser = crate::bounds::int::<u32>(0..=crate::bounds::PROCESSES_MAX))]
    process: u32,
    /// KEY (get), or KEY VALUE (set)
    #[arg(required = true)]
    words: Vec<String>,
}

pub(crate) fn stop_on_signal() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).map_err(|e| e.to_string())?;
    Ok(stop)
}

fn sync_mode(sync: bool) -> SyncMode {
    if sync {
        SyncMode::EveryBatch
    } else {
        SyncMode::Buffered
    }
}

pub(crate) fn wait_for(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        #[allow(clippy::disallowed_methods)] // the CLI waits for Ctrl-C
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    let listener = args.listen.listener()?;
    let (serving, what) = match &args.topology {
        None => {
            let config = serve::PaxosServeConfig {
                runtime: args.runtime.parse()?,
                partitions: args.partitions,
                data_dir: args.data_dir.clone(),
                sync: sync_mode(args.sync),
                workers: args.workers,
            };
            let what = format!(
                "a deployment of its own: coordinator s1, acceptors s2-s4, 3 replicas, {} partition(s), {} runtime",
                args.partitions, args.runtime
            );
            (serve::start(&config, listener)?, what)
        }
        Some(t) => {
            let p = processes_of(t, args.partitions, &args.keys)?;
            let what = format!("the deployment of {t}, as client processes {:?}", args.processes);
            (serve::start_joined(&p, &args.processes, listener)?, what)
        }
    };
    let stop = stop_on_signal()?;
    println!(
        "paxos: serving the Redis protocol on {} ({what}); Ctrl-C stops",
        serving.server.local_addr()
    );
    wait_for(&stop);
    serving.stop();
    Ok(ExitCode::SUCCESS)
}

pub fn node(args: NodeArgs) -> Result<ExitCode, String> {
    let p = args.deployment.processes()?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        onepipe::supervise::stop_with_parent(&stop);
    }
    match (&args.switch, args.process) {
        (Some(name), _) => {
            let c = processes::run_switch(&p, name, &stop)?;
            eprintln!("paxos switch {name}: {c:?}");
        }
        (None, Some(process)) => {
            let dir = args
                .data_dir
                .clone()
                .ok_or("--data-dir: where the replicas keep their stores")?;
            processes::run_process(&p, process, &dir, sync_mode(args.sync), &stop)?;
        }
        (None, None) => return Err("--switch NAME or --process N".into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts every switch, the replicas and the backup coordinator as processes of their own;
/// Ctrl-C stops them.
pub fn up(args: UpArgs) -> Result<ExitCode, String> {
    let flags = DeploymentFlags {
        topology: args.topology.clone(),
        partitions: args.partitions,
        keys: args.keys.clone(),
    };
    let p = flags.processes()?;
    let temporary = args.data_dir.is_none();
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("onepipe-paxos-up-{}", std::process::id())),
    };
    processes::check_fresh(&data_dir)?;
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let stop = stop_on_signal()?;
    let common = flags.to_cli()?;
    let spawn = |words: &[String]| -> Result<Child, String> {
        std::process::Command::new(&exe)
            .args(["paxos", "node"])
            .args(words)
            .args(&common)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(args.sync.then_some("--sync"))
            .arg("--exit-with-parent")
            .spawn()
            .map_err(|e| format!("cannot start {words:?}: {e}"))
    };
    let mut children = Vec::new();
    let mut names = Vec::new();
    for s in p.switch_names() {
        children.push(spawn(&["--switch".into(), s.clone()])?);
        names.push(format!("switch {s}"));
    }
    for process in p.server_processes() {
        children.push(spawn(&["--process".into(), process.to_string()])?);
        names.push(format!("{:?} (process {process})", p.role(process)?));
    }
    let d = &p.deployment;
    eprintln!(
        "paxos: {} switches (coordinator s1, acceptors s2-s4), replicas as processes {:?}, the backup coordinator as process {}, stores in {}; client processes {:?}: `onepipe paxos serve|get|set --topology {} ...`; Ctrl-C stops them",
        p.wiring.switch_count(),
        d.replicas,
        d.backup,
        data_dir.display(),
        d.clients,
        args.topology
    );
    let mut reported = vec![false; children.len()];
    while !stop.load(Ordering::Relaxed) {
        for (i, c) in children.iter_mut().enumerate() {
            if !reported[i] && matches!(c.try_wait(), Ok(Some(_))) {
                reported[i] = true;
                eprintln!("paxos: {} exited", names[i]);
            }
        }
        #[allow(clippy::disallowed_methods)] // the supervisor waits for Ctrl-C
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for c in &mut children {
        let _ = std::process::Command::new("kill")
            .arg(c.id().to_string())
            .status();
    }
    for c in &mut children {
        let _ = c.wait();
    }
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one GET or SET and prints its reply as redis-cli does; exit status 0 when answered, 1
/// for an error reply, 2 when the outcome is unknown.
pub fn call(command: &str, args: CallArgs) -> Result<ExitCode, String> {
    let w = &args.words;
    let command = match (command, w.as_slice()) {
        ("get", [key]) => Command::Get {
            key: Bytes::from(key.clone()),
        },
        ("set", [key, value]) => Command::Set {
            key: Bytes::from(key.clone()),
            value: Bytes::from(value.clone()),
            condition: SetCondition::Always,
        },
        ("get", _) => return Err("usage: onepipe paxos get KEY".into()),
        _ => return Err("usage: onepipe paxos set KEY VALUE".into()),
    };
    let p = args.deployment.processes()?;
    let (line, code) = match processes::call(&p, args.process, command)? {
        Ok(Reply::Bulk(v)) => (String::from_utf8_lossy(&v).into_owned(), 0),
        Ok(Reply::Nil) => ("(nil)".into(), 0),
        Ok(Reply::Ok) => ("OK".into(), 0),
        Ok(other) => (format!("{other:?}"), 0),
        Err(e @ StoreError::OutcomeUnknown(_)) => (e.to_redis_error(), 2),
        Err(e) => (e.to_redis_error(), 1),
    };
    println!("{line}");
    Ok(ExitCode::from(code))
}
