//! `onepipe bench soak`: the demo's all-to-all broadcast for a long time at a fraction of what
//! the fabric carries, watching memory, drops and the delivery guarantees as it goes.
//!
//! First a short saturated run (rate 0) on the same runtime and topology measures the capacity
//! in delivered messages per second; then the soak sends open loop (Poisson) at `load` of it
//! for `minutes`. Both runs stream every process's events to the online checker
//! ([`onepipe_check::OnlineChecker`]), so memory holds no log, and the capacity is measured
//! with the checker's own work on the cores. Every `sample_seconds` the soak samples this
//! process's resident memory (the udp runtime runs every node, switches included, as threads of
//! this one process), what was delivered, the drop counters and the violations so far.

#![allow(clippy::disallowed_methods)] // a soak measures real time and memory

use crate::demo::{DemoConfig, FabricDrops, PhaseResult, Tick, run_phase_watched};
use crate::runtimes::{self, RuntimeKind, udp_config};
use crate::soak_stream::ProcessStream;
use onepipe_check::{Event, OnlineChecker, OnlineStats, Report};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// How often the driver takes the processes' events to the checker.
const CHECK_PERIOD: std::time::Duration = std::time::Duration::from_millis(50);
/// One checker round: a delivery waits `GRACE_ROUNDS` of these for its send to be logged
/// (a sender logs a send at its next visit, long before any receiver can deliver it, unless
/// its thread waits that long for a core).
const ROUND: std::time::Duration = std::time::Duration::from_secs(1);
/// Memory is compared from the first sample after this share of the run (at most
/// [`WARMUP_MAX_S`]): allocators, socket buffers and queues grow to their working size first.
const WARMUP_FRACTION: f64 = 0.2;
const WARMUP_MAX_S: f64 = 60.0;

#[derive(Clone, Debug)]
pub struct SoakOptions {
    pub runtime: RuntimeKind,
    pub topology: Topology,
    pub processes_per_host: u32,
    pub message_bytes: usize,
    pub reliable: bool,
    /// Fraction of the measured capacity to offer.
    pub load: f64,
    pub minutes: f64,
    pub capacity_seconds: f64,
    pub sample_seconds: f64,
    /// Memory is flat when the last sample is at most (1 + this) times the first after warm-up.
    pub flat_tolerance: f64,
    pub seed: u64,
    pub beacon_interval_us: Option<f64>,
    pub promise_lead_us: Option<f64>,
    pub datagram_bytes: usize,
    pub udp_threads: Option<usize>,
    pub udp_window_datagrams: usize,
    /// udp: datagrams not authenticated (`--insecure-no-auth`).
    pub insecure_no_auth: bool,
}

/// Everything dropped so far, by reason (counts of messages, frames or datagrams as named).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Endpoint drops: arrived below the barrier, incomplete when the barrier passed, no room
    /// in the reorder buffer, released scatterings nobody asked for.
    pub late: u64,
    pub incomplete: u64,
    pub reorder_full: u64,
    pub released_unpolled: u64,
    pub malformed: u64,
    pub naks_sent: u64,
    pub naks_dropped: u64,
    /// Scatterings reported failed to their sender.
    pub send_failures: u64,
    pub fabric: FabricDrops,
    /// Messages sent and never delivered, as the checker saw them leave (best effort loses
    /// what is dropped above; with --reliable each is a no_loss violation).
    pub undelivered_messages: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Since sending began.
    pub seconds: f64,
    pub rss_bytes: u64,
    pub delivered: u64,
    pub violations: u64,
    /// Sends and deliveries the checker holds (its memory, in records).
    pub checker_records: u64,
    pub drops: Drops,
}

