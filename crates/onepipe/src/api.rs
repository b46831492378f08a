//! Paper Table 1 over the inproc runtime ([`OnePipe`]); the same [`Process`] handle serves a
//! process that joined a udp fabric (`crate::udp::join`).
//!
//! | paper                          | here                                   |
//! |--------------------------------|----------------------------------------|
//! | `onepipe_init()`               | [`OnePipe::start`], [`OnePipe::take_process`] |
//! | `onepipe_unreliable_send(vec)` | [`Process::send_unreliable`]           |
//! | `onepipe_unreliable_recv()`    | [`Process::recv`], [`Process::recv_timeout`] |
//! | `onepipe_send_fail_callback`   | [`Process::on_send_failure`]           |
//! | `onepipe_proc_fail_callback`   | [`Process::on_process_failure`]        |
//! | `onepipe_get_timestamp()`      | [`Process::timestamp`]                 |
//! | `onepipe_exit()`               | dropping the [`Process`]               |
//!
//! Message ids are assigned per process, in send order, from 0: the n-th successful
//! `send_unreliable` is message n, which is what a send-failure report names.

#![allow(clippy::disallowed_methods)] // application-facing blocking calls wait on real time

use crate::host::{AppLink, Command};
use crate::system::{self, Member, SystemConfig, SystemError};
use onepipe_fabric::{Topology, Wiring, WiringError};
use onepipe_proto::endpoint::{Delivery, EndpointConfig, SendError, SendFailure};
use onepipe_proto::hash::SplitMix;
use onepipe_proto::switch::SwitchConfig;
use onepipe_runtime::inproc::{Clock, InprocConfig, Runtime};
use onepipe_wire::packet::HEADER_LEN;
use onepipe_wire::{Duration, Instant};
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a system is built.
#[derive(Clone, Debug)]
pub struct Options {
    pub topology: Topology,
    pub processes_per_host: u32,
    pub beacon_interval: Duration,
    pub skew: Duration,
    pub seed: u64,
    pub workers: usize,
    /// Scatterings an application may have queued before `send_unreliable` reports backpressure.
    pub send_queue_max: usize,
    /// Delivered messages waiting for `recv`.
    pub recv_queue_max: usize,
    pub mtu_bytes: usize,
    pub message_bytes_max: usize,
    /// Input links silent this many beacon intervals are removed. Threads of one process can
    /// be descheduled for milliseconds on a busy machine, and a link removed while its sender
    /// is merely descheduled turns that sender's next messages into late drops; so the
    /// default is 250 ms at the default interval, not the paper's 10.
    pub dead_after_intervals: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            topology: Topology::paper_testbed(),
            processes_per_host: 1,
            beacon_interval: Duration::from_micros(50),
            skew: Duration::ZERO,
            seed: 1,
            workers: 2,
            send_queue_max: 1024,
            recv_queue_max: 65_536,
            mtu_bytes: 1500,
            message_bytes_max: 1 << 20,
            dead_after_intervals: 5_000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error(transparent)]
    System(#[from] SystemError),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TakeError {
    #[error("process {0} does not exist")]
    UnknownProcess(u32),
    #[error("process {0} was already taken")]
    AlreadyTaken(u32),
}

/// A running system: switches and endpoints on the inproc runtime.
pub struct OnePipe {
    runtime: Option<Runtime<Member<AppLink>>>,
    handles: Vec<Option<Process>>,
}

