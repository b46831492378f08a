//! The switch program on a small leaf-spine (2 leaves, 2 spines, 2 hosts per leaf, K = 2):
//! reservations hop by hop (paper 3.2, 3.3), source routing of data, releases, blocking into
//! rejects to both ends, cleanup at delta_cosy (paper 4), and the drops it counts.

use super::*;
use onepipe_fabric::{Peer, Topology, routing};
use onepipe_wire::cosy::HEADER_LEN;
use proptest::prelude::*;

const K: u8 = 2;
const CLEANUP: Duration = Duration::from_micros(100);

/// Processes 0, 1 under leaf0 (switch 0); 2, 3 under leaf1 (switch 1); spines are 2 and 3.
struct Fabric {
    wiring: Wiring,
    switches: Vec<CosySwitch>,
}

/// Where a frame ended up.
#[derive(Debug, PartialEq)]
enum End {
    Process(u32, Vec<u8>),
    Dropped { at: usize },
}

impl Fabric {
    fn new() -> Fabric {
        let wiring = Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap();
        let routes = routing::build(&wiring).unwrap();
        let config = SwitchConfig {
            k: K,
            cleanup_after: CLEANUP,
            ..SwitchConfig::default()
        };
        let switches = routes
            .into_iter()
            .enumerate()
            .map(|(i, r)| CosySwitch::new(i, &wiring, r, config.clone()))
            .collect();
        Fabric { wiring, switches }
    }

    /// Sends `frame` from `process` into its ToR at `now` and follows it (and every frame a
    /// switch originates meanwhile) to where each ends.
    fn send(&mut self, now: Instant, process: u32, frame: Vec<u8>) -> Vec<End> {
        let spec = self.wiring.processes[process as usize];
        let mut pending = vec![(spec.tor, spec.tor_port, frame)];
        let mut ends = Vec::new();
        while let Some((s, port, mut frame)) = pending.pop() {
            let sw = &mut self.switches[s];
            let route = sw.classify(now, port, &frame);
            sw.handle_frame(now, port, &mut frame, route);
            sw.invariants();
            let mut buf = vec![0u8; onepipe_fabric::node::FRAME_MAX];
            for p in 0..self.wiring.switch_ports[s].len() as PortId {
                while let Some(n) = self.switches[s].poll_transmit(now, p, &mut buf) {
                    pending.push(self.next(s, p, buf[..n].to_vec(), &mut ends));
                }
            }
            match route {
                Route::Forward(out) => pending.push(self.next(s, out, frame, &mut ends)),
                _ => ends.push(End::Dropped { at: s }),
            }
            pending.retain(|(s, _, _)| *s != usize::MAX);
        }
        ends
    }

    /// The switch and port a frame leaving switch `s` by `port` reaches, or its process.
    fn next(&self, s: usize, port: PortId, frame: Vec<u8>, ends: &mut Vec<End>) -> (usize, PortId, Vec<u8>) {
        match self.wiring.switch_ports[s][port as usize].peer {
            Peer::Switch { switch, port } => (switch, port, frame),
            Peer::Process(p) => {
                ends.push(End::Process(p, frame));
                (usize::MAX, 0, Vec::new())
            }
        }
    }

    fn reserved(&self) -> usize {
        self.switches.iter().map(|s| s.vlinks().reserved_total()).sum()
    }
}

fn frame(repr: &Repr, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0; HEADER_LEN + payload.len()];
    repr.emit(&mut f).unwrap();
    f[HEADER_LEN..].copy_from_slice(payload);
    f
}

fn parse(f: &[u8]) -> Repr {
    Repr::parse(f).unwrap().0
}

fn rsvp(sender: u32, receiver: u32, msg: u32, nonce: u32) -> Repr {
    let mut r = Repr::new(Kind::Rsvp, sender, receiver, msg);
    r.nonce = nonce;
    r
}

