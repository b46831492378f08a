//! A management plane made of links (paper 5.2, 6.1): the [`Controller`] as a node of its own
//! ([`ControllerNode`]), joined to every switch and process by a management link, over which
//! [`ControlMsg`] frames travel. In the simulator the links take virtual time, so the
//! controller's decisions interleave with the fabric's events exactly and reproducibly. The
//! management links are not part of the fabric: fabric failures leave them up, as the paper's
//! separate management network would (a failed node says nothing, though).
//!
//! Nodes speak through [`Mgmt`], which carries the frames on one extra port; the node's side of
//! the conversation is the same as over channels ([`Manage`]).

use crate::control::{ChannelLink, CommandQueue, ControlPort, ControlTimeline, Manage};
use crate::control_msg::ControlMsg;
use onepipe_fabric::{DirectedLink, Hints, Node, PortId, Route, Routes, Wiring, routing};
use onepipe_proto::controller::graph::Graph;
use onepipe_proto::controller::store::{MemoryStore, Service, ServiceError, Store, StoreError};
use onepipe_proto::controller::{Controller, ControllerConfig, Failure, Input, Member, Output};
use onepipe_proto::mgmt_outbox::{MgmtOutbox, MgmtQueue, QueueCounters};
use onepipe_wire::{Duration, Instant};
use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// Tables avoiding a set of links, built once per set and shared by every switch: a switch
/// told to avoid links builds only its own view, but building one table builds them all.
pub struct RouteCache {
    wiring: Wiring,
    /// The last set of link ends avoided, sorted, and every switch's tables for it.
    last: Option<(DownLinks, Arc<Vec<Routes>>)>,
}

/// Link ends out of use, as `(switch, port)`.
type DownLinks = Vec<(usize, u16)>;

pub type SharedRoutes = Arc<Mutex<RouteCache>>;

impl RouteCache {
    pub fn shared(wiring: &Wiring) -> SharedRoutes {
        Arc::new(Mutex::new(RouteCache {
            wiring: wiring.clone(),
            last: None,
        }))
    }

    pub(crate) fn table(&mut self, switch: usize, mut down: DownLinks) -> Option<Routes> {
        down.sort_unstable();
        let fresh = self.last.as_ref().is_none_or(|(d, _)| *d != down);
        if fresh {
            let tables = routing::build_avoiding(&self.wiring, &|s, p| down.binary_search(&(s, p)).is_ok());
            self.last = Some((down, Arc::new(tables)));
        }
        let (_, tables) = self.last.as_ref().expect("just built");
        tables.get(switch).cloned()
    }
}

/// What the management plane of a node counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MgmtCounters {
    /// Frames on the management port that were not control messages for this node.
    pub malformed: u64,
    /// Forward requests dropped while too many waited for the link ([`MgmtOutbox`]).
    pub forward_requests_dropped: u64,
    /// Messages for the controller merged with an equal one that still waited for the link,
    /// or dropped from a full queue ([`onepipe_proto::mgmt_outbox`]).
    pub queue: QueueCounters,
    /// Orders naming a port or process the node does not have ([`ControlPort::refused`]).
    pub refused: u64,
}

/// How a node's management messages travel.
enum Transport {
    /// As frames on a port of the node's own (the simulator, udp): what the node says waits
    /// for the link.
    Port {
        /// The node's port that the management link leaves from (one past its fabric ports).
        mgmt_port: PortId,
        pending: MgmtOutbox,
    },
    /// Over channels to the controller's thread (the inproc runtime).
    Channel {
        to_controller: Sender<Input>,
        from_controller: CommandQueue,
    },
}

/// A node's end of its management link.
struct MgmtLink {
    port: ControlPort,
    transport: Transport,
    counters: MgmtCounters,
}

/// A switch or process, with (or without) its link to the controller: the one management
/// wrapper of every runtime. The node's side of the conversation ([`Manage`],
/// [`ControlPort`]) is the same whatever carries it.
pub struct Mgmt<N> {
    pub node: N,
    link: Option<MgmtLink>,
}

