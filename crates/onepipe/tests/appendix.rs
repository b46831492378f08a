//! The paper's appendix (Correctness Analysis), one scenario per row: what becomes of a message
//! M: S -> R, part of a scattering, under each kind of failure. Each test builds its situation
//! exactly, in virtual time, on a two-rack fabric of real switches and endpoints (tests/common)
//! with the controller wired in as the management plane, then checks the row's outcome:
//! delivered or discarded, and the same at every correct receiver of the scattering.
//!
//! A message counts as discarded at a receiver only once that receiver's commit barrier is past
//! its timestamp and it was not delivered: before that it might only be waiting.
//!
//! The two rows that end in Receiver Recovery (paper 5.2: R fails after its ACK, or its path
//! fails before the commit barrier reaches it) follow R until it comes back, delivers or
//! discards its buffer, and rejoins as a new process; the ordering checks and atomicity then
//! cover R's deliveries after the recovery too, with R counted as a correct receiver. The row
//! where the path between S and R fails but both reach the controller blackholes that path for
//! reliable packets and checks that the controller forwards them.

mod common;

use common::{End, Net, NetConfig};
use onepipe::{FailureReason, SendFailure};
use onepipe_check::{Event, check_all, check_atomicity};
use onepipe_fabric::{Peer, Topology, routing};
use onepipe_proto::controller::graph::Graph;
use onepipe_proto::controller::{
    Controller, ControllerConfig, Input, LostRecall, Member, Output, PacketBytes,
};
use onepipe_proto::endpoint::{Recovery, RecoveryReport};
use onepipe_proto::switch::{Switch, SwitchConfig};
use onepipe_wire::packet::{Opcode, Packet, Repr};
use onepipe_wire::{Duration, Instant};

// The fabric: leaf 0 holds S and R1, leaf 1 holds R2 and X, spines (switches 2 and up) join
// them.
const S: u32 = 0;
const R1: u32 = 1;
const R2: u32 = 2;
const X: u32 = 3;
const LEAF0: usize = 0;
const LEAF1: usize = 1;

/// A switch takes an input silent for this many beacon intervals as dead and reports it.
const DEAD_AFTER_INTERVALS: u32 = 20;
/// The longest any scenario waits for something, in virtual time.
const PATIENCE: Duration = Duration::from_millis(50);

/// A reliable scattering sent: its sender, id and timestamp.
#[derive(Clone, Copy, Debug)]
struct Msg {
    src: u32,
    id: u64,
    ts: Instant,
}

fn repr(frame: &[u8]) -> Repr {
    Repr::parse(&Packet::new_checked(frame).unwrap()).unwrap()
}

/// Whether a frame is lost as it enters a link, given the link's index in `net.links`.
type LossRule = dyn FnMut(usize, &Repr) -> bool;

/// The network of tests/common plus the controller, driven one step at a time.
struct Scenario {
    net: Net,
    controller: Controller,
    /// Crashed processes: they no longer take part in the management plane either. (A process
    /// marked here but not cut off is one only the controller cannot reach.)
    crashed: Vec<bool>,
    /// Answers to forwarded packets, for the controller at the next step (a management link
    /// takes time too).
    answers: Vec<Input>,
    /// Per process, the announcements it took and has not answered: (epoch, failed processes).
    unanswered: Vec<Vec<(u64, Vec<u32>)>>,
    /// Per process recovering (paper 5.2, Receiver Recovery): the incarnation, and the recalls
    /// heard for it so far.
    recovering: Vec<Option<(u64, Vec<LostRecall>)>>,
    /// What each recovery did.
    recoveries: Vec<Vec<RecoveryReport>>,
    /// Asked about each frame at each link it enters.
    drop: Box<LossRule>,
    dropped: Vec<Repr>,
}

impl Scenario {
    fn new() -> Scenario {
        Scenario::with_spines(1)
    }

    fn with_spines(spines: usize) -> Scenario {
        let mut cfg = NetConfig::default();
        // Virtual time has no scheduling stalls: a connection silent this long has a broken
        // path, and its Recall must be settled within the answer timeout (2 ms) below.
        cfg.reliable.forward_after = Duration::from_micros(500);
        let mut net = Net::new(Topology::leaf_spine(2, spines, 2).unwrap(), 1, &cfg);
        for (p, tor) in [(S, LEAF0), (R1, LEAF0), (R2, LEAF1), (X, LEAF1)] {
            assert_eq!(net.wiring.processes[p as usize].tor, tor);
        }
        // The harness's switches wait 10 000 beacon intervals before they take an input as dead;
        // these report a silent one within a few tens of microseconds.
        let config = SwitchConfig {
            beacon_interval: cfg.beacon_interval,
            dead_after_intervals: DEAD_AFTER_INTERVALS,
            ecmp_seed: cfg.ecmp_seed,
            promise_lead: Duration::ZERO,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
        };
        let tables = routing::build(&net.wiring).unwrap();
        net.switches = tables
            .into_iter()
            .enumerate()
            .map(|(s, r)| Switch::new(s, &net.wiring, r, config.clone(), net.now))
            .collect();
        let mut controller = Controller::new(
            Graph::new(&net.wiring),
            ControllerConfig {
                settle: cfg.beacon_interval.saturating_mul(10),
                answer_timeout: Duration::from_millis(2),
            },
        );
        let n = net.endpoints.len();
        for p in 0..n as u32 {
            controller
                .handle_input(net.now, Input::Register { process: p })
                .unwrap();
            net.endpoints[p as usize].enable_forwarding();
        }
        let mut s = Scenario {
            net,
            controller,
            crashed: vec![false; n],
            answers: Vec::new(),
            unanswered: vec![Vec::new(); n],
            recovering: vec![None; n],
            recoveries: vec![Vec::new(); n],
            drop: Box::new(|_, _| false),
            dropped: Vec::new(),
        };
        // Every link heard from, barriers flowing.
        s.run_for(Duration::from_micros(30));
        s
    }

