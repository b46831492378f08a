//! The store on the inproc runtime (`onepipe::embed`): transfers between accounts, which keep
//! the sum of all balances at zero, run concurrently with read-only transactions that read
//! every account. Any read that is not serializable (a transfer seen half done) shows a sum
//! other than zero.

#![allow(clippy::disallowed_methods)] // the test waits on real time for the runtime

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use onepipe::Topology;
use onepipe::embed::{EmbedOptions, Embedded};
use onepipe_txkv::run::{ClientApp, ServerApp, StoreProcess, TxnSource};
use onepipe_txkv::{
    Client, ClientConfig, Completion, Layout, Op, OpResult, Ordering, Outcome, Server, ServerConfig,
    ServerEngine, Txn,
};

const ACCOUNTS: u64 = 8;

#[derive(Default)]
struct Tally {
    transfers: u64,
    audits: u64,
    bad_sums: Vec<i64>,
    not_committed: u64,
    /// Sums of the balances in each snapshot taken, and the snapshot errors.
    snapshot_sums: Vec<i64>,
    snapshot_errors: Vec<String>,
}

struct Transfers {
    client: u64,
    n: u64,
    left: u64,
    snapshots_left: u32,
    snapshot_out: bool,
    tally: Arc<Mutex<Tally>>,
}

fn account(i: u64) -> Bytes {
    Bytes::from(format!("acct:{i}"))
}

impl TxnSource for Transfers {
    fn next(&mut self, _now_ns: u64) -> Option<Txn> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.n += 1;
        let x = self.n.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.client;
        if self.n % 2 == 0 {
            let (a, b) = (x % ACCOUNTS, (x / ACCOUNTS) % ACCOUNTS);
            let d = (x % 100) as i64 + 1;
            return Some(Txn::new(vec![
                Op::IncrBy {
                    key: account(a),
                    delta: d,
                },
                Op::IncrBy {
                    key: account(b),
                    delta: -d,
                },
            ]));
        }
        Some(Txn::new(
            (0..ACCOUNTS).map(|i| Op::Get { key: account(i) }).collect(),
        ))
    }

    fn submitted(&mut self, _id: u64, _txn: Txn) {}

    fn wants_snapshot(&mut self) -> bool {
        // One at a time, spread over the run: every tenth transaction.
        let due = !self.snapshot_out && self.snapshots_left > 0 && self.n % 10 == 0;
        if due {
            self.snapshot_out = true;
            self.snapshots_left -= 1;
        }
        due
    }

    fn snapshot_done(&mut self, result: onepipe_txkv::SnapshotResult) {
        self.snapshot_out = false;
        let mut t = self.tally.lock().unwrap();
        match result.outcome {
            Ok((_, pairs)) => t.snapshot_sums.push(
                pairs
                    .iter()
                    .map(|(_, v)| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap())
                    .sum(),
            ),
            Err(e) => t.snapshot_errors.push(e),
        }
    }

    fn completed(&mut self, c: Completion) {
        let mut t = self.tally.lock().unwrap();
        let Outcome::Committed { results, .. } = c.outcome else {
            t.not_committed += 1;
            return;
        };
        if !matches!(results[0], OpResult::Value(_)) {
            t.transfers += 1;
            return;
        }
        t.audits += 1;
        let sum: i64 = results
            .iter()
            .map(|r| match r {
                OpResult::Value(Some(v)) => std::str::from_utf8(v).unwrap().parse::<i64>().unwrap(),
                _ => 0,
            })
            .sum();
        if sum != 0 {
            t.bad_sums.push(sum);
        }
    }
}

type App = StoreProcess<Server, Client, Transfers>;

#[test]
fn transfers_keep_the_sum_in_audits_and_snapshots_and_replicas_agree() {
    let layout = Layout::new(2, 3).unwrap();
    let hosts = 8;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let per_client = 300;
    let apps: Vec<App> = (0..hosts as u32)
        .map(|p| match layout.role_of(p) {
            Some((s, r)) => StoreProcess::Server(ServerApp::new(Server::new(ServerConfig::new(
                s as u16,
                r as u16,
                Ordering::OnePipe,
            )))),
            None => {
                let mut c = ClientConfig::new(p, layout);
                c.window = 4;
                StoreProcess::Client(ClientApp::new(
                    Client::new(c),
                    Transfers {
                        client: u64::from(p),
                        n: 0,
                        left: per_client,
                        snapshots_left: 10,
                        snapshot_out: false,
                        tally: tally.clone(),
                    },
                ))
            }
        })
        .collect();
    let options = EmbedOptions {
        topology: Topology::single_switch(hosts).unwrap(),
        ..EmbedOptions::default()
    };
    let system = Embedded::start(&options, apps).unwrap();
    let clients = u64::from(hosts as u32 - layout.servers());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let t = tally.lock().unwrap();
        let snapshots = (t.snapshot_sums.len() + t.snapshot_errors.len()) as u64;
        if t.transfers + t.audits + t.not_committed >= clients * per_client && snapshots >= clients * 10 {
            break;
        }
        drop(t);
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not finish in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let apps = system.stop();
    let t = tally.lock().unwrap();
    assert_eq!(t.not_committed, 0);
    assert!(
        t.audits > 100 && t.transfers > 100,
        "{} audits {} transfers",
        t.audits,
        t.transfers
    );
    assert!(t.bad_sums.is_empty(), "audits saw sums {:?}", t.bad_sums);
    assert!(t.snapshot_errors.is_empty(), "{:?}", t.snapshot_errors);
    assert!(
        t.snapshot_sums.iter().all(|&s| s == 0),
        "snapshots are not consistent cuts: sums {:?}",
        t.snapshot_sums
    );
    let digests: Vec<(u32, u64)> = apps
        .iter()
        .filter_map(|a| match a {
            StoreProcess::Server(s) => Some((u32::from(s.engine.config().shard), s.engine.digest())),
            StoreProcess::Client(_) => None,
        })
        .collect();
    for shard in 0..layout.shards {
        let of: Vec<u64> = digests.iter().filter(|d| d.0 == shard).map(|d| d.1).collect();
        assert!(
            of.windows(2).all(|w| w[0] == w[1]),
            "replicas of shard {shard} differ: {of:?}"
        );
    }
}