impl<N: Node + Manage> Mgmt<N> {
    pub fn unmanaged(node: N) -> Mgmt<N> {
        Mgmt { node, link: None }
    }

    /// Puts `node` in place of the one managed so far (a switch that restarted): it has the
    /// same controller, if any.
    pub fn replace_node(&mut self, mut node: N) {
        if self.link.is_some() {
            node.controlled();
        }
        self.node = node;
    }

    pub fn managed(mut node: N, member: Member, mgmt_port: PortId, routes: SharedRoutes) -> Mgmt<N> {
        node.controlled();
        Mgmt {
            node,
            link: Some(MgmtLink {
                port: match member {
                    Member::Switch(_) => ControlPort::with_routes(member, routes),
                    Member::Process(_) => ControlPort::new(member),
                },
                transport: Transport::Port {
                    mgmt_port,
                    pending: MgmtOutbox::default(),
                },
                counters: MgmtCounters::default(),
            }),
        }
    }

    /// Connects the node to the controller's thread ([`crate::control::ControlPlane`]).
    pub fn attach(&mut self, link: ChannelLink) {
        self.node.controlled();
        self.link = Some(MgmtLink {
            port: link.port,
            transport: Transport::Channel {
                to_controller: link.to_controller,
                from_controller: link.from_controller,
            },
            counters: MgmtCounters::default(),
        });
    }

    pub fn counters(&self) -> MgmtCounters {
        let Some(l) = &self.link else {
            return MgmtCounters::default();
        };
        let counters = MgmtCounters {
            refused: l.port.refused(),
            ..l.counters.clone()
        };
        match &l.transport {
            Transport::Port { pending, .. } => MgmtCounters {
                forward_requests_dropped: pending.forwards_dropped,
                queue: pending.counters().clone(),
                ..counters
            },
            Transport::Channel { .. } => counters,
        }
    }

    /// The outbox of a link made of frames on `port`.
    fn pending_on(&mut self, port: PortId) -> Option<&mut MgmtOutbox> {
        match &mut self.link.as_mut()?.transport {
            Transport::Port { mgmt_port, pending } if *mgmt_port == port => Some(pending),
            _ => None,
        }
    }

    fn is_mgmt(&self, port: PortId) -> bool {
        self.link
            .as_ref()
            .is_some_and(|l| matches!(l.transport, Transport::Port { mgmt_port, .. } if mgmt_port == port))
    }

    /// Takes what the controller sent (over channels; frames arrive through `handle_frame`),
    /// lets the node exchange, and sends what it said.
    fn exchange(&mut self, now: Instant) {
        let Some(l) = &mut self.link else { return };
        if let Transport::Channel { from_controller, .. } = &l.transport {
            let arrived: Vec<ControlMsg> = {
                let mut queue = from_controller.lock().expect("no thread panics holding it");
                std::iter::from_fn(|| queue.pop()).collect()
            };
            for msg in arrived {
                receive(&mut self.node, l, msg);
            }
        }
        self.node.exchange(now, &mut l.port);
        for input in l.port.take_inputs() {
            match &mut l.transport {
                Transport::Port { pending, .. } => pending.push(input),
                // The controller outlives the nodes; if it stopped first, nothing is left to
                // tell.
                Transport::Channel { to_controller, .. } => {
                    let _ = to_controller.send(input);
                }
            }
        }
    }

    fn receive_control(&mut self, now: Instant, frame: &[u8]) {
        let Some(l) = &mut self.link else { return };
        match ControlMsg::decode(frame) {
            Ok(msg) => receive(&mut self.node, l, msg),
            Err(_) => l.counters.malformed += 1,
        }
        self.exchange(now);
    }
}

/// What a node's link does with a message from the controller, whichever transport brought it.
fn receive<N: Manage>(node: &mut N, l: &mut MgmtLink, msg: ControlMsg) {
    match msg {
        // The controller (re)started: answers to announcements are repeated when the
        // announcements are; registrations and reports now.
        ControlMsg::Hello => node.hello(&mut l.port),
        // Inputs go to the controller, and tables are for switches.
        ControlMsg::Input(_) => l.counters.malformed += 1,
        ControlMsg::Avoid(_) if matches!(l.port.member, Member::Process(_)) => l.counters.malformed += 1,
        msg => l.port.deliver(msg),
    }
}

