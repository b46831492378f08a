//! The management plane of the in-process runtime: the [`Controller`] on a thread of its own,
//! and a channel between it and every switch and process. The paper's controller sits on the
//! management network, not on the fabric it watches (paper 2, 6.1), so these channels do not
//! fail with the fabric.
//!
//! Nodes talk to it between their own steps, through the one management wrapper of every
//! runtime ([`crate::control_node::Mgmt`], here over channels: [`ChannelLink`]): a switch hands
//! over its link-down reports and applies Resume and cut orders; a process registers, takes
//! failure announcements to its endpoint and answers once the endpoint has finished with them.

#![allow(clippy::disallowed_methods)] // the controller thread waits on real time

use crate::control_msg::ControlMsg;
use crate::control_node::{RouteCache, SharedRoutes};
use crate::host::{Application, HostNode};
use onepipe_fabric::{Either, Node, Pipeline, Routes, Wiring};
use onepipe_proto::controller::graph::Graph;
use onepipe_proto::controller::store::LogCounters;
use onepipe_proto::controller::store::{MemoryStore, Service, Store};
use onepipe_proto::controller::{
    Controller, ControllerConfig, ControllerCounters, Failure, Input, Member, Output,
};
use onepipe_proto::endpoint::Endpoint;
use onepipe_proto::mgmt_outbox::{MgmtQueue, QueueCounters};
use onepipe_proto::plausible::ImplausibleReport;
use onepipe_proto::switch::{Switch, SwitchEvent};
use onepipe_runtime::inproc::Clock;
use onepipe_wire::Instant;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// A process repeats its registration this many beacon intervals apart until the controller
/// confirms it. A lost registration (a management datagram, or a lossy simulated run) left the
/// process unknown to the controller: it was not told of a failure, so it did not discard the
/// failed process's messages that every other receiver discarded, and atomicity broke (found
/// by a simulator campaign).
const REGISTER_REPEAT_BEACONS: u64 = 40;

/// A node's end of the management plane, whatever carries it: the node's side of the
/// conversation (registration, announcements taken and not yet answered) and the messages
/// waiting in each direction. A runtime moves [`ControlPort::take_inputs`] to the controller
/// and [`ControlPort::deliver`]s its commands, around [`Manage::exchange`].
pub struct ControlPort {
    pub member: Member,
    /// A process: when it last sent its registration (`None`: never).
    registered_at: Option<Instant>,
    /// A process: the controller confirmed its registration ([`ControlMsg::Registered`]); until
    /// then it is sent again every [`REGISTER_REPEAT_BEACONS`] beacon intervals.
    confirmed: bool,
    /// A process: announcements taken and not yet answered, with the failed processes each
    /// named.
    unanswered: Vec<(u64, Vec<u32>)>,
    /// For the controller. A node adds a bounded number per step (its reports, one
    /// registration, one answer per announcement) and the runtime empties it after each.
    outbox: Vec<Input>,
    inbox: VecDeque<ControlMsg>,
    /// A switch: the tables it builds when told to avoid links ([`ControlMsg::Avoid`]).
    routes: Option<SharedRoutes>,
    /// A process: the recovery in progress, if it was declared failed.
    recovery: recovery::PortRecovery,
    /// Orders from the controller naming a port or process this node does not have (a
    /// controller of another topology, or a forged frame): refused and counted.
    refused: u64,
}

impl ControlPort {
    pub fn new(member: Member) -> ControlPort {
        ControlPort {
            member,
            registered_at: None,
            confirmed: false,
            unanswered: Vec::new(),
            outbox: Vec::new(),
            inbox: VecDeque::new(),
            routes: None,
            recovery: Default::default(),
            refused: 0,
        }
    }

    /// A switch's port, which builds its tables from `routes` when told to avoid links.
    pub fn with_routes(member: Member, routes: SharedRoutes) -> ControlPort {
        ControlPort {
            routes: Some(routes),
            ..ControlPort::new(member)
        }
    }

    /// Switch `switch`'s tables avoiding the link ends `down`; `None` without a route cache.
    fn routes_avoiding(&self, switch: usize, down: Vec<(usize, u16)>) -> Option<Routes> {
        let routes = self.routes.as_ref()?;
        routes
            .lock()
            .expect("no thread panicked holding it")
            .table(switch, down)
    }

    pub fn send(&mut self, input: Input) {
        self.outbox.push(input);
    }

    /// Orders refused so far for naming a port or process the node does not have.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Counts an order the node refused, if `result` says it did.
    pub fn count_refused<E>(&mut self, result: Result<(), E>) {
        if result.is_err() {
            self.refused += 1;
        }
    }

