//! Joins a running udp fabric (`onepipe up FILE`) as one process and broadcasts numbered
//! messages to every process, itself included, then reports what it delivered.
//!
//! ```text
//! onepipe up topologies/two-racks.toml &
//! cargo run --release --example print -- --topology topologies/two-racks.toml --process 1 &
//! cargo run --release --example broadcast -- --topology topologies/two-racks.toml --process 0 --count 1000
//! ```
//! Every process of the topology should join: one that never does holds best-effort delivery
//! back until its switch declares it dead (`--dead-after-intervals` intervals). With a controller
//! in the topology (docs/udp.md), processes it declares failed are left out of later
//! broadcasts.

#![allow(clippy::disallowed_methods)] // an application: it paces on real time

mod common;

use clap::Parser;
use onepipe::SendError;
use std::sync::{Arc, Mutex};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    join: common::JoinArgs,
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Broadcasts per second (0: as fast as the send buffer takes them)
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Use reliable 1Pipe
    #[arg(long)]
    reliable: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut me = common::join_fabric(&args.join)?;
    let failed = Arc::new(Mutex::new(Vec::new()));
    let f = failed.clone();
    me.on_process_failure(move |p, ts| {
        eprintln!("broadcast: process {p} failed (failure timestamp {ts})");
        f.lock().unwrap().push(p);
    });
    // Messages the fabric could not deliver (reliable: after the retry budget), by reason.
    let failures = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
    let fs = failures.clone();
    me.on_send_failure(move |f| {
        *fs.lock()
            .unwrap()
            .entry(format!("{:?} to {}", f.reason, f.dst))
            .or_default() += 1;
    });
    let mut everyone: Vec<u32> = (0..me.process_count()).collect();
    let gap = (args.rate > 0).then(|| std::time::Duration::from_secs_f64(1.0 / args.rate as f64));
    let start = std::time::Instant::now();
    let mut delivered = 0u64;
    for i in 0..args.count {
        everyone.retain(|p| !failed.lock().unwrap().contains(p));
        let text = format!("{} says {i}", args.join.process);
        let scatter: Vec<(u32, &[u8])> = everyone.iter().map(|&d| (d, text.as_bytes())).collect();
        loop {
            let sent = if args.reliable {
                me.send_reliable(&scatter)
            } else {
                me.send_unreliable(&scatter)
            };
            match sent {
                Ok(_) => break,
                // A full buffer drains as the fabric carries it away; unless the fabric is gone.
                Err(SendError::BufferFull { .. }) => {
                    me.check_fabric()?;
                    std::thread::yield_now()
                }
                Err(e) => return Err(e.into()),
            }
        }
        while (if args.reliable {
            me.recv_reliable()
        } else {
            me.recv()
        })
        .is_some()
        {
            delivered += 1;
        }
        if let Some(gap) = gap {
            let due = start + gap * (i as u32 + 1);
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        }
    }
    // Give the last messages a moment to come back around.
    let sending = start.elapsed();
    // Longer than a departed process holds its ToR back (the default --dead-after-intervals).
    let wait = std::time::Duration::from_secs(2);
    while let Some(_d) = if args.reliable {
        me.recv_reliable_timeout(wait)
    } else {
        me.recv_timeout(wait)
    } {
        delivered += 1;
    }
    println!(
        "process {} sent {} broadcasts in {:.2} s and delivered {delivered} messages",
        args.join.process,
        args.count,
        sending.as_secs_f64()
    );
    for (what, n) in failures.lock().unwrap().iter() {
        println!(
            "process {} could not deliver {n} messages: {what}",
            args.join.process
        );
    }
    Ok(())
}