impl<N: Node + Manage> Node for Mgmt<N> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        if self.is_mgmt(port) {
            return Route::Consume;
        }
        self.node.classify(now, port, frame)
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        if self.is_mgmt(port) {
            self.receive_control(now, frame);
            return;
        }
        self.node.handle_frame(now, port, frame, route)
    }
    fn handle_stalled(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if !self.is_mgmt(port) {
            self.node.handle_stalled(now, port, frame)
        }
    }
    fn mark_congestion(&self, frame: &mut [u8]) {
        self.node.mark_congestion(frame)
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if let Some(pending) = self.pending_on(port) {
            let input = pending.pop()?;
            return Some(
                ControlMsg::Input(input)
                    .encode(buf)
                    .expect("an input fits a frame: forwarded packets are bounded to fit"),
            );
        }
        self.node.poll_transmit(now, port, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.node.poll_timeout()
    }
    /// Every node has a timer at least once a beacon interval, so reports and answers leave
    /// within one (the paper's switches and hosts poll their state no less often).
    fn handle_timeout(&mut self, now: Instant) {
        self.node.handle_timeout(now);
        self.exchange(now);
    }
}

impl<N: Node + Manage> Hints for Mgmt<N> {
    fn peer_gone(&self, port: PortId) -> bool {
        self.node.peer_gone(port)
    }
    fn wants_transmit(&self) -> bool {
        self.node.wants_transmit()
            || self.link.as_ref().is_some_and(
                |l| matches!(&l.transport, Transport::Port { pending, .. } if !pending.is_empty()),
            )
    }
    fn end_visit(&mut self, now: Instant) -> usize {
        self.node.end_visit(now)
    }
    /// The node's class for its frames; a management frame (which has its own protocol) gets
    /// whatever the node gives a frame of that protocol.
    fn priority(&self, frame: &[u8]) -> u8 {
        self.node.priority(frame)
    }
}

/// What the controller did, for a service that reports as it goes (`onepipe controller`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlEvent {
    /// Detect: `member` reported its input at `port` down, `last_commit` the last commit
    /// barrier it carried.
    Report {
        at: Instant,
        member: Member,
        port: u16,
        last_commit: Instant,
    },
    /// Determine and Broadcast: these processes are declared failed, and `announced_to`
    /// correct processes are told.
    Declared {
        at: Instant,
        failures: Vec<Failure>,
        announced_to: usize,
    },
    /// Every switch is told to route around these `(switch, port)` link ends.
    Rerouted { at: Instant, avoid: Vec<(usize, u16)> },
    /// Resume: `switch` stops waiting for its inputs at `ports`.
    Resumed {
        at: Instant,
        switch: usize,
        ports: Vec<u16>,
    },
    /// `switch` is told to cut its input at `port` (the far end is to be declared failed).
    Cut { at: Instant, switch: usize, port: u16 },
    /// `member` refused `refused` frames on its input at `port` for barriers or timestamps
    /// implausibly far ahead of its clock, the furthest `ahead_ns` ahead: recorded, nobody
    /// declared failed (docs/failures.md, "Implausible time").
    Implausible {
        at: Instant,
        member: Member,
        port: u16,
        ahead_ns: u64,
        refused: u64,
    },
    /// A frame on `port` that was not an input of node `port`, or an input the controller
    /// could not use (`reason`).
    Refused {
        at: Instant,
        port: PortId,
        reason: String,
    },
}

/// Events kept for [`ControllerNode::take_events`]; a controller nobody asks (the simulator's)
/// keeps only the latest.
const EVENTS_MAX: usize = 4096;

