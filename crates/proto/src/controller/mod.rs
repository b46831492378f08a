//! The controller (paper 5.2, 6.1): restricted failure atomicity for reliable 1Pipe.
//!
//! A failed component cannot simply be dropped from barrier aggregation: messages it sent may
//! be prepared at some receivers and not others. Its neighbours report the input links that
//! timed out, each with the last commit barrier it carried (Detect). The controller decides
//! which processes failed, those no longer connected to it in the routing graph, and each
//! one's *failure timestamp*: the largest commit barrier that crossed the cut of correct nodes
//! around it (Determine). It tells every correct process (Broadcast); each drops what the
//! failed process sent above that timestamp (Discard), aborts its scatterings the failed
//! process had not acknowledged (Recall), runs its callback and answers. Once all have
//! answered, the switches drop the failed inputs and barriers flow again (Resume).
//!
//! [`Controller`] is the decision core, sans-IO: inputs and time come in, outputs are polled.
//! It is deterministic, so a log of its inputs ([`store`]) is its whole state: a restarted
//! or standby controller replays the log and finishes any recovery in progress.

mod cuts;
pub mod forward;
pub mod graph;
mod implausible;
mod readmit;
mod recovery;
mod snapshot;
pub mod store;
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests;

pub use forward::{ForwardCounters, PacketBytes, UndeliverableRecall};
use graph::{End, Graph, NodeId};
pub use implausible::ImplausibleLink;
use onepipe_wire::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub use recovery::{LOST_RECALLS_MAX, LostRecall, RECALLS_PER_OUTPUT, RecoveryCounters};
pub use snapshot::{Snapshot, SnapshotError};

/// A participant that reports to the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Member {
    Switch(usize),
    Process(u32),
}

/// What the controller hears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Input {
    /// An endpoint starting up (paper 6.1: "when lib1pipe initializes, it registers to the
    /// controller").
    Register { process: u32 },
    /// Detect: the input of `member` at `port` timed out (a process has one port, 0: its
    /// switch went silent). `last_commit_ns` is the commit barrier it last carried.
    LinkDown {
        member: Member,
        port: u16,
        last_commit_ns: u64,
    },
    /// A correct process finished Discard, Recall and its callback for failure `epoch`.
    Completed { process: u32, epoch: u64 },
    /// Receiver Recovery (paper 5.2; `recovery.rs`): the input of `member` at `port`, quarantined since the process behind it failed,
    /// carried a frame: the process is back.
    Heard { member: Member, port: u16 },
    /// Sender `process` aborted scatterings (Recall) with messages to receivers that are
    /// failed and so cannot take the recall: recorded for each receiver's recovery. `lost`
    /// holds (receiver, timestamp ns, message id), at most [`RECALLS_PER_OUTPUT`] so that one
    /// input fits a management frame: a ToR failure aborts hundreds at each sender, and one
    /// input each would keep the controller busy that much longer.
    RecallLost {
        process: u32,
        lost: Vec<(u32, u64, u64)>,
    },
    /// Failed `process`, told of its failure, asks what it needs to recover.
    Recover { process: u32, incarnation: u64 },
    /// Failed `process` delivered or discarded its receive buffer and joins as a new process.
    Rejoin { process: u32, incarnation: u64 },
    /// Controller forwarding (paper 5.2, [`forward`]): `from` got no ACK from `to` for
    /// `packet`, a prepare or recall of its own, over the fabric.
    Forward { from: u32, to: u32, packet: PacketBytes },
    /// `process` took forwarded packet `id`; `ack` is its answer for the packet's source, if
    /// it has one.
    Forwarded {
        process: u32,
        id: u64,
        ack: Option<PacketBytes>,
    },
    /// `member` refused `refused` frames on its input at `port` (a process: 0, from its ToR)
    /// whose barriers or timestamps were implausibly far ahead of its clock, the furthest
    /// `ahead_ns` ahead. Recorded for the operator; nobody is declared failed for it
    /// (docs/failures.md, "Implausible time").
    Implausible {
        member: Member,
        port: u16,
        ahead_ns: u64,
        refused: u64,
    },
}

/// A process declared failed, with the timestamp from which on its messages are discarded (at
/// and above it: a commit barrier promises the messages below it). Serialized as
/// `[process, ts_ns]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "(u32, u64)", from = "(u32, u64)")]
pub struct Failure {
    pub process: u32,
    pub ts: Instant,
}

