//! Switch barrier pipeline rules, each citing the paper section it checks.

use super::*;
use crate::test_packets::beacon;
use onepipe_fabric::{Topology, routing};

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

fn frame(opcode: Opcode, src: u32, dst: u32, ts: u64, barrier: u64) -> Vec<u8> {
    crate::test_packets::packet(opcode, src, dst, 1, ts, barrier, (0, 1), &[])
}

/// A well-formed ACK (its 16-byte payload) from `src` to `dst`.
fn ack(src: u32, dst: u32, ts: u64) -> Vec<u8> {
    crate::test_packets::packet(Opcode::Ack, src, dst, 1, ts, ts, (0, 1), &[0; 16])
}

fn switch(topology: Topology, id: usize) -> Switch {
    let wiring = Wiring::new(topology, 1).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(id);
    let config = SwitchConfig {
        beacon_interval: Duration::from_nanos(1_000),
        dead_after_intervals: 10,
        ecmp_seed: 3,
        promise_lead: Duration::ZERO,
        time_ahead_max: crate::plausible::TIME_AHEAD_MAX,
        incarnation: Incarnation::Chip,
    };
    Switch::new(id, &wiring, routes, config, t(0))
}

/// Runs a frame through classify + handle_frame, returning the route and the rewritten frame.
fn pass(s: &mut Switch, now: u64, port: PortId, mut f: Vec<u8>) -> (Route, Vec<u8>) {
    let route = s.classify(t(now), port, &f);
    s.handle_frame(t(now), port, &mut f, route);
    (route, f)
}

fn barrier_of(f: &[u8]) -> u64 {
    Packet::new_checked(f).unwrap().barrier().raw()
}

/// Paper 4.1, eq. 4.1: R_i := B for the input link, then B_new := min over all input links.
#[test]
fn forwarded_packet_carries_the_minimum_over_inputs() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    pass(&mut s, 10, 1, beacon(100));
    pass(&mut s, 10, 2, beacon(200));
    let (route, out) = pass(&mut s, 20, 0, frame(Opcode::Data, 0, 2, 300, 300));
    assert_eq!(route, Route::Forward(2));
    assert_eq!(barrier_of(&out), 100);
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 0).unwrap().barrier,
        t(300)
    );
    // The lowest register names the link that holds delivery back.
    assert_eq!(s.lagging_input().unwrap().port, 1);
    // The packet's link id is the port number at the receiving end.
    assert_eq!(Packet::new_checked(&out[..]).unwrap().link_id(), 0);
}

/// Paper Fig. 3 / DESIGN: uplink and downlink halves aggregate separately. A packet going up
/// carries the uplink half's minimum; one turning around here also passes the downlink half.
#[test]
fn halves_aggregate_separately_so_the_barrier_graph_is_a_dag() {
    // leaf0: ports 0,1 = processes 0,1; port 2 = up to the spine.
    let mut leaf = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    pass(&mut leaf, 5, 2, beacon(50)); // from above: downlink half
    pass(&mut leaf, 5, 1, beacon(500));
    let (route, up) = pass(&mut leaf, 10, 0, frame(Opcode::Data, 0, 3, 400, 400));
    assert_eq!(route, Route::Forward(2));
    assert_eq!(barrier_of(&up), 400, "going up ignores inputs from above");
    let (route, turn) = pass(&mut leaf, 11, 0, frame(Opcode::Data, 0, 1, 410, 410));
    assert_eq!(route, Route::Forward(1));
    assert_eq!(barrier_of(&turn), 50, "turning around passes both halves");
}

/// Up/down routing: a packet from above never goes back up.
#[test]
fn packet_from_above_is_never_sent_up() {
    let mut leaf = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    let (route, _) = pass(&mut leaf, 10, 2, frame(Opcode::Data, 2, 3, 10, 10));
    assert_eq!(route, Route::Drop);
    assert_eq!(leaf.counters().no_route, 1);
    // From above, to a local process: fine.
    let (route, _) = pass(&mut leaf, 10, 2, frame(Opcode::Data, 2, 0, 10, 10));
    assert_eq!(route, Route::Forward(0));
}

/// A process speaks only in its own name (docs/wire.md, "Sources"): a packet whose source is
/// not behind its input port, as this switch's routes see it, is dropped and counted, so no
/// process can send data, ACKs, NAKs or recalls as another. Its beacon still counts for its
/// own link.
#[test]
fn a_packet_in_another_processs_name_is_dropped_and_counted() {
    // leaf0: ports 0-3 = processes 0-3 (two hosts of two processes); port 4 = up to the spine.
    let topology = Topology::leaf_spine(2, 1, 2).unwrap();
    let wiring = Wiring::new(topology, 2).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(0);
    let mut leaf = Switch::new(0, &wiring, routes, SwitchConfig::default(), t(0));
    // (An ACK needs its payload to be well formed: `ack` below; classify routes it like these.)
    for opcode in [Opcode::Data, Opcode::Nak, Opcode::Prepare] {
        // Process 1 (port 1) in the name of process 0, its neighbour on the same host.
        let (route, _) = pass(&mut leaf, 10, 1, frame(opcode, 0, 2, 10, 10));
        assert_eq!(route, Route::Drop, "{opcode:?}");
        // From above, in the name of a process below this switch.
        let (route, _) = pass(&mut leaf, 10, 4, frame(opcode, 3, 0, 10, 10));
        assert_eq!(route, Route::Drop, "{opcode:?}");
    }
    let c = leaf.counters();
    assert_eq!((c.spoofed_source, c.no_route, c.malformed), (6, 0, 0), "{c:?}");
    // In its own name, locally and up; and a remote process's packet from above.
    assert_eq!(
        pass(&mut leaf, 11, 1, frame(Opcode::Data, 1, 2, 11, 11)).0,
        Route::Forward(2)
    );
    assert_eq!(pass(&mut leaf, 11, 3, ack(3, 5, 11)).0, Route::Forward(4));
    assert_eq!(
        pass(&mut leaf, 11, 4, frame(Opcode::Nak, 6, 0, 11, 11)).0,
        Route::Forward(0)
    );
    assert_eq!(leaf.counters().spoofed_source, 6);
    assert_eq!(leaf.classify(t(12), 1, &ack(0, 2, 12)), Route::Drop);
    // The spine takes process 0's packet from leaf0 only.
    let wiring = Wiring::new(Topology::leaf_spine(2, 1, 2).unwrap(), 2).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(2);
    let spine = Switch::new(2, &wiring, routes, SwitchConfig::default(), t(0));
    assert!(spine.source_matches(0, 0) && !spine.source_matches(1, 0));
    assert!(spine.source_matches(1, 7) && !spine.source_matches(0, 7));
    assert!(!spine.source_matches(0, 99), "no such process");
}

