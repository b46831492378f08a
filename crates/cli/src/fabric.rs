//! `onepipe switch`, `onepipe controller`, `onepipe up` and `onepipe down`: a topology as
//! separate OS processes over UDP (docs/udp.md). The supervision, the controller and its
//! replicas are library code ([`onepipe::supervise`], [`onepipe_etcd::replica_loop`]); this
//! parses their flags, says how to start a child, and prints.

use crate::flags::{DeadAfterFlag, EtcdFlags, KeyFlags, TimeAheadFlag};
use clap::Args;
use onepipe::file_store::FileStore;
use onepipe::supervise::{self, Children, Note, Res, UpPlan, serve};
use onepipe::udp::{UdpOptions, run_switch_reporting};
use onepipe_etcd::Connect;
use onepipe_etcd::replica_loop::{self, DEFAULT_LEASE_TTL_SECS};
use onepipe_fabric::{EtcdFiles, Topology};
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::controller::store::MemoryStore;
use onepipe_runtime::udp::UdpConfig;
use onepipe_runtime::udp::inject::InjectConfig;
use onepipe_runtime::udp::{IdlePolicy, UdpCounters};
use onepipe_wire::Duration;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The udp fabric's `--dead-after-intervals`: 0.5 s at its 500 us beacons.
const DEAD_AFTER_INTERVALS: u32 = 1_000;

/// What every participant of a udp fabric must agree on.
#[derive(Args, Clone, Debug)]
pub struct FabricArgs {
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u32>(1..=onepipe_fabric::limits::PROCESSES_PER_HOST_MAX as u64))]
    pub processes_per_host: u32,
    /// Beacon interval; ordering costs about half of it in latency
    #[arg(long, default_value_t = 500, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::MICROS_MAX as u64))]
    pub beacon_interval_us: u64,
    /// Largest datagram, header included (loopback takes up to 65507)
    #[arg(long, default_value_t = 8_972, value_parser = crate::bounds::int::<usize>(64..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT as u64))]
    pub datagram_bytes: usize,
    /// Poll without ever blocking (a core per node) instead of parking when idle
    #[arg(long)]
    pub busy_poll: bool,
    #[command(flatten)]
    pub dead: DeadAfterFlag,
    #[command(flatten)]
    pub key: KeyFlags,
    #[command(flatten)]
    pub time_ahead: TimeAheadFlag,
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
        o.dead_after_intervals = self.dead_after_intervals();
        o.time_ahead_max = self.time_ahead.duration()?;
        o.udp = UdpConfig {
            datagram_bytes_max: self.datagram_bytes,
            idle: if self.busy_poll {
                IdlePolicy::BusyPoll
            } else {
                UdpConfig::default().idle
            },
            auth: self.key.auth(&o.topology)?,
            ..UdpConfig::default()
        };
        Ok(o)
    }

    /// `--dead-after-intervals`, or the udp fabric's default.
    fn dead_after_intervals(&self) -> u32 {
        self.dead.dead_after_intervals.unwrap_or(DEAD_AFTER_INTERVALS)
    }

    fn to_cli(&self) -> Vec<String> {
        let mut v = vec![
            format!("--processes-per-host={}", self.processes_per_host),
            format!("--beacon-interval-us={}", self.beacon_interval_us),
            format!("--dead-after-intervals={}", self.dead_after_intervals()),
            format!("--datagram-bytes={}", self.datagram_bytes),
            self.time_ahead.to_cli(),
        ];
        if self.busy_poll {
            v.push("--busy-poll".into());
        }
        v.extend(self.key.to_cli());
        v
    }
}