    fn tick(&mut self) {
        self.net.tick();
        let now = self.net.now;
        // Links have no jitter: a frame that entered one in this step is due one delay from now.
        for (l, link) in self.net.links.iter_mut().enumerate() {
            let entered = now + link.delay;
            let (drop, dropped) = (&mut self.drop, &mut self.dropped);
            link.queue.retain(|(at, f)| {
                let r = repr(f);
                let lost = *at == entered && drop(l, &r);
                if lost {
                    dropped.push(r);
                }
                !lost
            });
        }
        self.manage();
    }

    /// The management plane, as control.rs runs it: switches report dead inputs and apply
    /// orders; correct processes take announcements and answer once their part is done, ask
    /// for forwards and answer forwarded packets.
    fn manage(&mut self) {
        let now = self.net.now;
        for (s, sw) in self.net.switches.iter_mut().enumerate() {
            while let Some(e) = sw.poll_event() {
                let input = onepipe::control::switch_input(Member::Switch(s), e);
                self.controller.handle_input(now, input).unwrap();
            }
        }
        let mut buf = [0u8; 4096];
        for answer in std::mem::take(&mut self.answers) {
            self.controller.handle_input(now, answer).unwrap();
        }
        for p in 0..self.net.endpoints.len() {
            while let Some((to, len)) = self.net.endpoints[p].poll_forward(&mut buf) {
                let ask = Input::Forward {
                    from: p as u32,
                    to,
                    packet: PacketBytes(buf[..len].to_vec()),
                };
                if !self.crashed[p] {
                    self.controller.handle_input(now, ask).unwrap();
                }
            }
        }
        if self.controller.poll_timeout().is_some_and(|t| t <= now) {
            self.controller.handle_timeout(now);
        }
        self.controller.invariants();
        if let Some(ends) = self.controller.take_reroute() {
            let tables = routing::build_avoiding(&self.net.wiring, &|s, p| ends.contains(&(s, p)));
            for (sw, r) in self.net.switches.iter_mut().zip(tables) {
                sw.set_routes(r);
            }
        }
        while let Some(o) = self.controller.poll_event() {
            match o {
                Output::Announce { to, epoch, failures } => {
                    if self.crashed[to as usize] {
                        continue;
                    }
                    let ep = &mut self.net.endpoints[to as usize];
                    for f in &failures {
                        ep.on_process_failed(now, f.process, f.ts).unwrap();
                    }
                    let failed = failures.iter().map(|f| f.process).collect();
                    self.unanswered[to as usize].push((epoch, failed));
                }
                Output::RemoveInputs { switch, ports } => {
                    for p in ports {
                        self.net.switches[switch].remove_input(p).unwrap();
                    }
                }
                Output::CutInput { switch, port } => self.net.switches[switch].cut_input(port).unwrap(),
                Output::Readmit { switch, ports } => {
                    for p in ports {
                        self.net.switches[switch].readmit_input(now, p).unwrap();
                    }
                }
                Output::Forward { to, id, packet } => {
                    if self.crashed[to as usize] {
                        continue;
                    }
                    let ep = &mut self.net.endpoints[to as usize];
                    let ack = ep
                        .handle_forwarded(now, &packet.0, &mut buf)
                        .unwrap()
                        .map(|len| PacketBytes(buf[..len].to_vec()));
                    self.answers.push(Input::Forwarded { process: to, id, ack });
                }
                other => self.recovery_output(other),
            }
        }
        for p in 0..self.net.endpoints.len() {
            if self.crashed[p] {
                continue;
            }
            // Recalls its failed receivers cannot take go before the answers.
            let mut lost = Vec::new();
            while let Some((receiver, ts, msg_id)) = self.net.endpoints[p].poll_lost_recall() {
                lost.push((receiver, ts.as_nanos(), msg_id));
            }
            if !lost.is_empty() {
                let input = Input::RecallLost {
                    process: p as u32,
                    lost,
                };
                self.controller.handle_input(now, input).unwrap();
            }
            let ep = &self.net.endpoints[p];
            let controller = &mut self.controller;
            self.unanswered[p].retain(|(epoch, failed)| {
                let done = failed.iter().all(|&f| ep.failure_complete(f));
                if done {
                    let answer = Input::Completed {
                        process: p as u32,
                        epoch: *epoch,
                    };
                    controller.handle_input(now, answer).unwrap();
                }
                !done
            });
        }
    }