impl OnePipe {
    pub fn start(options: Options) -> Result<OnePipe, StartError> {
        let wiring = Wiring::new(options.topology.clone(), options.processes_per_host)?;
        let count = wiring.process_count() as u32;
        let clock = Clock::new(Instant::from_nanos(1_000_000_000));
        let mut rng = SplitMix::new(options.seed);
        let offsets: Vec<i64> = (0..count)
            .map(|_| rng.symmetric(options.skew.as_nanos()))
            .collect();
        let mut endpoint = EndpointConfig::new(0, count, 0);
        endpoint.beacon_interval = options.beacon_interval;
        endpoint.mtu_bytes = options.mtu_bytes;
        endpoint.message_bytes_max = options.message_bytes_max;
        endpoint.send_buffer_packets_max = endpoint
            .send_buffer_packets_max
            .max(count as usize * options.message_bytes_max.div_ceil(options.mtu_bytes - HEADER_LEN));
        endpoint.reliable.send_buffer_packets_max = endpoint.send_buffer_packets_max;
        let switch = SwitchConfig {
            beacon_interval: options.beacon_interval,
            dead_after_intervals: options.dead_after_intervals.max(1),
            ecmp_seed: options.seed,
            promise_lead: Duration::ZERO,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
        };
        let mut apps = Vec::with_capacity(count as usize);
        let mut handles = Vec::with_capacity(count as usize);
        for p in 0..count {
            let limits = HandleLimits {
                send_queue_max: options.send_queue_max,
                recv_queue_max: options.recv_queue_max,
                message_bytes_max: options.message_bytes_max,
                packets_max: endpoint.send_buffer_packets_max,
                fragment_bytes: options.mtu_bytes - HEADER_LEN,
                silent_max: switch.dead_after(),
            };
            let (app, process) = link(p, count, &limits, clock, offsets[p as usize]);
            apps.push(app);
            handles.push(Some(process));
        }
        let config = SystemConfig {
            switch,
            endpoint,
            inproc: InprocConfig {
                workers: options.workers.max(1),
                link_capacity_bytes: 64 * 1024,
                frame_max_bytes: options.mtu_bytes,
                ..InprocConfig::default()
            },
            link_delay: Duration::ZERO,
        };
        let runtime = system::start(&wiring, &config, apps, &offsets, clock)?;
        Ok(OnePipe {
            runtime: Some(runtime),
            handles,
        })
    }

    /// The handle of process `id` (once per process).
    pub fn take_process(&mut self, id: u32) -> Result<Process, TakeError> {
        let slot = self
            .handles
            .get_mut(id as usize)
            .ok_or(TakeError::UnknownProcess(id))?;
        slot.take().ok_or(TakeError::AlreadyTaken(id))
    }

    pub fn process_count(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for OnePipe {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.stop();
        }
    }
}

/// What an application handle may queue and send.
pub(crate) struct HandleLimits {
    pub send_queue_max: usize,
    pub recv_queue_max: usize,
    pub message_bytes_max: usize,
    /// Packets of the endpoint's send buffer: no scattering may need more.
    pub packets_max: usize,
    pub fragment_bytes: usize,
    /// Silence from the fabric past this means it is lost (`dead_after_intervals` beacon
    /// intervals: the rule switches apply to their links).
    pub silent_max: Duration,
}

/// The two ends of process `id`'s link between its application and its endpoint.
pub(crate) fn link(
    id: u32,
    process_count: u32,
    limits: &HandleLimits,
    clock: Clock,
    offset_ns: i64,
) -> (AppLink, Process) {
    let (cmd_tx, cmd_rx) = RingBuffer::new(limits.send_queue_max);
    let (del_tx, del_rx) = RingBuffer::new(limits.recv_queue_max);
    let (rel_tx, rel_rx) = RingBuffer::new(limits.recv_queue_max);
    let delivered_ts = Arc::new(AtomicU64::new(0));
    // Silence counts from now: a fabric that never answers is lost as one that stops.
    let heard_ns = Arc::new(AtomicU64::new(clock.now().as_nanos()));
    let app = AppLink {
        commands: cmd_rx,
        deliveries: del_tx,
        reliable_deliveries: rel_tx,
        on_failure: None,
        on_process_failure: None,
        delivered_ts: delivered_ts.clone(),
        heard_ns: heard_ns.clone(),
        refused: 0,
    };
    let process = Process {
        id,
        process_count,
        commands: cmd_tx,
        deliveries: del_rx,
        reliable_deliveries: rel_rx,
        clock,
        offset_ns,
        delivered_ts,
        heard_ns,
        silent_max: limits.silent_max,
        next_msg_id: 0,
        message_bytes_max: limits.message_bytes_max,
        packets_max: limits.packets_max,
        fragment_bytes: limits.fragment_bytes,
        runtime: None,
    };
    (app, process)
}

