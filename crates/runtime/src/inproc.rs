//! The inproc runtime: a whole topology inside one OS process.
//!
//! Nodes are spread over a small pool of worker threads (one per core, never one per node).
//! Every directed link is a bounded single-producer single-consumer byte ring holding frames
//! `[len: u16][ready_at_ns: u64][bytes]`; a frame becomes visible to the receiver at
//! `ready_at_ns`, which models propagation delay. Rings are FIFO, so links are FIFO, which is
//! all that 1Pipe's barrier aggregation needs (paper section 4.1). There are no priority
//! classes here: [`onepipe_fabric::Hints::priority`] is ignored, and every frame waits behind
//! the ones written before it (the simulator serves classes by strict priority).
//!
//! The fabric is lossless: when the ring of the port a frame must leave on is full, the frame
//! waits in its input ring and the input stalls behind it, as with PFC in the paper's RoCE
//! testbed. Up/down routing has no cyclic buffer dependency, so this cannot deadlock.

#![allow(clippy::disallowed_methods)] // the runtime is where the OS clock and sleeping live

use onepipe_fabric::hash::SplitMix;
use onepipe_fabric::node::{FRAME_MAX, Node, PortId, Route};
use onepipe_wire::{Duration, Instant};
use rtrb::{Consumer, Producer, RingBuffer};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

const FRAME_HEADER_LEN: usize = 10;
/// Frames taken from one input ring per visit, so one busy link cannot starve the rest.
const INPUT_BUDGET_FRAMES: usize = 32;
/// Frames a node may originate on one port per visit.
const OUTPUT_BUDGET_FRAMES: usize = 32;
/// Empty passes over a worker's nodes before the worker yields its core.
const IDLE_PASSES_BEFORE_YIELD: u32 = 64;

/// The shared time source: the OS monotonic clock, shifted to start at `start`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
    start: Instant,
}

impl Clock {
    pub fn new(start: Instant) -> Clock {
        Clock {
            origin: std::time::Instant::now(),
            start,
        }
    }

    /// The system clock, as nanoseconds since the Unix epoch, read once and then advanced by
    /// the monotonic clock (so it never steps). Processes that each start one agree to within
    /// how well the system clock is synchronized: on one machine, exactly; across machines, as
    /// well as PTP or chrony keep them (1Pipe's skew adds to its latency, not to its order).
    pub fn from_system_time() -> Clock {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock::new(Instant::from_nanos(unix))
    }

    pub fn now(&self) -> Instant {
        self.start + Duration::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// This clock, `offset_ns` ahead (behind if negative): a machine whose clock is off, for
    /// tests of skew.
    pub fn shifted(self, offset_ns: i64) -> Clock {
        let start = (self.start.as_nanos() as i128 + offset_ns as i128).max(0) as u64;
        Clock {
            start: Instant::from_nanos(start),
            ..self
        }
    }
}

pub use onepipe_fabric::wiring::DirectedLink as LinkSpec;

#[derive(Clone, Debug)]
pub struct InprocConfig {
    pub workers: usize,
    /// Capacity of each link's ring in bytes.
    pub link_capacity_bytes: usize,
    /// Largest frame any node originates or forwards; a port takes output only when it has
    /// room for one of these.
    pub frame_max_bytes: usize,
    /// Faults injected on every link (there is no netem here: we break our own links).
    pub faults: LinkFaults,
    /// Serialization rate of every link in bits per second; `None` is infinitely fast. With a
    /// rate, frames queue in the link's ring and the ECN threshold means something.
    pub link_bits_per_s: Option<u64>,
    /// On links with a rate (`link_bits_per_s`), frames forwarded into a ring holding more
    /// than this are offered to [`Node::mark_congestion`].
    pub ecn_threshold_bytes: usize,
    /// Nodes with a single link (hosts) are visited once in this many passes of their worker,
    /// or at once when their input ring is half full; switches, every pass. 1 visits every
    /// node on every pass; 0 chooses: 2 where there are several switches, 1 with one.
    ///
    /// A host visit that finds a few frames costs mostly its fixed part (its rings, timers,
    /// application). Where every message crosses several switches, visiting hosts every
    /// other pass gave reliable 1Pipe ~5% more throughput and cut saturated latency by ~30%
    /// in both services (the testbed fat-tree); behind a single switch, where hosts do most
    /// of the work, it cost every system ~5% (docs/notes/2026-11-performance-log.md).
    pub edge_visit_interval_passes: u32,
}

/// Seeded per-link faults. Jitter never lets a frame pass the one before; only `reorder` does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkFaults {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Extra delay, uniform in [0, jitter).
    pub jitter: Duration,
    /// Probability that a frame is held back and written after the next frame on its link
    /// (or after `REORDER_HOLD` if none comes): links stop being FIFO, to exercise late drops
    /// and NAKs (paper 4.1).
    pub reorder: f64,
    pub seed: u64,
}

/// Longest a held-back frame waits for a frame to pass it.
const REORDER_HOLD: Duration = Duration::from_micros(50);

