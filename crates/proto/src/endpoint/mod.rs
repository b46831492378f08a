//! The host endpoint (paper sections 4.1, 6.1), sans-IO: what `lib1pipe` does for one process.
//!
//! Sending: a scattering gets one timestamp from the host clock; each of its messages is cut
//! into packets of at most the MTU, all stamped with that timestamp, queued in a bounded send
//! buffer and sent in order. Every packet leaving carries a barrier no higher than the timestamp
//! of anything still queued behind it (docs/ordering.md), so the uplink keeps the promise
//! "every later packet on this link has a timestamp >= B".
//!
//! Receiving: data waits in the reorder buffer until the barrier carried by packets from the
//! ToR passes its timestamp; delivery is in (timestamp, sender) order. A packet whose timestamp
//! is already below the barrier arrived too late to be delivered in order: it is dropped and
//! NAKed, and its sender reports a send failure.
//!
//! Failure (paper 5.2): the controller announces a failed process and its failure timestamp
//! through [`Endpoint::on_process_failed`]; the endpoint discards what it must from that process,
//! recalls its own aborted scatterings, queues the application's callback
//! ([`Endpoint::poll_event`]) and says when its part is done
//! ([`Endpoint::failure_complete`]). See docs/reliable.md.
//!
//! Call order per step: `handle_frame` for arrivals, `handle_timeout` when due, then
//! `poll_transmit` while the uplink has room, `poll_deliver` and `poll_event` to drain.

use crate::clock::HostClock;
use crate::plausible::{ImplausibleInput, ImplausibleReport, TIME_AHEAD_MAX};
use crate::reliable::ReliableConfig;
use crate::reliable::receiver::{AckRelease, Admit, ReliableReceiver};
use crate::reliable::sender::{ReliableSender, Transmit};
use crate::reorder::{Insert, ReorderBuffer, ReorderLimits};
pub use crate::send_failure::{FailureReason, SendFailure};
use onepipe_wire::ack::{emit_piggyback, split_piggyback};
use onepipe_wire::packet::{HEADER_LEN, Opcode, Packet, ParseError, Repr};
use onepipe_wire::{ACK_PAYLOAD_LEN, AckPayload, Duration, Instant, PIGGYBACK_MAX_LEN, Timestamp48};
use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct EndpointConfig {
    pub process: u32,
    /// Number of processes in the system; destinations must be below it.
    pub process_count: u32,
    /// This endpoint's port number at its ToR, stamped as link id on the uplink.
    pub tor_port: u16,
    pub beacon_interval: Duration,
    /// Host clock offset from the shared source (skew injection).
    pub clock_offset_ns: i64,
    /// How fast the host clock runs against the shared source, in parts per billion (the
    /// simulator's drift; 0 where the shared source is the host's own clock), at most
    /// [`crate::clock::DRIFT_PPB_MAX`] either way.
    pub clock_drift_ppb: i64,
    /// Largest packet, header included.
    pub mtu_bytes: usize,
    /// Largest message payload accepted.
    pub message_bytes_max: usize,
    /// Send buffer bound, in packets.
    pub send_buffer_packets_max: usize,
    /// Reorder buffer bound, in bytes (payload plus per-entry overhead).
    pub reorder_bytes_max: usize,
    /// Queued NAKs; more are counted and not sent.
    pub nak_queue_max: usize,
    /// `false` turns ordering off: messages are delivered on arrival (the unordered baseline).
    pub ordering: bool,
    /// Promise mode (docs/ordering.md, "Promises"): at the end of each visit of a runtime
    /// that runs nodes in turn ([`Endpoint::end_visit`]), the endpoint promises to stamp nothing below its clock plus this lead and beacons the
    /// promise. `None`: its barrier is its clock, as in the paper.
    pub promise_lead: Option<Duration>,
    /// How far ahead of this host's clock, beyond `promise_lead`, a barrier from the ToR or a
    /// message's timestamp may be: the largest skew between two clocks of the fabric plus a
    /// margin ([`TIME_AHEAD_MAX`] by default). A frame with one further ahead is refused and
    /// counted ([`EndpointCounters::time_implausible`]) and reported to the controller
    /// ([`Endpoint::poll_implausible`]; docs/ordering.md, "Implausible time").
    pub time_ahead_max: Duration,
    /// The reliable service: windows, retransmission, its own send buffer.
    pub reliable: ReliableConfig,
    /// Where the fabric aggregates barriers (paper 6.2). Unless a chip stamps every packet,
    /// barriers come only in beacons: data's are ignored, and this host beacons every
    /// interval, busy or not, ahead of its data.
    pub incarnation: crate::Incarnation,
}

