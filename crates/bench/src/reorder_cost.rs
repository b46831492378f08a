//! Paper Fig. 11 on this machine's CPU: the receiver's reorder path (the real
//! [`Endpoint::handle_frame`] and delivery) fed a 100 Gbps stream of small messages while the
//! barrier trails their timestamps by a reordering delay, as it does when some link of the
//! fabric is that much slower. The buffer then holds the link's rate times the delay (the
//! bandwidth-delay product), and every insertion and delivery works on a heap that large: the
//! paper's throughput falls from 5.5 to 4.3 M msg/s as the delay goes from 1 us to 1 ms.
//!
//! Virtual time: message `i` is due at `i` times its frame's serialization time at
//! `link_gbps`; `senders` senders take turns, each with a clock behind by its own offset (up to
//! the clock skew the paper measured, and never more than the delay), so their messages reach
//! the receiver out of timestamp order. Every frame carries the barrier, `delay` behind the
//! newest send. What is timed is this thread's CPU in the receive path only.

use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
use onepipe_wire::packet::{HEADER_LEN, Opcode, Packet, Repr};
use onepipe_wire::{Instant, Timestamp48};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct ReorderCostOptions {
    /// Reordering delays, in us.
    pub delays_us: Vec<f64>,
    /// Messages per point (at least four buffers' worth are sent whatever this says).
    pub messages: u64,
    pub message_bytes: usize,
    pub senders: u32,
    pub link_gbps: f64,
}

impl Default for ReorderCostOptions {
    fn default() -> Self {
        ReorderCostOptions {
            delays_us: vec![1.0, 10.0, 100.0, 1000.0],
            messages: 2_000_000,
            message_bytes: 64,
            senders: 8,
            link_gbps: 100.0,
        }
    }
}

/// One delay's measurement.
#[derive(Clone, Debug, Serialize)]
pub struct ReorderCostRow {
    pub delay_us: f64,
    pub messages: u64,
    pub delivered: u64,
    /// Messages delivered per second of this thread's CPU (wall time where the kernel does not
    /// say: see `cpu_measured`).
    pub throughput_msgs_per_cpu_s: f64,
    pub cpu_s: f64,
    pub wall_s: f64,
    pub cpu_measured: bool,
    pub reorder_bytes_peak: usize,
    pub reorder_messages_peak: usize,
    /// The link's bandwidth-delay product (the paper's memory column).
    pub link_bdp_bytes: f64,
    /// Messages refused as late or for a full buffer: none, if the setup is right.
    pub late: u64,
    pub dropped_full: u64,
}

/// Largest delay this measures: the buffer is the link's rate times it (125 MB at 10 ms).
pub const DELAY_US_MAX: f64 = 10_000.0;

/// The paper's clock skew: senders' clocks are behind by up to this (or the delay, if less).
const SKEW_NS_MAX: u64 = 600;