    /// A process's side of Receiver Recovery (paper 5.2), as control_recovery.rs runs it: told
    /// of its own failure it asks to recover, collects the recalls it could not take, recovers
    /// its endpoint and rejoins; peers reset their connections to a process that rejoined.
    fn recovery_output(&mut self, o: Output) {
        let now = self.net.now;
        match o {
            Output::OwnFailure { to, ts, incarnation } if !self.crashed[to as usize] => {
                let ep = &mut self.net.endpoints[to as usize];
                ep.on_own_failure(ts, incarnation);
                if ep.is_own_failure().is_some() && ep.incarnation() == incarnation {
                    self.recovering[to as usize] = Some((incarnation, Vec::new()));
                    let ask = Input::Recover {
                        process: to,
                        incarnation,
                    };
                    self.controller.handle_input(now, ask).unwrap();
                }
            }
            Output::LostRecalls {
                to,
                incarnation,
                recalls,
            } => {
                if let Some((i, lost)) = &mut self.recovering[to as usize]
                    && *i == incarnation
                {
                    lost.extend(recalls);
                }
            }
            Output::Recovery {
                to,
                incarnation,
                ts,
                failures,
                failed_now,
                recalls,
                recalls_truncated,
            } => {
                let Some((_, lost)) = self.recovering[to as usize].take() else {
                    return;
                };
                let r = Recovery {
                    failure_ts: ts,
                    incarnation,
                    failures,
                    failed_now,
                    recalls_complete: !recalls_truncated && lost.len() == recalls as usize,
                    recalls: lost,
                };
                let report = self.net.endpoints[to as usize].recover(now, &r).unwrap();
                self.recoveries[to as usize].push(report);
                self.unanswered[to as usize].clear();
                let rejoin = Input::Rejoin {
                    process: to,
                    incarnation,
                };
                self.controller.handle_input(now, rejoin).unwrap();
            }
            Output::Rejoined {
                to,
                process,
                incarnation,
            } if !self.crashed[to as usize] => {
                self.net.endpoints[to as usize]
                    .on_process_rejoined(process, incarnation)
                    .unwrap();
            }
            _ => {}
        }
    }

    /// From now on, frames for which `f(link, frame)` holds are lost.
    fn lose(&mut self, f: impl FnMut(usize, &Repr) -> bool + 'static) {
        self.drop = Box::new(f);
    }

    /// A routing problem between `a` and `b` from now on: every reliable packet between them
    /// (prepares, recalls, ACKs) is lost, both ways, while beacons, and with them both
    /// barriers, flow, and so does all other traffic.
    fn blackhole(&mut self, a: u32, b: u32) {
        self.lose(move |_, r| {
            let between = (r.src, r.dst) == (a, b) || (r.src, r.dst) == (b, a);
            between && matches!(r.opcode, Opcode::Prepare | Opcode::Ack)
        });
    }

    /// `p`'s management link fails: the controller no longer reaches it, nor it the
    /// controller, while it runs on in the fabric.
    fn lose_controller(&mut self, p: u32) {
        self.crashed[p as usize] = true;
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.net.now + d;
        while self.net.now < until {
            self.tick();
        }
    }

    /// Steps until `done` holds after a step; panics after `PATIENCE`.
    fn run_until(&mut self, what: &str, mut done: impl FnMut(&Scenario) -> bool) {
        let give_up = self.net.now + PATIENCE;
        while !done(self) {
            assert!(self.net.now < give_up, "never happened: {what}");
            self.tick();
        }
    }

    /// Steps until every process of `failed` is declared failed, no recovery is in progress,
    /// and the commit barrier of each of `receivers` is past `ts`: a message at `ts` that one
    /// of them has not delivered by then is discarded there.
    fn run_until_recovered(&mut self, failed: &[u32], ts: Instant, receivers: &[u32]) {
        self.run_until("recovered and committed past the message", |s| {
            failed.iter().all(|&p| s.controller.failure_of(p).is_some())
                && !s.controller.recovering()
                && receivers
                    .iter()
                    .all(|&r| s.net.endpoints[r as usize].commit_barrier() > ts)
        });
    }

