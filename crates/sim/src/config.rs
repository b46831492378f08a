//! What one simulated run is: fabric, clocks, traffic, faults and budgets, with the paper's
//! testbed parameters as defaults (100 Gbps links, 3 us beacons, 0.3 us mean clock skew).

use crate::traffic::Pattern;
use onepipe_fabric::Topology;
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::reliable::ReliableConfig;
use onepipe_wire::Duration;

/// A failure named the way a user names it; resolved against the topology when the run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailTarget {
    /// A cable between two switches, by name (both directions fail).
    Link(String, String),
    Switch(String),
    /// A switch that crashes and, when the failure ends, starts again with none of its state
    /// (a paused `Switch` keeps it).
    Restart(String),
    /// A process (its host's endpoint).
    Process(u32),
    /// The host representative of a switch, by the switch's name (`Incarnation::Host`): the
    /// switch goes on forwarding.
    Representative(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub target: FailTarget,
    /// Offset from the start of traffic.
    pub at: Duration,
    /// How long it lasts; `None` is forever.
    pub lasts: Option<Duration>,
}

impl std::str::FromStr for Failure {
    type Err = String;
    /// `link:A-B@T[+D]`, `switch:NAME@T[+D]`, `restart:NAME@T+D`, `host:P@T[+D]`; times with a
    /// unit (ns, us, ms, s), for example `switch:core0@200us+300us`.
    fn from_str(s: &str) -> Result<Failure, String> {
        let (what, when) = s
            .split_once('@')
            .ok_or_else(|| format!("failure `{s}`: expected TARGET@TIME, like switch:core0@200us+300us"))?;
        let (at, lasts) = match when.split_once('+') {
            Some((a, d)) => (parse_time(a)?, Some(parse_time(d)?)),
            None => (parse_time(when)?, None),
        };
        let (kind, name) = what.split_once(':').ok_or_else(|| {
            format!("failure `{s}`: expected link:A-B, switch:NAME, restart:NAME or host:P")
        })?;
        let target = match kind {
            "link" => {
                let (a, b) = name
                    .split_once('-')
                    .ok_or_else(|| format!("failure `{s}`: a link is named A-B"))?;
                FailTarget::Link(a.to_string(), b.to_string())
            }
            "switch" => FailTarget::Switch(name.to_string()),
            "representative" => FailTarget::Representative(name.to_string()),
            "restart" if lasts.is_none() => {
                return Err(format!(
                    "failure `{s}`: a restart names how long the switch is down (restart:NAME@T+D)"
                ));
            }
            "restart" => FailTarget::Restart(name.to_string()),
            "host" => FailTarget::Process(
                name.parse()
                    .map_err(|_| format!("failure `{s}`: host:P takes a process number"))?,
            ),
            _ => {
                return Err(format!(
                    "failure `{s}`: unknown kind `{kind}` (link, switch, restart, host, representative)"
                ));
            }
        };
        Ok(Failure { target, at, lasts })
    }
}

/// Parses `250ns`, `3us`, `1.5ms`, `2s`.
pub fn parse_time(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("time `{s}` needs a unit: ns, us, ms or s"))?;
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("time `{s}`: `{number}` is not a number"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("time `{s}`: unknown unit `{unit}` (ns, us, ms, s)")),
    };
    if !(value >= 0.0 && value.is_finite()) {
        return Err(format!("time `{s}` must be a finite, non-negative number"));
    }
    Ok(Duration::from_nanos((value * scale).round() as u64))
}

/// A beacon nobody correct sent (issue 42): at `at` after traffic starts, it appears on the
/// link between process `process` and its ToR (`to_tor`: on the process's uplink, else on the
/// ToR's link down to it) with both barriers `ahead` of the shared clock, as a forger on the
/// wire would send it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForgedBeacon {
    pub at: Duration,
    pub process: u32,
    pub to_tor: bool,
    pub ahead: Duration,
}

/// A host's clock stepping (as NTP steps a clock too far off to slew): at `at` after traffic
/// starts, process `process`'s clock jumps by `delta_ns`, back if negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockStep {
    pub process: u32,
    pub at: Duration,
    pub delta_ns: i64,
}