#[derive(Clone, Debug, Serialize)]
pub struct Capacity {
    pub seconds: f64,
    pub throughput_msgs_per_s: f64,
    pub violations: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    pub warmup_seconds: f64,
    /// The first sample at or after warm-up, and the last.
    pub first_rss_bytes: u64,
    pub last_rss_bytes: u64,
    pub peak_rss_bytes: u64,
    pub growth_bytes: i64,
    pub growth_fraction: f64,
    /// Least-squares slope over the samples after warm-up.
    pub slope_bytes_per_minute: f64,
    pub tolerance: f64,
    /// "flat", "growing", or "unmeasured" (no /proc/self/status).
    pub verdict: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Quantiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub runtime: &'static str,
    pub topology: String,
    pub processes: usize,
    pub message_bytes: usize,
    pub service: &'static str,
    pub capacity: Capacity,
    pub load: f64,
    /// Broadcasts per second per process, and the messages per second that makes.
    pub offered_rate_per_process: f64,
    pub offered_msgs_per_s: f64,
    pub minutes: f64,
    /// The sending window as run.
    pub seconds: f64,
    pub delivered: u64,
    pub throughput_msgs_per_s: f64,
    /// The median of the sample intervals' delivery rates after warm-up.
    pub throughput_median_msgs_per_s: f64,
    pub latency_us: Quantiles,
    pub samples: Vec<Sample>,
    pub memory: Memory,
    /// Violations of every check, and each check's count and first examples.
    pub violations: u64,
    pub checks: Report,
    pub no_loss: Option<onepipe_check::CheckResult>,
    pub checker: OnlineStats,
    pub drops: Drops,
    /// What the switches counted, at the end: input links declared dead (silent past
    /// dead-after intervals; their frames then arrive late), frames with no route.
    pub switch_links_removed: u64,
    pub switch_no_route: u64,
    /// No violation, memory not growing, and every send tracked by the checker.
    pub ok: bool,
}

/// Resident memory of this process, from /proc/self/status (`None` where there is none).
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Checks the options and builds the demo configuration both runs share.
fn demo_config(o: &SoakOptions) -> Result<DemoConfig, String> {
    let positive = |name: &str, v: f64| match v.is_finite() && v > 0.0 {
        true => Ok(()),
        false => Err(format!("--{name} must be a positive number")),
    };
    positive("minutes", o.minutes)?;
    positive("capacity-seconds", o.capacity_seconds)?;
    positive("sample-seconds", o.sample_seconds)?;
    positive("flat-tolerance", o.flat_tolerance)?;
    if !(o.load.is_finite() && o.load > 0.0 && o.load <= 1.0) {
        return Err("--load must be in (0, 1]".into());
    }
    let udp = match o.runtime {
        RuntimeKind::Inproc => None,
        RuntimeKind::Udp => Some(udp_config(
            o.datagram_bytes,
            runtimes::udp_threads(o.udp_threads),
            o.udp_window_datagrams,
            o.insecure_no_auth,
        )?),
    };
    Ok(DemoConfig {
        topology: o.topology.clone(),
        processes_per_host: o.processes_per_host,
        message_bytes: o.message_bytes,
        beacon_interval: runtimes::beacon_interval(o.beacon_interval_us, o.runtime),
        promise_lead: runtimes::promise_lead(o.promise_lead_us, o.runtime),
        seed: o.seed,
        reliable: o.reliable,
        udp,
        ..DemoConfig::default()
    })
}

/// Streams every process's events to an online checker during one run, and samples it.
struct Driver<'a> {
    streams: Vec<Arc<ProcessStream>>,
    checker: OnlineChecker,
    buf: Vec<Event>,
    started: Instant,
    last_check: Instant,
    last_round: Instant,
    sample_seconds: f64,
    samples: Vec<Sample>,
    progress: &'a mut dyn FnMut(&Sample),
}

