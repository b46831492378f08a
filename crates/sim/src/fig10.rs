//! Paper Fig. 10 as a figure: the recovery sweep of [`crate::recovery`] (one run per kind, host
//! count and seed) as rows, and its plots next to the paper's.

use crate::figures::{Plot, Series};
use crate::recovery::{FailureKind, RecoveryRow, recovery};
use crate::run::SimError;
use serde::Serialize;

/// Fig. 10's rows (one per failure kind and host count) and plots.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryFigure {
    pub name: &'static str,
    pub x_name: &'static str,
    pub rows: Vec<RecoveryRow>,
    #[serde(skip)]
    pub plots: Vec<Plot>,
}

/// One line per failure kind, of the points `y` has a value for.
fn series_by_kind(rows: &[RecoveryRow], y: impl Fn(&RecoveryRow) -> Option<f64>) -> Vec<Series> {
    FailureKind::ALL
        .iter()
        .map(|&kind| Series {
            label: kind.label().to_string(),
            points: rows
                .iter()
                .filter(|r| r.kind == kind)
                .filter_map(|r| y(r).filter(|v| v.is_finite()).map(|v| (r.hosts as f64, v)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Paper Fig. 10: the commit-barrier stall of correct processes when a host, a ToR, a core
/// link or a core switch fails, against hosts, `seeds` seeds per point.
pub fn fig10(
    hosts: &[u32],
    seeds: u32,
    progress: &mut dyn FnMut(&RecoveryRow),
) -> Result<RecoveryFigure, SimError> {
    let rows = recovery(hosts, seeds, progress)?;
    let plot = |title: &str, series| Plot::new(title, "hosts", "recovery time (us, mean)", false, series);
    let plots = vec![
        plot(
            "Fig. 10: failure recovery, simulated",
            series_by_kind(&rows, |r| Some(r.recovery_us.mean)),
        ),
        plot(
            "Fig. 10: the paper's testbed",
            series_by_kind(&rows, |r| r.paper_us),
        ),
    ];
    Ok(RecoveryFigure {
        name: "fig10",
        x_name: "hosts",
        rows,
        plots,
    })
}