/// Stops a runtime thread that serves one handle when the handle goes (`onepipe_exit`).
pub(crate) struct StopOnDrop {
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One process's view of 1Pipe.
pub struct Process {
    id: u32,
    process_count: u32,
    commands: Producer<Command>,
    deliveries: Consumer<Delivery>,
    reliable_deliveries: Consumer<Delivery>,
    clock: Clock,
    offset_ns: i64,
    delivered_ts: Arc<AtomicU64>,
    heard_ns: Arc<AtomicU64>,
    silent_max: Duration,
    next_msg_id: u64,
    message_bytes_max: usize,
    packets_max: usize,
    fragment_bytes: usize,
    /// The endpoint's own runtime, for a process that joined a udp fabric; dropped last.
    pub(crate) runtime: Option<StopOnDrop>,
}

impl Process {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// How many processes the system has (ids `0..process_count`).
    pub fn process_count(&self) -> u32 {
        self.process_count
    }

    /// Sends one scattering: every message gets the same timestamp, and every receiver
    /// delivers it at the same position of the total order. Returns the message id.
    pub fn send_unreliable(&mut self, scatter: &[(u32, &[u8])]) -> Result<u64, SendError> {
        self.submit(scatter, false)
    }

    /// Paper Table 1 `onepipe_reliable_send`: as [`Process::send_unreliable`], but through
    /// loss: the scattering is delivered exactly once to each receiver (two-phase commit,
    /// paper 5.1), or the send-failure callback reports each message that could not be.
    /// Receivers take it with [`Process::recv_reliable`].
    pub fn send_reliable(&mut self, scatter: &[(u32, &[u8])]) -> Result<u64, SendError> {
        self.submit(scatter, true)
    }

    fn submit(&mut self, scatter: &[(u32, &[u8])], reliable: bool) -> Result<u64, SendError> {
        onepipe_proto::endpoint::check_destinations(scatter, self.process_count)?;
        let mut packets = 0;
        for &(_, msg) in scatter {
            if msg.len() > self.message_bytes_max {
                return Err(SendError::MessageTooLarge {
                    size: msg.len(),
                    max: self.message_bytes_max,
                });
            }
            packets += msg.len().div_ceil(self.fragment_bytes).max(1);
        }
        if packets > self.packets_max || self.commands.is_full() {
            return Err(SendError::BufferFull {
                queued: self.commands.buffer().capacity() - self.commands.slots(),
                max: self.commands.buffer().capacity(),
            });
        }
        let owned = scatter.iter().map(|&(d, m)| (d, m.to_vec())).collect();
        let cmd = if reliable {
            Command::SendReliable(owned)
        } else {
            Command::Send(owned)
        };
        self.commands
            .push(cmd)
            .map_err(|_| SendError::BufferFull { queued: 0, max: 0 })?;
        let id = self.next_msg_id;
        self.next_msg_id += 1;
        Ok(id)
    }

    /// The next delivered message, if one is ready.
    pub fn recv(&mut self) -> Option<Delivery> {
        self.deliveries.pop().ok()
    }

    /// Paper Table 1 `onepipe_reliable_recv`: the next reliable message, in the total order.
    pub fn recv_reliable(&mut self) -> Option<Delivery> {
        self.reliable_deliveries.pop().ok()
    }

    /// Waits up to `timeout` for the next delivered message. Spins briefly, then sleeps in
    /// short steps so that waiting applications leave the cores to the runtime's workers.
    pub fn recv_timeout(&mut self, timeout: std::time::Duration) -> Option<Delivery> {
        wait_pop(&mut self.deliveries, timeout)
    }

