//! Putting frames on a link: packing them into the port's datagram, sending it as the link's
//! credit allows, and the datagram size each path carries.

use super::*;

/// Adds a frame to a port's datagram, sending the datagram first if the frame does not fit
/// (the caller checked [`Port::has_room`]).
#[allow(clippy::too_many_arguments)] // the driver's fields, borrowed apart from its ports
pub(super) fn enqueue(
    ports: &mut [Port],
    port: PortId,
    frame: &[u8],
    socket: &UdpSocket,
    state: &quinn_udp::UdpSocketState,
    sealing: &Sealing,
    now: Instant,
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
        send(p, socket, state, sealing, now, counters);
    }
    if !p.packer.fits(frame.len()) {
        // The socket would not take the full datagram: this frame cannot wait anywhere.
        UdpCounters::add(&counters.send_dropped_frames, 1);
        return;
    }
    p.packer.push(frame);
}

pub(super) fn try_send(
    socket: &UdpSocket,
    state: &quinn_udp::UdpSocketState,
    destination: SocketAddr,
    contents: &[u8],
) -> io::Result<()> {
    let transmit = quinn_udp::Transmit {
        destination,
        ecn: None,
        contents,
        segment_size: None,
        src_ip: None,
    };
    state.try_send(socket.into(), &transmit)
}

/// Sends a port's datagram, if it holds frames, with the link's credit for the other way.
/// A full socket keeps the datagram for the next pass; any other error drops it (counted).
pub(super) fn send(
    p: &mut Port,
    socket: &UdpSocket,
    state: &quinn_udp::UdpSocketState,
    sealing: &Sealing,
    now: Instant,
    counters: &UdpCounters,
) -> bool {
    let (Some(peer), false) = (p.peer, p.packer.is_empty()) else {
        return false;
    };
    let frames = p.packer.frames() as u64;
    if !p.send.is_open() {
        UdpCounters::add(&counters.probes, 1);
    }
    let header = Header {
        epoch: sealing.epoch,
        peer_epoch: p.run.epoch(),
        sent_at_ns: wall_clock_ns(),
        seq: Some(p.send.take_seq(now)),
        limit: p.recv.report(),
    };
    match try_send(socket, state, peer, p.packer.seal(&header, &sealing.auth, peer)) {
        Ok(()) => {
            // It names this run: the peer needs no announcement of it.
            p.announce_due = false;
            UdpCounters::add(&counters.datagrams_out, 1);
            UdpCounters::add(&counters.frames_out, frames);
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            p.send.untake_seq();
            return false;
        }
        Err(e) => {
            UdpCounters::add(&counters.send_dropped_frames, frames);
            // The path's MTU shrank under the datagram (a route changed): its frames are gone
            // (reliable 1Pipe sends them again), the next datagrams are cut to fit.
            if e.raw_os_error() == Some(rustix::io::Errno::MSGSIZE.raw_os_error()) {
                let fits = path_datagram_bytes(peer).unwrap_or(PATH_DATAGRAM_BYTES_MIN);
                let capacity = port_datagram_bytes(p.packer.capacity(), Some(fits));
                p.packer.clear();
                p.packer.set_capacity(capacity);
                UdpCounters::add(&counters.path_mtu_cuts, 1);
            }
        }
    }
    p.packer.clear();
    true
}

/// The smallest datagram a link is cut to: IPv6's minimum MTU (1280) less its IP and UDP
/// headers, which every IPv6 path and any real IPv4 one carries.
pub const PATH_DATAGRAM_BYTES_MIN: usize = 1_232;
/// The largest frame that fits in a datagram on any path: what endpoints over UDP send by
/// default, so that no path between machines can refuse a frame (datagrams still pack many
/// frames up to each path's MTU).
pub const PATH_FRAME_BYTES_MAX: usize =
    PATH_DATAGRAM_BYTES_MIN - HEADER_LEN - datagram::FRAME_LEN_BYTES - datagram::TRAILER_LEN;

/// A link's datagram size: the configured one, or less where the path carries less, but never
/// below [`PATH_DATAGRAM_BYTES_MIN`] (a path that claims less is taken at that).
pub(super) fn port_datagram_bytes(configured: usize, path: Option<usize>) -> usize {
    path.map_or(configured, |b| b.max(PATH_DATAGRAM_BYTES_MIN).min(configured))
}

/// The largest UDP payload the route to `peer` carries unfragmented, as the kernel knows it:
/// the MTU of the path (its interface's, or less once ICMP taught it) less the IP and UDP
/// headers. `None` if the kernel cannot say (no route).
pub(super) fn path_datagram_bytes(peer: SocketAddr) -> Option<usize> {
    let any: SocketAddr = match peer {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let probe = UdpSocket::bind(any).ok()?;
    probe.connect(peer).ok()?;
    let (mtu, headers) = match peer {
        SocketAddr::V4(_) => (rustix::net::sockopt::ip_mtu(&probe).ok()?, 20 + 8),
        SocketAddr::V6(_) => (rustix::net::sockopt::ipv6_mtu(&probe).ok()?, 40 + 8),
    };
    (mtu as usize).checked_sub(headers)
}