/// One switch, three processes; ports 0 and 1 beacon every interval, port 2 never speaks.
fn switch_with_port_2_silent_for_12_intervals() -> Switch {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    beacon_ports_0_and_1_for_12_intervals(&mut s);
    s
}

fn beacon_ports_0_and_1_for_12_intervals(s: &mut Switch) {
    for k in 1..=12u64 {
        let now = k * 1_000;
        pass(s, now, 0, beacon(now));
        pass(s, now, 1, beacon(now));
        s.handle_timeout(t(now));
    }
}

/// Paper 4.2: an input silent for the timeout is removed and the barrier resumes.
#[test]
fn silent_input_is_removed_and_barrier_resumes() {
    let mut s = switch_with_port_2_silent_for_12_intervals();
    // Port 2 never spoke: it held the barrier at zero until removed after 10 intervals.
    assert_eq!(s.counters().links_removed, 1);
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Dead
    );
    let (_, out) = pass(&mut s, 12_500, 0, frame(Opcode::Data, 0, 1, 12_500, 12_500));
    assert_eq!(barrier_of(&out), 12_000);
}

/// A switch run long after its tick (its thread descheduled, the whole machine stalled) could
/// hear nobody meanwhile: the gap is not held against its inputs. A link still silent once it
/// runs again is removed a timeout later; and a switch that is only a little late on every
/// tick (a loaded thread) times a silent link out on time.
#[test]
fn a_stalled_switch_does_not_time_out_links_it_could_not_hear() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    for port in 0..3 {
        pass(&mut s, 1_000, port, beacon(1_000));
    }
    s.handle_timeout(t(1_000));
    // Timeout 10 us; the switch runs again 49 us later.
    s.handle_timeout(t(50_000));
    assert_eq!(s.counters().links_removed, 0);
    assert_eq!(s.counters().stalls_excused, 1);
    // Ports 0 and 1 speak again; port 2 stays silent.
    let mut removed_at = None;
    for k in 51..=70u64 {
        let now = k * 1_000;
        pass(&mut s, now, 0, beacon(now));
        pass(&mut s, now, 1, beacon(now));
        s.handle_timeout(t(now));
        if s.counters().links_removed == 1 && removed_at.is_none() {
            removed_at = Some(now);
        }
    }
    let removed_at = removed_at.expect("port 2 stayed silent");
    assert!((58_000..=61_000).contains(&removed_at), "removed at {removed_at}");
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Dead
    );

    // Every tick 2 us late (less than a quarter of the timeout): no stall, and port 2 of a
    // new switch, heard at 1 us, is removed at the first tick more than 10 us later.
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    for port in 0..3 {
        pass(&mut s, 1_000, port, beacon(1_000));
    }
    let mut now = 1_000;
    while s.counters().links_removed == 0 {
        now = s.poll_timeout().unwrap().as_nanos() + 2_000;
        pass(&mut s, now, 0, beacon(now));
        pass(&mut s, now, 1, beacon(now));
        s.handle_timeout(t(now));
    }
    assert_eq!(s.counters().stalls_excused, 0);
    assert!(now <= 14_000, "removed at {now}");
}

/// Paper 4.2: a (re)joining link is admitted only once its barrier passes the current output
/// barrier, so the output never goes back.
#[test]
fn joining_link_waits_until_its_barrier_passes_the_output() {
    let mut s = switch_with_port_2_silent_for_12_intervals();
    // Port 2 returns with an old barrier: heard, but not counted.
    pass(&mut s, 12_100, 2, beacon(5_000));
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Joining
    );
    let (_, out) = pass(&mut s, 12_200, 0, frame(Opcode::Data, 0, 1, 12_200, 12_200));
    assert_eq!(
        barrier_of(&out),
        12_000,
        "the old barrier must not pull the output back"
    );
    pass(&mut s, 12_300, 2, beacon(12_300));
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Live
    );
    assert_eq!(s.counters().links_joined, 1);
}

/// Paper 4.2: "it suspends updates to B_new until the barrier received from the new link is
/// greater than B_new". A link that lags the live ones by its path delay must still get in:
/// the output holds while it catches up (the simulator found links that never rejoined).
#[test]
fn joining_link_freezes_the_output_until_it_catches_up() {
    let mut s = switch_with_port_2_silent_for_12_intervals();
    pass(&mut s, 12_100, 2, beacon(11_500));
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Joining
    );
    // The live inputs move on; the output does not.
    pass(&mut s, 13_000, 0, beacon(13_000));
    pass(&mut s, 13_000, 1, beacon(13_000));
    let (_, out) = pass(&mut s, 13_100, 0, frame(Opcode::Data, 0, 1, 13_100, 13_100));
    assert_eq!(barrier_of(&out), 12_000);
    // Still behind the live inputs, but past the frozen output: admitted.
    pass(&mut s, 13_200, 2, beacon(12_600));
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Live
    );
    let (_, out) = pass(&mut s, 13_300, 0, frame(Opcode::Data, 0, 1, 13_300, 13_300));
    assert_eq!(barrier_of(&out), 12_600);
}

