//! Host delegation (paper 6.2.3): a plain switch tunnels beacons to and from its
//! representative, which aggregates them as the switch's chip would.

use super::*;
use crate::switch::SwitchEvent;
use crate::test_packets::{beacon, packet};
use onepipe_fabric::{Topology, routing};
use onepipe_wire::Duration;

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn config(incarnation: Incarnation) -> SwitchConfig {
    SwitchConfig {
        beacon_interval: Duration::from_nanos(1_000),
        incarnation,
        ..SwitchConfig::default()
    }
}

/// A switch of three processes in host mode and its representative.
fn pair() -> (Switch, Representative) {
    let wiring = Wiring::new(Topology::single_switch(3).unwrap(), 1).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(0);
    let plain = Switch::new(0, &wiring, routes.clone(), config(Incarnation::Host), t(0));
    let rep = Representative::new(0, &wiring, routes, config(Incarnation::Host), t(0));
    (plain, rep)
}

const REP: PortId = 4; // three fabric ports, then management, then the representative

fn pass<N: Node>(n: &mut N, now: u64, port: PortId, mut f: Vec<u8>) -> (Route, Vec<u8>) {
    let route = n.classify(t(now), port, &f);
    n.handle_frame(t(now), port, &mut f, route);
    (route, f)
}

fn link_id(f: &[u8]) -> PortId {
    Packet::new_checked(f).unwrap().link_id()
}

fn barrier(f: &[u8]) -> u64 {
    Packet::new_checked(f).unwrap().barrier().raw()
}

/// Everything the representative has to send now, as (output port named, barrier).
fn drain(rep: &mut Representative, now: u64) -> Vec<(PortId, u64)> {
    let mut buf = vec![0; onepipe_fabric::node::FRAME_MAX];
    let mut out = Vec::new();
    while let Some(len) = rep.poll_transmit(t(now), UPLINK, &mut buf) {
        out.push((link_id(&buf[..len]), barrier(&buf[..len])));
    }
    out
}

#[test]
fn a_plain_switch_tunnels_beacons_to_its_representative_and_stamps_no_data() {
    let (mut plain, _) = pair();
    assert_eq!(crate::representative_port(3), Some(REP));
    let (route, f) = pass(&mut plain, 10, 2, beacon(500));
    assert_eq!(route, Route::Forward(REP));
    assert_eq!(link_id(&f), 2, "the input it came in on");
    let data = packet(Opcode::Data, 0, 1, 1, 900, 900, (0, 1), &[]);
    let (route, f) = pass(&mut plain, 11, 0, data);
    assert_eq!(route, Route::Forward(1));
    assert_eq!(barrier(&f), 900, "nothing aggregated, nothing stamped");
    assert_eq!(plain.poll_timeout(), None, "a plain switch ticks nothing");
    assert!(!plain.wants_transmit());
    assert_eq!(plain.counters().beacons_received, 1);
    assert_eq!(plain.counters().forwarded, 1);
}

#[test]
fn a_plain_switch_sends_a_representatives_beacon_out_of_the_port_it_names() {
    let (mut plain, _) = pair();
    let mut b = beacon(700);
    Packet::new_unchecked(&mut b[..]).set_link_id(1);
    let (route, f) = pass(&mut plain, 10, REP, b);
    assert_eq!(route, Route::Forward(1));
    assert_eq!(link_id(&f), 0, "stamped with the far end's port, a process's 0");
    // A port it does not have, and anything but a beacon, go nowhere.
    let mut b = beacon(700);
    Packet::new_unchecked(&mut b[..]).set_link_id(9);
    assert_eq!(pass(&mut plain, 11, REP, b).0, Route::Drop);
    let data = packet(Opcode::Data, 0, 1, 1, 900, 900, (0, 1), &[]);
    assert_eq!(pass(&mut plain, 12, REP, data).0, Route::Drop);
    assert_eq!(plain.counters().no_route, 2);
}

/// The representative keeps the minimum over the inputs its switch tunnels, and sends it to
/// every output through the switch (eq. 4.1 with the representative as the pipeline).
#[test]
fn beacons_through_the_representative_carry_the_minimum_over_inputs() {
    let (mut plain, mut rep) = pair();
    for (port, b) in [(0, 300), (1, 100), (2, 200)] {
        let (route, tunnelled) = pass(&mut plain, 10, port, beacon(b));
        assert_eq!(route, Route::Forward(REP));
        assert_eq!(pass(&mut rep, 20, UPLINK, tunnelled).0, Route::Consume);
    }
    rep.handle_timeout(t(1_000));
    let sent = drain(&mut rep, 1_000);
    let mut outputs: Vec<PortId> = sent.iter().map(|&(p, _)| p).collect();
    outputs.sort();
    outputs.dedup();
    assert_eq!(outputs, vec![0, 1, 2], "a beacon for every output");
    assert!(sent.iter().all(|&(_, b)| b == 100), "the minimum: {sent:?}");
    // Back through the switch, each leaves on the port it names.
    let mut buf = vec![0; onepipe_fabric::node::FRAME_MAX];
    rep.handle_timeout(t(2_000));
    let len = rep.poll_transmit(t(2_000), UPLINK, &mut buf).unwrap();
    let named = link_id(&buf[..len]);
    let (route, _) = pass(&mut plain, 2_010, REP, buf[..len].to_vec());
    assert_eq!(route, Route::Forward(named));
}

#[test]
fn a_representative_refuses_what_its_switch_would_not_tunnel() {
    let (_, mut rep) = pair();
    let data = packet(Opcode::Data, 0, 1, 1, 900, 900, (0, 1), &[]);
    assert_eq!(pass(&mut rep, 10, UPLINK, data).0, Route::Drop);
    assert_eq!(pass(&mut rep, 10, 3, beacon(5)).0, Route::Drop, "not its port");
    assert_eq!(pass(&mut rep, 10, UPLINK, vec![1, 2, 3]).0, Route::Drop);
    assert_eq!(rep.counters().refused, 3);
    let mut b = beacon(5);
    Packet::new_unchecked(&mut b[..]).set_link_id(40);
    assert_eq!(pass(&mut rep, 10, UPLINK, b).0, Route::Drop, "no such input");
    assert_eq!(rep.program().counters().beacons_received, 0);
}

/// Paper 6.2.3 with 4.2: an input whose beacons stop reaching the representative times out
/// there, and is reported, as it would be at a switch.
#[test]
fn a_silent_input_times_out_at_the_representative() {
    let (mut plain, mut rep) = pair();
    let dead_after_ns = config(Incarnation::Host).dead_after().as_nanos();
    let mut now = 0;
    while now <= 2 * dead_after_ns {
        for port in [0, 1] {
            let (_, tunnelled) = pass(&mut plain, now, port, beacon(now + 1));
            pass(&mut rep, now, UPLINK, tunnelled);
        }
        if now < dead_after_ns / 2 {
            let (_, tunnelled) = pass(&mut plain, now, 2, beacon(now + 1));
            pass(&mut rep, now, UPLINK, tunnelled);
        }
        rep.handle_timeout(t(now));
        drain(&mut rep, now);
        now += 1_000;
    }
    match rep.program_mut().poll_event() {
        Some(SwitchEvent::InputDown(r)) => assert_eq!(r.port, 2),
        other => panic!("expected input 2 down, got {other:?}"),
    }
    assert_eq!(rep.program().counters().links_removed, 1);
}
