//! Total-order broadcast baselines that 1Pipe is compared with (paper section 7.2, Fig. 8):
//! host sequencer, switch sequencer, token passing and Lamport-timestamp exchange, each as
//! [`onepipe_fabric::Node`] state machines that any runtime (inproc, udp, sim) can drive.
//!
//! [`build`] turns a [`Wiring`] into one node per runtime node (switches first, then processes,
//! as `Wiring::node_of_process` numbers them): [`router::Router`]s (or the
//! [`switch_seq::SequencerSwitch`]) for switches and [`host::Host`]s running the all-to-all
//! broadcast workload of [`workload`] for processes. After a run, [`BaselineNode::host_stats`]
//! gives each process's measurements and [`collect_logs`] the event logs for
//! `onepipe_check::check_all`.
//!
//! Like the paper's RoCE testbed (lossless with PFC), the baselines assume a fabric that does
//! not lose frames and links that are FIFO: none of them retransmits. A lost frame stalls
//! sequence-order delivery (or the token, or Lamport delivery) for good; duplicated frames are
//! recognised and ignored. Lamport exchange needs FIFO links for its correctness (a frame that
//! overtakes an earlier one from the same sender can break total order); the sequencer kinds
//! and token only for completeness (their receivers reorder by number).
//!
//! Every node keeps bounded state: reorder buffers, Lamport's pending set and the sequencers'
//! stores hold at most `reorder_capacity` messages (dropped and counted beyond), output queues
//! a window's worth of items, and the windows bound what is in flight.

pub mod frame;
pub mod host;
pub mod host_seq;
pub mod lamport;
pub mod out;
pub mod reorder;
pub mod router;
pub mod stats;
pub mod switch_seq;
#[cfg(test)]
mod test_util;
pub mod token;
pub mod workload;

use hdrhistogram::Histogram;
use onepipe_check::{Event, ProcessLog};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Hints, Node, PortId, Route, RoutingError, Wiring, routing};
use onepipe_wire::{Duration, Instant};
use std::collections::HashMap;

pub use frame::HEADER_LEN;
pub use host::Host;
pub use router::{Router, RouterStats};
pub use stats::HostStats;
pub use switch_seq::SequencerSwitch;
pub use workload::Schedule;

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    HostSequencer,
    SwitchSequencer,
    Token,
    Lamport,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::HostSequencer,
        Kind::SwitchSequencer,
        Kind::Token,
        Kind::Lamport,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::HostSequencer => "host-seq",
            Kind::SwitchSequencer => "switch-seq",
            Kind::Token => "token",
            Kind::Lamport => "lamport",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Kind {
    type Err = BaselineError;
    fn from_str(s: &str) -> Result<Kind, BaselineError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| BaselineError::UnknownKind(s.to_string()))
    }
}

/// Smallest message: the payload starts with the 8-byte message id.
pub const MESSAGE_BYTES_MIN: usize = 8;
/// Largest message: one frame of [`FRAME_MAX`] bytes (a runtime may allow less).
pub const MESSAGE_BYTES_MAX: usize = FRAME_MAX - HEADER_LEN;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaselineConfig {
    pub kind: Kind,
    /// Payload bytes per message (a frame is [`HEADER_LEN`] more; the runtime's largest frame
    /// must hold it, see [`BaselineConfig::frame_bytes`]).
    pub message_bytes: usize,
    /// Own broadcasts a process may have undelivered back to itself.
    pub window: usize,
    /// Token: broadcasts a holder sends before passing the token on.
    pub token_batch: usize,
    /// Lamport: period of timestamp notices.
    pub exchange_interval: Duration,
    /// Host sequencer: which process numbers messages. Default process 0 (the first process of
    /// the first rack; the paper does not say which host, and any one works alike).
    pub sequencer_process: Option<u32>,
    /// Switch sequencer: which switch numbers messages. Default: the first switch of the highest
    /// layer that every rack reaches going only up (e.g. the first core).
    pub sequencer_switch: Option<usize>,
    pub schedule: Schedule,
    /// Bound of every reorder buffer, Lamport pending set and sequencer store, in messages.
    /// Default 2 x processes x window: the windows bound the messages in flight to processes x
    /// window, so in a lossless run nothing is ever dropped for lack of room. Smaller values
    /// drop and count; a request a sequencer drops never comes back, so it also costs its
    /// sender a window slot for the rest of the run.
    pub reorder_capacity: Option<usize>,
}