    fn send(&mut self, src: u32, dsts: &[u32]) -> Msg {
        let scatter: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &b"m"[..])).collect();
        let id = self.net.send_reliable(src, &scatter).unwrap();
        let ts = self.net.logs[src as usize]
            .events
            .iter()
            .find_map(|e| match *e {
                Event::Send { ts_ns, msg_id, .. } if msg_id == id => Some(ts_ns),
                _ => None,
            })
            .expect("released at once: windows are open");
        Msg {
            src,
            id,
            ts: Instant::from_nanos(ts),
        }
    }

    /// How many times `p` delivered `m`.
    fn deliveries(&self, p: u32, m: Msg) -> usize {
        self.net.logs[p as usize]
            .events
            .iter()
            .filter(|e| matches!(**e, Event::Deliver { src, msg_id, .. } if src == m.src && msg_id == m.id))
            .count()
    }

    fn prepared(&self, p: u32) -> usize {
        self.net.endpoints[p as usize].prepared().len()
    }

    fn downlink(&self, p: u32) -> usize {
        let spec = self.net.wiring.processes[p as usize];
        self.net.switch_out[spec.tor][spec.tor_port as usize]
    }

    /// `p`'s only link fails both ways, losing what is in flight on it; `p` itself runs on.
    fn cut_off(&mut self, p: u32) {
        for l in [self.net.process_out[p as usize], self.downlink(p)] {
            self.net.links[l].loss = 1.0;
            self.net.links[l].queue.clear();
        }
    }

    /// `p`'s link comes back (after [`Scenario::cut_off`] or [`Scenario::crash`]).
    fn restore(&mut self, p: u32) {
        for l in [self.net.process_out[p as usize], self.downlink(p)] {
            self.net.links[l].loss = 0.0;
        }
    }

    /// `p` comes back from a crash with its memory (the fail-recover model of the appendix): its
    /// link is back and it registers with the controller again.
    fn revive(&mut self, p: u32) {
        self.restore(p);
        self.crashed[p as usize] = false;
        let now = self.net.now;
        self.controller
            .handle_input(now, Input::Register { process: p })
            .unwrap();
    }

    /// Steps until `p` has recovered and rejoined (paper 5.2, Receiver Recovery).
    fn run_until_rejoined(&mut self, p: u32) {
        let incarnation = self.net.endpoints[p as usize].incarnation() + 1;
        self.run_until("the failed process recovers and rejoins", |s| {
            s.controller.failure_of(p).is_none() && s.net.endpoints[p as usize].incarnation() == incarnation
        });
        // Its recovered deliveries are taken at the next step, like any other.
        self.tick();
    }

    /// `p` crashes: it is cut off and no longer talks to the controller.
    fn crash(&mut self, p: u32) {
        self.cut_off(p);
        self.crashed[p as usize] = true;
    }

    /// Switch `s` crashes: every link into or out of it fails, losing what is in flight; the
    /// processes below it are cut off with it.
    fn crash_switch(&mut self, s: usize) {
        for (l, link) in self.net.links.iter_mut().enumerate() {
            if matches!(link.to, End::Switch(t, _) if t == s) || self.net.switch_out[s].contains(&l) {
                link.loss = 1.0;
                link.queue.clear();
            }
        }
        for (p, spec) in self.net.wiring.processes.iter().enumerate() {
            self.crashed[p] |= spec.tor == s;
        }
    }

    /// The last commit barrier switch `s` heard on its input at `port`.
    fn register(&self, s: usize, port: u16) -> Instant {
        self.net.switches[s]
            .inputs(self.net.now)
            .find(|i| i.port == port)
            .unwrap()
            .commit_barrier
    }

    /// The last commit barrier `p`'s ToR heard from it.
    fn tor_register(&self, p: u32) -> Instant {
        let spec = self.net.wiring.processes[p as usize];
        self.register(spec.tor, spec.tor_port)
    }

    /// The port of switch `a` that leads to switch `b`.
    fn port_to(&self, a: usize, b: usize) -> u16 {
        let ports = &self.net.wiring.switch_ports[a];
        ports
            .iter()
            .position(|p| matches!(p.peer, Peer::Switch { switch, .. } if switch == b))
            .unwrap() as u16
    }

    fn declared_failed(&self) -> Vec<u32> {
        self.controller.failures().iter().map(|f| f.process).collect()
    }

    fn send_failures(&self, p: u32) -> &[SendFailure] {
        &self.net.failures[p as usize]
    }

    /// The whole run: ordered, without duplicates, and every scattering delivered by all of its
    /// correct receivers or by none.
    fn check_logs(&self) {
        let report = check_all(&self.net.logs);
        assert!(report.ok(), "{report}");
        let partial = check_atomicity(&self.net.logs, &self.declared_failed());
        assert!(partial.is_empty(), "partly delivered: {}", partial[0]);
    }

    /// Delivery goes on after the recovery: a new scattering of `src` reaches `dsts`.
    fn check_delivery_resumes(&mut self, src: u32, dsts: &[u32]) {
        let m = self.send(src, dsts);
        self.run_until("a scattering sent after the recovery is delivered", |s| {
            dsts.iter().all(|&d| s.deliveries(d, m) == 1)
        });
    }
}

fn is_prepare_to(r: &Repr, dst: u32) -> bool {
    r.opcode == Opcode::Prepare && !r.recall && r.dst == dst
}

/// "Packet loss on a fair-loss link: deliver because 2PC retransmits packets."
#[test]
fn packet_loss_on_a_fair_loss_link() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    // Lost once each: the prepare to R2, R1's ACK, and the first frame from S saying that it
    // committed M.
    let uplink = sc.net.process_out[S as usize];
    let mut lost = [false; 3];
    sc.lose(move |l, r| {
        let i = if is_prepare_to(r, R2) {
            0
        } else if r.opcode == Opcode::Ack && r.src == R1 && r.dst == S {
            1
        } else if l == uplink && r.commit_barrier.raw() > m.ts.as_nanos() {
            2
        } else {
            return false;
        };
        !std::mem::replace(&mut lost[i], true)
    });
    sc.run_until_recovered(&[], m.ts, &[R1, R2]);
    assert_eq!(
        sc.dropped.len(),
        3,
        "every planned loss happened: {:?}",
        sc.dropped
    );
    assert!(
        sc.net.endpoints[S as usize]
            .reliable_sender()
            .counters()
            .retransmissions
            >= 2
    );
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (1, 1));
    assert!(sc.send_failures(S).is_empty());
    assert!(sc.declared_failed().is_empty(), "loss is not failure");
    sc.check_logs();
}

/// "R fails before sending ACK in Prepare phase: discard according to Recall step."
#[test]
fn receiver_fails_before_sending_ack() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    // R2 stores the prepare and crashes before its ACK gets out.
    sc.run_until("R2 stores M", |s| s.prepared(R2) == 1);
    sc.crash(R2);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    assert_eq!(
        sc.send_failures(S),
        &[SendFailure {
            ts: m.ts,
            dst: R2,
            msg_id: m.id,
            reason: FailureReason::ReceiverFailed { process: R2 },
        }]
    );
    assert_eq!(sc.net.endpoints[R1 as usize].counters().recalled, 1);
    assert_eq!(sc.deliveries(R1, m), 0, "its other receiver discarded it");
    assert_eq!(sc.deliveries(R2, m), 0);
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, X]);
}