/// Paper 5.2: only the controller takes a component out of reliable delivery. A silent input
/// leaves the best-effort minimum but holds the commit barrier until it speaks again.
#[test]
fn silent_input_holds_the_commit_barrier() {
    let mut s = switch_with_port_2_dead_at_500();
    assert_eq!(
        s.inputs(Instant::ZERO).find(|r| r.port == 2).unwrap().state,
        InputState::Dead
    );
    let (_, out) = pass(&mut s, 12_500, 0, frame(Opcode::Data, 0, 1, 12_500, 12_500));
    let packet = Packet::new_checked(&out[..]).unwrap();
    assert_eq!(packet.barrier().raw(), 12_000);
    assert_eq!(packet.commit_barrier().raw(), 500);
    // Heard again: the commit barrier moves at once, before the link rejoins best effort.
    pass(&mut s, 12_600, 2, beacon(11_000));
    let (_, out) = pass(&mut s, 12_700, 0, frame(Opcode::Data, 0, 1, 12_700, 12_700));
    assert_eq!(
        Packet::new_checked(&out[..]).unwrap().commit_barrier().raw(),
        11_000
    );
}

/// Paper 4.2: beacons at synchronized times, only on output links idle for an interval.
#[test]
fn beacons_go_out_on_idle_links_at_synchronized_times() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    assert_eq!(s.poll_timeout(), Some(t(1_000)));
    for p in 0..3 {
        pass(&mut s, 900, p, beacon(800));
    }
    s.handle_timeout(t(1_000));
    assert_eq!(s.poll_timeout(), Some(t(2_000)));
    let mut buf = [0u8; 256];
    for p in 0..3 {
        let len = s.poll_transmit(t(1_000), p, &mut buf).expect("idle port beacons");
        let repr = Repr::parse(&Packet::new_checked(&buf[..len]).unwrap()).unwrap();
        assert_eq!(repr.opcode, Opcode::Beacon);
        assert_eq!(repr.barrier.raw(), 800);
        assert!(
            s.poll_transmit(t(1_000), p, &mut buf).is_none(),
            "one beacon per tick"
        );
    }
    // Port 1 carries data in the next interval: no beacon on it at the next tick.
    pass(&mut s, 1_500, 0, frame(Opcode::Data, 0, 1, 1_500, 1_500));
    s.handle_timeout(t(2_000));
    assert!(s.poll_transmit(t(2_000), 1, &mut buf).is_none());
    assert!(s.poll_transmit(t(2_000), 2, &mut buf).is_some());
    assert_eq!(s.counters().beacons_sent, 4);
}

/// `wants_transmit` lets the simulator skip asking every port after every frame, so it must be
/// false only when no port has a frame: checked after each step of ticks, beacons and data,
/// with eager beacons, tick beacons and data standing in for beacons.
#[test]
fn wants_transmit_is_exact_when_false() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    let mut buf = [0u8; 256];
    let mut rng = crate::hash::SplitMix::new(7);
    let mut now = 0;
    let mut beacons = 0;
    for _ in 0..2_000 {
        now += 1 + (rng.next_u64() % 400);
        let port = (rng.next_u64() % 3) as PortId;
        match rng.next_u64() % 4 {
            0 => s.handle_timeout(t(now)),
            1 => drop(pass(&mut s, now, port, beacon(now))),
            2 => drop(pass(
                &mut s,
                now,
                port,
                frame(Opcode::Data, port as u32, (port as u32 + 1) % 3, now, now),
            )),
            _ => {
                let wanted = s.wants_transmit();
                let sent = (0..3)
                    .filter(|&p| s.poll_transmit(t(now), p, &mut buf).is_some())
                    .count();
                assert!(wanted || sent == 0, "a port had a beacon the hint denied");
                assert!(!wanted || sent > 0, "the hint stayed up with nothing pending");
                assert!(!s.wants_transmit(), "every port asked");
                beacons += sent;
            }
        }
    }
    assert!(beacons > 100, "the walk reached beacons ({beacons})");
}

/// A raised barrier goes out at once (eager beacon), so that it crosses the fabric in one
/// wave after the hosts' synchronized beacons instead of one tick per hop; an eager beacon
/// keeps its link alive, so the next tick adds none.
#[test]
fn raised_barrier_goes_out_eagerly_and_stands_in_for_the_tick_beacon() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    let mut buf = [0u8; 256];
    pass(&mut s, 900, 0, beacon(1_100));
    pass(&mut s, 900, 1, beacon(1_100));
    assert!(s.poll_transmit(t(900), 0, &mut buf).is_none(), "no news yet");
    pass(&mut s, 900, 2, beacon(1_100));
    for p in 0..3 {
        let len = s.poll_transmit(t(900), p, &mut buf).expect("eager beacon");
        assert_eq!(barrier_of(&buf[..len]), 1_100);
    }
    s.handle_timeout(t(1_000));
    for p in 0..3 {
        assert!(
            s.poll_transmit(t(1_000), p, &mut buf).is_none(),
            "link not idle, no news"
        );
    }
    // A whole interval without a packet: the tick beacon keeps the link alive.
    s.handle_timeout(t(2_000));
    assert!(s.poll_transmit(t(2_000), 1, &mut buf).is_some());
}

/// Hosts beacon at multiples of the interval, so a wave of beacons carries values at or above
/// the same multiple. Steps of the minimum inside a wave (beacons trickling in) are not worth a
/// beacon each; the step that completes the wave is.
#[test]
fn eager_beacon_waits_for_the_step_that_completes_a_wave() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    let mut buf = [0u8; 256];
    for p in 0..3 {
        pass(&mut s, 900, p, beacon(1_100));
    }
    for p in 0..3 {
        s.poll_transmit(t(900), p, &mut buf).expect("first wave");
    }
    pass(&mut s, 1_900, 0, beacon(2_050));
    pass(&mut s, 1_900, 1, beacon(1_900)); // the minimum steps within wave 1
    pass(&mut s, 1_900, 2, beacon(2_050));
    assert_eq!(s.lagging_input().unwrap().barrier, t(1_900));
    assert!(s.poll_transmit(t(1_900), 0, &mut buf).is_none(), "same wave");
    pass(&mut s, 1_950, 1, beacon(2_060));
    let len = s.poll_transmit(t(1_950), 0, &mut buf).expect("wave 2 complete");
    assert_eq!(barrier_of(&buf[..len]), 2_050);
}