impl std::str::FromStr for ClockStep {
    type Err = String;
    /// `host:P@T+D` (forward) or `host:P@T-D` (back), times with a unit, for example
    /// `host:3@200us-50us`.
    fn from_str(s: &str) -> Result<ClockStep, String> {
        let usage = || {
            format!("clock step `{s}`: expected host:P@TIME+STEP or host:P@TIME-STEP, like host:3@200us-50us")
        };
        let (what, when) = s.split_once('@').ok_or_else(usage)?;
        let process = what
            .strip_prefix("host:")
            .ok_or_else(usage)?
            .parse()
            .map_err(|_| format!("clock step `{s}`: host:P takes a process number"))?;
        let (split, sign) = match (when.find('+'), when.find('-')) {
            (Some(i), None) => (i, 1),
            (None, Some(i)) => (i, -1),
            _ => return Err(usage()),
        };
        let (at, step) = (parse_time(&when[..split])?, parse_time(&when[split + 1..])?);
        if step.as_nanos() > WIRE_AHEAD_NS_MAX {
            return Err(format!(
                "clock step `{s}`: a step is at most {WIRE_AHEAD_NS_MAX} ns (half the wire clock's range)"
            ));
        }
        Ok(ClockStep {
            process,
            at,
            delta_ns: sign * step.as_nanos() as i64,
        })
    }
}

impl std::fmt::Display for ClockStep {
    /// The form [`ClockStep::from_str`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.delta_ns < 0 { '-' } else { '+' };
        let (at, step) = (self.at.as_nanos(), self.delta_ns.unsigned_abs());
        write!(f, "host:{}@{at}ns{sign}{step}ns", self.process)
    }
}

