//! `onepipe netchain bench`: the same workload (20,000 keys of 16 B, 64 B values, closed-loop
//! clients, write ratios 0, 1 and 100%) against NetChain over the udp runtime and, in the same
//! run, against etcd (Debian's etcd-server, started here on loopback with a data dir of its
//! own and stopped afterwards) through its v3 JSON gateway, so that the two are compared as
//! ratios within one run.

#![allow(clippy::disallowed_methods)] // etcd's clients run in real time

use super::fabric::NetchainRuntime;
use super::{NetchainDemoConfig, demo_keys};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use onepipe_etcd::gateway::{PutRequest, RangeRequest};
use onepipe_etcd::testing::TestEtcd;
use onepipe_etcd::{Client, Connect};
use onepipe_fabric::hash::SplitMix;
use onepipe_wire::Duration;
use serde::Serialize;
use std::time::Instant;

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
pub struct Row {
    pub system: String,
    pub clients: u32,
    pub write_ratio: f64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<Row>,
    /// Why etcd was not measured, if it was not.
    pub etcd_skipped: Option<String>,
    /// NetChain's throughput over etcd's, per (clients, write ratio) both measured.
    pub ratios: Vec<(u32, f64, f64)>,
}

fn quantiles_us(h: &Histogram<u64>) -> (f64, f64) {
    (
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
    )
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
    let etcd_skipped = match o.skip_etcd {
        true => Some("--skip-etcd".to_string()),
        false => match etcd_rows(o, &points, bar) {
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

/// etcd at every point; `Err` says why it could not be measured (not installed, did not start).
fn etcd_rows(o: &NetchainBenchOptions, points: &[(u32, f64)], bar: &ProgressBar) -> Result<Vec<Row>, String> {
    if std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("etcd is not installed (apt-get install etcd-server)".into());
    }
    let dir = std::env::temp_dir().join(format!("onepipe-netchain-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| {
        let mut etcd = TestEtcd::start(&dir, "http", &[])?;
        let connect = etcd.connect();
        let client = Client::new(&connect, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
        etcd.wait_until_up(&client)?;
        bar.set_message("etcd: loading keys");
        let keys: Vec<Vec<u8>> = demo_keys(o.keys).iter().map(|k| k.as_bytes().to_vec()).collect();
        load(&connect, &keys, o.value_bytes)?;
        let mut rows = Vec::new();
        for &(clients, write_ratio) in points {
            bar.set_message(format!("etcd {clients} clients, {}% writes", write_ratio * 100.0));
            rows.push(etcd_point(&connect, &keys, clients, write_ratio, o)?);
            bar.inc(1);
        }
        Ok(rows)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Writes every key once, from 16 threads.
fn load(connect: &Connect, keys: &[Vec<u8>], value_bytes: usize) -> Result<(), String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .chunks(keys.len().div_ceil(16).max(1))
            .map(|chunk| {
                scope.spawn(move || -> Result<(), String> {
                    let client =
                        Client::new(connect, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
                    for k in chunk {
                        let put = PutRequest {
                            key: k.as_slice().into(),
                            value: vec![b'v'; value_bytes].into(),
                            ..PutRequest::default()
                        };
                        client.put(&put).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "a loader panicked".to_string())?)
    })
}

/// `clients` threads in closed loop for the point's time, each with its own connection.
fn etcd_point(
    connect: &Connect,
    keys: &[Vec<u8>],
    clients: u32,
    write_ratio: f64,
    o: &NetchainBenchOptions,
) -> Result<Row, String> {
    let until = Instant::now() + std::time::Duration::from_secs_f64(o.seconds_per_point);
    let histograms: Vec<Histogram<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                scope.spawn(move || -> Result<Histogram<u64>, String> {
                    let client =
                        Client::new(connect, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
                    let mut rng = SplitMix::new(c as u64 + 1);
                    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
                    let value = vec![b'w'; o.value_bytes];
                    while Instant::now() < until {
                        let key = keys[(rng.next_u64() % keys.len() as u64) as usize].as_slice();
                        let began = Instant::now();
                        if rng.chance(write_ratio) {
                            let put = PutRequest {
                                key: key.into(),
                                value: value.clone().into(),
                                ..PutRequest::default()
                            };
                            client.put(&put).map_err(|e| e.to_string())?;
                        } else {
                            client.range(&RangeRequest::key(key)).map_err(|e| e.to_string())?;
                        }
                        h.saturating_record(began.elapsed().as_nanos() as u64);
                    }
                    Ok(h)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "an etcd client panicked".to_string())?)
            .collect::<Result<Vec<_>, String>>()
    })?;
    let mut all = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    for h in &histograms {
        all.add(h).expect("same bounds");
    }
    let (p50_us, p99_us) = quantiles_us(&all);
    Ok(Row {
        system: "etcd".into(),
        clients,
        write_ratio,
        ops_per_s: all.len() as f64 / o.seconds_per_point,
        p50_us,
        p99_us,
    })
}