/// A reroute (`Avoid` to every switch, `PathsChanged` to every process) is sent this many
/// times more, an announcement repeat interval apart. Nobody answers it, and a switch that
/// missed it (a lossy management link) would keep sending into the dead link, its reliable
/// traffic crossing only by controller forwarding. Both messages name the whole state, so a
/// copy changes nothing at a node that had it (a switch finds its tables in the route cache).
pub const REROUTE_REPEATS: u32 = 3;

/// The last reroute, to send again.
struct RerouteRepeat {
    down: DownLinks,
    at: Instant,
    left: u32,
}

/// The controller as a node: port `i` leads to node `i` (switches, then processes,
/// as [`Wiring::node_of_process`] numbers them). Its log is `S`: memory, or a file that a
/// restarted controller replays ([`crate::file_store::FileStore`]).
pub struct ControllerNode<S: Store = MemoryStore> {
    service: Service<S>,
    reroute_repeat: Option<RerouteRepeat>,
    /// What each node has yet to take, bounded ([`MgmtQueue`]: a node that stopped taking
    /// its messages holds at most its bound).
    queues: Vec<MgmtQueue<ControlMsg>>,
    queued: usize,
    switches: usize,
    processes: usize,
    /// Node index of switch 0's host representative (`Incarnation::Host`): representatives
    /// speak and are spoken to as their switches, whose orders they get too.
    representatives_from: Option<usize>,
    pub timeline: ControlTimeline,
    events: VecDeque<ControlEvent>,
    /// The last error of the log: an input it could not take is not acted on (write-ahead).
    store_error: Option<StoreError>,
}

impl ControllerNode<MemoryStore> {
    pub fn new(wiring: &Wiring, config: ControllerConfig, now: Instant) -> ControllerNode<MemoryStore> {
        ControllerNode::open(wiring, config, MemoryStore::default(), now).expect("memory never fails")
    }
}

impl<S: Store> ControllerNode<S> {
    /// A controller for `wiring` on the log in `store`: what the log holds is replayed, and
    /// what a controller taking over must send (announcements of a recovery in progress, cuts,
    /// Resumes, routes) is queued ([`Controller::take_over`]).
    pub fn open(
        wiring: &Wiring,
        config: ControllerConfig,
        store: S,
        now: Instant,
    ) -> Result<ControllerNode<S>, StoreError> {
        let controller = Controller::new(Graph::new(wiring), config);
        let service = Service::open(controller, store, now)?;
        let mut node = ControllerNode {
            service,
            reroute_repeat: None,
            queues: (0..wiring.switch_count() + wiring.process_count())
                .map(|_| MgmtQueue::default())
                .collect(),
            queued: 0,
            switches: wiring.switch_count(),
            processes: wiring.process_count(),
            representatives_from: None,
            timeline: ControlTimeline::default(),
            events: VecDeque::new(),
            store_error: None,
        };
        // Failures the log already decided are not news.
        node.timeline.failures = node.service.controller().failures();
        node.dispatch(now);
        Ok(node)
    }

    pub fn controller(&self) -> &Controller {
        self.service.controller()
    }

    /// Host delegation (paper 6.2.3): switch `s`'s representative is node `first + s`, at
    /// this node's port of that number. It reports for its switch, and gets every order its
    /// switch gets: the switch cuts ports and takes routes in its data plane, the
    /// representative changes its registers.
    pub fn with_representatives(mut self, first: usize) -> Self {
        let end = first + self.switches;
        self.queues
            .resize_with(end.max(self.queues.len()), MgmtQueue::default);
        self.representatives_from = Some(first);
        self
    }

    /// The nodes that act for switch `s`: the switch, and its representative if any.
    fn nodes_of_switch(&self, s: usize) -> impl Iterator<Item = usize> {
        std::iter::once(s).chain(self.representatives_from.and_then(|first| first.checked_add(s)))
    }

