//! The udp runtime: one node per OS process (or per thread), talking to its neighbours over
//! UDP sockets, on one machine or many.
//!
//! Each node owns one socket. Ports map to the addresses of the neighbours the wiring gives
//! them ([`plan::AddressPlan`]); a datagram from any other address is dropped and counted.
//! Frames going out of one port are packed into datagrams ([`datagram`]) and leave once per
//! pass of the loop, so a busy link carries many frames per syscall; receives are batched
//! (`recvmmsg` through quinn-udp). Links stay FIFO: reordered datagrams are dropped.
//!
//! Links are lossless on one machine: a sender waits for credit from the next hop
//! ([`link`]), as PFC makes the paper's RoCE fabric lossless. Across machines the network can
//! still lose datagrams; best effort then loses messages and reliable 1Pipe repairs them.

#![allow(clippy::disallowed_methods)] // the runtime is where the OS clock and sleeping live

pub mod answers;
pub mod auth;
mod counters;
pub mod datagram;
pub mod inject;
pub mod link;
pub mod local;
pub mod plan;
mod send;

pub use counters::{UdpCounters, UdpSnapshot};
pub use send::{PATH_DATAGRAM_BYTES_MIN, PATH_FRAME_BYTES_MAX};
use send::{enqueue, path_datagram_bytes, port_datagram_bytes, send, try_send};

use crate::inproc::Clock;
use answers::LinkAnswers;
use auth::Auth;
use datagram::{DatagramError, HEADER_LEN, Header, Packer, frame_at};
use inject::{Fate, InjectConfig, Injector};
use link::{Arrival, Parked, PeerRun, ReceiveWindow, RunFit, SendWindow};
use onepipe_fabric::hash::mix64;
use onepipe_fabric::node::{FRAME_MAX, Node, PortId, Route};
use onepipe_fabric::wiring::Wiring;
use onepipe_wire::{Duration, Instant};
use plan::AddressPlan;
use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};

/// Frames a node may originate on one port per pass, so inputs are not starved.
const OUTPUT_BUDGET_FRAMES: usize = 256;
const RECV_BUF_BYTES: usize = 65_536;
/// Batches a node may receive per pass while its socket keeps filling them: a switch takes
/// the traffic of all its links through one socket, and one batch per pass starved it.
const RECEIVE_BATCHES_PER_PASS: usize = 8;
/// Datagrams the frames closing a visit may take past a link's window: the datagram of data
/// already packed and waiting for credit, then one for the closing frames (at most a
/// scattering's rest and a beacon). Receivers take up to twice their window.
const CLOSING_OVERDRAFT_DATAGRAMS: u32 = 2;
/// The largest UDP payload over IPv4.
pub const DATAGRAM_BYTES_LIMIT: usize = 65_507;
/// Longest a parked node sleeps before it looks at the clock again.
const PARK_MAX: std::time::Duration = std::time::Duration::from_millis(1);
/// The least credit window a link gets, in datagrams, however many links share a socket.
const WINDOW_MIN_DATAGRAMS: usize = 2;
/// How often a running node looks whether its key file changed (a key rotation).
const KEY_CHECK_PERIOD: Duration = Duration::from_secs(1);

/// What a node does when a pass found nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Keep polling: lowest latency, one core per node.
    BusyPoll,
    /// Poll this many empty passes, then block on the socket until a datagram arrives or the
    /// node's next timeout (at most 1 ms).
    SpinThenPark { spins: u32 },
}

#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// Largest datagram sent, header included. Loopback takes 64 KiB; across machines use
    /// the path MTU less 28 bytes (1472 on Ethernet, 8972 with jumbo frames).
    pub datagram_bytes_max: usize,
    pub idle: IdlePolicy,
    /// Kernel socket buffers (SO_RCVBUF, SO_SNDBUF), in bytes.
    pub socket_buffer_bytes: usize,
    /// OS threads a [`local::LocalFabric`] runs its nodes on, each node keeping its own
    /// socket (`None`: a thread per node). Fewer threads than nodes suit a machine with fewer
    /// cores than nodes: a node whose thread waits for the scheduler holds back every barrier
    /// it feeds. A driver run on its own ignores this.
    pub threads: Option<usize>,
    /// Most datagrams a link may have in flight to a node (its credit window; fewer if the
    /// node's socket buffer cannot hold that many for each of its links). Every datagram in
    /// flight is queueing delay once senders outpace the receiver.
    pub window_datagrams_max: usize,
    /// Loss and corruption injected into what the node receives (tests; none by default).
    pub inject: InjectConfig,
    /// How datagrams are authenticated (docs/udp.md, "Authentication"). The default is a
    /// fresh random key: right for a fabric whose nodes all take this configuration in one
    /// process ([`local::LocalFabric`]); nodes in separate processes must be given the
    /// fabric's key (`onepipe::keys::fabric_auth`).
    pub auth: Auth,
}

