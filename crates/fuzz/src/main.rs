//! The stable fuzz harness (docs/fuzzing.md): feeds each target its seed corpus, then inputs
//! mutated from it, for a bounded time or number of runs; catches panics, saves each crashing
//! input and prints it as hex; reports executions and executions per second as JSON. Seeded:
//! the same seed and number of runs replays the same inputs. No nightly compiler, no coverage
//! feedback: for long runs with feedback, the cargo-fuzz project in `fuzz/`.

#![allow(clippy::disallowed_methods)] // a harness measures wall time and sleeps in its watchdog

use clap::{Parser, Subcommand};
use onepipe_fuzz::mutate::Mutator;
use onepipe_fuzz::{TARGETS, Target};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "onepipe-fuzz", about = "Fuzz onepipe's input paths on stable Rust")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct RunFlags {
    /// Seeds the mutations: the same seed and run count replay the same inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many executions (besides the time bound).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
    /// Where crashing inputs go, under a directory per target.
    #[arg(long, default_value = "target/fuzz-crashes")]
    crashes: PathBuf,
    /// Longest input the mutations make, in bytes.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    len_max: u64,
    /// An input that runs longer than this is reported as a hang (saved like a crash).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout_seconds: u64,
}

#[derive(Subcommand)]
enum Command {
    /// Fuzz one target.
    Run {
        target: String,
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
        seconds: u64,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Fuzz every target in turn.
    All {
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
        seconds_each: u64,
        #[command(flatten)]
        flags: RunFlags,
    },
    /// Runs the given input files through a target (a saved crash, a cargo-fuzz artifact).
    Replay { target: String, files: Vec<PathBuf> },
    /// Writes every target's seed corpus under DIR/TARGET/ (cargo-fuzz's corpus layout).
    Seeds { dir: PathBuf },
    /// Lists the targets.
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::List => {
            for t in TARGETS {
                println!("{}", t.name);
            }
            ExitCode::SUCCESS
        }
        Command::Seeds { dir } => match write_seeds(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("onepipe-fuzz: {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        },
        Command::Replay { target, files } => match find(&target) {
            Some(t) => replay(t, &files),
            None => ExitCode::FAILURE,
        },
        Command::Run {
            target,
            seconds,
            flags,
        } => match find(&target) {
            Some(t) => exit_code(fuzz(t, Duration::from_secs(seconds), &flags)),
            None => ExitCode::FAILURE,
        },
        Command::All { seconds_each, flags } => {
            let crashes: usize = TARGETS
                .iter()
                .map(|t| fuzz(t, Duration::from_secs(seconds_each), &flags))
                .sum();
            exit_code(crashes)
        }
    }
}

fn exit_code(crashes: usize) -> ExitCode {
    if crashes == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn find(name: &str) -> Option<&'static Target> {
    let t = onepipe_fuzz::target(name);
    if t.is_none() {
        let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
        eprintln!("onepipe-fuzz: no target `{name}`; targets: {}", names.join(", "));
    }
    t
}

fn write_seeds(dir: &Path) -> std::io::Result<()> {
    for t in TARGETS {
        let d = dir.join(t.name);
        std::fs::create_dir_all(&d)?;
        for (i, s) in (t.seeds)().iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i:03}")), s)?;
        }
    }
    Ok(())
}

/// The message of the last panic, kept by the hook that replaces the printing one.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg}{at}"));
    }));
}

/// Runs one input; the panic's message if it panicked.
fn execute(t: &Target, input: &[u8]) -> Option<String> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| (t.run)(input))) {
        Ok(()) => None,
        Err(_) => Some(
            PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| "a panic".into()),
        ),
    }
}

fn replay(t: &Target, files: &[PathBuf]) -> ExitCode {
    quiet_panics();
    let mut crashes = 0;
    for f in files {
        let input = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("onepipe-fuzz: {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        };
        match execute(t, &input) {
            None => println!("{}: ok", f.display()),
            Some(msg) => {
                crashes += 1;
                println!("{}: crash: {msg}", f.display());
            }
        }
    }
    exit_code(crashes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// FNV-1a: names a saved input after its bytes, and gives each target its own mutations.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn name_of(bytes: &[u8]) -> String {
    format!("{:016x}", fnv(bytes))
}

fn save(flags: &RunFlags, t: &Target, kind: &str, input: &[u8]) -> PathBuf {
    let dir = flags.crashes.join(t.name);
    let path = dir.join(format!("{kind}-{}", name_of(input)));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input)) {
        eprintln!("onepipe-fuzz: cannot save {}: {e}", path.display());
    }
    path
}

