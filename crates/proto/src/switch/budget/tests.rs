//! 1Pipe's switch against its declared P4 budget, along its code paths (paper 000, section
//! 6.2.1): every packet (data, beacon, prepare, ACK, NAK, a frame held in the ingress buffer, a
//! beacon sent, drops) touches only declared arrays, at most one entry of each, each register
//! of the barrier lanes once and in pipeline order. Timer work and the controller's orders are
//! the control plane's: recorded, shown to loop over the ports, and not held to the per-packet
//! rule. A frame on an input coming back breaks pipeline order, as the budget declares.

use super::super::registers::Touch;
use super::super::{CommitInput, Half, InputState, Port, SwitchConfig};
use super::*;
use crate::test_packets::{beacon, packet};
use onepipe_fabric::budget::{ChipBudget, check};
use onepipe_fabric::{Node, PortId, Route, Topology, Wiring, routing};
use onepipe_wire::packet::Opcode;
use onepipe_wire::{Duration, Instant};
use std::collections::BTreeSet;

/// The per-port arrays, each entry's value as text, in the order `port_arrays` lists them.
const PORT_ARRAYS: [&str; 8] = [
    "input_barrier_be",
    "input_barrier_commit",
    "input_state",
    "last_heard",
    "clock_ahead",
    "last_sent",
    "last_barrier_sent",
    "beacon_state",
];

/// Arrays indexed by output port in egress: a multicast copy touches its own port's entry.
const EGRESS: [&str; 3] = ["last_sent", "last_barrier_sent", "beacon_state"];

fn port_arrays(p: &Port) -> [String; 8] {
    let state = (
        p.state,
        p.commit,
        p.cut,
        p.quarantined,
        p.heard_out,
        p.died,
        p.held,
        p.reported,
        p.heard,
    );
    [
        format!("{:?}", p.barrier[0]),
        format!("{:?}", p.barrier[1]),
        format!("{state:?}"),
        format!("{:?}", p.last_heard),
        format!("{:?}", p.clock),
        format!("{:?}", p.last_sent),
        format!("{:?}", p.last_barrier_sent),
        format!("{:?}", (p.beacon_pending, p.eager_budget)),
    ]
}

/// What one step did: each lane's register accesses in order, and per array the ports whose
/// entry changed.
#[derive(Debug)]
struct Step {
    touches: [Vec<Touch>; 2],
    changed: Vec<(&'static str, Vec<usize>)>,
}

/// A way a step goes past the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Breach {
    Undeclared(&'static str),
    Accesses {
        array: &'static str,
        accesses: usize,
    },
    Entries {
        array: &'static str,
        ports: Vec<usize>,
    },
    /// An input's register written after an output that depends on it: a later stage feeding
    /// an earlier one.
    Order {
        array: &'static str,
    },
}

fn begin(s: &mut Switch) -> Vec<Port> {
    for lane in &mut s.lanes {
        lane.touches = Some(Vec::new());
    }
    s.ports.clone()
}

fn end(s: &mut Switch, before: &[Port]) -> Step {
    s.invariants();
    let touches = [0, 1].map(|l| s.lanes[l].touches.take().unwrap_or_default());
    let old: Vec<[String; 8]> = before.iter().map(port_arrays).collect();
    let new: Vec<[String; 8]> = s.ports.iter().map(port_arrays).collect();
    let changed = PORT_ARRAYS
        .iter()
        .enumerate()
        .map(|(a, &name)| {
            let ports = (0..new.len()).filter(|&p| old[p][a] != new[p][a]).collect();
            (name, ports)
        })
        .collect();
    Step { touches, changed }
}

fn half_index(half: Half) -> usize {
    match half {
        Half::Up => 0,
        Half::Down => 1,
    }
}

/// The tree a lane's input write goes up, or the input register itself when the half has a
/// single input (no tree).
fn input_array(budget: &ProgramBudget, lane: usize, half: Half) -> &'static str {
    let tree = TREES[lane][half_index(half)];
    if budget.arrays_named(tree).next().is_some() {
        tree
    } else {
        INPUT_BARRIERS[lane]
    }
}

