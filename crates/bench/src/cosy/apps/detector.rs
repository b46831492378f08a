//! A failure detector on cosy (paper 003, 6.3): a detector host sends a zero-byte message to a
//! target every T_P; an rsvp back proves the target was alive; a probe with no rsvp by its
//! deadline (submission + delta(0)) counts as a miss, and `misses` misses in a row declare the
//! target crashed.
//!
//! Why the detection time is at most `misses` T_P + delta(0): the last probe answered before
//! the crash was sent before it (a request sent after the crash finds the target down), so
//! the `misses`-th probe after it is sent at most `misses` T_P after the crash, and its
//! completion is posted by its deadline, delta(0) later (cosy's bound, which the host library
//! keeps by posting a reject at the deadline itself). The simulator fires timers at their
//! instant, so no slack is added.

use super::{App, AppSim, Quantiles, START, us};
use crate::cosy::CosyFabric;
use crate::cosy::sim::CosySimConfig;
use onepipe_cosy::{Cause, CosyHost, Flag};
use onepipe_sim::{Budget, Fault, FaultTarget};
use onepipe_wire::{Duration, Instant};
use serde::Serialize;
use std::collections::BTreeMap;

/// One probe and what became of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    pub sent_at: Instant,
    pub deadline: Instant,
    /// Its completion, once posted.
    pub flagged: Option<(Instant, Flag, Cause)>,
    pub rsvp_at: Option<Instant>,
    /// When the detector judged it (probes are judged in order), and the misses in a row up
    /// to and including it.
    pub judged: Option<(Instant, u32)>,
}

impl Probe {
    /// The target answered: an rsvp, or a complete (which only follows an rsvp).
    /// An rsvp came back, the probe completed, or the target itself rejected it (busy: a
    /// reject only a live receiver sends; a switch's reject proves nothing).
    pub fn answered(&self) -> bool {
        self.rsvp_at.is_some()
            || matches!(
                self.flagged,
                Some((_, Flag::Complete, _)) | Some((_, _, Cause::ReceiverBusy))
            )
    }
}

/// The detector's side: probes every `period` from `start` to `end`.
pub struct Detector {
    target: u32,
    period: Duration,
    next_probe: Instant,
    end: Instant,
    pub probes: Vec<Probe>,
    by_msg: BTreeMap<u32, usize>,
    /// Probes judged so far (a prefix of `probes`), and the misses in a row at its end.
    judged: usize,
    streak: u32,
    /// Probes the host refused outright (should be none: a detector has one in flight).
    pub refused: u64,
}

impl Detector {
    pub fn new(target: u32, period: Duration, start: Instant, end: Instant) -> Detector {
        assert!(period > Duration::ZERO, "a probe period");
        Detector {
            target,
            period,
            next_probe: start,
            end,
            probes: Vec::new(),
            by_msg: BTreeMap::new(),
            judged: 0,
            streak: 0,
            refused: 0,
        }
    }

    fn take_completions(&mut self, host: &mut CosyHost) {
        while let Some(c) = host.poll_completion() {
            let Some(i) = self.by_msg.remove(&c.msg) else {
                continue;
            };
            let p = &mut self.probes[i];
            assert!(p.flagged.is_none(), "one completion per probe");
            p.flagged = Some((c.flagged_at, c.flag, c.cause));
            p.rsvp_at = c.rsvp_at;
        }
    }

    /// Judges the probes whose completions are in, in order.
    fn judge(&mut self, now: Instant) {
        while let Some(p) = self.probes.get_mut(self.judged) {
            if p.flagged.is_none() {
                return;
            }
            self.streak = if p.answered() { 0 } else { self.streak + 1 };
            p.judged = Some((now, self.streak));
            self.judged += 1;
        }
    }
}

impl App for Detector {
    fn step(&mut self, now: Instant, host: &mut CosyHost) {
        while self.next_probe <= now && self.next_probe < self.end {
            match host.submit(now, self.target, Vec::new()) {
                Ok(s) => {
                    self.by_msg.insert(s.msg, self.probes.len());
                    self.probes.push(Probe {
                        sent_at: now,
                        deadline: s.deadline,
                        flagged: None,
                        rsvp_at: None,
                        judged: None,
                    });
                }
                Err(_) => self.refused += 1,
            }
            self.next_probe += self.period;
        }
        self.take_completions(host);
        self.judge(now);
        // The detector receives background messages too: it does not keep them.
        while host.poll_delivery().is_some() {}
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (self.next_probe < self.end).then_some(self.next_probe)
    }
}

