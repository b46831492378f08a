//! The switch barrier pipeline (paper sections 4.1, 4.2, 6.2), sans-IO.
//!
//! A physical switch is two logical switches (paper Fig. 3, docs/ordering.md): the uplink half
//! takes inputs from below (processes, lower switches) and the downlink half takes inputs from
//! above plus a loopback from its own uplink half for traffic that turns around here. Each half
//! keeps one barrier register per input link and stamps every packet it forwards with the
//! minimum over its live inputs (eq. 4.1). Aggregating over all ports of the physical switch
//! would make a cycle and the barrier would never advance.
//!
//! The loopback needs no register of its own: every later packet through the uplink half has a
//! timestamp at or above the uplink half's current minimum, so that minimum is always a valid
//! barrier for the loopback link.

use crate::Incarnation;
pub use crate::plausible::ImplausibleReport;
use crate::plausible::{ImplausibleInput, TIME_AHEAD_MAX};
use onepipe_fabric::{Hints, Node, Peer, Pipeline, PortDirection, PortId, Route, Routes, Wiring};
use onepipe_wire::packet::{Opcode, Packet, Repr};
use onepipe_wire::protocol::ONEPIPE;
use onepipe_wire::{Duration, Instant};
use registers::{ClockSamples, Registers};

/// A software switch whose pipeline runs 1Pipe ([`Pipeline`], docs/architecture.md): what
/// every runtime builds for a switch of a 1Pipe fabric. Other programs join 1Pipe's in the
/// pipeline without changing it (`crates/sim/tests/programs.rs`).
pub type SwitchNode = Pipeline<Switch>;

/// The 1Pipe program of a switch pipeline, for the management plane and the reports.
pub trait OnePipeProgram {
    fn onepipe(&self) -> &Switch;
    fn onepipe_mut(&mut self) -> &mut Switch;
}

impl OnePipeProgram for SwitchNode {
    fn onepipe(&self) -> &Switch {
        self.program(ONEPIPE).expect("a switch node runs 1Pipe")
    }
    fn onepipe_mut(&mut self) -> &mut Switch {
        self.program_mut(ONEPIPE).expect("a switch node runs 1Pipe")
    }
}

#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Beacons go out at multiples of this on idle output links (paper 4.2).
    pub beacon_interval: Duration,
    /// An input link silent for this many beacon intervals is removed (paper 4.2: "e.g., 10").
    pub dead_after_intervals: u32,
    /// Seeds the per-packet ECMP choice.
    pub ecmp_seed: u64,
    /// How far ahead of their clocks the hosts promise their barriers
    /// (`EndpointConfig::promise_lead`); taken off the clock samples, which would otherwise
    /// show every process that far ahead of the switch.
    pub promise_lead: Duration,
    /// How far ahead of this switch's clock, beyond `promise_lead`, a barrier may be: the
    /// fabric's clock skew bound plus a margin ([`TIME_AHEAD_MAX`] by default). A frame with
    /// one further ahead is refused (docs/ordering.md, "Implausible time").
    pub time_ahead_max: Duration,
    /// Where barriers are aggregated: the chip stamps every packet; a switch CPU only sees
    /// beacons (paper 6.2).
    pub incarnation: Incarnation,
}

impl SwitchConfig {
    /// How long an input link may stay silent before it is removed. Processes use the same
    /// rule to tell that their switch is gone (`Process::check_fabric`).
    pub fn dead_after(&self) -> Duration {
        self.beacon_interval
            .saturating_mul(self.dead_after_intervals as u64)
    }
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            beacon_interval: Duration::from_micros(3),
            dead_after_intervals: 10,
            ecmp_seed: 0,
            promise_lead: Duration::ZERO,
            time_ahead_max: TIME_AHEAD_MAX,
            incarnation: Incarnation::Chip,
        }
    }
}

/// Life of an input link (paper 4.2, "Handling failures" and "Addition of new hosts and links").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputState {
    /// Counted in the minimum.
    Live,
    /// Silent too long: left out of the best-effort minimum so that barrier resumes. The
    /// commit barrier keeps counting it: taking a component out of reliable delivery needs
    /// the controller's failure procedure (paper 5.2: Discard and Recall before Resume), or
    /// prepared messages it still carries would arrive below the commit barrier. The switch
    /// reports the link ([`Switch::poll_event`]); reliable delivery stalls until the
    /// controller removes it ([`Switch::remove_input`]) or it heals (found by the simulator:
    /// crates/sim/tests/faults.rs).
    Dead,
    /// Heard from again after being dead: admitted once its barrier passes the half's output
    /// barrier, so that the output barrier never goes back.
    Joining,
}

/// An input's place in the commit lane, which only the controller takes it out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitInput {
    Counted,
    /// Removed by the controller (paper 5.2, Resume); only the controller takes it back.
    Removed,
    /// Never heard, and timed out (`Switch::forget_unheard`): out until first heard.
    Unheard,
    /// Readmitted, or heard for the first time: admitted like a joining best-effort link.
    Joining,
}

/// Detect (paper 5.2): an input link timed out, or was cut on the controller's order, with the
/// last commit barrier it carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputReport {
    pub port: PortId,
    pub last_commit: Instant,
}