/// The rsvp from receiver 2 reaches sender 0 over three switches, each recording its hop.
fn reserve_path(f: &mut Fabric, msg: u32, nonce: u32) -> Repr {
    let ends = f.send(Instant::ZERO, 2, frame(&rsvp(0, 2, msg, nonce), &[]));
    let [End::Process(0, got)] = &ends[..] else {
        panic!("the rsvp reaches the sender: {ends:?}");
    };
    let got = parse(got);
    assert_eq!(got.kind, Kind::Rsvp);
    got
}

#[test]
fn an_rsvp_reserves_a_virtual_link_at_every_switch_it_crosses() {
    let mut f = Fabric::new();
    let got = reserve_path(&mut f, 1, 99);
    let switches: Vec<u16> = got.hops().iter().map(|h| h.switch).collect();
    assert_eq!(switches.len(), 3, "leaf1, a spine, leaf0");
    assert_eq!((switches[0], switches[2]), (1, 0));
    assert!(switches[1] == 2 || switches[1] == 3);
    assert_eq!(f.reserved(), 3);
    let leaf0_hop = got.hops()[2];
    assert_eq!(
        f.wiring.switch_ports[0][leaf0_hop.port as usize].peer,
        Peer::Process(0),
        "the sender's ToR reserves the sender's own link: where the data comes in"
    );
}

#[test]
fn data_follows_the_recorded_hops_and_a_complete_releases_them() {
    let mut f = Fabric::new();
    let mut path = reserve_path(&mut f, 1, 99);
    path.kind = Kind::Data;
    path.start_along();
    path.size = 0;
    let ends = f.send(Instant::ZERO, 0, frame(&path, b"hello"));
    let [End::Process(2, got)] = &ends[..] else {
        panic!("data reaches the receiver: {ends:?}");
    };
    assert_eq!(&got[HEADER_LEN..], b"hello");
    assert_eq!(parse(got).pointer, 0, "every hop visited");
    assert_eq!(f.reserved(), 3, "data does not release");
    let mut complete = path;
    complete.kind = Kind::Complete;
    let ends = f.send(Instant::ZERO, 0, frame(&complete, &[]));
    assert!(matches!(&ends[..], [End::Process(2, _)]));
    assert_eq!(f.reserved(), 0, "the complete released every hop");
    let ends = f.send(Instant::ZERO, 0, frame(&path, b"late"));
    assert_eq!(ends, vec![End::Dropped { at: 0 }], "no reservation left");
    assert_eq!(f.switches[0].counters().unreserved, 1);
}

#[test]
fn with_every_virtual_link_taken_an_rsvp_becomes_a_reject_to_both_ends() {
    let mut f = Fabric::new();
    // The sender's own link at leaf0 has K virtual links: the (K+1)th rsvp toward it blocks
    // there, after leaf1 and a spine reserved.
    for msg in 0..K as u32 {
        reserve_path(&mut f, msg, 1000 + msg);
    }
    let before = f.reserved();
    let ends = f.send(Instant::ZERO, 2, frame(&rsvp(0, 2, 50, 7), &[]));
    assert_eq!(ends.len(), 2, "{ends:?}");
    let to_sender = ends.iter().find_map(|e| match e {
        End::Process(0, f) => Some(parse(f)),
        _ => None,
    });
    let to_receiver = ends.iter().find_map(|e| match e {
        End::Process(2, f) => Some(parse(f)),
        _ => None,
    });
    let (s, r) = (to_sender.unwrap(), to_receiver.unwrap());
    assert_eq!((s.kind, s.along_path, s.blocked), (Kind::Reject, false, true));
    assert_eq!((r.kind, r.along_path, r.msg), (Kind::Reject, true, 50));
    assert_eq!(
        f.reserved(),
        before,
        "what the rsvp reserved on the way was released"
    );
    assert_eq!(f.switches[0].counters().blocked, 1);
}

#[test]
fn a_host_cannot_speak_for_another() {
    let mut f = Fabric::new();
    // Process 0 sends a request claiming to be process 1.
    let ends = f.send(Instant::ZERO, 0, frame(&Repr::new(Kind::Request, 1, 2, 1), &[]));
    assert_eq!(ends, vec![End::Dropped { at: 0 }]);
    assert_eq!(f.switches[0].counters().spoofed, 1);
    let ends = f.send(Instant::ZERO, 0, frame(&Repr::new(Kind::Request, 0, 2, 1), &[]));
    assert!(
        matches!(&ends[..], [End::Process(2, _)]),
        "its own request is routed"
    );
}