    /// What happened since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<ControlEvent> {
        self.events.drain(..).collect()
    }

    /// Asks every member to say again what it said before ([`ControlMsg::Hello`]): for a
    /// controller that (re)starts while the others run, and missed what they said meanwhile.
    pub fn greet(&mut self) {
        for s in 0..self.switches {
            for node in self.nodes_of_switch(s).collect::<Vec<_>>() {
                self.push(node, ControlMsg::Hello);
            }
        }
        for node in self.switches..self.switches + self.processes {
            self.push(node, ControlMsg::Hello);
        }
    }

    /// The last error of the log since the last call, if it refused an input or a tick.
    pub fn take_store_error(&mut self) -> Option<StoreError> {
        self.store_error.take()
    }

    fn event(&mut self, e: ControlEvent) {
        if self.events.len() == EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn push(&mut self, node: usize, msg: ControlMsg) {
        let q = &mut self.queues[node];
        let before = q.len();
        q.push(msg);
        self.queued = self.queued + q.len() - before;
    }

    /// What the queues to every node merged and dropped, summed.
    pub fn queue_counters(&self) -> QueueCounters {
        let mut sum = QueueCounters::default();
        for q in &self.queues {
            sum.add(&q.counters);
        }
        sum
    }

    fn dispatch(&mut self, now: Instant) {
        if let Some(down) = self.service.take_reroute() {
            self.send_reroute(&down);
            self.reroute_repeat = (REROUTE_REPEATS > 0).then(|| RerouteRepeat {
                down: down.clone(),
                at: now + self.service.controller().announce_repeat_interval(),
                left: REROUTE_REPEATS,
            });
            self.event(ControlEvent::Rerouted { at: now, avoid: down });
        }
        let mut announced = 0;
        while let Some(out) = self.service.poll_event() {
            match &out {
                Output::Announce { .. } => {
                    self.timeline.first_announce_at.get_or_insert(now);
                    announced += 1;
                }
                Output::RemoveInputs { switch, ports } => {
                    self.timeline.first_resume_at.get_or_insert(now);
                    self.timeline.last_resume_at = Some(now);
                    self.event(ControlEvent::Resumed {
                        at: now,
                        switch: *switch,
                        ports: ports.clone(),
                    });
                }
                Output::CutInput { switch, port } => self.event(ControlEvent::Cut {
                    at: now,
                    switch: *switch,
                    port: *port,
                }),
                _ => {}
            }
            let (to, msg) = ControlMsg::order(out);
            match to {
                Member::Switch(s) => {
                    for node in self.nodes_of_switch(s).collect::<Vec<_>>() {
                        self.push(node, msg.clone());
                    }
                }
                Member::Process(p) => self.push(self.switches + p as usize, msg),
            }
        }
        let failures = self.service.controller().failures();
        let known = &self.timeline.failures;
        let new: Vec<Failure> = failures
            .iter()
            .filter(|f| !known.iter().any(|k| k.process == f.process))
            .copied()
            .collect();
        if !new.is_empty() {
            self.event(ControlEvent::Declared {
                at: now,
                failures: new,
                announced_to: announced,
            });
        }
        self.timeline.failures = failures;
        self.timeline.counters = self.service.controller().counters().clone();
        self.timeline.log = self.service.log_counters().clone();
        self.timeline.queues = self.queue_counters();
    }

    fn send_reroute(&mut self, down: &DownLinks) {
        for s in 0..self.switches {
            self.push(s, ControlMsg::Avoid(down.clone()));
        }
        for node in self.switches..self.switches + self.processes {
            self.push(node, ControlMsg::PathsChanged);
        }
    }

    /// Sends the last reroute again if a repeat is due.
    fn repeat_reroute(&mut self, now: Instant) {
        let Some(r) = self.reroute_repeat.take_if(|r| r.at <= now) else {
            return;
        };
        self.send_reroute(&r.down);
        self.timeline.reroutes_repeated += 1;
        if r.left > 1 {
            self.reroute_repeat = Some(RerouteRepeat {
                at: now + self.service.controller().announce_repeat_interval(),
                left: r.left - 1,
                ..r
            });
        }
    }

    fn refuse(&mut self, now: Instant, port: PortId, reason: String) {
        self.timeline.refused += 1;
        self.event(ControlEvent::Refused {
            at: now,
            port,
            reason,
        });
    }
}