/// News is per half: a rise of the uplink half is no news for links fed by the downlink half
/// while the inputs from above still hold it down, so it spends no beacons there.
#[test]
fn eager_beacons_go_only_where_the_owning_half_rose() {
    // leaf0: ports 0,1 = processes 0,1; port 2 = up to the spine.
    let mut leaf = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    let mut buf = [0u8; 256];
    pass(&mut leaf, 5, 0, beacon(1_500));
    pass(&mut leaf, 5, 1, beacon(1_500));
    let len = leaf.poll_transmit(t(5), 2, &mut buf).expect("uplink half rose");
    assert_eq!(barrier_of(&buf[..len]), 1_500);
    assert!(leaf.poll_transmit(t(5), 0, &mut buf).is_none());
    assert!(leaf.poll_transmit(t(5), 1, &mut buf).is_none());
    pass(&mut leaf, 6, 2, beacon(1_400));
    let len = leaf.poll_transmit(t(6), 0, &mut buf).expect("downlink half rose");
    assert_eq!(barrier_of(&buf[..len]), 1_400);
    assert!(leaf.poll_transmit(t(6), 2, &mut buf).is_none());
}

/// Bad input: malformed frames are dropped and counted, never a panic.
#[test]
fn malformed_frames_are_dropped_and_counted() {
    let mut s = switch(Topology::single_switch(2).unwrap(), 0);
    for junk in [vec![], vec![0xff; 10], vec![0x11; 60]] {
        let (route, _) = pass(&mut s, 1, 0, junk);
        assert_eq!(route, Route::Drop);
    }
    assert_eq!(s.counters().malformed, 3);
    // Unknown destination: dropped, counted as unroutable.
    let (route, _) = pass(&mut s, 1, 0, frame(Opcode::Data, 0, 99, 5, 5));
    assert_eq!(route, Route::Drop);
    assert_eq!(s.counters().no_route, 1);
}

/// A frame stuck behind a full output has arrived: its barrier counts and its link is alive.
#[test]
fn stalled_frame_updates_its_register() {
    let mut s = switch(Topology::single_switch(2).unwrap(), 0);
    let f = frame(Opcode::Data, 0, 1, 700, 700);
    s.handle_stalled(t(50), 0, &f);
    s.handle_stalled(t(51), 0, &f);
    let r = s.inputs(Instant::ZERO).find(|r| r.port == 0).unwrap();
    assert_eq!((r.barrier, r.last_heard), (t(700), t(51)));
    assert_eq!(s.counters().barrier_regressions, 0);
}

/// Each input reports how far its sender's barrier runs ahead of the switch's clock, keeping
/// the least delayed frame of the last window or two: the difference between two hosts is
/// their clock skew. A host whose queue holds its barrier back (older data) does not drag the
/// estimate down, and samples older than two windows are dropped.
#[test]
fn inputs_estimate_how_far_each_sender_clock_runs_ahead() {
    let ms = |v: u64| 1_000_000 * v;
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    // Host 1 runs 5 us ahead of the switch and host 2 3 us behind, both with 2 us of delay
    // on their best frames; host 2's later beacon was held back in its queue.
    pass(&mut s, ms(10), 1, beacon(ms(10) + 5_000 - 2_000));
    pass(&mut s, ms(10), 2, beacon(ms(10) - 3_000 - 2_000));
    pass(&mut s, ms(11), 2, beacon(ms(11) - 3_000 - 40_000));
    let ahead = |s: &Switch, now: u64, port: PortId| {
        s.inputs(t(now)).find(|r| r.port == port).unwrap().clock_ahead_ns
    };
    assert_eq!(ahead(&s, ms(12), 1), Some(3_000));
    assert_eq!(ahead(&s, ms(12), 2), Some(-5_000));
    assert_eq!(ahead(&s, ms(12), 0), None, "nothing heard from host 0");
    // Three seconds later, with nothing new, the samples have aged out.
    assert_eq!(ahead(&s, ms(3_012), 1), None);
}

fn commit_of(f: &[u8]) -> u64 {
    Packet::new_checked(f).unwrap().commit_barrier().raw()
}

/// Port 2 spoke once (barriers 500), then went silent while ports 0 and 1 beaconed on.
fn switch_with_port_2_dead_at_500() -> Switch {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    pass(&mut s, 500, 2, beacon(500));
    beacon_ports_0_and_1_for_12_intervals(&mut s);
    s
}

/// Paper 5.2, Detect: "the neighbors of failed components notify the controller along with
/// its last commit timestamp". Once per death.
#[test]
fn a_dead_input_is_reported_once_with_its_last_commit_barrier() {
    let mut s = switch_with_port_2_dead_at_500();
    assert_eq!(
        reported(&mut s),
        Some(InputReport {
            port: 2,
            last_commit: t(500)
        })
    );
    assert_eq!(reported(&mut s), None);
    s.handle_timeout(t(13_000));
    assert_eq!(reported(&mut s), None);
}

/// Paper 5.2, Resume: once the controller removes the failed input, the commit barrier flows.
#[test]
fn a_removed_input_releases_the_commit_barrier() {
    let mut s = switch_with_port_2_dead_at_500();
    let (_, out) = pass(&mut s, 12_500, 0, frame(Opcode::Data, 0, 1, 12_500, 12_500));
    assert_eq!(commit_of(&out), 500);
    s.remove_input(2).unwrap();
    s.remove_input(2).unwrap();
    assert_eq!(s.counters().commit_inputs_removed, 1);
    let (_, out) = pass(&mut s, 12_600, 0, frame(Opcode::Data, 0, 1, 12_600, 12_600));
    assert_eq!(commit_of(&out), 12_000);
    assert_eq!(s.remove_input(3), Err(NoSuchPort(3)));
}