/// "R fails after sending ACK in Prepare phase: The message is in R's receive buffer. ...
/// The controller records failure timestamps of senders and undeliverable recall messages, so
/// that recovered receivers can deliver or discard messages consistently in each scattering."
/// R2 holds two scatterings when it crashes: S's M, which S has every ACK of, and X's M', whose
/// ACK from R2 was lost. M is not aborted and R1 delivers it; M' is aborted, and its recall to
/// R2 is recorded since R2 cannot take it. R2 comes back (memory intact), learns of its failure
/// and the record, delivers M, discards M', and rejoins as a new process that sends and
/// receives in the total order.
#[test]
fn receiver_fails_after_sending_ack_and_recovers() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("S has every ACK", |s| {
        s.net.endpoints[S as usize].reliable_sender().is_idle()
    });
    sc.lose(|_, r| r.src == R2 && r.dst == X && (r.opcode == Opcode::Ack || r.ack));
    let m2 = sc.send(X, &[R1, R2]);
    sc.run_until("R2 stores M'", |s| s.prepared(R2) == 2);
    assert_eq!((sc.deliveries(R2, m), sc.deliveries(R2, m2)), (0, 0));
    sc.crash(R2);
    sc.lose(|_, _| false);
    sc.run_until_recovered(&[R2], m2.ts, &[S, R1, X]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    assert!(sc.send_failures(S).is_empty(), "M is not aborted");
    assert_eq!(sc.send_failures(X).len(), 1, "M' is");
    assert_eq!(
        sc.controller.lost_recalls(R2),
        vec![LostRecall {
            sender: X,
            ts: m2.ts,
            msg_id: m2.id
        }]
    );
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R1, m2)), (1, 0));
    assert_eq!(sc.prepared(R2), 2, "still in the failed receiver's buffer");
    sc.run_for(Duration::from_micros(200));
    assert_eq!(sc.deliveries(R2, m), 0, "a failed receiver delivers nothing");
    sc.revive(R2);
    sc.run_until_rejoined(R2);
    let report = sc.recoveries[R2 as usize][0];
    assert_eq!((report.delivered, report.discarded), (1, 1));
    assert_eq!((sc.deliveries(R2, m), sc.deliveries(R2, m2)), (1, 0));
    assert!(sc.declared_failed().is_empty(), "a new process");
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, R2, X]);
    sc.check_delivery_resumes(R2, &[S, R1, X]);
    sc.check_delivery_resumes(X, &[R2]);
    sc.check_logs();
}

/// "S fails before sending commit timestamp T: discard according to Discard step." S crashes
/// with M prepared at R1 only (its prepare to R2 was lost) and no ACK back.
#[test]
fn sender_fails_before_sending_commit_timestamp() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.lose(|_, r| is_prepare_to(r, R2));
    sc.run_until("R1 stores M", |s| s.prepared(R1) == 1);
    sc.crash(S);
    sc.lose(|_, _| false);
    assert!(sc.tor_register(S) <= m.ts, "S's commit barrier never passed M");
    sc.run_until_recovered(&[S], m.ts, &[R1, R2]);
    assert_eq!(sc.declared_failed(), vec![S]);
    assert!(sc.controller.failure_of(S).unwrap() <= m.ts);
    assert_eq!(sc.net.endpoints[R1 as usize].counters().discarded, 1);
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (0, 0));
    sc.check_logs();
    sc.check_delivery_resumes(X, &[R1, R2]);
}

/// Row "S fails before sending commit timestamp T", its example: "when S fails while executing
/// Recall step of M due to previous failure of a receiver, its commit timestamp T must be lower
/// than M's timestamp, so all receivers would discard M due to failure of S." Here S's recall to
/// R1 is lost and S crashes: R1 still holds M, and discards it when S's failure is announced.
#[test]
fn sender_fails_while_recalling() {
    let mut sc = Scenario::new();
    sc.crash(R2);
    let m = sc.send(S, &[R1, R2]);
    sc.lose(|_, r| r.recall);
    sc.run_until("S recalls M from R1", |s| s.dropped.iter().any(|r| r.recall));
    sc.crash(S);
    sc.lose(|_, _| false);
    assert!(sc.tor_register(S) <= m.ts, "S's commit barrier is held at M");
    sc.run_until_recovered(&[S, R2], m.ts, &[R1, X]);
    assert_eq!(sc.declared_failed(), vec![S, R2]);
    assert!(sc.controller.failure_of(S).unwrap() <= m.ts);
    let r1 = sc.net.endpoints[R1 as usize].counters();
    assert_eq!((r1.recalled, r1.discarded), (0, 1), "discarded for S's failure");
    assert_eq!(sc.deliveries(R1, m), 0);
    sc.check_logs();
    sc.check_delivery_resumes(X, &[R1]);
}

