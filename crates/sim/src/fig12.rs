//! Paper Fig. 12: the impact of queueing delay on 1Pipe latency. Long-lived DCTCP flows
//! ([`crate::dctcp`]) share the fabric with Fig. 9a's light 1Pipe load (each process sends a
//! message to a random process every 20 us): (a) against the number of background flows per
//! host, on a fabric without oversubscription; (b) against the ToRs' oversubscription, with
//! background flows on. Latency is Fig. 9a's (delivery minus send time, in virtual time, of
//! the messages sent in the measured window); the flows start with the run, and 1Pipe's
//! latency is measured once their windows have settled.

use crate::config::SimConfig;
use crate::dctcp::DctcpConfig;
use crate::figures::{Plot, Row, SERVICES, Service, light, row, series_of};
use crate::run::{SimError, run};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use serde::Serialize;

/// The paper's text (section 7.2): 10 background TCP flows per host add 30 us to best-effort
/// and 50 us to reliable 1Pipe's latency.
pub const PAPER_INFLATION_US: [(&str, f64); 2] = [("1pipe-be", 30.0), ("1pipe-r", 50.0)];

/// Time the flows have, before measuring, to leave slow start and settle their windows. On
/// the testbed at 8:1 the mean latency still creeps up after it (by a tenth from 1 to 2 ms of
/// settling, docs/notes/2026-11-28-fig12.md); 300 us measured a third less than 2 ms did.
pub const SETTLE: Duration = Duration::from_millis(1);
/// Measured 1Pipe traffic after the flows settled: 25 messages per process.
pub const MEASURE: Duration = Duration::from_micros(500);

/// What one Fig. 12 point is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    pub flows_per_host: u32,
    /// Capacity of the hosts below a ToR over that of its uplinks.
    pub oversubscription: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Fig12Row {
    /// "a" (against flows) or "b" (against oversubscription).
    pub panel: &'static str,
    pub flows_per_host: u32,
    pub oversubscription: f64,
    pub fabric_gbps: f64,
    /// Mean latency above the same service's point without background flows and without
    /// oversubscription, when the sweep has it.
    pub inflation_us_mean: Option<f64>,
    pub background_goodput_gbps_per_host: f64,
    pub background_marked_fraction: f64,
    pub peak_queue_bytes: usize,
    pub ecn_marked: u64,
    #[serde(flatten)]
    pub row: Row,
}

#[derive(Clone, Debug, Serialize)]
pub struct Fig12 {
    pub name: &'static str,
    pub processes: u32,
    pub topology: String,
    pub ecn_threshold_bytes: usize,
    pub rows: Vec<Fig12Row>,
    pub paper_inflation_us: Vec<(String, f64)>,
    #[serde(skip)]
    pub plots: Vec<Plot>,
}

/// The rate of a switch-to-switch link that gives `topology`'s ToRs the oversubscription
/// `ratio` (hosts' capacity below a ToR over its uplinks'), the fullest ToR deciding; `None`
/// if no ToR has an uplink (one switch: nothing to oversubscribe).
pub fn fabric_bits_per_s(
    topology: &Topology,
    processes_per_host: u32,
    host_bits_per_s: u64,
    ratio: f64,
) -> Option<u64> {
    let mut worst: Option<f64> = None;
    for (tor, _) in topology.switches.iter().enumerate() {
        let below = topology.hosts.iter().filter(|h| h.tor == tor).count() as f64 * processes_per_host as f64;
        let uplinks = topology.links.iter().filter(|l| l.lower == tor).count() as f64;
        if below == 0.0 || uplinks == 0.0 {
            continue;
        }
        let rate = below * host_bits_per_s as f64 / (uplinks * ratio);
        worst = Some(worst.map_or(rate, |w: f64| w.min(rate)));
    }
    worst.map(|r| r.round().max(1.0) as u64)
}

/// One point's run: Fig. 9a's light load at `processes` with the background and fabric of
/// `point`.
pub fn config(processes: u32, service: Service, point: Point) -> Result<SimConfig, String> {
    if !(point.oversubscription.is_finite() && point.oversubscription >= 1.0) {
        return Err(format!(
            "oversubscription {} must be at least 1",
            point.oversubscription
        ));
    }
    let mut c = light(processes, service);
    c.fabric_link_bits_per_s = fabric_bits_per_s(
        &c.topology,
        c.processes_per_host,
        c.link_bits_per_s,
        point.oversubscription,
    );
    if c.fabric_link_bits_per_s.is_none() && point.oversubscription > 1.0 {
        return Err(format!(
            "{processes} processes sit under one switch: nothing to oversubscribe"
        ));
    }
    c.background = DctcpConfig {
        flows_per_host: point.flows_per_host,
        ..DctcpConfig::default()
    };
    c.send_for = SETTLE + MEASURE;
    c.measure_after = SETTLE;
    // Reliable messages queue behind the flows on the way and back: time to finish.
    c.drain = Duration::from_micros(500);
    Ok(c)
}