/// What a switch tells the management plane ([`Switch::poll_event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchEvent {
    /// Detect (paper 5.2): an input timed out or was cut, with the last commit barrier it
    /// carried. Made again while the controller has not acted on it.
    InputDown(InputReport),
    /// A quarantined input was heard again: the process behind it is back (Receiver Recovery,
    /// switch/recovery.rs).
    InputHeard(PortId),
    /// Frames on an input were refused for barriers implausibly far ahead of this switch's
    /// clock: at most one report per input every [`crate::plausible::REPORT_INTERVAL`].
    Implausible(ImplausibleReport),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the switch has no port {0}")]
pub struct NoSuchPort(pub PortId);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    Up,
    Down,
}

/// The two barriers a switch aggregates, each exactly as eq. 4.1 says (paper 5.1: commit
/// barriers are aggregated by "exactly the same" procedure as best-effort barriers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    BestEffort = 0,
    Commit = 1,
}

const LANES: [Lane; 2] = [Lane::BestEffort, Lane::Commit];

/// A read-only view of one input register, for diagnostics ("which link holds delivery back").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputRegister {
    pub port: PortId,
    pub half: Half,
    pub barrier: Instant,
    pub commit_barrier: Instant,
    pub last_heard: Instant,
    /// Anything was ever heard on it.
    pub heard: bool,
    pub state: InputState,
    /// The largest best-effort barrier minus arrival time heard on this input lately (between
    /// one and two `CLOCK_WINDOW`s), in ns; `None` if nothing was heard that long. From a
    /// process, whose barrier is its clock when nothing waits in its queue, this is how far its
    /// clock runs ahead of the switch's, less the one-way delay of the least delayed frame
    /// (NTP's minimum-delay filter): differences between processes are their skew.
    pub clock_ahead_ns: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    pub forwarded: u64,
    pub beacons_sent: u64,
    pub beacons_received: u64,
    pub malformed: u64,
    /// Frames with no way on: no route, or their output leads to a port cut on the
    /// controller's order.
    pub no_route: u64,
    /// Packets whose source could not have sent them in on their input port
    /// ([`Switch::source_matches`]): a process speaking in another's name.
    pub spoofed_source: u64,
    /// A packet whose barrier was below the register of its link (a FIFO or upstream bug).
    pub barrier_regressions: u64,
    pub links_removed: u64,
    pub links_joined: u64,
    /// Inputs the controller took out of the commit lane.
    pub commit_inputs_removed: u64,
    /// Frames dropped because their input was cut on the controller's order.
    pub cut_frames: u64,
    /// Link-down reports dropped because nobody took the earlier ones.
    pub reports_dropped: u64,
    /// Reports made again because the controller had not acted on them yet.
    pub reports_repeated: u64,
    /// Ticks this switch reached so late that it was stalled; the gap was not held against
    /// its input links (`Switch::excuse_own_stall`).
    pub stalls_excused: u64,
    /// Frames refused for a barrier past `promise_lead + time_ahead_max` ahead of the clock.
    pub barrier_implausible: u64,
    /// Ticks on which an uplink half with no counted input advanced on the switch's clock
    /// (`Registers::advance_empty`): a rack with no live process.
    pub empty_half_ticks: u64,
    /// Inputs that went silent without ever being heard, taken out of the commit lane too.
    pub unheard_inputs_removed: u64,
}

#[derive(Clone, Debug)]
struct Port {
    direction: PortDirection,
    /// Port number at the peer, stamped as link id.
    peer_port: u16,
    /// Index of this port's register in its half.
    slot: usize,
    /// Last barriers heard on this input, by lane.
    barrier: [Instant; 2],
    last_heard: Instant,
    state: InputState,
    commit: CommitInput,
    /// Cut on the controller's order: nothing it sends is taken any more, nothing is sent to it.
    cut: bool,
    /// A process is behind it (its input is quarantined when the controller removes it).
    to_process: bool,
    /// Quarantined and not heard since: the first frame on it is news for the controller.
    quarantined: bool,
    /// A link to a switch, out of the commit lane (or cut), heard again since it went silent:
    /// when first heard, and how many times reported, for the controller to readmit it (see
    /// `recovery.rs`).
    heard_out: Option<(Instant, u8)>,
    /// Went silent since it was last readmitted (or since the start).
    died: bool,
    /// Reported to a controller, which has not removed nor readmitted it yet: its commit
    /// register holds (see `Switch::set_controlled`).
    held: bool,
    /// Its last death was reported; cleared when it is heard again.
    reported: bool,
    /// Heard at least once. An input never heard is not reported when it times out: it
    /// carried no commit barrier to report, and at startup it is only a peer not running yet.
    heard: bool,
    clock: ClockSamples,
    last_sent: Instant,
    /// Barriers of the last packet sent here, by lane: an eager beacon goes out only with news.
    last_barrier_sent: [Instant; 2],
    beacon_pending: bool,
    /// Eager beacons left until the next tick.
    eager_budget: u8,
}

impl Port {
    /// Sets `beacon_pending`, keeping `pending` (the switch's count of such ports) in step.
    fn set_beacon_pending(&mut self, on: bool, pending: &mut usize) {
        if self.beacon_pending != on {
            self.beacon_pending = on;
            if on {
                *pending += 1;
            } else {
                *pending -= 1;
            }
        }
    }
}

/// Link-down reports a switch keeps for the controller, per port.
const REPORTS_MAX_PER_PORT: usize = 4;