impl EndpointConfig {
    pub fn new(process: u32, process_count: u32, tor_port: u16) -> EndpointConfig {
        EndpointConfig {
            process,
            process_count,
            tor_port,
            beacon_interval: Duration::from_micros(3),
            clock_offset_ns: 0,
            clock_drift_ppb: 0,
            mtu_bytes: 1500,
            message_bytes_max: 1 << 20,
            send_buffer_packets_max: 4096,
            reorder_bytes_max: 64 << 20,
            nak_queue_max: 1024,
            ordering: true,
            promise_lead: None,
            time_ahead_max: TIME_AHEAD_MAX,
            reliable: ReliableConfig::default(),
            incarnation: crate::Incarnation::Chip,
        }
    }

    fn fragment_payload_bytes(&self) -> usize {
        self.mtu_bytes - HEADER_LEN
    }

    /// The best-effort reorder buffer's: data fragments are cut at the MTU.
    fn reorder_limits(&self) -> ReorderLimits {
        ReorderLimits::new(
            self.reorder_bytes_max,
            self.fragment_payload_bytes(),
            self.message_bytes_max,
        )
    }

    /// The prepared buffer's: reliable fragments leave room for an ACK to ride along.
    fn prepared_limits(&self) -> ReorderLimits {
        ReorderLimits::new(
            self.reorder_bytes_max,
            self.reliable_fragment_bytes(),
            self.message_bytes_max,
        )
    }

    /// Raises the receive window to hold a reliable message of `message_bytes`: it waits whole
    /// at its receiver for the commit barrier, and `send_reliable` refuses larger ones.
    pub fn fit_recv_window_to(&mut self, message_bytes: usize) {
        let packets = message_bytes.div_ceil(self.reliable_fragment_bytes()).max(1);
        self.reliable.recv_window_packets = self.reliable.recv_window_packets.max(packets as u32);
    }

    /// Whether ACKs ride on reliable packets: not when the MTU is so small that the room left
    /// for them would take most of a fragment.
    fn piggybacks(&self) -> bool {
        self.fragment_payload_bytes() > 2 * PIGGYBACK_MAX_LEN
    }

    /// Payload bytes of a reliable fragment: less than best effort's when there is room for
    /// an ACK to ride along.
    fn reliable_fragment_bytes(&self) -> usize {
        let fragment_bytes = self.fragment_payload_bytes();
        if self.piggybacks() {
            fragment_bytes - PIGGYBACK_MAX_LEN
        } else {
            fragment_bytes
        }
    }
}

/// Why a send was refused. Nothing of a refused scattering is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("a scattering needs at least one message")]
    EmptyScattering,
    #[error("destination process {0} does not exist")]
    UnknownDestination(u32),
    #[error("destination process {0} appears twice in one scattering")]
    DuplicateDestination(u32),
    #[error("message of {size} bytes exceeds the limit of {max} bytes")]
    MessageTooLarge { size: usize, max: usize },
    #[error("send buffer full ({queued} of {max} packets queued); retry later")]
    BufferFull { queued: usize, max: usize },
    #[error("a scattering of {packets} packets can never fit the reliable send buffer of {max}")]
    ScatteringTooLarge { packets: usize, max: usize },
    /// A reliable message is held whole at its receiver until the commit barrier passes it,
    /// within the receive window (`ReliableConfig::recv_window_packets`, paper 6.1); one larger
    /// than the window could never complete there.
    #[error(
        "a reliable message of {packets} packets can never fit the receive window of {window} packets \
         (raise recv_window_packets)"
    )]
    MessageExceedsWindow { packets: usize, window: usize },
    #[error("destination process {0} has failed")]
    ProcessFailed(u32),
    /// Paper 5.2, Receiver Recovery: the controller said this process failed; it sends again
    /// once it has recovered ([`Endpoint::recover`]).
    #[error("this process was declared failed and has not recovered yet")]
    OwnFailure,
}

/// Why a failure announcement was refused (paper 5.2 Broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProcessFailureError {
    /// A process that can hear the announcement is not failed; its recovery (paper 5.2
    /// Receiver Recovery, rejoining as a new process) is not handled here.
    #[error("process {0} was announced failed to itself")]
    OwnProcess(u32),
    #[error("process {0} does not exist")]
    UnknownProcess(u32),
}

/// Checks that a scattering has messages, to existing and distinct receivers. Paper 2.1: a
/// scattering's messages go to different receivers; a receiver tells messages apart by
/// (timestamp, sender), so two to one receiver would collide.
pub fn check_destinations(scatter: &[(u32, &[u8])], process_count: u32) -> Result<(), SendError> {
    if scatter.is_empty() {
        return Err(SendError::EmptyScattering);
    }
    if let Some(&(dst, _)) = scatter.iter().find(|&&(d, _)| d >= process_count) {
        return Err(SendError::UnknownDestination(dst));
    }
    let mut dsts: Vec<u32> = scatter.iter().map(|&(d, _)| d).collect();
    dsts.sort_unstable();
    match dsts.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(SendError::DuplicateDestination(w[0])),
        None => Ok(()),
    }
}

