//! Paper Fig. 10 in the simulator: how long the commit barrier of correct processes stalls when
//! a host, a ToR, a core link or a core switch fails in the middle of reliable traffic, as the
//! number of hosts grows, with the paper's timing (3 us beacons, a failure detected after 10
//! missing intervals, 100 Gbps links, the controller a network diameter away).

use crate::config::{FailTarget, Failure, SimConfig};
use crate::run::{SimError, run};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;

/// What fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    Host,
    Tor,
    CoreLink,
    CoreSwitch,
}

impl FailureKind {
    pub const ALL: [FailureKind; 4] = [
        FailureKind::Host,
        FailureKind::Tor,
        FailureKind::CoreLink,
        FailureKind::CoreSwitch,
    ];

    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Host => "host",
            FailureKind::Tor => "tor",
            FailureKind::CoreLink => "core-link",
            FailureKind::CoreSwitch => "core-switch",
        }
    }

    /// The paper's Fig. 10 mean, in us, at `hosts` (../shared/anchors/1pipe-figures.md).
    pub fn paper_us(self, hosts: u32) -> Option<f64> {
        let column = match hosts {
            2 => 0,
            8 => 1,
            16 => 2,
            32 => 3,
            _ => return None,
        };
        let table: [Option<f64>; 4] = match self {
            FailureKind::Host => [Some(51.0), Some(67.0), Some(83.0), Some(124.0)],
            FailureKind::Tor => [Some(55.0), Some(80.0), Some(171.0), Some(458.0)],
            FailureKind::CoreLink => [Some(36.0), Some(44.0), Some(55.0), Some(70.0)],
            FailureKind::CoreSwitch => [None, None, Some(111.0), Some(171.0)],
        };
        table[column]
    }

    /// The failure in a [`recovery_topology`]: the last host, the last rack's ToR, the link
    /// between the first spine and the first core, the first core.
    fn target(self, topology: &Topology) -> FailTarget {
        match self {
            FailureKind::Host => FailTarget::Process(topology.hosts.len() as u32 - 1),
            FailureKind::Tor => {
                let last = topology.switches.iter().rev().find(|s| s.layer == 1);
                FailTarget::Switch(last.expect("a ToR").name.clone())
            }
            FailureKind::CoreLink => FailTarget::Link("spine0.0".into(), "core0".into()),
            FailureKind::CoreSwitch => FailTarget::Switch("core0".into()),
        }
    }
}

/// The paper's testbed shape (two pods of two ToRs, two spines each, two cores) holding
/// `hosts`: spread over four racks, or over two for two hosts.
pub fn recovery_topology(hosts: u32) -> Result<Topology, String> {
    let (tors_per_pod, per_tor) = match hosts {
        2 => (1, 1),
        h if h >= 4 && h % 4 == 0 => (2, h / 4),
        h => return Err(format!("{h} hosts: use 2 or a multiple of 4 (four racks)")),
    };
    Topology::three_layer(2, tors_per_pod, 2, 2, per_tor as usize).map_err(|e| e.to_string())
}

/// The commit-barrier stall of correct processes, pooled over seeds.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRow {
    pub kind: FailureKind,
    pub hosts: u32,
    pub seeds: u32,
    /// Mean, 5th and 95th percentile over every correct process of every seed (the paper's
    /// error bars are the 5th and 95th percentiles).
    pub recovery_us: crate::run::StallUs,
    pub detection_us_mean: f64,
    pub resume_us_mean: f64,
    pub failed_processes: usize,
    pub aborted: u64,
    /// Correct processes whose barrier never passed the failure before the run ended.
    pub stalled_processes: u64,
    pub violations: u64,
    pub paper_us: Option<f64>,
    /// Ours over the paper's mean.
    pub ratio_to_paper: Option<f64>,
}

/// One configuration of the sweep.
pub fn config(kind: FailureKind, hosts: u32, seed: u64) -> Result<SimConfig, String> {
    let topology = recovery_topology(hosts)?;
    // The failure's phase against the beacons moves with the seed: the spread of the paper's
    // error bars.
    let at = Duration::from_nanos(100_000 + seed * 700);
    let failures = vec![Failure {
        target: kind.target(&topology),
        at,
        lasts: None,
    }];
    Ok(SimConfig {
        seed,
        topology,
        reliable: true,
        controller: true,
        send_for: Duration::from_micros(400),
        drain: Duration::from_micros(400),
        failures,
        ..SimConfig::default()
    })
}

/// Runs every kind at every host count, `seeds` seeds each.
pub fn recovery(
    hosts: &[u32],
    seeds: u32,
    progress: &mut dyn FnMut(&RecoveryRow),
) -> Result<Vec<RecoveryRow>, SimError> {
    let mut rows = Vec::new();
    for &h in hosts {
        for kind in FailureKind::ALL {
            let (mut stalls_us, mut detection, mut resume) = (Vec::new(), 0.0, 0.0);
            let (mut failed, mut aborted, mut stalled, mut violations) = (0, 0, 0, 0);
            for seed in 1..=seeds as u64 {
                let c = config(kind, h, seed).map_err(SimError::Wiring)?;
                let r = run(&c, &mut |_, _| {})?;
                let f = r.failure.expect("the controller ran");
                stalls_us.extend(&f.stalls_us);
                detection += f.detection_us.unwrap_or(f64::NAN);
                resume += f.resume_us.unwrap_or(f64::NAN);
                failed = f.failed_processes.len();
                aborted += f.aborted;
                stalled += f.stalled_processes;
                violations += r.violations;
            }
            let recovery_us = crate::run::StallUs::of(&mut stalls_us).unwrap_or(crate::run::StallUs {
                mean: f64::NAN,
                p5: f64::NAN,
                p95: f64::NAN,
            });
            let paper_us = kind.paper_us(h);
            let row = RecoveryRow {
                kind,
                hosts: h,
                seeds,
                ratio_to_paper: paper_us.map(|p| recovery_us.mean / p),
                recovery_us,
                detection_us_mean: detection / seeds as f64,
                resume_us_mean: resume / seeds as f64,
                failed_processes: failed,
                aborted,
                stalled_processes: stalled,
                violations,
                paper_us,
            };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}