/// A report the controller has not acted on (the input is still in the commit lane) is made
/// again after this many dead-link timeouts, then after twice as many each time, up to
/// [`REPORT_REPEAT_DEAD_AFTERS_MAX`]. Management frames can be lost (a datagram over udp; the
/// simulator's lossy runs): a lost report, made once, left the controller unaware of the
/// failure and every commit barrier stalled for good (found by a simulator campaign). The
/// controller takes a repeated report as a duplicate, or as a sign that its Resume was lost.
/// The backoff bounds what a switch the controller never answers (on the far side of a
/// partition) adds to the controller's log.
const REPORT_REPEAT_DEAD_AFTERS: u64 = 4;
const REPORT_REPEAT_DEAD_AFTERS_MAX: u64 = 256;

/// A switch run later than its tick by more than this fraction (1/N) of the dead-link timeout
/// was stalled, and does not hold the gap against its inputs (see `Switch::excuse_own_stall`).
const STALL_OF_DEAD_AFTER: u64 = 4;

/// Eager beacons a link may carry between two ticks (see `Switch::propagate`).
const EAGER_BEACONS_PER_INTERVAL: u8 = 2;

pub struct Switch {
    id: usize,
    config: SwitchConfig,
    routes: Routes,
    ports: Vec<Port>,
    lanes: [Registers; 2],
    next_tick: Instant,
    /// A register update raised a half's minimum since the last look (see `propagate`).
    barrier_advanced: bool,
    /// Ports with `beacon_pending` set, so a runtime can tell there is nothing to ask for.
    beacons_pending: usize,
    /// Reports for the controller; at most [`REPORTS_MAX_PER_PORT`] per port, so bounded.
    reports: std::collections::VecDeque<InputReport>,
    /// When reports the controller has not acted on are made again (see
    /// [`REPORT_REPEAT_DEAD_AFTERS`]); `None` while there are none.
    report_repeat_at: Option<Instant>,
    /// The wait before the next repeat, in dead-link timeouts.
    report_repeat_after: u64,
    /// Quarantined inputs heard again, for the controller (each once per quarantine).
    heard_again: Vec<PortId>,
    /// A controller takes reported inputs out (`Switch::set_controlled`).
    controlled: bool,
    /// Inputs with a report of implausible barriers due (each at most once, so bounded).
    implausible: Vec<PortId>,
    /// Per input, frames refused for implausible barriers, for the next report. Kept apart
    /// from `ports`, whose fields every frame reads: these are touched only on a refusal, and
    /// in `Port` they spread what every frame reads over more cache lines.
    implausible_inputs: Vec<ImplausibleInput>,
    /// The switch CPU of a data plane that only forwards (`Incarnation::SwitchCpu`).
    cpu: Option<cpu::CpuAgent>,
    /// The port to the host representative of a plain switch (`Incarnation::Host`, plain.rs).
    representative: Option<PortId>,
    counters: SwitchCounters,
}