impl Default for UdpConfig {
    fn default() -> UdpConfig {
        UdpConfig {
            datagram_bytes_max: 8_972,
            idle: IdlePolicy::SpinThenPark { spins: 64 },
            socket_buffer_bytes: 4 << 20,
            threads: None,
            window_datagrams_max: 16,
            inject: InjectConfig::default(),
            // Fails only if the OS has no random source, where std's HashMap panics too.
            auth: Auth::generate().expect("the OS random source"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    #[error("cannot bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
    #[error("datagrams of {0} bytes: UDP over IPv4 carries at most {DATAGRAM_BYTES_LIMIT}")]
    DatagramTooLarge(usize),
}

/// A node's neighbours: the address behind each of its ports.
#[derive(Clone, Debug)]
pub struct Links {
    pub local: SocketAddr,
    pub ports: Vec<Option<SocketAddr>>,
}

impl Links {
    /// The links of runtime node `node` (switches first, then processes) in `wiring`.
    pub fn of(wiring: &Wiring, plan: &AddressPlan, node: usize) -> Links {
        Links {
            local: plan.node(node),
            ports: port_peers(wiring, |n| plan.node(n)).swap_remove(node),
        }
    }
}

/// For every runtime node, the address behind each of its ports, `addr(n)` being where node
/// `n` listens.
pub fn port_peers(wiring: &Wiring, addr: impl Fn(usize) -> SocketAddr) -> Vec<Vec<Option<SocketAddr>>> {
    let links = wiring.directed_links(onepipe_wire::Duration::ZERO);
    port_peers_of(&links, wiring.switch_count() + wiring.process_count(), addr)
}

/// For each of `nodes` nodes, the address behind each of its ports on `links`.
pub fn port_peers_of(
    links: &[onepipe_fabric::DirectedLink],
    nodes: usize,
    addr: impl Fn(usize) -> SocketAddr,
) -> Vec<Vec<Option<SocketAddr>>> {
    let mut peers = vec![Vec::new(); nodes];
    for l in links {
        let (from, port) = (l.from.0, l.from.1 as usize);
        if peers[from].len() <= port {
            peers[from].resize(port + 1, None);
        }
        peers[from][port] = Some(addr(l.to.0));
    }
    peers
}

/// One link's state at this end.
struct Port {
    peer: Option<SocketAddr>,
    packer: Packer,
    send: SendWindow,
    recv: ReceiveWindow,
    /// The peer's run this link hears.
    run: PeerRun,
    /// The peer sent a datagram meant for an earlier run of this node: it must hear this
    /// run's epoch, in a datagram of its own if nothing else goes to it soon.
    announce_due: bool,
}

impl Port {
    /// Whether a frame of `len` bytes can be queued on this port now: it fits the datagram
    /// being packed, or that datagram may leave to make room. Ports without a link, and frames
    /// too large for any datagram, are always taken (and counted as dropped).
    fn has_room(&self, len: usize) -> bool {
        self.peer.is_none() || !self.packer.fits_alone(len) || self.packer.fits(len) || self.send.is_open()
    }
}

/// Whether a datagram's frames were all handed on.
enum Handed {
    All,
    /// The frame at this offset waits for room on its output port.
    Blocked(usize),
    Malformed,
}

/// Links to cut while a driver runs: fault injection in our own links, since a socket cannot
/// fail one link of many. A cut link is dead both ways: nothing is sent on it and what arrives
/// on it is dropped, so its neighbours time it out as they would a broken cable. Shared with
/// whoever decides (a status-file watcher); the driver takes the requests each time it
/// observes its node.
#[derive(Debug, Default)]
pub struct LinkCuts {
    asked: std::sync::Mutex<Vec<PortId>>,
}

impl LinkCuts {
    /// Asks for the link at `port` to be cut (for good; asking twice is harmless).
    pub fn cut(&self, port: PortId) {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).push(port);
    }

    fn take(&self) -> Vec<PortId> {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Buffers for one batched receive (`recvmmsg`). The kernel copies every datagram into them,
/// so a thread keeps one set for all the nodes it runs rather than each node its own: with a
/// set per node, each pass of a thread over 33 nodes wrote megabytes into buffers no other
/// node touched, and every such write evicted data from the 1 MiB L2 cache (docs/udp.md).
pub(crate) struct RecvBufs {
    bufs: Vec<Vec<u8>>,
    meta: Vec<quinn_udp::RecvMeta>,
}

impl RecvBufs {
    pub(crate) fn new() -> RecvBufs {
        let batch = quinn_udp::BATCH_SIZE.max(1);
        RecvBufs {
            // 64 KiB: the largest UDP datagram, and the most that receive offload (GRO)
            // coalesces into one buffer.
            bufs: vec![vec![0u8; RECV_BUF_BYTES]; batch],
            meta: vec![quinn_udp::RecvMeta::default(); batch],
        }
    }
}

/// What every datagram a node sends is stamped and signed with.
pub(crate) struct Sealing {
    /// This node's run: its start, in ns since 1970.
    epoch: u64,
    auth: Auth,
}

/// Drives one node over one UDP socket.
pub struct UdpDriver {
    socket: UdpSocket,
    state: quinn_udp::UdpSocketState,
    /// Where the socket listens, as its neighbours address it: what received tags cover.
    local: SocketAddr,
    sealing: Sealing,
    /// When to look at the key file again ([`KEY_CHECK_PERIOD`]).
    key_check_at: Instant,
    ports: Vec<Port>,
    by_addr: HashMap<SocketAddr, PortId>,
    config: UdpConfig,
    scratch: Vec<u8>,
    cuts: std::sync::Arc<LinkCuts>,
    answers: std::sync::Arc<LinkAnswers>,
    /// The addresses of cut links: what they send is counted, not taken as a stranger's.
    cut_addrs: HashMap<SocketAddr, PortId>,
    /// Faults injected into received datagrams, when asked for.
    injector: Option<Injector>,
}

/// Addresses compare as the socket reports them: IPv4 may come back IPv6-mapped.
fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

impl UdpDriver {
    /// Binds `links.local` and connects each port to its neighbour.
    pub fn bind(links: &Links, config: &UdpConfig) -> Result<UdpDriver, UdpError> {
        let mut d = UdpDriver::bind_addr(links.local, config)?;
        d.set_ports(&links.ports);
        Ok(d)
    }

    /// Binds `local` (port 0: any free port) with no ports connected yet.
    pub fn bind_addr(local: SocketAddr, config: &UdpConfig) -> Result<UdpDriver, UdpError> {
        if config.datagram_bytes_max > DATAGRAM_BYTES_LIMIT {
            return Err(UdpError::DatagramTooLarge(config.datagram_bytes_max));
        }
        let socket = UdpSocket::bind(local).map_err(|source| UdpError::Bind { addr: local, source })?;
        let sock = socket2::SockRef::from(&socket);
        // Best effort: the kernel caps these at net.core.{r,w}mem_max.
        let _ = sock.set_recv_buffer_size(config.socket_buffer_bytes);
        let _ = sock.set_send_buffer_size(config.socket_buffer_bytes);
        let state = quinn_udp::UdpSocketState::new((&socket).into())?;
        let local = canonical(socket.local_addr()?);
        Ok(UdpDriver {
            socket,
            state,
            local,
            sealing: Sealing {
                epoch: start_epoch(),
                auth: config.auth.clone(),
            },
            key_check_at: Instant::ZERO,
            ports: Vec::new(),
            by_addr: HashMap::new(),
            config: config.clone(),
            scratch: vec![0u8; FRAME_MAX],
            cuts: Default::default(),
            answers: Default::default(),
            cut_addrs: HashMap::new(),
            injector: config.inject.is_active().then(|| Injector::new(config.inject)),
        })
    }

    /// Connects port `i` to `ports[i]` (`None`: no link on that port).
    pub fn set_ports(&mut self, ports: &[Option<SocketAddr>]) {
        self.by_addr.clear();
        self.answers = std::sync::Arc::new(LinkAnswers::new(ports.len()));
        let window = self.receive_window(ports.iter().flatten().count());
        // A random first sequence number per start: a limit granted to an earlier run then
        // falls far from this run's numbers.
        let nonce = start_epoch();
        let local = self.socket.local_addr().map_or(0, |a| a.port() as u64);
        self.ports = ports
            .iter()
            .enumerate()
            .map(|(i, peer)| {
                if let Some(a) = peer {
                    self.by_addr.insert(canonical(*a), i as PortId);
                }
                let initial_seq = mix64(nonce ^ (local << 16) ^ i as u64) as u32;
                // A path whose MTU is smaller than the configured datagram (1500-byte Ethernet
                // between machines, under the 8972 jumbo default) takes nothing larger: the
                // socket refuses such datagrams rather than fragment them.
                let path = peer.and_then(path_datagram_bytes);
                Port {
                    peer: *peer,
                    packer: Packer::new(port_datagram_bytes(self.config.datagram_bytes_max, path)),
                    send: SendWindow::new(initial_seq),
                    recv: ReceiveWindow::new(window),
                    run: PeerRun::default(),
                    announce_due: false,
                }
            })
            .collect();
    }

    /// Datagrams each link may have in flight to us: the socket's receive buffer shared by the
    /// links, allowing the kernel twice a datagram's size for each (its own overhead), less
    /// the [`CLOSING_OVERDRAFT_DATAGRAMS`] a sender may add past the window.
    fn receive_window(&self, links: usize) -> u32 {
        let buffer = socket2::SockRef::from(&self.socket)
            .recv_buffer_size()
            .unwrap_or(self.config.socket_buffer_bytes);
        let per_link = buffer / (links.max(1) * 2 * self.config.datagram_bytes_max);
        let per_link = per_link.saturating_sub(CLOSING_OVERDRAFT_DATAGRAMS as usize);
        per_link.clamp(
            WINDOW_MIN_DATAGRAMS,
            self.config.window_datagrams_max.max(WINDOW_MIN_DATAGRAMS),
        ) as u32
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The ports whose datagrams are smaller than configured because the path to their
    /// neighbour carries less: (port, neighbour, largest datagram in bytes).
    pub fn path_limited_ports(&self) -> Vec<(PortId, SocketAddr, usize)> {
        self.ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let capacity = p.packer.capacity();
                let peer = p.peer?;
                (capacity < self.config.datagram_bytes_max).then_some((i as PortId, peer, capacity))
            })
            .collect()
    }

    /// The handle through which links of this driver are cut while it runs.
    pub fn link_cuts(&self) -> std::sync::Arc<LinkCuts> {
        self.cuts.clone()
    }

    /// Which ports' peers have answered this run's datagrams (see [`LinkAnswers`]); setting
    /// the ports again starts a new record.
    pub fn link_answers(&self) -> std::sync::Arc<LinkAnswers> {
        self.answers.clone()
    }

    /// Cuts what was asked: the port forgets its neighbour (frames for it are dropped as on a
    /// port without a link) and its waiting datagrams.
    fn apply_cuts(&mut self) {
        for port in self.cuts.take() {
            let Some(p) = self.ports.get_mut(port as usize) else {
                continue;
            };
            if let Some(peer) = p.peer.take() {
                let addr = canonical(peer);
                self.by_addr.remove(&addr);
                self.cut_addrs.insert(addr, port);
            }
            p.packer.clear();
            p.recv.inbox.clear();
        }
    }

    /// Runs `node` until `stop` is set.
    pub fn run<N: Node>(&mut self, node: &mut N, clock: &Clock, stop: &AtomicBool, counters: &UdpCounters) {
        self.run_observed(node, clock, stop, counters, Duration::MAX, &mut |_, _| {});
    }

    /// Runs `node` until `stop` is set, handing it to `observe` about every `period` (for
    /// status reports and events; the node cannot be reached otherwise while it runs).
    pub fn run_observed<N: Node>(
        &mut self,
        node: &mut N,
        clock: &Clock,
        stop: &AtomicBool,
        counters: &UdpCounters,
        period: Duration,
        observe: &mut dyn FnMut(&mut N, Instant),
    ) {
        let mut idle = Idle::default();
        let mut observe_at = clock.now();
        let mut bufs = RecvBufs::new();
        while !stop.load(Ordering::Relaxed) {
            let received = self.receive(node, clock, counters, &mut bufs);
            let now = clock.now();
            if now >= observe_at {
                observe(node, now);
                self.apply_cuts();
                observe_at = now + period;
            }
            let worked = self.work(node, now, counters) || received;
            if idle.after_pass(received, worked, self.config.idle) {
                park(&[&self.socket], node.poll_timeout(), clock);
            }
        }
    }

    /// Runs one pass of `node` with the frames already received: waiting frames, timers,
    /// frames the node originates, and datagrams out. Returns whether anything happened.
    fn work<N: Node>(&mut self, node: &mut N, now: Instant, counters: &UdpCounters) -> bool {
        self.check_keys(now, counters);
        let mut worked = self.drain_inboxes(node, now, counters);
        if node.poll_timeout().is_some_and(|t| t <= now) {
            node.handle_timeout(now);
            worked = true;
        }
        worked |= self.originate(node, now, counters, OUTPUT_BUDGET_FRAMES);
        let closing = node.end_visit(now);
        if closing > 0 {
            // Exactly the frames that close the visit; more would belong to the next. They
            // leave now even if the window is spent: under load it always is at this point,
            // and a promise that waited for the next visit's credit would hold every
            // receiver's barrier a pass behind (docs/udp.md, "Credits").
            self.set_overdraft(CLOSING_OVERDRAFT_DATAGRAMS);
            worked |= self.originate(node, now, counters, closing);
        }
        worked |= self.flush(now, counters);
        if closing > 0 {
            self.set_overdraft(0);
        }
        worked
    }

    /// Takes the keys of a key file that changed (a rotation, docs/udp.md); keeps the old
    /// ones, and counts, if the new file cannot be read.
    fn check_keys(&mut self, now: Instant, counters: &UdpCounters) {
        if now < self.key_check_at {
            return;
        }
        self.key_check_at = now + KEY_CHECK_PERIOD;
        let Auth::Keys(ring) = &self.sealing.auth else {
            return;
        };
        match ring.reloaded() {
            None => {}
            Some(Ok(ring)) => {
                self.sealing.auth = Auth::Keys(std::sync::Arc::new(ring));
                UdpCounters::add(&counters.key_reloads, 1);
            }
            Some(Err(_)) => UdpCounters::add(&counters.key_reload_errors, 1),
        }
    }

    /// This node's run, as its datagrams name it.
    pub fn epoch(&self) -> u64 {
        self.sealing.epoch
    }

    fn set_overdraft(&mut self, datagrams: u32) {
        for p in &mut self.ports {
            p.send.set_overdraft(datagrams);
        }
    }

    /// One pass of `node`, as [`UdpDriver::run`] makes it, receiving into the running
    /// thread's `bufs`: what happened, and whether datagrams came in.
    pub(crate) fn pass<N: Node>(
        &mut self,
        node: &mut N,
        clock: &Clock,
        counters: &UdpCounters,
        bufs: &mut RecvBufs,
    ) -> Pass {
        let received = self.receive(node, clock, counters, bufs);
        let worked = self.work(node, clock.now(), counters) || received;
        Pass { worked, received }
    }

    pub(crate) fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// Takes what waits on the socket, a batch at a time (up to [`RECEIVE_BATCHES_PER_PASS`]):
    /// credits are applied, frames handed to the node (or parked behind earlier ones that wait
    /// for room). Returns whether anything came.
    fn receive<N: Node>(
        &mut self,
        node: &mut N,
        clock: &Clock,
        counters: &UdpCounters,
        bufs: &mut RecvBufs,
    ) -> bool {
        let mut received = false;
        for _ in 0..RECEIVE_BATCHES_PER_PASS {
            let n = self.receive_batch(node, clock, counters, bufs);
            received |= n > 0;
            if n < bufs.bufs.len() {
                break;
            }
        }
        received
    }

    /// Takes one batch of datagrams (one `recvmmsg`); returns how many buffers it filled.
    fn receive_batch<N: Node>(
        &mut self,
        node: &mut N,
        clock: &Clock,
        counters: &UdpCounters,
        bufs: &mut RecvBufs,
    ) -> usize {
        let RecvBufs { bufs, meta } = bufs;
        let mut slices: Vec<IoSliceMut<'_>> = bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        // Nothing waiting (WouldBlock) or a transient socket error: try again next pass.
        let Ok(n) = self.state.recv((&self.socket).into(), &mut slices, meta) else {
            return 0;
        };
        drop(slices);
        let now = clock.now();
        for (m, buf) in meta.iter().zip(bufs.iter()).take(n) {
            let Some(&port) = self.by_addr.get(&canonical(m.addr)) else {
                let counter = match self.cut_addrs.contains_key(&canonical(m.addr)) {
                    true => &counters.cut_datagrams,
                    false => &counters.unknown_source,
                };
                UdpCounters::add(counter, 1);
                continue;
            };
            let stride = if m.stride == 0 { m.len } else { m.stride };
            for datagram in buf[..m.len].chunks(stride) {
                match self
                    .injector
                    .as_mut()
                    .map_or(Fate::Keep, |i| i.fate(datagram.len()))
                {
                    Fate::Keep => self.take_datagram(node, now, port, datagram, counters),
                    Fate::Drop => UdpCounters::add(&counters.injected_losses, 1),
                    Fate::Flip { bit } => {
                        UdpCounters::add(&counters.injected_corruptions, 1);
                        let mut damaged = datagram.to_vec();
                        inject::flip(&mut damaged, bit);
                        self.take_datagram(node, now, port, &damaged, counters);
                    }
                }
            }
        }
        n
    }

    /// Takes `datagram` as if it had just come from the neighbour behind `port`, then retries
    /// what waits in the links' inboxes: the receive path without a socket's traffic, for the
    /// fuzz targets (crates/fuzz). A port the driver does not have counts as a stranger's.
    pub fn receive_datagram<N: Node>(
        &mut self,
        node: &mut N,
        now: Instant,
        port: PortId,
        datagram: &[u8],
        counters: &UdpCounters,
    ) {
        if port as usize >= self.ports.len() {
            return UdpCounters::add(&counters.unknown_source, 1);
        }
        self.take_datagram(node, now, port, datagram, counters);
        self.drain_inboxes(node, now, counters);
    }

    fn take_datagram<N: Node>(
        &mut self,
        node: &mut N,
        now: Instant,
        port: PortId,
        datagram: &[u8],
        counters: &UdpCounters,
    ) {
        UdpCounters::add(&counters.datagrams_in, 1);
        let (header, datagram) = match datagram::open(datagram, &self.sealing.auth, self.local) {
            Ok(opened) => opened,
            Err(e) => {
                let counter = match e {
                    DatagramError::Malformed => &counters.malformed,
                    DatagramError::Unauthenticated => &counters.unauthenticated,
                    DatagramError::BadTag => &counters.bad_tag,
                };
                return UdpCounters::add(counter, 1);
            }
        };
        let p = &mut self.ports[port as usize];
        if !link::meant_for(self.sealing.epoch, header.peer_epoch, header.sent_at_ns) {
            // For an earlier run of ours, or sent before this one started (a replay): it says
            // nothing to this run, not even which run of the peer is current.
            p.announce_due = true;
            return UdpCounters::add(&counters.stale_epoch, 1);
        }
        match p.run.observe(header.epoch) {
            RunFit::Same | RunFit::First => {}
            RunFit::Old => return UdpCounters::add(&counters.stale_epoch, 1),
            RunFit::Restarted => {
                // Reported (counted, and shown by `onepipe inspect`): the peer's earlier run
                // is gone, with what of it still waited here.
                let dropped = p.recv.restart();
                p.send.on_peer_restart(now);
                UdpCounters::add(&counters.resyncs, 1);
                UdpCounters::add(&counters.restart_dropped, dropped as u64);
            }
        }
        if let Some(limit) = header.limit {
            if p.send.on_limit(limit, now) {
                self.answers.mark(port);
            }
        }
        let Some(seq) = header.seq else {
            UdpCounters::add(&counters.credits_in, 1);
            return;
        };
        match p.recv.arrive(seq) {
            Arrival::Take { lost } => UdpCounters::add(&counters.lost, lost as u64),
            Arrival::Reordered => return UdpCounters::add(&counters.reordered, 1),
            Arrival::Overrun => return UdpCounters::add(&counters.overrun, 1),
        }
        if !p.recv.inbox.is_empty() {
            // Earlier datagrams of this link are waiting: this one waits behind them.
            p.recv.inbox.push_back(Parked {
                seq,
                datagram: datagram.to_vec(),
                at: HEADER_LEN,
            });
            return;
        }
        if let Handed::Blocked(at) = self.hand_on(node, now, port, datagram, HEADER_LEN, false, counters) {
            self.ports[port as usize].recv.inbox.push_back(Parked {
                seq,
                datagram: datagram.to_vec(),
                at,
            });
        }
    }

    /// Hands the frames of `datagram` from offset `at` to the node, until one must wait for
    /// room on its output port. `waited`: the datagram waited in its link's inbox, behind a
    /// frame that found no room; the frames it forwards then are marked as congested. This is
    /// the runtime's queue (its links are lossless, with credits), so it is where DCTCP must
    /// hear of congestion: without marks, 100 KB reliable broadcasts queued seconds of data,
    /// nearly every packet timed out, and live receivers were given up on.
    #[allow(clippy::too_many_arguments)]
    fn hand_on<N: Node>(
        &mut self,
        node: &mut N,
        now: Instant,
        port: PortId,
        datagram: &[u8],
        mut at: usize,
        waited: bool,
        counters: &UdpCounters,
    ) -> Handed {
        loop {
            let (range, next) = match frame_at(datagram, at) {
                Ok(Some(f)) => f,
                Ok(None) => return Handed::All,
                Err(_) => {
                    UdpCounters::add(&counters.malformed, 1);
                    return Handed::Malformed;
                }
            };
            // A frame longer than any node takes (FRAME_MAX) is damage, like a frame running
            // past the datagram's end.
            let Some(f) = self.scratch.get_mut(..range.len()) else {
                UdpCounters::add(&counters.malformed, 1);
                return Handed::Malformed;
            };
            f.copy_from_slice(&datagram[range]);
            let route = node.classify(now, port, f);
            let gone = matches!(route, Route::Forward(out) if node.peer_gone(out));
            if let (Route::Forward(out), false) = (route, gone)
                && !self.ports.get(out as usize).is_none_or(|o| o.has_room(f.len()))
            {
                node.handle_stalled(now, port, f);
                UdpCounters::add(&counters.blocked_frames, 1);
                return Handed::Blocked(at);
            }
            UdpCounters::add(&counters.frames_in, 1);
            node.handle_frame(now, port, f, route);
            if gone {
                UdpCounters::add(&counters.peer_gone_frames, 1);
            } else if let Route::Forward(out) = route {
                if waited {
                    node.mark_congestion(f);
                    UdpCounters::add(&counters.ecn_marked, 1);
                }
                enqueue(
                    &mut self.ports,
                    out,
                    f,
                    &self.socket,
                    &self.state,
                    &self.sealing,
                    now,
                    counters,
                );
            }
            at = next;
        }
    }

    /// Retries the frames waiting in each link's inbox, oldest first.
    fn drain_inboxes<N: Node>(&mut self, node: &mut N, now: Instant, counters: &UdpCounters) -> bool {
        let mut worked = false;
        for port in 0..self.ports.len() {
            while let Some(front) = self.ports[port].recv.inbox.front_mut() {
                // Borrowed out so that the node can queue onto any port meanwhile; the entry
                // stays, so the link's limit still counts it unfinished.
                let (datagram, at) = (std::mem::take(&mut front.datagram), front.at);
                let handed = self.hand_on(node, now, port as PortId, &datagram, at, true, counters);
                let inbox = &mut self.ports[port].recv.inbox;
                if let Handed::Blocked(stuck) = handed {
                    let front = inbox.front_mut().expect("the entry stayed");
                    worked |= stuck != at;
                    (front.datagram, front.at) = (datagram, stuck);
                    break;
                }
                inbox.pop_front();
                worked = true;
            }
        }
        worked
    }

    /// Lets the node originate frames on every port that has room for a frame.
    fn originate<N: Node>(
        &mut self,
        node: &mut N,
        now: Instant,
        counters: &UdpCounters,
        budget: usize,
    ) -> bool {
        if !node.wants_transmit() {
            return false;
        }
        let mut worked = false;
        for port in 0..self.ports.len() {
            // The largest frame this port's datagrams (cut to its path) can carry.
            let frame_max = self.ports[port].packer.frame_max();
            for _ in 0..budget {
                if !self.ports[port].has_room(frame_max) {
                    break;
                }
                let Some(len) = node.poll_transmit(now, port as PortId, &mut self.scratch) else {
                    break;
                };
                worked = true;
                let frame = &self.scratch[..len];
                enqueue(
                    &mut self.ports,
                    port as PortId,
                    frame,
                    &self.socket,
                    &self.state,
                    &self.sealing,
                    now,
                    counters,
                );
            }
        }
        worked
    }

    /// Sends each port's datagram if its window allows (or a probe is due), then the credits
    /// that did not ride on one, and the announcements owed to peers that named an earlier
    /// run of this node.
    fn flush(&mut self, now: Instant, counters: &UdpCounters) -> bool {
        let mut worked = false;
        for p in &mut self.ports {
            if p.send.is_open() || p.send.should_probe(now) {
                worked |= send(p, &self.socket, &self.state, &self.sealing, now, counters);
            }
            let Some(peer) = p.peer else {
                continue;
            };
            let credit_due = p.recv.credit_due();
            if !credit_due && !p.announce_due {
                continue;
            }
            let header = Header {
                epoch: self.sealing.epoch,
                peer_epoch: p.run.epoch(),
                sent_at_ns: wall_clock_ns(),
                seq: None,
                limit: if credit_due { p.recv.report() } else { None },
            };
            let (contents, len) = datagram::control(&header, &self.sealing.auth, peer);
            if try_send(&self.socket, &self.state, peer, &contents[..len]).is_ok() {
                let counter = match credit_due {
                    true => &counters.credits_out,
                    false => &counters.announcements_out,
                };
                UdpCounters::add(counter, 1);
                p.announce_due = false;
            }
            worked = true;
        }
        worked
    }
}

/// This run's epoch: the time it started, in ns since 1970 (never 0). A restarted node reads a
/// later clock, so its peers tell its datagrams from its earlier run's.
fn start_epoch() -> u64 {
    wall_clock_ns().max(1)
}

/// The system clock in ns since 1970 (0 before 1970), what epochs and send times are read on:
/// not the node's clock, which may be shifted to test skew.
pub(crate) fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What a pass of one or more nodes did.
pub(crate) struct Pass {
    pub worked: bool,
    /// Datagrams came in from outside.
    pub received: bool,
}

/// Counts the passes with nothing to do, to decide when to park.
#[derive(Default)]
pub(crate) struct Idle {
    passes: u32,
}

impl Idle {
    /// Whether to park after a pass that `worked` and `received` as told.
    pub(crate) fn after_pass(&mut self, received: bool, worked: bool, policy: IdlePolicy) -> bool {
        // Only traffic from outside earns another spell of spinning: a node woken by its own
        // timer (a beacon) goes back to sleep after the pass. With dozens of nodes on two
        // cores, spinning after every beacon took most of the CPU.
        if received {
            self.passes = 0;
        }
        if worked {
            return false;
        }
        self.passes += 1;
        matches!(policy, IdlePolicy::SpinThenPark { spins } if self.passes >= spins)
    }
}

/// Blocks until a datagram is waiting on one of `sockets` or until `timeout` (a node's next
/// timer), whichever comes first, for at most [`PARK_MAX`].
pub(crate) fn park(sockets: &[&UdpSocket], timeout: Option<Instant>, clock: &Clock) {
    let now = clock.now();
    let wait = timeout.map_or(PARK_MAX, |t| {
        std::time::Duration::from_nanos(t.saturating_since(now).as_nanos()).min(PARK_MAX)
    });
    if wait.is_zero() {
        return;
    }
    // ppoll leaves the datagram for the batched receive that follows, and its timeout is a
    // high-resolution timer. A socket read timeout (SO_RCVTIMEO) would round up to whole
    // scheduler ticks: with HZ=250 a 150 us wait took 8 ms, and an idle host beaconed every
    // 8 ms instead of every interval.
    let timeout = rustix::event::Timespec {
        tv_sec: wait.as_secs() as _,
        tv_nsec: wait.subsec_nanos() as _,
    };
    let mut fds: Vec<_> = sockets
        .iter()
        .map(|s| rustix::event::PollFd::new(*s, rustix::event::PollFlags::IN))
        .collect();
    let _ = rustix::event::poll(&mut fds, Some(&timeout));
}

#[cfg(test)]
mod tests;