    /// As [`Process::recv_timeout`], for reliable messages.
    pub fn recv_reliable_timeout(&mut self, timeout: std::time::Duration) -> Option<Delivery> {
        wait_pop(&mut self.reliable_deliveries, timeout)
    }

    /// Registers the send-failure callback; it runs on a runtime worker, so keep it short.
    pub fn on_send_failure(&mut self, callback: impl FnMut(SendFailure) + Send + 'static) {
        self.register(Command::OnSendFailure(Box::new(callback)));
    }

    /// Paper Table 1 `onepipe_proc_fail_callback`: `callback(process, failure timestamp)` runs
    /// once for each process the controller declares failed, after this process has discarded
    /// its messages from the failure timestamp on and recalled the scatterings it had not
    /// acknowledged (paper 5.2). Sends naming a failed process are refused from then on, so an
    /// application leaves it out of later scatterings. It runs on the runtime's thread: keep
    /// it short. Failures announced before it is registered are not repeated.
    pub fn on_process_failure(&mut self, callback: impl FnMut(u32, Instant) + Send + 'static) {
        self.register(Command::OnProcessFailure(Box::new(callback)));
    }

    /// Hands a callback registration to the runtime: a full command queue only delays it
    /// until there is room.
    fn register(&mut self, mut cmd: Command) {
        loop {
            match self.commands.push(cmd) {
                Ok(()) => return,
                Err(rtrb::PushError::Full(c)) => {
                    cmd = c;
                    std::thread::yield_now();
                }
            }
        }
    }

    /// How long since this process last heard from the fabric: any valid frame from its
    /// switch (data, ACK or beacon). Switches beacon every interval, so on a live fabric this
    /// stays below a few intervals even when nobody sends.
    pub fn fabric_silence(&self) -> std::time::Duration {
        let heard = self.heard_ns.load(Ordering::Relaxed);
        std::time::Duration::from_nanos(self.clock.now().as_nanos().saturating_sub(heard))
    }

    /// `Err` once the fabric has been silent for longer than the switches wait before they
    /// declare a link dead (`dead_after_intervals` beacon intervals): this process's switch,
    /// or the link to it, is down, and nothing will be delivered until it returns. A process
    /// waiting for messages should check this rather than wait on in silence.
    pub fn check_fabric(&self) -> Result<(), FabricLost> {
        let silent = self.fabric_silence();
        let limit = std::time::Duration::from_nanos(self.silent_max.as_nanos());
        if silent > limit {
            return Err(FabricLost { silent, limit });
        }
        Ok(())
    }

    /// The host clock now: above every timestamp this process has delivered, and at or above
    /// its promise (docs/ordering.md, "Promises") as of its endpoint's last visit.
    pub fn timestamp(&self) -> Instant {
        let ns = self.clock.now().as_nanos() as i128 + self.offset_ns as i128;
        let host = Instant::from_nanos(ns.max(0) as u64);
        host.max(Instant::from_nanos(self.delivered_ts.load(Ordering::Relaxed) + 1))
    }
}

/// A process has heard nothing from its switch for longer than a live one stays silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "nothing heard from the fabric for {} ms (a live switch beacons far more often; the limit is {} ms): \
     this process's switch or its link is down",
    silent.as_millis(),
    limit.as_millis()
)]
pub struct FabricLost {
    pub silent: std::time::Duration,
    pub limit: std::time::Duration,
}

/// Pops from `ring`, waiting up to `timeout`: spins briefly, then sleeps in short steps.
fn wait_pop(ring: &mut Consumer<Delivery>, timeout: std::time::Duration) -> Option<Delivery> {
    const SPINS: u32 = 64;
    const NAP: std::time::Duration = std::time::Duration::from_micros(50);
    let deadline = std::time::Instant::now() + timeout;
    let mut tries = 0u32;
    loop {
        if let Ok(d) = ring.pop() {
            return Some(d);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        tries += 1;
        if tries < SPINS {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(NAP);
        }
    }
}