impl Switch {
    /// Switch `id` of `wiring`, with every link live and every register at zero (nothing can be
    /// delivered before every input has spoken).
    pub fn new(id: usize, wiring: &Wiring, routes: Routes, config: SwitchConfig, now: Instant) -> Switch {
        assert!(
            config.beacon_interval > Duration::ZERO,
            "beacon interval must be positive"
        );
        assert!(
            config.dead_after_intervals > 0,
            "dead_after_intervals must be positive"
        );
        let mut lanes: [Registers; 2] = Default::default();
        let ports: Vec<Port> = wiring.switch_ports[id]
            .iter()
            .map(|spec| {
                // Inputs from below feed the uplink half; inputs from above, the downlink half.
                let half = match spec.direction {
                    PortDirection::Down => Half::Up,
                    PortDirection::Up => Half::Down,
                };
                let mut slot = 0;
                for lane in &mut lanes {
                    slot = lane.half(half).push(0);
                }
                Port {
                    direction: spec.direction,
                    peer_port: spec.peer_port(),
                    slot,
                    barrier: [Instant::ZERO; 2],
                    last_heard: now,
                    clock: ClockSamples::default(),
                    state: InputState::Live,
                    commit: CommitInput::Counted,
                    cut: false,
                    to_process: matches!(spec.peer, Peer::Process(_)),
                    quarantined: false,
                    heard_out: None,
                    died: false,
                    held: false,
                    reported: false,
                    heard: false,
                    last_sent: now,
                    last_barrier_sent: [Instant::ZERO; 2],
                    beacon_pending: false,
                    eager_budget: EAGER_BEACONS_PER_INTERVAL,
                }
            })
            .collect();
        Switch {
            id,
            next_tick: now.next_multiple_of(config.beacon_interval),
            barrier_advanced: false,
            beacons_pending: 0,
            reports: Default::default(),
            report_repeat_at: None,
            report_repeat_after: REPORT_REPEAT_DEAD_AFTERS,
            heard_again: Vec::new(),
            controlled: false,
            implausible: Vec::new(),
            implausible_inputs: vec![ImplausibleInput::default(); ports.len()],
            cpu: matches!(config.incarnation, Incarnation::SwitchCpu { .. })
                .then(|| cpu::CpuAgent::new(ports.len())),
            representative: (config.incarnation == Incarnation::Host)
                .then(|| crate::representative_port(ports.len()))
                .flatten(),
            config,
            routes,
            ports,
            lanes,
            counters: SwitchCounters::default(),
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    /// This switch as the program of a switch pipeline of its own.
    pub fn into_node(self) -> SwitchNode {
        Pipeline::single(ONEPIPE, self).expect("one program, of a protocol number")
    }

    pub fn counters(&self) -> &SwitchCounters {
        &self.counters
    }

    /// Its fabric ports (the management and representative ports not counted).
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    fn half_of_input(&self, port: usize) -> Half {
        match self.ports[port].direction {
            PortDirection::Down => Half::Up,
            PortDirection::Up => Half::Down,
        }
    }

    /// Both barriers for a packet leaving on `port`.
    fn barriers_for_output(&mut self, port: usize) -> [Instant; 2] {
        let direction = self.ports[port].direction;
        LANES.map(|lane| self.lanes[lane as usize].output(direction))
    }

    /// Every input register, for diagnostics.
    /// The inputs' registers; `now` dates the clock samples.
    pub fn inputs(&self, now: Instant) -> impl Iterator<Item = InputRegister> + '_ {
        self.ports.iter().enumerate().map(move |(i, p)| InputRegister {
            port: i as PortId,
            half: match p.direction {
                PortDirection::Down => Half::Up,
                PortDirection::Up => Half::Down,
            },
            barrier: p.barrier[Lane::BestEffort as usize],
            commit_barrier: p.barrier[Lane::Commit as usize],
            last_heard: p.last_heard,
            heard: p.heard,
            state: p.state,
            clock_ahead_ns: p.clock.max(now),
        })
    }

    /// The live input with the lowest register: the link that holds this switch's barrier back.
    pub fn lagging_input(&self) -> Option<InputRegister> {
        self.inputs(Instant::ZERO)
            .filter(|r| r.state == InputState::Live)
            .min_by_key(|r| r.barrier)
    }

    /// Records the barriers heard on input `port` (paper 4.1: "it updates register R_i := B"),
    /// unless one is implausibly far ahead: then the frame is refused and nothing of the input
    /// changes (it neither pins its register nor keeps a dead link alive). Whether taken.
    fn hear(&mut self, now: Instant, port: usize, heard: [Instant; 2]) -> bool {
        if let Some(ahead_ns) = self.implausible_ahead_ns(now, heard) {
            self.refuse_implausible(now, port, ahead_ns);
            return false;
        }
        self.heard_while_out(now, port);
        let half = self.half_of_input(port);
        let p = &mut self.ports[port];
        p.last_heard = now;
        let ahead = heard[Lane::BestEffort as usize].as_nanos() as i64
            - now.as_nanos() as i64
            - self.config.promise_lead.as_nanos() as i64;
        p.clock.add(now, ahead);
        for lane in LANES {
            if lane == Lane::Commit && p.held {
                continue;
            }
            let (b, register) = (heard[lane as usize], &mut p.barrier[lane as usize]);
            if b < *register {
                // Links are FIFO and upstream barriers monotonic (hosts' too: ordering.md),
                // so this is a bug upstream; never let a register go back.
                self.counters.barrier_regressions += 1;
            } else {
                *register = b;
            }
        }
        p.reported = false;
        p.heard = true;
        let (state, commit, values, slot, held) = (p.state, p.commit, p.barrier, p.slot, p.held);
        // The commit lane counts every input whatever its best-effort state (see
        // `InputState::Dead`), until the controller removes it.
        for lane in LANES {
            if lane == Lane::BestEffort && state != InputState::Live {
                continue;
            }
            if lane == Lane::Commit && (commit != CommitInput::Counted || held) {
                continue;
            }
            let regs = self.lanes[lane as usize].half(half);
            let before = regs.min;
            regs.set(slot, values[lane as usize].as_nanos());
            if regs.min > before {
                self.barrier_advanced = true;
            }
        }
        match state {
            InputState::Live => {}
            InputState::Dead => {
                self.ports[port].state = InputState::Joining;
                // Paper 4.2: the switch "suspends updates to B_new until the barrier received
                // from the new link is greater than B_new". The joining register holds the
                // half's output of this moment, so the output stays there (every live register
                // is at or above it) while the new link catches up. Without the freeze the
                // output keeps rising with the live links and a link that lags them by its path
                // delay never passes it: everything it carries arrives late, forever (found by
                // the simulator: crates/sim/tests/faults.rs).
                self.freeze(Lane::BestEffort, half, slot);
                self.try_admit(port, half, Lane::BestEffort);
            }
            InputState::Joining => self.try_admit(port, half, Lane::BestEffort),
        }
        match commit {
            // Only the controller takes an input back into the commit lane
            // (`Switch::readmit_input`): behind a removed input may be a region whose
            // processes it declared failed (a partition healing, a ToR restarting under its
            // failed rack), whose barriers must never hold or pass ours again; or nothing that
            // can send (the controller's sourceless inputs), whose frozen barrier would.
            CommitInput::Counted | CommitInput::Removed => {}
            CommitInput::Unheard => {
                // A process (or a switch) joining late: the output holds while it catches up.
                self.ports[port].commit = CommitInput::Joining;
                self.freeze(Lane::Commit, half, slot);
                self.try_admit(port, half, Lane::Commit);
            }
            CommitInput::Joining => self.try_admit(port, half, Lane::Commit),
        }
        true
    }

    /// A joining input's register holds the half's output of this moment.
    fn freeze(&mut self, lane: Lane, half: Half, slot: usize) {
        let regs = &mut self.lanes[lane as usize];
        let frozen = regs.output(direction_of(half));
        regs.half(half).set(slot, frozen.as_nanos());
    }

    /// New forwarding tables from the controller, which routes around failed links.
    pub fn set_routes(&mut self, routes: Routes) {
        self.routes = routes;
    }

    /// What the switch has to tell the management plane: inputs that went down (Detect), in the
    /// order they did, then inputs that carried implausible barriers, then quarantined inputs
    /// and links to switches out of the commit lane heard again.
    pub fn poll_event(&mut self) -> Option<SwitchEvent> {
        if let Some(r) = self.reports.pop_front() {
            return Some(SwitchEvent::InputDown(r));
        }
        if let Some(report) = self.poll_implausible() {
            return Some(SwitchEvent::Implausible(report));
        }
        self.heard_again.pop().map(SwitchEvent::InputHeard)
    }

    /// Every input reported down and not heard from since, with its last commit barrier: what
    /// a restarted controller must hear again.
    pub fn reported_down(&self) -> impl Iterator<Item = InputReport> + '_ {
        self.ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p.reported || p.held)
            .map(|(i, p)| InputReport {
                port: i as PortId,
                last_commit: p.barrier[Lane::Commit as usize],
            })
    }

    fn report(&mut self, port: usize) {
        let cap = REPORTS_MAX_PER_PORT * self.ports.len();
        let p = &mut self.ports[port];
        p.reported = true;
        p.held |= self.controlled;
        // With no controller polling, a flapping link must not grow the queue forever.
        if self.reports.len() >= cap {
            self.counters.reports_dropped += 1;
            return;
        }
        self.reports.push_back(InputReport {
            port: port as PortId,
            last_commit: p.barrier[Lane::Commit as usize],
        });
    }

    /// Resume (paper 5.2): the controller has handled the failure behind input `port`; the
    /// commit barrier stops waiting for it. Removing an input twice changes nothing. A
    /// process's input is quarantined too: the process is failed until it recovers (see
    /// `switch_recovery.rs`).
    pub fn remove_input(&mut self, port: PortId) -> Result<(), NoSuchPort> {
        let half = self.half_of_input(self.port_index(port)?);
        // A plain switch keeps no barriers: its representative takes the order.
        if self.representative.is_some() {
            return Ok(());
        }
        if self.ports[port as usize].to_process {
            self.quarantine(port as usize);
        }
        self.returned_before_removal(port as usize);
        let p = &mut self.ports[port as usize];
        p.held = false;
        if p.commit != CommitInput::Removed {
            p.commit = CommitInput::Removed;
            let slot = p.slot;
            let regs = self.lanes[Lane::Commit as usize].half(half);
            let before = regs.min;
            regs.set(slot, u64::MAX);
            self.barrier_advanced |= regs.min > before;
            self.counters.commit_inputs_removed += 1;
            self.propagate();
        }
        self.check_invariants();
        Ok(())
    }

    /// The controller declares what is behind input `port` failed: nothing from it is taken
    /// any more, it leaves the best-effort minimum, and it is reported with its last commit
    /// barrier (the controller needs that to decide the failure timestamp). Nothing is sent to
    /// it either, beacons included: a process declared failed while it still runs (cut off
    /// because the controller could not reach it) must not hear commit barriers past its
    /// failure, or it would deliver what was recalled for it (found by the appendix test of
    /// an undeliverable recall). Permanent: a recovered process rejoins as a new one (paper
    /// 5.2, Receiver Recovery).
    pub fn cut_input(&mut self, port: PortId) -> Result<(), NoSuchPort> {
        let i = self.port_index(port)?;
        self.ports[i].cut = true;
        self.ports[i].set_beacon_pending(false, &mut self.beacons_pending);
        // A plain switch cuts the port in its data plane; its representative, which knows
        // the last commit barrier, reports it.
        if self.representative.is_some() {
            return Ok(());
        }
        self.kill_input(i);
        // Reported even if its death already was: the controller asked, and waits.
        self.report(i);
        self.check_invariants();
        Ok(())
    }

    fn port_index(&self, port: PortId) -> Result<usize, NoSuchPort> {
        ((port as usize) < self.ports.len())
            .then_some(port as usize)
            .ok_or(NoSuchPort(port))
    }

    /// Paper 4.2: "the input link is considered to be dead and removed from the input link
    /// list" (best effort only, see `InputState::Dead`).
    fn kill_input(&mut self, port: usize) {
        if self.ports[port].state == InputState::Dead {
            return;
        }
        self.ports[port].state = InputState::Dead;
        self.ports[port].died = true;
        let slot = self.ports[port].slot;
        let half = self.half_of_input(port);
        self.lanes[Lane::BestEffort as usize]
            .half(half)
            .set(slot, u64::MAX);
        self.counters.links_removed += 1;
    }

    /// An input never heard since the switch started leaves the commit lane as well when it
    /// times out: nothing of its ever passed this switch, so no prepared message of its can be
    /// anywhere beyond, and nothing needs the controller's failure procedure (which is never
    /// told: there is no last commit barrier to report). A process that never joined would
    /// otherwise hold the commit barrier of the whole fabric at zero. Heard later, it is
    /// admitted like any returning input (`CommitInput::Joining`).
    fn forget_unheard(&mut self, port: usize) {
        let p = &mut self.ports[port];
        if p.commit != CommitInput::Counted {
            return;
        }
        p.commit = CommitInput::Unheard;
        let slot = p.slot;
        let half = self.half_of_input(port);
        self.lanes[Lane::Commit as usize].half(half).set(slot, u64::MAX);
        self.counters.unheard_inputs_removed += 1;
    }

    /// Paper 4.2: a new link joins only once its barrier passes the current output barrier.
    fn try_admit(&mut self, port: usize, half: Half, lane: Lane) {
        let regs = &mut self.lanes[lane as usize];
        let output = regs.output(direction_of(half));
        let p = &mut self.ports[port];
        let barrier = p.barrier[lane as usize];
        if barrier <= output {
            return;
        }
        regs.half(half).set(p.slot, barrier.as_nanos());
        match lane {
            Lane::BestEffort => {
                p.state = InputState::Live;
                self.counters.links_joined += 1;
            }
            Lane::Commit => p.commit = CommitInput::Counted,
        }
    }

    /// A beacon raised the barrier: pass the news on at once over links that are not carrying
    /// data, instead of at the next tick, so that a barrier crosses the fabric in about one
    /// beacon interval rather than one interval per hop (measured on the testbed at light load:
    /// the ordering overhead fell from about 9 to about 1-2 intervals). Each link takes at most
    /// `EAGER_BEACONS_PER_INTERVAL` such beacons between ticks, which bounds the extra traffic.
    fn propagate(&mut self) {
        if !std::mem::take(&mut self.barrier_advanced) {
            return;
        }
        let interval = self.config.beacon_interval.as_nanos();
        for i in 0..self.ports.len() {
            // Only the half that owns this output matters: news from the other half would spend
            // the link's budget on a beacon that repeats what the link already carried.
            let barriers = self.barriers_for_output(i);
            let p = &mut self.ports[i];
            // Hosts beacon at multiples of the interval of their own clocks, so the values of
            // one wave all lie at or above the same multiple. The minimum rises in small steps
            // as a wave's beacons trickle in (skew, scheduling); only the step that completes
            // the wave is worth a beacon, and spending the budget on the others would hold the
            // complete wave back to the next tick (measured: +1 interval at 0.3 us skew).
            let wave = |b: Instant| b.as_nanos() / interval;
            let news = LANES
                .iter()
                .any(|&l| wave(barriers[l as usize]) > wave(p.last_barrier_sent[l as usize]));
            if news && p.eager_budget > 0 && !p.beacon_pending && !p.cut {
                p.eager_budget -= 1;
                p.set_beacon_pending(true, &mut self.beacons_pending);
            }
        }
    }

    /// The switch checks itself after every step in debug builds; release builds leave the
    /// per-packet check to the simulator, which calls [`Switch::invariants`] after every step.
    fn check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.invariants();
        }
    }

    /// What every step must keep (TigerBeetle's `invariants()`), in O(ports): each register
    /// holds its input's barrier exactly while the input counts, `u64::MAX` while it does not;
    /// each half's minimum is the minimum of its registers;
    /// the count of ports owing a beacon is exact, and the reports stay within their bounds.
    pub fn invariants(&self) {
        for p in &self.ports {
            for lane in LANES {
                let regs = &self.lanes[lane as usize];
                let half = match p.direction {
                    PortDirection::Down => &regs.up,
                    PortDirection::Up => &regs.down,
                };
                let counted = half.counted[p.slot];
                match (lane, p.state, p.commit) {
                    (Lane::Commit, _, CommitInput::Counted) | (Lane::BestEffort, InputState::Live, _) => {
                        assert_eq!(counted, p.barrier[lane as usize].as_nanos())
                    }
                    (Lane::Commit, _, CommitInput::Removed | CommitInput::Unheard)
                    | (Lane::BestEffort, InputState::Dead, _) => {
                        assert_eq!(counted, u64::MAX)
                    }
                    (Lane::Commit, _, CommitInput::Joining) | (Lane::BestEffort, InputState::Joining, _) => {
                        assert!(counted < u64::MAX)
                    }
                }
            }
        }
        for regs in &self.lanes {
            for half in [&regs.up, &regs.down] {
                let min = half.counted.iter().copied().min().unwrap_or(u64::MAX);
                assert_eq!(half.min, min, "a half's minimum is its registers' minimum");
            }
        }
        let pending = self.ports.iter().filter(|p| p.beacon_pending).count();
        assert_eq!(pending, self.beacons_pending, "ports owing a beacon");
        assert!(self.reports.len() <= REPORTS_MAX_PER_PORT * self.ports.len().max(1));
        assert!(
            self.implausible.len() <= self.ports.len(),
            "one report per input at a time"
        );
        if let Some(cpu) = &self.cpu {
            cpu.invariants();
        }
    }

    /// A switch run long after its tick was stalled (its thread descheduled): it heard nobody
    /// in that time, and when the whole machine stalled, nobody sent either. Such a gap does
    /// not count against its input links. On these 2 shared cores a stall of ~300 ms had every
    /// spine time out every ToR link at once, and the controller declare live processes failed.
    /// Only a gap longer than a quarter of the timeout ([`STALL_OF_DEAD_AFTER`]) counts as a
    /// stall: passes of a loaded thread come a few ms late all the time, and excusing those too
    /// would stretch the timeout of a link that really died.
    fn excuse_own_stall(&mut self, now: Instant) {
        let late_ns = now.saturating_since(self.next_tick).as_nanos();
        if late_ns <= self.config.dead_after().as_nanos() / STALL_OF_DEAD_AFTER {
            return;
        }
        // A tick is due up to an interval after the last one: that much is no stall.
        let excused = Duration::from_nanos(late_ns.saturating_sub(self.config.beacon_interval.as_nanos()));
        self.counters.stalls_excused += 1;
        for p in &mut self.ports {
            p.last_heard = (p.last_heard + excused).min(now);
        }
    }
}

