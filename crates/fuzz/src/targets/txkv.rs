//! The transactional store's state machines (crates/txkv) fed hostile payloads: a 1Pipe
//! replica (ordered, or unordered as the non-transactional baseline runs it), a 1Pipe client,
//! an OCC replica (the primary or a backup) and an OCC client, one drawn per input, each given
//! a sequence of steps: a message (well formed with fields from small sets, so that
//! transactions, attempts, shards and keys often match what the machine has in flight; for a
//! client, answers built from the requests it sent; damaged; or raw bytes), a commit barrier, a
//! timer, a submission, a snapshot, a send failure, a process failure. After every step the
//! machine's `invariants()` hold and everything it sends decodes.
//!
//! The runtime's side of the contract is kept: deliveries come in 1Pipe's order for their
//! service, and the commit barrier never goes back nor passes a reliable message still to come.
//! Only payloads are hostile.

mod clients;
mod servers;

use super::STEPS_MAX;
use crate::frames::Draw;
use bytes::Bytes;
use onepipe_txkv::occ::{OccClientConfig, OccServerConfig};
use onepipe_txkv::{Client, ClientConfig, Layout, OccClient, OccServer, Op, Ordering, Server, ServerConfig};

/// 2 shards x 2 replicas: server processes 0 to 3.
const SHARDS: u32 = 2;
const REPLICAS: u32 = 2;
/// The client under test; process 5 is another client.
const CLIENT: u32 = 4;
/// Keys of both shards, an empty one, and one no small set holds.
const KEYS: [&[u8]; 6] = [b"a", b"b", b"c", b"key:1", b"", b"counter"];

fn layout() -> Layout {
    Layout::new(SHARDS, REPLICAS).expect("a valid layout")
}

pub fn run(data: &[u8]) {
    let mut d = Draw::new(data);
    let shard = d.below(SHARDS as usize) as u16;
    let replica = d.below(REPLICAS as usize) as u16;
    match d.u8() % 5 {
        0 => servers::onepipe(
            &mut d,
            Server::new(server_config(shard, replica, Ordering::OnePipe)),
        ),
        1 => servers::onepipe(
            &mut d,
            Server::new(server_config(shard, replica, Ordering::Unordered)),
        ),
        2 => {
            let client = Client::new(client_config(&mut d));
            clients::onepipe(&mut d, client)
        }
        3 => servers::occ(&mut d, OccServer::new(occ_server_config(shard, replica))),
        _ => {
            let client = OccClient::new(occ_client_config(&mut d));
            clients::occ(&mut d, client)
        }
    }
}

/// Short timeouts and a few attempts, so that retries and give-ups happen within an input.
fn client_config(d: &mut Draw) -> ClientConfig {
    ClientConfig {
        window: 1 + d.below(3),
        timeout_ns: TIMEOUT_NS,
        attempts_max: 1 + d.below(4) as u32,
        best_effort_only: d.u8() % 4 == 0,
        ..ClientConfig::new(CLIENT, layout())
    }
}

fn occ_client_config(d: &mut Draw) -> OccClientConfig {
    OccClientConfig {
        window: 1 + d.below(3),
        timeout_ns: TIMEOUT_NS,
        attempts_max: 1 + d.below(4) as u32,
        aborts_max: 1 + d.below(4) as u32,
        backoff_base_ns: 1_000,
        backoff_max_ns: 8_000,
        ..OccClientConfig::new(CLIENT, layout())
    }
}

/// Small bounds, so that an input reaches them.
fn server_config(shard: u16, replica: u16, ordering: Ordering) -> ServerConfig {
    ServerConfig {
        remembered_per_client: 4,
        ..ServerConfig::new(shard, replica, ordering)
    }
}

fn occ_server_config(shard: u16, replica: u16) -> OccServerConfig {
    OccServerConfig {
        remembered_per_client: 4,
        parked_commits_max: 4,
        ..OccServerConfig::new(shard, replica)
    }
}

const TIMEOUT_NS: u64 = 100_000;

/// Moves a client's or server's clock on: by nothing, by a little, or past a timeout.
fn advance_ns(d: &mut Draw, now_ns: u64) -> u64 {
    let step_ns = match d.u8() % 8 {
        0..=2 => 0,
        3 => d.u32() as u64 % (4 * TIMEOUT_NS),
        _ => d.u16() as u64 % 20_000,
    };
    now_ns + step_ns
}

/// Who sent a message: the client, another client, a server, or anyone.
fn sender(d: &mut Draw) -> u32 {
    match d.u8() % 8 {
        0..=3 => CLIENT,
        4 => CLIENT + 1,
        5 | 6 => d.below((SHARDS * REPLICAS) as usize) as u32,
        _ => d.number(8) as u32,
    }
}

fn key(d: &mut Draw) -> Bytes {
    match d.u8() % 16 {
        0 => Bytes::from(d.bytes(8)),
        _ => Bytes::from_static(KEYS[d.below(KEYS.len())]),
    }
}

/// A value: often a decimal integer (INCRBY's input), sometimes one at i64's edge.
fn value(d: &mut Draw) -> Bytes {
    match d.u8() % 4 {
        0 => Bytes::from(d.bytes(12)),
        1 => Bytes::from(["9223372036854775807", "-9223372036854775808", "x"][d.below(3)]),
        _ => Bytes::from((d.u8() as i64 - 128).to_string()),
    }
}

fn op(d: &mut Draw) -> Op {
    let key = key(d);
    match d.u8() % 4 {
        0 => Op::Get { key },
        1 => Op::Put { key, value: value(d) },
        2 => Op::Del { key },
        _ => Op::IncrBy {
            key,
            delta: match d.u8() % 8 {
                0 => [i64::MAX, i64::MIN, -1][d.below(3)],
                _ => d.u8() as i64 - 128,
            },
        },
    }
}

/// Up to `max` operations, each with its index in a transaction: the next one mostly, any
/// sometimes.
fn indexed_ops(d: &mut Draw, max: usize) -> Vec<(u16, Op)> {
    let n = d.below(max + 1);
    (0..n)
        .map(|i| {
            let index = if d.u8() % 8 == 0 {
                d.number(8) as u16
            } else {
                i as u16
            };
            (index, op(d))
        })
        .collect()
}