    pub fn try_message(&mut self) -> Option<ControlMsg> {
        self.inbox.pop_front()
    }

    /// A message from the controller has arrived.
    pub fn deliver(&mut self, msg: ControlMsg) {
        self.inbox.push_back(msg);
    }

    /// What the node has said since the last call, oldest first.
    pub fn take_inputs(&mut self) -> std::vec::Drain<'_, Input> {
        self.outbox.drain(..)
    }

    /// The controller (re)started ([`crate::control_msg::ControlMsg::Hello`]): a registered
    /// process registers again. A switch repeats its reports ([`Manage::hello`]).
    pub fn hello(&mut self) {
        if let (Member::Process(process), Some(_)) = (self.member, self.registered_at) {
            self.send(Input::Register { process });
            // This controller may not have heard it before: repeated until it confirms.
            self.confirmed = false;
        }
    }

    /// Whether the node has something for the controller.
    pub fn has_inputs(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// A process's part (paper 5.2): register once; hand each announcement's failures to the
    /// endpoint (Discard, Recall); answer an announcement once the endpoint has finished with
    /// every process it names (Callback). The caller then tells its application.
    pub fn exchange_endpoint(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let Member::Process(me) = self.member else {
            return;
        };
        let repeat = endpoint
            .config()
            .beacon_interval
            .saturating_mul(REGISTER_REPEAT_BEACONS);
        match self.registered_at {
            None => {
                self.send(Input::Register { process: me });
                self.registered_at = Some(now);
                // With a controller to ask, a packet the fabric keeps losing goes through it.
                endpoint.enable_forwarding();
                endpoint.await_registration();
            }
            Some(at) if !self.confirmed && now >= at + repeat => {
                self.send(Input::Register { process: me });
                self.registered_at = Some(now);
            }
            Some(_) => {}
        }
        while let Some(c) = self.try_message() {
            if let ControlMsg::Registered { failures } = c {
                // Failures it may have missed before the controller knew it; a repeated one
                // changes nothing. Only then may it deliver reliable messages.
                for f in &failures {
                    let result = endpoint.on_process_failed(now, f.process, f.ts);
                    self.count_refused(result);
                }
                endpoint.registration_confirmed();
                self.confirmed = true;
                continue;
            }
            let Some(c) = self.recovery_message(now, endpoint, c) else {
                continue;
            };
            if let ControlMsg::PathsChanged = c {
                endpoint.on_paths_changed(now);
                continue;
            }
            if let ControlMsg::Forward { id, packet } = c {
                self.answer_forward(now, endpoint, id, &packet);
                continue;
            }
            if let ControlMsg::Announce { epoch, failures } = c {
                for f in &failures {
                    // The controller never names the process it announces to, nor one that does
                    // not exist; a repeated announcement changes nothing.
                    let result = endpoint.on_process_failed(now, f.process, f.ts);
                    self.count_refused(result);
                }
                if !self.unanswered.iter().any(|(e, _)| *e == epoch) {
                    self.unanswered
                        .push((epoch, failures.iter().map(|f| f.process).collect()));
                }
            }
        }
        if let Some(r) = endpoint.poll_implausible() {
            self.send(implausible_input(self.member, r));
        }
        // Recalls for failed receivers go before the answers that say Recall is done.
        self.send_lost_recalls(endpoint);
        // The answer goes per announcement, once the endpoint is done with every process it
        // names.
        let outbox = &mut self.outbox;
        self.unanswered.retain(|(epoch, failed)| {
            let done = failed.iter().all(|&p| p == me || endpoint.failure_complete(p));
            if done {
                outbox.push(Input::Completed {
                    process: me,
                    epoch: *epoch,
                });
            }
            !done
        });
        self.request_forwards(endpoint);
    }
}

/// What the controller's thread has for one node, bounded as every management queue is
/// ([`MgmtQueue`]): a node that stops taking its messages holds at most its bound.
pub type CommandQueue = Arc<Mutex<MgmtQueue<ControlMsg>>>;

/// A node's end of the in-process management plane: its [`ControlPort`], the channel to the
/// controller's thread (which empties it as it comes) and the queue from it. A node takes it
/// through [`crate::control_node::Mgmt::attach`].
pub struct ChannelLink {
    pub port: ControlPort,
    pub to_controller: Sender<Input>,
    pub from_controller: CommandQueue,
}