/// The input running now and when it started, for the watchdog.
struct Running {
    input: Mutex<Vec<u8>>,
    started_ms: AtomicU64,
    executions: AtomicU64,
}

/// Reports an input that runs past the timeout as a hang, saves it, and ends the process:
/// a hang cannot be caught like a panic.
fn watchdog(running: Arc<Running>, t: &'static Target, flags: RunFlags, epoch: Instant) {
    std::thread::spawn(move || {
        let limit_ms = flags.timeout_seconds * 1000;
        let mut last = (u64::MAX, 0);
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let execs = running.executions.load(Ordering::Relaxed);
            if execs == FINISHED {
                return;
            }
            let started = running.started_ms.load(Ordering::Relaxed);
            let now_ms = epoch.elapsed().as_millis() as u64;
            if last.0 == execs && now_ms.saturating_sub(started) > limit_ms {
                let input = running.input.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let path = save(&flags, t, "hang", &input);
                let report = serde_json::json!({
                    "target": t.name, "hang": path.display().to_string(),
                    "seconds": limit_ms / 1000, "input_hex": hex(&input),
                });
                println!("{report}");
                std::process::exit(2);
            }
            last = (execs, started);
        }
    });
}

/// Fuzzes `t` for `time` (or `flags.runs` executions); returns the crashes found (0 or 1:
/// the run stops at the first).
fn fuzz(t: &'static Target, time: Duration, flags: &RunFlags) -> usize {
    quiet_panics();
    let epoch = Instant::now();
    let running = Arc::new(Running {
        input: Mutex::new(Vec::new()),
        started_ms: AtomicU64::new(0),
        executions: AtomicU64::new(0),
    });
    watchdog(running.clone(), t, flags.clone(), epoch);
    let seeds = (t.seeds)();
    // The seeds, then a pool of recent mutants that mutations build on (bounded): without
    // coverage feedback, stacking mutations is what takes an input far from its seed.
    let mut pool: Vec<Vec<u8>> = seeds.clone();
    let mut mutator = Mutator::new(flags.seed ^ fnv(t.name.as_bytes()), flags.len_max as usize);
    let mut executions: u64 = 0;
    let mut crashes = 0;
    let runs = flags.runs.unwrap_or(u64::MAX);
    while executions < runs && (executions < seeds.len() as u64 || epoch.elapsed() < time) {
        let input = if (executions as usize) < seeds.len() {
            seeds[executions as usize].clone()
        } else {
            let mut i = pool[mutator.below(pool.len())].clone();
            mutator.mutate(&mut i, &pool);
            i
        };
        input.clone_into(&mut running.input.lock().unwrap_or_else(|e| e.into_inner()));
        running
            .started_ms
            .store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        running.executions.store(executions, Ordering::Relaxed);
        let outcome = execute(t, &input);
        executions += 1;
        if let Some(msg) = outcome {
            let path = save(flags, t, "crash", &input);
            let report = serde_json::json!({
                "target": t.name, "crash": path.display().to_string(), "message": msg,
                "execution": executions, "input_hex": hex(&input),
            });
            println!("{report}");
            crashes += 1;
            break;
        }
        if executions as usize > seeds.len() && mutator.below(16) == 0 {
            if pool.len() < seeds.len() + POOL_MUTANTS_MAX {
                pool.push(input);
            } else {
                let at = seeds.len() + mutator.below(POOL_MUTANTS_MAX);
                pool[at] = input;
            }
        }
    }
    // The next target starts a watchdog of its own.
    running.executions.store(FINISHED, Ordering::Relaxed);
    let seconds = epoch.elapsed().as_secs_f64();
    let report = serde_json::json!({
        "target": t.name, "seed": flags.seed, "executions": executions,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "execs_per_second": (executions as f64 / seconds.max(1e-9)).round(),
        "seeds": seeds.len(), "crashes": crashes,
    });
    println!("{report}");
    crashes
}

/// What `Running::executions` says once a run is over.
const FINISHED: u64 = u64::MAX;

/// Mutants kept beside the seeds.
const POOL_MUTANTS_MAX: usize = 1024;