impl Driver<'_> {
    fn new(
        processes: usize,
        reliable: bool,
        sample_seconds: f64,
        progress: &mut dyn FnMut(&Sample),
    ) -> Driver<'_> {
        let now = Instant::now();
        Driver {
            streams: (0..processes)
                .map(|_| Arc::new(ProcessStream::default()))
                .collect(),
            checker: OnlineChecker::new(processes as u32, reliable),
            buf: Vec::new(),
            started: now,
            last_check: now,
            last_round: now,
            sample_seconds,
            samples: Vec::new(),
            progress,
        }
    }

    fn take_events(&mut self) {
        for (p, stream) in self.streams.iter().enumerate() {
            stream.take_events(&mut self.buf);
            self.checker.push(p as u32, &self.buf);
            self.buf.clear();
        }
        self.last_check = Instant::now();
    }

    fn on_tick(&mut self, tick: &Tick) {
        if self.last_check.elapsed() >= CHECK_PERIOD {
            self.take_events();
        }
        if self.last_round.elapsed() >= ROUND {
            self.checker.end_round();
            self.last_round = Instant::now();
        }
        let seconds = self.started.elapsed().as_secs_f64();
        let due = (self.samples.len() + 1) as f64 * self.sample_seconds;
        if tick.fraction_done < 1.0 && seconds >= due {
            let sample = Sample {
                seconds,
                rss_bytes: rss_bytes().unwrap_or(0),
                delivered: tick.delivered,
                violations: self.checker.violations(),
                checker_records: self.checker.stats().records_held,
                drops: self.live_drops(tick.fabric),
            };
            (self.progress)(&sample);
            self.samples.push(sample);
        }
    }

    fn live_drops(&self, fabric: FabricDrops) -> Drops {
        let mut d = Drops {
            fabric,
            undelivered_messages: self.checker.stats().sends_undelivered,
            ..Drops::default()
        };
        for s in &self.streams {
            let c = s.counters();
            add_endpoint(&mut d, &c.endpoint);
            d.send_failures += c.send_failures;
        }
        d
    }

    /// After the run: the events still published and those left in the workloads, then the
    /// checker's verdict on everything it still holds.
    fn finish(&mut self, result: &PhaseResult) {
        self.take_events();
        for log in &result.logs {
            self.checker.push(log.process, &log.events);
        }
        self.checker.finish();
    }
}

fn add_endpoint(d: &mut Drops, e: &onepipe_proto::endpoint::EndpointCounters) {
    d.late += e.late;
    d.incomplete += e.incomplete;
    d.reorder_full += e.reorder_full;
    d.released_unpolled += e.released_unpolled_dropped;
    d.malformed += e.malformed;
    d.naks_sent += e.naks_sent;
    d.naks_dropped += e.naks_dropped;
}

/// One run with the checker attached.
fn checked_run<'a>(
    config: &DemoConfig,
    sample_seconds: f64,
    progress: &'a mut dyn FnMut(&Sample),
) -> Result<(PhaseResult, Driver<'a>), String> {
    let processes = onepipe_fabric::Wiring::new(config.topology.clone(), config.processes_per_host)
        .map_err(|e| e.to_string())?
        .process_count();
    let mut driver = Driver::new(processes, config.reliable, sample_seconds, progress);
    let config = DemoConfig {
        streams: driver.streams.clone(),
        // Every message is recorded (and streamed out, so nothing piles up).
        record_window: config.duration,
        ..config.clone()
    };
    let result = run_phase_watched(&config, true, &mut |t| driver.on_tick(t)).map_err(|e| e.to_string())?;
    driver.finish(&result);
    Ok((result, driver))
}