/// "S fails after sending commit timestamp T: deliver if and only if the failure timestamp T'
/// of S is larger or equal to T." Here T reached S's ToR, on the cut between S and every
/// receiver, so T' >= T: delivered everywhere.
#[test]
fn sender_fails_after_its_commit_timestamp_reached_the_cut() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("S's ToR hears a commit barrier past M", |s| {
        s.tor_register(S) > m.ts
    });
    assert_eq!(sc.deliveries(R2, m), 0, "R2 has not delivered M yet");
    sc.crash(S);
    sc.run_until_recovered(&[S], m.ts, &[R1, R2]);
    assert_eq!(sc.declared_failed(), vec![S]);
    assert!(sc.controller.failure_of(S).unwrap() > m.ts);
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (1, 1));
    sc.check_logs();
}

/// Same row: "Controller obtains T' by gathering the maximum failure timestamp from a cut in a
/// routing graph consisting of healthy switches that separates S and all receivers." S's ToR
/// crashes, and S and R1 with it, when S's commit barrier past M has crossed to one spine and
/// not the other: T' is the larger of the two, and M is delivered.
#[test]
fn sender_fails_after_its_commit_timestamp_crossed_part_of_the_cut() {
    let mut sc = Scenario::with_spines(2);
    let (spine0, spine1) = (2, 3);
    let m = sc.send(S, &[R2, X]);
    let to_spine1 = sc.net.switch_out[LEAF0][sc.port_to(LEAF0, spine1) as usize];
    sc.lose(move |l, r| l == to_spine1 && r.commit_barrier.raw() > m.ts.as_nanos());
    let (at0, at1) = (sc.port_to(spine0, LEAF0), sc.port_to(spine1, LEAF0));
    sc.run_until("spine 0 hears from S's ToR that M is committed", |s| {
        s.register(spine0, at0) > m.ts
    });
    assert!(sc.register(spine1, at1) <= m.ts, "spine 1 has not heard it");
    assert_eq!((sc.deliveries(R2, m), sc.deliveries(X, m)), (0, 0));
    sc.crash_switch(LEAF0);
    sc.lose(|_, _| false);
    sc.run_until_recovered(&[S, R1], m.ts, &[R2, X]);
    assert_eq!(sc.declared_failed(), vec![S, R1]);
    assert!(sc.controller.failure_of(S).unwrap() > m.ts);
    assert_eq!((sc.deliveries(R2, m), sc.deliveries(X, m)), (1, 1));
    sc.check_logs();
}

/// Same row, the other side of "if and only if": S had every ACK and sent T past M, but T was
/// lost with S's link before its ToR heard it. T' < T: discarded everywhere, though both
/// receivers hold M.
#[test]
fn sender_fails_after_sending_commit_timestamp_that_never_arrived() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    let uplink = sc.net.process_out[S as usize];
    sc.run_until("S sends a commit barrier past M", |s| {
        s.net.links[uplink]
            .queue
            .iter()
            .any(|(_, f)| repr(f).commit_barrier.raw() > m.ts.as_nanos())
    });
    assert!(sc.net.endpoints[S as usize].reliable_sender().is_idle());
    assert_eq!((sc.prepared(R1), sc.prepared(R2)), (1, 1));
    sc.crash(S);
    assert!(sc.tor_register(S) <= m.ts);
    sc.run_until_recovered(&[S], m.ts, &[R1, R2]);
    assert_eq!(sc.declared_failed(), vec![S]);
    assert!(sc.controller.failure_of(S).unwrap() <= m.ts);
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (0, 0));
    sc.check_logs();
}

/// "The receiver R' of another message M' in the same scattering fails before sending ACK in
/// Prepare phase: because the ACK is not received, discard according to Recall step." R1 holds
/// and acknowledged M; R2, the receiver of M', crashed before M' reached it.
#[test]
fn another_receiver_of_the_scattering_fails_before_sending_ack() {
    let mut sc = Scenario::new();
    sc.crash(R2);
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("R2's failure is announced to R1", |s| {
        s.net.endpoints[R1 as usize].is_process_failed(R2)
    });
    assert_eq!(sc.prepared(R1), 1);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    assert_eq!(sc.net.endpoints[R1 as usize].counters().recalled, 1);
    assert_eq!(sc.deliveries(R1, m), 0);
    assert_eq!(sc.send_failures(S).len(), 1);
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, X]);
}

/// "The receiver R' of another message M' in the same scattering fails after sending ACK in
/// Prepare phase: deliver according to 2PC." R2 acknowledged M' and crashed. R1 holds M, but
/// its ACK was lost until R2's failure was announced: M is not committed yet then, and R1 keeps
/// it through the failure handling and delivers it once S has the ACK again.
#[test]
fn another_receiver_of_the_scattering_fails_after_sending_ack() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.lose(|_, r| r.opcode == Opcode::Ack && r.src == R1);
    sc.run_until("S has R2's ACK only", |s| {
        s.net.endpoints[S as usize].reliable_sender().unacked_packets() == 1
    });
    assert_eq!((sc.prepared(R1), sc.prepared(R2)), (1, 1));
    sc.crash(R2);
    sc.run_until("R2's failure is announced to R1", |s| {
        s.net.endpoints[R1 as usize].is_process_failed(R2)
    });
    assert_eq!(
        (sc.prepared(R1), sc.deliveries(R1, m)),
        (1, 0),
        "prepared, not committed"
    );
    sc.lose(|_, _| false);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    assert!(sc.send_failures(S).is_empty());
    assert_eq!(
        sc.net.endpoints[S as usize]
            .reliable_sender()
            .counters()
            .recalls_sent,
        0
    );
    assert_eq!(sc.deliveries(R1, m), 1);
    sc.check_logs();
}

