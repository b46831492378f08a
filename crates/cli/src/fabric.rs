//! `onepipe switch`, `onepipe controller`, `onepipe up` and `onepipe down`: a topology as
//! separate OS processes over UDP (docs/udp.md).

#![allow(clippy::disallowed_methods)] // supervision waits on real time

use crate::ready;
use crate::replica::{self, ReplicaArgs};
use clap::Args;
use onepipe::control_node::{ControlEvent, ControllerNode};
use onepipe::file_store::FileStore;
use onepipe::udp::{SwitchStatus, UdpOptions, run_controller, run_switch_reporting};
use onepipe_fabric::Wiring;
use onepipe_fabric::{Peer, Topology};
use onepipe_proto::controller::store::{MemoryStore, Store};
use onepipe_proto::controller::{ControllerConfig, Member};
use onepipe_runtime::udp::UdpConfig;
use onepipe_runtime::udp::plan::AddressPlan;
use onepipe_runtime::udp::{IdlePolicy, UdpCounters};
use onepipe_wire::Duration;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What every participant of a udp fabric must agree on.
#[derive(Args, Clone, Debug)]
pub struct FabricArgs {
    #[arg(long, default_value_t = 1)]
    pub processes_per_host: u32,
    /// Beacon interval; ordering costs about half of it in latency
    #[arg(long, default_value_t = 500)]
    pub beacon_interval_us: u64,
    /// An input link silent for this many beacon intervals is removed
    #[arg(long, default_value_t = 1_000)]
    pub dead_after_beacons: u32,
    /// Largest datagram, header included (loopback takes up to 65507)
    #[arg(long, default_value_t = 8_972)]
    pub datagram_bytes: usize,
    /// Poll without ever blocking (a core per node) instead of parking when idle
    #[arg(long)]
    pub busy_poll: bool,
}

impl FabricArgs {
    pub fn options(&self, topology: Topology) -> std::result::Result<UdpOptions, String> {
        if self.processes_per_host == 0 {
            return Err("--processes-per-host must be at least 1".into());
        }
        onepipe_bench::runtimes::check_datagram_bytes(self.datagram_bytes)?;
        let mut o = UdpOptions::new(topology);
        o.processes_per_host = self.processes_per_host;
        o.beacon_interval = Duration::from_micros(self.beacon_interval_us);
        o.dead_after_intervals = self.dead_after_beacons;
        o.udp = UdpConfig {
            datagram_bytes_max: self.datagram_bytes,
            idle: if self.busy_poll {
                IdlePolicy::BusyPoll
            } else {
                UdpConfig::default().idle
            },
            ..UdpConfig::default()
        };
        Ok(o)
    }

    fn to_cli(&self) -> Vec<String> {
        let mut v = vec![
            format!("--processes-per-host={}", self.processes_per_host),
            format!("--beacon-interval-us={}", self.beacon_interval_us),
            format!("--dead-after-beacons={}", self.dead_after_beacons),
            format!("--datagram-bytes={}", self.datagram_bytes),
        ];
        if self.busy_poll {
            v.push("--busy-poll".into());
        }
        v
    }
}

#[derive(Args)]
pub struct SwitchArgs {
    /// Topology file (docs/topology.md)
    #[arg(long)]
    topology: PathBuf,
    /// Name of the switch to run
    #[arg(long)]
    node: String,
    #[command(flatten)]
    fabric: FabricArgs,
    /// Exit when the process that started this one goes (used by `onepipe up`)
    #[arg(long, hide = true)]
    exit_with_parent: bool,
    /// Write the switch's status (per-link barrier lag, counters) here as JSON every 200 ms,
    /// for `onepipe inspect` (`onepipe up` sets it)
    #[arg(long, value_name = "FILE")]
    status_file: Option<PathBuf>,
    /// Fault injection: cut the links to the neighbours this file names, one per line, as
    /// the switch's status names them (`onepipe cut-link` writes it; `onepipe up` sets it)
    #[arg(long, value_name = "FILE")]
    cut_file: Option<PathBuf>,
    /// Skew injection for tests: run this switch's clock this far ahead of the system clock
    /// (negative: behind), as if it ran on another machine. Its status then names a clock of
    /// its own, which `onepipe inspect` compares with the others only through its links
    #[arg(long, value_name = "US", default_value_t = 0, allow_hyphen_values = true)]
    clock_offset_us: i64,
}

