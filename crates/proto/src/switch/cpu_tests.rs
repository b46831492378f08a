//! The switch-CPU incarnation (paper 6.2.2): forwarding stamps nothing, beacons count after
//! the CPU delay, and the CPU beacons on every link each interval.

use super::*;
use crate::test_packets::{beacon, packet};
use onepipe_fabric::{Topology, routing};

const DELAY_NS: u64 = 500;
const INTERVAL_NS: u64 = 1_000;

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn cpu_switch(ports: usize) -> Switch {
    let wiring = Wiring::new(Topology::single_switch(ports).unwrap(), 1).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(0);
    let config = SwitchConfig {
        beacon_interval: Duration::from_nanos(INTERVAL_NS),
        incarnation: Incarnation::SwitchCpu {
            delay: Duration::from_nanos(DELAY_NS),
        },
        ..SwitchConfig::default()
    };
    Switch::new(0, &wiring, routes, config, t(0))
}

fn pass(s: &mut Switch, now: u64, port: PortId, mut f: Vec<u8>) -> (Route, Vec<u8>) {
    let route = s.classify(t(now), port, &f);
    s.handle_frame(t(now), port, &mut f, route);
    s.invariants();
    (route, f)
}

fn data(src: u32, dst: u32, ts: u64, barrier: u64) -> Vec<u8> {
    packet(Opcode::Data, src, dst, 1, ts, barrier, (0, 1), &[])
}

fn register(s: &Switch, port: PortId) -> Instant {
    s.inputs(Instant::ZERO).find(|r| r.port == port).unwrap().barrier
}

/// Every beacon the switch has for `port` at `now`, as best-effort barriers.
fn beacons_out(s: &mut Switch, now: u64, port: PortId) -> Vec<u64> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while let Some(len) = s.poll_transmit(t(now), port, &mut buf) {
        out.push(Packet::new_checked(&buf[..len]).unwrap().barrier().raw());
    }
    out
}

#[test]
fn the_data_plane_forwards_without_stamping_or_taking_barriers() {
    let mut s = cpu_switch(3);
    let frame = data(0, 2, 300, 300);
    let (route, out) = pass(&mut s, 20, 0, frame.clone());
    assert_eq!(route, Route::Forward(2));
    assert_eq!(out, frame, "a forward-only data plane rewrites nothing");
    assert_eq!(register(&s, 0), t(0), "data does not move the register");
    assert_eq!(s.counters().forwarded, 1);
}

#[test]
fn a_beacon_counts_only_after_the_cpu_delay() {
    let mut s = cpu_switch(3);
    for port in 0..3 {
        pass(&mut s, 100, port, beacon(2_000 + port as u64));
    }
    assert_eq!(s.poll_timeout(), Some(t(100 + DELAY_NS)));
    s.handle_timeout(t(100 + DELAY_NS - 1));
    assert_eq!(register(&s, 1), t(0), "not yet taken");
    s.handle_timeout(t(100 + DELAY_NS));
    assert_eq!(register(&s, 1), t(2_001));
    // The news goes out at once, with the minimum over the inputs.
    assert_eq!(beacons_out(&mut s, 100 + DELAY_NS, 0), vec![2_000]);
    let status = s.cpu_status().unwrap();
    assert_eq!((status.backlog, status.lag_max_ns), (0, DELAY_NS));
}

#[test]
fn the_cpu_beacons_on_every_link_each_interval_busy_or_idle() {
    let mut s = cpu_switch(2);
    s.handle_timeout(t(INTERVAL_NS));
    assert_eq!(beacons_out(&mut s, INTERVAL_NS, 0).len(), 1);
    assert_eq!(beacons_out(&mut s, INTERVAL_NS, 1).len(), 1);
    // Port 1 carries data throughout the next interval: on a chip that would stand for a
    // beacon, here the data tells the receiver nothing.
    for i in 1..10 {
        pass(
            &mut s,
            INTERVAL_NS + i * 100,
            0,
            data(0, 1, INTERVAL_NS + i * 100, 0),
        );
    }
    s.handle_timeout(t(2 * INTERVAL_NS));
    assert_eq!(beacons_out(&mut s, 2 * INTERVAL_NS, 1).len(), 1);
}

#[test]
fn a_cpu_that_falls_behind_drops_beacons_and_counts_them() {
    let mut s = cpu_switch(2);
    let capacity = 8;
    for i in 0..capacity as u64 + 5 {
        pass(&mut s, 10 + i, 0, beacon(10 + i));
    }
    let status = s.cpu_status().unwrap();
    assert_eq!((status.backlog, status.overflow_drops), (capacity, 5));
    // A flooded port does not crowd out another's beacons.
    pass(&mut s, 30, 1, beacon(30));
    assert_eq!(s.cpu_status().unwrap().backlog, capacity + 1);
    s.handle_timeout(t(10_000));
    let status = s.cpu_status().unwrap();
    assert_eq!(status.backlog, 0);
    assert!(status.lag_max_ns >= 10_000 - 10 - capacity as u64, "{status:?}");
    s.invariants();
}

#[test]
fn a_chip_has_no_cpu_agent() {
    let wiring = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(0);
    let s = Switch::new(0, &wiring, routes, SwitchConfig::default(), t(0));
    assert_eq!(s.cpu_status(), None);
}

/// Data coming in on a link, forwarded or waiting for a full output, shows the CPU that the
/// link lives (the data plane's port counters), though only beacons move its register. On the
/// lossless inproc runtime, beacons waiting behind held data had busy links removed as dead.
#[test]
fn data_keeps_a_link_alive_without_moving_its_register() {
    let mut s = cpu_switch(3);
    let dead_after_ns = s.config.dead_after().as_nanos();
    let mut now = 0;
    while now <= 3 * dead_after_ns {
        pass(&mut s, now, 0, data(0, 2, now, now));
        s.handle_stalled(t(now + 1), 1, &data(1, 2, now, now));
        pass(&mut s, now, 2, beacon(now));
        s.handle_timeout(t(now));
        for port in 0..3 {
            beacons_out(&mut s, now, port);
        }
        now += INTERVAL_NS;
    }
    let state = |port: PortId| s.inputs(Instant::ZERO).find(|r| r.port == port).unwrap().state;
    assert_eq!(state(0), InputState::Live, "forwarded data");
    assert_eq!(state(1), InputState::Live, "data held for a full output");
    assert_eq!(register(&s, 0), t(0), "no beacon, no barrier");
    assert_eq!(s.counters().links_removed, 0);
}