/// A message delivered in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub ts: Instant,
    pub src: u32,
    pub msg_id: u64,
    pub payload: Vec<u8>,
}

/// What an endpoint tells its application besides deliveries ([`Endpoint::poll_event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointEvent {
    /// Paper Table 1's `onepipe_proc_fail_callback`: the controller announced `process`
    /// failed with failure timestamp `ts` (paper 5.2).
    ProcessFailed { process: u32, ts: Instant },
    /// Paper Table 1's `onepipe_send_fail_callback`: a message of ours was not delivered.
    SendFailed(SendFailure),
}

/// Released best-effort scatterings kept for [`Endpoint::poll_released`]; older ones are
/// dropped (and counted) when nobody asks.
pub const RELEASED_UNPOLLED_MAX: usize = 4096;

/// Most packets [`Endpoint::end_visit`] adds to a visit to finish a scattering half sent;
/// a larger rest (a long message) keeps holding the barrier until the next visit.
const CLOSING_PACKETS_MAX: usize = 64;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointCounters {
    pub scatterings_sent: u64,
    /// Released best-effort scatterings dropped from the [`Endpoint::poll_released`] queue
    /// because nobody asked for them (see [`RELEASED_UNPOLLED_MAX`]).
    pub released_unpolled_dropped: u64,
    pub messages_sent: u64,
    pub packets_sent: u64,
    pub beacons_sent: u64,
    /// Beacons that carried a new promise (promise mode; counted in `beacons_sent` too).
    pub promises_sent: u64,
    pub delivered: u64,
    pub malformed: u64,
    /// Packets not addressed to this process.
    pub misdelivered: u64,
    /// Arrived with a timestamp below the barrier already passed.
    pub late: u64,
    /// The barrier passed before all fragments arrived.
    pub incomplete: u64,
    pub reorder_full: u64,
    pub duplicates: u64,
    pub naks_sent: u64,
    pub naks_dropped: u64,
    pub naks_received: u64,
    /// Frames from a process announced failed, dropped (paper 5.2 Discard).
    pub from_failed: u64,
    /// Prepared messages of failed processes discarded (at or above their failure timestamp,
    /// or incomplete).
    pub discarded: u64,
    /// Failure announcements repeated (ignored).
    pub failures_repeated: u64,
    /// Recalls received and stored (duplicates are counted by the reliable receiver).
    pub recalls_received: u64,
    /// Of those, recalls that found their message here and removed it.
    pub recalled: u64,
    /// Packets of recalled messages that arrived after their recall (dropped by tombstone).
    pub recalled_late: u64,
    /// Recalls below the commit barrier: their message may have been delivered already. A
    /// correct sender holds its commit barrier until its recall is acknowledged, so this stays 0.
    pub recalls_too_late: u64,
    /// Recalls dropped unacknowledged because `TOMBSTONES_MAX` tombstones are kept (the sender
    /// retransmits them).
    pub recalls_refused: u64,
    /// Packets the controller forwarded to us (paper 5.2), prepares and ACKs.
    pub forwarded_received: u64,
    /// Frames refused because a barrier or message timestamp was further ahead of this host's
    /// clock than `promise_lead + time_ahead_max` ([`EndpointConfig::time_ahead_max`]).
    pub time_implausible: u64,
    /// Fragments refused for a fragment count or size no correct sender makes
    /// ([`Insert::Oversized`]).
    pub oversized: u64,
}

/// Recalls whose message may still arrive, kept until the commit barrier passes them. A correct
/// sender has at most its send buffer's scatterings recalled at once; this bounds the rest.
pub const TOMBSTONES_MAX: usize = 1 << 16;

struct OutMessage {
    dst: u32,
    /// Range of the scattering's payload buffer.
    start: usize,
    len: usize,
}

/// A queued scattering: one message id, one payload buffer for all messages, and one
/// timestamp, taken when its first packet leaves (paper 6.1).
struct OutScattering {
    ts: Option<Instant>,
    msg_id: u64,
    data: Vec<u8>,
    messages: Vec<OutMessage>,
    next_message: usize,
    next_fragment: u16,
}

