//! etcd measured under the same closed-loop workload as one of our systems, in the same run
//! (Debian's etcd-server, started here on loopback with a data dir of its own and stopped
//! afterwards, through its v3 JSON gateway), so that the two compare as ratios within one run.
//! `onepipe netchain bench` and `onepipe paxos bench` use it.

#![allow(clippy::disallowed_methods)] // etcd's clients run in real time

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use onepipe_etcd::gateway::{PutRequest, RangeRequest};
use onepipe_etcd::testing::TestEtcd;
use onepipe_etcd::{Client, Connect};
use onepipe_fabric::hash::SplitMix;
use serde::Serialize;
use std::time::Instant;

/// One point of a comparison: a system at a number of clients and a write ratio.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub system: String,
    pub clients: u32,
    pub write_ratio: f64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

pub fn quantiles_us(h: &Histogram<u64>) -> (f64, f64) {
    (
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
    )
}

/// What etcd is measured with.
pub struct EtcdWorkload<'a> {
    pub keys: &'a [Vec<u8>],
    pub value_bytes: usize,
    pub seconds_per_point: f64,
}

/// etcd at every point; `Err` says why it could not be measured (not installed, did not start).
pub fn etcd_rows(o: &EtcdWorkload<'_>, points: &[(u32, f64)], bar: &ProgressBar) -> Result<Vec<Row>, String> {
    if std::process::Command::new("etcd")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("etcd is not installed (apt-get install etcd-server)".into());
    }
    let dir = std::env::temp_dir().join(format!("onepipe-etcd-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| {
        let mut etcd = TestEtcd::start(&dir, "http", &[])?;
        let connect = etcd.connect();
        let client = Client::new(&connect, std::time::Duration::from_secs(5)).map_err(|e| e.to_string())?;
        etcd.wait_until_up(&client)?;
        bar.set_message("etcd: loading keys");
        load(&connect, o.keys, o.value_bytes)?;
        let mut rows = Vec::new();
        for &(clients, write_ratio) in points {
            bar.set_message(format!("etcd {clients} clients, {}% writes", write_ratio * 100.0));
            rows.push(etcd_point(&connect, o.keys, clients, write_ratio, o)?);
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
    o: &EtcdWorkload<'_>,
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
