//! What both examples need to join a running udp fabric.

use clap::Args;
use onepipe::api::Process;
use onepipe::udp::{UdpOptions, join};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;

#[derive(Args)]
pub struct JoinArgs {
    /// The topology file the switches run (`onepipe up FILE`)
    #[arg(long)]
    pub topology: std::path::PathBuf,
    /// This process's id, 0 up to the topology's process count
    #[arg(long)]
    pub process: u32,
    /// Must match the switches' (`onepipe up --beacon-interval-us`)
    #[arg(long, default_value_t = 500)]
    pub beacon_interval_us: u64,
    #[arg(long, default_value_t = 1)]
    pub processes_per_host: u32,
    /// Run this process's clock ahead (or, negative, behind) by this much: skew to test
    /// with, which `onepipe inspect` measures
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub clock_offset_us: i64,
    /// The fabric's key file, as the switches were given it [default: as `onepipe up` finds
    /// it: $ONEPIPE_KEY_FILE, the topology's `key_file`, or the key made for the topology]
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Join a fabric that runs without authentication (`onepipe up --insecure-no-auth`)
    #[arg(long, conflicts_with = "key_file")]
    pub insecure_no_auth: bool,
    /// Must match the switches' (`onepipe up --time-ahead-max-ms`): a barrier or timestamp
    /// further ahead of this process's clock, beyond the promise lead, is refused
    #[arg(long, value_name = "MS")]
    pub time_ahead_max_ms: Option<u64>,
}

/// Joins the fabric as `args.process`; the handle leaves when dropped.
pub fn join_fabric(args: &JoinArgs) -> Result<Process, Box<dyn std::error::Error>> {
    let topology = Topology::from_file(&args.topology)?;
    let auth = onepipe::keys::fabric_auth(&topology, args.key_file.as_deref(), args.insecure_no_auth)?;
    let mut options = UdpOptions::new(topology);
    options.udp.auth = auth;
    options.beacon_interval = Duration::from_micros(args.beacon_interval_us);
    options.processes_per_host = args.processes_per_host;
    options.clock_offset_ns = args.clock_offset_us * 1_000;
    if let Some(ms) = args.time_ahead_max_ms {
        // Past half the 48-bit wire clock's range, ahead cannot be told from behind.
        if ms > (1 << 47) / 1_000_000 {
            return Err(format!("--time-ahead-max-ms {ms} is past half the wire clock's range").into());
        }
        options.time_ahead_max = Duration::from_millis(ms);
    }
    Ok(join(&options, args.process)?.0)
}