/// Measures every delay.
pub fn reorder_cost(
    options: &ReorderCostOptions,
    progress: &mut dyn FnMut(&ReorderCostRow),
) -> Result<Vec<ReorderCostRow>, String> {
    let o = options;
    if o.senders == 0 || !(o.link_gbps > 0.0 && o.link_gbps.is_finite()) || o.messages == 0 {
        return Err("senders, messages and link rate must be positive".into());
    }
    if !(8..=1400).contains(&o.message_bytes) {
        return Err("--message-bytes must be 8..=1400 (one frame)".into());
    }
    let mut rows = Vec::new();
    for &delay_us in &o.delays_us {
        if !(delay_us > 0.0 && delay_us <= DELAY_US_MAX) {
            return Err(format!("a delay of {delay_us} us is not in (0, {DELAY_US_MAX}]"));
        }
        let row = measure(o, delay_us);
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// One data frame per sender, whose timestamp, barrier and id are rewritten per message.
fn templates(senders: u32, message_bytes: usize) -> Vec<Vec<u8>> {
    (1..=senders)
        .map(|src| {
            let repr = Repr {
                opcode: Opcode::Data,
                end_of_message: true,
                ecn: false,
                ack: false,
                sack: false,
                recall: false,
                msg_ts: Timestamp48::new(1),
                barrier: Timestamp48::new(1),
                commit_barrier: Timestamp48::new(1),
                psn: 0,
                src,
                dst: 0,
                msg_id: 0,
                frag_index: 0,
                frag_count: 1,
                link_id: 0,
                payload_len: message_bytes as u16,
            };
            repr.to_vec()
        })
        .collect()
}

fn measure(o: &ReorderCostOptions, delay_us: f64) -> ReorderCostRow {
    let delay_ns = (delay_us * 1e3).round() as u64;
    let frame_ns = ((o.message_bytes + HEADER_LEN) * 8) as f64 / o.link_gbps;
    let buffered = (delay_ns as f64 / frame_ns).ceil() as u64 + o.senders as u64;
    let messages = o.messages.max(4 * buffered);
    let mut config = EndpointConfig::new(0, o.senders + 1, 0);
    let entry_bytes = o.message_bytes + onepipe_proto::reorder::ENTRY_OVERHEAD_BYTES;
    config.reorder_bytes_max = (2 * buffered as usize * entry_bytes).max(1 << 20);
    // Far from the wire clock's zero, which means "nothing known yet".
    let start_ns = 1_000_000_000;
    let mut endpoint = Endpoint::new(config, Instant::from_nanos(start_ns));
    let mut frames = templates(o.senders, o.message_bytes);
    let skew_ns = SKEW_NS_MAX.min(delay_ns);
    let behind_ns: Vec<u64> = (0..o.senders as u64)
        .map(|s| skew_ns * s / o.senders as u64)
        .collect();
    let mut delivered = 0u64;
    let cpu_before = thread_cpu_ns();
    #[allow(clippy::disallowed_methods)] // a benchmark: the wall time, where CPU time is not to be had
    let wall = std::time::Instant::now();
    for i in 0..messages {
        let now_ns = start_ns + delay_ns + (i as f64 * frame_ns) as u64;
        let s = (i % o.senders as u64) as usize;
        let frame = &mut frames[s];
        let mut p = Packet::new_unchecked(&mut frame[..]);
        p.set_msg_ts(Timestamp48::new(now_ns - behind_ns[s]));
        p.set_barrier(Timestamp48::new(now_ns - delay_ns));
        p.set_commit_barrier(Timestamp48::new(now_ns - delay_ns));
        p.set_msg_id(i);
        let now = Instant::from_nanos(now_ns);
        endpoint.handle_frame(now, frame).expect("a well-formed frame");
        while endpoint.poll_deliver_with(|_, _, _, _| ()).is_some() {
            delivered += 1;
        }
    }
    // The barrier passes everything sent: the rest is delivered.
    let end_ns = start_ns + 2 * delay_ns + (messages as f64 * frame_ns) as u64;
    let beacon = Repr::beacon(Timestamp48::new(end_ns), Timestamp48::new(end_ns), 0).to_vec();
    endpoint
        .handle_frame(Instant::from_nanos(end_ns), &beacon)
        .expect("a well-formed beacon");
    while endpoint.poll_deliver_with(|_, _, _, _| ()).is_some() {
        delivered += 1;
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let cpu_s = match (cpu_before, thread_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9),
        _ => None,
    };
    let seconds = cpu_s.unwrap_or(wall_s).max(1e-9);
    let counters = endpoint.counters();
    ReorderCostRow {
        delay_us,
        messages,
        delivered,
        throughput_msgs_per_cpu_s: delivered as f64 / seconds,
        cpu_s: cpu_s.unwrap_or(wall_s),
        wall_s,
        cpu_measured: cpu_s.is_some(),
        reorder_bytes_peak: endpoint.reorder().bytes_peak(),
        reorder_messages_peak: endpoint.reorder().messages_peak(),
        link_bdp_bytes: o.link_gbps * 1e9 / 8.0 * delay_us / 1e6,
        late: counters.late,
        dropped_full: counters.reorder_full,
    }
}

/// This thread's CPU time so far, from the kernel's scheduler statistics (Linux).
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