/// How the controller decides (paper 5.2).
#[derive(Args, Clone, Debug)]
pub struct DecideArgs {
    /// After a first link-down report, wait this long for the others one failure causes
    /// before deciding (neighbours time out at slightly different times)
    #[arg(long, default_value_t = 20)]
    pub settle_ms: u64,
    /// A correct process that has not answered a failure announcement this long after it is
    /// declared failed too (paper 5.2); generous, since processes share the cores here.
    /// [default: 2000; on etcd, 2000 plus two lease TTLs, since answers sent while a standby
    /// takes over reach no controller]
    #[arg(long)]
    pub answer_timeout_ms: Option<u64>,
}

const ANSWER_TIMEOUT_MS: u64 = 2_000;

impl DecideArgs {
    /// The controller's configuration; `lease_ttl_secs` if its replicas take over from each
    /// other through etcd.
    pub fn config(&self, lease_ttl_secs: Option<u64>) -> ControllerConfig {
        let takeover_ms = lease_ttl_secs.map_or(0, |ttl| 2 * ttl.saturating_mul(1_000));
        let answer_ms = self.answer_timeout_ms.unwrap_or(ANSWER_TIMEOUT_MS + takeover_ms);
        ControllerConfig {
            settle: Duration::from_millis(self.settle_ms),
            answer_timeout: Duration::from_millis(answer_ms.max(1)),
        }
    }

    fn to_cli(&self) -> Vec<String> {
        let mut v = vec![format!("--settle-ms={}", self.settle_ms)];
        if let Some(ms) = self.answer_timeout_ms {
            v.push(format!("--answer-timeout-ms={ms}"));
        }
        v
    }
}

#[derive(Args)]
pub struct ControllerArgs {
    /// Topology file with a [controller] table (docs/udp.md)
    #[arg(long)]
    topology: PathBuf,
    /// Keep the controller's log in this file (JSON lines, synced before each decision): a
    /// controller restarted on it replays it and finishes a recovery in progress. Without it
    /// the log is kept in memory and lost with the process
    #[arg(long, value_name = "PATH")]
    log: Option<PathBuf>,
    #[command(flatten)]
    replica: ReplicaArgs,
    #[command(flatten)]
    decide: DecideArgs,
    #[command(flatten)]
    fabric: FabricArgs,
    /// Exit when the process that started this one goes (used by `onepipe up`)
    #[arg(long, hide = true)]
    exit_with_parent: bool,
}

#[derive(Args)]
pub struct UpArgs {
    /// Topology file (docs/topology.md)
    topology: PathBuf,
    #[command(flatten)]
    fabric: FabricArgs,
    #[command(flatten)]
    decide: DecideArgs,
    /// Where the controller keeps its log (topologies with a [controller] table); by default
    /// a file next to the switches' status files, removed with them. Not with `etcd` in the
    /// [controller] table: the replicas keep their log there
    #[arg(long, value_name = "PATH")]
    controller_log: Option<PathBuf>,
    /// The controller replicas' lease TTL (topologies whose [controller] names etcd)
    #[arg(long, value_name = "SECONDS")]
    lease_ttl_secs: Option<u64>,
    /// Skew injection for tests: run switch NAME's clock US microseconds ahead (negative:
    /// behind), as if on another machine (repeatable; `onepipe switch --clock-offset-us`)
    #[arg(long, value_name = "NAME=US", value_parser = parse_switch_offset, allow_hyphen_values = true)]
    switch_clock_offset: Vec<(String, i64)>,
}