impl From<Failure> for (u32, u64) {
    fn from(f: Failure) -> (u32, u64) {
        (f.process, f.ts.as_nanos())
    }
}

impl From<(u32, u64)> for Failure {
    fn from((process, ts_ns): (u32, u64)) -> Failure {
        Failure {
            process,
            ts: Instant::from_nanos(ts_ns),
        }
    }
}

/// Serializes an [`Instant`] as its nanoseconds (`#[serde(with = "instant_ns")]`): the wire
/// crate has no serde.
pub mod instant_ns {
    use onepipe_wire::Instant;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Instant, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(t.as_nanos())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instant, D::Error> {
        u64::deserialize(d).map(Instant::from_nanos)
    }
}

/// What the controller asks of the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Broadcast: `failures` happened; answer with [`Input::Completed`] for `epoch`.
    Announce {
        to: u32,
        epoch: u64,
        failures: Vec<Failure>,
    },
    /// Resume: `switch` stops waiting for its inputs at `ports`.
    RemoveInputs { switch: usize, ports: Vec<u16> },
    /// `switch` must stop taking frames on its input at `port` and report it down: the far
    /// end is to be declared failed (it did not answer in time, or only it saw the link fail)
    /// and its last commit barrier is needed.
    CutInput { switch: usize, port: u16 },
    /// Receiver Recovery: `to` was declared failed at `ts` in its incarnation `incarnation`
    /// (and is heard again). It answers with [`Input::Recover`].
    OwnFailure { to: u32, ts: Instant, incarnation: u64 },
    /// Part of the answer to [`Input::Recover`], before [`Output::Recovery`]: recalls `to` could
    /// not be sent while it was failed (at most [`RECALLS_PER_OUTPUT`] each).
    LostRecalls {
        to: u32,
        incarnation: u64,
        recalls: Vec<LostRecall>,
    },
    /// The answer to [`Input::Recover`]: `to` failed at `ts`; `failures` are the first failure
    /// of every other process since (those it may not have heard), `failed_now` those still
    /// failed; `recalls` [`Output::LostRecalls`] came before; with `recalls_truncated` the record
    /// outgrew [`LOST_RECALLS_MAX`]. It answers with [`Input::Rejoin`].
    Recovery {
        to: u32,
        incarnation: u64,
        ts: Instant,
        failures: Vec<Failure>,
        failed_now: Vec<Failure>,
        recalls: u32,
        recalls_truncated: bool,
    },
    /// `to`'s registration arrived: it stops repeating it (management frames can be lost, and
    /// a process the controller does not know is neither told of failures nor waited for).
    /// `failures` are every process declared failed and not recovered, with its failure
    /// timestamp: a process that registers late may have missed their announcements, and it
    /// delivers no reliable message before it has discarded theirs (docs/failures.md).
    Registered { to: u32, failures: Vec<Failure> },
    /// `switch` takes its inputs at `ports` again: a recovered process, or a switch that has a
    /// process behind it again.
    Readmit { switch: usize, ports: Vec<u16> },
    /// `process` recovered and joined again as a new process, its `incarnation`-th: `to`
    /// starts its connections to it afresh (once per incarnation).
    Rejoined { to: u32, process: u32, incarnation: u64 },
    /// Controller forwarding: process `to` takes `packet` as if from the fabric and answers
    /// with [`Input::Forwarded`] for `id`.
    Forward { to: u32, id: u64, packet: PacketBytes },
}

#[derive(Clone, Copy, Debug)]
pub struct ControllerConfig {
    /// How long after a first report the controller waits for the others one failure causes
    /// (neighbours time out at slightly different times) before it decides.
    pub settle: Duration,
    /// How long correct processes have to answer an announcement, or a switch to report an
    /// input it was told to cut, before the controller acts without them.
    pub answer_timeout: Duration,
}

impl Default for ControllerConfig {
    fn default() -> ControllerConfig {
        ControllerConfig {
            settle: Duration::from_millis(5),
            answer_timeout: Duration::from_millis(500),
        }
    }
}