fn breaches(step: &Step, budget: &ProgramBudget, multicast: bool) -> Vec<Breach> {
    let mut found = Vec::new();
    for (lane, log) in step.touches.iter().enumerate() {
        let mut writes = [0usize; 2];
        let mut outputs = [false; 2];
        for &touch in log {
            match touch {
                Touch::Output(half) => {
                    outputs[half_index(half)] = true;
                    let name = OUTPUTS[lane][half_index(half)];
                    if budget.arrays_named(name).next().is_none() {
                        found.push(Breach::Undeclared(name));
                    }
                }
                Touch::Input(half) => {
                    let name = input_array(budget, lane, half);
                    writes[half_index(half)] += 1;
                    // The uplink output feeds both outputs; the downlink's only its own.
                    let depends = match half {
                        Half::Up => outputs[0] || outputs[1],
                        Half::Down => outputs[1],
                    };
                    if depends {
                        found.push(Breach::Order { array: name });
                    }
                }
            }
        }
        for half in [Half::Up, Half::Down] {
            let accesses = writes[half_index(half)];
            if accesses > 1 {
                let array = input_array(budget, lane, half);
                found.push(Breach::Accesses { array, accesses });
            }
        }
    }
    for (name, ports) in &step.changed {
        if budget.arrays_named(name).next().is_none() && !ports.is_empty() {
            found.push(Breach::Undeclared(name));
        }
        let copies = multicast && EGRESS.contains(name);
        if ports.len() > 1 && !copies {
            found.push(Breach::Entries {
                array: name,
                ports: ports.clone(),
            });
        }
    }
    found
}

/// Every array a step touched, by name.
fn touched(step: &Step, budget: &ProgramBudget) -> BTreeSet<&'static str> {
    let mut names = BTreeSet::new();
    for (lane, log) in step.touches.iter().enumerate() {
        for &touch in log {
            names.insert(match touch {
                Touch::Output(half) => OUTPUTS[lane][half_index(half)],
                Touch::Input(half) => input_array(budget, lane, half),
            });
        }
    }
    for (name, ports) in &step.changed {
        if !ports.is_empty() {
            names.insert(name);
        }
    }
    names
}

/// A switch driven step by step, each step recorded with what it was.
struct Drive {
    s: Switch,
    budget: ProgramBudget,
    /// (what, the input came back, multicast allowed, the step).
    packets: Vec<(String, bool, bool, Step)>,
    control: Vec<(String, Step)>,
}