/// What a node does with its management channel, between its own steps.
pub trait Manage {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort);

    /// The controller (re)started and may have missed what the node said: say it again.
    fn hello(&mut self, port: &mut ControlPort) {
        port.hello();
    }

    /// The node has a controller from now on (`Switch::set_controlled`).
    fn controlled(&mut self) {}
}

impl Manage for Switch {
    fn controlled(&mut self) {
        self.set_controlled();
    }

    /// Inputs still down are reported again; healed ones are not.
    fn hello(&mut self, port: &mut ControlPort) {
        for r in self.reported_down() {
            port.send(Input::LinkDown {
                member: port.member,
                port: r.port,
                last_commit_ns: r.last_commit.as_nanos(),
            });
        }
        for p in self.quarantined_heard() {
            port.send(Input::Heard {
                member: port.member,
                port: p,
            });
        }
    }

    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        while let Some(e) = self.poll_event() {
            port.send(switch_input(port.member, e));
        }
        while let Some(c) = port.try_message() {
            // Ports come from the controller's graph of this same wiring.
            match c {
                ControlMsg::RemoveInputs(ports) => {
                    for p in ports {
                        port.count_refused(self.remove_input(p));
                    }
                }
                ControlMsg::CutInput(p) => port.count_refused(self.cut_input(p)),
                ControlMsg::Avoid(down) => {
                    if let Some(t) = port.routes_avoiding(self.id(), down) {
                        self.set_routes(t);
                    }
                }
                ControlMsg::Readmit(ports) => {
                    for p in ports {
                        port.count_refused(self.readmit_input(now, p));
                    }
                }
                ControlMsg::Announce { .. }
                | ControlMsg::PathsChanged
                | ControlMsg::Registered { .. }
                | ControlMsg::Forward { .. }
                | ControlMsg::OwnFailure { .. }
                | ControlMsg::LostRecalls { .. }
                | ControlMsg::Recovery { .. }
                | ControlMsg::Rejoined { .. }
                // Transports answer Hello themselves; inputs are for the controller.
                | ControlMsg::Hello
                | ControlMsg::Input(_) => {}
            }
        }
    }
}

/// A host representative (paper 6.2.3) is managed as the switch it stands for.
impl Manage for onepipe_proto::representative::Representative {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        self.program_mut().exchange(now, port);
    }
    fn hello(&mut self, port: &mut ControlPort) {
        self.program_mut().hello(port);
    }
    fn controlled(&mut self) {
        self.program_mut().controlled();
    }
}

impl<A: Application> Manage for HostNode<A> {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        port.exchange_endpoint(now, &mut self.endpoint);
        self.take_events();
    }
}

impl<A: Manage, B: Manage> Manage for Either<Box<A>, Box<B>> {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        match self {
            Either::Left(a) => a.exchange(now, port),
            Either::Right(b) => b.exchange(now, port),
        }
    }
    fn hello(&mut self, port: &mut ControlPort) {
        match self {
            Either::Left(a) => a.hello(port),
            Either::Right(b) => b.hello(port),
        }
    }
    fn controlled(&mut self) {
        match self {
            Either::Left(a) => a.controlled(),
            Either::Right(b) => b.controlled(),
        }
    }
}

/// What the controller is told of a switch's event.
pub fn switch_input(member: Member, event: SwitchEvent) -> Input {
    match event {
        SwitchEvent::InputDown(r) => Input::LinkDown {
            member,
            port: r.port,
            last_commit_ns: r.last_commit.as_nanos(),
        },
        SwitchEvent::InputHeard(port) => Input::Heard { member, port },
        SwitchEvent::Implausible(r) => implausible_input(member, r),
    }
}

/// What the controller is told of frames a switch or endpoint refused for implausible time.
pub fn implausible_input(member: Member, r: ImplausibleReport) -> Input {
    Input::Implausible {
        member,
        port: r.port,
        ahead_ns: r.ahead_ns,
        refused: r.refused,
    }
}

/// Every program of a switch pipeline talks to the controller over the switch's one channel.
impl<P: Node + Manage> Manage for Pipeline<P> {
    fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
        for (_, p) in self.programs_mut() {
            p.exchange(now, port);
        }
    }
    fn hello(&mut self, port: &mut ControlPort) {
        for (_, p) in self.programs_mut() {
            p.hello(port);
        }
    }
    fn controlled(&mut self) {
        for (_, p) in self.programs_mut() {
            p.controlled();
        }
    }
}

