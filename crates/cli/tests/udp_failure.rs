//! Failures over the udp runtime, as separate OS processes on loopback: `onepipe up` starts a
//! topology's switches and its controller, four application processes join it and send
//! reliable broadcasts, and mid-traffic one component is killed with SIGKILL (a ToR, a spine, or
//! an application process). The controller must declare exactly the processes behind it
//! failed; every correct process is called back for each of them, keeps delivering in one
//! total order, and every scattering is delivered by all of its correct receivers or by none
//! (paper 2.1, 5.2). Nothing is left running afterwards. One scenario first kills the
//! controller, which `onepipe up` restarts on its log. Another, which needs etcd (like the live
//! tests of crates/etcd, it is ignored unless run with ONEPIPE_ETCD=http://HOST:PORT), runs two
//! controller replicas and kills the active one in the middle of the recovery: the standby
//! takes over and finishes it.
//!
//! The application processes are this test binary run again (`app_process`), so that each is
//! an OS process of its own that can be killed. Timing is not judged: the dead-link timeout is
//! 300 ms so that a process descheduled on a loaded machine does not look dead (at 100 ms, two
//! busy loops beside the test had switches time out live links in 3 of 4 runs of this file,
//! one in 1 of 4, and whole-workspace test runs failed so now and then without any), and the
//! controller gives processes 10 s to answer. Detection and recovery times are printed for
//! docs/udp.md (`cargo test --release -p onepipe-cli --test udp_failure -- --nocapture`).

#![allow(clippy::disallowed_methods)] // drives real processes in real time

mod common;

use onepipe::udp::{UdpOptions, join};
use onepipe_check::{Event, ProcessLog, check_all, check_atomicity, check_no_loss};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

const PROCESSES: u32 = 4;
const BEACON_US: u64 = 500;
/// 300 ms at 500 us.
const DEAD_AFTER_BEACONS: u32 = 600;
/// How long each application sends, and when into that the failure is injected.
const SEND_FOR: std::time::Duration = std::time::Duration::from_millis(3_000);
/// With replicas, delivery stalls until a standby has taken over (a lease TTL and more): the
/// applications send for longer, so that delivery is seen to resume.
const SEND_FOR_REPLICAS: std::time::Duration = std::time::Duration::from_millis(6_000);
const FAIL_AFTER: std::time::Duration = std::time::Duration::from_millis(1_200);
/// An application stops draining once nothing has arrived for this long.
const QUIET: std::time::Duration = std::time::Duration::from_millis(2_500);
const APP_ENV: &str = "ONEPIPE_TEST_APP";

/// One scenario at a time: nine processes per scenario already share two cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// Two racks of two hosts under two spines, and a controller (whose table gets `controller`
/// too), on addresses of their own (`port` keeps scenarios apart, the process id concurrent
/// runs; both name the topology, and so the controller's keys in etcd).
fn write_topology(dir: &Path, port: u16, controller: &str) -> PathBuf {
    let net = format!("127.62.{}", 1 + std::process::id() % 250);
    let mut file = format!("name = \"two-racks-two-spines-{}-{port}\"\n", std::process::id());
    for (i, s) in ["tor0", "tor1", "spine0", "spine1"].iter().enumerate() {
        file += &format!("[[switch]]\nname = \"{s}\"\naddr = \"{net}.{}:{port}\"\n", 1 + i);
    }
    for h in 0..PROCESSES {
        let tor = if h < 2 { "tor0" } else { "tor1" };
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"{tor}\"\naddr = \"{net}.{}:{port}\"\n",
            10 + h
        );
    }
    for tor in ["tor0", "tor1"] {
        for spine in ["spine0", "spine1"] {
            file += &format!("[[link]]\nbetween = [\"{tor}\", \"{spine}\"]\n");
        }
    }
    file += &format!("[controller]\naddr = \"{net}.100:{port}\"\n{controller}");
    let path = dir.join("two-racks-two-spines.toml");
    std::fs::write(&path, file).unwrap();
    path
}

fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// `onepipe up` and the applications; whatever is still running when it drops is stopped.
struct Run {
    file: PathBuf,
    up: Child,
    /// Every line `onepipe up`, its switches and its controller printed.
    lines: Arc<Mutex<Vec<String>>>,
    apps: Vec<Child>,
}