#[derive(Clone, Debug)]
pub struct DetectorConfig {
    /// The fabric, K, the background load and message size, the seed. Its `duration` is
    /// ignored: the background runs as long as the probes.
    pub sim: CosySimConfig,
    pub detector: u32,
    pub target: u32,
    /// T_P.
    pub period: Duration,
    /// Misses in a row that declare the target crashed.
    pub misses: u32,
    /// Probing starts this long after the start, and stops this long after it.
    pub probes_from: Duration,
    pub probes_until: Duration,
    /// The target crashes this long after the start (an engine node fault) and, if given,
    /// comes back this long after its crash.
    pub crash_after: Option<Duration>,
    pub recover_after: Option<Duration>,
}

/// One run: the target's crash, the detector's verdicts.
#[derive(Clone, Debug, Serialize)]
pub struct DetectorRun {
    pub seed: u64,
    pub crash_us: Option<f64>,
    pub recover_us: Option<f64>,
    pub probes: usize,
    pub answered: usize,
    /// From the crash to the first verdict at or after it with `misses` misses in a row.
    pub detection_us: Option<f64>,
    /// Probes missed although the target was up from their submission to their deadline.
    pub false_positives: usize,
    pub false_positive_causes: BTreeMap<String, usize>,
    /// Times `misses` misses in a row, each while the target was up, declared it crashed.
    pub false_declarations: usize,
    /// Probes answered although sent while the target was down (must be none).
    pub answered_while_down: usize,
    /// Probes flagged (or rsvp'd) after their deadline (must be none: cosy's bound).
    pub late: usize,
    /// From the recovery to the first rsvp after it.
    pub revival_us: Option<f64>,
}

pub fn run(config: &DetectorConfig) -> Result<DetectorRun, String> {
    if config.misses == 0 || config.detector == config.target {
        return Err("a detector needs misses >= 1 and a target other than itself".into());
    }
    let mut sim_config = config.sim.clone();
    sim_config.duration = config.probes_until;
    let detector = Detector::new(
        config.target,
        config.period,
        START + config.probes_from,
        START + config.probes_until,
    );
    let mut sim = AppSim::new(&sim_config, vec![(config.detector, detector)], 0)?;
    let delta = sim.timing.delta(0);
    let crash = config.crash_after.map(|after| START + after);
    let recover = crash.zip(config.recover_after).map(|(c, r)| c + r);
    if let Some(at) = crash {
        let node = sim.wiring.node_of_process(config.target) as u32;
        sim.engine.schedule_fault(Fault {
            target: FaultTarget::Node(node),
            at,
            heal_at: recover,
        });
    }
    let largest = sim.timing.delta(config.sim.message_bytes);
    let end = START + config.probes_until + delta.max(largest) + Duration::from_micros(10);
    let budget = Budget {
        events_max: config.sim.events_max,
        ..Budget::default()
    };
    sim.engine.run_until(end, &budget).map_err(|e| e.to_string())?;
    sim.invariants();
    let app = sim.app(config.detector).expect("the detector's host");
    Ok(judge(config.sim.seed, &app.probes, config.misses, crash, recover))
}

/// What the probes say about a crash at `crash` and a recovery at `recover`.
pub fn judge(
    seed: u64,
    probes: &[Probe],
    misses: u32,
    crash: Option<Instant>,
    recover: Option<Instant>,
) -> DetectorRun {
    let far = Instant::from_nanos(u64::MAX);
    let (down_from, down_until) = (crash.unwrap_or(far), recover.unwrap_or(far));
    let up_throughout = |p: &Probe| p.deadline < down_from || p.sent_at >= down_until;
    let mut causes = BTreeMap::new();
    let mut false_positives = 0;
    for p in probes
        .iter()
        .filter(|p| p.flagged.is_some() && !p.answered() && up_throughout(p))
    {
        false_positives += 1;
        let cause = p.flagged.map(|(_, _, c)| format!("{c:?}")).unwrap_or_default();
        *causes.entry(cause).or_insert(0) += 1;
    }
    let missed_while_up = |p: &Probe| p.flagged.is_some() && !p.answered() && up_throughout(p);
    let streak_len = misses as usize;
    let false_declarations = probes
        .iter()
        .enumerate()
        .filter(|(i, p)| p.judged.is_some_and(|(_, streak)| streak == misses) && i + 1 >= streak_len)
        .filter(|(i, _)| probes[i + 1 - streak_len..=*i].iter().all(missed_while_up))
        .count();
    let detection = crash.and_then(|c| {
        probes
            .iter()
            .filter_map(|p| p.judged)
            .find(|&(at, streak)| at >= c && streak >= misses)
            .map(|(at, _)| at - c)
    });
    let answered_while_down = probes
        .iter()
        .filter(|p| p.sent_at >= down_from && p.rsvp_at.is_some_and(|r| r < down_until))
        .count();
    let late = probes
        .iter()
        .filter(|p| {
            p.flagged.is_some_and(|(at, _, _)| at > p.deadline) || p.rsvp_at.is_some_and(|r| r > p.deadline)
        })
        .count();
    let revival = recover.and_then(|r| {
        probes
            .iter()
            .filter_map(|p| p.rsvp_at)
            .find(|&at| at >= r)
            .map(|at| us(at - r))
    });
    DetectorRun {
        seed,
        crash_us: crash.map(|c| us(c - START)),
        recover_us: recover.map(|r| us(r - START)),
        probes: probes.len(),
        answered: probes.iter().filter(|p| p.answered()).count(),
        detection_us: detection.map(us),
        false_positives,
        false_positive_causes: causes,
        false_declarations,
        answered_while_down,
        late,
        revival_us: revival,
    }
}