/// When the controller acted, for reports (`onepipe demo --fail`).
#[derive(Clone, Debug, Default)]
pub struct ControlTimeline {
    pub first_report_at: Option<Instant>,
    pub first_announce_at: Option<Instant>,
    /// The first and last Resume (inputs removed). A later one than the failure's own comes
    /// from a later event: a link declared dead on a worker that stalled.
    pub first_resume_at: Option<Instant>,
    pub last_resume_at: Option<Instant>,
    pub failures: Vec<Failure>,
    pub counters: ControllerCounters,
    /// Inputs refused as naming nothing in the graph, or that the log could not take.
    pub refused: u64,
    /// Reroutes sent again (`control_node::REROUTE_REPEATS`).
    pub reroutes_repeated: u64,
    /// What the log appended, left unwritten and compacted.
    pub log: LogCounters,
    /// What the queues to the nodes merged and dropped, summed ([`MgmtQueue`]).
    pub queues: QueueCounters,
}

/// The controller thread. Dropping it stops the thread.
pub struct ControlPlane {
    stop: Arc<AtomicBool>,
    timeline: Arc<Mutex<ControlTimeline>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlPlane {
    /// Starts a controller for `wiring`, with a port for every runtime node (switches first,
    /// then processes, as [`Wiring::node_of_process`] numbers them). Its log is kept in memory.
    pub fn start(
        wiring: &Wiring,
        config: ControllerConfig,
        clock: Clock,
    ) -> std::io::Result<(ControlPlane, Vec<ChannelLink>)> {
        Self::start_with(wiring, config, MemoryStore::default(), clock)
    }

    pub fn start_with<S: Store + Send + 'static>(
        wiring: &Wiring,
        config: ControllerConfig,
        store: S,
        clock: Clock,
    ) -> std::io::Result<(ControlPlane, Vec<ChannelLink>)> {
        let (to_controller, inputs) = channel();
        let members = (0..wiring.switch_count())
            .map(Member::Switch)
            .chain((0..wiring.process_count() as u32).map(Member::Process));
        let mut commands = Vec::new();
        let routes = RouteCache::shared(wiring);
        let ports = members
            .map(|member| {
                let queue = CommandQueue::default();
                commands.push(queue.clone());
                let port = match member {
                    Member::Switch(_) => ControlPort::with_routes(member, routes.clone()),
                    Member::Process(_) => ControlPort::new(member),
                };
                ChannelLink {
                    port,
                    to_controller: to_controller.clone(),
                    from_controller: queue,
                }
            })
            .collect();
        let controller = Controller::new(Graph::new(wiring), config);
        let service = Service::open(controller, store, clock.now())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let timeline = Arc::new(Mutex::new(ControlTimeline::default()));
        let thread = {
            let (stop, timeline, wiring) = (stop.clone(), timeline.clone(), wiring.clone());
            std::thread::Builder::new()
                .name("onepipe-controller".into())
                .spawn(move || run(service, &inputs, &commands, &wiring, &clock, &stop, &timeline))?
        };
        Ok((
            ControlPlane {
                stop,
                timeline,
                thread: Some(thread),
            },
            ports,
        ))
    }