/// A removed process input is quarantined (paper 5.2, Receiver Recovery): what the process
/// says is dropped, nothing is sent to it, and the first frame heard is reported once. Readmitted,
/// it rejoins the commit lane the way a link joins best effort (paper 4.2): the commit barrier
/// never goes back.
#[test]
fn a_removed_process_input_is_quarantined_until_readmitted_then_rejoins_without_pulling_back() {
    let mut s = switch_with_port_2_dead_at_500();
    s.remove_input(2).unwrap();
    assert_eq!(heard(&mut s), None);
    let (route, _) = pass(&mut s, 12_100, 2, beacon(5_000));
    assert_eq!(route, Route::Drop);
    pass(&mut s, 12_150, 2, beacon(5_100));
    assert_eq!(heard(&mut s), Some(2), "heard again, once");
    assert_eq!(heard(&mut s), None);
    let (route, _) = pass(&mut s, 12_160, 0, frame(Opcode::Data, 0, 2, 12_160, 12_160));
    assert_eq!(route, Route::Drop, "nothing is forwarded to it");
    s.handle_timeout(t(13_000));
    let mut buf = [0u8; 128];
    assert_eq!(s.poll_transmit(t(13_000), 2, &mut buf), None, "nor beaconed");
    let (_, out) = pass(&mut s, 12_200, 0, frame(Opcode::Data, 0, 1, 12_200, 12_200));
    assert_eq!(commit_of(&out), 12_000);
    s.readmit_input(t(13_000), 2).unwrap();
    pass(&mut s, 13_000, 0, beacon(13_000));
    pass(&mut s, 13_000, 1, beacon(13_000));
    let (_, out) = pass(&mut s, 13_050, 0, frame(Opcode::Data, 0, 1, 13_050, 13_050));
    assert_eq!(commit_of(&out), 12_000, "held at the output of the readmission");
    pass(&mut s, 13_100, 2, beacon(12_500));
    let (_, out) = pass(&mut s, 13_200, 0, frame(Opcode::Data, 0, 1, 13_200, 13_200));
    assert_eq!(
        commit_of(&out),
        12_500,
        "counted again once past the frozen output"
    );
    assert_eq!(heard(&mut s), None);
    let (route, _) = pass(&mut s, 13_300, 0, frame(Opcode::Data, 0, 2, 13_300, 13_300));
    assert_eq!(route, Route::Forward(2));
}

/// A readmitted input that stays silent is reported dead again: a process whose link is still
/// down fails again instead of holding barriers.
#[test]
fn a_readmitted_input_that_stays_silent_is_reported_again() {
    let mut s = switch_with_port_2_dead_at_500();
    assert!(reported(&mut s).is_some());
    s.remove_input(2).unwrap();
    s.readmit_input(t(12_000), 2).unwrap();
    s.readmit_input(t(12_000), 2).unwrap();
    for k in 13..=23u64 {
        pass(&mut s, k * 1_000, 0, beacon(k * 1_000));
        pass(&mut s, k * 1_000, 1, beacon(k * 1_000));
        s.handle_timeout(t(k * 1_000));
    }
    assert_eq!(reported(&mut s).map(|r| r.port), Some(2));
    assert_eq!(s.readmit_input(t(0), 9), Err(NoSuchPort(9)));
}

/// An input removed while it is live (nothing behind it can send: a rack whose hosts all
/// failed) stays out of the commit lane although it keeps beaconing: its barrier is frozen, and
/// rejoining would freeze ours with it (found by `onepipe bench recovery`: a failed host alone
/// in its rack stalled every commit barrier on the inproc runtime).
#[test]
fn a_live_input_removed_stays_out_of_the_commit_lane() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    for p in 0..3 {
        pass(&mut s, 1_000, p, beacon(1_000));
    }
    s.remove_input(2).unwrap();
    // Port 2 keeps saying 1_000 (it has no sources); the others move on.
    for at in [2_000, 3_000] {
        pass(&mut s, at, 2, beacon(1_000));
        pass(&mut s, at, 1, beacon(at));
        pass(&mut s, at, 0, beacon(at));
    }
    let (_, out) = pass(&mut s, 3_100, 0, frame(Opcode::Data, 0, 1, 3_100, 3_100));
    assert_eq!(commit_of(&out), 3_000);
}

/// The controller cuts an input whose far end it declares failed: nothing from it is taken
/// any more, best effort stops waiting for it, and it is reported with its last commit
/// barrier; the commit barrier waits for the controller's Resume.
#[test]
fn a_cut_input_is_ignored_and_reported_and_holds_commit_until_removed() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    for p in 0..3 {
        pass(&mut s, 1_000, p, beacon(1_000));
    }
    s.cut_input(1).unwrap();
    assert_eq!(
        reported(&mut s),
        Some(InputReport {
            port: 1,
            last_commit: t(1_000)
        })
    );
    let (route, _) = pass(&mut s, 2_000, 1, beacon(2_000));
    assert_eq!(route, Route::Drop);
    assert_eq!(s.counters().cut_frames, 1);
    pass(&mut s, 2_000, 2, beacon(2_000));
    let (_, out) = pass(&mut s, 2_100, 0, frame(Opcode::Data, 0, 2, 2_100, 2_100));
    assert_eq!(barrier_of(&out), 2_000);
    assert_eq!(commit_of(&out), 1_000);
    s.remove_input(1).unwrap();
    let (_, out) = pass(&mut s, 2_200, 0, frame(Opcode::Data, 0, 2, 2_200, 2_200));
    assert_eq!(commit_of(&out), 2_000);
    assert_eq!(s.cut_input(7), Err(NoSuchPort(7)));
}

