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
//! not lose frames: none of them retransmits. A lost frame stalls sequence-order delivery (or
//! the token) for good; duplicated frames are recognised and ignored.

pub mod frame;
pub mod host;
pub mod host_seq;
pub mod lamport;
pub mod out;
pub mod reorder;
pub mod router;
pub mod stats;
pub mod switch_seq;
pub mod token;
pub mod workload;

use hdrhistogram::Histogram;
use onepipe_check::{Event, ProcessLog};
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Route, RoutingError, Wiring, routing};
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
    /// window, so in a lossless run nothing is ever dropped for lack of room.
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
        if processes == 0 {
            return Err(BaselineError::NoProcesses);
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
    #[error("the wiring has no processes")]
    NoProcesses,
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