fn t(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

/// An input is coming back: dead, unheard, or joining in either lane (a cut one takes nothing).
fn coming_back(p: &Port) -> bool {
    !p.cut && p.state != InputState::Live || matches!(p.commit, CommitInput::Unheard | CommitInput::Joining)
}

impl Drive {
    /// Leaf 0 of a leaf-spine fabric: processes 0..3 below it, two spines above.
    fn new() -> Drive {
        let wiring = Wiring::new(Topology::leaf_spine(2, 2, 3).unwrap(), 1).unwrap();
        let routes = routing::build(&wiring).unwrap().swap_remove(0);
        let config = SwitchConfig {
            beacon_interval: Duration::from_nanos(1_000),
            dead_after_intervals: 10,
            ..SwitchConfig::default()
        };
        let s = Switch::new(0, &wiring, routes, config, t(0));
        let budget = s.budget();
        Drive {
            s,
            budget,
            packets: Vec::new(),
            control: Vec::new(),
        }
    }

    fn frame(&mut self, what: &str, now: u64, port: PortId, mut frame: Vec<u8>) -> Route {
        let back = coming_back(&self.s.ports[port as usize]);
        let before = begin(&mut self.s);
        let route = self.s.classify(t(now), port, &frame);
        self.s.handle_frame(t(now), port, &mut frame, route);
        let step = end(&mut self.s, &before);
        let multicast = route == Route::Consume;
        self.packets.push((what.to_string(), back, multicast, step));
        route
    }

    fn stalled(&mut self, now: u64, port: PortId, frame: Vec<u8>) {
        let before = begin(&mut self.s);
        self.s.handle_stalled(t(now), port, &frame);
        let step = end(&mut self.s, &before);
        self.packets.push(("stalled".to_string(), false, false, step));
    }

    /// Beacons the switch sends, one step each.
    fn transmit_all(&mut self, now: u64) -> usize {
        let mut sent = 0;
        for port in 0..self.s.ports.len() as PortId {
            let before = begin(&mut self.s);
            let mut buf = [0u8; 256];
            sent += usize::from(self.s.poll_transmit(t(now), port, &mut buf).is_some());
            let step = end(&mut self.s, &before);
            self.packets.push(("beacon sent".to_string(), false, false, step));
        }
        sent
    }

    fn control(&mut self, what: &str, order: impl FnOnce(&mut Switch)) {
        let before = begin(&mut self.s);
        order(&mut self.s);
        let step = end(&mut self.s, &before);
        self.control.push((what.to_string(), step));
    }

    fn tick(&mut self, now: u64) {
        self.control("tick", |s| s.handle_timeout(t(now)));
    }

    fn beacons(&mut self, now: u64, ports: &[PortId]) {
        for &port in ports {
            self.frame("beacon", now, port, beacon(now));
        }
    }
}

fn data(opcode: Opcode, src: u32, dst: u32, now: u64) -> Vec<u8> {
    let payload: &[u8] = if opcode == Opcode::Ack { &[0; 16] } else { &[] };
    packet(opcode, src, dst, 1, now, now, (0, 1), payload)
}

/// Runs leaf 0 through every code path: start, data each way, the reliable service's packets,
/// a frame held in the ingress buffer, drops, ticks, a dead input and its return, an input
/// heard only after it timed out unheard, a process cut, removed and readmitted by the
/// controller.
fn drive() -> Drive {
    let mut d = Drive::new();
    let all: Vec<PortId> = (0..5).collect();
    // The second spine (port 4) stays silent until it has timed out unheard.
    d.beacons(100, &[0, 1, 2, 3]);
    d.transmit_all(150);
    assert_eq!(
        d.frame("data turning around", 200, 0, data(Opcode::Data, 0, 1, 200)),
        Route::Forward(1)
    );
    assert!(matches!(
        d.frame("data going up", 210, 0, data(Opcode::Data, 0, 3, 210)),
        Route::Forward(3 | 4)
    ));
    assert_eq!(
        d.frame("data going down", 220, 3, data(Opcode::Data, 3, 2, 220)),
        Route::Forward(2)
    );
    assert!(matches!(
        d.frame("prepare", 230, 1, data(Opcode::Prepare, 1, 4, 230)),
        Route::Forward(3 | 4)
    ));
    assert_eq!(
        d.frame("ack", 240, 2, data(Opcode::Ack, 2, 0, 240)),
        Route::Forward(0)
    );
    assert_eq!(
        d.frame("nak", 250, 3, data(Opcode::Nak, 5, 1, 250)),
        Route::Forward(1)
    );
    d.stalled(260, 2, data(Opcode::Data, 2, 0, 260));
    assert_eq!(
        d.frame("spoofed source", 270, 0, data(Opcode::Data, 1, 2, 270)),
        Route::Drop
    );
    let ahead_ns = 60_000_000_000;
    assert_eq!(
        d.frame("implausible barrier", 280, 1, beacon(ahead_ns)),
        Route::Drop
    );
    assert_eq!(d.frame("malformed", 290, 1, vec![0xff; 7]), Route::Drop);
    d.transmit_all(300);
    // Input 2 goes silent and dies; the others keep beaconing.
    for tick in 1..=14u64 {
        let now = tick * 1_000;
        d.tick(now);
        d.beacons(now + 10, &[0, 1, 3]);
        d.transmit_all(now + 20);
    }
    assert_eq!(d.s.ports[2].state, InputState::Dead);
    assert_eq!(d.s.ports[4].commit, CommitInput::Unheard);
    d.frame("beacon on a never-heard input", 14_900, 4, beacon(14_900));
    d.frame("beacon on a returning input", 15_000, 2, beacon(15_000));
    d.frame(
        "data on a joining input",
        15_100,
        2,
        data(Opcode::Data, 2, 1, 15_100),
    );
    // The controller cuts process 1, takes it out of the commit lane, and readmits it.
    d.control("cut", |s| s.cut_input(1).unwrap());
    d.frame("frame on a cut input", 15_200, 1, beacon(15_200));
    d.control("remove", |s| s.remove_input(1).unwrap());
    d.control("readmit", |s| s.readmit_input(t(15_300), 1).unwrap());
    d.frame("beacon on a readmitted input", 15_400, 1, beacon(15_400));
    d.frame(
        "data on a readmitted input",
        15_500,
        1,
        data(Opcode::Data, 1, 0, 15_500),
    );
    for tick in 16..=18u64 {
        let now = tick * 1_000;
        d.tick(now);
        d.beacons(now + 10, &all);
        d.transmit_all(now + 20);
    }
    d
}

/// Paper 6.2.1: per packet, "barrier register of the input link is updated in the first
/// stateful pipeline stage", then the minimum, then the packet's barrier field.
#[test]
fn every_packet_on_a_live_input_stays_within_the_declared_budget() {
    let d = drive();
    let mut checked = 0;
    for (what, back, multicast, step) in &d.packets {
        if *back {
            continue;
        }
        assert_eq!(
            breaches(step, &d.budget, *multicast),
            Vec::new(),
            "{what}: {step:?}"
        );
        checked += 1;
    }
    assert!(checked > 100, "the drive ran {checked} packets");
}

/// The declaration is what the code uses: every declared array is touched by some packet,
/// and nothing undeclared is.
#[test]
fn the_packets_touch_exactly_the_declared_arrays() {
    let d = drive();
    let used: BTreeSet<&str> = d
        .packets
        .iter()
        .flat_map(|(_, _, _, s)| touched(s, &d.budget))
        .collect();
    let declared: BTreeSet<&str> = d.budget.arrays.iter().map(|a| a.name).collect();
    assert_eq!(used, declared);
}

/// The budget's one `SecondPass`: a frame on a returning input (dead, never heard, readmitted)
/// writes its register after the output it freezes it at, and again when it admits it.
#[test]
fn a_frame_on_a_returning_input_needs_a_second_pass_as_declared() {
    let d = drive();
    let returning: Vec<_> = d.packets.iter().filter(|(_, back, _, _)| *back).collect();
    let whats: Vec<&str> = returning.iter().map(|(what, ..)| what.as_str()).collect();
    assert_eq!(
        whats,
        [
            "beacon on a never-heard input",
            "beacon on a returning input",
            "beacon on a readmitted input"
        ]
    );
    let mut out_of_order = 0;
    for (what, _, multicast, step) in returning {
        for breach in breaches(step, &d.budget, *multicast) {
            match breach {
                Breach::Order { array } | Breach::Accesses { array, .. } => {
                    assert!(
                        array.starts_with("min_tree_") || array.starts_with("input_barrier_"),
                        "{what}: {array}"
                    );
                    out_of_order += usize::from(matches!(breach, Breach::Order { .. }));
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }
    assert!(out_of_order > 0, "no returning input broke pipeline order");
    assert!(d.budget.beyond.contains(&Beyond::SecondPass(JOINING_INPUT)));
}

/// Eager beacons are a multicast (the budget's `multicast`): a beacon completing a wave marks
/// several output ports at once. Without the allowance it would be a loop over the ports.
#[test]
fn a_beacon_completing_a_wave_is_a_multicast() {
    let d = drive();
    let copies = d
        .packets
        .iter()
        .filter(|(_, _, multicast, step)| {
            *multicast
                && breaches(step, &d.budget, false).iter().any(|b| {
                    matches!(
                        b,
                        Breach::Entries {
                            array: "beacon_state",
                            ..
                        }
                    )
                })
        })
        .count();
    assert!(copies > 0);
    assert!(!d.budget.multicast.is_empty());
}

/// Timers loop over the ports (beacons due, dead links): control-plane work on a chip (the
/// packet generator and the switch CPU), as the budget says, never a packet's.
#[test]
fn ticks_loop_over_the_ports_so_they_are_control_plane_work() {
    let d = drive();
    let ports = d.s.ports.len();
    let widest = d
        .control
        .iter()
        .filter(|(what, _)| what == "tick")
        .flat_map(|(_, step)| {
            step.changed
                .iter()
                .filter(|(n, _)| *n == "beacon_state")
                .map(|(_, p)| p.len())
        })
        .max();
    assert_eq!(widest, Some(ports));
    assert!(!d.budget.control_plane.is_empty());
}

/// Paper 6.2.1: "For a typical 32 port switch, it would cost 5 stages out of the 16 ingress
/// stages." A ToR of 32 processes and 8 uplinks: 5 tree levels for its uplink half, 9 stages
/// in all; within Tofino's limits but for the declared second pass.
#[test]
fn a_32_port_switch_fits_a_tofino_but_for_the_second_pass() {
    let wiring = Wiring::new(Topology::leaf_spine(2, 8, 32).unwrap(), 1).unwrap();
    let routes = routing::build(&wiring).unwrap().swap_remove(0);
    let s = Switch::new(0, &wiring, routes, SwitchConfig::default(), t(0));
    let budget = s.budget();
    assert_eq!(budget.arrays_named("min_tree_be_up").count(), 5);
    assert_eq!(budget.arrays_named("min_tree_be_down").count(), 3);
    assert_eq!(budget.stages, 9);
    assert_eq!(
        check(&budget, &ChipBudget::TOFINO),
        vec![onepipe_fabric::Excess::Beyond(Beyond::SecondPass(JOINING_INPUT))]
    );
}