/// Runs panel `panel` over `points`, reporting each row to `progress`.
fn panel(
    name: &'static str,
    processes: u32,
    points: &[Point],
    progress: &mut dyn FnMut(&Fig12Row),
) -> Result<Vec<Fig12Row>, SimError> {
    let mut rows = Vec::new();
    for &point in points {
        for service in SERVICES {
            let c = config(processes, service, point).map_err(|reason| crate::ConfigError {
                field: "fig12",
                reason,
            })?;
            let r = run(&c, &mut |_, _| {})?;
            let x = match name {
                "a" => point.flows_per_host as f64,
                _ => point.oversubscription,
            };
            let background = r.background.clone();
            let fig_row = Fig12Row {
                panel: name,
                flows_per_host: point.flows_per_host,
                oversubscription: point.oversubscription,
                fabric_gbps: c.fabric_link_bits_per_s.unwrap_or(c.link_bits_per_s) as f64 / 1e9,
                inflation_us_mean: None,
                background_goodput_gbps_per_host: background
                    .as_ref()
                    .map_or(0.0, |b| b.goodput_gbps_per_host),
                background_marked_fraction: background.as_ref().map_or(0.0, |b| b.marked_fraction),
                peak_queue_bytes: r.engine.peak_queue_bytes,
                ecn_marked: r.engine.ecn_marked,
                row: row(service.label(), x, &r),
            };
            progress(&fig_row);
            rows.push(fig_row);
        }
    }
    Ok(rows)
}

/// Fills in each row's inflation over its service's idle point (no flows, no
/// oversubscription), where the rows have one.
fn add_inflation(rows: &mut [Fig12Row]) {
    let idle: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.flows_per_host == 0 && r.oversubscription == 1.0)
        .map(|r| (r.row.series.clone(), r.row.latency_us.mean))
        .collect();
    for r in rows {
        r.inflation_us_mean = idle
            .iter()
            .find(|(s, _)| *s == r.row.series)
            .map(|(_, base)| r.row.latency_us.mean - base);
    }
}

/// Paper Fig. 12 at `processes`: panel (a) over `flows` per host without oversubscription,
/// panel (b) over `ratios` with `ratio_flows` flows per host.
pub fn fig12(
    processes: u32,
    flows: &[u32],
    ratios: &[f64],
    ratio_flows: u32,
    progress: &mut dyn FnMut(&Fig12Row),
) -> Result<Fig12, SimError> {
    let a: Vec<Point> = flows
        .iter()
        .map(|&f| Point {
            flows_per_host: f,
            oversubscription: 1.0,
        })
        .collect();
    let b: Vec<Point> = ratios
        .iter()
        .map(|&r| Point {
            flows_per_host: ratio_flows,
            oversubscription: r,
        })
        .collect();
    let mut rows = panel("a", processes, &a, progress)?;
    rows.extend(panel("b", processes, &b, progress)?);
    add_inflation(&mut rows);
    let plots = plots(&rows, ratio_flows);
    let sample = light(processes, Service::BestEffort);
    Ok(Fig12 {
        name: "fig12",
        processes,
        topology: sample.topology.name.clone(),
        ecn_threshold_bytes: sample.ecn_threshold_bytes,
        rows,
        paper_inflation_us: PAPER_INFLATION_US
            .iter()
            .map(|(s, v)| (s.to_string(), *v))
            .collect(),
        plots,
    })
}

fn plots(rows: &[Fig12Row], ratio_flows: u32) -> Vec<Plot> {
    let of = |panel: &str| -> Vec<Row> {
        rows.iter()
            .filter(|r| r.panel == panel)
            .map(|r| r.row.clone())
            .collect()
    };
    let (a, b) = (of("a"), of("b"));
    let mut out = Vec::new();
    if !a.is_empty() {
        out.push(Plot::new(
            "Fig. 12a: latency vs background flows per host (mean)",
            "background DCTCP flows per host",
            "latency (us)",
            false,
            series_of(&a, |r| r.latency_us.mean),
        ));
    }
    if !b.is_empty() {
        out.push(Plot::new(
            &format!("Fig. 12b: latency vs ToR oversubscription, {ratio_flows} flows per host (mean)"),
            "oversubscription ratio",
            "latency (us)",
            true,
            series_of(&b, |r| r.latency_us.mean),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The testbed's ToRs have 8 hosts at 100G and 2 uplinks: 400G uplinks make 1:1 (the
    /// paper's bundles), 100G 4:1.
    #[test]
    fn the_testbed_fabric_rate_follows_the_ratio() {
        let t = Topology::paper_testbed();
        let rate = |r| fabric_bits_per_s(&t, 1, 100_000_000_000, r);
        assert_eq!(rate(1.0), Some(400_000_000_000));
        assert_eq!(rate(4.0), Some(100_000_000_000));
        assert_eq!(
            fabric_bits_per_s(&Topology::single_switch(4).unwrap(), 1, 100, 2.0),
            None
        );
        assert!(
            config(
                32,
                Service::BestEffort,
                Point {
                    flows_per_host: 1,
                    oversubscription: 0.5
                }
            )
            .is_err()
        );
        assert!(
            config(
                4,
                Service::BestEffort,
                Point {
                    flows_per_host: 1,
                    oversubscription: 2.0
                }
            )
            .is_err()
        );
    }
}
