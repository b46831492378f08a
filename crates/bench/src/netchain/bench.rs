//! `onepipe netchain bench`: the same workload (20,000 keys of 16 B, 64 B values, closed-loop
//! clients, write ratios 0, 1 and 100%) against NetChain over the udp runtime and, in the same
//! run, against etcd (Debian's etcd-server, started here on loopback with a data dir of its
//! own and stopped afterwards) through its v3 JSON gateway, so that the two are compared as
//! ratios within one run.

use super::fabric::NetchainRuntime;
use super::{NetchainDemoConfig, demo_keys};
use crate::etcd_compare::{EtcdWorkload, Row, etcd_rows, quantiles_us};
use indicatif::ProgressBar;
use onepipe_wire::Duration;
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct NetchainBenchOptions {
    pub clients: Vec<u32>,
    pub write_ratios: Vec<f64>,
    pub seconds_per_point: f64,
    pub keys: usize,
    pub value_bytes: usize,
    pub runtime: NetchainRuntime,
    pub threads: usize,
    /// Leave etcd out even if it is installed.
    pub skip_etcd: bool,
}

impl Default for NetchainBenchOptions {
    fn default() -> Self {
        NetchainBenchOptions {
            clients: vec![1, 4, 16, 64],
            write_ratios: vec![0.0, 0.01, 1.0],
            seconds_per_point: 1.0,
            keys: 20_000,
            value_bytes: 64,
            runtime: NetchainRuntime::Udp,
            threads: 2,
            skip_etcd: false,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<Row>,
    /// Why etcd was not measured, if it was not.
    pub etcd_skipped: Option<String>,
    /// NetChain's throughput over etcd's, per (clients, write ratio) both measured.
    pub ratios: Vec<(u32, f64, f64)>,
}

pub fn run(o: &NetchainBenchOptions, bar: &ProgressBar) -> Result<BenchReport, String> {
    let points: Vec<(u32, f64)> = o
        .write_ratios
        .iter()
        .flat_map(|&w| o.clients.iter().map(move |&c| (c, w)))
        .collect();
    bar.set_length(2 * points.len() as u64);
    let mut rows = Vec::new();
    for &(clients, write_ratio) in &points {
        bar.set_message(format!(
            "netchain {clients} clients, {}% writes",
            write_ratio * 100.0
        ));
        let c = NetchainDemoConfig {
            keys: o.keys,
            value_bytes: o.value_bytes,
            write_ratio,
            clients,
            duration: Duration::from_nanos((o.seconds_per_point * 1e9) as u64),
            runtime: o.runtime,
            workers: o.threads,
            // The history is not needed here; memory stays flat.
            record_max: 0,
            ..NetchainDemoConfig::default()
        };
        let r = super::run(&c, &ProgressBar::hidden())?;
        let mut all = r.read_latency_ns.clone();
        all.add(&r.write_latency_ns).expect("same bounds");
        let (p50_us, p99_us) = quantiles_us(&all);
        rows.push(Row {
            system: "netchain".into(),
            clients,
            write_ratio,
            ops_per_s: r.ops_per_s(),
            p50_us,
            p99_us,
        });
        bar.inc(1);
    }
    let etcd_keys: Vec<Vec<u8>> = demo_keys(o.keys).iter().map(|k| k.as_bytes().to_vec()).collect();
    let etcd_workload = EtcdWorkload {
        keys: &etcd_keys,
        value_bytes: o.value_bytes,
        seconds_per_point: o.seconds_per_point,
    };
    let etcd_skipped = match o.skip_etcd {
        true => Some("--skip-etcd".to_string()),
        false => match etcd_rows(&etcd_workload, &points, bar) {
            Ok(etcd) => {
                rows.extend(etcd);
                None
            }
            Err(why) => Some(why),
        },
    };
    let ratios = points
        .iter()
        .filter_map(|&(c, w)| {
            let find = |s: &str| {
                rows.iter()
                    .find(|r| r.system == s && r.clients == c && r.write_ratio == w)
            };
            let (n, e) = (find("netchain")?, find("etcd")?);
            Some((c, w, n.ops_per_s / e.ops_per_s.max(1e-9)))
        })
        .collect();
    Ok(BenchReport {
        rows,
        etcd_skipped,
        ratios,
    })
}