/// "The network path between S and R fails (e.g., due to routing problem), but S and R are
/// reachable from the controller: controller forwards messages between S and R." A routing
/// problem loses every prepare and ACK between S and R2, both ways, while beacons carry both
/// barriers on. S's prepares reach R2 through the controller (paper 5.2, Controller
/// Forwarding), R2's ACKs come back the same way, and the scatterings commit and are delivered
/// at every receiver, R2 included, in the one total order.
#[test]
fn path_fails_but_both_ends_reach_the_controller() {
    let mut sc = Scenario::new();
    sc.blackhole(S, R2);
    let m = sc.send(S, &[R1, R2]);
    let n = sc.send(X, &[R1, R2]);
    let o = sc.send(S, &[R2, X]);
    sc.run_until("every scattering is delivered everywhere", |s| {
        [(R1, m), (R2, m), (R1, n), (R2, n), (R2, o), (X, o)]
            .iter()
            .all(|&(p, msg)| s.deliveries(p, msg) == 1)
    });
    assert!(
        sc.dropped.iter().any(|r| r.src == S && is_prepare_to(r, R2)),
        "the broken path lost S's prepares"
    );
    assert!(sc.declared_failed().is_empty(), "nobody failed");
    assert!(sc.send_failures(S).is_empty());
    let forwards = sc.controller.counters().forwards.clone();
    assert!(
        forwards.forwarded >= 4,
        "two prepares there, two ACKs back: {forwards:?}"
    );
    assert_eq!((forwards.unanswered, forwards.stale_answers), (0, 0));
    assert_eq!(sc.controller.forwards_pending(), 0);
    assert!(sc.net.endpoints[R2 as usize].counters().forwarded_received >= 2);
    assert!(sc.net.endpoints[S as usize].counters().forwarded_received >= 2);
    assert!(
        sc.net.endpoints[S as usize]
            .reliable_sender()
            .counters()
            .forwards_requested
            >= 2
    );
    sc.check_logs();
}

/// Same row, when the controller cannot reach R either: "If controller also cannot deliver the
/// message, R will be announced as failed". R2 runs on in the fabric, but its management link
/// is down and the path from S is broken. The forward goes unanswered; the controller has R2
/// cut off at its ToR and declares it failed; S aborts M and recalls it from R1.
#[test]
fn path_fails_and_the_controller_cannot_reach_the_receiver() {
    let mut sc = Scenario::new();
    sc.blackhole(S, R2);
    sc.lose_controller(R2);
    let m = sc.send(S, &[R1, R2]);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1, X]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    let forwards = sc.controller.counters().forwards.clone();
    assert!(
        forwards.forwarded >= 1 && forwards.unanswered >= 1,
        "{forwards:?}"
    );
    assert!(
        sc.controller.undeliverable_recalls(R2).is_empty(),
        "M was a prepare"
    );
    assert_eq!(
        sc.send_failures(S),
        &[SendFailure {
            ts: m.ts,
            dst: R2,
            msg_id: m.id,
            reason: FailureReason::ReceiverFailed { process: R2 },
        }]
    );
    assert_eq!(sc.net.endpoints[R1 as usize].counters().recalled, 1);
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (0, 0));
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, X]);
}

/// Same row: "If controller receives ACK ... but cannot forward it to S, S will be announced as
/// failed." S loses its management link just after asking for M to be forwarded: R2 takes M
/// and answers, but its ACK cannot reach S. S is cut off and declared failed; its commit
/// barrier never passed M (it waited for that ACK), so both receivers discard M.
#[test]
fn the_controller_cannot_bring_the_ack_back_to_the_sender() {
    let mut sc = Scenario::new();
    sc.blackhole(S, R2);
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("S asks the controller to forward M", |s| {
        s.controller.counters().forwards.forwarded >= 1
    });
    sc.lose_controller(S);
    sc.run_until_recovered(&[S], m.ts, &[R1, R2]);
    assert_eq!(sc.declared_failed(), vec![S]);
    assert!(sc.controller.failure_of(S).unwrap() <= m.ts);
    assert_eq!(sc.controller.counters().forwards.unanswered, 1, "R2's ACK");
    assert_eq!(sc.net.endpoints[R2 as usize].counters().forwarded_received, 1);
    let discarded = |p: u32| sc.net.endpoints[p as usize].counters().discarded;
    assert_eq!((discarded(R1), discarded(R2)), (1, 1));
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (0, 0));
    sc.check_logs();
    sc.check_delivery_resumes(X, &[R1, R2]);
}

