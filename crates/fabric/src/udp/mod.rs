//! The udp runtime: one node per OS process (or per thread), talking to its neighbours over
//! UDP sockets, on one machine or many.
//!
//! Each node owns one socket. Ports map to the addresses of the neighbours the wiring gives
//! them ([`plan::AddressPlan`]); a datagram from any other address is dropped and counted.
//! Frames going out of one port are packed into datagrams ([`datagram`]) and leave once per
//! pass of the loop, so a busy link carries many frames per syscall; receives are batched
//! (`recvmmsg` through quinn-udp). Links stay FIFO: reordered datagrams are dropped.
//!
//! Unlike the inproc runtime this fabric is lossy (a full socket buffer drops), like a real
//! network without PFC: best effort loses messages, reliable 1Pipe repairs them.

#![allow(clippy::disallowed_methods)] // the runtime is where the OS clock and sleeping live

pub mod datagram;
pub mod plan;

use crate::inproc::Clock;
use crate::node::{FRAME_MAX, Node, PortId, Route};
use crate::wiring::Wiring;
use datagram::{Packer, for_each_frame, parse_header, seq_before};
use onepipe_wire::Instant;
use plan::AddressPlan;
use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Frames a node may originate on one port per pass, so inputs are not starved.
const OUTPUT_BUDGET_FRAMES: usize = 256;
const RECV_BUF_BYTES: usize = 65_536;
/// The largest UDP payload over IPv4.
pub const DATAGRAM_BYTES_LIMIT: usize = 65_507;
/// Longest a parked node sleeps before it looks at the clock again.
const PARK_MAX: std::time::Duration = std::time::Duration::from_millis(1);

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
}

impl Default for UdpConfig {
    fn default() -> UdpConfig {
        UdpConfig {
            datagram_bytes_max: 8_972,
            idle: IdlePolicy::SpinThenPark { spins: 2_000 },
            socket_buffer_bytes: 4 << 20,
        }
    }
}

/// What the runtime saw, for `onepipe inspect` and summaries.
#[derive(Debug, Default)]
pub struct UdpCounters {
    pub datagrams_in: AtomicU64,
    pub datagrams_out: AtomicU64,
    pub frames_in: AtomicU64,
    pub frames_out: AtomicU64,
    /// From an address that is not a neighbour in the topology.
    pub unknown_source: AtomicU64,
    /// Not ours, or damaged.
    pub malformed: AtomicU64,
    /// Arrived after a later datagram of their link: dropped to keep the link FIFO.
    pub reordered: AtomicU64,
    /// Datagrams missing from a link's sequence (lost in the network or a socket buffer).
    pub lost: AtomicU64,
    /// Frames dropped because the socket would not take their datagram.
    pub send_dropped_frames: AtomicU64,
    /// Frames a node forwarded or originated on a port with no neighbour.
    pub no_link_frames: AtomicU64,
}

impl UdpCounters {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
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
    let mut peers = vec![Vec::new(); wiring.switch_count() + wiring.process_count()];
    for l in wiring.directed_links(onepipe_wire::Duration::ZERO) {
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
    next_seq_out: u32,
    /// Next sequence number expected in; `None` before the first datagram.
    next_seq_in: Option<u32>,
}

/// Drives one node over one UDP socket.
pub struct UdpDriver {
    socket: UdpSocket,
    state: quinn_udp::UdpSocketState,
    ports: Vec<Port>,
    by_addr: HashMap<SocketAddr, PortId>,
    config: UdpConfig,
    recv_bufs: Vec<Vec<u8>>,
    recv_meta: Vec<quinn_udp::RecvMeta>,
    scratch: Vec<u8>,
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
        let batch = quinn_udp::BATCH_SIZE.max(1);
        Ok(UdpDriver {
            socket,
            state,
            ports: Vec::new(),
            by_addr: HashMap::new(),
            config: config.clone(),
            // 64 KiB: the largest UDP datagram, and the most that receive offload (GRO)
            // coalesces into one buffer.
            recv_bufs: vec![vec![0u8; RECV_BUF_BYTES]; batch],
            recv_meta: vec![quinn_udp::RecvMeta::default(); batch],
            scratch: vec![0u8; FRAME_MAX],
        })
    }

    /// Connects port `i` to `ports[i]` (`None`: no link on that port).
    pub fn set_ports(&mut self, ports: &[Option<SocketAddr>]) {
        self.by_addr.clear();
        self.ports = ports
            .iter()
            .enumerate()
            .map(|(i, peer)| {
                if let Some(a) = peer {
                    self.by_addr.insert(canonical(*a), i as PortId);
                }
                Port {
                    peer: *peer,
                    packer: Packer::new(self.config.datagram_bytes_max),
                    next_seq_out: 0,
                    next_seq_in: None,
                }
            })
            .collect();
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Runs `node` until `stop` is set.
    pub fn run<N: Node>(&mut self, node: &mut N, clock: &Clock, stop: &AtomicBool, counters: &UdpCounters) {
        let mut idle_passes = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let mut worked = self.receive(node, clock, counters);
            let now = clock.now();
            if node.poll_timeout().is_some_and(|t| t <= now) {
                node.handle_timeout(now);
                worked = true;
            }
            worked |= self.originate(node, now, counters);
            self.flush(counters);
            if worked {
                idle_passes = 0;
                continue;
            }
            idle_passes += 1;
            if let IdlePolicy::SpinThenPark { spins } = self.config.idle
                && idle_passes >= spins
            {
                self.park(node.poll_timeout(), clock);
            }
        }
    }