impl<S: Store + Send> Node for ControllerNode<S> {
    fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], _route: Route) {
        let input = match ControlMsg::decode(frame) {
            Ok(ControlMsg::Input(i)) => i,
            Ok(other) => return self.refuse(now, port, format!("not an input: {other:?}")),
            Err(e) => return self.refuse(now, port, e.to_string()),
        };
        // A member speaks for itself only: an input naming another is refused.
        let member = match input {
            Input::Register { process }
            | Input::Completed { process, .. }
            | Input::RecallLost { process, .. }
            | Input::Recover { process, .. }
            | Input::Rejoin { process, .. }
            | Input::Forward { from: process, .. }
            | Input::Forwarded { process, .. } => Member::Process(process),
            Input::LinkDown { member, .. }
            | Input::Heard { member, .. }
            | Input::Implausible { member, .. } => member,
        };
        let speaks_for = match member {
            Member::Switch(s) => self.nodes_of_switch(s).any(|n| n == port as usize),
            Member::Process(p) => self.switches + p as usize == port as usize,
        };
        if !speaks_for {
            return self.refuse(now, port, format!("{input:?} names another member"));
        }
        if let Input::LinkDown {
            member,
            port: input_port,
            last_commit_ns,
        } = input
        {
            self.timeline.first_report_at.get_or_insert(now);
            self.event(ControlEvent::Report {
                at: now,
                member,
                port: input_port,
                last_commit: Instant::from_nanos(last_commit_ns),
            });
        }
        if let Input::Implausible {
            member,
            port: input_port,
            ahead_ns,
            refused,
        } = input
        {
            self.event(ControlEvent::Implausible {
                at: now,
                member,
                port: input_port,
                ahead_ns,
                refused,
            });
        }
        match self.service.handle_input(now, input) {
            Ok(()) => {}
            Err(ServiceError::Store(e)) => {
                self.timeline.refused += 1;
                self.store_error = Some(e);
            }
            Err(e) => self.refuse(now, port, e.to_string()),
        }
        self.dispatch(now);
    }
    fn poll_transmit(&mut self, _now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        let msg = self.queues.get_mut(port as usize)?.pop()?;
        self.queued -= 1;
        Some(msg.encode(buf).expect("control messages fit a frame"))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let repeat = self.reroute_repeat.as_ref().map(|r| r.at);
        self.service.poll_timeout().into_iter().chain(repeat).min()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.repeat_reroute(now);
        match self.service.handle_timeout(now) {
            // Not logged, so not acted on: the timer fires again on the next call.
            Err(ServiceError::Store(e)) => self.store_error = Some(e),
            // A tick names nothing the graph could lack.
            Err(ServiceError::Input(_)) | Ok(()) => {}
        }
        self.dispatch(now);
    }
}

impl<S: Store + Send> Hints for ControllerNode<S> {
    /// An announcement is one failure notification per failed process it names (the paper's
    /// controller notifies every correct process of every failed one); anything else is one.
    fn work_units(&self, frame: &[u8]) -> u32 {
        match ControlMsg::decode(frame) {
            Ok(ControlMsg::Announce { failures, .. }) => failures.len().max(1) as u32,
            _ => 1,
        }
    }
    fn wants_transmit(&self) -> bool {
        self.queued > 0
    }
}

/// The management links between the controller (node `controller`) and every other node:
/// `delay` each way. A node's management port is one past its fabric ports.
pub fn management_links(wiring: &Wiring, controller: usize, delay: Duration) -> Vec<DirectedLink> {
    let mut links = Vec::new();
    for node in 0..wiring.switch_count() + wiring.process_count() {
        let mgmt = mgmt_port(wiring, node);
        links.push(DirectedLink {
            from: (node, mgmt),
            to: (controller, node as PortId),
            delay,
        });
        links.push(DirectedLink {
            from: (controller, node as PortId),
            to: (node, mgmt),
            delay,
        });
    }
    links
}