/// A cut port carries nothing out either: the process behind it is declared failed, and if it
/// still runs (only the controller lost it) it must not hear commit barriers past its failure,
/// nor take packets (docs/failures.md, controller forwarding).
#[test]
fn a_cut_port_is_sent_nothing() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    let mut buf = [0u8; 256];
    for p in 0..3 {
        pass(&mut s, 1_000, p, beacon(1_000));
    }
    s.cut_input(1).unwrap();
    let (route, _) = pass(&mut s, 1_100, 0, frame(Opcode::Data, 0, 1, 1_100, 1_100));
    assert_eq!(route, Route::Drop, "not forwarded to the cut port");
    let (route, _) = pass(&mut s, 1_100, 0, frame(Opcode::Data, 0, 2, 1_100, 1_100));
    assert_eq!(route, Route::Forward(2));
    for k in 2..30u64 {
        for p in [0, 2] {
            pass(&mut s, k * 1_000, p, beacon(k * 1_000));
        }
        s.handle_timeout(t(k * 1_000));
        assert_eq!(
            s.poll_transmit(t(k * 1_000), 1, &mut buf),
            None,
            "no beacon at {k} us"
        );
    }
    assert!(
        s.poll_transmit(t(30_000), 2, &mut buf).is_some(),
        "the others beacon on"
    );
}

/// A neighbour silent past the dead-link timeout, or cut by the controller, is gone: a runtime
/// with credits drops what is forwarded to it rather than wait. Heard again, it is back.
#[test]
fn a_dead_or_cut_neighbour_is_gone_until_heard_again() {
    let mut s = switch_with_port_2_dead_at_500();
    assert!(!s.peer_gone(0) && !s.peer_gone(1));
    assert!(s.peer_gone(2));
    assert!(!s.peer_gone(9));
    pass(&mut s, 12_100, 2, beacon(12_100));
    assert!(!s.peer_gone(2), "joining again");
    s.cut_input(1).unwrap();
    assert!(s.peer_gone(1));
}

/// What a restarted controller must hear again: inputs reported down and not heard since.
#[test]
fn reported_down_lists_dead_inputs_until_they_are_heard_again() {
    let mut s = switch_with_port_2_dead_at_500();
    let down: Vec<InputReport> = s.reported_down().collect();
    assert_eq!(
        down,
        vec![InputReport {
            port: 2,
            last_commit: t(500)
        }]
    );
    pass(&mut s, 12_100, 2, beacon(12_100));
    assert_eq!(s.reported_down().count(), 0);
}

/// The next input reported down; events of the other kind before it are passed over.
fn reported(s: &mut Switch) -> Option<InputReport> {
    std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        SwitchEvent::InputDown(r) => Some(r),
        _ => None,
    })
}

/// The next quarantined input heard again; reports before it are passed over.
fn heard(s: &mut Switch) -> Option<PortId> {
    std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        SwitchEvent::InputHeard(port) => Some(port),
        _ => None,
    })
}

/// Every way a packet can take through the fabric passes the source check at every hop: the
/// check drops no packet that routing itself would send (paper testbed, a leaf-spine with
/// several processes per host, and a fat tree).
#[test]
fn every_routed_packet_passes_the_source_check_at_every_hop() {
    for (topology, pph) in [
        (Topology::paper_testbed(), 1),
        (Topology::leaf_spine(3, 2, 2).unwrap(), 2),
        (Topology::fat_tree(4).unwrap(), 1),
    ] {
        let wiring = Wiring::new(topology, pph).unwrap();
        let tables = routing::build(&wiring).unwrap();
        let switches: Vec<Switch> = (0..wiring.switch_count())
            .map(|i| Switch::new(i, &wiring, tables[i].clone(), SwitchConfig::default(), t(0)))
            .collect();
        let processes = wiring.process_count() as u32;
        for src in 0..processes {
            for dst in (0..processes).filter(|&d| d != src) {
                // Every (switch, input port) a packet from src to dst can reach.
                let first = wiring.processes[src as usize];
                let mut frontier = vec![(first.tor, first.tor_port)];
                let mut seen = std::collections::HashSet::new();
                while let Some((at, port)) = frontier.pop() {
                    if !seen.insert((at, port)) {
                        continue;
                    }
                    let s = &switches[at];
                    assert!(
                        s.source_matches(port, src),
                        "switch {at} port {port}: {src} -> {dst}"
                    );
                    let packet = crate::test_packets::packet(Opcode::Data, src, dst, 1, 5, 5, (0, 1), &[]);
                    let Route::Forward(out) = s.classify(t(1), port, &packet) else {
                        panic!("switch {at} drops {src} -> {dst} from port {port}");
                    };
                    // Every ECMP choice, not just the one this packet's hash takes.
                    let hops = match tables[at].next_hops(dst).unwrap() {
                        routing::NextHops::Local(p) => vec![p],
                        routing::NextHops::Ecmp(c) => c.to_vec(),
                    };
                    let from_above = wiring.switch_ports[at][port as usize].direction == PortDirection::Up;
                    for out in hops.into_iter().chain([out]) {
                        let spec = wiring.switch_ports[at][out as usize];
                        if from_above && spec.direction == PortDirection::Up {
                            continue;
                        }
                        if let Peer::Switch { switch, port } = spec.peer {
                            frontier.push((switch, port));
                        }
                    }
                }
            }
        }
    }
}

/// The next report of implausible barriers; events of other kinds before it are passed over.
fn implausible(s: &mut Switch) -> Option<ImplausibleReport> {
    std::iter::from_fn(|| s.poll_event()).find_map(|e| match e {
        SwitchEvent::Implausible(r) => Some(r),
        _ => None,
    })
}