#[test]
fn a_release_with_the_wrong_nonce_frees_nothing() {
    let mut f = Fabric::new();
    let path = reserve_path(&mut f, 1, 99);
    let mut forged = path;
    forged.kind = Kind::Complete;
    forged.start_along();
    forged.nonce = 98;
    let ends = f.send(Instant::ZERO, 0, frame(&forged, &[]));
    assert_eq!(ends, vec![End::Dropped { at: 0 }]);
    assert_eq!(f.reserved(), 3);
}

#[test]
fn unreleased_reservations_are_cleared_at_delta_cosy() {
    let mut f = Fabric::new();
    reserve_path(&mut f, 1, 99);
    let due = f.switches.iter().filter_map(|s| s.poll_timeout()).max().unwrap();
    assert_eq!(due, Instant::ZERO + CLEANUP);
    for s in &mut f.switches {
        s.handle_timeout(Instant::from_nanos(due.as_nanos() - 1));
    }
    assert_eq!(f.reserved(), 3, "not before");
    for s in &mut f.switches {
        s.handle_timeout(due);
        s.invariants();
    }
    assert_eq!(f.reserved(), 0);
    assert_eq!(f.switches.iter().map(|s| s.counters().expired).sum::<u64>(), 3);
}

#[test]
fn malformed_frames_are_counted_and_dropped() {
    let mut f = Fabric::new();
    let ends = f.send(Instant::ZERO, 0, vec![0xa0; 10]);
    assert_eq!(ends, vec![End::Dropped { at: 0 }]);
    let mut bad = Repr::new(Kind::Data, 0, 2, 1);
    bad.along_path = false;
    f.send(Instant::ZERO, 0, frame(&bad, b"x"));
    assert_eq!(f.switches[0].counters().malformed, 2);
}

proptest! {
    /// Any mix of rsvps, completes, rejects, data and garbage from any host, at any times:
    /// no port ever holds more than K reservations, the table stays consistent, and after
    /// delta_cosy nothing is left reserved.
    #[test]
    fn no_sequence_breaks_the_virtual_links(
        steps in proptest::collection::vec((0u32..4, 0u32..4, 0u32..6, 0u8..7, 0u64..50), 1..80),
    ) {
        let mut f = Fabric::new();
        let mut now = Instant::ZERO;
        let mut seen: Vec<Repr> = Vec::new();
        for (from, to, msg, kind, dt_us) in steps {
            now += Duration::from_micros(dt_us);
            for s in &mut f.switches {
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    s.handle_timeout(now);
                }
            }
            let frame_bytes = match kind {
                0 => frame(&rsvp(to, from, msg, msg * 7), &[]),
                1..=3 if !seen.is_empty() => {
                    let mut r = seen[(msg as usize) % seen.len()];
                    r.kind = [Kind::Data, Kind::Complete, Kind::Reject][kind as usize - 1];
                    r.start_along();
                    frame(&r, b"payload")
                }
                4 => frame(&Repr::new(Kind::Request, from, to, msg), &[]),
                _ => vec![0xa0 | kind; (msg * 20) as usize],
            };
            let origin = match Repr::parse(&frame_bytes) {
                Ok((r, _)) if kind != 0 => r.originator(),
                _ => from,
            };
            for end in f.send(now, origin, frame_bytes) {
                if let End::Process(_, got) = end && let Ok((r, _)) = Repr::parse(&got) && r.kind == Kind::Rsvp {
                    seen.push(r);
                }
            }
            for s in &f.switches {
                prop_assert!(s.vlinks().peak_reserved().iter().all(|&p| p <= K));
            }
        }
        let end = now + CLEANUP;
        for s in &mut f.switches {
            s.handle_timeout(end);
            s.invariants();
        }
        prop_assert_eq!(f.reserved(), 0);
    }
}