impl BaselineConfig {
    pub fn new(kind: Kind, schedule: Schedule) -> BaselineConfig {
        BaselineConfig {
            kind,
            message_bytes: 64,
            window: 16,
            token_batch: 16,
            // 1Pipe's beacon interval in the paper's testbed (section 7.1).
            exchange_interval: Duration::from_micros(3),
            sequencer_process: None,
            sequencer_switch: None,
            schedule,
            reorder_capacity: None,
        }
    }

    /// Bytes of a data frame: what the runtime's largest frame must hold.
    pub fn frame_bytes(&self) -> usize {
        HEADER_LEN + self.message_bytes
    }

    fn capacity(&self, processes: usize) -> usize {
        self.reorder_capacity
            .unwrap_or_else(|| 2usize.saturating_mul(processes).saturating_mul(self.window))
    }

    fn validate(&self, processes: usize) -> Result<(), BaselineError> {
        if processes < 2 {
            return Err(BaselineError::TooFewProcesses(processes));
        }
        if !(MESSAGE_BYTES_MIN..=MESSAGE_BYTES_MAX).contains(&self.message_bytes) {
            return Err(BaselineError::MessageSize {
                bytes: self.message_bytes,
                min: MESSAGE_BYTES_MIN,
                max: MESSAGE_BYTES_MAX,
            });
        }
        for (value, name) in [
            (self.window as u64, "window"),
            (self.token_batch as u64, "token batch"),
            (self.exchange_interval.as_nanos(), "exchange interval"),
            (self.capacity(processes) as u64, "reorder capacity"),
        ] {
            if value == 0 {
                return Err(BaselineError::NotPositive(name));
            }
        }
        if let Some(p) = self.sequencer_process
            && p as usize >= processes
        {
            return Err(BaselineError::SequencerProcess {
                process: p,
                processes,
            });
        }
        Ok(())
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    #[error(transparent)]
    Routing(#[from] RoutingError),
    #[error("unknown baseline `{0}`: expected host-seq, switch-seq, token or lamport")]
    UnknownKind(String),
    /// With one process there is nothing to order, and its own messages would come back
    /// within the call that sent them, so a saturated window would never close.
    #[error("{0} process(es): a broadcast baseline needs at least 2")]
    TooFewProcesses(usize),
    #[error("sequencer process {process} does not exist (there are {processes} processes)")]
    SequencerProcess { process: u32, processes: usize },
    #[error("switch {switch} cannot be the sequencer: {reason}")]
    SequencerSwitch { switch: usize, reason: &'static str },
    #[error("no switch lies above every rack, so none can be the sequencer")]
    NoSequencerSwitch,
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    #[error("message size {bytes} bytes is outside {min}..={max}")]
    MessageSize { bytes: usize, min: usize, max: usize },
}

/// Any node of a baseline run.
#[derive(Debug)]
pub enum BaselineNode {
    Router(Box<Router>),
    SequencerSwitch(Box<SequencerSwitch>),
    Host(Box<Host>),
}

impl BaselineNode {
    pub fn host_stats(&self) -> Option<&HostStats> {
        match self {
            BaselineNode::Host(h) => Some(h.stats()),
            _ => None,
        }
    }

    pub fn switch_stats(&self) -> Option<&RouterStats> {
        match self {
            BaselineNode::Router(r) => Some(r.stats()),
            BaselineNode::SequencerSwitch(s) => Some(s.stats()),
            BaselineNode::Host(_) => None,
        }
    }

    pub fn is_switch(&self) -> bool {
        !matches!(self, BaselineNode::Host(_))
    }

    /// This process's own broadcasts not yet delivered back to it (0 for a switch).
    pub fn outstanding(&self) -> usize {
        match self {
            BaselineNode::Host(h) => h.core.workload.outstanding(),
            _ => 0,
        }
    }
}

macro_rules! each {
    ($self:expr, $n:ident => $body:expr) => {
        match $self {
            BaselineNode::Router($n) => $body,
            BaselineNode::SequencerSwitch($n) => $body,
            BaselineNode::Host($n) => $body,
        }
    };
}

impl Node for BaselineNode {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        each!(self, n => n.classify(now, port, frame))
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        each!(self, n => n.handle_frame(now, port, frame, route))
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        each!(self, n => n.poll_transmit(now, port, buf))
    }
    fn poll_timeout(&self) -> Option<Instant> {
        each!(self, n => n.poll_timeout())
    }
    fn handle_timeout(&mut self, now: Instant) {
        each!(self, n => n.handle_timeout(now))
    }
}

impl Hints for BaselineNode {}

/// One node per runtime node: switches (indices `0..switch_count`), then processes.
pub fn build(
    wiring: &Wiring,
    config: &BaselineConfig,
    now: Instant,
) -> Result<Vec<BaselineNode>, BaselineError> {
    let n = wiring.process_count();
    config.validate(n)?;
    let capacity = config.capacity(n);
    let tables = routing::build(wiring)?;
    let (sequencer_switch, uplinks) = if config.kind == Kind::SwitchSequencer {
        let (s, up) = switch_seq::sequencer_uplinks(wiring, config.sequencer_switch)?;
        (Some(s), up)
    } else {
        (None, vec![Vec::new(); wiring.switch_count()])
    };
    let mut nodes = Vec::with_capacity(wiring.switch_count() + n);
    for ((s, routes), up) in tables.into_iter().enumerate().zip(uplinks) {
        let router = Router::new(s, routes, up);
        nodes.push(if sequencer_switch == Some(s) {
            let ports = wiring.switch_ports[s].len();
            BaselineNode::SequencerSwitch(Box::new(SequencerSwitch::new(router, ports, n as u32, capacity)))
        } else {
            BaselineNode::Router(Box::new(router))
        });
    }
    let sequencer = config.sequencer_process.unwrap_or(0);
    for p in 0..n as u32 {
        nodes.push(BaselineNode::Host(Box::new(host_node(
            p, n as u32, config, capacity, sequencer, now,
        ))));
    }
    Ok(nodes)
}

fn host_node(p: u32, n: u32, config: &BaselineConfig, capacity: usize, sequencer: u32, now: Instant) -> Host {
    use host::{Core, Protocol};
    let payload_len = config.message_bytes as u16;
    let (out_capacity, learns) = match config.kind {
        // The sequencer's output holds every numbered message until its copies leave.
        Kind::HostSequencer if p == sequencer => (capacity, true),
        Kind::HostSequencer | Kind::SwitchSequencer => (config.window, true),
        Kind::Token => (config.token_batch + 1, false),
        // A window of broadcasts and one notice.
        Kind::Lamport => (config.window + 1, false),
    };
    let core = Core::new(
        p,
        n,
        payload_len,
        config.schedule,
        config.window,
        out_capacity,
        learns,
    );
    let protocol = match config.kind {
        Kind::HostSequencer => Protocol::HostSeq(host_seq::HostSeq::new(&core, sequencer, capacity)),
        Kind::SwitchSequencer => Protocol::SwitchSeq(switch_seq::SwitchSeqClient::new(capacity)),
        Kind::Token => Protocol::Token(token::Token::new(&core, config.token_batch, capacity)),
        Kind::Lamport => Protocol::Lamport(lamport::Lamport::new(
            &core,
            config.exchange_interval,
            capacity,
            now,
        )),
    };
    Host { core, protocol }
}

/// Every process's event log, for `onepipe_check::check_all`.
///
/// A sequencer-kind sender logs a send when its own copy brings the number back; a run that
/// stops in between leaves some receivers having delivered a message whose send is not logged
/// yet. The sequencer did number it, so its send is completed here with the number the
/// receivers delivered it under (all receivers must agree, which the checker then verifies);
/// a message nobody delivered needs no send event.
pub fn collect_logs(nodes: &[BaselineNode]) -> Vec<ProcessLog> {
    let hosts: Vec<&HostStats> = nodes.iter().filter_map(BaselineNode::host_stats).collect();
    let mut owed: HashMap<(u32, u64), Option<u64>> = HashMap::new();
    for h in &hosts {
        for &msg_id in &h.unconfirmed {
            owed.insert((h.process, msg_id), None);
        }
    }
    if !owed.is_empty() {
        for h in &hosts {
            for e in &h.events {
                if let Event::Deliver { ts_ns, src, msg_id } = *e
                    && let Some(ts @ None) = owed.get_mut(&(src, msg_id))
                {
                    *ts = Some(ts_ns);
                }
            }
        }
    }
    hosts
        .iter()
        .map(|h| {
            let mut events = h.events.clone();
            for &msg_id in &h.unconfirmed {
                if let Some(Some(ts)) = owed.get(&(h.process, msg_id)) {
                    let n = hosts.len() as u32;
                    events.extend((0..n).map(|dst| Event::Send {
                        ts_ns: *ts,
                        dst,
                        msg_id,
                    }));
                }
            }
            ProcessLog {
                process: h.process,
                events,
            }
        })
        .collect()
}

/// Measurements summed over every process.
#[derive(Clone, Debug)]
pub struct Totals {
    pub processes: usize,
    pub broadcasts: u64,
    pub delivered: u64,
    pub delivered_in_window: u64,
    pub latency_ns: Histogram<u64>,
    pub frames_sent: u64,
    /// Frames dropped anywhere for being malformed, misdirected or unroutable, and messages
    /// dropped for lack of room (all zero in a healthy run).
    pub dropped: u64,
    pub duplicates: u64,
    pub outstanding_peak: usize,
    pub reorder_peak: usize,
}

pub fn totals(nodes: &[BaselineNode]) -> Totals {
    let mut t = Totals {
        processes: 0,
        broadcasts: 0,
        delivered: 0,
        delivered_in_window: 0,
        latency_ns: stats::latency_histogram(),
        frames_sent: 0,
        dropped: 0,
        duplicates: 0,
        outstanding_peak: 0,
        reorder_peak: 0,
    };
    for node in nodes {
        if let Some(h) = node.host_stats() {
            t.processes += 1;
            t.broadcasts += h.broadcasts;
            t.delivered += h.delivered;
            t.delivered_in_window += h.delivered_in_window;
            t.latency_ns.add(&h.latency_ns).expect("same bounds");
            t.frames_sent += h.frames_sent;
            t.dropped += h.malformed + h.misdirected + h.reorder_overflow + h.sequencer_overflow;
            t.duplicates += h.duplicates;
            t.outstanding_peak = t.outstanding_peak.max(h.outstanding_peak);
            t.reorder_peak = t.reorder_peak.max(h.reorder_peak);
        }
        if let Some(s) = node.switch_stats() {
            t.frames_sent += s.frames_sent;
            t.dropped += s.malformed + s.no_route + s.overflow;
            t.duplicates += s.duplicates;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_fabric::Topology;
    use proptest::prelude::*;

    fn wiring() -> Wiring {
        Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap()
    }

    fn config(kind: Kind) -> BaselineConfig {
        BaselineConfig::new(
            kind,
            Schedule::saturated(Instant::ZERO, Instant::from_nanos(1_000)),
        )
    }

    #[test]
    fn kinds_parse_and_print_their_cli_names() {
        for k in Kind::ALL {
            assert_eq!(k.to_string().parse::<Kind>(), Ok(k));
        }
        assert_eq!("switch-seq".parse::<Kind>(), Ok(Kind::SwitchSequencer));
        assert_eq!(
            "paxos".parse::<Kind>(),
            Err(BaselineError::UnknownKind("paxos".into()))
        );
    }

    #[test]
    fn build_lays_out_switches_then_processes() {
        let w = wiring();
        for kind in Kind::ALL {
            let nodes = build(&w, &config(kind), Instant::ZERO).unwrap();
            assert_eq!(nodes.len(), w.switch_count() + w.process_count());
            for (i, n) in nodes.iter().enumerate() {
                assert_eq!(n.is_switch(), i < w.switch_count(), "{kind} node {i}");
            }
            for p in 0..w.process_count() as u32 {
                assert_eq!(nodes[w.node_of_process(p)].host_stats().unwrap().process, p);
            }
            let sequencers = nodes
                .iter()
                .filter(|n| matches!(n, BaselineNode::SequencerSwitch(_)))
                .count();
            assert_eq!(sequencers, usize::from(kind == Kind::SwitchSequencer), "{kind}");
        }
        // The default sequencer switch of a leaf-spine is the first spine.
        let nodes = build(&w, &config(Kind::SwitchSequencer), Instant::ZERO).unwrap();
        assert!(matches!(nodes[2], BaselineNode::SequencerSwitch(_)));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let w = wiring();
        let refused = |f: &dyn Fn(&mut BaselineConfig)| {
            let mut c = config(Kind::HostSequencer);
            f(&mut c);
            build(&w, &c, Instant::ZERO).err()
        };
        assert_eq!(
            refused(&|c| c.sequencer_process = Some(4)),
            Some(BaselineError::SequencerProcess {
                process: 4,
                processes: 4
            })
        );
        assert_eq!(
            refused(&|c| c.window = 0),
            Some(BaselineError::NotPositive("window"))
        );
        assert_eq!(
            refused(&|c| c.token_batch = 0),
            Some(BaselineError::NotPositive("token batch"))
        );
        assert_eq!(
            refused(&|c| c.exchange_interval = Duration::ZERO),
            Some(BaselineError::NotPositive("exchange interval"))
        );
        assert_eq!(
            refused(&|c| c.reorder_capacity = Some(0)),
            Some(BaselineError::NotPositive("reorder capacity"))
        );
        assert!(matches!(
            refused(&|c| c.message_bytes = 7),
            Some(BaselineError::MessageSize { bytes: 7, .. })
        ));
        assert!(matches!(
            refused(&|c| c.message_bytes = MESSAGE_BYTES_MAX + 1),
            Some(BaselineError::MessageSize { .. })
        ));
        assert_eq!(refused(&|c| c.sequencer_process = Some(3)), None);
        let alone = Wiring::new(Topology::single_switch(1).unwrap(), 1).unwrap();
        assert_eq!(
            build(&alone, &config(Kind::Token), Instant::ZERO).err(),
            Some(BaselineError::TooFewProcesses(1))
        );
        let mut c = config(Kind::SwitchSequencer);
        c.sequencer_switch = Some(0); // a leaf: the other rack cannot reach it going up
        assert!(matches!(
            build(&w, &c, Instant::ZERO),
            Err(BaselineError::SequencerSwitch { switch: 0, .. })
        ));
    }

    fn assert_send<T: Send>() {}

    #[test]
    fn nodes_can_move_to_runtime_workers() {
        assert_send::<BaselineNode>();
    }

    proptest! {
        /// Any bytes, on any node of any baseline: never a panic; a frame nobody can use is
        /// dropped and counted.
        #[test]
        fn arbitrary_frames_are_dropped_and_counted(
            kind in 0usize..4,
            node in 0usize..8,
            mut bytes in proptest::collection::vec(any::<u8>(), 0..140),
            magic: bool,
        ) {
            if magic && !bytes.is_empty() {
                bytes[0] = frame::MAGIC;
            }
            let w = wiring();
            let mut nodes = build(&w, &config(Kind::ALL[kind]), Instant::ZERO).unwrap();
            let count = nodes.len();
            let n = &mut nodes[node % count];
            let now = Instant::from_nanos(10);
            let route = n.classify(now, 0, &bytes);
            n.handle_frame(now, 0, &mut bytes, route);
            let mut buf = vec![0u8; FRAME_MAX];
            // Bounded: a saturated sequencer refills its window as fast as it is polled.
            for _ in 0..200 {
                if n.poll_transmit(now, 0, &mut buf).is_none() {
                    break;
                }
            }
            if route == Route::Drop {
                let counted = match (n.host_stats(), n.switch_stats()) {
                    (Some(h), _) => h.malformed + h.misdirected,
                    (_, Some(s)) => s.malformed + s.no_route,
                    _ => 0,
                };
                prop_assert_eq!(counted, 1);
            }
        }
    }
}
