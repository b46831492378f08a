//! Joins a running udp fabric as one process and prints every message it delivers, in the
//! total order, until Ctrl-C: `timestamp_ns source message_id payload`.
//!
//! ```text
//! cargo run --release --example print -- --topology topologies/two-racks.toml --process 1
//! ```

#![allow(clippy::disallowed_methods)] // an application: it waits on real time

use clap::Parser;
use onepipe::udp::{UdpOptions, join};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    topology: std::path::PathBuf,
    #[arg(long)]
    process: u32,
    /// Deliver reliable messages instead of best-effort ones
    #[arg(long)]
    reliable: bool,
    /// Must match the switches' (`onepipe up --beacon-interval-us`)
    #[arg(long, default_value_t = 500)]
    beacon_interval_us: u64,
    #[arg(long, default_value_t = 1)]
    processes_per_host: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut options = UdpOptions::new(Topology::from_file(&args.topology)?);
    options.beacon_interval = Duration::from_micros(args.beacon_interval_us);
    options.processes_per_host = args.processes_per_host;
    let (mut me, _counters) = join(&options, args.process)?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))?;
    let mut out = std::io::stdout().lock();
    let wait = std::time::Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let d = if args.reliable {
            me.recv_reliable_timeout(wait)
        } else {
            me.recv_timeout(wait)
        };
        if let Some(d) = d {
            writeln!(
                out,
                "{} {} {} {}",
                d.ts.as_nanos(),
                d.src,
                d.msg_id,
                String::from_utf8_lossy(&d.payload)
            )?;
        }
    }
    Ok(())
}