/// The output direction whose barrier a half computes.
fn direction_of(half: Half) -> PortDirection {
    match half {
        Half::Up => PortDirection::Up,
        Half::Down => PortDirection::Down,
    }
}

/// The barriers a packet carries, unwrapped near `now`.
fn heard_barriers<T: AsRef<[u8]>>(packet: &Packet<T>, now: Instant) -> [Instant; 2] {
    [
        packet.barrier().unwrap_near(now),
        packet.commit_barrier().unwrap_near(now),
    ]
}

impl Node for Switch {
    /// A switch checks what it needs to forward (length, version, opcode), as a hardware
    /// pipeline would; the fragment and payload rules are the endpoints' to enforce.
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        let Ok(packet) = Packet::new_checked(frame) else {
            return Route::Drop;
        };
        // The whole header is checked here, not only what routing reads: a frame the hosts
        // would refuse (unknown flags, a bad fragment, a beacon with a payload) is dropped and
        // counted at the first switch rather than forwarded, or its barrier taken. Checked,
        // not parsed: a whole `Repr` built per hop for the few fields read here was a sixth
        // of the switch's instructions per frame (docs/notes/2026-11-28-hardening.md).
        let Ok(opcode) = packet.check_header() else {
            return Route::Drop;
        };
        if let Some(rep) = self.representative {
            return self.classify_plain(port, opcode, &packet, rep);
        }
        if self.ports.get(port as usize).is_none_or(|p| p.cut) {
            return Route::Drop;
        }
        // Refused, not forwarded (`hear` counts and reports it). A data plane that only
        // forwards reads no barrier: its CPU checks the beacons.
        let reads_barriers = self.cpu.is_none() || opcode == Opcode::Beacon;
        if reads_barriers
            && self
                .implausible_ahead_ns(now, heard_barriers(&packet, now))
                .is_some()
        {
            return Route::Drop;
        }
        match opcode {
            Opcode::Beacon => Route::Consume,
            Opcode::Data | Opcode::Nak | Opcode::Prepare | Opcode::Ack => self.route_data(port, &packet),
        }
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        let port = port as usize;
        let Ok(mut packet) = Packet::new_checked(&mut frame[..]) else {
            self.counters.malformed += 1;
            return;
        };
        // `classify` checked these same bytes for a Forward or Consume; only a Drop may be
        // malformed rather than unroutable.
        if route == Route::Drop && packet.check_header().is_err() {
            self.counters.malformed += 1;
            return;
        }
        if let Some(rep) = self.representative {
            self.handle_plain(port as PortId, &mut packet, route, rep);
            return;
        }
        if port >= self.ports.len() {
            self.counters.malformed += 1;
            return;
        }
        if self.ports[port].cut {
            self.counters.cut_frames += 1;
            self.heard_on_cut(now, port);
            return;
        }
        if self.cpu.is_some() {
            self.handle_forward_only(now, port, &mut packet, route);
            self.check_invariants();
            return;
        }
        // Even a packet we cannot route proves its link alive and carries a barrier.
        let heard = heard_barriers(&packet, now);
        let taken = self.hear(now, port, heard);
        match route {
            // Refused for an implausible barrier: `classify` dropped it, `hear` counted it.
            Route::Consume | Route::Drop if !taken => {}
            Route::Consume => {
                self.counters.beacons_received += 1;
                self.propagate();
            }
            Route::Drop if !self.source_matches(port as PortId, packet.src()) => {
                self.counters.spoofed_source += 1
            }
            Route::Drop => self.counters.no_route += 1,
            Route::Forward(out) => {
                let out = out as usize;
                // Eq. 4.1: the packet leaves with the minimum over the inputs of the half that
                // sends it; a turnaround passes the uplink half, then the downlink half.
                let b = self.barriers_for_output(out);
                packet.set_barrier(b[Lane::BestEffort as usize].to_wire());
                packet.set_commit_barrier(b[Lane::Commit as usize].to_wire());
                packet.set_link_id(self.ports[out].peer_port);
                let o = &mut self.ports[out];
                o.last_sent = now;
                o.last_barrier_sent = b;
                o.set_beacon_pending(false, &mut self.beacons_pending);
                self.counters.forwarded += 1;
            }
        }
        self.check_invariants();
    }

    /// The frame sits in our ingress buffer: its barrier bounds it and everything behind it on
    /// its link, so the register may take it now (docs/ordering.md), and the link is alive.
    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        let Ok(packet) = Packet::new_checked(frame) else {
            return;
        };
        // A CPU takes beacons when they are handled, not while they wait in the data plane; a
        // plain switch takes none.
        if self.cpu.is_some() || self.representative.is_some() {
            return;
        }
        if self.ports.get(port as usize).is_some_and(|p| !p.cut) && packet.check_header().is_ok() {
            self.hear(now, port as usize, heard_barriers(&packet, now));
            self.check_invariants();
        }
    }

    /// DCTCP marking (paper 6.1): the output queue is past its threshold. Only data carries
    /// the mark; receivers echo it in ACKs.
    fn mark_congestion(&self, frame: &mut [u8]) {
        let Ok(mut packet) = Packet::new_checked(&mut frame[..]) else {
            return;
        };
        if matches!(
            Opcode::from_u8(packet.opcode_raw()),
            Some(Opcode::Data | Opcode::Prepare)
        ) {
            let f = packet.flags() | onepipe_wire::packet::flags::ECN;
            packet.set_flags(f);
        }
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let p = port as usize;
        if self.representative.is_some() || !self.ports.get(p)?.beacon_pending {
            return None;
        }
        if self.ports[p].cut {
            self.ports[p].set_beacon_pending(false, &mut self.beacons_pending);
            return None;
        }
        let barrier = self.barriers_for_output(p);
        let repr = Repr::beacon(
            barrier[Lane::BestEffort as usize].to_wire(),
            barrier[Lane::Commit as usize].to_wire(),
            self.ports[p].peer_port,
        );
        let len = repr.buffer_len();
        repr.emit(&mut Packet::new_unchecked(&mut buf[..len]));
        let o = &mut self.ports[p];
        o.set_beacon_pending(false, &mut self.beacons_pending);
        o.last_sent = now;
        o.last_barrier_sent = barrier;
        self.counters.beacons_sent += 1;
        Some(len)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.representative.is_some() {
            return None;
        }
        let cpu_due = self.cpu.as_ref().and_then(|c| c.next_due());
        Some(cpu_due.map_or(self.next_tick, |d| d.min(self.next_tick)))
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.representative.is_some() {
            return;
        }
        self.run_cpu(now);
        if now < self.next_tick {
            self.check_invariants();
            return;
        }
        let interval = self.config.beacon_interval;
        // Beacons at synchronized times on links idle since the previous tick (paper 4.2:
        // "beacons are sent at synchronized times ... the expected delay overhead is only half
        // of the beacon interval").
        let idle_since = self.next_tick.saturating_sub(interval);
        let forward_only = self.cpu.is_some();
        self.excuse_own_stall(now);
        for lane in &mut self.lanes {
            if lane.advance_empty(now) {
                self.counters.empty_half_ticks += 1;
            }
        }
        let dead_before = now.saturating_sub(self.config.dead_after());
        let repeat = self.report_repeat_at.is_some_and(|t| t <= now);
        let mut unresolved = false;
        for i in 0..self.ports.len() {
            let barriers = self.barriers_for_output(i);
            let p = &mut self.ports[i];
            p.eager_budget = EAGER_BEACONS_PER_INTERVAL;
            // A link that carried nothing since the last tick needs a beacon to stay alive; one
            // that did may still owe news that arrived after its last packet. A switch CPU
            // sees no data: it beacons on every link.
            let idle = p.last_sent <= idle_since || forward_only;
            if !p.cut && (idle || barriers != p.last_barrier_sent) {
                p.set_beacon_pending(true, &mut self.beacons_pending);
            }
            if p.state != InputState::Dead && p.last_heard < dead_before {
                // Paper 4.2: "If no beacon or data packet is received for a timeout ... the
                // input link is considered to be dead and removed from the input link list."
                self.kill_input(i);
                if !self.ports[i].heard {
                    self.forget_unheard(i);
                }
                if self.ports[i].heard && !self.ports[i].reported {
                    self.report(i);
                    continue;
                }
            }
            let p = &self.ports[i];
            if (p.reported || p.held) && p.commit != CommitInput::Removed {
                unresolved = true;
                if repeat {
                    self.counters.reports_repeated += 1;
                    self.report(i);
                }
            }
        }
        if !unresolved {
            self.report_repeat_at = None;
            self.report_repeat_after = REPORT_REPEAT_DEAD_AFTERS;
        } else if repeat || self.report_repeat_at.is_none() {
            if repeat {
                self.report_repeat_after = (self.report_repeat_after * 2).min(REPORT_REPEAT_DEAD_AFTERS_MAX);
            }
            let after = self.config.dead_after().saturating_mul(self.report_repeat_after);
            self.report_repeat_at = Some(now + after);
        }
        self.next_tick = now.next_multiple_of(interval);
        self.check_invariants();
    }
}

impl Hints for Switch {
    /// The neighbour is gone once its input is dead (silent past the dead-link timeout: links
    /// are full duplex, so nothing it sends means nothing it takes) or the controller cut it.
    fn peer_gone(&self, port: PortId) -> bool {
        self.ports
            .get(port as usize)
            .is_some_and(|p| p.cut || p.state == InputState::Dead)
    }
    fn wants_transmit(&self) -> bool {
        self.beacons_pending > 0
    }
}

mod budget;
mod cpu;
mod forwarding;
mod plain;
pub use cpu::CpuStatus;
mod plausible;
mod recovery;
mod registers;

#[cfg(test)]
mod cpu_tests;
#[cfg(test)]
mod tests;
