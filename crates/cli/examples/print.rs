//! Joins a running udp fabric as one process and prints every message it delivers, in the
//! total order, until Ctrl-C: `timestamp_ns source message_id payload`.
//!
//! ```text
//! cargo run --release --example print -- --topology topologies/two-racks.toml --process 1
//! ```

#![allow(clippy::disallowed_methods)] // an application: it waits on real time

mod common;

use clap::Parser;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    join: common::JoinArgs,
    /// Deliver reliable messages instead of best-effort ones
    #[arg(long)]
    reliable: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut me = common::join_fabric(&args.join)?;
    // With a controller in the topology (docs/udp.md), failed processes are announced here.
    me.on_process_failure(|p, ts| eprintln!("print: process {p} failed (failure timestamp {ts})"));
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))?;
    let mut out = std::io::stdout().lock();
    let wait = std::time::Duration::from_millis(100);
    let mut lost = false;
    while !stop.load(Ordering::Relaxed) {
        // Say when the fabric goes silent, and when it comes back, rather than wait quietly.
        let fabric = me.check_fabric();
        match (&fabric, lost) {
            (Err(e), false) => eprintln!("print: {e}"),
            (Ok(()), true) => eprintln!("print: the fabric answers again"),
            _ => {}
        }
        lost = fabric.is_err();
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