/// Measures capacity, then soaks. `phase(name)` announces each run, `progress(sample)` shows
/// each sample of the soak as it is taken.
pub fn run(
    o: &SoakOptions,
    phase: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&Sample),
) -> Result<SoakReport, String> {
    let base = demo_config(o)?;
    phase(&format!("measuring capacity: {} s saturated", o.capacity_seconds));
    let saturated = DemoConfig {
        duration: Duration::from_nanos((o.capacity_seconds * 1e9) as u64),
        rate_per_process: 0.0,
        ..base.clone()
    };
    let mut no_progress = |_: &Sample| {};
    let (cap_result, cap_driver) = checked_run(&saturated, f64::INFINITY, &mut no_progress)?;
    let capacity = Capacity {
        seconds: cap_result.seconds,
        throughput_msgs_per_s: cap_result.throughput_msgs_per_s(),
        violations: cap_driver.checker.violations(),
    };
    drop(cap_driver);
    drop(cap_result);
    let processes = base.topology.hosts.len() * base.processes_per_host as usize;
    if capacity.throughput_msgs_per_s <= 0.0 {
        return Err("the saturated run delivered nothing: no capacity to soak at".into());
    }
    let offered_msgs_per_s = o.load * capacity.throughput_msgs_per_s;
    let offered_rate_per_process = offered_msgs_per_s / (processes * processes) as f64;
    phase(&format!(
        "capacity {:.0} msg/s; soaking at {:.0}% = {:.0} msg/s ({:.1} broadcasts/s per process) for {} min",
        capacity.throughput_msgs_per_s,
        100.0 * o.load,
        offered_msgs_per_s,
        offered_rate_per_process,
        o.minutes
    ));
    let soak = DemoConfig {
        duration: Duration::from_nanos((o.minutes * 60e9) as u64),
        rate_per_process: offered_rate_per_process,
        ..base
    };
    let (result, driver) = checked_run(&soak, o.sample_seconds, progress)?;
    Ok(report(o, capacity, offered_rate_per_process, &result, &driver))
}

fn report(
    o: &SoakOptions,
    capacity: Capacity,
    offered_rate_per_process: f64,
    result: &PhaseResult,
    driver: &Driver<'_>,
) -> SoakReport {
    let stats = driver.checker.stats();
    let mut drops = Drops {
        fabric: FabricDrops {
            link_frames: result.link_drops,
            ..driver.samples.last().map(|s| s.drops.fabric).unwrap_or_default()
        },
        send_failures: result.send_failures,
        undelivered_messages: stats.sends_undelivered,
        ..Drops::default()
    };
    add_endpoint(&mut drops, &result.endpoint);
    if let Some(udp) = &result.udp {
        drops.fabric.lost_datagrams = udp.lost_datagrams;
        drops.fabric.overrun_datagrams = udp.overrun_datagrams;
        drops.fabric.peer_gone_frames = udp.peer_gone_frames;
    }
    let warmup_seconds = (WARMUP_FRACTION * o.minutes * 60.0).min(WARMUP_MAX_S);
    let memory = memory(&driver.samples, warmup_seconds, o.flat_tolerance);
    let violations = driver.checker.violations() + result.never_released;
    let ok = violations == 0 && memory.verdict != "growing" && stats.sends_given_up == 0;
    let q = |quantile: f64| result.latency_us(quantile);
    SoakReport {
        runtime: match o.runtime {
            RuntimeKind::Inproc => "inproc",
            RuntimeKind::Udp => "udp",
        },
        topology: o.topology.name.clone(),
        processes: result.processes,
        message_bytes: o.message_bytes,
        service: if o.reliable { "reliable" } else { "best effort" },
        offered_msgs_per_s: offered_rate_per_process * (result.processes * result.processes) as f64,
        capacity,
        load: o.load,
        offered_rate_per_process,
        minutes: o.minutes,
        seconds: result.seconds,
        delivered: result.delivered,
        throughput_msgs_per_s: result.throughput_msgs_per_s(),
        throughput_median_msgs_per_s: median_rate(&driver.samples, warmup_seconds),
        latency_us: Quantiles {
            p50: q(0.5),
            p99: q(0.99),
            max: result.latency_ns.max() as f64 / 1e3,
        },
        samples: driver.samples.clone(),
        memory,
        violations,
        checks: driver.checker.report().clone(),
        no_loss: driver.checker.no_loss().cloned(),
        checker: stats,
        drops,
        switch_links_removed: result.switch.links_removed,
        switch_no_route: result.switch.no_route,
        ok,
    }
}

