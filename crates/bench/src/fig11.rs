//! Paper Fig. 11, the receiver's reorder overhead against the reordering delay, measured two
//! ways: the buffer in the simulator with the paper's fabric ([`onepipe_sim::fig11`]), and the
//! delivery rate and buffer of the real receive path on this machine's CPU
//! ([`crate::reorder_cost`]); with the paper's numbers beside them.

use crate::reorder_cost::{ReorderCostOptions, ReorderCostRow, reorder_cost};
use onepipe_sim::fig11::{PAPER, ReorderSimRow, reorder_sweep};
use onepipe_sim::figures::{Plot, Series};
use serde::Serialize;

/// A row of the paper's figure.
#[derive(Clone, Debug, Serialize)]
pub struct PaperRow {
    pub delay_us: f64,
    pub throughput_msgs_per_s: f64,
    pub buffer_bytes: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Fig11 {
    pub name: &'static str,
    pub sim: Vec<ReorderSimRow>,
    /// Empty when the CPU measurement was skipped.
    pub host: Vec<ReorderCostRow>,
    pub host_message_bytes: usize,
    pub paper: Vec<PaperRow>,
    #[serde(skip)]
    pub plots: Vec<Plot>,
}

/// What finished, for a progress bar.
pub enum Progress<'a> {
    Sim(&'a ReorderSimRow),
    Host(&'a ReorderCostRow),
}

/// The simulator at every delay, then (if `host` is given) this CPU at every delay.
pub fn fig11(
    delays_us: &[f64],
    host: Option<&ReorderCostOptions>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Fig11, String> {
    let sim = reorder_sweep(delays_us, &mut |r| progress(Progress::Sim(r))).map_err(|e| e.to_string())?;
    let host_rows = match host {
        Some(o) => {
            let o = ReorderCostOptions {
                delays_us: delays_us.to_vec(),
                ..o.clone()
            };
            reorder_cost(&o, &mut |r| progress(Progress::Host(r)))?
        }
        None => Vec::new(),
    };
    let paper: Vec<PaperRow> = PAPER
        .iter()
        .map(|&(delay_us, mpps, mb)| PaperRow {
            delay_us,
            throughput_msgs_per_s: mpps * 1e6,
            buffer_bytes: mb * 1e6,
        })
        .collect();
    let plots = plots(&sim, &host_rows, &paper);
    Ok(Fig11 {
        name: "fig11",
        sim,
        host: host_rows,
        host_message_bytes: host.map_or(0, |o| o.message_bytes),
        paper,
        plots,
    })
}

fn series(label: &str, points: impl Iterator<Item = (f64, f64)>) -> Series {
    Series {
        label: label.to_string(),
        points: points.filter(|p| p.1.is_finite() && p.1 > 0.0).collect(),
    }
}

fn plots(sim: &[ReorderSimRow], host: &[ReorderCostRow], paper: &[PaperRow]) -> Vec<Plot> {
    let m = 1e6;
    let throughput = vec![
        series(
            "this CPU, reorder path",
            host.iter().map(|r| (r.delay_us, r.throughput_msgs_per_cpu_s / m)),
        ),
        series(
            "simulator",
            sim.iter().map(|r| (r.delay_us, r.throughput_msgs_per_s / m)),
        ),
        series(
            "paper",
            paper.iter().map(|r| (r.delay_us, r.throughput_msgs_per_s / m)),
        ),
    ];
    let memory = vec![
        series(
            "this CPU, reorder buffer peak",
            host.iter().map(|r| (r.delay_us, r.reorder_bytes_peak as f64 / m)),
        ),
        series(
            "simulator, reorder buffer peak",
            sim.iter().map(|r| (r.delay_us, r.reorder_bytes_peak as f64 / m)),
        ),
        series("paper", paper.iter().map(|r| (r.delay_us, r.buffer_bytes / m))),
    ];
    let keep = |v: Vec<Series>| v.into_iter().filter(|s| !s.points.is_empty()).collect();
    vec![
        Plot::new(
            "Fig. 11: delivery throughput per process",
            "reordering delay (us)",
            "M msg/s",
            true,
            keep(throughput),
        ),
        Plot {
            y_log: true,
            ..Plot::new(
                "Fig. 11: reorder buffer memory",
                "reordering delay (us)",
                "MB",
                true,
                keep(memory),
            )
        },
    ]
}