/// Issue 42: one forged beacon pinned an input's register far in the future; later barriers
/// of the link were ignored as regressions and the half's minimum moved without it. A barrier
/// (best-effort or commit) further ahead of the switch's clock than `promise_lead +
/// time_ahead_max` is refused: no register update, not forwarded, counted, reported once.
#[test]
fn a_barrier_implausibly_far_ahead_is_refused_counted_and_reported() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    let max = s.config.time_ahead_max.as_nanos();
    let now = 1_000_000;
    pass(&mut s, now, 1, beacon(now));
    pass(&mut s, now, 2, beacon(now));
    // At the bound: a correct sender's, taken.
    pass(&mut s, now, 0, beacon(now + max));
    assert_eq!(
        s.inputs(t(now)).find(|r| r.port == 0).unwrap().barrier,
        t(now + max)
    );
    // Past it, as a beacon, as data, and in the commit lane alone: refused.
    let forged = now + max + 1_000_000_000;
    assert_eq!(pass(&mut s, now, 0, beacon(forged)).0, Route::Drop);
    let (route, _) = pass(&mut s, now, 0, frame(Opcode::Data, 0, 2, now, forged));
    assert_eq!(route, Route::Drop, "not forwarded");
    let commit_only = Repr::beacon(t(now).to_wire(), t(forged).to_wire(), 0).to_vec();
    assert_eq!(pass(&mut s, now, 0, commit_only).0, Route::Drop);
    let r = s.inputs(t(now)).find(|r| r.port == 0).unwrap();
    assert_eq!((r.barrier, r.commit_barrier), (t(now + max), t(now + max)));
    let c = s.counters();
    assert_eq!((c.barrier_implausible, c.no_route, c.beacons_received), (3, 0, 3));
    assert_eq!(
        implausible(&mut s),
        Some(ImplausibleReport {
            port: 0,
            ahead_ns: forged - now,
            refused: 3
        })
    );
    assert_eq!(implausible(&mut s), None, "one report for the burst");
    // The link's real barriers go on rising: none is taken as a regression.
    pass(&mut s, now + max + 1, 0, beacon(now + max + 1));
    assert_eq!(s.counters().barrier_regressions, 0);
    // Refusals within the report interval are summed into the next report.
    let later = now + crate::plausible::REPORT_INTERVAL.as_nanos();
    pass(&mut s, now + 1, 0, beacon(forged));
    assert_eq!(implausible(&mut s), None);
    pass(&mut s, later, 0, beacon(forged + later));
    let r = implausible(&mut s).unwrap();
    assert_eq!((r.port, r.refused), (0, 2));
    s.invariants();
}

/// Hosts promise their barriers `promise_lead` ahead of their clocks: the bound is that much
/// higher, and a forged frame keeps no dead link alive.
#[test]
fn the_bound_adds_the_promise_lead_and_a_refused_frame_proves_nothing_alive() {
    let mut s = switch(Topology::single_switch(2).unwrap(), 0);
    s.config.promise_lead = Duration::from_millis(5);
    s.config.time_ahead_max = Duration::from_millis(1);
    let now = 2_000_000;
    // The switch's first tick, late since it started at 0, excuses the gap as its own stall.
    s.handle_timeout(t(now));
    pass(&mut s, now, 1, beacon(now));
    pass(&mut s, now, 0, beacon(now + 6_000_000));
    assert_eq!(s.counters().barrier_implausible, 0);
    pass(&mut s, now, 0, beacon(now + 6_000_001));
    assert_eq!(s.counters().barrier_implausible, 1);
    // Silent but for forged beacons: the link dies all the same.
    let dead_after = s.config.dead_after().as_nanos();
    for k in 1..=dead_after / 1_000 + 1 {
        let at = now + k * 1_000;
        pass(&mut s, at, 1, beacon(at));
        pass(&mut s, at, 0, beacon(at + 6_000_001));
        s.handle_timeout(t(at));
    }
    assert_eq!(
        s.inputs(t(now)).find(|r| r.port == 0).unwrap().state,
        InputState::Dead
    );
    s.invariants();
}

/// A leaf of `leaf_spine(2, 1, 2)` (ports 0, 1: processes; port 2: up to the spine) whose
/// processes never speak, ticked for 12 intervals while the spine beacons from above.
fn leaf_with_a_rack_that_never_joined() -> Switch {
    let mut leaf = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    for k in 1..=12u64 {
        pass(&mut leaf, k * 1_000, 2, beacon(k * 1_000));
        leaf.handle_timeout(t(k * 1_000));
    }
    leaf
}

fn beacon_up(leaf: &mut Switch, now: u64) -> Repr {
    let mut buf = [0u8; 256];
    let len = leaf
        .poll_transmit(t(now), 2, &mut buf)
        .expect("the uplink beacons");
    Repr::parse(&Packet::new_checked(&buf[..len]).unwrap()).unwrap()
}

/// Issue 42: a rack with no live process must not hold the fabric back. Its inputs time out,
/// and the uplink half, counting nobody, advances on the switch's clock, in both lanes: the
/// never-heard inputs leave the commit lane too, since nothing of theirs ever passed.
#[test]
fn a_rack_with_no_live_process_advances_on_the_switch_clock() {
    let mut leaf = leaf_with_a_rack_that_never_joined();
    assert_eq!(leaf.counters().links_removed, 2);
    assert_eq!(leaf.counters().unheard_inputs_removed, 2);
    assert!(leaf.counters().empty_half_ticks > 0);
    let up = beacon_up(&mut leaf, 12_000);
    assert_eq!(up.barrier.raw(), 12_000, "best effort follows the clock");
    assert_eq!(up.commit_barrier.raw(), 12_000, "and so does the commit barrier");
    // Before the inputs timed out, the empty rack held both at zero, as every input had to
    // speak first.
    let mut young = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    young.handle_timeout(t(1_000));
    assert_eq!(beacon_up(&mut young, 1_000).barrier.raw(), 0);
}

/// A process that joins the empty rack later is admitted once its barrier passes the output
/// the half reached on its own (paper 4.2), so no barrier it sent went back; until then the
/// output holds.
#[test]
fn a_process_joining_an_empty_rack_waits_until_its_barrier_passes_the_clock() {
    let mut leaf = leaf_with_a_rack_that_never_joined();
    // Its clock runs 500 ns behind the switch's: its barrier is below the output.
    pass(&mut leaf, 12_200, 0, beacon(11_700));
    leaf.handle_timeout(t(13_000));
    let held = beacon_up(&mut leaf, 13_000);
    assert_eq!(
        held.barrier.raw(),
        12_000,
        "frozen where the half was when it joined"
    );
    assert_eq!(held.commit_barrier.raw(), 12_000);
    assert_eq!(leaf.counters().links_joined, 0);
    pass(&mut leaf, 13_500, 0, beacon(13_000));
    assert_eq!(leaf.counters().links_joined, 1);
    leaf.handle_timeout(t(14_000));
    let up = beacon_up(&mut leaf, 14_000);
    assert_eq!(up.barrier.raw(), 13_000, "the joined process counts again");
    assert_eq!(up.commit_barrier.raw(), 13_000);
}