/// Runs with crash times spread evenly over one probe period (each with its own seed).
#[derive(Clone, Debug, Serialize)]
pub struct DetectorReport {
    pub hosts: usize,
    pub k: u8,
    pub load: f64,
    pub period_us: f64,
    pub misses: u32,
    /// delta(0): the bound of a probe.
    pub delta_probe_us: f64,
    /// misses T_P + delta(0): the most a detection may take.
    pub detection_bound_us: f64,
    /// The paper's testbed (Fig. 8), T_P + delta^E: ~135 us at T_P = 100 us, ~85 us at 50 us.
    pub paper_detection_us: Option<f64>,
    pub runs: usize,
    pub detected: usize,
    pub detection_us: Quantiles,
    pub detection_within_bound: bool,
    pub probes: usize,
    pub false_positives: usize,
    pub false_positive_causes: BTreeMap<String, usize>,
    pub false_declarations: usize,
    pub answered_while_down: usize,
    pub late: usize,
    pub revival_us_max: Option<f64>,
    pub run_list: Vec<DetectorRun>,
}

/// `runs` runs of `base`, the i-th crashing `i / runs` of a period after `base.crash_after`,
/// with seed `base.sim.seed + i`.
pub fn sweep(
    base: &DetectorConfig,
    runs: u32,
    progress: &mut dyn FnMut(&DetectorRun),
) -> Result<DetectorReport, String> {
    let first_crash = base.crash_after.ok_or("a sweep needs a crash time")?;
    let mut list = Vec::new();
    for i in 0..runs {
        let mut config = base.clone();
        config.sim.seed = base.sim.seed.wrapping_add(i as u64);
        let offset_ns = base.period.as_nanos() * i as u64 / runs.max(1) as u64;
        config.crash_after = Some(first_crash + Duration::from_nanos(offset_ns));
        let r = run(&config)?;
        progress(&r);
        list.push(r);
    }
    let timing = base.sim.timing();
    let delta = timing.delta(0);
    let bound = Duration::from_nanos(base.period.as_nanos() * base.misses as u64) + delta;
    let mut detections_ns: Vec<u64> = list
        .iter()
        .filter_map(|r| r.detection_us)
        .map(|d| (d * 1e3).round() as u64)
        .collect();
    let within = detections_ns.iter().all(|&d| d <= bound.as_nanos()) && detections_ns.len() == list.len();
    let mut causes = BTreeMap::new();
    for r in &list {
        for (c, n) in &r.false_positive_causes {
            *causes.entry(c.clone()).or_insert(0) += n;
        }
    }
    let paper = match (base.period.as_nanos(), base.misses) {
        (100_000, 1) => Some(135.0),
        (50_000, 1) => Some(85.0),
        _ => None,
    };
    Ok(DetectorReport {
        hosts: base.sim.fabric.hosts(),
        k: base.sim.k,
        load: base.sim.load,
        period_us: us(base.period),
        misses: base.misses,
        delta_probe_us: us(delta),
        detection_bound_us: us(bound),
        paper_detection_us: paper,
        runs: list.len(),
        detected: detections_ns.len(),
        detection_us: Quantiles::of_ns(&mut detections_ns),
        detection_within_bound: within,
        probes: list.iter().map(|r| r.probes).sum(),
        false_positives: list.iter().map(|r| r.false_positives).sum(),
        false_positive_causes: causes,
        false_declarations: list.iter().map(|r| r.false_declarations).sum(),
        answered_while_down: list.iter().map(|r| r.answered_while_down).sum(),
        late: list.iter().map(|r| r.late).sum(),
        revival_us_max: list.iter().filter_map(|r| r.revival_us).reduce(f64::max),
        run_list: list,
    })
}