#[derive(Args, Clone, Debug)]
pub struct ReplicaArgs {
    /// Keep the log in etcd at URL (http://HOST:PORT, or https://HOST:PORT over TLS) and run
    /// as one controller replica: it stands by until it wins the election, then acts as the
    /// controller. Default: the topology's `[controller] etcd`
    #[arg(long, value_name = "URL", conflicts_with = "log")]
    pub etcd: Option<String>,
    #[command(flatten)]
    pub etcd_files: EtcdFlags,
    /// This replica's name in the election (default: HOSTNAME-PID)
    #[arg(long, value_name = "NAME")]
    pub replica: Option<String>,
    /// Lease TTL: a standby takes over one to one and a third TTLs after the active replica
    /// stops renewing its lease (etcd raises a TTL under its minimum, 2 s by default)
    #[arg(long, default_value_t = DEFAULT_LEASE_TTL_SECS, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::LEASE_TTL_SECS_MAX))]
    pub lease_ttl_secs: u64,
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
    #[arg(long, value_name = "US", default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(i64).range(-crate::bounds::CLOCK_OFFSET_US_MAX..=crate::bounds::CLOCK_OFFSET_US_MAX))]
    clock_offset_us: i64,
    /// Fault injection for tests: drop each datagram this switch receives with this
    /// probability (docs/udp.md, "Injected faults")
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = crate::bounds::probability())]
    inject_loss: f64,
    /// Fault injection for tests: flip one bit of each datagram this switch receives with
    /// this probability
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = crate::bounds::probability())]
    inject_corrupt: f64,
}

/// A probability, 0 to 1.
/// How the controller decides (paper 5.2).
#[derive(Args, Clone, Debug)]
pub struct DecideArgs {
    /// After a first link-down report, wait this long for the others one failure causes
    /// before deciding (neighbours time out at slightly different times)
    #[arg(long, default_value_t = 20, value_parser = crate::bounds::int::<u64>(0..=crate::bounds::MILLIS_MAX))]
    pub settle_ms: u64,
    /// A correct process that has not answered a failure announcement this long after it is
    /// declared failed too (paper 5.2); generous, since processes share the cores here.
    /// [default: 2000; on etcd, 2000 plus two lease TTLs, since answers sent while a standby
    /// takes over reach no controller]
    #[arg(long, value_parser = crate::bounds::int::<u64>(1..=crate::bounds::MILLIS_MAX))]
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
    #[arg(long, value_name = "SECONDS", value_parser = crate::bounds::int::<u64>(1..=crate::bounds::LEASE_TTL_SECS_MAX))]
    lease_ttl_secs: Option<u64>,
    #[command(flatten)]
    etcd_files: EtcdFlags,
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
    let max = crate::bounds::CLOCK_OFFSET_US_MAX;
    if !(-max..=max).contains(&us) {
        return Err(format!("{us} is not in -{max}..={max}"));
    }
    Ok((name.to_string(), us))
}

#[derive(Args)]
pub struct DownArgs {
    /// The topology file given to `onepipe up`
    topology: PathBuf,
}

pub(crate) fn load(path: &Path) -> Res<Topology> {
    Ok(Topology::from_file(path)?)
}