/// Half the 48-bit wire clock's range: a time further ahead than this cannot be told from one
/// behind, so no bound on time (`time_ahead_max`) or skew may exceed it.
pub const WIRE_AHEAD_NS_MAX: u64 = 1 << 47;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub topology: Topology,
    pub processes_per_host: u32,
    pub beacon_interval: Duration,
    /// Host clock offsets are uniform in [-2 * mean, 2 * mean], so their mean magnitude is this.
    pub skew_mean: Duration,
    /// Host clock rates are uniform in [1 - drift, 1 + drift], in parts per billion.
    pub drift_ppb_max: u32,
    /// How far ahead of a switch's or host's clock a barrier or timestamp may be before it is
    /// refused (`SwitchConfig::time_ahead_max`, docs/ordering.md "Implausible time").
    pub time_ahead_max: Duration,
    pub link_bits_per_s: u64,
    /// Rate of the links between switches; `None`: the same as `link_bits_per_s`.
    pub fabric_link_bits_per_s: Option<u64>,
    /// Propagation delay added to every link on top of the topology's own.
    pub link_delay: Duration,
    pub switch_delay: Duration,
    /// One-way delay of a process's NIC and network stack, added to its link to the ToR.
    pub host_nic_delay: Duration,
    pub host_frame_cost: Duration,
    /// CPU time of a host representative per beacon in or out (`Incarnation::Host`).
    pub representative_frame_cost: Duration,
    pub queue_capacity_bytes: usize,
    pub ecn_threshold_bytes: usize,
    pub mtu_bytes: usize,
    /// Best-effort send buffer of each process, in packets (the reliable one is in
    /// `reliable_config`).
    pub send_buffer_packets: usize,
    pub dead_after_intervals: u32,
    /// Per-frame loss and duplication on every link, until `faults_for` after traffic starts.
    pub loss: f64,
    pub duplicate: f64,
    /// Probability that a frame is held back up to 2 us, breaking per-link FIFO.
    pub reorder: f64,
    pub faults_for: Option<Duration>,
    pub failures: Vec<Failure>,
    pub forged_beacons: Vec<ForgedBeacon>,
    pub clock_steps: Vec<ClockStep>,
    pub pattern: Pattern,
    /// Mean gap between one process's scatterings; zero saturates.
    pub gap: Duration,
    pub message_bytes_min: usize,
    pub message_bytes_max: usize,
    /// One message apart from the stream (a 1 MB message stalling the others, paper 7.2).
    pub large_message: Option<crate::traffic::LargeMessage>,
    pub reliable: bool,
    /// `false` delivers on arrival: the unordered baseline.
    pub ordering: bool,
    /// Windows and timers of the reliable service, scaled to the simulated fabric.
    pub reliable_config: ReliableConfig,
    /// Traffic runs this long, then the run drains for `drain`.
    pub send_for: Duration,
    /// Throughput and latency are measured from this long after traffic starts: a saturated
    /// run reports its steady state, not the time its queues took to fill.
    pub measure_after: Duration,
    pub drain: Duration,
    /// The run goes on after `drain` while some process still has traffic in flight (see
    /// [`onepipe_proto::endpoint::Endpoint::is_quiescent`]) and it still moves (something delivered,
    /// acknowledged or failed within 1 ms or four RTO caps), until this long after traffic
    /// stopped. Saturated traffic leaves a backlog, a millisecond or more, tens of them for an
    /// incast, that a fixed drain cut off; its checks then failed for messages still on their
    /// way. At most `drain`: a fixed drain.
    pub drain_max: Duration,
    /// Checker logs keep messages sent in the first `record_for` of traffic (bounds memory).
    pub record_for: Duration,
    /// Messages sent this long after every fault has healed must all be delivered (liveness).
    pub settle: Duration,
    pub events_max: u64,
    pub memory_bytes_max: u64,
    /// Run the controller (paper 5.2) on management links: processes cut off by a failure are
    /// declared failed and everyone else recovers. Reliable runs only.
    pub controller: bool,
    /// One-way delay of a management link (the controller sits about a network diameter away).
    pub control_delay: Duration,
    /// How long the controller waits after a first report for the others, and for answers.
    pub controller_config: ControllerConfig,
    /// Controller CPU time per frame it receives or sends, and per failure notification an
    /// announcement carries: the paper's recovery grows by 3-15 us per host (section 8).
    pub controller_frame_cost: Duration,
    /// Where barriers are aggregated (paper 6.2): switching chips, switch CPUs, or hosts.
    pub incarnation: onepipe_proto::Incarnation,
    /// Long-lived DCTCP flows between hosts beside 1Pipe's traffic (paper Fig. 12); none by
    /// default.
    pub background: crate::dctcp::DctcpConfig,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 1,
            topology: Topology::paper_testbed(),
            processes_per_host: 1,
            beacon_interval: Duration::from_micros(3),
            skew_mean: Duration::from_nanos(300),
            drift_ppb_max: 0,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            link_bits_per_s: 100_000_000_000,
            fabric_link_bits_per_s: None,
            link_delay: Duration::from_nanos(100),
            // Per hop (link + switch) about 0.8 us and 2 us for a one-hop unordered message,
            // as the paper's testbed measured (Fig. 9a).
            switch_delay: Duration::from_nanos(700),
            host_nic_delay: Duration::from_nanos(550),
            host_frame_cost: Duration::from_nanos(65),
            // Paper 7.4 (Fig. 13a): a host core sustains the beacons of a 32-port switch at 3 us,
            // a beacon in and one out per port and interval: at most 47 ns per beacon. A
            // process's 65 ns (its stack) would not keep up with a ToR of 32 processes.
            representative_frame_cost: Duration::from_nanos(40),
            queue_capacity_bytes: 1 << 20,
            ecn_threshold_bytes: 100 * 1024,
            mtu_bytes: 1500,
            send_buffer_packets: 4096,
            dead_after_intervals: 10,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            faults_for: None,
            failures: Vec::new(),
            forged_beacons: Vec::new(),
            clock_steps: Vec::new(),
            pattern: Pattern::Broadcast,
            gap: Duration::from_micros(20),
            message_bytes_min: 64,
            message_bytes_max: 64,
            large_message: None,
            reliable: false,
            ordering: true,
            reliable_config: microsecond_reliable(),
            send_for: Duration::from_micros(500),
            measure_after: Duration::ZERO,
            drain: Duration::from_micros(200),
            drain_max: Duration::ZERO,
            record_for: Duration::from_secs(3600),
            settle: Duration::from_micros(100),
            events_max: 2_000_000_000,
            memory_bytes_max: 16 << 30,
            controller: false,
            // Host, ToR, spine, core, spine, ToR, host: 6 hops of 0.8 us plus two NICs.
            control_delay: Duration::from_micros(6),
            controller_config: microsecond_controller(),
            controller_frame_cost: Duration::from_micros(1),
            incarnation: onepipe_proto::Incarnation::Chip,
            background: crate::dctcp::DctcpConfig::default(),
        }
    }
}

/// The retransmission timeout's cap for saturated runs: a round trip then queues 300-900 us at
/// the CPUs (Fig. 8 at 512 processes), and under a lower cap every packet times out before its
/// ACK comes, while Karn's rule (no sample from a retransmitted packet) keeps the estimate
/// from ever learning the RTT.
pub const SATURATED_RTO_MAX: Duration = Duration::from_millis(2);