/// The management links between the controller (node `controller`) and the host
/// representatives of every switch, nodes `first..first + switches`
/// ([`ControllerNode::with_representatives`]): a representative's management port is 1, one
/// past its link to its switch.
pub fn representative_management_links(
    switches: usize,
    first: usize,
    controller: usize,
    delay: Duration,
) -> Vec<DirectedLink> {
    let mgmt = onepipe_proto::representative::UPLINK + 1;
    (first..first + switches)
        .flat_map(|node| {
            [
                DirectedLink {
                    from: (node, mgmt),
                    to: (controller, node as PortId),
                    delay,
                },
                DirectedLink {
                    from: (controller, node as PortId),
                    to: (node, mgmt),
                    delay,
                },
            ]
        })
        .collect()
}

/// The management port of node `node`: switches number their fabric ports from 0, a process
/// has one (to its ToR).
pub fn mgmt_port(wiring: &Wiring, node: usize) -> PortId {
    if node < wiring.switch_count() {
        wiring.switch_ports[node].len() as PortId
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_fabric::Topology;
    use onepipe_proto::switch::{Switch, SwitchConfig};

    /// The control messages node `n` sends on its management port now.
    fn said<N: Node + Manage>(n: &mut Mgmt<N>, now: Instant, mgmt: PortId) -> Vec<ControlMsg> {
        let mut buf = [0u8; 1024];
        let mut out = Vec::new();
        while let Some(len) = n.poll_transmit(now, mgmt, &mut buf) {
            out.push(ControlMsg::decode(&buf[..len]).unwrap());
        }
        out
    }

    /// A managed switch of two ports (1 us beacons, dead after 10): port 1 speaks once at
    /// 0.5 us, then port 0 alone beacons on, to `until_us`; its management port.
    fn switch_losing_port_1(until_us: u64) -> (Mgmt<Switch>, PortId) {
        let wiring = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
        let routes = routing::build(&wiring).unwrap().swap_remove(0);
        let config = SwitchConfig {
            beacon_interval: Duration::from_nanos(1_000),
            dead_after_intervals: 10,
            ecmp_seed: 1,
            promise_lead: Duration::ZERO,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
        };
        let t = Instant::from_nanos;
        let switch = Switch::new(0, &wiring, routes, config, t(0));
        let mgmt = mgmt_port(&wiring, 0);
        let mut n = Mgmt::managed(switch, Member::Switch(0), mgmt, RouteCache::shared(&wiring));
        let mut beacon = beacon(500);
        n.handle_frame(t(500), 1, &mut beacon, Route::Consume);
        beacon_port_0(&mut n, 1..=until_us);
        (n, mgmt)
    }

    fn beacon(b: u64) -> Vec<u8> {
        let b = onepipe_wire::Timestamp48::new(b);
        onepipe_wire::packet::Repr::beacon(b, b, 0).to_vec()
    }

    fn beacon_port_0(n: &mut Mgmt<Switch>, us: std::ops::RangeInclusive<u64>) {
        for k in us {
            let at = Instant::from_nanos(k * 1_000);
            let mut b = beacon(k * 1_000);
            n.handle_frame(at, 0, &mut b, Route::Consume);
            n.handle_timeout(at);
        }
    }

    fn port_1_down() -> ControlMsg {
        ControlMsg::Input(Input::LinkDown {
            member: Member::Switch(0),
            port: 1,
            last_commit_ns: 500,
        })
    }

    /// Nobody answers a reroute, and a switch that missed it would keep using the dead link:
    /// it goes again `REROUTE_REPEATS` times, an announcement repeat interval apart, to every
    /// switch (`Avoid`) and every process (`PathsChanged`), and then no more.
    #[test]
    fn a_reroute_is_sent_again_a_few_times() {
        let t = |ms: u64| Instant::from_nanos(ms * 1_000_000);
        // Two leaves of two hosts under two spines: leaf0's port 2 goes to a spine.
        let wiring = Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap();
        let mut c = ControllerNode::new(&wiring, ControllerConfig::default(), t(0));
        let report = ControlMsg::Input(Input::LinkDown {
            member: Member::Switch(0),
            port: 2,
            last_commit_ns: 1,
        });
        let mut frame = [0u8; 256];
        let len = report.encode(&mut frame).unwrap();
        c.handle_frame(t(1), 0, &mut frame[..len], Route::Consume);
        let process_node = wiring.switch_count() as PortId;
        let mut buf = [0u8; 1024];
        let (mut avoids, mut paths_changed) = (Vec::new(), Vec::new());
        for ms in 1..2_000 {
            if c.poll_timeout().is_some_and(|at| at <= t(ms)) {
                c.handle_timeout(t(ms));
            }
            while let Some(len) = c.poll_transmit(t(ms), 1, &mut buf) {
                if let Ok(ControlMsg::Avoid(down)) = ControlMsg::decode(&buf[..len]) {
                    assert!(down.contains(&(0, 2)));
                    avoids.push(ms);
                }
            }
            while let Some(len) = c.poll_transmit(t(ms), process_node, &mut buf) {
                if ControlMsg::decode(&buf[..len]) == Ok(ControlMsg::PathsChanged) {
                    paths_changed.push(ms);
                }
            }
        }
        let every = c.controller().announce_repeat_interval().as_nanos() / 1_000_000;
        let first = avoids[0];
        let expected: Vec<u64> = (0..=REROUTE_REPEATS as u64).map(|k| first + k * every).collect();
        assert_eq!(avoids, expected);
        assert_eq!(paths_changed, expected);
        assert_eq!(c.timeline.reroutes_repeated, REROUTE_REPEATS as u64);
    }

    /// Management frames can be lost: a report the controller has not acted on (the input is
    /// still in the commit lane) is made again every four dead-link timeouts, and no more
    /// once the controller's Resume removed the input.
    #[test]
    fn a_switch_repeats_a_report_until_the_controller_resumes() {
        let t = Instant::from_nanos;
        let (mut n, mgmt) = switch_losing_port_1(12);
        assert_eq!(said(&mut n, t(12_000), mgmt), vec![port_1_down()]);
        beacon_port_0(&mut n, 13..=51);
        assert_eq!(said(&mut n, t(51_000), mgmt), vec![], "not before 4 timeouts");
        beacon_port_0(&mut n, 52..=60);
        assert_eq!(said(&mut n, t(60_000), mgmt), vec![port_1_down()]);
        let mut resume = [0u8; 64];
        let len = ControlMsg::RemoveInputs(vec![1]).encode(&mut resume).unwrap();
        n.handle_frame(t(60_100), mgmt, &mut resume[..len], Route::Consume);
        beacon_port_0(&mut n, 61..=300);
        assert_eq!(said(&mut n, t(300_000), mgmt), vec![]);
        assert_eq!(n.node.counters().reports_repeated, 1);
    }

    /// A controller that restarts says Hello; a switch then repeats the reports of its inputs
    /// still down, since the first ones may have reached no controller.
    #[test]
    fn a_switch_repeats_its_reports_when_the_controller_says_hello() {
        let t = Instant::from_nanos;
        let (mut n, mgmt) = switch_losing_port_1(12);
        let report = port_1_down();
        assert_eq!(said(&mut n, t(12_000), mgmt), vec![report.clone()]);
        assert_eq!(said(&mut n, t(12_000), mgmt), vec![]);
        let mut hello = [0u8; 16];
        let len = ControlMsg::Hello.encode(&mut hello).unwrap();
        n.handle_frame(t(12_100), mgmt, &mut hello[..len], Route::Consume);
        assert_eq!(said(&mut n, t(12_100), mgmt), vec![report]);
        // Hello on a fabric port is no order.
        let mut hello = [0u8; 16];
        let len = ControlMsg::Hello.encode(&mut hello).unwrap();
        n.handle_frame(t(12_200), 0, &mut hello[..len], Route::Drop);
        assert_eq!(said(&mut n, t(12_200), mgmt), vec![]);
        assert_eq!(n.counters(), MgmtCounters::default());
    }
}