    /// Takes one batch of datagrams and hands their frames to the node.
    fn receive<N: Node>(&mut self, node: &mut N, clock: &Clock, counters: &UdpCounters) -> bool {
        let meta = &mut self.recv_meta;
        let mut slices: Vec<IoSliceMut<'_>> = self.recv_bufs.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        // Nothing waiting (WouldBlock) or a transient socket error: try again next pass.
        let Ok(n) = self.state.recv((&self.socket).into(), &mut slices, meta) else {
            return false;
        };
        drop(slices);
        let now = clock.now();
        for (m, buf) in meta.iter().zip(&self.recv_bufs).take(n) {
            let Some(&port) = self.by_addr.get(&canonical(m.addr)) else {
                UdpCounters::add(&counters.unknown_source, 1);
                continue;
            };
            let stride = if m.stride == 0 { m.len } else { m.stride };
            for datagram in buf[..m.len].chunks(stride) {
                UdpCounters::add(&counters.datagrams_in, 1);
                let Ok(seq) = parse_header(datagram) else {
                    UdpCounters::add(&counters.malformed, 1);
                    continue;
                };
                let p = &mut self.ports[port as usize];
                if let Some(expected) = p.next_seq_in {
                    if seq_before(seq, expected) {
                        UdpCounters::add(&counters.reordered, 1);
                        continue;
                    }
                    UdpCounters::add(&counters.lost, seq.wrapping_sub(expected) as u64);
                }
                p.next_seq_in = Some(seq.wrapping_add(1));
                let (ports, scratch) = (&mut self.ports, &mut self.scratch);
                let result = for_each_frame(datagram, |frame| {
                    UdpCounters::add(&counters.frames_in, 1);
                    let f = &mut scratch[..frame.len()];
                    f.copy_from_slice(frame);
                    let route = node.classify(now, port, f);
                    node.handle_frame(now, port, f, route);
                    if let Route::Forward(out) = route {
                        enqueue(ports, out, f, &self.socket, &self.state, counters);
                    }
                });
                if result.is_err() {
                    UdpCounters::add(&counters.malformed, 1);
                }
            }
        }
        n > 0
    }

    /// Lets the node originate frames on every port.
    fn originate<N: Node>(&mut self, node: &mut N, now: Instant, counters: &UdpCounters) -> bool {
        if !node.wants_transmit() {
            return false;
        }
        let mut worked = false;
        for port in 0..self.ports.len() {
            for _ in 0..OUTPUT_BUDGET_FRAMES {
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
                    counters,
                );
            }
        }
        worked
    }

    fn flush(&mut self, counters: &UdpCounters) {
        for p in &mut self.ports {
            send(p, &self.socket, &self.state, counters);
        }
    }

    /// Blocks until a datagram is waiting or the node's next timeout, whichever comes first.
    fn park(&mut self, timeout: Option<Instant>, clock: &Clock) {
        let now = clock.now();
        let wait = timeout.map_or(PARK_MAX, |t| {
            std::time::Duration::from_nanos(t.saturating_since(now).as_nanos()).min(PARK_MAX)
        });
        if wait.is_zero() {
            return;
        }
        // A blocking peek leaves the datagram for the batched receive that follows.
        let mut probe = [0u8; 1];
        let _ = self.socket.set_nonblocking(false);
        let _ = self.socket.set_read_timeout(Some(wait));
        let _ = self.socket.peek_from(&mut probe);
        let _ = self.socket.set_nonblocking(true);
    }
}

/// Adds a frame to a port's datagram, sending the datagram first if the frame does not fit.
fn enqueue(
    ports: &mut [Port],
    port: PortId,
    frame: &[u8],
    socket: &UdpSocket,
    state: &quinn_udp::UdpSocketState,
    counters: &UdpCounters,
) {
    let Some(p) = ports.get_mut(port as usize).filter(|p| p.peer.is_some()) else {
        UdpCounters::add(&counters.no_link_frames, 1);
        return;
    };
    if !p.packer.fits_alone(frame.len()) {
        UdpCounters::add(&counters.send_dropped_frames, 1);
        return;
    }
    if !p.packer.fits(frame.len()) {
        send(p, socket, state, counters);
    }
    p.packer.push(frame);
}

/// Sends a port's datagram, if it holds frames. A socket that will not take it drops it (the
/// fabric is lossy; the sequence number tells the receiver).
fn send(p: &mut Port, socket: &UdpSocket, state: &quinn_udp::UdpSocketState, counters: &UdpCounters) {
    let (Some(peer), false) = (p.peer, p.packer.is_empty()) else {
        return;
    };
    let frames = p.packer.frames() as u64;
    let seq = p.next_seq_out;
    p.next_seq_out = seq.wrapping_add(1);
    let transmit = quinn_udp::Transmit {
        destination: peer,
        ecn: None,
        contents: p.packer.seal(seq),
        segment_size: None,
        src_ip: None,
    };
    match state.try_send(socket.into(), &transmit) {
        Ok(()) => {
            UdpCounters::add(&counters.datagrams_out, 1);
            UdpCounters::add(&counters.frames_out, frames);
        }
        Err(_) => UdpCounters::add(&counters.send_dropped_frames, frames),
    }
    p.packer.clear();
}