/// The reliable service's timers for a fabric whose round trip is microseconds (the runtime
/// defaults are for threads that a shared machine deschedules for milliseconds).
pub fn microsecond_reliable() -> ReliableConfig {
    ReliableConfig {
        rto_initial: Duration::from_micros(15),
        rto_min: Duration::from_micros(5),
        // Random loss wants a low cap: one packet backing off holds the commit barrier, and so
        // everyone's delivery (Fig. 9b). Fig. 8 raises it: see `figures::fig8`.
        rto_max: Duration::from_micros(100),
        // About one broadcast round at 128 processes, for ACKs to ride on prepare packets.
        ack_delay_max: Duration::from_micros(20),
        give_up_after: Duration::from_millis(50),
        ..ReliableConfig::default()
    }
}

/// The controller's timers for a fabric whose beacons come every few microseconds.
pub fn microsecond_controller() -> ControllerConfig {
    ControllerConfig {
        // Neighbours of one failure time out within a beacon interval or two of each other.
        settle: Duration::from_micros(6),
        answer_timeout: Duration::from_millis(2),
    }
}

/// A configuration value that cannot work, named by its field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid simulation config: `{field}` {reason}")]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

fn bad(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        reason: reason.into(),
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let processes = self.topology.hosts.len() as u64 * self.processes_per_host as u64;
        if self.processes_per_host == 0 {
            return Err(bad("processes_per_host", "must be at least 1"));
        }
        if self.beacon_interval == Duration::ZERO {
            return Err(bad("beacon_interval", "must be positive"));
        }
        self.background.check().map_err(|e| bad("background", e))?;
        if self.drift_ppb_max as i64 > onepipe_proto::clock::DRIFT_PPB_MAX {
            return Err(bad(
                "drift_ppb_max",
                format!(
                    "is {} ppb; clocks drift by at most {} ppb ({} ppm)",
                    self.drift_ppb_max,
                    onepipe_proto::clock::DRIFT_PPB_MAX,
                    onepipe_proto::clock::DRIFT_PPB_MAX / 1_000
                ),
            ));
        }
        for (field, p) in [
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("reorder", self.reorder),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(bad(field, format!("is {p}; a probability in [0, 1) is needed")));
            }
        }
        if self.mtu_bytes < 128 || self.mtu_bytes > onepipe_fabric::node::FRAME_MAX {
            return Err(bad(
                "mtu_bytes",
                format!(
                    "is {}; must be 128..={}",
                    self.mtu_bytes,
                    onepipe_fabric::node::FRAME_MAX
                ),
            ));
        }
        if self.queue_capacity_bytes < self.mtu_bytes {
            return Err(bad(
                "queue_capacity_bytes",
                "must hold at least one MTU-sized frame",
            ));
        }
        if self.message_bytes_min < 8 || self.message_bytes_min > self.message_bytes_max {
            return Err(bad(
                "message_bytes_min",
                format!(
                    "is {}; must be at least 8 (the send time) and at most message_bytes_max ({})",
                    self.message_bytes_min, self.message_bytes_max
                ),
            ));
        }
        if self.message_bytes_max > 1 << 20 {
            return Err(bad("message_bytes_max", "exceeds 1 MiB, the largest message"));
        }
        match self.pattern {
            Pattern::Incast { target } if target as u64 >= processes => {
                return Err(bad(
                    "pattern",
                    format!("incast target {target} does not exist ({processes} processes)"),
                ));
            }
            Pattern::Random { fanout: 0 } => return Err(bad("pattern", "random fanout must be at least 1")),
            Pattern::Pair { from, to } if from.max(to) as u64 >= processes => {
                return Err(bad(
                    "pattern",
                    format!("pair {from}-{to} names a process that does not exist ({processes} processes)"),
                ));
            }
            Pattern::Broadcast if processes > 4096 => {
                return Err(bad(
                    "pattern",
                    format!("broadcast to {processes} processes is too large; use random:K"),
                ));
            }
            _ => {}
        }
        if let Some(l) = self.large_message {
            if l.from.max(l.to) as u64 >= processes {
                return Err(bad(
                    "large_message",
                    format!("names a process past the {processes} there are"),
                ));
            }
            if l.bytes < 8 || l.bytes > 1 << 20 || l.at >= self.send_for {
                return Err(bad(
                    "large_message",
                    "must be 8 bytes to 1 MiB and sent while traffic runs",
                ));
            }
        }
        if self.dead_after_intervals == 0 {
            return Err(bad("dead_after_intervals", "must be at least 1"));
        }
        if self.send_for == Duration::ZERO {
            return Err(bad("send_for", "must be positive"));
        }
        if self.controller && !self.reliable {
            return Err(bad(
                "controller",
                "recovers the reliable service only; add --reliable",
            ));
        }
        let pauses = |f: &Failure| {
            matches!(
                f.target,
                FailTarget::Switch(_) | FailTarget::Process(_) | FailTarget::Representative(_)
            )
        };
        if self.controller && self.failures.iter().any(|f| f.lasts.is_some() && pauses(f)) {
            return Err(bad(
                "failures",
                "with the controller a switch or host failure is permanent (a process declared \
                 failed does not come back here: receiver recovery is not simulated); drop the \
                 +DURATION, or crash and start a switch afresh with restart:NAME@T+D",
            ));
        }
        if self.measure_after >= self.send_for {
            return Err(bad("measure_after", "must be shorter than send_for"));
        }
        for c in &self.clock_steps {
            if c.process as u64 >= processes {
                return Err(bad(
                    "clock_steps",
                    format!("host:{} does not exist ({processes} processes)", c.process),
                ));
            }
            if c.at > self.send_for {
                return Err(bad("clock_steps", "a clock step comes after traffic has stopped"));
            }
        }
        self.validate_time_ahead()?;
        for f in &self.failures {
            if matches!(f.target, FailTarget::Representative(_))
                && self.incarnation != onepipe_proto::Incarnation::Host
            {
                return Err(bad(
                    "failures",
                    "a representative fails only with host representatives (--incarnation host)",
                ));
            }
            if let FailTarget::Process(p) = f.target
                && p as u64 >= processes
            {
                return Err(bad(
                    "failures",
                    format!("host:{p} does not exist ({processes} processes)"),
                ));
            }
            if f.at > self.send_for {
                return Err(bad("failures", "a failure starts after traffic has stopped"));
            }
        }
        Ok(())
    }

    /// How far apart two clocks of this run may get, in ns: offsets differ by up to 4 x
    /// `skew_mean` (each is within 2 x `skew_mean` of the shared clock); drift adds up to
    /// twice `drift_ppb_max` over the longest run (clocks drift from virtual time zero); and
    /// each clock step its size (a step forward puts its host ahead, a step back holds its
    /// clock while the others go on).
    pub fn clock_spread_ns_max(&self) -> u64 {
        let run = crate::run::START
            + self.beacon_interval.saturating_mul(crate::run::WARMUP_INTERVALS)
            + self.send_for
            + self.drain.max(self.drain_max);
        let drift = 2 * run.as_nanos() as u128 * self.drift_ppb_max as u128 / 1_000_000_000;
        let steps: u128 = self
            .clock_steps
            .iter()
            .map(|c| c.delta_ns.unsigned_abs() as u128)
            .sum();
        let spread = 4 * self.skew_mean.as_nanos() as u128 + drift + steps;
        spread.min(u64::MAX as u128) as u64
    }

    /// A correct host's barrier or timestamp is never refused as implausible: the bound on
    /// time covers how far the run's clocks may get apart, and stays within the wire's range.
    fn validate_time_ahead(&self) -> Result<(), ConfigError> {
        let max_ns = self.time_ahead_max.as_nanos();
        if max_ns > WIRE_AHEAD_NS_MAX {
            return Err(bad(
                "time_ahead_max",
                format!(
                    "is {max_ns} ns, past half the wire clock's range ({WIRE_AHEAD_NS_MAX} ns), where a time \
                     ahead cannot be told from one behind"
                ),
            ));
        }
        let spread_ns = self.clock_spread_ns_max();
        if spread_ns <= max_ns {
            return Ok(());
        }
        let why = format!(
            "is {max_ns} ns, less than the {spread_ns} ns the run's clocks may get apart (4 x \
             skew_mean {} ns, drift_ppb_max {} over the run, clock_steps of {} ns in all): correct \
             hosts' barriers and timestamps would be refused as implausible",
            self.skew_mean.as_nanos(),
            self.drift_ppb_max,
            self.clock_steps
                .iter()
                .map(|c| c.delta_ns.unsigned_abs())
                .sum::<u64>(),
        );
        let fix = if spread_ns > WIRE_AHEAD_NS_MAX {
            format!(
                "; that is past the wire's limit ({WIRE_AHEAD_NS_MAX} ns, half its clock's range): lower \
                 --skew, --drift-ppm or the --clock-step sizes"
            )
        } else {
            format!(
                "; raise --time-ahead-max-ms to at least {} or lower --skew, --drift-ppm or the --clock-step sizes",
                spread_ns.div_ceil(1_000) as f64 / 1_000.0
            )
        };
        Err(bad("time_ahead_max", why + &fix))
    }
}
