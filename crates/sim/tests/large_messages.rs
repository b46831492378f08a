//! Reliable messages larger than a window (issue: fragmentation up to at least 1 MiB). A
//! scattering waits for credits until each message fits its connection's window; one larger
//! than the congestion window (64 packets at first, less after a timeout cut it) used to wait
//! forever, unseen by the checkers because it never took a timestamp.

use onepipe_fabric::Topology;
use onepipe_sim::{SimConfig, run};
use onepipe_wire::Duration;

fn deliver_all(message_bytes: usize, seed: u64) {
    let config = SimConfig {
        seed,
        topology: Topology::single_switch(4).unwrap(),
        gap: Duration::from_micros(2_000),
        message_bytes_min: message_bytes,
        message_bytes_max: message_bytes,
        reliable: true,
        send_for: Duration::from_micros(4_000),
        drain: Duration::from_micros(20_000),
        ..SimConfig::default()
    };
    let r = run(&config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    assert_eq!(r.scatterings_refused, 0);
    assert!(r.scatterings_sent > 0);
    // Broadcasts to 4 processes: every one delivered by each.
    assert_eq!(
        r.delivered,
        4 * r.scatterings_sent,
        "{message_bytes}-byte messages"
    );
}

#[test]
fn messages_larger_than_the_congestion_window_are_delivered() {
    deliver_all(200 * 1024, 1); // ~140 packets against a first window of 64
}

#[test]
fn one_mebibyte_messages_are_delivered() {
    deliver_all(1 << 20, 2); // ~750 packets, more than the default receive window of 256
}