pub struct Endpoint {
    config: EndpointConfig,
    /// ACKs may ride on prepare packets (the MTU leaves room).
    piggyback: bool,
    sender: ReliableSender,
    receiver: ReliableReceiver,
    /// Prepared reliable messages, waiting for the commit barrier.
    prepared: ReorderBuffer,
    /// Highest commit barrier heard from the ToR.
    commit: Instant,
    clock: HostClock,
    send_queue: VecDeque<OutScattering>,
    queued_packets: usize,
    /// Best-effort scatterings stamped as they left, for [`Endpoint::poll_released`]; bounded
    /// by [`RELEASED_UNPOLLED_MAX`].
    released: VecDeque<(u64, Instant)>,
    /// The visit is closing (promise mode, [`Endpoint::end_visit`]): the rest of a scattering
    /// and a beacon with our promise go before anything else.
    closing: bool,
    next_msg_id: u64,
    naks: VecDeque<Repr>,
    reorder: ReorderBuffer,
    /// Highest barrier heard from the ToR: everything below it is deliverable.
    barrier: Instant,
    failures: VecDeque<SendFailure>,
    /// Next synchronized beacon time, on the shared clock.
    next_beacon_at: Instant,
    beacon_due: bool,
    /// The last ACK deadline a timeout announced (see `ack_deadline`).
    acks_woken_at: Instant,
    last_sent: Instant,
    counters: EndpointCounters,
    lost_scratch: Vec<(Instant, u32, u64)>,
    /// Processes announced failed, with their failure timestamps (paper 5.2). Few: scanned.
    failed: Vec<(u32, Instant)>,
    /// Announcements for the application's process-failure callback.
    process_failures: VecDeque<(u32, Instant)>,
    /// Recalled messages (timestamp, sender) that have not arrived whole, so that a late copy
    /// is dropped; removed once the commit barrier passes them (later copies are then late).
    tombstones: std::collections::BTreeSet<(Instant, u32)>,
    /// Paper 5.2, Receiver Recovery (endpoint_recovery.rs).
    recovery: recovery::EndpointRecovery,
    /// Registered with a controller that has not confirmed it yet: no reliable delivery until
    /// it does (see [`Endpoint::await_registration`]).
    unregistered: bool,
    /// Frames refused for implausible time, for the next report to the controller.
    implausible: ImplausibleInput,
    /// A report of them is due ([`Endpoint::poll_implausible`]).
    implausible_due: bool,
}

impl Endpoint {
    pub fn new(config: EndpointConfig, now: Instant) -> Endpoint {
        assert!(
            config.mtu_bytes > HEADER_LEN,
            "MTU must exceed the {HEADER_LEN}-byte header"
        );
        assert!(
            config.beacon_interval > Duration::ZERO,
            "beacon interval must be positive"
        );
        assert!(config.process < config.process_count, "process id out of range");
        let mut clock = HostClock::with_drift(config.clock_offset_ns, config.clock_drift_ppb);
        let host_now = clock.read(now);
        // Reliable fragments leave room for an ACK riding along, unless the MTU is tiny.
        let piggyback = config.piggybacks();
        let reliable_fragment_bytes = config.reliable_fragment_bytes();
        Endpoint {
            piggyback,
            sender: ReliableSender::new(
                config.reliable.clone(),
                config.process_count,
                reliable_fragment_bytes,
            ),
            receiver: ReliableReceiver::new(config.reliable.recv_window_packets, config.process_count),
            prepared: ReorderBuffer::new(config.prepared_limits()),
            commit: Instant::ZERO,
            reorder: ReorderBuffer::new(config.reorder_limits()),
            next_beacon_at: clock.to_shared(host_now.next_multiple_of(config.beacon_interval)),
            beacon_due: false,
            acks_woken_at: Instant::ZERO,
            config,
            clock,
            send_queue: VecDeque::new(),
            queued_packets: 0,
            released: VecDeque::new(),
            closing: false,
            next_msg_id: 0,
            naks: VecDeque::new(),
            barrier: Instant::ZERO,
            failures: VecDeque::new(),
            last_sent: Instant::ZERO,
            counters: EndpointCounters::default(),
            lost_scratch: Vec::new(),
            failed: Vec::new(),
            process_failures: VecDeque::new(),
            tombstones: Default::default(),
            recovery: Default::default(),
            unregistered: false,
            implausible: ImplausibleInput::default(),
            implausible_due: false,
        }
    }

    /// This process has asked a controller to register it. Until the controller confirms
    /// ([`Endpoint::registration_confirmed`]), it may have missed failure announcements: a
    /// recovery can resume without a process the controller does not know yet, and the commit
    /// barrier then passes messages of the failed process that the others discard. So reliable
    /// delivery waits; preparing, acknowledging and sending go on.
    pub fn await_registration(&mut self) {
        self.unregistered = true;
    }