fn parse_switch_offset(s: &str) -> std::result::Result<(String, i64), String> {
    let (name, us) = s.split_once('=').ok_or_else(|| format!("`{s}` is not NAME=US"))?;
    let us = us
        .parse::<i64>()
        .map_err(|e| format!("`{us}` is not a whole number of microseconds: {e}"))?;
    us.checked_mul(1_000)
        .ok_or_else(|| format!("{us} us is out of range"))?;
    Ok((name.to_string(), us))
}

#[derive(Args)]
pub struct DownArgs {
    /// The topology file given to `onepipe up`
    topology: PathBuf,
}

pub type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn load(path: &Path) -> Res<Topology> {
    Ok(Topology::from_file(path)?)
}

/// Set on Ctrl-C, SIGTERM or SIGHUP.
fn stop_on_signal() -> Res<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))?;
    Ok(stop)
}

/// Sets `stop` once the process that started this one has gone.
fn stop_with_parent(stop: &Arc<AtomicBool>) {
    let parent = std::os::unix::process::parent_id();
    let stop = stop.clone();
    std::thread::spawn(move || {
        while std::os::unix::process::parent_id() == parent {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
    });
}

pub fn switch(args: SwitchArgs) -> Result<ExitCode, String> {
    switch_inner(args).map_err(|e| e.to_string())
}

fn switch_inner(args: SwitchArgs) -> Res<ExitCode> {
    let mut options = args.fabric.options(load(&args.topology)?)?;
    options.switch_clock_offset_ns = args
        .clock_offset_us
        .checked_mul(1_000)
        .ok_or("--clock-offset-us is out of range")?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        stop_with_parent(&stop);
    }
    let counters = UdpCounters::default();
    let mut warned = false;
    let mut report = |status: &SwitchStatus| {
        if let Some(path) = &args.status_file {
            // Written aside and renamed, so a reader never sees half a report.
            let aside = path.with_extension("json.part");
            let json = serde_json::to_vec(status).expect("a status serializes");
            let written = std::fs::write(&aside, json).and_then(|_| std::fs::rename(&aside, path));
            if let Err(e) = written
                && !std::mem::replace(&mut warned, true)
            {
                eprintln!("switch {}: cannot write {}: {e}", args.node, path.display());
            }
        }
        let asked = args
            .cut_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok());
        asked.map_or_else(Vec::new, |a| a.lines().map(|l| l.trim().to_string()).collect())
    };
    let switch = run_switch_reporting(&options, &args.node, &stop, &counters, &mut report)?;
    let c = counters.snapshot();
    eprintln!(
        "switch {}: forwarded {} frames, {} beacons sent; datagrams in {} out {}; lost {}, reordered {}, malformed {}, from strangers {}",
        args.node,
        switch.forwarded,
        switch.beacons_sent,
        c.datagrams_in,
        c.datagrams_out,
        c.lost,
        c.reordered,
        c.malformed,
        c.unknown_source,
    );
    Ok(ExitCode::SUCCESS)
}

pub fn controller(args: ControllerArgs) -> Result<ExitCode, String> {
    controller_inner(args).map_err(|e| e.to_string())
}