/// An input heard once and then silent keeps holding the commit barrier (only the
/// controller's failure procedure may take it out), even when its half is otherwise empty.
#[test]
fn an_input_heard_once_still_holds_the_commit_lane_of_an_empty_half() {
    let mut leaf = switch(Topology::leaf_spine(2, 1, 2).unwrap(), 0);
    pass(&mut leaf, 500, 0, beacon(400));
    for k in 1..=12u64 {
        pass(&mut leaf, k * 1_000, 2, beacon(k * 1_000));
        leaf.handle_timeout(t(k * 1_000));
    }
    assert_eq!(leaf.counters().unheard_inputs_removed, 1, "process 1 only");
    let up = beacon_up(&mut leaf, 12_000);
    assert_eq!(up.barrier.raw(), 12_000);
    assert_eq!(up.commit_barrier.raw(), 400);
}

/// A leaf (of two, one host each, one spine) whose uplink went silent at 500 ns and was reported
/// dead, with the uplink's port.
fn leaf_whose_uplink_died() -> (Switch, PortId) {
    let mut s = switch(Topology::leaf_spine(2, 1, 1).unwrap(), 0);
    let uplink = s.ports.iter().position(|p| !p.to_process).unwrap() as PortId;
    let host = 1 - uplink;
    pass(&mut s, 500, uplink, beacon(500));
    for k in 1..=12u64 {
        pass(&mut s, k * 1_000, host, beacon(k * 1_000));
        s.handle_timeout(t(k * 1_000));
    }
    assert_eq!(reported(&mut s).map(|r| r.port), Some(uplink));
    (s, uplink)
}

/// A link to a switch that the controller took out after it went silent is reported when its far
/// end is heard again (a restarted or healed switch, for the controller to readmit), again each
/// `dead_after` while it stays out, and no more once readmitted. One taken out while it still
/// beacons (nothing behind it can send) is not news.
#[test]
fn a_link_to_a_switch_heard_after_its_removal_is_reported_for_readmission() {
    let (mut s, uplink) = leaf_whose_uplink_died();
    s.remove_input(uplink).unwrap();
    assert_eq!(heard(&mut s), None);
    pass(&mut s, 13_000, uplink, beacon(13_000));
    assert_eq!(heard(&mut s), Some(uplink), "back");
    pass(&mut s, 14_000, uplink, beacon(14_000));
    assert_eq!(heard(&mut s), None, "not again within dead_after");
    pass(&mut s, 23_000, uplink, beacon(23_000));
    assert_eq!(heard(&mut s), Some(uplink), "again, the report may be lost");
    pass(&mut s, 40_000, uplink, beacon(40_000));
    assert_eq!(heard(&mut s), None, "the wait doubles");
    pass(&mut s, 43_000, uplink, beacon(43_000));
    assert_eq!(heard(&mut s), Some(uplink));
    s.readmit_input(t(43_500), uplink).unwrap();
    pass(&mut s, 200_000, uplink, beacon(200_000));
    assert_eq!(heard(&mut s), None, "in use again");

    let mut live = switch(Topology::leaf_spine(2, 1, 1).unwrap(), 0);
    pass(&mut live, 500, uplink, beacon(500));
    live.remove_input(uplink).unwrap();
    for k in 1..=30u64 {
        pass(&mut live, k * 1_000, uplink, beacon(k * 1_000));
    }
    assert_eq!(heard(&mut live), None, "out while live is not news");
}

/// A link to a switch that went silent and came back before the controller's order to remove
/// it (the far switch restarted within the decision) is reported at the removal: removed while
/// live, it would otherwise look like an input with nothing behind it and stay out for good.
#[test]
fn a_link_back_before_its_removal_is_reported_at_the_removal() {
    let (mut s, uplink) = leaf_whose_uplink_died();
    pass(&mut s, 13_000, uplink, beacon(13_000));
    assert_eq!(heard(&mut s), None, "not out yet");
    s.remove_input(uplink).unwrap();
    assert_eq!(heard(&mut s), Some(uplink));
    s.readmit_input(t(13_500), uplink).unwrap();
    s.remove_input(uplink).unwrap();
    assert_eq!(heard(&mut s), None, "readmitted, it has not died since");
}

/// With a controller, an input reported dead that speaks again before the controller acts does
/// not move the commit lane (the controller may be deciding a failure timestamp from what was
/// reported); best effort takes it back at once. Without a controller it counts again at once
/// (`silent_input_holds_the_commit_barrier`).
#[test]
fn with_a_controller_a_reported_input_heard_again_holds_the_commit_lane_until_it_acts() {
    let mut s = switch(Topology::single_switch(3).unwrap(), 0);
    s.set_controlled();
    pass(&mut s, 500, 2, beacon(500));
    beacon_ports_0_and_1_for_12_intervals(&mut s);
    assert_eq!(reported(&mut s).map(|r| r.last_commit), Some(t(500)));
    pass(&mut s, 12_600, 2, beacon(11_000));
    let (_, out) = pass(&mut s, 12_700, 0, frame(Opcode::Data, 0, 1, 12_700, 12_700));
    assert_eq!(commit_of(&out), 500, "held at its report");
    // Still reported to a controller that restarts.
    assert_eq!(
        s.reported_down().map(|r| r.last_commit).collect::<Vec<_>>(),
        vec![t(500)]
    );
    s.remove_input(2).unwrap();
    let (_, out) = pass(&mut s, 12_800, 0, frame(Opcode::Data, 0, 1, 12_800, 12_800));
    assert_eq!(commit_of(&out), 12_000, "removed at Resume");
}
