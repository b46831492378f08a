//! Fault campaigns, swarm style: each seed draws its own fabric, workload, clocks and faults
//! (so that different seeds stress different corners, TigerBeetle's VOPR idea), runs them, and
//! checks safety over the whole run and liveness after the faults heal.

use crate::config::{ClockStep, FailTarget, Failure, SimConfig};
use crate::run::{SimError, SimReport, run};
use crate::traffic::Pattern;
use onepipe_fabric::Topology;
use onepipe_proto::hash::SplitMix;
use onepipe_wire::Duration;
use serde::Serialize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One run of a campaign, kept short in the report.
#[derive(Clone, Debug, Serialize)]
pub struct CampaignRun {
    pub seed: u64,
    pub topology: String,
    pub processes: usize,
    pub reliable: bool,
    pub pattern: Pattern,
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub failures: Vec<String>,
    /// Clock steps, as `--clock-step` spells them.
    pub clock_steps: Vec<String>,
    pub skew_mean_ns: u64,
    pub time_ahead_max_ns: u64,
    /// The controller ran: failures are permanent and atomicity is checked.
    pub controller: bool,
    pub violations: u64,
    pub events: u64,
    pub delivered: u64,
    pub liveness_messages: u64,
    pub trace_hash: String,
    /// The same run as a plain `onepipe sim` command.
    pub replay: String,
    /// Why the run failed, if it did (violations or an error).
    pub problems: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CampaignReport {
    pub seeds: u64,
    pub first_seed: u64,
    pub violations: u64,
    pub failing_seeds: Vec<u64>,
    pub events: u64,
    pub runs: Vec<CampaignRun>,
}

fn pick<T: Copy>(rng: &mut SplitMix, items: &[T]) -> T {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

fn uniform(rng: &mut SplitMix, lo: u64, hi: u64) -> u64 {
    lo + rng.next_u64() % (hi - lo + 1)
}

fn chance(rng: &mut SplitMix, p: f64) -> bool {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 + f64::EPSILON < p
}

/// Draws a whole configuration from `seed`, with up to `faults_max` concurrent faults (the
/// first with probability 0.4, each further one with the same chance as none).
pub fn draw(seed: u64, faults_max: u32) -> (SimConfig, String) {
    let mut rng = SplitMix::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xca3b_a16e);
    let specs = [
        "single:2",
        "single:5",
        "leaf-spine:2,1,2",
        "leaf-spine:3,2,3",
        "leaf-spine:4,3,2",
        "testbed",
        "three-layer:2,2,2,1,3",
        "three-layer:2,2,2,2,2",
    ];
    let spec = pick(&mut rng, &specs);
    let topology = Topology::preset(spec).expect("campaign presets are valid");
    let processes_per_host = uniform(&mut rng, 1, 2) as u32;
    let processes = topology.hosts.len() as u32 * processes_per_host;
    let reliable = chance(&mut rng, 0.5);
    let pattern = match rng.next_u64() % 3 {
        0 => Pattern::Broadcast,
        1 => Pattern::Random {
            fanout: uniform(&mut rng, 1, processes.min(8) as u64) as u32,
        },
        _ => Pattern::Incast {
            target: (rng.next_u64() % processes as u64) as u32,
        },
    };
    let message_bytes_min = pick(&mut rng, &[8usize, 64, 200]);
    let extra = if pattern == Pattern::Broadcast && processes > 16 {
        pick(&mut rng, &[0usize, 100, 1500])
    } else {
        pick(&mut rng, &[0usize, 100, 1500, 5000])
    };
    let message_bytes_max = message_bytes_min + extra;
    // Enough load to queue, not so much that best effort overflows queues by design: the
    // busiest host (every receiver of a broadcast, the incast target) spends at most half its
    // CPU on frames.
    let frames = message_bytes_max.div_ceil(1400) as u64;
    let busiest = match pattern {
        Pattern::Broadcast | Pattern::Incast { .. } => processes,
        Pattern::Random { fanout } => fanout,
        Pattern::Pair { .. } => 1,
    } as u64;
    let defaults = SimConfig::default();
    let cpu_floor_ns = 4 * defaults.host_frame_cost.as_nanos() * busiest * frames;
    // And the ToR uplinks carry at most a quarter of their capacity (oversubscribed presets).
    let uplinks = topology
        .links
        .iter()
        .filter(|l| topology.switches[l.lower].layer == 1)
        .count() as u64;
    let offered_bits = processes as u64 * busiest.min(processes as u64) * message_bytes_max as u64 * 8;
    let link_floor_ns = match uplinks {
        0 => 0,
        n => 4 * offered_bits * 1_000_000_000 / (n * defaults.link_bits_per_s),
    };
    let floor_ns = cpu_floor_ns.max(link_floor_ns);
    let gap = Duration::from_nanos((uniform(&mut rng, 5, 40) * 1000).max(floor_ns));
    let send_for = Duration::from_micros(uniform(&mut rng, 200, 600));
    let lossy = chance(&mut rng, 0.5);
    let (loss, duplicate, reorder) = if lossy {
        (
            pick(&mut rng, &[0.0, 1e-3, 1e-2, 3e-2]),
            pick(&mut rng, &[0.0, 1e-3, 1e-2]),
            pick(&mut rng, &[0.0, 0.0, 1e-3, 1e-2]),
        )
    } else {
        (0.0, 0.0, 0.0)
    };
    let mut failures = Vec::new();
    let switch_names: Vec<String> = topology.switches.iter().map(|s| s.name.clone()).collect();
    let links: Vec<(String, String)> = topology
        .links
        .iter()
        .map(|l| (switch_names[l.lower].clone(), switch_names[l.upper].clone()))
        .collect();
    let targets = Targets {
        switches: switch_names.clone(),
        links,
        processes,
    };
    if chance(&mut rng, 0.4) {
        failures.push(draw_failure(&mut rng, &targets, send_for));
    }
    // Drawn last, so that the draws above stay what they were before the controller existed.
    // With the controller a failure is permanent: processes it cuts off are declared failed,
    // and the run checks atomicity instead of liveness. Not the only switch of a fabric: that
    // is a total outage, with no switch left to report it and every process cut off from
    // every other, so nothing to recover (processes see it: `Process::check_fabric`).
    let total_outage =
        switch_names.len() == 1 && failures.iter().any(|f| matches!(f.target, FailTarget::Switch(_)));
    let controller = reliable && !failures.is_empty() && chance(&mut rng, 0.5) && !total_outage;
    if controller {
        for f in &mut failures {
            f.lasts = None;
        }
    }
    let mut config = SimConfig {
        seed,
        topology,
        controller,
        processes_per_host,
        skew_mean: Duration::from_nanos(pick(&mut rng, &[0, 300, 1000, 5000])),
        drift_ppb_max: pick(&mut rng, &[0, 10_000, 100_000]),
        loss,
        duplicate,
        reorder,
        faults_for: lossy.then(|| Duration::from_nanos(send_for.as_nanos() / 2)),
        failures,
        pattern,
        gap,
        message_bytes_min,
        message_bytes_max,
        reliable,
        send_for,
        // Long enough for retransmissions at the simulated fabric's timers to finish; with
        // the controller, for two answer timeouts (2 ms each) and then some: a host that dies
        // with its ToR is declared only after its announcement and then its cut go unanswered
        // (seed 90123480: every ToR died, and a dead host was still undeclared at 3 ms).
        drain: Duration::from_micros(match (reliable, controller) {
            (true, true) => 5000,
            (true, false) => 3000,
            (false, _) => 300,
        }),
        events_max: 200_000_000,
        ..SimConfig::default()
    };
    // Further concurrent faults, drawn after everything else so that a campaign of one fault
    // per seed draws what it drew before they existed. Each overlaps the first's window.
    let extra = match faults_max {
        0 | 1 => 0,
        n => uniform(&mut rng, 0, n as u64 - 1),
    };
    for _ in 0..extra {
        let mut f = draw_failure(&mut rng, &targets, send_for);
        // The only switch of a fabric failing is a total outage (see above), and a
        // controller's failures are permanent.
        if switch_names.len() == 1 && matches!(f.target, FailTarget::Switch(_)) {
            continue;
        }
        if config.controller {
            f.lasts = None;
        }
        config.failures.push(f);
    }
    // A switch crashing and starting again with none of its state, drawn last so that seeds
    // without one draw what they drew before. With the controller its links come back
    // through readmission; the only switch of a fabric restarting is a total outage (see
    // above), which a controller run does not draw.
    let outage = switch_names.len() == 1 && config.controller;
    if !outage && chance(&mut rng, 0.25) {
        let at = Duration::from_micros(uniform(&mut rng, 20, send_for.as_nanos() / 2000));
        let name = switch_names[(rng.next_u64() % switch_names.len() as u64) as usize].clone();
        // A switch already failing in this seed is left alone: a restart would end its
        // failure early (a node is up once any of its failures heals).
        let failing = config
            .failures
            .iter()
            .any(|f| matches!(&f.target, FailTarget::Switch(s) if *s == name));
        if !failing {
            config.failures.push(Failure {
                target: FailTarget::Restart(name),
                at,
                // Down for two to four link timeouts (dead_after, 30 us): long enough for its
                // neighbours to see it go, as a reboot is.
                lasts: Some(Duration::from_micros(uniform(&mut rng, 60, 120))),
            });
        }
    }
    // Clock steps and large skew: drawn last, so that a seed that draws neither runs what it
    // ran before they existed.
    draw_clocks(&mut rng, &mut config);
    (config, spec.to_string())
}

/// Clock steps (a quarter of the seeds: one or two, forward or back, 1-100 us, with the
/// reliable service up to 1 ms) and large skew (a tenth: up to 200 us mean, so 800 us between
/// two clocks), with the drain lengthened by as much as they delay a message; half of those
/// runs put `time_ahead_max` exactly at how far apart their clocks may get, where anything
/// further would be refused.
fn draw_clocks(rng: &mut SplitMix, config: &mut SimConfig) {
    let processes = config.topology.hosts.len() as u64 * config.processes_per_host as u64;
    let steps = if chance(rng, 0.25) { uniform(rng, 1, 2) } else { 0 };
    for _ in 0..steps {
        let process = (rng.next_u64() % processes) as u32;
        let at = Duration::from_micros(uniform(rng, 10, config.send_for.as_nanos() / 1000 - 10));
        let size_us = if config.reliable && chance(rng, 0.3) {
            uniform(rng, 100, 1000)
        } else {
            uniform(rng, 1, 100)
        };
        let sign = if chance(rng, 0.5) { -1 } else { 1 };
        config.clock_steps.push(ClockStep {
            process,
            at,
            delta_ns: sign * size_us as i64 * 1000,
        });
    }
    let large_skew = chance(rng, 0.1);
    if large_skew {
        config.skew_mean = Duration::from_micros(pick(rng, &[20, 50, 100, 200]));
    }
    if steps == 0 && !large_skew {
        return;
    }
    // A message waits until every clock has passed its timestamp: up to how far apart they get.
    let spread = Duration::from_nanos(config.clock_spread_ns_max());
    config.drain = config.drain + spread;
    if chance(rng, 0.5) {
        config.time_ahead_max = Duration::from_nanos(config.clock_spread_ns_max());
    }
}

/// What a campaign's faults may hit.
struct Targets {
    switches: Vec<String>,
    links: Vec<(String, String)>,
    processes: u32,
}

/// One fault: a link, a switch or a process, failing somewhere in the first half of the
/// traffic for 10-100 us.
fn draw_failure(rng: &mut SplitMix, t: &Targets, send_for: Duration) -> Failure {
    let at = Duration::from_micros(uniform(rng, 20, send_for.as_nanos() / 2000));
    let lasts = Some(Duration::from_micros(uniform(rng, 10, 100)));
    let target = match rng.next_u64() % 3 {
        0 if !t.links.is_empty() => {
            let (a, b) = pick_link(rng, &t.links);
            FailTarget::Link(a, b)
        }
        1 => FailTarget::Switch(t.switches[(rng.next_u64() % t.switches.len() as u64) as usize].clone()),
        _ => FailTarget::Process((rng.next_u64() % t.processes as u64) as u32),
    };
    Failure { target, at, lasts }
}

fn pick_link(rng: &mut SplitMix, links: &[(String, String)]) -> (String, String) {
    links[(rng.next_u64() % links.len() as u64) as usize].clone()
}

fn describe(f: &Failure) -> String {
    let what = match &f.target {
        FailTarget::Link(a, b) => format!("link:{a}-{b}"),
        FailTarget::Switch(s) => format!("switch:{s}"),
        FailTarget::Restart(s) => format!("restart:{s}"),
        FailTarget::Representative(s) => format!("representative:{s}"),
        FailTarget::Process(p) => format!("host:{p}"),
    };
    match f.lasts {
        Some(d) => format!("{what}@{}ns+{}ns", f.at.as_nanos(), d.as_nanos()),
        None => format!("{what}@{}ns", f.at.as_nanos()),
    }
}

fn pattern_flag(p: Pattern) -> String {
    match p {
        Pattern::Broadcast => "broadcast".into(),
        Pattern::Random { fanout } => format!("random:{fanout}"),
        Pattern::Incast { target } => format!("incast:{target}"),
        Pattern::Pair { from, to } => format!("pair:{from}-{to}"),
    }
}

/// The `onepipe sim` flags that give this configuration (the campaign's draw, spelled out).
pub fn replay_command(c: &SimConfig, topology: &str) -> String {
    let mut cmd = format!(
        "onepipe sim --seed {} --topology {topology} --processes-per-host {} --skew {}ns --drift-ppm {} \
         --pattern {} --gap {}ns --message-bytes {} --message-bytes-max {} --send {}ns --drain {}ns --drain-max {}ns",
        c.seed,
        c.processes_per_host,
        c.skew_mean.as_nanos(),
        c.drift_ppb_max as f64 / 1000.0,
        pattern_flag(c.pattern),
        c.gap.as_nanos(),
        c.message_bytes_min,
        c.message_bytes_max,
        c.send_for.as_nanos(),
        c.drain.as_nanos(),
        c.drain_max.as_nanos()
    );
    if c.reliable {
        cmd += " --reliable";
    }
    if c.controller {
        cmd += " --controller";
    }
    if c.loss > 0.0 || c.duplicate > 0.0 || c.reorder > 0.0 {
        cmd += &format!(" --loss {} --dup {} --reorder {}", c.loss, c.duplicate, c.reorder);
        if let Some(d) = c.faults_for {
            cmd += &format!(" --faults-for {}ns", d.as_nanos());
        }
    }
    for f in &c.failures {
        cmd += &format!(" --fail {}", describe(f));
    }
    for step in &c.clock_steps {
        cmd += &format!(" --clock-step {step}");
    }
    if c.time_ahead_max != SimConfig::default().time_ahead_max {
        cmd += &format!(
            " --time-ahead-max-ms {}",
            c.time_ahead_max.as_nanos() as f64 / 1e6
        );
    }
    cmd
}

/// A correct process the controller declared failed. The ordering and atomicity checks hold
/// for whatever set is declared, so they cannot see it; it is checked where the set is known:
/// when only processes fail (`host:P`), only they may be declared (found by replaying lossy
/// runs: lost announcements got correct processes declared, docs/simulator.md bug 9). Link
/// and switch failures may legitimately fail the smaller side of a partition.
fn declared_beyond_faults(config: &SimConfig, r: &SimReport) -> Option<String> {
    let f = r.failure.as_ref()?;
    let mut injected = Vec::new();
    for failure in &config.failures {
        match failure.target {
            FailTarget::Process(p) => injected.push(p),
            FailTarget::Link(..)
            | FailTarget::Switch(_)
            | FailTarget::Restart(_)
            | FailTarget::Representative(_) => return None,
        }
    }
    let extra: Vec<u32> = f
        .failed_processes
        .iter()
        .map(|&(p, _)| p)
        .filter(|p| !injected.contains(p))
        .collect();
    (!extra.is_empty())
        .then(|| format!("[declared] processes {extra:?} declared failed, but only {injected:?} were failed"))
}

/// What a panic said.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

/// Runs one seed of a campaign.
pub fn run_seed(seed: u64, faults_max: u32) -> CampaignRun {
    let (config, spec) = draw(seed, faults_max);
    // A panic (an invariant a step broke) is this seed's failure, not the campaign's end.
    let result: Result<SimReport, SimError> =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&config, &mut |_, _| {})))
            .unwrap_or_else(|payload| Err(SimError::Panicked(panic_message(&*payload))));
    let mut out = CampaignRun {
        seed,
        topology: spec.clone(),
        processes: config.topology.hosts.len() * config.processes_per_host as usize,
        reliable: config.reliable,
        pattern: config.pattern,
        loss: config.loss,
        duplicate: config.duplicate,
        reorder: config.reorder,
        failures: config.failures.iter().map(describe).collect(),
        clock_steps: config.clock_steps.iter().map(ClockStep::to_string).collect(),
        skew_mean_ns: config.skew_mean.as_nanos(),
        time_ahead_max_ns: config.time_ahead_max.as_nanos(),
        controller: config.controller,
        violations: 0,
        events: 0,
        delivered: 0,
        liveness_messages: 0,
        trace_hash: String::new(),
        replay: replay_command(&config, &spec),
        problems: Vec::new(),
    };
    match result {
        Ok(r) => {
            let declared = declared_beyond_faults(&config, &r);
            out.violations = r.violations;
            out.events = r.events;
            out.delivered = r.delivered;
            out.liveness_messages = r.liveness_messages;
            out.trace_hash = r.trace_hash;
            out.problems = r.examples;
            if let Some(problem) = declared {
                out.violations += 1;
                out.problems.push(problem);
            }
            // Nothing lost, duplicated, reordered or failed: links are FIFO and every input
            // stays live, so nothing may arrive below a barrier already passed (a clock step
            // that silenced a host's link past the dead-link timeout did: bug 12).
            let fault_free = config.failures.is_empty()
                && !(config.loss > 0.0 || config.duplicate > 0.0 || config.reorder > 0.0);
            if fault_free && r.late_drops > 0 {
                out.violations += 1;
                out.problems.push(format!(
                    "[late] {} packets dropped as late with no fault",
                    r.late_drops
                ));
            }
            // Nothing forged: every frame came from a correct sender, and refusing one means
            // the bound on time (docs/ordering.md, "Implausible time") is below the run's skew.
            if config.forged_beacons.is_empty() && r.implausible_refused > 0 {
                out.violations += 1;
                out.problems.push(format!(
                    "[implausible] {} frames of correct senders refused as too far ahead",
                    r.implausible_refused
                ));
            }
        }
        Err(e) => {
            out.violations = 1;
            out.problems.push(e.to_string());
        }
    }
    out
}

/// Runs `seeds` seeds from `first_seed` on `threads` threads; `on_done` sees each run as it
/// finishes (for progress). Results are in seed order whatever the threads did.
pub fn run_campaign(
    first_seed: u64,
    seeds: u64,
    threads: usize,
    faults_max: u32,
    on_done: &(dyn Fn(&CampaignRun) + Sync),
) -> CampaignReport {
    let next = AtomicU64::new(first_seed);
    let end = first_seed + seeds;
    let runs = Mutex::new(Vec::with_capacity(seeds as usize));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let r = run_seed(seed, faults_max);
                    on_done(&r);
                    runs.lock().expect("no thread panicked holding it").push(r);
                }
            });
        }
    });
    let mut runs = runs.into_inner().expect("no thread panicked holding it");
    runs.sort_by_key(|r| r.seed);
    CampaignReport {
        seeds,
        first_seed,
        violations: runs.iter().map(|r| r.violations).sum(),
        failing_seeds: runs.iter().filter(|r| r.violations > 0).map(|r| r.seed).collect(),
        events: runs.iter().map(|r| r.events).sum(),
        runs,
    }
}