impl Drop for Run {
    fn drop(&mut self) {
        for a in &mut self.apps {
            let _ = a.kill();
            let _ = a.wait();
        }
        if let Ok(None) = self.up.try_wait() {
            let _ = common::onepipe().arg("down").arg(&self.file).output();
            kill(self.up.id());
            let _ = self.up.wait();
        }
        for (pid, _) in common::processes_naming(self.file.to_str().unwrap()) {
            kill(pid);
        }
        // An `up` killed above cleaned nothing up.
        common::remove_up_state(&self.file);
    }
}

impl Run {
    fn start(file: &Path, extra: &[&str]) -> Run {
        let mut up = common::onepipe()
            .arg("up")
            .arg(file)
            .args(["--beacon-interval-us", &BEACON_US.to_string()])
            .args(["--dead-after-beacons", &DEAD_AFTER_BEACONS.to_string()])
            .args(["--answer-timeout-ms", "10000"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        fn collect(from: impl Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
            std::thread::spawn(move || {
                for line in BufReader::new(from).lines().map_while(Result::ok) {
                    into.lock().unwrap().push(line);
                }
            });
        }
        collect(up.stdout.take().unwrap(), lines.clone());
        collect(up.stderr.take().unwrap(), lines.clone());
        let run = Run {
            file: file.to_path_buf(),
            up,
            lines,
            apps: Vec::new(),
        };
        run.wait_for("stops them", std::time::Duration::from_secs(20));
        run
    }

    fn output(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn wait_for(&self, text: &str, limit: std::time::Duration) {
        let started = std::time::Instant::now();
        while !self.output().iter().any(|l| l.contains(text)) {
            assert!(
                started.elapsed() < limit,
                "no `{text}` from onepipe up: {:#?}",
                self.output()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The pid `onepipe up` gave for `node`.
    fn pid_of(&self, node: &str) -> u32 {
        let lines = self.output();
        let line = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(node) && l.contains(" pid "))
            .unwrap_or_else(|| panic!("no pid for {node}: {lines:#?}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "pid").unwrap();
        words[at + 1].parse().unwrap()
    }

    fn start_apps(&mut self, dir: &Path, send_for: std::time::Duration) {
        for p in 0..PROCESSES {
            let spec = format!(
                "{}|{p}|{}|{}",
                self.file.display(),
                dir.join(format!("{p}.log")).display(),
                send_for.as_millis()
            );
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["app_process", "--exact", "--ignored", "--nocapture"])
                .env(APP_ENV, spec)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            self.apps.push(child);
        }
    }
}

/// What one application process logged.
#[derive(Default, Debug)]
struct AppLog {
    /// Scatterings it submitted: (its id, destinations). Ids count from 0 per process.
    sent: Vec<(u64, Vec<u32>)>,
    /// Deliveries: (timestamp, source, the source's id, wall clock ns at delivery).
    delivered: Vec<(u64, u32, u64, u64)>,
    /// Failure callbacks: (failed process, failure timestamp).
    failures: Vec<(u32, u64)>,
    /// The application drained and stopped.
    ended: bool,
}

fn read_app_log(path: &Path) -> AppLog {
    let mut log = AppLog::default();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut cancelled = BTreeSet::new();
    for line in text.lines() {
        // A line cut short by a kill parses as nothing.
        let _ = parse_line(line, &mut log, &mut cancelled);
    }
    log.sent.retain(|(id, _)| !cancelled.contains(id));
    log
}

/// Whether an application marked its log ended: its last line is `E`. Only the tail is read.
/// Re-parsing every whole log (~10,000 lines each) every 50 ms was the harness's own load on
/// the two cores while the applications drained; in a failing run of the stall test the
/// spines' threads ran 140-180 ms late just then, past the dead-link timeout (100 ms then), a ToR
/// declared both spines dead and the controller its rack failed (2 of 39 runs; 0 of 30 since).
fn app_log_ended(path: &Path) -> bool {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return false;
    };
    let tail_len = len.min(3);
    let mut tail = vec![0u8; tail_len as usize];
    let read = f
        .seek(SeekFrom::Start(len - tail_len))
        .and_then(|_| f.read_exact(&mut tail));
    read.is_ok() && (tail == b"\nE\n" || (len == 2 && tail == b"E\n"))
}

fn parse_line(line: &str, log: &mut AppLog, cancelled: &mut BTreeSet<u64>) -> Option<()> {
    let n = |s: &str| s.parse::<u64>().ok();
    let f: Vec<&str> = line.split(',').collect();
    match f.as_slice() {
        ["S", id, dsts] => {
            let dsts: Option<Vec<u32>> = dsts.split(';').map(|d| d.parse().ok()).collect();
            log.sent.push((n(id)?, dsts?));
        }
        ["C", id] => {
            cancelled.insert(n(id)?);
        }
        ["D", ts, src, id, wall] => log.delivered.push((n(ts)?, src.parse().ok()?, n(id)?, n(wall)?)),
        ["F", p, ts] => log.failures.push((p.parse().ok()?, n(ts)?)),
        ["E"] => log.ended = true,
        _ => {}
    }
    Some(())
}

/// A process's events in its log's order: sends (by id, with their destinations) and
/// deliveries as they were logged.
fn events_in_order(path: &Path) -> Vec<Event> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut one = AppLog::default();
        if parse_line(line, &mut one, &mut BTreeSet::new()).is_none() {
            continue;
        }
        if let Some((id, _)) = one.sent.first() {
            // A placeholder: the caller fills in timestamp and destinations.
            out.push(Event::Send {
                ts_ns: 0,
                dst: u32::MAX,
                msg_id: *id,
            });
        }
        if let Some(&(ts, src, id, _)) = one.delivered.first() {
            out.push(Event::Deliver {
                ts_ns: ts,
                src,
                msg_id: id,
            });
        }
    }
    out
}

/// An application process (run by the scenarios, not on its own): joins the fabric, sends a
/// reliable broadcast every millisecond to every process not known failed, logs each
/// scattering before submitting it (so a kill never hides one that left), every delivery and
/// every failure callback; after sending, drains until quiet, marks its log ended and waits for
/// its stdin to close.
#[test]
#[ignore = "an application process of the failure scenarios below"]
fn app_process() {
    let Ok(spec) = std::env::var(APP_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let (file, me, log_path) = (parts[0], parts[1].parse::<u32>().unwrap(), parts[2]);
    let send_for = std::time::Duration::from_millis(parts[3].parse().unwrap());
    let topology = Topology::from_file(Path::new(file)).unwrap();
    let mut options = UdpOptions::new(topology.clone());
    // The key `up` made for the topology (docs/udp.md, "Authentication").
    options.udp.auth = onepipe::keys::fabric_auth(&topology, None, false).unwrap();
    options.beacon_interval = Duration::from_micros(BEACON_US);
    options.dead_after_intervals = DEAD_AFTER_BEACONS;
    let mut log = std::fs::File::create(log_path).unwrap();
    let (mut process, _) = join(&options, me).unwrap();
    let failures = Arc::new(Mutex::new(Vec::new()));
    let f = failures.clone();
    process.on_process_failure(move |p, ts| f.lock().unwrap().push((p, ts.as_nanos())));
    let mut failed = BTreeSet::new();
    let write = |log: &mut std::fs::File, line: String| log.write_all(line.as_bytes()).unwrap();
    let record = |log: &mut std::fs::File, process: &mut onepipe::api::Process| {
        let mut lines = String::new();
        while let Some(d) = process.recv_reliable() {
            let id = u64::from_le_bytes(d.payload[..8].try_into().unwrap());
            lines += &format!("D,{},{},{id},{}\n", d.ts.as_nanos(), d.src, unix_ns());
        }
        if !lines.is_empty() {
            log.write_all(lines.as_bytes()).unwrap();
            true
        } else {
            false
        }
    };
    let start = std::time::Instant::now();
    let mut next = 0u64;
    while start.elapsed() < send_for {
        for (p, ts) in failures.lock().unwrap().drain(..) {
            write(&mut log, format!("F,{p},{ts}\n"));
            failed.insert(p);
        }
        let dsts: Vec<u32> = (0..PROCESSES).filter(|p| !failed.contains(p)).collect();
        let list: Vec<String> = dsts.iter().map(u32::to_string).collect();
        write(&mut log, format!("S,{next},{}\n", list.join(";")));
        let payload = next.to_le_bytes();
        let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &payload[..])).collect();
        loop {
            match process.send_reliable(&scatter) {
                Ok(_) => break,
                Err(onepipe::SendError::BufferFull { .. }) if start.elapsed() < send_for => {
                    record(&mut log, &mut process);
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                Err(_) => {
                    write(&mut log, format!("C,{next}\n"));
                    break;
                }
            }
        }
        next += 1;
        record(&mut log, &mut process);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut last = std::time::Instant::now();
    while last.elapsed() < QUIET {
        if record(&mut log, &mut process) {
            last = std::time::Instant::now();
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for (p, ts) in failures.lock().unwrap().drain(..) {
        write(&mut log, format!("F,{p},{ts}\n"));
    }
    write(&mut log, "E\n".into());
    log.sync_all().unwrap();
    // Stay (beaconing, so that no switch reports this process) until the scenario is judged.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Which sends a checker log keeps: (sender, destinations, timestamp if delivered).
type Keep<'a> = dyn Fn(u32, &[u32], Option<u64>) -> bool + 'a;

/// What to kill.
enum Target {
    Switch(&'static str),
    App(u32),
    /// `onepipe cut-link FILE A B`: the switches drop the link (fault injection).
    Cut(&'static str, &'static str),
    /// Not a failure: every switch, the controller and every application stop (SIGSTOP) for
    /// [`STALL`], as when the machine stalls, and go on.
    Stall,
}

/// Four dead-link timeouts: a stall this long (400 ms at a 100 ms timeout) had spines time out
/// live ToR links (seen on this 2-core machine), and the controller declare their racks failed.
const STALL: std::time::Duration = std::time::Duration::from_millis(1_200);

fn signal_all(pids: &[u32], signal: nix::sys::signal::Signal) {
    for &pid in pids {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
    }
}

/// The controller's lines `t=S.US declared failed: process P (...), ...`: the processes.
fn declared(lines: &[String]) -> Vec<u32> {
    let mut out = Vec::new();
    for l in lines.iter().filter(|l| l.contains("declared failed:")) {
        for part in l.split("process ").skip(1) {
            out.push(part.split_whitespace().next().unwrap().parse().unwrap());
        }
    }
    out.sort_unstable();
    out
}

/// The time of the first controller line containing `what`, ns since the epoch.
fn first_at(lines: &[String], what: &str) -> Option<u64> {
    let l = lines.iter().find(|l| l.starts_with("t=") && l.contains(what))?;
    let t = l[2..].split_whitespace().next()?;
    let (s, us) = t.split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + us.parse::<u64>().ok()? * 1_000)
}

/// How the controller runs, and what happens to it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Controllers {
    /// One controller, left alone.
    One,
    /// One controller, killed before the failure; `onepipe up` restarts it on its log.
    Restarted,
    /// Two replicas on etcd; the active one is killed once it has logged the failure's
    /// reports and before it decides (the settle time is long), so that the standby takes
    /// over in the middle of the recovery.
    Replicas,
}

/// How long the controller waits for more reports before deciding, with replicas: long enough
/// to see the reports and kill the active replica before it decides.
const SETTLE_MS_REPLICAS: u64 = 1_500;

const NEEDS_ETCD: &str = "set ONEPIPE_ETCD=http://HOST:PORT to an etcd (.ci/run starts one)";

/// Kills the replica that leads once its output shows the failure's reports (all four, or
/// those of the first 300 ms), before it has decided. Returns when, and which replica.
fn kill_leader_mid_recovery(run: &Run) -> (u64, String) {
    let started = std::time::Instant::now();
    let mut first_report = None;
    loop {
        let lines = run.output();
        let reports = lines.iter().filter(|l| l.contains(" report: ")).count();
        if reports > 0 {
            first_report.get_or_insert_with(std::time::Instant::now);
        }
        if reports >= 4 || first_report.is_some_and(|t| t.elapsed() > std::time::Duration::from_millis(300)) {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the controller heard no report: {lines:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let lines = run.output();
    let leader = lines
        .iter()
        .rev()
        .find_map(|l| {
            l.strip_prefix("replica ")?
                .split_once(": leads")
                .map(|(n, _)| n.to_string())
        })
        .unwrap_or_else(|| panic!("no replica leads: {lines:#?}"));
    let pid = run.pid_of(&format!("controller-{leader}"));
    let at = unix_ns();
    kill(pid);
    // Only now: had it decided already, the standby would have nothing left to finish.
    let lines = run.output();
    assert!(
        !lines.iter().any(|l| l.contains("declared failed:")),
        "the leader decided before it was killed: {lines:#?}"
    );
    (at, leader)
}

/// Runs the applications, kills `target` mid-traffic (with `controllers` as said there), and
/// judges the run.
fn scenario(port: u16, target: Target, expect_failed: &[u32], controllers: Controllers) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("onepipe-udp-failure-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let etcd =
        (controllers == Controllers::Replicas).then(|| std::env::var("ONEPIPE_ETCD").expect(NEEDS_ETCD));
    let table = etcd
        .as_ref()
        .map_or(String::new(), |url| format!("etcd = \"{url}\"\nreplicas = 2\n"));
    let file = write_topology(&dir, port, &table);
    let settle = format!("--settle-ms={SETTLE_MS_REPLICAS}");
    let extra: &[&str] = if etcd.is_some() { &[&settle] } else { &[] };
    let mut run = Run::start(&file, extra);
    // The applications' clocks run on while they are stopped: a stall adds its length, so
    // that as much sending follows it as follows a kill.
    let send_for = match (etcd.is_some(), &target) {
        (true, _) => SEND_FOR_REPLICAS,
        (false, Target::Stall) => SEND_FOR + STALL,
        (false, _) => SEND_FOR,
    };
    run.start_apps(&dir, send_for);
    // Every application is sending (its log has deliveries) before anything fails.
    let started = std::time::Instant::now();
    while (0..PROCESSES).any(|p| read_app_log(&dir.join(format!("{p}.log"))).delivered.is_empty()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the applications never delivered: {:#?}",
            run.output()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if controllers == Controllers::Restarted {
        std::thread::sleep(FAIL_AFTER / 2);
        kill(run.pid_of("controller"));
        run.wait_for("restarting it on its log", std::time::Duration::from_secs(10));
        let started = std::time::Instant::now();
        while run
            .output()
            .iter()
            .filter(|l| l.starts_with("controller of"))
            .count()
            < 2
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the controller did not come back: {:#?}",
                run.output()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(FAIL_AFTER / 2);
    } else {
        std::thread::sleep(FAIL_AFTER);
    }
    let killed_at = unix_ns();
    match target {
        Target::Switch(name) => kill(run.pid_of(name)),
        Target::App(p) => run.apps[p as usize].kill().unwrap(),
        Target::Cut(a, b) => {
            let cut = common::onepipe()
                .arg("cut-link")
                .arg(&file)
                .args([a, b])
                .output()
                .unwrap();
            assert!(cut.status.success(), "{}", String::from_utf8_lossy(&cut.stderr));
        }
        Target::Stall => {
            let mut pids: Vec<u32> = ["tor0", "tor1", "spine0", "spine1", "controller"]
                .iter()
                .map(|n| run.pid_of(n))
                .collect();
            pids.extend(run.apps.iter().map(Child::id));
            signal_all(&pids, nix::sys::signal::Signal::SIGSTOP);
            std::thread::sleep(STALL);
            signal_all(&pids, nix::sys::signal::Signal::SIGCONT);
        }
    }
    let leader_killed = (controllers == Controllers::Replicas).then(|| kill_leader_mid_recovery(&run));

    // Every application still running drains and marks its log ended.
    let killed_app = match target {
        Target::App(p) => Some(p),
        Target::Switch(_) | Target::Cut(..) | Target::Stall => None,
    };
    let started = std::time::Instant::now();
    let ended = |p: u32| Some(p) == killed_app || app_log_ended(&dir.join(format!("{p}.log")));
    while !(0..PROCESSES).all(ended) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "applications did not finish: {:#?}",
            run.output()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let lines = run.output();

    // Stop everything, and check nothing is left.
    let down = common::onepipe().arg("down").arg(&file).output().unwrap();
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let status = run.up.wait().unwrap();
    for a in &mut run.apps {
        drop(a.stdin.take());
    }
    for (p, a) in run.apps.iter_mut().enumerate() {
        let s = a.wait().unwrap();
        assert!(
            s.success() || Some(p as u32) == killed_app,
            "application {p} exited with {s}"
        );
    }
    assert!(status.success(), "up exited with {status}: {lines:#?}");
    assert!(
        common::processes_naming(file.to_str().unwrap()).is_empty(),
        "processes left behind: {:?}",
        common::processes_naming(file.to_str().unwrap())
    );

    // The controller declared exactly the processes behind the failed component.
    let failed = declared(&lines);
    assert_eq!(failed, expect_failed, "{lines:#?}");
    if let (Some((leader_killed_at, old)), Some(url)) = (&leader_killed, &etcd) {
        check_takeover(&lines, old, *leader_killed_at, url, &file);
    }
    let logs: Vec<AppLog> = (0..PROCESSES)
        .map(|p| read_app_log(&dir.join(format!("{p}.log"))))
        .collect();
    let correct: Vec<u32> = (0..PROCESSES).filter(|p| !failed.contains(p)).collect();
    for &p in &correct {
        let mut told: Vec<u32> = logs[p as usize].failures.iter().map(|f| f.0).collect();
        told.sort_unstable();
        assert_eq!(told, failed, "process {p} was called back for {told:?}");
    }

    // The checker's logs. A scattering's timestamp is the one its receivers delivered it at;
    // one never delivered has none, and is left out of the order checks (not of atomicity).
    let mut ts_of = HashMap::new();
    for log in &logs {
        for &(ts, src, id, _) in &log.delivered {
            ts_of.insert((src, id), ts);
        }
    }
    let build = |keep: &Keep<'_>| -> Vec<ProcessLog> {
        (0..PROCESSES)
            .map(|p| {
                let sent: HashMap<u64, &Vec<u32>> =
                    logs[p as usize].sent.iter().map(|(id, d)| (*id, d)).collect();
                let mut events = Vec::new();
                for e in events_in_order(&dir.join(format!("{p}.log"))) {
                    match e {
                        Event::Send { msg_id, .. } => {
                            // Cancelled ones never left.
                            let Some(dsts) = sent.get(&msg_id) else { continue };
                            let ts = ts_of.get(&(p, msg_id)).copied();
                            if keep(p, dsts, ts) {
                                events.extend(dsts.iter().map(|&dst| Event::Send {
                                    ts_ns: ts.unwrap_or(0),
                                    dst,
                                    msg_id,
                                }));
                            }
                        }
                        d @ Event::Deliver { .. } => events.push(d),
                    }
                }
                ProcessLog { process: p, events }
            })
            .collect()
    };
    // One total order, FIFO, causality, no duplicates, nothing created.
    let ordered = build(&|_, _, ts| ts.is_some());
    let report = check_all(&ordered);
    assert!(report.ok(), "{report}");
    // Restricted failure atomicity: all of a scattering's correct receivers or none.
    let all = build(&|_, _, _| true);
    let partial = check_atomicity(&all, &failed);
    assert!(
        partial.is_empty(),
        "{} scatterings partly delivered, first {}",
        partial.len(),
        partial[0]
    );
    // Delivery resumed: every scattering among correct processes (by a correct sender, naming
    // no failed process) was delivered exactly once by each of its receivers, and each correct
    // process sent many after the failure.
    let among_correct =
        |p: u32, dsts: &[u32], _| !failed.contains(&p) && dsts.iter().all(|d| !failed.contains(d));
    let lost = check_no_loss(&build(&among_correct));
    assert!(
        lost.is_empty(),
        "{} not delivered once, first {}",
        lost.len(),
        lost[0]
    );
    for &p in &correct {
        let after_failure = logs[p as usize]
            .delivered
            .iter()
            .filter(|d| d.3 > killed_at + 500_000_000)
            .count();
        assert!(
            after_failure > 100,
            "process {p} delivered {after_failure} messages from 500 ms after the failure on"
        );
    }

    // For docs/udp.md: detection and recovery as the controller and the processes saw them.
    let since = |t: Option<u64>| t.map(|t| (t as f64 - killed_at as f64) / 1e6);
    let stall_ms = correct
        .iter()
        .map(|&p| {
            let walls: Vec<u64> = logs[p as usize].delivered.iter().map(|d| d.3).collect();
            walls
                .windows(2)
                .filter(|w| w[1] > killed_at)
                .map(|w| (w[1] - w[0].max(killed_at)) as f64 / 1e6)
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    eprintln!(
        "udp failure of {}: first report {:?} ms, decided {:?} ms, last resume {:?} ms after the kill; \
         longest delivery gap at a correct process after it {stall_ms:.1} ms",
        match target {
            Target::Switch(n) => n.to_string(),
            Target::App(p) => format!("process {p}"),
            Target::Cut(a, b) => format!("link {a}-{b}"),
            Target::Stall => format!("nothing (a stall of {} ms)", STALL.as_millis()),
        },
        since(first_at(&lines, "report:")),
        since(first_at(&lines, "declared failed:").or(first_at(&lines, "reroute:"))),
        since(
            lines
                .iter()
                .rev()
                .find(|l| l.contains("resume:"))
                .and_then(|l| first_at(std::slice::from_ref(l), "resume:"))
        ),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The standby took over from `old`, killed at `killed_at`, with the recovery in progress
/// in the log, and finished it; `up` restarted `old` as a standby; nothing is left in etcd.
fn check_takeover(lines: &[String], old: &str, killed_at: u64, url: &str, file: &Path) {
    let leads: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(": leads (etcd term"))
        .collect();
    assert_eq!(leads.len(), 2, "one takeover: {lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("controller-{old} exited")) && l.contains("as a standby")),
        "up did not restart {old}: {lines:#?}"
    );
    let headers: Vec<&String> = lines.iter().filter(|l| l.starts_with("controller of")).collect();
    assert_eq!(headers.len(), 2, "{lines:#?}");
    assert!(
        headers[1].contains("reports") && headers[1].contains("recovery in progress"),
        "the new leader did not find the recovery in its log: {}",
        headers[1]
    );
    // The old leader never decided; the new one did, and resumed.
    let decided = first_at(lines, "declared failed:").expect("decided");
    assert!(decided > killed_at, "decided before the leader was killed");
    eprintln!(
        "takeover: {} after the active replica was killed: {:.0} ms to decide, {:.0} ms to the last resume",
        leads[1],
        (decided - killed_at) as f64 / 1e6,
        lines
            .iter()
            .rev()
            .find_map(|l| first_at(std::slice::from_ref(l), "resume:"))
            .map_or(f64::NAN, |t| (t as f64 - killed_at as f64) / 1e6),
    );
    // `onepipe down` left neither a leader nor a log under the topology's prefix.
    let topology = Topology::from_file(file).unwrap();
    let prefix = format!("/onepipe/{}/controller", topology.name);
    let client = onepipe_etcd::Client::new(
        &onepipe_etcd::Connect::new(url),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    assert_eq!(onepipe_etcd::group::leader(&client, &prefix).unwrap(), None);
    assert_eq!(onepipe_etcd::group::delete_log(&client, &prefix).unwrap(), 0);
}

#[test]
fn a_killed_tor_fails_its_rack_and_delivery_resumes_atomically() {
    scenario(7301, Target::Switch("tor1"), &[2, 3], Controllers::One);
}

#[test]
fn a_killed_spine_is_routed_around_and_nobody_fails() {
    scenario(7302, Target::Switch("spine0"), &[], Controllers::One);
}

#[test]
fn a_killed_application_process_is_declared_failed() {
    scenario(7303, Target::App(1), &[1], Controllers::One);
}

/// A cut ToR-spine link (fault injection in the switches' own links): both ends time it out,
/// the controller reroutes around it, and nobody fails.
#[test]
fn a_cut_fabric_link_is_routed_around_and_nobody_fails() {
    scenario(7306, Target::Cut("tor1", "spine0"), &[], Controllers::One);
}

/// The whole machine stalls for four dead-link timeouts: a switch that was stopped does not
/// hold the time against its links, and nobody is declared failed.
#[test]
fn a_stall_of_every_process_fails_nobody() {
    scenario(7308, Target::Stall, &[], Controllers::One);
}

/// A cut host link: the process behind it is cut off and declared failed, and keeps running.
#[test]
fn a_cut_host_link_fails_the_process_behind_it() {
    scenario(7307, Target::Cut("tor1", "h3"), &[3], Controllers::One);
}

/// The controller is killed first; `onepipe up` restarts it on its log (registrations
/// replayed, and repeated on its Hello), and the restarted controller handles a ToR failure.
#[test]
fn a_restarted_controller_handles_a_later_failure() {
    scenario(7304, Target::Switch("tor1"), &[2, 3], Controllers::Restarted);
}

/// Two controller replicas on etcd; a ToR dies, and the active replica is killed after it
/// logged the reports and before it decided. The standby takes over (a lease TTL later),
/// replays the reports, declares the rack failed, and delivery resumes.
#[test]
#[ignore = "needs etcd: .ci/run starts one; or ONEPIPE_ETCD=http://127.0.0.1:2379 cargo test -p onepipe-cli --test udp_failure -- --ignored --exact a_standby_replica_finishes_a_recovery_the_killed_leader_began"]
fn a_standby_replica_finishes_a_recovery_the_killed_leader_began() {
    scenario(7305, Target::Switch("tor1"), &[2, 3], Controllers::Replicas);
}