/// Inputs the controller could not use; none of them changes a decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerCounters {
    pub reports: u64,
    /// A link already known down, reported again (by the same or the other end).
    pub duplicate_reports: u64,
    /// Reports, registrations or completions naming a member or port that does not exist.
    pub unknown: u64,
    /// Completions for an epoch that was already resumed, or from a process not asked.
    pub stale_completions: u64,
    /// Processes declared failed because they did not answer in time.
    pub unanswered: u64,
    /// Switches taken for failed because they did not carry out a cut in time (see `cuts.rs`).
    #[serde(default)]
    pub switches_unanswering: u64,
    /// Links between switches taken back after their far end was heard again (`readmit.rs`).
    #[serde(default)]
    pub links_readmitted: u64,
    /// Such reports about a link in use, or one a decision is still to come for.
    #[serde(default)]
    pub readmissions_stale: u64,
    /// Such reports refused: the far side holds processes the controller cut off.
    #[serde(default)]
    pub readmissions_refused: u64,
    /// Resumes sent again to a switch that reported a resumed input again (it missed one).
    pub resumes_resent: u64,
    /// Announcements sent again to a process that had not answered.
    pub announcements_repeated: u64,
    /// Reports of frames refused for implausible time ([`Input::Implausible`]), and the frames
    /// they name.
    pub implausible_reports: u64,
    pub implausible_refused: u64,
    pub forwards: ForwardCounters,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum ControllerError {
    #[error("no process {0} in the routing graph")]
    UnknownProcess(u32),
    #[error("no port {port} at {member:?} in the routing graph")]
    UnknownPort { member: Member, port: u16 },
    #[error("forwarded packet refused: {0}")]
    BadForward(&'static str),
    #[error("{0} lost recalls in one report, more than {RECALLS_PER_OUTPUT}")]
    TooManyRecalls(usize),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Epoch {
    failures: Vec<Failure>,
    awaiting: BTreeSet<u32>,
    /// Inputs to remove at Resume, by switch.
    inputs: BTreeMap<usize, Vec<u16>>,
    #[serde(with = "instant_ns")]
    deadline: Instant,
    /// When the processes still awaited were last told (see [`ANNOUNCE_REPEATS_PER_TIMEOUT`]).
    #[serde(with = "instant_ns")]
    announced_at: Instant,
    resumed: bool,
}

/// An announcement not answered is sent again this many times within the answer timeout:
/// over a lossy management link either it or its answer can be lost, and a correct process
/// that heard nothing would be declared failed at the deadline (a campaign of 400 lossy
/// controller runs cut off a correct process in 9). A process answers every copy; the
/// controller counts the copies after the first as stale.
pub const ANNOUNCE_REPEATS_PER_TIMEOUT: u64 = 4;

pub struct Controller {
    graph: Graph,
    config: ControllerConfig,
    registered: Vec<bool>,
    /// Per link and end: the largest commit barrier that end reported hearing from the other.
    reports: Vec<[Option<Instant>; 2]>,
    down: Vec<bool>,
    /// Links down whose inputs no decision has dealt with yet.
    undecided: BTreeSet<usize>,
    failed: Vec<Option<Instant>>,
    /// Cut requests sent and not yet answered by a report, with when they were first sent.
    cuts: BTreeMap<usize, Instant>,
    /// When each of `cuts` was last sent: unanswered, it is sent again
    /// [`ANNOUNCE_REPEATS_PER_TIMEOUT`] times within the answer timeout.
    cuts_sent: BTreeMap<usize, Instant>,
    /// Switches failed for not carrying out a cut: not asked again, nor waited for.
    switches_failed: BTreeSet<usize>,
    epochs: Vec<Epoch>,
    decide_at: Option<Instant>,
    outputs: VecDeque<Output>,
    /// A decision took links out of use since [`Controller::take_reroute`] last looked.
    reroute: bool,
    /// Inputs removed because nothing that can send is behind them any more.
    sourceless: BTreeSet<End>,
    counters: ControllerCounters,
    recovery: recovery::Recoveries,
    forwards: forward::Forwards,
    implausible: implausible::ImplausibleLinks,
}

impl Controller {
    pub fn new(graph: Graph, config: ControllerConfig) -> Controller {
        let (links, processes) = (graph.link_count(), graph.process_count());
        Controller {
            graph,
            config,
            registered: vec![false; processes],
            reports: vec![[None; 2]; links],
            down: vec![false; links],
            undecided: BTreeSet::new(),
            failed: vec![None; processes],
            cuts: BTreeMap::new(),
            cuts_sent: BTreeMap::new(),
            switches_failed: BTreeSet::new(),
            epochs: Vec::new(),
            decide_at: None,
            outputs: VecDeque::new(),
            reroute: false,
            sourceless: BTreeSet::new(),
            counters: ControllerCounters::default(),
            recovery: Default::default(),
            forwards: forward::Forwards::default(),
            implausible: Default::default(),
        }
    }

    /// What every step must keep (TigerBeetle's `invariants()`): one entry per process and per
    /// link in each table, every undecided link down, every cut a link that exists.
    pub fn invariants(&self) {
        let (links, processes) = (self.graph.link_count(), self.graph.process_count());
        assert_eq!(self.registered.len(), processes);
        assert_eq!(self.failed.len(), processes);
        assert_eq!(self.reports.len(), links);
        assert_eq!(self.down.len(), links);
        for &link in &self.undecided {
            assert!(link < links && self.down[link], "undecided link {link} is down");
        }
        for &link in self.cuts.keys() {
            assert!(link < links, "cut of link {link}");
        }
        assert!(
            self.switches_failed
                .iter()
                .all(|&s| s < self.graph.switch_count()),
            "failed switches exist"
        );
        assert!(
            self.cuts_sent.keys().eq(self.cuts.keys()),
            "a cut's last sending is known exactly while it is pending"
        );
        assert!(
            self.implausible.len() <= 2 * links,
            "an end reports once per link"
        );
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn counters(&self) -> &ControllerCounters {
        &self.counters
    }

    /// The failure timestamp of `process`, once declared failed.
    pub fn failure_of(&self, process: u32) -> Option<Instant> {
        self.failed.get(process as usize).copied().flatten()
    }

    /// Every process declared failed so far, in process order.
    pub fn failures(&self) -> Vec<Failure> {
        (0..self.failed.len() as u32)
            .filter_map(|p| self.failure_of(p).map(|ts| Failure { process: p, ts }))
            .collect()
    }

    /// Whether a recovery waits for answers (barriers are stalled until it is resumed).
    pub fn recovering(&self) -> bool {
        self.decide_at.is_some() || self.epochs.iter().any(|e| !e.resumed)
    }

    /// Whether `input` names processes, members and ports that exist.
    pub fn check(&self, input: &Input) -> Result<(), ControllerError> {
        match *input {
            Input::Register { process }
            | Input::Completed { process, .. }
            | Input::Recover { process, .. }
            | Input::Rejoin { process, .. } => self.check_process(process),
            Input::RecallLost { process, ref lost } => {
                self.check_process(process)?;
                if lost.len() > RECALLS_PER_OUTPUT {
                    return Err(ControllerError::TooManyRecalls(lost.len()));
                }
                lost.iter()
                    .try_for_each(|&(receiver, ..)| self.check_process(receiver))
            }
            Input::LinkDown { member, port, .. }
            | Input::Heard { member, port }
            | Input::Implausible { member, port, .. } => self.link_of(member, port).map(|_| ()),
            Input::Forward { from, to, ref packet } => {
                self.check_process(from)?;
                self.check_process(to)?;
                self.check_forward(from, to, &packet.0)
            }
            Input::Forwarded { process, ref ack, .. } => {
                self.check_process(process)?;
                self.check_answer(process, ack.as_ref())
            }
        }
    }

    fn check_process(&self, process: u32) -> Result<(), ControllerError> {
        if (process as usize) < self.graph.process_count() {
            Ok(())
        } else {
            Err(ControllerError::UnknownProcess(process))
        }
    }

    /// The link at `port` of `member`, and the member's node.
    fn link_of(&self, member: Member, port: u16) -> Result<(usize, NodeId), ControllerError> {
        let node = match member {
            Member::Switch(s) if s < self.graph.switch_count() => Some(s),
            Member::Process(p) if (p as usize) < self.graph.process_count() => {
                Some(self.graph.node_of_process(p))
            }
            _ => None,
        };
        node.and_then(|n| Some((self.graph.link_at(n, port)?, n)))
            .ok_or(ControllerError::UnknownPort { member, port })
    }

    pub fn handle_input(&mut self, now: Instant, input: Input) -> Result<(), ControllerError> {
        if let Err(e) = self.check(&input) {
            self.counters.unknown += 1;
            return Err(e);
        }
        match input {
            Input::Register { process } => {
                let late = !std::mem::replace(&mut self.registered[process as usize], true);
                let mut failures = self.failures();
                failures.retain(|f| f.process != process);
                self.outputs.push_back(Output::Registered {
                    to: process,
                    failures,
                });
                if late {
                    self.join_recoveries(process);
                }
                // A failed process speaking again is back (a restart, or a controller's Hello).
                self.notify_own_failure(process);
                Ok(())
            }
            Input::Heard { member, port } => self.on_heard(member, port),
            Input::RecallLost { process, lost } => {
                for (receiver, ts_ns, msg_id) in lost {
                    self.on_recall_lost(process, receiver, Instant::from_nanos(ts_ns), msg_id);
                }
                Ok(())
            }
            Input::Recover { process, incarnation } => {
                self.on_recover(process, incarnation);
                Ok(())
            }
            Input::Rejoin { process, incarnation } => {
                self.on_rejoin(process, incarnation);
                Ok(())
            }
            Input::LinkDown {
                member,
                port,
                last_commit_ns,
            } => self.on_link_down(now, member, port, Instant::from_nanos(last_commit_ns)),
            Input::Completed { process, epoch } => {
                let Some(e) = self.epochs.get_mut(epoch as usize) else {
                    self.counters.stale_completions += 1;
                    return Ok(());
                };
                if e.resumed || !e.awaiting.remove(&process) {
                    self.counters.stale_completions += 1;
                    return Ok(());
                }
                if e.awaiting.is_empty() {
                    self.resume(epoch as usize);
                }
                Ok(())
            }
            Input::Forward { from, to, packet } => {
                self.on_forward(now, from, to, packet);
                Ok(())
            }
            Input::Forwarded { process, id, ack } => {
                self.on_forwarded(now, process, id, ack);
                Ok(())
            }
            Input::Implausible {
                member,
                port,
                ahead_ns,
                refused,
            } => self.on_implausible(now, member, port, ahead_ns, refused),
        }
    }

    fn on_link_down(
        &mut self,
        now: Instant,
        member: Member,
        port: u16,
        last_commit: Instant,
    ) -> Result<(), ControllerError> {
        let (link, node) = self.link_of(member, port)?;
        self.counters.reports += 1;
        let end = self.end_index(link, End { node, port });
        let report = &mut self.reports[link][end];
        // A late or repeated report may raise what is known, never a decision already made:
        // failure timestamps are fixed once announced.
        *report = Some(report.map_or(last_commit, |r| r.max(last_commit)));
        if self.cuts.contains_key(&link) {
            // A decision was waiting for this report. The cut is done once every switch end
            // asked has reported (see `cuts.rs`): a report from the other end must not restart
            // the wait for one that never answers.
            if self.unreported_switch_ends(link).is_empty() {
                self.cuts.remove(&link);
                self.cuts_sent.remove(&link);
            }
            self.decide_at = Some(self.decide_at.map_or(now, |t| t.min(now)));
        }
        if self.down[link] {
            self.counters.duplicate_reports += 1;
            self.resend_resume(link, node, port);
            return Ok(());
        }
        self.down[link] = true;
        self.undecided.insert(link);
        self.decide_at.get_or_insert(now + self.config.settle);
        Ok(())
    }

    /// `process` registered while a recovery waits for answers: it is told of that failure
    /// and waited for too. Its first registration may have been lost (a management frame) or
    /// it started late; either way, the commit barrier must not pass the failure before it has
    /// discarded the failed process's messages from then on and recalled its own (found by a
    /// simulator campaign: a process registering between the decision and Resume delivered a
    /// message of the failed process that every other receiver discarded). A recovery already
    /// resumed is not redone for it (docs/failures.md, "Lost management frames").
    fn join_recoveries(&mut self, process: u32) {
        if self.failed[process as usize].is_some() || self.being_cut(process) {
            return;
        }
        for (epoch, e) in self.epochs.iter_mut().enumerate() {
            if e.resumed || e.failures.is_empty() || !e.awaiting.insert(process) {
                continue;
            }
            announce(&mut self.outputs, epoch, &e.failures, [process]);
        }
    }

    /// A switch reports an input whose failure was decided and resumed: it missed its Resume
    /// (switches repeat a report until the input leaves their commit lane, because management
    /// frames can be lost), or its own first report came late. It gets its Resume again;
    /// removing an input twice changes nothing.
    ///
    /// So does a switch that was not on the controller's side when the link was decided, and
    /// is now: a switch that restarted holds every input in its commit lane until it speaks,
    /// and an input that never will (its far switch is dead) is removed once the recovery that
    /// decided the link has resumed (found by a simulator campaign, seed 90109845: a spine
    /// restarted next to a dead core, and its commit barrier stalled every rack's; and seed
    /// 90117261: waiting for every recovery to resume instead stalled it behind another).
    fn resend_resume(&mut self, link: usize, node: NodeId, port: u16) {
        if node >= self.graph.switch_count() {
            return;
        }
        let listed = self
            .epochs
            .iter()
            .any(|e| e.resumed && e.inputs.get(&node).is_some_and(|ports| ports.contains(&port)));
        let ends = self.graph.link(link).ends;
        let settled = !self.undecided.contains(&link)
            && self.epochs.iter().any(|e| {
                e.resumed
                    && ends.iter().any(|end| {
                        e.inputs
                            .get(&end.node)
                            .is_some_and(|ports| ports.contains(&end.port))
                    })
            });
        if !listed && !settled {
            return; // decided later, or not yet resumed: its Resume is still to come
        }
        self.counters.resumes_resent += 1;
        self.outputs.push_back(Output::RemoveInputs {
            switch: node,
            ports: vec![port],
        });
    }

    /// When [`Controller::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let repeat = self.announce_repeat_interval();
        let epochs = self
            .epochs
            .iter()
            .filter(|e| !e.resumed)
            .map(|e| e.deadline.min(e.announced_at + repeat));
        let cuts = self.cuts.values().map(|&at| at + self.config.answer_timeout);
        let resends = self.cuts_sent.values().map(|&at| at + repeat);
        epochs
            .chain(resends)
            .chain(cuts)
            .chain(self.decide_at)
            .chain(self.forward_deadline())
            .min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        // First: a switch failed for not answering a cut is in the decision that follows.
        self.cut_timeouts(now);
        if self.decide_at.is_some_and(|t| t <= now) {
            self.decide(now);
        }
        for i in 0..self.epochs.len() {
            let e = &mut self.epochs[i];
            if e.resumed {
                continue;
            }
            if e.deadline > now {
                self.repeat_announcement(now, i);
                continue;
            }
            // Paper 5.2: "if a process does not respond controller within timeout, it is
            // considered as failed". Its switch cuts it off and reports its last commit
            // barrier; that report starts a failure of its own. This one resumes without it.
            let silent: Vec<u32> = std::mem::take(&mut e.awaiting).into_iter().collect();
            for p in silent {
                self.counters.unanswered += 1;
                self.cut_process(now, p);
            }
            self.resume(i);
        }
        self.forward_timeouts(now);
    }

    pub fn poll_event(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Once after each decision that took links out of use (and after a takeover): the switch
    /// ends of every link down between switches, for new forwarding tables that avoid them
    /// (paper 2: the controller "reconfigures routing tables on failures"). Without them the
    /// fabric keeps spraying packets, retransmissions included, into a dead link.
    pub fn take_reroute(&mut self) -> Option<Vec<(usize, u16)>> {
        if !std::mem::take(&mut self.reroute) {
            return None;
        }
        let switches = self.graph.switch_count();
        let mut ends = Vec::new();
        for (link, _) in self.down.iter().enumerate().filter(|(_, d)| **d) {
            let l = self.graph.link(link);
            if l.ends.iter().all(|e| e.node < switches) {
                ends.extend(l.ends.iter().map(|e| (e.node, e.port)));
            }
        }
        Some(ends)
    }

    /// Everything a controller taking over must (re)send: the announcements of recoveries
    /// still waiting for answers, the cuts not yet reported, and every Resume already decided
    /// (a switch may have missed it when the previous controller stopped; removing an input
    /// twice changes nothing).
    pub fn take_over(&mut self, now: Instant) {
        self.outputs.clear();
        self.reroute = self.down.iter().any(|&d| d);
        for (id, e) in self.epochs.iter().enumerate() {
            if e.resumed {
                for (&switch, ports) in &e.inputs {
                    // A link readmitted since stays in.
                    let ports: Vec<u16> = ports
                        .iter()
                        .copied()
                        .filter(|&p| self.input_out(switch, p))
                        .collect();
                    if !ports.is_empty() {
                        self.outputs.push_back(Output::RemoveInputs { switch, ports });
                    }
                }
            } else {
                announce(&mut self.outputs, id, &e.failures, e.awaiting.iter().copied());
            }
        }
        let cuts: Vec<usize> = self.cuts.keys().copied().collect();
        for link in cuts {
            self.request_cut(now, link);
        }
        self.take_over_recoveries();
        self.resend_forwards(now);
    }

    fn cut_process(&mut self, now: Instant, p: u32) {
        if self.failed[p as usize].is_some() {
            return;
        }
        if let Some(link) = self.graph.link_at(self.graph.node_of_process(p), 0)
            && !self.down[link]
        {
            self.request_cut(now, link);
        }
    }

    /// Asks the switch end of `link` to cut it (both ends, for a link between switches).
    fn request_cut(&mut self, now: Instant, link: usize) {
        self.cuts.insert(link, now);
        self.send_cut(now, link);
    }

    fn send_cut(&mut self, now: Instant, link: usize) {
        self.cuts_sent.insert(link, now);
        let ends = self.graph.link(link).ends;
        for node in self.unreported_switch_ends(link) {
            let port = ends
                .iter()
                .find(|e| e.node == node)
                .expect("an end of the link")
                .port;
            self.outputs.push_back(Output::CutInput { switch: node, port });
        }
    }

    fn end_index(&self, link: usize, end: End) -> usize {
        usize::from(self.graph.link(link).ends[1] == end)
    }

    /// Determine and Broadcast (paper 5.2).
    fn decide(&mut self, now: Instant) {
        self.decide_at = None;
        let failed = &self.failed;
        let connected = self.graph.components(|l| !self.down[l]);
        let home = self
            .graph
            .controller_component(&connected, |p| failed[p as usize].is_none());
        // Connected is not enough: the processes kept must reach each other up and down.
        let unreachable = self.graph.unreachable_uplinks(
            |l| !self.down[l],
            |p| failed[p as usize].is_none() && connected[self.graph.node_of_process(p)] == home,
        );
        let component = self
            .graph
            .components(|l| !self.down[l] && !unreachable.contains(&l));
        let home = self
            .graph
            .controller_component(&component, |p| failed[p as usize].is_none());
        let newly: Vec<u32> = (0..self.graph.process_count() as u32)
            .filter(|&p| {
                self.failed[p as usize].is_none() && component[self.graph.node_of_process(p)] != home
            })
            .collect();
        // A failed process's region: what it reaches over every link, up or down, without
        // entering the controller's side (a failed rack is its ToR and all its hosts, however
        // the reports came in). The region's timestamp is the largest commit barrier the
        // correct side of its boundary reports having heard from it. Every message of the
        // region reached correct receivers through that boundary, so nothing above it was
        // committed to any of them; and a commit barrier is a minimum over the region's
        // senders, so each of them had everything below it acknowledged. Receivers deliver
        // what is below it and discard the rest (paper 5.2, Discard).
        let region = self
            .graph
            .components(|l| self.graph.link(l).ends.iter().all(|e| component[e.node] != home));
        let mut ts_of_region: BTreeMap<usize, Instant> = BTreeMap::new();
        let mut missing = Vec::new();
        for &p in &newly {
            let r = region[self.graph.node_of_process(p)];
            if ts_of_region.contains_key(&r) {
                continue;
            }
            let mut ts = Instant::ZERO;
            for link in self.graph.boundary(&region, r) {
                let ends = self.graph.link(link).ends;
                let Some(inside) = ends.iter().position(|e| component[e.node] == home) else {
                    continue;
                };
                match self.reports[link][inside] {
                    Some(c) => ts = ts.max(c),
                    None => missing.push(link),
                }
            }
            ts_of_region.insert(r, ts);
        }
        if !missing.is_empty() {
            // Only the failed side saw these links fail: the correct side still takes frames
            // from them. Cut them there and decide once it reports what it last heard.
            for link in missing {
                if !self.cuts.contains_key(&link) {
                    self.request_cut(now, link);
                }
            }
            return;
        }
        let failures: Vec<Failure> = newly
            .iter()
            .map(|&p| Failure {
                process: p,
                ts: ts_of_region[&region[self.graph.node_of_process(p)]],
            })
            .collect();
        for f in &failures {
            self.failed[f.process as usize] = Some(f.ts);
        }
        // The inputs to remove at Resume: the correct switch ends of every link decided now.
        let mut inputs: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
        self.reroute |= !self.undecided.is_empty();
        for link in std::mem::take(&mut self.undecided) {
            for end in self.graph.link(link).ends {
                if end.node < self.graph.switch_count() && component[end.node] == home {
                    inputs.entry(end.node).or_default().push(end.port);
                }
            }
        }
        // Correct switches left with nothing below them that can send (found by the simulator:
        // the only host of a rack failing stalled every commit barrier behind its ToR).
        let (down, failed) = (&self.down, &self.failed);
        for end in self
            .graph
            .sourceless_inputs(|l| !down[l], |p| failed[p as usize].is_none())
        {
            if component[end.node] == home && self.sourceless.insert(end) {
                inputs.entry(end.node).or_default().push(end.port);
            }
        }
        let awaiting: BTreeSet<u32> = (0..self.graph.process_count() as u32)
            .filter(|&p| self.registered[p as usize] && self.failed[p as usize].is_none())
            .filter(|&p| !self.being_cut(p))
            .collect();
        let epoch = self.epochs.len();
        self.on_declared(&failures, epoch);
        if !failures.is_empty() {
            announce(&mut self.outputs, epoch, &failures, awaiting.iter().copied());
        }
        let nothing_to_wait_for = failures.is_empty() || awaiting.is_empty();
        self.epochs.push(Epoch {
            failures,
            awaiting: if nothing_to_wait_for {
                BTreeSet::new()
            } else {
                awaiting
            },
            inputs,
            deadline: now + self.config.answer_timeout,
            announced_at: now,
            resumed: false,
        });
        if nothing_to_wait_for {
            self.resume(epoch);
        }
    }

    /// How often an unanswered announcement is sent again; reroutes, which get no answer,
    /// are repeated as often (`control_node::REROUTE_REPEATS`).
    pub fn announce_repeat_interval(&self) -> Duration {
        Duration::from_nanos(self.config.answer_timeout.as_nanos() / ANNOUNCE_REPEATS_PER_TIMEOUT)
    }

    /// Tells the processes `epoch` still waits for again, once an interval has passed.
    fn repeat_announcement(&mut self, now: Instant, epoch: usize) {
        let repeat = self.announce_repeat_interval();
        let e = &mut self.epochs[epoch];
        if e.announced_at + repeat > now {
            return;
        }
        e.announced_at = now;
        self.counters.announcements_repeated += e.awaiting.len() as u64;
        announce(&mut self.outputs, epoch, &e.failures, e.awaiting.iter().copied());
    }

    /// Whether `process`'s switch was told to cut it off and has not reported yet.
    fn being_cut(&self, process: u32) -> bool {
        self.cuts
            .keys()
            .any(|&l| self.process_of_link(l) == Some(process))
    }

    fn process_of_link(&self, link: usize) -> Option<u32> {
        self.graph
            .link(link)
            .ends
            .iter()
            .find_map(|e| self.graph.process_at(e.node as NodeId))
    }

    fn resume(&mut self, epoch: usize) {
        let e = &mut self.epochs[epoch];
        e.resumed = true;
        for (&switch, ports) in &e.inputs {
            self.outputs.push_back(Output::RemoveInputs {
                switch,
                ports: ports.clone(),
            });
        }
        // Recoveries that waited for this failure's Recall to be complete everywhere.
        self.answer_waiting_recoveries();
    }
}

/// Tells each of `to` of `epoch`'s failures.
fn announce(
    outputs: &mut VecDeque<Output>,
    epoch: usize,
    failures: &[Failure],
    to: impl IntoIterator<Item = u32>,
) {
    for to in to {
        outputs.push_back(Output::Announce {
            to,
            epoch: epoch as u64,
            failures: failures.to_vec(),
        });
    }
}