fn controller_inner(args: ControllerArgs) -> Res<ExitCode> {
    let topology = load(&args.topology)?;
    let etcd = args
        .replica
        .etcd
        .clone()
        .or_else(|| topology.controller.as_ref().and_then(|c| c.etcd.clone()));
    let options = args.fabric.options(topology)?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        stop_with_parent(&stop);
    }
    match (&etcd, &args.log) {
        (Some(url), Some(_)) => Err(format!(
            "the topology keeps the controller's log in etcd ({url}): drop --log, or the table's etcd"
        )
        .into()),
        (Some(url), None) => {
            let config = args.decide.config(Some(args.replica.lease_ttl_secs));
            replica::run(&args.replica, url, &options, config, &stop)
        }
        (None, _) if args.replica.replica.is_some() => {
            Err("--replica needs etcd (--etcd URL, or `etcd` in the topology's [controller])".into())
        }
        (None, Some(path)) => serve(
            &options,
            args.decide.config(None),
            FileStore::open(path)?,
            &stop,
            &path.display().to_string(),
        ),
        (None, None) => serve(
            &options,
            args.decide.config(None),
            MemoryStore::default(),
            &stop,
            "in memory",
        ),
    }
}

/// `t=SECONDS.MICROS` since the Unix epoch: the controller's clock is the system clock.
fn at(t: onepipe_wire::Instant) -> String {
    let ns = t.as_nanos();
    format!("t={}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

/// Names for what the controller's events number.
struct Names {
    wiring: Wiring,
}

impl Names {
    fn switch(&self, s: usize) -> String {
        self.wiring
            .topology
            .switches
            .get(s)
            .map_or(format!("switch {s}"), |x| x.name.clone())
    }

    /// What is behind `port` of `member`.
    fn peer(&self, member: Member, port: u16) -> String {
        match member {
            Member::Switch(s) => match self.wiring.switch_ports.get(s).and_then(|p| p.get(port as usize)) {
                Some(p) => match p.peer {
                    Peer::Process(p) => format!("process {p}"),
                    Peer::Switch { switch, .. } => self.switch(switch),
                },
                None => format!("port {port}"),
            },
            Member::Process(p) => self
                .wiring
                .processes
                .get(p as usize)
                .map_or(format!("port {port}"), |spec| self.switch(spec.tor)),
        }
    }

    fn member(&self, member: Member) -> String {
        match member {
            Member::Switch(s) => self.switch(s),
            Member::Process(p) => format!("process {p}"),
        }
    }

    fn describe(&self, e: &ControlEvent) -> String {
        match e {
            ControlEvent::Report {
                at: t,
                member,
                port,
                last_commit,
            } => format!(
                "{} report: {} lost its link from {} (last commit barrier {})",
                at(*t),
                self.member(*member),
                self.peer(*member, *port),
                at(*last_commit)
            ),
            ControlEvent::Declared {
                at: t,
                failures,
                announced_to,
            } => {
                let list: Vec<String> = failures
                    .iter()
                    .map(|f| format!("process {} (failure timestamp {})", f.process, at(f.ts)))
                    .collect();
                format!(
                    "{} declared failed: {}; announced to {announced_to} correct processes",
                    at(*t),
                    list.join(", ")
                )
            }
            ControlEvent::Rerouted { at: t, avoid } => {
                let ends: Vec<String> = avoid
                    .iter()
                    .map(|&(s, p)| format!("{}->{}", self.switch(s), self.peer(Member::Switch(s), p)))
                    .collect();
                format!("{} reroute: every switch avoids {}", at(*t), ends.join(", "))
            }
            ControlEvent::Resumed { at: t, switch, ports } => {
                let from: Vec<String> = ports
                    .iter()
                    .map(|&p| self.peer(Member::Switch(*switch), p))
                    .collect();
                format!(
                    "{} resume: {} stops waiting for {}",
                    at(*t),
                    self.switch(*switch),
                    from.join(", ")
                )
            }
            ControlEvent::Cut { at: t, switch, port } => format!(
                "{} cut: {} cuts its link from {}",
                at(*t),
                self.switch(*switch),
                self.peer(Member::Switch(*switch), *port)
            ),
            ControlEvent::Refused { at: t, port, reason } => {
                format!("{} refused a frame on its port {port}: {reason}", at(*t))
            }
        }
    }
}

/// Runs the controller on `store` (described as `log`) until `stop`, printing what it does.
pub fn serve<S: Store + Send>(
    options: &UdpOptions,
    config: ControllerConfig,
    store: S,
    stop: &AtomicBool,
    log: &str,
) -> Res<ExitCode> {
    let wiring = Wiring::new(options.topology.clone(), options.processes_per_host)?;
    let plan = AddressPlan::new(&wiring)?;
    let names = Names { wiring };
    let counters = UdpCounters::default();
    let mut started = false;
    let mut on_events = |c: &ControllerNode<S>, events: Vec<ControlEvent>| {
        if !std::mem::replace(&mut started, true) {
            println!(
                "controller of `{}` at {} for {} switches and {} processes; log {}{}",
                names.wiring.topology.name,
                plan.controller.map_or("?".into(), |a| a.to_string()),
                names.wiring.switch_count(),
                names.wiring.process_count(),
                log,
                replayed(c.controller()),
            );
        }
        for e in &events {
            println!("{}", names.describe(e));
        }
    };
    let c = run_controller(options, config, store, stop, &counters, &mut on_events)?;
    let k = c.controller().counters();
    let s = counters.snapshot();
    println!(
        "controller stopped: {} processes failed; {} reports ({} repeated), {} inputs refused, {} late answers, {} processes silent; datagrams in {} out {}, from strangers {}, malformed {}",
        c.timeline.failures.len(),
        k.reports,
        k.duplicate_reports,
        c.timeline.refused,
        k.stale_completions,
        k.unanswered,
        s.datagrams_in,
        s.datagrams_out,
        s.unknown_source,
        s.malformed,
    );
    Ok(ExitCode::SUCCESS)
}

/// What a controller found in its log, for its first line: nothing if the log was empty.
fn replayed(c: &onepipe_proto::controller::Controller) -> String {
    let failed: Vec<String> = c.failures().iter().map(|f| f.process.to_string()).collect();
    let mut found = Vec::new();
    if c.counters().reports > 0 {
        found.push(format!("{} reports", c.counters().reports));
    }
    if !failed.is_empty() {
        found.push(format!("processes {} failed", failed.join(", ")));
    }
    if c.recovering() {
        found.push("recovery in progress".into());
    }
    if found.is_empty() {
        String::new()
    } else {
        format!(" (replayed: {})", found.join(", "))
    }
}

/// Where `onepipe up FILE` records what it started, for `onepipe down FILE`.
fn state_path(topology: &Path) -> Res<PathBuf> {
    let canonical = std::fs::canonicalize(topology)
        .map_err(|e| format!("cannot read topology file {}: {e}", topology.display()))?;
    let key = onepipe_fabric::hash::mix64(
        canonical
            .to_string_lossy()
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(8) ^ b as u64),
    );
    Ok(std::env::temp_dir().join(format!("onepipe-up-{key:016x}.pids")))
}

/// Where switch `name` of `onepipe up` reads the links it is to cut (`onepipe cut-link`).
pub fn cut_file(status_dir: &Path, name: &str) -> PathBuf {
    status_dir.join(format!("{name}.cut"))
}

/// Where the switches that `onepipe up FILE` started write their status.
pub fn status_dir(topology: &Path) -> Res<PathBuf> {
    Ok(state_path(topology)?.with_extension("status"))
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).is_ok()
}

