//! `onepipe bench udp-limit`: the raw loopback UDP rate of this machine
//! ([`onepipe_bench::udp_limit`]), parsed and printed.

use crate::flags::{JsonFlag, MessageBytesFlag};
use clap::Args;
use onepipe_bench::udp_limit::{LimitReport, measure};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct UdpLimitArgs {
    /// Length of each of the two measurements
    #[arg(long, default_value_t = 1.0, value_parser = crate::bounds::seconds())]
    seconds: f64,
    /// Size of a full datagram, as the udp runtime packs them
    #[arg(long, default_value_t = 8_972, value_parser = crate::bounds::int::<usize>(64..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT as u64))]
    datagram_bytes: usize,
    #[command(flatten)]
    msg: MessageBytesFlag,
    #[command(flatten)]
    out: JsonFlag,
}

pub fn print(l: &LimitReport) {
    println!(
        "  raw loopback udp, one pair: {:.3} M datagrams/s of {} bytes ({:.1}% lost); {:.3} M datagrams/s of {} bytes = {:.2} M msg/s packed ({} per datagram)",
        l.datagrams_per_s / 1e6,
        l.message_bytes,
        100.0 * l.datagram_loss,
        l.packed_datagrams_per_s / 1e6,
        l.datagram_bytes,
        l.packed_msgs_per_s / 1e6,
        l.messages_per_datagram
    );
}

pub fn run(args: UdpLimitArgs) -> Result<ExitCode, String> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err("--seconds must be positive".into());
    }
    if !(1..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT).contains(&args.msg.message_bytes)
        || !(64..=onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT).contains(&args.datagram_bytes)
    {
        return Err("datagram sizes must be between 64 (1 for --message-bytes) and 65507".into());
    }
    let report = measure(
        Duration::from_secs_f64(args.seconds),
        args.msg.message_bytes,
        args.datagram_bytes,
    )
    .map_err(|e| format!("udp: {e}"))?;
    if args.out.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        print(&report);
    }
    Ok(ExitCode::SUCCESS)
}