impl LinkFaults {
    fn active(&self) -> bool {
        self.loss > 0.0 || self.duplicate > 0.0 || self.jitter > Duration::ZERO || self.reorder > 0.0
    }
}

/// What the runtime did to frames on purpose, summed over links.
#[derive(Debug, Default)]
pub struct FaultCounters {
    pub dropped: AtomicU64,
    /// Frames lost to failed links and crashed nodes.
    pub failed: AtomicU64,
    pub duplicated: AtomicU64,
    pub reordered: AtomicU64,
    pub ecn_marked: AtomicU64,
    /// On links with a rate ([`InprocConfig::link_bits_per_s`]): the most bytes still to
    /// serialize ahead of a frame a switch (a node that is not an edge node) wrote, when it
    /// wrote it. The largest switch queue, as far as FIFO links can tell (every class at once).
    pub peak_switch_backlog_bytes: AtomicU64,
}

impl Default for InprocConfig {
    fn default() -> InprocConfig {
        InprocConfig {
            workers: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            link_capacity_bytes: 64 * 1024,
            frame_max_bytes: 1500,
            faults: LinkFaults::default(),
            link_bits_per_s: None,
            ecn_threshold_bytes: usize::MAX,
            edge_visit_interval_passes: 0,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InprocError {
    #[error("link from node {node} port {port} is declared twice")]
    DuplicateOutput { node: usize, port: PortId },
    #[error("link into node {node} port {port} is declared twice")]
    DuplicateInput { node: usize, port: PortId },
    #[error("link names node {0}, which does not exist")]
    UnknownNode(usize),
    #[error("node {node} is assigned to worker {worker}, but there are {workers} workers")]
    BadAssignment {
        node: usize,
        worker: usize,
        workers: usize,
    },
    #[error("link capacity {capacity} bytes cannot hold one frame of {frame} bytes")]
    CapacityTooSmall { capacity: usize, frame: usize },
    #[error("frame_max_bytes must be between 64 and {FRAME_MAX}")]
    BadFrameMax,
    #[error("a worker thread could not be started: {0}")]
    Spawn(String),
}

struct Output {
    ring: Producer<u8>,
    delay: Duration,
    /// Failed on purpose ([`Runtime::fail_link`]): everything written is lost.
    down: Arc<AtomicBool>,
    /// Seeded stream for this link's faults.
    rng: SplitMix,
    /// Ready time of the last frame written: jitter never goes below it (FIFO).
    last_ready: Instant,
    /// The link serializes until then.
    busy_until: Instant,
    /// Written by a switch: its backlog counts toward
    /// [`FaultCounters::peak_switch_backlog_bytes`].
    from_switch: bool,
    /// A frame held back (header and bytes) to be written after the next one; empty if none.
    held: Vec<u8>,
    held_since: Instant,
}

/// How every output writes frames: faults, serialization, ECN.
#[derive(Clone)]
struct LinkModel {
    faults: LinkFaults,
    bits_per_s: Option<u64>,
    ecn_threshold_bytes: usize,
    capacity_bytes: usize,
    counters: Arc<FaultCounters>,
}

impl Output {
    /// Bytes queued in the ring now.
    fn queued_bytes(&self, model: &LinkModel) -> usize {
        model.capacity_bytes - self.ring.slots()
    }

    /// Writes the frame in `scratch[FRAME_HEADER_LEN..][..len]` (room for one frame was
    /// checked), applying the link model.
    fn send(&mut self, model: &LinkModel, scratch: &mut [u8], len: usize, now: Instant) {
        if self.down.load(Ordering::Relaxed) {
            model.counters.failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut copies = 1;
        let mut ready = now;
        if let Some(bps) = model.bits_per_s {
            if self.from_switch {
                let ahead_ns = self.busy_until.saturating_since(now).as_nanos() as u128;
                let ahead_bytes = (ahead_ns * bps as u128 / 8_000_000_000) as u64;
                model
                    .counters
                    .peak_switch_backlog_bytes
                    .fetch_max(ahead_bytes, Ordering::Relaxed);
            }
            let start = now.max(self.busy_until);
            let wire_ns = (len as u64 * 8).saturating_mul(1_000_000_000) / bps.max(1);
            self.busy_until = start + Duration::from_nanos(wire_ns);
            ready = self.busy_until;
        }
        ready += self.delay;
        if model.faults.active() {
            if self.rng.chance(model.faults.loss) {
                model.counters.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if self.rng.chance(model.faults.duplicate) && self.ring.slots() >= 2 * (FRAME_HEADER_LEN + len) {
                model.counters.duplicated.fetch_add(1, Ordering::Relaxed);
                copies = 2;
            }
            let jitter = model.faults.jitter.as_nanos();
            if jitter > 0 {
                ready += Duration::from_nanos(self.rng.next_u64() % jitter);
            }
            ready = ready.max(self.last_ready);
            if self.held.is_empty() && self.rng.chance(model.faults.reorder) {
                model.counters.reordered.fetch_add(1, Ordering::Relaxed);
                write_frame_header(scratch, len, ready);
                self.held.extend_from_slice(&scratch[..FRAME_HEADER_LEN + len]);
                self.held_since = now;
                return;
            }
        }
        self.last_ready = ready;
        write_frame_header(scratch, len, ready);
        for _ in 0..copies {
            self.ring
                .write_all(&scratch[..FRAME_HEADER_LEN + len])
                .expect("room was checked");
        }
        self.release_held();
    }

    /// Writes the held-back frame behind what went before it, if the ring has room.
    fn release_held(&mut self) {
        if self.held.is_empty() || self.ring.slots() < self.held.len() {
            return;
        }
        // It becomes visible no earlier than the frame that passed it (rings are read in order).
        let ready = Instant::from_nanos(u64::from_le_bytes(self.held[2..10].try_into().expect("8 bytes")))
            .max(self.last_ready);
        self.held[2..10].copy_from_slice(&ready.as_nanos().to_le_bytes());
        self.last_ready = ready;
        self.ring.write_all(&self.held).expect("room was checked");
        self.held.clear();
    }
}

/// One node and its rings.
struct Slot<N> {
    index: usize,
    node: N,
    inputs: Vec<(PortId, Consumer<u8>)>,
    outputs: Vec<Option<Output>>,
    /// Input served first on the next visit: rotates so that inputs competing for a full
    /// output take turns (round-robin arbitration).
    first_input: usize,
    /// One link in and one out: a host (see [`InprocConfig::edge_visit_interval_passes`]).
    edge: bool,
}

/// A running topology. Dropping it without [`Runtime::stop`] stops the workers too.
pub struct Runtime<N: Node + 'static> {
    stop: Arc<AtomicBool>,
    /// Per node: crashed on purpose ([`Runtime::crash`]).
    crashed: Arc<Vec<AtomicBool>>,
    /// Per output (node, port): failed on purpose.
    links_down: std::collections::HashMap<(usize, PortId), Arc<AtomicBool>>,
    fault_counters: Arc<FaultCounters>,
    workers: Vec<JoinHandle<Vec<Slot<N>>>>,
    node_count: usize,
}

impl<N: Node + 'static> Runtime<N> {
    /// Starts `nodes` connected by `links`; `worker_of[i]` is the worker that runs node `i`.
    pub fn start(
        nodes: Vec<N>,
        links: &[LinkSpec],
        worker_of: &[usize],
        config: &InprocConfig,
        clock: Clock,
    ) -> Result<Runtime<N>, InprocError> {
        if !(64..=FRAME_MAX).contains(&config.frame_max_bytes) {
            return Err(InprocError::BadFrameMax);
        }
        let frame_room = FRAME_HEADER_LEN + config.frame_max_bytes;
        if config.link_capacity_bytes < frame_room {
            return Err(InprocError::CapacityTooSmall {
                capacity: config.link_capacity_bytes,
                frame: config.frame_max_bytes,
            });
        }
        let node_count = nodes.len();
        let mut links_down = std::collections::HashMap::new();
        let mut slots: Vec<Slot<N>> = nodes
            .into_iter()
            .enumerate()
            .map(|(index, node)| Slot {
                index,
                node,
                inputs: Vec::new(),
                outputs: Vec::new(),
                first_input: 0,
                edge: false,
            })
            .collect();
        for l in links {
            let (fnode, fport) = l.from;
            let (tnode, tport) = l.to;
            if fnode >= node_count {
                return Err(InprocError::UnknownNode(fnode));
            }
            if tnode >= node_count {
                return Err(InprocError::UnknownNode(tnode));
            }
            let (producer, consumer) = RingBuffer::new(config.link_capacity_bytes);
            let outs = &mut slots[fnode].outputs;
            if outs.len() <= fport as usize {
                outs.resize_with(fport as usize + 1, || None);
            }
            if outs[fport as usize].is_some() {
                return Err(InprocError::DuplicateOutput {
                    node: fnode,
                    port: fport,
                });
            }
            let down = Arc::new(AtomicBool::new(false));
            links_down.insert((fnode, fport), down.clone());
            outs[fport as usize] = Some(Output {
                ring: producer,
                delay: l.delay,
                down,
                rng: SplitMix::new(
                    config.faults.seed
                        ^ ((fnode as u64) << 32 | fport as u64).wrapping_mul(0x2545_f491_4f6c_dd1d),
                ),
                last_ready: Instant::ZERO,
                busy_until: Instant::ZERO,
                from_switch: false,
                held: Vec::new(),
                held_since: Instant::ZERO,
            });
            if slots[tnode].inputs.iter().any(|(p, _)| *p == tport) {
                return Err(InprocError::DuplicateInput {
                    node: tnode,
                    port: tport,
                });
            }
            slots[tnode].inputs.push((tport, consumer));
        }
        for slot in &mut slots {
            slot.edge = slot.inputs.len() == 1 && slot.outputs.iter().flatten().count() == 1;
            for o in slot.outputs.iter_mut().flatten() {
                o.from_switch = !slot.edge;
            }
        }
        let edge_interval = match config.edge_visit_interval_passes {
            0 if slots.iter().filter(|s| !s.edge).count() > 1 => 2,
            0 => 1,
            n => n as usize,
        };
        let workers = config.workers.max(1);
        let mut per_worker: Vec<Vec<Slot<N>>> = (0..workers).map(|_| Vec::new()).collect();
        for slot in slots.into_iter().rev() {
            let w = worker_of.get(slot.index).copied().unwrap_or(slot.index % workers);
            if w >= workers {
                return Err(InprocError::BadAssignment {
                    node: slot.index,
                    worker: w,
                    workers,
                });
            }
            per_worker[w].push(slot);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let crashed: Arc<Vec<AtomicBool>> =
            Arc::new((0..node_count).map(|_| AtomicBool::new(false)).collect());
        let fault_counters = Arc::new(FaultCounters::default());
        let model = LinkModel {
            faults: config.faults.clone(),
            bits_per_s: config.link_bits_per_s,
            ecn_threshold_bytes: config.ecn_threshold_bytes,
            capacity_bytes: config.link_capacity_bytes,
            counters: fault_counters.clone(),
        };
        let mut handles = Vec::with_capacity(workers);
        for (w, mut mine) in per_worker.into_iter().enumerate() {
            mine.reverse();
            let stop = stop.clone();
            let crashed = crashed.clone();
            let pacing = Pacing {
                frame_max: config.frame_max_bytes,
                edge_interval,
                edge_backlog_bytes: config.link_capacity_bytes / 2,
            };
            let model = model.clone();
            let handle = std::thread::Builder::new()
                .name(format!("onepipe-worker-{w}"))
                .spawn(move || worker_loop(mine, &stop, &crashed, clock, pacing, &model))
                .map_err(|e| InprocError::Spawn(e.to_string()))?;
            handles.push(handle);
        }
        Ok(Runtime {
            stop,
            crashed,
            links_down,
            fault_counters,
            workers: handles,
            node_count,
        })
    }

    /// Crashes `node` (fault injection): it is never run again, and frames reaching it are
    /// lost. Returns false for a node that does not exist.
    pub fn crash(&self, node: usize) -> bool {
        let Some(c) = self.crashed.get(node) else {
            return false;
        };
        c.store(true, Ordering::Relaxed);
        true
    }

    /// Fails the link leaving `node` at `port` (fault injection): frames written to it from now
    /// on are lost. Returns false if there is no such link.
    pub fn fail_link(&self, node: usize, port: PortId) -> bool {
        let Some(down) = self.links_down.get(&(node, port)) else {
            return false;
        };
        down.store(true, Ordering::Relaxed);
        true
    }

    /// Frames the link model dropped, duplicated and ECN-marked so far.
    pub fn fault_counters(&self) -> &FaultCounters {
        &self.fault_counters
    }

    /// Stops the workers and hands the nodes back in their original order.
    pub fn stop(mut self) -> Vec<N> {
        self.stop.store(true, Ordering::Release);
        let mut all: Vec<Slot<N>> = Vec::with_capacity(self.node_count);
        for h in self.workers.drain(..) {
            match h.join() {
                Ok(slots) => all.extend(slots),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all.sort_by_key(|s| s.index);
        all.into_iter().map(|s| s.node).collect()
    }
}

impl<N: Node + 'static> Drop for Runtime<N> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// How a worker schedules its visits.
#[derive(Clone, Copy, Debug)]
struct Pacing {
    frame_max: usize,
    /// [`InprocConfig::edge_visit_interval_passes`], at least 1.
    edge_interval: usize,
    /// An edge node whose input ring holds this much is visited on any pass.
    edge_backlog_bytes: usize,
}

fn worker_loop<N: Node>(
    mut slots: Vec<Slot<N>>,
    stop: &AtomicBool,
    crashed: &[AtomicBool],
    clock: Clock,
    pacing: Pacing,
    model: &LinkModel,
) -> Vec<Slot<N>> {
    let mut scratch = vec![0u8; FRAME_HEADER_LEN + FRAME_MAX];
    let mut idle_passes = 0u32;
    let mut pass = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let mut worked = false;
        pass = pass.wrapping_add(1);
        // The clock is read per visit, not once per pass: frames are stamped with the writer's
        // time, and a reader on the other worker whose pass began earlier would see them as not
        // yet arrived and leave them for a whole pass (measured: about a third less throughput).
        for slot in &mut slots {
            // Edge nodes take turns by index, so that each pass visits a share of them.
            if slot.edge
                && (pass + slot.index) % pacing.edge_interval != 0
                && slot.inputs[0].1.slots() < pacing.edge_backlog_bytes
            {
                continue;
            }
            worked |= if crashed[slot.index].load(Ordering::Relaxed) {
                discard_inputs(slot, model)
            } else {
                visit(slot, clock.now(), &mut scratch, pacing.frame_max, model)
            };
        }
        if worked {
            idle_passes = 0;
        } else {
            idle_passes += 1;
            if idle_passes >= IDLE_PASSES_BEFORE_YIELD {
                std::thread::yield_now();
            }
        }
    }
    slots
}

/// Copies `len` bytes at `offset` of a ring chunk split in two slices.
fn copy_out(a: &[u8], b: &[u8], offset: usize, dst: &mut [u8]) {
    let len = dst.len();
    if offset + len <= a.len() {
        dst.copy_from_slice(&a[offset..offset + len]);
    } else if offset >= a.len() {
        let o = offset - a.len();
        dst.copy_from_slice(&b[o..o + len]);
    } else {
        let first = a.len() - offset;
        dst[..first].copy_from_slice(&a[offset..]);
        dst[first..].copy_from_slice(&b[..len - first]);
    }
}

fn write_frame_header(buf: &mut [u8], len: usize, ready_at: Instant) {
    buf[0..2].copy_from_slice(&(len as u16).to_le_bytes());
    buf[2..10].copy_from_slice(&ready_at.as_nanos().to_le_bytes());
}

/// A crashed node's visit: what reaches it is lost (keeping its rings empty, so that its
/// neighbours are not held back by a full link).
fn discard_inputs<N>(slot: &mut Slot<N>, model: &LinkModel) -> bool {
    let mut worked = false;
    for (_, ring) in &mut slot.inputs {
        let available = ring.slots();
        if available == 0 {
            continue;
        }
        let Ok(chunk) = ring.read_chunk(available) else {
            continue;
        };
        let (a, b) = chunk.as_slices();
        let mut offset = 0;
        while available - offset >= FRAME_HEADER_LEN {
            let mut header = [0u8; FRAME_HEADER_LEN];
            copy_out(a, b, offset, &mut header);
            offset += FRAME_HEADER_LEN + u16::from_le_bytes([header[0], header[1]]) as usize;
            model.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        chunk.commit(offset.min(available));
        worked = true;
    }
    worked
}

/// Runs one node for one visit: inputs, timers, outputs. Returns whether anything happened.
fn visit<N: Node>(
    slot: &mut Slot<N>,
    now: Instant,
    scratch: &mut [u8],
    frame_max: usize,
    model: &LinkModel,
) -> bool {
    let mut worked = false;
    let Slot {
        node,
        inputs,
        outputs,
        first_input,
        ..
    } = slot;
    let input_count = inputs.len();
    if input_count > 0 {
        *first_input = (*first_input + 1) % input_count;
    }
    for k in 0..input_count {
        let (port, ring) = &mut inputs[(*first_input + k) % input_count];
        let available = ring.slots();
        if available < FRAME_HEADER_LEN {
            continue;
        }
        let Ok(chunk) = ring.read_chunk(available) else {
            continue;
        };
        let (a, b) = chunk.as_slices();
        let mut offset = 0;
        for _ in 0..INPUT_BUDGET_FRAMES {
            if available - offset < FRAME_HEADER_LEN {
                break;
            }
            let mut header = [0u8; FRAME_HEADER_LEN];
            copy_out(a, b, offset, &mut header);
            let len = u16::from_le_bytes([header[0], header[1]]) as usize;
            let ready_at =
                Instant::from_nanos(u64::from_le_bytes(header[2..10].try_into().expect("8 bytes")));
            if ready_at > now {
                break;
            }
            let frame = &mut scratch[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
            copy_out(a, b, offset + FRAME_HEADER_LEN, frame);
            let route = node.classify(now, *port, frame);
            if let Route::Forward(out) = route {
                match outputs.get(out as usize) {
                    Some(Some(o)) if o.ring.slots() >= FRAME_HEADER_LEN + len => {}
                    // Full output: the frame waits here (lossless fabric).
                    Some(Some(_)) => {
                        node.handle_stalled(now, *port, frame);
                        break;
                    }
                    // No link on that port: let the node count the drop.
                    _ => {
                        node.handle_frame(now, *port, frame, Route::Drop);
                        offset += FRAME_HEADER_LEN + len;
                        continue;
                    }
                }
            }
            node.handle_frame(now, *port, frame, route);
            offset += FRAME_HEADER_LEN + len;
            worked = true;
            if let Route::Forward(out) = route {
                let o = outputs[out as usize].as_mut().expect("checked above");
                // Without a link rate a ring's fill is the next worker's backlog (backpressure
                // in a lossless fabric), not a queue behind a bandwidth: nothing to mark.
                if model.bits_per_s.is_some() && o.queued_bytes(model) > model.ecn_threshold_bytes {
                    node.mark_congestion(frame);
                    model.counters.ecn_marked.fetch_add(1, Ordering::Relaxed);
                }
                o.send(model, scratch, len, now);
            }
        }
        chunk.commit(offset);
    }
    if node.poll_timeout().is_some_and(|t| t <= now) {
        node.handle_timeout(now);
        worked = true;
    }
    for o in outputs.iter_mut().flatten() {
        if !o.held.is_empty() && now.saturating_since(o.held_since) >= REORDER_HOLD {
            o.release_held();
        }
    }
    worked |= originate(
        node,
        outputs,
        now,
        scratch,
        frame_max,
        model,
        OUTPUT_BUDGET_FRAMES,
    );
    let closing = node.end_visit(now);
    if closing > 0 {
        // Exactly the frames that close the visit; more would belong to the next.
        worked |= originate(node, outputs, now, scratch, frame_max, model, closing);
    }
    worked
}

/// Lets `node` originate up to `budget` frames on each output with room for one.
fn originate<N: Node>(
    node: &mut N,
    outputs: &mut [Option<Output>],
    now: Instant,
    scratch: &mut [u8],
    frame_max: usize,
    model: &LinkModel,
    budget: usize,
) -> bool {
    let mut worked = false;
    for (port, o) in outputs.iter_mut().enumerate() {
        let Some(o) = o else { continue };
        for _ in 0..budget {
            if o.ring.slots() < FRAME_HEADER_LEN + frame_max {
                break;
            }
            let Some(len) = node.poll_transmit(now, port as PortId, &mut scratch[FRAME_HEADER_LEN..]) else {
                break;
            };
            assert!(
                len <= frame_max,
                "node emitted a {len}-byte frame; frame_max_bytes is {frame_max}"
            );
            o.send(model, scratch, len, now);
            worked = true;
        }
    }
    worked
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_fabric::Hints;
    use std::sync::atomic::AtomicU64;

    /// Sends `count` numbered frames on port 0 and records what arrives.
    struct Pinger {
        next: u64,
        count: u64,
        received: Arc<AtomicU64>,
        in_order: Arc<AtomicBool>,
        expect: u64,
    }

    impl Node for Pinger {
        fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
            Route::Consume
        }
        fn handle_frame(&mut self, _: Instant, _: PortId, frame: &mut [u8], _: Route) {
            let v = u64::from_le_bytes(frame[..8].try_into().unwrap());
            if v != self.expect {
                self.in_order.store(false, Ordering::Relaxed);
            }
            self.expect = v + 1;
            self.received.fetch_add(1, Ordering::Relaxed);
        }
        fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
            if self.next == self.count {
                return None;
            }
            buf[..8].copy_from_slice(&self.next.to_le_bytes());
            buf[8..100].fill(0xab);
            self.next += 1;
            Some(100)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }

    impl Hints for Pinger {}

    /// A two-port relay that forwards everything from one port to the other.
    struct Relay;

    impl Node for Relay {
        fn classify(&self, _: Instant, port: PortId, _: &[u8]) -> Route {
            Route::Forward(1 - port)
        }
        fn handle_frame(&mut self, _: Instant, _: PortId, _: &mut [u8], _: Route) {}
        fn poll_transmit(&mut self, _: Instant, _: PortId, _: &mut [u8]) -> Option<usize> {
            None
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }

    impl Hints for Relay {}

    enum TestNode {
        P(Pinger),
        R(Relay),
    }

    impl Node for TestNode {
        fn classify(&self, now: Instant, port: PortId, f: &[u8]) -> Route {
            match self {
                TestNode::P(n) => n.classify(now, port, f),
                TestNode::R(n) => n.classify(now, port, f),
            }
        }
        fn handle_frame(&mut self, now: Instant, port: PortId, f: &mut [u8], r: Route) {
            match self {
                TestNode::P(n) => n.handle_frame(now, port, f, r),
                TestNode::R(n) => n.handle_frame(now, port, f, r),
            }
        }
        fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
            match self {
                TestNode::P(n) => n.poll_transmit(now, port, buf),
                TestNode::R(n) => n.poll_transmit(now, port, buf),
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }

    impl Hints for TestNode {}

    /// Pinger (sending `count` frames) -> relay on the other worker -> receiver, through
    /// small rings, each link `delay` long. Returns the runtime, frames received and whether
    /// they came in order.
    fn relay_chain(count: u64, d: Duration) -> (Runtime<TestNode>, Arc<AtomicU64>, Arc<AtomicBool>) {
        let received = Arc::new(AtomicU64::new(0));
        let in_order = Arc::new(AtomicBool::new(true));
        let pinger = |count| Pinger {
            next: 0,
            count,
            received: received.clone(),
            in_order: in_order.clone(),
            expect: 0,
        };
        let nodes = vec![
            TestNode::P(pinger(count)),
            TestNode::R(Relay),
            TestNode::P(pinger(0)),
        ];
        let links = [
            LinkSpec {
                from: (0, 0),
                to: (1, 0),
                delay: d,
            },
            LinkSpec {
                from: (1, 1),
                to: (2, 0),
                delay: d,
            },
        ];
        let config = InprocConfig {
            workers: 2,
            link_capacity_bytes: 2048,
            frame_max_bytes: 128,
            ..InprocConfig::default()
        };
        let rt = Runtime::start(nodes, &links, &[0, 1, 0], &config, Clock::new(Instant::ZERO)).unwrap();
        (rt, received, in_order)
    }

    /// Frames cross a relay on another worker through small rings: FIFO, none lost, none
    /// duplicated, even though the rings fill up and the relay stalls on backpressure.
    #[test]
    fn lossless_fifo_through_a_relay_under_backpressure() {
        let count = 20_000;
        let (rt, received, in_order) = relay_chain(count, Duration::from_micros(1));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while received.load(Ordering::Relaxed) < count && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        rt.stop();
        assert_eq!(received.load(Ordering::Relaxed), count);
        assert!(in_order.load(Ordering::Relaxed));
    }

    /// The relay chain with the pinger sending for ever; failures injected by `fail`.
    fn run_until_failed(fail: impl FnOnce(&Runtime<TestNode>)) {
        let (rt, received, _) = relay_chain(u64::MAX, Duration::ZERO);
        let wait = |n: u64, what: &dyn Fn() -> u64| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while what() < n && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
        };
        wait(1_000, &|| received.load(Ordering::Relaxed));
        fail(&rt);
        // Frames already past the failure may still arrive; then nothing does, while the
        // sender goes on (the failure loses its frames instead of holding it back).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (before, lost) = (
            received.load(Ordering::Relaxed),
            rt.fault_counters().failed.load(Ordering::Relaxed),
        );
        wait(lost + 10_000, &|| {
            rt.fault_counters().failed.load(Ordering::Relaxed)
        });
        assert!(rt.fault_counters().failed.load(Ordering::Relaxed) >= lost + 10_000);
        assert_eq!(received.load(Ordering::Relaxed), before);
        rt.stop();
    }

    #[test]
    fn a_crashed_node_loses_what_reaches_it_without_holding_back_its_neighbours() {
        run_until_failed(|rt| assert!(rt.crash(1)));
    }

    #[test]
    fn a_failed_link_loses_what_is_written_to_it() {
        run_until_failed(|rt| {
            assert!(rt.fail_link(0, 0));
            assert!(!rt.fail_link(0, 5));
        });
    }

    /// Seeded faults: about the configured share dropped and duplicated, every drop and copy
    /// counted, and jitter never breaks FIFO (ready times never go back).
    #[test]
    fn link_faults_drop_duplicate_and_jitter_but_keep_fifo() {
        let (producer, mut consumer) = RingBuffer::new(1 << 20);
        let mut out = Output {
            ring: producer,
            delay: Duration::from_micros(1),
            down: Arc::new(AtomicBool::new(false)),
            rng: SplitMix::new(42),
            last_ready: Instant::ZERO,
            busy_until: Instant::ZERO,
            from_switch: false,
            held: Vec::new(),
            held_since: Instant::ZERO,
        };
        let counters = Arc::new(FaultCounters::default());
        let model = LinkModel {
            faults: LinkFaults {
                loss: 0.2,
                duplicate: 0.1,
                jitter: Duration::from_micros(5),
                reorder: 0.0,
                seed: 42,
            },
            bits_per_s: Some(8_000_000_000), // 1 byte per ns
            ecn_threshold_bytes: usize::MAX,
            capacity_bytes: 1 << 20,
            counters: counters.clone(),
        };
        let mut scratch = vec![0u8; FRAME_HEADER_LEN + 100];
        let sent = 10_000u64;
        for i in 0..sent {
            scratch[FRAME_HEADER_LEN..FRAME_HEADER_LEN + 8].copy_from_slice(&i.to_le_bytes());
            out.send(&model, &mut scratch, 100, Instant::from_nanos(i * 10));
        }
        let (mut frames, mut last_ready, mut last_seq) = (0u64, 0u64, 0u64);
        let mut header = [0u8; FRAME_HEADER_LEN + 8];
        while consumer.slots() >= FRAME_HEADER_LEN + 100 {
            let chunk = consumer.read_chunk(FRAME_HEADER_LEN + 100).unwrap();
            let (a, b) = chunk.as_slices();
            copy_out(a, b, 0, &mut header);
            chunk.commit_all();
            let ready = u64::from_le_bytes(header[2..10].try_into().unwrap());
            let seq = u64::from_le_bytes(header[10..18].try_into().unwrap());
            assert!(ready >= last_ready, "jitter broke FIFO");
            assert!(seq >= last_seq, "frames out of order");
            (last_ready, last_seq) = (ready, seq);
            frames += 1;
        }
        let dropped = counters.dropped.load(Ordering::Relaxed);
        let duplicated = counters.duplicated.load(Ordering::Relaxed);
        assert_eq!(frames, sent - dropped + duplicated);
        assert!((1_700..2_300).contains(&dropped), "dropped {dropped}");
        assert!((550..1_050).contains(&duplicated), "duplicated {duplicated}");
        // 100 bytes at 1 byte/ns take 100 ns each, sent every 10 ns: the link serializes.
        assert!(last_ready >= (sent - dropped) * 100, "serialization ignored");
    }

    /// On a rated link, each frame a switch writes finds the bytes still serializing ahead of
    /// it: `(busy_until - now) x rate`, before it is added; the counter keeps the largest.
    #[test]
    fn a_switch_link_measures_the_bytes_ahead_of_each_frame() {
        let (producer, _consumer) = RingBuffer::new(1 << 16);
        let mut out = Output {
            ring: producer,
            delay: Duration::ZERO,
            down: Arc::new(AtomicBool::new(false)),
            rng: SplitMix::new(1),
            last_ready: Instant::ZERO,
            busy_until: Instant::ZERO,
            from_switch: true,
            held: Vec::new(),
            held_since: Instant::ZERO,
        };
        let counters = Arc::new(FaultCounters::default());
        let model = LinkModel {
            faults: LinkFaults::default(),
            bits_per_s: Some(4_000_000_000), // 2 ns a byte
            ecn_threshold_bytes: usize::MAX,
            capacity_bytes: 1 << 16,
            counters: counters.clone(),
        };
        let mut scratch = vec![0u8; FRAME_HEADER_LEN + 100];
        let peak = || counters.peak_switch_backlog_bytes.load(Ordering::Relaxed);
        let mut send_at = |out: &mut Output, ns| out.send(&model, &mut scratch, 100, Instant::from_nanos(ns));
        // Three frames at once: 0, 100 and 200 bytes ahead of them.
        for _ in 0..3 {
            send_at(&mut out, 1_000);
        }
        assert_eq!(peak(), 200);
        // 500 ns later 300 - 250 bytes are left: less than the peak, which stays.
        send_at(&mut out, 1_500);
        assert_eq!(out.busy_until, Instant::from_nanos(1_000 + 4 * 200));
        assert_eq!(peak(), 200);
        // Five at once, 100 ns (50 bytes) before the link is free: 50 + 4 x 100 bytes ahead
        // of the last.
        for _ in 0..5 {
            send_at(&mut out, 1_700);
        }
        assert_eq!(peak(), 450);
        // An edge node's link is not a switch queue.
        out.from_switch = false;
        for _ in 0..10 {
            send_at(&mut out, 1_700);
        }
        assert_eq!(peak(), 450);
    }

    /// End to end: node 1 (two links each way: a switch to the runtime) writes a burst of 10
    /// frames in one visit, and only its backlog counts; node 0 (one link each way: an edge
    /// node) writes a larger one, which does not.
    #[test]
    fn the_peak_switch_backlog_counts_what_switches_write() {
        let received = Arc::new(AtomicU64::new(0));
        let pinger = |count| {
            TestNode::P(Pinger {
                next: 0,
                count,
                received: received.clone(),
                in_order: Arc::new(AtomicBool::new(true)),
                expect: 0,
            })
        };
        let nodes = vec![pinger(20), pinger(10), pinger(0)];
        let link = |from, to| LinkSpec {
            from,
            to,
            delay: Duration::ZERO,
        };
        let links = [
            link((0, 0), (1, 0)),
            link((1, 0), (0, 0)),
            link((1, 1), (2, 0)),
            link((2, 0), (1, 1)),
        ];
        let config = InprocConfig {
            workers: 1,
            frame_max_bytes: 128,
            link_bits_per_s: Some(1_000_000_000),
            ..InprocConfig::default()
        };
        let rt = Runtime::start(nodes, &links, &[0, 0, 0], &config, Clock::new(Instant::ZERO)).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while received.load(Ordering::Relaxed) < 30 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let peak = rt
            .fault_counters()
            .peak_switch_backlog_bytes
            .load(Ordering::Relaxed);
        rt.stop();
        assert_eq!(received.load(Ordering::Relaxed), 30);
        // Its tenth frame found nine of 100 bytes ahead of it (node 0's twentieth, 19).
        assert_eq!(peak, 900);
    }

    #[test]
    fn rejects_bad_wiring() {
        let config = InprocConfig {
            workers: 1,
            link_capacity_bytes: 2048,
            frame_max_bytes: 128,
            ..InprocConfig::default()
        };
        let l = LinkSpec {
            from: (0, 0),
            to: (1, 0),
            delay: Duration::ZERO,
        };
        let nodes = || vec![TestNode::R(Relay), TestNode::R(Relay)];
        let clock = Clock::new(Instant::ZERO);
        assert!(matches!(
            Runtime::start(nodes(), &[l, l], &[0, 0], &config, clock),
            Err(InprocError::DuplicateOutput { .. })
        ));
        let far = LinkSpec { to: (5, 0), ..l };
        assert!(matches!(
            Runtime::start(nodes(), &[far], &[0, 0], &config, clock),
            Err(InprocError::UnknownNode(5))
        ));
        let small = InprocConfig {
            link_capacity_bytes: 64,
            ..config.clone()
        };
        assert!(matches!(
            Runtime::start(nodes(), &[l], &[0, 0], &small, clock),
            Err(InprocError::CapacityTooSmall { .. })
        ));
    }
}