    /// The controller confirmed the registration (after it handed over the failures decided
    /// so far): reliable delivery may go on.
    pub fn registration_confirmed(&mut self) {
        self.unregistered = false;
    }

    /// What every step must keep (TigerBeetle's `invariants()`), cheap enough for the
    /// simulator to call after each: every queue within its bound, the failed processes
    /// distinct and other than this one, and the same of the reorder buffers and the reliable
    /// sender.
    pub fn invariants(&self) {
        let c = &self.config;
        assert!(c.process < c.process_count);
        assert!(
            self.queued_packets <= c.send_buffer_packets_max,
            "send buffer bounded"
        );
        assert!(self.released.len() <= RELEASED_UNPOLLED_MAX);
        assert!(self.naks.len() <= c.nak_queue_max);
        assert!(self.tombstones.len() <= TOMBSTONES_MAX);
        for (i, &(p, _)) in self.failed.iter().enumerate() {
            assert!(p < c.process_count && p != c.process, "failed process {p}");
            assert!(
                self.failed[i + 1..].iter().all(|&(q, _)| q != p),
                "{p} failed once"
            );
        }
        self.reorder.invariants();
        self.prepared.invariants();
        self.sender.invariants();
    }

    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }
    pub fn counters(&self) -> &EndpointCounters {
        &self.counters
    }
    pub fn reorder(&self) -> &ReorderBuffer {
        &self.reorder
    }
    /// The barrier this receiver has reached.
    pub fn barrier(&self) -> Instant {
        self.barrier
    }

    /// Paper Table 1 `onepipe_get_timestamp`: the host's timestamp now, the lowest it may
    /// still stamp a message with (its clock, or a promise ahead of it).
    pub fn timestamp(&mut self, now: Instant) -> Instant {
        self.clock.issue_floor(now)
    }

    /// What the host clock reads at `now`, without its guards (for reports: how far the
    /// barrier trails the clock).
    pub fn clock_reading(&self, now: Instant) -> Instant {
        self.clock.reading(now)
    }

    /// Steps the host clock by `delta_ns` at `now` (back if negative), as NTP steps a clock
    /// ([`HostClock::step`]): timestamps and barriers never go back; after a step forward they
    /// jump ahead, and the others' barriers take that long to pass this host's messages.
    pub fn step_clock(&mut self, now: Instant, delta_ns: i64) {
        self.clock.step(now, delta_ns);
    }

    /// Packets a message of `len` bytes needs.
    pub fn packets_for(&self, len: usize) -> usize {
        len.div_ceil(self.config.fragment_payload_bytes()).max(1)
    }

    /// Free space in the send buffer, in packets.
    pub fn send_room_packets(&self) -> usize {
        self.config.send_buffer_packets_max - self.queued_packets
    }

    /// Checks a scattering's destinations and sizes; returns its best-effort packets.
    fn validate(&self, scatter: &[(u32, &[u8])]) -> Result<usize, SendError> {
        check_destinations(scatter, self.config.process_count)?;
        if self.recovery.is_failed() {
            return Err(SendError::OwnFailure);
        }
        if !self.failed.is_empty()
            && let Some(&(dst, _)) = scatter.iter().find(|&&(d, _)| self.is_process_failed(d))
        {
            return Err(SendError::ProcessFailed(dst));
        }
        let mut packets = 0;
        for &(_, msg) in scatter {
            if msg.len() > self.config.message_bytes_max || self.packets_for(msg.len()) > u16::MAX as usize {
                return Err(SendError::MessageTooLarge {
                    size: msg.len(),
                    max: self.config.message_bytes_max,
                });
            }
            packets += self.packets_for(msg.len());
        }
        Ok(packets)
    }

    /// Paper Table 1 `onepipe_unreliable_send(vec[<dst, msg>])`: one scattering, one
    /// timestamp, taken when its first packet leaves the send buffer (paper 6.1; reported by
    /// [`Endpoint::poll_released`]). Returns the message id.
    pub fn send_unreliable(&mut self, _now: Instant, scatter: &[(u32, &[u8])]) -> Result<u64, SendError> {
        let packets = self.validate(scatter)?;
        if packets > self.send_room_packets() {
            return Err(SendError::BufferFull {
                queued: self.queued_packets,
                max: self.config.send_buffer_packets_max,
            });
        }
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        let mut messages = Vec::with_capacity(scatter.len());
        let mut data = Vec::new();
        crate::scatter::pack(&mut data, scatter, |dst, start, len| {
            messages.push(OutMessage { dst, start, len })
        });
        self.send_queue.push_back(OutScattering {
            ts: None,
            msg_id,
            data,
            messages,
            next_message: 0,
            next_fragment: 0,
        });
        self.queued_packets += packets;
        self.counters.scatterings_sent += 1;
        self.counters.messages_sent += scatter.len() as u64;
        Ok(msg_id)
    }

    /// Paper Table 1 `onepipe_reliable_send(vec[<dst, msg>])`: the scattering waits in the
    /// reliable send buffer until every message fits its destination's window, then takes one
    /// timestamp (see [`Endpoint::poll_released`]) and is delivered exactly once to each
    /// destination, in the same total order, or reported through [`Endpoint::poll_event`].
    /// Returns the message id.
    pub fn send_reliable(&mut self, now: Instant, scatter: &[(u32, &[u8])]) -> Result<u64, SendError> {
        self.validate(scatter)?;
        let (packets, largest) = scatter.iter().fold((0, 0), |(sum, largest), (_, m)| {
            let n = self.reliable_packets_for(m.len());
            (sum + n, largest.max(n))
        });
        let max = self.config.reliable.send_buffer_packets_max;
        if packets > max {
            return Err(SendError::ScatteringTooLarge { packets, max });
        }
        let window = self.config.reliable.recv_window_packets as usize;
        if largest > window {
            return Err(SendError::MessageExceedsWindow {
                packets: largest,
                window,
            });
        }
        if packets > self.sender.room_packets() {
            return Err(SendError::BufferFull {
                queued: self.sender.unacked_packets(),
                max,
            });
        }
        let msg_id = self.next_msg_id;
        self.next_msg_id += 1;
        self.sender.submit(msg_id, scatter);
        self.release(now);
        self.counters.scatterings_sent += 1;
        self.counters.messages_sent += scatter.len() as u64;
        Ok(msg_id)
    }

    /// Packets a reliable message of `len` bytes needs (smaller fragments than best effort:
    /// they leave room for a piggybacked ACK).
    pub fn reliable_packets_for(&self, len: usize) -> usize {
        self.sender.packets_for(len) as usize
    }

    /// Free space in the reliable send buffer, in packets.
    pub fn reliable_room_packets(&self) -> usize {
        self.sender.room_packets()
    }

    /// The next scattering that left a send buffer, with the timestamp it took there: (message
    /// id, timestamp), in timestamp order across both services (the order they were stamped).
    pub fn poll_released(&mut self) -> Option<(u64, Instant)> {
        let ts = |r: Option<(u64, Instant)>| r.map(|(_, ts)| ts);
        let sources = [
            self.released.front().map(|&(_, ts)| ts),
            ts(self.recovery.peek_released()),
            ts(self.sender.peek_released()),
        ];
        // The lowest timestamp; on a tie the earlier source (best effort, then recovery).
        let (_, source) = sources
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some(((*t)?, i)))
            .min()?;
        match source {
            0 => self.released.pop_front(),
            1 => self.recovery.poll_released(),
            _ => self.sender.poll_released(),
        }
    }

    /// As [`Endpoint::poll_released`], best-effort scatterings only (it does not touch the
    /// reliable sender's state, which a best-effort application would only pull into cache).
    pub fn poll_released_unreliable(&mut self) -> Option<(u64, Instant)> {
        self.released.pop_front()
    }

    pub fn reliable_sender(&self) -> &ReliableSender {
        &self.sender
    }
    pub fn reliable_receiver(&self) -> &ReliableReceiver {
        &self.receiver
    }
    pub fn prepared(&self) -> &ReorderBuffer {
        &self.prepared
    }
    /// The commit barrier this receiver has reached.
    pub fn commit_barrier(&self) -> Instant {
        self.commit
    }

    /// Whether reliable deliveries are held back whatever the commit barrier: the endpoint
    /// waits for its registration with the controller, or for a recovery's decision. While
    /// held, an application that polled every reliable message has not seen all those below
    /// the commit barrier (a server ordering best-effort reads after reliable writes must not
    /// go by it then).
    pub fn reliable_held(&self) -> bool {
        self.recovery.is_failed() || self.unregistered
    }

    /// Nothing of this process's traffic is on its way any more: no scattering waits to be
    /// sent or acknowledged, and no received message waits for a barrier. A run that stops
    /// while some process is not quiescent cuts off messages still in flight.
    pub fn is_quiescent(&self) -> bool {
        self.send_queue.is_empty()
            && self.sender.is_idle()
            && self.reorder.is_empty()
            && self.prepared.is_empty()
    }

    fn release(&mut self, now: Instant) {
        let clock = &mut self.clock;
        self.sender.release(|| clock.issue(now));
    }

    /// Our commit barrier for a packet leaving now (paper 5.1).
    fn outgoing_commit(&mut self, now: Instant) -> Instant {
        let floor = self.clock.issue_floor(now);
        self.sender.commit_barrier(floor)
    }

    /// The barrier for a packet leaving now: no higher than anything stamped and not yet sent,
    /// nor than any timestamp still to be issued (docs/ordering.md).
    fn outgoing_barrier(&mut self, now: Instant) -> Instant {
        let floor = self.clock.issue_floor(now);
        match self.send_queue.front().and_then(|s| s.ts) {
            Some(ts) => ts.min(floor),
            None => floor,
        }
    }

    /// Paper 5.2 Broadcast: the controller says `process` failed with failure timestamp
    /// `failure_ts`. Here, at once:
    /// - Discard: prepared messages from it with timestamps at or above `failure_ts` go, and so
    ///   do its incomplete ones; those below stay and are delivered when the commit barrier
    ///   passes them. Every later frame from it is dropped (counted in `from_failed`). (Its
    ///   commit barrier `failure_ts` promised only the messages *below* it acknowledged, as
    ///   every barrier here does; one at `failure_ts` may be missing at another receiver, and
    ///   none at or above it can have been delivered anywhere.)
    /// - Recall: scatterings of ours that it did not fully acknowledge are aborted, reported
    ///   through [`Endpoint::poll_event`] with [`FailureReason::ReceiverFailed`], and their
    ///   other messages recalled ([`ReliableSender::on_process_failed`]).
    /// - Callback: [`Endpoint::poll_event`] gives [`EndpointEvent::ProcessFailed`].
    ///
    /// Completion, for the controller's Resume: [`Endpoint::failure_complete`]. Sends naming the
    /// process are refused from now on ([`SendError::ProcessFailed`]). A repeated announcement
    /// changes nothing (the first timestamp stands; counted in `failures_repeated`); one about
    /// this process itself, or a process that does not exist, is refused.
    /// The controller rerouted around failed links: what timed out on them is sent again
    /// now, and timers start over from the measured RTO (their backoff was the dead path's,
    /// not congestion).
    pub fn on_paths_changed(&mut self, now: Instant) {
        self.sender.on_paths_changed(now);
    }

    pub fn on_process_failed(
        &mut self,
        now: Instant,
        process: u32,
        failure_ts: Instant,
    ) -> Result<(), ProcessFailureError> {
        if process == self.config.process {
            return Err(ProcessFailureError::OwnProcess(process));
        }
        if process >= self.config.process_count {
            return Err(ProcessFailureError::UnknownProcess(process));
        }
        if self.is_process_failed(process) {
            self.counters.failures_repeated += 1;
            return Ok(());
        }
        self.failed.push((process, failure_ts));
        let discarded = self.prepared.discard_from(process, failure_ts);
        self.counters.discarded += discarded as u64;
        self.tombstones.retain(|&(_, src)| src != process);
        self.receiver.close(process);
        self.sender.on_process_failed(process);
        // Credits of aborted scatterings went back: others may go.
        self.release(now);
        self.process_failures.push_back((process, failure_ts));
        Ok(())
    }

    /// Whether `process` was announced failed.
    pub fn is_process_failed(&self, process: u32) -> bool {
        self.failed.iter().any(|f| f.0 == process)
    }

    /// Processes announced failed, with their failure timestamps, in announcement order.
    pub fn failed_processes(&self) -> &[(u32, Instant)] {
        &self.failed
    }

    /// Whether this endpoint's part of handling `process`'s failure is done (paper 5.2: "Then,
    /// it responds controller with a completion message"): it was announced, Discard is done
    /// (at once), and every recall sent for it is acknowledged. False for a process not
    /// announced.
    /// Also, for Receiver Recovery, no scattering of ours naming it is still open: one that is
    /// may yet be aborted, and `process` would need that recall when it recovers.
    pub fn failure_complete(&self, process: u32) -> bool {
        self.is_process_failed(process) && self.handled(process)
    }

    fn handled(&self, process: u32) -> bool {
        self.sender.recall_complete(process) && !self.sender.has_open_to(process)
    }

    /// Paper Table 1 `onepipe_reliable_recv`: the next reliable message in (timestamp, sender)
    /// order once the commit barrier has passed it, lent to `f`.
    pub fn poll_deliver_reliable_with<R>(
        &mut self,
        f: impl FnOnce(Instant, u32, u64, &[u8]) -> R,
    ) -> Option<R> {
        if let Some(d) = self.recovery.poll_recovered() {
            self.clock.on_deliver(d.ts);
            self.counters.delivered += 1;
            return Some(f(d.ts, d.src, d.msg_id, &d.payload));
        }
        if self.recovery.is_failed() || self.unregistered {
            // Declared failed: the buffer waits for the recovery to say what goes. Not yet
            // registered: it waits for the failures the controller decided before.
            return None;
        }
        let limit = if self.config.ordering {
            self.commit
        } else {
            Instant::MAX
        };
        let (ts, src, packets, r) = self
            .prepared
            .pop_below_counted(limit, |ts, src, id, n, p| (ts, src, n, f(ts, src, id, p)))?;
        // The freed window is news worth an ACK at once (it carries no delay).
        self.receiver.on_delivered(Instant::ZERO, src, packets);
        self.clock.on_deliver(ts);
        self.counters.delivered += 1;
        Some(r)
    }

    /// As [`Endpoint::poll_deliver_reliable_with`], copying the message out.
    pub fn poll_deliver_reliable(&mut self) -> Option<Delivery> {
        self.poll_deliver_reliable_with(|ts, src, msg_id, p| Delivery {
            ts,
            src,
            msg_id,
            payload: p.to_vec(),
        })
    }

    fn delivery_limit(&self) -> Instant {
        // Unordered baseline: everything complete goes, in arrival order.
        if self.config.ordering {
            self.barrier
        } else {
            Instant::MAX
        }
    }

    /// Paper Table 1 `onepipe_unreliable_recv`: the next message in (timestamp, sender) order,
    /// once the barrier has passed it.
    pub fn poll_deliver(&mut self) -> Option<Delivery> {
        let r = self.reorder.pop_below(self.delivery_limit())?;
        self.clock.on_deliver(r.ts);
        self.counters.delivered += 1;
        Some(Delivery {
            ts: r.ts,
            src: r.src,
            msg_id: r.msg_id,
            payload: r.payload,
        })
    }

    /// As [`Endpoint::poll_deliver`], lending the message to `f` instead of copying it out.
    pub fn poll_deliver_with<R>(&mut self, f: impl FnOnce(Instant, u32, u64, &[u8]) -> R) -> Option<R> {
        let limit = self.delivery_limit();
        let (ts, r) = self
            .reorder
            .pop_below_with(limit, |ts, src, id, p| (ts, f(ts, src, id, p)))?;
        self.clock.on_deliver(ts);
        self.counters.delivered += 1;
        Some(r)
    }

    /// What the application is to hear besides its deliveries (paper Table 1's callbacks):
    /// each process the controller announced failed, then each message of ours that a receiver
    /// NAKed (best effort), that could not be delivered within the retry budget (reliable), or
    /// that a failure aborted (Recall). Each once.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        if let Some((process, ts)) = self.process_failures.pop_front() {
            return Some(EndpointEvent::ProcessFailed { process, ts });
        }
        self.failures
            .pop_front()
            .or_else(|| self.sender.poll_failure())
            .map(EndpointEvent::SendFailed)
    }

    /// When `handle_timeout` is next due, on the shared clock.
    pub fn poll_timeout(&self) -> Instant {
        let mut at = self.next_beacon_at;
        if let Some(rto) = self.sender.poll_timeout() {
            at = at.min(rto);
        }
        if let Some(ack) = self.ack_deadline() {
            at = at.min(ack);
        }
        at
    }

    /// When an ACK held for a ride must go on its own; `None` once a timeout has announced it
    /// (it goes at the next transmit opportunity, and a deadline left in the past would have
    /// a driver whose link is busy call back at once, forever).
    fn ack_deadline(&self) -> Option<Instant> {
        let at = self.receiver.ack_deadline(self.config.reliable.ack_delay_max)?;
        (at > self.acks_woken_at).then_some(at)
    }

    /// Beacons at synchronized times: at each multiple of the interval on the host clock
    /// (paper 4.2), unless data goes out first. The paper beacons only on links idle for a whole
    /// interval; a host that sends about once per interval would then never beacon, and its
    /// receivers would wait up to two intervals for its barrier to pass a message. Data queued
    /// at the tick goes first and carries a barrier as fresh as the beacon would.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.sender.on_timeout(now);
        if let Some(at) = self.ack_deadline()
            && at <= now
        {
            self.acks_woken_at = at;
        }
        if now < self.next_beacon_at {
            return;
        }
        // While a step back holds the clock, on its raw reading: the next multiple of the held
        // one is as far away as the step was long, and the link would fall silent past the
        // dead-link timeout (the beacon's barrier is the guarded floor, which never goes back).
        let reading = self.clock.schedule_reading(now);
        self.beacon_due = true;
        self.next_beacon_at = self
            .clock
            .to_shared(reading.next_multiple_of(self.config.beacon_interval));
    }
}

mod forward;
mod receive;
mod recovery;
mod transmit;
pub use recovery::{Recovery, RecoveryError, RecoveryReport};
pub(crate) use transmit::prepare_repr;

#[cfg(test)]
mod plausible_tests;
#[cfg(test)]
mod tests;
