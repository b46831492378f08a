//! `onepipe kv bench`: redis-benchmark's SET and GET against the store's Redis front (a cluster
//! of its own in this process) and against a real Redis server (Debian's redis-server) on the
//! same machine, with pipelining 1 and 16, so that the front is judged as a Redis user would.

#![allow(clippy::disallowed_methods)] // starts processes and waits on real time

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use onepipe_kv::{ServeConfig, serve};
use onepipe_txkv::front::{Cluster, ClusterOptions, TxStore};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct RedisBenchOptions {
    pub cluster: ClusterOptions,
    /// Requests per test (redis-benchmark's `-n`).
    pub requests: u32,
    /// Connections (`-c`).
    pub connections: u32,
    /// Pipelining depths (`-P`).
    pub pipelines: Vec<u32>,
    /// Do not measure redis-server even if it is installed.
    pub skip_redis: bool,
}

impl Default for RedisBenchOptions {
    fn default() -> RedisBenchOptions {
        RedisBenchOptions {
            cluster: ClusterOptions::default(),
            requests: 100_000,
            connections: 50,
            pipelines: vec![1, 16],
            skip_redis: false,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RedisBenchRow {
    /// `1pipe-txkv` or `redis-server`.
    pub server: &'static str,
    pub test: String,
    pub pipeline: u32,
    pub requests_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RedisBenchReport {
    pub requests: u32,
    pub connections: u32,
    pub rows: Vec<RedisBenchRow>,
    /// Why redis-server was not measured, if it was not.
    pub redis_skipped: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RedisBenchError {
    #[error("redis-benchmark is not installed (Debian: apt-get install redis-tools)")]
    NoBenchmark,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the store did not start: {0}")]
    Cluster(String),
    #[error("redis-benchmark against {server}: {why}")]
    Benchmark { server: &'static str, why: String },
}

pub fn run(
    options: &RedisBenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<RedisBenchReport, RedisBenchError> {
    if !installed("redis-benchmark") {
        return Err(RedisBenchError::NoBenchmark);
    }
    let mut rows = Vec::new();
    {
        let cluster =
            Cluster::start(&options.cluster).map_err(|e| RedisBenchError::Cluster(e.to_string()))?;
        let store = TxStore::new(cluster.mailboxes(), Duration::from_secs(5), Vec::new());
        let server = serve(
            TcpListener::bind("127.0.0.1:0")?,
            Arc::new(store),
            ServeConfig::default(),
        )?;
        for &p in &options.pipelines {
            progress(&format!("1pipe-txkv -P {p}"));
            rows.extend(benchmark("1pipe-txkv", server.local_addr(), options, p)?);
        }
        server.shutdown();
    }
    let redis_skipped = if options.skip_redis {
        Some("--skip-redis".to_string())
    } else if !installed("redis-server") {
        Some("redis-server is not installed (Debian: apt-get install redis-server)".to_string())
    } else {
        let redis = RedisServer::start()?;
        for &p in &options.pipelines {
            progress(&format!("redis-server -P {p}"));
            rows.extend(benchmark("redis-server", redis.addr, options, p)?);
        }
        None
    };
    Ok(RedisBenchReport {
        requests: options.requests,
        connections: options.connections,
        rows,
        redis_skipped,
    })
}

fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// redis-benchmark `-t set,get --csv` against `addr`, one row per test.
fn benchmark(
    server: &'static str,
    addr: SocketAddr,
    options: &RedisBenchOptions,
    pipeline: u32,
) -> Result<Vec<RedisBenchRow>, RedisBenchError> {
    let out = Command::new("redis-benchmark")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-t", "set,get", "--csv"])
        .args(["-n", &options.requests.to_string()])
        .args(["-c", &options.connections.to_string()])
        .args(["-P", &pipeline.to_string()])
        .output()?;
    let fail = |why: String| RedisBenchError::Benchmark { server, why };
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<RedisBenchRow> = text
        .lines()
        .filter_map(|line| parse_csv_row(server, pipeline, line))
        .collect();
    if rows.is_empty() {
        return Err(fail(format!("no result line in {text:?}")));
    }
    Ok(rows)
}

/// One line of `redis-benchmark --csv`: `"SET","28248.59","1.2","0.1","1.167","2.1","3.0","9.9"`
/// (test, rps, avg, min, p50, p95, p99, max); the header and anything else give `None`.
pub fn parse_csv_row(server: &'static str, pipeline: u32, line: &str) -> Option<RedisBenchRow> {
    let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
    if fields.len() < 7 {
        return None;
    }
    let number = |i: usize| fields[i].parse::<f64>().ok();
    Some(RedisBenchRow {
        server,
        test: fields[0].to_string(),
        pipeline,
        requests_per_s: number(1)?,
        p50_ms: number(4)?,
        p99_ms: number(6)?,
    })
}

/// A redis-server on a free loopback port, without persistence; killed when dropped.
struct RedisServer {
    child: Child,
    addr: SocketAddr,
}

impl RedisServer {
    fn start() -> Result<RedisServer, RedisBenchError> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = RedisServer { child, addr };
        for _ in 0..100 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(RedisBenchError::Benchmark {
            server: "redis-server",
            why: format!("it did not listen on {addr} within 5 s"),
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_parse_and_the_header_does_not() {
        let header = r#""test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms""#;
        assert!(parse_csv_row("x", 1, header).is_none());
        let row = parse_csv_row(
            "x",
            16,
            r#""GET","23584.91","0.756","0.104","0.655","1.335","4.447","8.511""#,
        )
        .unwrap();
        assert_eq!((row.test.as_str(), row.pipeline), ("GET", 16));
        assert_eq!(
            (row.requests_per_s, row.p50_ms, row.p99_ms),
            (23584.91, 0.655, 4.447)
        );
    }
}