/// The samples at or after warm-up (all of them if fewer than two are).
fn settled(samples: &[Sample], warmup_seconds: f64) -> &[Sample] {
    let from = samples
        .iter()
        .position(|s| s.seconds >= warmup_seconds)
        .unwrap_or(samples.len());
    if samples.len() - from >= 2 {
        &samples[from..]
    } else {
        samples
    }
}

fn memory(samples: &[Sample], warmup_seconds: f64, tolerance: f64) -> Memory {
    let settled = settled(samples, warmup_seconds);
    let first = settled.first().map_or(0, |s| s.rss_bytes);
    let last = settled.last().map_or(0, |s| s.rss_bytes);
    let growth_bytes = last as i64 - first as i64;
    let growth_fraction = if first > 0 {
        growth_bytes as f64 / first as f64
    } else {
        0.0
    };
    let verdict = match (first, growth_fraction <= tolerance) {
        (0, _) => "unmeasured",
        (_, true) => "flat",
        (_, false) => "growing",
    };
    Memory {
        warmup_seconds,
        first_rss_bytes: first,
        last_rss_bytes: last,
        peak_rss_bytes: samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
        growth_bytes,
        growth_fraction,
        slope_bytes_per_minute: 60.0 * slope(settled.iter().map(|s| (s.seconds, s.rss_bytes as f64))),
        tolerance,
        verdict,
    }
}

/// Least-squares slope of y over x (0 with fewer than two points).
fn slope(points: impl Iterator<Item = (f64, f64)> + Clone) -> f64 {
    let n = points.clone().count() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (sx, sy) = points.clone().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if den > 0.0 { num / den } else { 0.0 }
}

/// The median over consecutive settled samples of their delivery rate.
fn median_rate(samples: &[Sample], warmup_seconds: f64) -> f64 {
    let settled = settled(samples, warmup_seconds);
    let mut rates: Vec<f64> = settled
        .windows(2)
        .filter(|w| w[1].seconds > w[0].seconds)
        .map(|w| (w[1].delivered - w[0].delivered) as f64 / (w[1].seconds - w[0].seconds))
        .collect();
    if rates.is_empty() {
        return 0.0;
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(seconds: f64, rss_mib: u64, delivered: u64) -> Sample {
        Sample {
            seconds,
            rss_bytes: rss_mib << 20,
            delivered,
            violations: 0,
            checker_records: 0,
            drops: Drops::default(),
        }
    }

    #[test]
    fn memory_is_compared_from_warm_up_and_judged_against_the_tolerance() {
        let samples: Vec<Sample> = (1..=10)
            .map(|i| sample(i as f64 * 10.0, if i < 3 { 50 } else { 100 }, 0))
            .collect();
        let m = memory(&samples, 25.0, 0.1);
        assert_eq!(
            (m.first_rss_bytes, m.last_rss_bytes, m.verdict),
            (100 << 20, 100 << 20, "flat")
        );
        assert_eq!(m.peak_rss_bytes, 100 << 20);

        let growing: Vec<Sample> = (1..=10)
            .map(|i| sample(i as f64 * 10.0, 100 + 2 * i, 0))
            .collect();
        let m = memory(&growing, 25.0, 0.1);
        assert_eq!(m.verdict, "growing", "{m:?}");
        assert!(
            (m.slope_bytes_per_minute - 12.0 * (1 << 20) as f64).abs() < 1.0,
            "{m:?}"
        );
        assert_eq!(memory(&growing, 25.0, 0.2).verdict, "flat");
        assert_eq!(memory(&[], 25.0, 0.1).verdict, "unmeasured");
    }

    #[test]
    fn the_median_rate_is_over_intervals_after_warm_up() {
        let samples = [
            sample(1.0, 1, 0),
            sample(2.0, 1, 1000),
            sample(3.0, 1, 1100),
            sample(4.0, 1, 1300),
            sample(5.0, 1, 1600),
        ];
        assert_eq!(median_rate(&samples, 2.0), 200.0);
    }

    #[test]
    fn this_process_has_a_resident_size() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(rss_bytes().is_some_and(|b| b > 0));
        }
    }
}