/// The same for the Recall step: "If controller also cannot deliver the message, R will be
/// announced as failed, and the undeliverable recall message is recorded." R2 crashes before M
/// reaches it, so S recalls M from R1; but the path from S to R1 loses recalls and R1's
/// management link fails, so the recall reaches R1 neither way. R1 is declared failed, and the
/// recall is on record against it for when it recovers (it still holds M).
#[test]
fn a_recall_the_controller_cannot_deliver_is_recorded() {
    let mut sc = Scenario::new();
    sc.lose(|_, r| is_prepare_to(r, R2) || (r.recall && r.dst == R1));
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("R1 stores M", |s| s.prepared(R1) == 1);
    sc.crash(R2);
    sc.run_until("R1 has answered R2's announcement", |s| {
        s.net.endpoints[R1 as usize].is_process_failed(R2) && s.unanswered[R1 as usize].is_empty()
    });
    sc.lose_controller(R1);
    sc.run_until_recovered(&[R1, R2], m.ts, &[S, X]);
    assert_eq!(sc.declared_failed(), vec![R1, R2]);
    let recalls = sc.controller.undeliverable_recalls(R1);
    assert_eq!(recalls.len(), 1, "{recalls:?}");
    assert_eq!((recalls[0].sender, recalls[0].msg_id), (S, m.id));
    let recall = repr(&recalls[0].packet.0);
    assert!(recall.recall && recall.dst == R1);
    assert_eq!(recall.msg_ts.unwrap_near(m.ts), m.ts);
    assert_eq!(sc.controller.counters().forwards.undeliverable_recalls, 1);
    assert_eq!(
        (sc.prepared(R1), sc.deliveries(R1, m)),
        (1, 0),
        "R1 holds M: recovering, it must discard it"
    );
    sc.check_logs();
    sc.check_delivery_resumes(S, &[X]);
}

/// "The network path between S and R fails, and S or R is unreachable from the controller: the
/// unreachable process is considered as failed. For example, if a host or the only network link
/// from a host fails, all processes on it are disconnected ..." R2's only link fails before M
/// reaches it; R2 runs on, cut off.
#[test]
fn path_fails_and_the_receiver_is_unreachable() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.cut_off(R2);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1, X]);
    assert_eq!(sc.declared_failed(), vec![R2], "R2 alone: X shares its ToR");
    assert_eq!(sc.send_failures(S).len(), 1);
    assert_eq!(sc.deliveries(R1, m), 0);
    assert_eq!((sc.prepared(R2), sc.deliveries(R2, m)), (0, 0));
    assert!(
        !sc.net.endpoints[R2 as usize].is_process_failed(S),
        "nothing reaches R2"
    );
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, X]);
}

/// "The network path to R fails after R receives commit barrier T: T is already delivered to
/// R." R2 delivered M, then lost its link: M stands, and its other receiver delivers it too.
#[test]
fn path_to_receiver_fails_after_it_received_the_commit_barrier() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("R2 delivers M", |s| s.deliveries(R2, m) == 1);
    sc.cut_off(R2);
    sc.run_until_recovered(&[R2], m.ts, &[S, R1, X]);
    assert_eq!(sc.declared_failed(), vec![R2]);
    assert!(sc.send_failures(S).is_empty());
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R2, m)), (1, 1));
    sc.check_logs();
    sc.check_delivery_resumes(S, &[R1, X]);
}

/// "The network path to R fails before R receives commit barrier T: deliver after R recovers
/// according to Receiver Recovery." R2 had acknowledged S's M; cut off, it keeps M undelivered
/// (nothing tells it M is committed), while S does not recall M and R1 delivers it. R2 also
/// holds X's M', which X had not committed (its prepare to R1 was lost) when X crashed, at the
/// moment R2's link failed: X's failure is announced while R2 is cut off. When R2's link comes
/// back its ToR hears it, the controller tells it of its failure and of X's, and R2 delivers M
/// and discards M', as R1 did; then it rejoins.
#[test]
fn path_to_receiver_fails_before_it_received_the_commit_barrier() {
    let mut sc = Scenario::new();
    let m = sc.send(S, &[R1, R2]);
    sc.run_until("S has every ACK", |s| {
        s.net.endpoints[S as usize].reliable_sender().is_idle()
    });
    sc.lose(|_, r| r.src == X && is_prepare_to(r, R1));
    let m2 = sc.send(X, &[R1, R2]);
    sc.run_until("X has R2's ACK of M'", |s| {
        s.net.endpoints[X as usize].reliable_sender().unacked_packets() == 1
    });
    assert!(sc.net.endpoints[R2 as usize].commit_barrier() <= m.ts);
    sc.cut_off(R2);
    sc.crash(X);
    sc.lose(|_, _| false);
    sc.run_until_recovered(&[R2, X], m2.ts, &[S, R1]);
    assert_eq!(sc.declared_failed(), vec![R2, X]);
    assert!(sc.controller.failure_of(X).unwrap() <= m2.ts);
    assert!(sc.send_failures(S).is_empty());
    assert_eq!((sc.deliveries(R1, m), sc.deliveries(R1, m2)), (1, 0));
    assert!(sc.net.endpoints[R2 as usize].commit_barrier() <= m.ts);
    assert_eq!((sc.prepared(R2), sc.deliveries(R2, m)), (2, 0));
    assert!(sc.controller.lost_recalls(R2).is_empty());
    sc.check_logs();
    sc.restore(R2);
    sc.run_until_rejoined(R2);
    assert_eq!(sc.controller.recovery_counters().notified, 1);
    let report = sc.recoveries[R2 as usize][0];
    assert_eq!((report.delivered, report.discarded), (1, 1));
    assert_eq!((sc.deliveries(R2, m), sc.deliveries(R2, m2)), (1, 0));
    assert_eq!(sc.declared_failed(), vec![X]);
    assert!(sc.net.endpoints[R2 as usize].is_process_failed(X));
    sc.check_logs();
    sc.check_delivery_resumes(R2, &[S, R1]);
    sc.check_delivery_resumes(S, &[R1, R2]);
    sc.check_logs();
}