/// Whether `pid` runs: exists and is not a zombie waiting for its parent to reap it.
fn alive(pid: u32) -> bool {
    let exists = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok();
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false);
    exists && !zombie
}

/// Asks children to stop, waits up to `grace`, then kills what is left.
fn stop_children(children: &mut [(String, Child)], grace: std::time::Duration) {
    for (_, c) in children.iter() {
        signal(c.id(), nix::sys::signal::Signal::SIGTERM);
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

pub fn up(args: UpArgs) -> Result<ExitCode, String> {
    up_inner(args).map_err(|e| e.to_string())
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
    /// The record `onepipe down` reads: this process first, then every child.
    fn record(&self) -> String {
        let mut record = format!("{}\n", std::process::id());
        for c in self
            .controllers
            .iter()
            .map(|c| &c.child)
            .chain(self.switches.iter().map(|(_, c)| c))
        {
            record += &format!("{}\n", c.id());
        }
        record
    }

    fn stop(&mut self, grace: std::time::Duration) {
        let mut all: Vec<(String, Child)> = std::mem::take(&mut self.switches);
        all.extend(self.controllers.drain(..).map(|c| (c.name, c.child)));
        stop_children(&mut all, grace);
    }
}

/// Waits until every switch reports and has heard its neighbour switches (`ready.rs`), so
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

fn up_inner(args: UpArgs) -> Res<ExitCode> {
    let topology = load(&args.topology)?;
    let options = args.fabric.options(topology.clone())?;
    let wiring = Wiring::new(topology.clone(), options.processes_per_host)?;
    let plan = AddressPlan::new(&wiring)?;
    if let Some((name, _)) = args
        .switch_clock_offset
        .iter()
        .find(|(name, _)| !topology.switches.iter().any(|s| s.name == *name))
    {
        return Err(format!("--switch-clock-offset: the topology has no switch `{name}`").into());
    }
    let state = state_path(&args.topology)?;
    if let Ok(text) = std::fs::read_to_string(&state)
        && let Some(pid) = text.lines().next().and_then(|l| l.trim().parse::<u32>().ok())
        && alive(pid)
    {
        return Err(format!(
            "{} is already up (process {pid}); `onepipe down {}` first",
            args.topology.display(),
            args.topology.display()
        )
        .into());
    }
    let stop = stop_on_signal()?;
    let exe = std::env::current_exe()?;
    let status = status_dir(&args.topology)?;
    let _ = std::fs::remove_dir_all(&status);
    std::fs::create_dir_all(&status)?;
    let controller_log = args
        .controller_log
        .clone()
        .unwrap_or_else(|| status.join("controller.log"));
    let spec = topology.controller.clone();
    let etcd = spec.as_ref().and_then(|c| c.etcd.clone());
    // Replicas on etcd are told their name (the topology names etcd); one controller its log.
    let start_controller = |name: &str, replica: Option<&str>| {
        let mut cmd = Command::new(&exe);
        cmd.arg("controller").arg("--topology").arg(&args.topology);
        match replica {
            Some(r) => {
                cmd.args(["--replica", r]);
                if let Some(ttl) = args.lease_ttl_secs {
                    cmd.arg(format!("--lease-ttl-secs={ttl}"));
                }
            }
            None => {
                cmd.arg("--log").arg(&controller_log);
            }
        }
        cmd.args(args.decide.to_cli())
            .args(args.fabric.to_cli())
            .arg("--exit-with-parent")
            .spawn()
            .map(|child| ControllerChild {
                name: name.to_string(),
                replica: replica.map(str::to_string),
                child,
                since: std::time::Instant::now(),
            })
            .map_err(|e| format!("cannot start {name}: {e}"))
    };
    if let Some(url) = &etcd {
        if args.controller_log.is_some() {
            return Err(format!(
                "the topology keeps the controller's log in etcd ({url}): drop --controller-log"
            )
            .into());
        }
        replica::prepare_group(url, &topology)?;
    } else if args.lease_ttl_secs.is_some() {
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
                    .push(start_controller(&format!("controller-{r}"), Some(&r))?);
            }
        }
        (Some(_), None) => started.controllers.push(start_controller("controller", None)?),
        (None, _) => {}
    }
    for s in &topology.switches {
        let offset_us = args
            .switch_clock_offset
            .iter()
            .rfind(|(name, _)| *name == s.name)
            .map_or(0, |&(_, us)| us);
        let child = Command::new(&exe)
            .arg("switch")
            .arg("--topology")
            .arg(&args.topology)
            .arg("--node")
            .arg(&s.name)
            .args(args.fabric.to_cli())
            .arg("--exit-with-parent")
            .arg("--status-file")
            .arg(status.join(format!("{}.json", s.name)))
            .arg("--cut-file")
            .arg(cut_file(&status, &s.name))
            .arg(format!("--clock-offset-us={offset_us}"))
            .spawn();
        match child {
            Ok(c) => started.switches.push((s.name.clone(), c)),
            Err(e) => {
                started.stop(std::time::Duration::from_secs(2));
                return Err(format!("cannot start switch {}: {e}", s.name).into());
            }
        }
    }
    std::fs::write(&state, started.record())?;
    if let Err(why) = wait_until_ready(&mut started, &status, &stop) {
        started.stop(std::time::Duration::from_secs(2));
        if let Some(url) = &etcd {
            replica::forget_group(url, &topology);
        }
        let _ = std::fs::remove_file(&state);
        let _ = std::fs::remove_dir_all(&status);
        return Err(why.into());
    }
    eprintln!(
        "{} switches of `{}` up over UDP ({} processes may join):",
        started.switches.len(),
        topology.name,
        wiring.process_count()
    );
    for (i, (name, c)) in started.switches.iter().enumerate() {
        eprintln!("  {:<14} {:<22} pid {}", name, plan.switches[i], c.id());
    }
    if let Some(addr) = plan.controller {
        let log = match &etcd {
            Some(url) => format!("etcd at {url} under {}", replica::prefix(&topology)),
            None => controller_log.display().to_string(),
        };
        for c in &started.controllers {
            eprintln!("  {:<14} {:<22} pid {} (log {log})", c.name, addr, c.child.id());
        }
    }
    eprintln!(
        "`onepipe inspect {0}` shows them; Ctrl-C here, or `onepipe down {0}`, stops them.",
        args.topology.display()
    );
    let mut failed = None;
    while !stop.load(Ordering::Relaxed) && failed.is_none() {
        let managed = !started.controllers.is_empty();
        let mut exited = Vec::new();
        for (i, (name, c)) in started.switches.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                if managed {
                    // A failed switch is what the controller is there for: the rest go on.
                    eprintln!("switch {name} exited ({status}); the controller handles its failure");
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
                Some(_) => eprintln!("{name} exited ({status}); restarting it, as a standby"),
                None => eprintln!("the controller exited ({status}); restarting it on its log"),
            }
            started.controllers[i] = start_controller(&name, replica.as_deref())?;
            std::fs::write(&state, started.record())?;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    started.stop(std::time::Duration::from_secs(3));
    if let Some(url) = &etcd {
        replica::forget_group(url, &topology);
    }
    let _ = std::fs::remove_file(&state);
    let _ = std::fs::remove_dir_all(&status);
    match failed {
        Some(why) => Err(why.into()),
        None => {
            eprintln!("stopped");
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn down(args: DownArgs) -> Result<ExitCode, String> {
    down_inner(args).map_err(|e| e.to_string())
}

fn down_inner(args: DownArgs) -> Res<ExitCode> {
    let state = state_path(&args.topology)?;
    let Ok(text) = std::fs::read_to_string(&state) else {
        eprintln!("{} is not up", args.topology.display());
        return Ok(ExitCode::SUCCESS);
    };
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    // The supervisor stops its switches; if it is gone, they are stopped directly.
    let targets: Vec<u32> = match pids.first() {
        Some(&up) if alive(up) => vec![up],
        _ => pids.iter().skip(1).copied().collect(),
    };
    for &pid in &targets {
        signal(pid, nix::sys::signal::Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) {
        if std::time::Instant::now() >= deadline {
            for &p in &pids {
                signal(p, nix::sys::signal::Signal::SIGKILL);
            }
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&state);
    eprintln!("{} is down", args.topology.display());
    Ok(ExitCode::SUCCESS)
}