/// Set on Ctrl-C, SIGTERM or SIGHUP.
fn stop_on_signal() -> Res<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))?;
    Ok(stop)
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
    options.udp.inject = InjectConfig {
        loss: args.inject_loss,
        corrupt: args.inject_corrupt,
        seed: onepipe_fabric::hash::mix64(std::process::id() as u64),
    };
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        supervise::stop_with_parent(&stop);
    }
    let counters = UdpCounters::default();
    let mut report = supervise::switch_reporter(args.node.clone(), args.status_file, args.cut_file, say);
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
    let url = args
        .replica
        .etcd
        .clone()
        .or_else(|| topology.controller.as_ref().and_then(|c| c.etcd.clone()));
    let etcd = args.replica.etcd_files.connect(url.as_deref(), &topology)?;
    let options = args.fabric.options(topology)?;
    let stop = stop_on_signal()?;
    if args.exit_with_parent {
        supervise::stop_with_parent(&stop);
    }
    match (&etcd, &args.log) {
        (Some(connect), Some(_)) => Err(format!(
            "the topology keeps the controller's log in etcd ({}): drop --log, or the table's etcd",
            connect.endpoint
        )
        .into()),
        (Some(connect), None) => {
            let config = args.decide.config(Some(args.replica.lease_ttl_secs));
            replica_loop::run(
                args.replica.replica,
                args.replica.lease_ttl_secs,
                connect,
                &options,
                config,
                &stop,
                say,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        (None, _) if args.replica.replica.is_some() => {
            Err("--replica needs etcd (--etcd URL, or `etcd` in the topology's [controller])".into())
        }
        (None, Some(path)) => {
            let store = FileStore::open(path)?;
            serve(
                &options,
                args.decide.config(None),
                store,
                &stop,
                &path.display().to_string(),
                say,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        (None, None) => {
            let store = MemoryStore::default();
            serve(&options, args.decide.config(None), store, &stop, "in memory", say)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints a line of the supervisor, the controller or a replica where it belongs.
fn say(note: Note) {
    match note {
        Note::Out(line) => println!("{line}"),
        Note::Err(line) => eprintln!("{line}"),
    }
}

/// `onepipe up`'s children: this same binary, as `onepipe controller` and `onepipe switch`
/// with the flags `up` was given.
struct Spawn<'a> {
    exe: PathBuf,
    args: &'a UpArgs,
    topology: Topology,
    /// The files that secure the way to etcd, as found once for every replica.
    etcd_files: EtcdFiles,
}

impl Spawn<'_> {
    fn connect(&self, url: &str) -> Connect {
        Connect {
            endpoint: url.to_string(),
            files: self.etcd_files.clone(),
        }
    }
}

impl Children for Spawn<'_> {
    fn controller(&mut self, replica: Option<&str>, log: &Path) -> std::io::Result<Child> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("controller").arg("--topology").arg(&self.args.topology);
        match replica {
            Some(r) => {
                cmd.args(["--replica", r]);
                cmd.args(EtcdFlags::to_cli(&self.etcd_files));
                if let Some(ttl) = self.args.lease_ttl_secs {
                    cmd.arg(format!("--lease-ttl-secs={ttl}"));
                }
            }
            None => {
                cmd.arg("--log").arg(log);
            }
        }
        cmd.args(self.args.decide.to_cli())
            .args(self.args.fabric.to_cli())
            .arg("--exit-with-parent")
            .spawn()
    }

    fn switch(
        &mut self,
        name: &str,
        status_file: &Path,
        cut_file: &Path,
        clock_offset_us: i64,
    ) -> std::io::Result<Child> {
        Command::new(&self.exe)
            .arg("switch")
            .arg("--topology")
            .arg(&self.args.topology)
            .arg("--node")
            .arg(name)
            .args(self.args.fabric.to_cli())
            .arg("--exit-with-parent")
            .arg("--status-file")
            .arg(status_file)
            .arg("--cut-file")
            .arg(cut_file)
            .arg(format!("--clock-offset-us={clock_offset_us}"))
            .spawn()
    }

    fn prepare_group(&mut self, url: &str) -> Res<()> {
        replica_loop::prepare_group(&self.connect(url), &self.topology, say)
    }

    fn forget_group(&mut self, url: &str) {
        replica_loop::forget_group(&self.connect(url), &self.topology, say);
    }
}

pub fn up(args: UpArgs) -> Result<ExitCode, String> {
    up_inner(args).map_err(|e| e.to_string())
}

fn up_inner(mut args: UpArgs) -> Res<ExitCode> {
    let topology = load(&args.topology)?;
    let options = args.fabric.options(topology.clone())?;
    // The key was found or made above: every child reads that file, whatever its environment.
    args.fabric.key.pin(&topology);
    let plan = UpPlan {
        topology_file: args.topology.clone(),
        topology: topology.clone(),
        processes_per_host: options.processes_per_host,
        controller_log: args.controller_log.clone(),
        lease_ttl_secs: args.lease_ttl_secs,
        switch_clock_offsets: args.switch_clock_offset.clone(),
    };
    let url = topology.controller.as_ref().and_then(|c| c.etcd.clone());
    let etcd_files = args
        .etcd_files
        .connect(url.as_deref(), &topology)?
        .map(|c| c.files)
        .unwrap_or_default();
    let stop = stop_on_signal()?;
    let mut spawn = Spawn {
        exe: std::env::current_exe()?,
        args: &args,
        topology,
        etcd_files,
    };
    supervise::up(&plan, &mut spawn, &stop, say)?;
    Ok(ExitCode::SUCCESS)
}

pub fn down(args: DownArgs) -> Result<ExitCode, String> {
    match supervise::down(&args.topology).map_err(|e| e.to_string())? {
        true => eprintln!("{} is down", args.topology.display()),
        false => eprintln!("{} is not up", args.topology.display()),
    }
    Ok(ExitCode::SUCCESS)
}