impl DetectorConfig {
    /// The paper's shape on `fabric`: the detector on the first host, the target on the last
    /// (another leaf), probes from 50 us, a crash five periods later, a recovery 500 us after
    /// it (Fig. 8), probing for five periods more.
    pub fn paper(fabric: CosyFabric, period: Duration, load: f64, seed: u64) -> DetectorConfig {
        let hosts = fabric.hosts() as u32;
        let probes_from = Duration::from_micros(50);
        let crash_after = probes_from + Duration::from_nanos(5 * period.as_nanos());
        let recover_after = Duration::from_micros(500);
        let probes_until = crash_after + recover_after + Duration::from_nanos(6 * period.as_nanos());
        DetectorConfig {
            sim: CosySimConfig {
                fabric,
                load,
                seed,
                ..CosySimConfig::default()
            },
            detector: 0,
            target: hosts - 1,
            period,
            misses: 1,
            probes_from,
            probes_until,
            crash_after: Some(crash_after),
            recover_after: Some(recover_after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Instant {
        START + Duration::from_micros(us)
    }

    /// A probe sent at `sent_us` with a 20 us bound: answered (rsvp 5 us later) or not.
    fn probe(sent_us: u64, answered: bool) -> Probe {
        let deadline = at(sent_us + 20);
        let (flag, cause, flagged) = if answered {
            (Flag::Complete, Cause::Completed, at(sent_us + 6))
        } else {
            (Flag::Reject, Cause::TimedOut, deadline)
        };
        Probe {
            sent_at: at(sent_us),
            deadline,
            flagged: Some((flagged, flag, cause)),
            rsvp_at: answered.then(|| at(sent_us + 5)),
            judged: None,
        }
    }

    /// Judges `probes` as the detector does, in order, each when its completion is in.
    fn judged(mut probes: Vec<Probe>) -> Vec<Probe> {
        let mut streak = 0;
        let mut last = Instant::ZERO;
        for p in &mut probes {
            let (flagged_at, _, _) = p.flagged.unwrap();
            last = last.max(flagged_at);
            streak = if p.answered() { 0 } else { streak + 1 };
            p.judged = Some((last, streak));
        }
        probes
    }

    #[test]
    fn a_crash_is_detected_at_the_first_missed_deadline_after_it() {
        // Probes every 100 us; crash at 150 us, back at 450 us.
        let probes = judged(vec![
            probe(0, true),
            probe(100, true),
            probe(200, false),
            probe(300, false),
            probe(400, false),
            probe(500, true),
        ]);
        let r = judge(1, &probes, 1, Some(at(150)), Some(at(450)));
        assert_eq!(r.detection_us, Some(70.0), "probe at 200 us missed by 220 us");
        assert_eq!((r.false_positives, r.answered_while_down, r.late), (0, 0, 0));
        assert_eq!(r.revival_us, Some(55.0));
        let r = judge(1, &probes, 2, Some(at(150)), Some(at(450)));
        assert_eq!(r.detection_us, Some(170.0), "two misses: the probe at 300 us");
    }

    #[test]
    fn a_miss_while_the_target_was_up_is_a_false_positive_and_an_rsvp_while_down_is_flagged() {
        let mut probes = vec![probe(0, false), probe(100, true), probe(200, true)];
        probes[0].flagged = Some((at(20), Flag::Reject, Cause::Blocked));
        let r = judge(1, &judged(probes.clone()), 1, Some(at(150)), None);
        assert_eq!((r.false_positives, r.false_declarations), (1, 1));
        assert_eq!(r.false_positive_causes.get("Blocked"), Some(&1));
        let mut busy = probes.clone();
        busy[0].flagged = Some((at(20), Flag::Reject, Cause::ReceiverBusy));
        assert_eq!(
            judge(1, &judged(busy), 1, Some(at(150)), None).false_positives,
            0,
            "the target's own reject proves it alive"
        );
        assert_eq!(
            judge(1, &judged(probes.clone()), 2, Some(at(150)), None).false_declarations,
            0
        );
        assert_eq!(
            r.answered_while_down, 1,
            "the probe at 200 us answered a crashed host"
        );
        assert_eq!(r.detection_us, None);
        probes[2].rsvp_at = Some(at(221));
        assert_eq!(judge(1, &judged(probes), 1, None, None).late, 1);
    }
}
