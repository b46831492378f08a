//! `onepipe paxos bench`: writes (SETs of 64 B values) from closed-loop clients against the
//! Paxos store with its roles in the switches and on hosts, over the udp runtime, then against
//! etcd in the same run (crate::etcd_compare); and the in-network store with 1, 2 and 4
//! partitions. Every ratio is between figures of one run.

use super::{PaxosDemoConfig, run};
use crate::etcd_compare::{EtcdWorkload, Row, etcd_rows, quantiles_us};
use crate::netchain::fabric::NetchainRuntime;
use indicatif::ProgressBar;
use onepipe_paxos::{Placement, Tuning};
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct PaxosBenchOptions {
    pub clients: Vec<u32>,
    pub partitions: Vec<u16>,
    pub seconds_per_point: f64,
    pub keys: usize,
    pub value_bytes: usize,
    pub runtime: NetchainRuntime,
    pub skip_etcd: bool,
}

impl Default for PaxosBenchOptions {
    fn default() -> Self {
        PaxosBenchOptions {
            clients: vec![1, 4, 16, 64],
            partitions: vec![1, 2, 4],
            seconds_per_point: 1.0,
            keys: 1000,
            value_bytes: 64,
            runtime: NetchainRuntime::Udp,
            skip_etcd: false,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PaxosBenchReport {
    /// Systems `paxos-in-network`, `paxos-software`, `etcd`, and for the partition points (at
    /// the most clients) `paxos-in-network-Kp` (replicas apply on their node) and
    /// `paxos-in-network-Kp-workers` (a worker thread per partition).
    pub rows: Vec<Row>,
    pub etcd_skipped: Option<String>,
    /// Per number of clients: in-network over software, and in-network over etcd.
    pub in_network_over_software: Vec<(u32, f64)>,
    pub in_network_over_etcd: Vec<(u32, f64)>,
}

fn system(p: Placement) -> &'static str {
    match p {
        Placement::InNetwork => "paxos-in-network",
        Placement::Software => "paxos-software",
    }
}

pub fn bench(o: &PaxosBenchOptions, bar: &ProgressBar) -> Result<PaxosBenchReport, String> {
    let most = o.clients.iter().copied().max().unwrap_or(1);
    bar.set_length((3 * o.clients.len() + 2 * o.partitions.len()) as u64);
    let mut rows = Vec::new();
    let mut point = |placement: Placement, clients: u32, partitions: u16, workers: bool, name: String| {
        bar.set_message(format!("{name}, {clients} clients"));
        let c = PaxosDemoConfig {
            placement,
            runtime: o.runtime,
            clients: clients as usize,
            client_hosts: (clients as usize).clamp(1, 2),
            duration: Duration::from_nanos((o.seconds_per_point * 1e9) as u64),
            keys: o.keys,
            value_bytes: o.value_bytes,
            write_ratio: 1.0,
            tuning: Tuning {
                partitions,
                ..Tuning::default()
            },
            // No history: memory stays flat, and the points measure the store alone.
            record_max: 0,
            replica_workers: workers,
            ..PaxosDemoConfig::default()
        };
        let r = run(&c, &ProgressBar::hidden())?;
        bar.inc(1);
        let (p50_us, p99_us) = quantiles_us(&r.latency_ns);
        rows.push(Row {
            system: name,
            clients,
            write_ratio: 1.0,
            ops_per_s: r.values_per_s(),
            p50_us,
            p99_us,
        });
        Ok::<(), String>(())
    };
    for &clients in &o.clients {
        for placement in [Placement::InNetwork, Placement::Software] {
            point(placement, clients, 1, false, system(placement).into())?;
        }
    }
    for &k in &o.partitions {
        point(
            Placement::InNetwork,
            most,
            k,
            false,
            format!("paxos-in-network-{k}p"),
        )?;
        point(
            Placement::InNetwork,
            most,
            k,
            true,
            format!("paxos-in-network-{k}p-workers"),
        )?;
    }
    let keys: Vec<Vec<u8>> = (0..o.keys).map(|i| format!("key:{i:06}").into_bytes()).collect();
    let workload = EtcdWorkload {
        keys: &keys,
        value_bytes: o.value_bytes,
        seconds_per_point: o.seconds_per_point,
    };
    let points: Vec<(u32, f64)> = o.clients.iter().map(|&c| (c, 1.0)).collect();
    let etcd_skipped = match o.skip_etcd {
        true => Some("--skip-etcd".to_string()),
        false => match etcd_rows(&workload, &points, bar) {
            Ok(etcd) => {
                rows.extend(etcd);
                None
            }
            Err(why) => Some(why),
        },
    };
    let ratio = |a: &str, b: &str| -> Vec<(u32, f64)> {
        o.clients
            .iter()
            .filter_map(|&c| {
                let find = |s: &str| rows.iter().find(|r| r.system == s && r.clients == c);
                Some((c, find(a)?.ops_per_s / find(b)?.ops_per_s.max(1e-9)))
            })
            .collect()
    };
    Ok(PaxosBenchReport {
        in_network_over_software: ratio("paxos-in-network", "paxos-software"),
        in_network_over_etcd: ratio("paxos-in-network", "etcd"),
        rows,
        etcd_skipped,
    })
}