    pub fn timeline(&self) -> ControlTimeline {
        self.timeline
            .lock()
            .expect("the controller thread does not panic")
            .clone()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How long the controller thread sleeps at most between looks at its timers.
const POLL_MAX: std::time::Duration = std::time::Duration::from_millis(1);

fn run<S: Store>(
    mut service: Service<S>,
    inputs: &Receiver<Input>,
    commands: &[CommandQueue],
    wiring: &Wiring,
    clock: &Clock,
    stop: &AtomicBool,
    timeline: &Mutex<ControlTimeline>,
) {
    while !stop.load(Ordering::Relaxed) {
        let now = clock.now();
        let wait = service
            .poll_timeout()
            .map_or(POLL_MAX, |t| {
                std::time::Duration::from_nanos(t.saturating_since(now).as_nanos())
            })
            .min(POLL_MAX);
        let first = inputs.recv_timeout(wait).ok();
        let mut changed = false;
        let mut t = timeline.lock().expect("only this thread writes");
        for input in first
            .into_iter()
            .chain(std::iter::from_fn(|| inputs.try_recv().ok()))
        {
            let now = clock.now();
            changed = true;
            if matches!(input, Input::LinkDown { .. }) {
                t.first_report_at.get_or_insert(now);
            }
            if service.handle_input(now, input).is_err() {
                t.refused += 1;
            }
        }
        let now = clock.now();
        changed |= service.poll_timeout().is_some_and(|at| at <= now);
        if service.handle_timeout(now).is_err() {
            t.refused += 1;
        }
        if let Some(down) = service.take_reroute() {
            for switch in &commands[..wiring.switch_count()] {
                tell(switch, ControlMsg::Avoid(down.clone()));
            }
            for p in 0..wiring.process_count() as u32 {
                tell(&commands[wiring.node_of_process(p)], ControlMsg::PathsChanged);
            }
        }
        while let Some(out) = service.poll_event() {
            match out {
                Output::Announce { .. } => {
                    t.first_announce_at.get_or_insert(now);
                }
                Output::RemoveInputs { .. } => {
                    t.first_resume_at.get_or_insert(now);
                    t.last_resume_at = Some(now);
                }
                _ => {}
            }
            let (to, msg) = ControlMsg::order(out);
            let node = match to {
                Member::Switch(s) => s,
                Member::Process(p) => wiring.node_of_process(p),
            };
            tell(&commands[node], msg);
        }
        // Only inputs and timers change the controller's state.
        if changed {
            t.failures = service.controller().failures();
            t.counters = service.controller().counters().clone();
            t.log = service.log_counters().clone();
            t.queues = QueueCounters::default();
            for q in commands {
                t.queues
                    .add(&q.lock().expect("no thread panics holding it").counters);
            }
        }
    }
}

/// Queues `msg` for a node, unless its runtime stopped and dropped its end: nothing to tell it.
fn tell(node: &CommandQueue, msg: ControlMsg) {
    if Arc::strong_count(node) > 1 {
        node.lock().expect("no thread panics holding it").push(msg);
    }
}

pub(crate) mod recovery;

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
    use onepipe_wire::Duration;

    fn registrations(port: &mut ControlPort) -> usize {
        port.take_inputs()
            .filter(|i| matches!(i, Input::Register { process: 1 }))
            .count()
    }

    /// Management frames can be lost: a process registers again every
    /// `REGISTER_REPEAT_BEACONS` beacon intervals until the controller confirms, then no more.
    #[test]
    fn a_process_registers_again_until_the_controller_confirms() {
        let start = Instant::from_nanos(1_000_000);
        let mut config = EndpointConfig::new(1, 2, 1);
        config.beacon_interval = Duration::from_micros(1);
        let mut endpoint = Endpoint::new(config, start);
        let mut port = ControlPort::new(Member::Process(1));
        let at = |us: u64| start + Duration::from_micros(us);
        port.exchange_endpoint(at(0), &mut endpoint);
        assert_eq!(registrations(&mut port), 1);
        port.exchange_endpoint(at(REGISTER_REPEAT_BEACONS - 1), &mut endpoint);
        assert_eq!(registrations(&mut port), 0);
        port.exchange_endpoint(at(REGISTER_REPEAT_BEACONS), &mut endpoint);
        assert_eq!(registrations(&mut port), 1, "unconfirmed: again");
        port.deliver(ControlMsg::Registered { failures: Vec::new() });
        port.exchange_endpoint(at(REGISTER_REPEAT_BEACONS + 1), &mut endpoint);
        for k in 2..10 {
            port.exchange_endpoint(at(k * REGISTER_REPEAT_BEACONS), &mut endpoint);
        }
        assert_eq!(registrations(&mut port), 0, "confirmed: no more");
        // A controller that restarts says Hello: registered again until it confirms.
        port.hello();
        assert_eq!(registrations(&mut port), 1);
        port.exchange_endpoint(at(20 * REGISTER_REPEAT_BEACONS), &mut endpoint);
        assert_eq!(registrations(&mut port), 1);
    }

    /// A process the controller confirms late may have missed failures announced before it
    /// was known: the confirmation names them, and the port hands them to the endpoint before
    /// it lets reliable delivery go on (the endpoint's side: `an_unconfirmed_process_delivers_
    /// nothing_until_its_confirmation_names_the_failures` in onepipe-proto).
    #[test]
    fn a_confirmation_hands_its_failures_to_the_endpoint() {
        let start = Instant::from_nanos(1_000_000);
        let mut endpoint = Endpoint::new(EndpointConfig::new(1, 2, 1), start);
        let mut port = ControlPort::new(Member::Process(1));
        port.exchange_endpoint(start, &mut endpoint);
        assert!(endpoint.failed_processes().is_empty());
        let ts = Instant::from_nanos(500_000);
        port.deliver(ControlMsg::Registered {
            failures: vec![Failure { process: 0, ts }],
        });
        port.exchange_endpoint(start + Duration::from_micros(1), &mut endpoint);
        assert_eq!(endpoint.failed_processes(), &[(0, ts)]);
    }
}
