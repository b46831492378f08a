//! The udp runtime's datagrams (crates/runtime/src/udp/datagram.rs): `parse_header` and the
//! walk of the frames with `frame_at`, then the driver's receive path without a socket's
//! traffic (`UdpDriver::receive_datagram`: sequence numbers, credits, inboxes, frames handed
//! to a real switch). The input is one datagram, or (mode 1) a recipe for a run of datagrams
//! on the switch's links: headers with sequence numbers near the expected ones or anywhere,
//! credits, frames well formed, damaged or oversized, and damage to the packing itself.

use crate::fixture::{self, START};
use crate::frames::{self, Draw, Peers};
use crate::targets::advance;
use onepipe_fabric::PortId;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::datagram::{self, HEADER_LEN, Header, Packer};
use onepipe_runtime::udp::{UdpConfig, UdpCounters, UdpDriver};
use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};

/// Datagrams one input sends through the driver at most.
const DATAGRAMS_MAX: usize = 32;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 2 {
        0 => {
            walk(rest);
        }
        _ => through_driver(&mut Draw::new(rest)),
    }
}

/// Reads the header and every frame, as the driver does; returns the frames' count.
pub fn walk(d: &[u8]) -> usize {
    let Ok(header) = datagram::parse_header(d) else {
        return 0;
    };
    if header.seq.is_none() {
        assert_eq!(d.len(), HEADER_LEN, "a credit carries nothing else");
    }
    let mut at = HEADER_LEN;
    let mut frames = 0;
    while let Ok(Some((range, next))) = datagram::frame_at(d, at) {
        assert!(next > at && range.end == next && range.end <= d.len());
        assert!(!range.is_empty());
        at = next;
        frames += 1;
    }
    frames
}

/// Where untagged datagrams are addressed (no tag covers it).
const UNSIGNED: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 9));

/// A header from a sender's run: mostly one the driver takes (a run started now, sent now),
/// sometimes any. The driver compares a sender's run with its own start on the system clock,
/// so a header it takes must read that clock too.
#[allow(clippy::disallowed_methods)]
fn header(d: &mut Draw, seq: Option<u32>) -> Header {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_nanos() as u64);
    let wild = d.u8() % 8 == 0;
    Header {
        epoch: if wild { d.u64() } else { now_ns },
        peer_epoch: if wild { d.u64() } else { 0 },
        sent_at_ns: if wild { d.u64() } else { now_ns },
        seq,
        limit: None,
    }
}

/// A datagram for a link: frames packed behind a header, or a credit, perhaps damaged.
fn datagram(d: &mut Draw, now: onepipe_wire::Instant, seq: u32) -> Vec<u8> {
    let peers = Peers {
        processes: fixture::fabric().wiring.process_count() as u32,
        links: 4,
    };
    if d.u8() % 8 == 0 {
        let header = Header {
            limit: Some(d.u32()),
            ..header(d, None)
        };
        let (buf, len) = datagram::control(&header, &Auth::Off, UNSIGNED);
        return buf[..len].to_vec();
    }
    let mut packer = Packer::new(onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT);
    for _ in 0..1 + d.below(4) {
        let f = match d.u8() % 16 {
            // Longer than any frame a node takes (FRAME_MAX) but within a datagram.
            0 => vec![d.u8(); 9217 + d.below(16)],
            _ => frames::frame(d, now, peers),
        };
        if !f.is_empty() && packer.fits(f.len()) {
            packer.push(&f);
        }
    }
    let limit = d.bool().then(|| d.u32());
    let header = Header {
        limit,
        ..header(d, Some(seq))
    };
    let mut out = packer.seal(&header, &Auth::Off, UNSIGNED).to_vec();
    if d.u8() % 8 == 0 {
        let at = d.below(out.len());
        out[at] = d.u8();
    }
    if d.u8() % 16 == 0 {
        out.truncate(d.below(out.len()));
    }
    out
}

thread_local! {
    /// One driver per thread, its ports set afresh for each input (which resets every link's
    /// state): binding sockets for each input made this target forty times slower. The
    /// neighbours' datagrams go to a socket nobody reads; what cannot be sent is counted.
    static DRIVER: RefCell<Option<(UdpSocket, UdpDriver)>> = const { RefCell::new(None) };
}

fn through_driver(d: &mut Draw) {
    DRIVER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let local: SocketAddr = "127.0.0.1:0".parse().expect("an address");
            let sink = UdpSocket::bind(local).expect("a loopback socket");
            // Unauthenticated, so that inputs reach the framing, links and switch behind the
            // tag check (which `refused_and_counted` and the driver's unit tests cover).
            let config = UdpConfig {
                auth: Auth::Off,
                ..UdpConfig::default()
            };
            let driver = UdpDriver::bind_addr(local, &config).expect("a loopback socket");
            *slot = Some((sink, driver));
        }
        let (sink, driver) = slot.as_mut().expect("bound above");
        let peer = sink.local_addr().expect("a bound socket");
        feed(d, driver, peer);
    });
}

/// Datagrams drawn from `d`, through `driver` into a switch whose neighbours are at `peer`.
fn feed(d: &mut Draw, driver: &mut UdpDriver, peer: SocketAddr) {
    let fabric = fixture::fabric();
    let id = d.below(fabric.wiring.switch_count());
    let mut node = fixture::switch_node(id);
    let ports = fabric.wiring.switch_ports[id].len();
    let peers: Vec<Option<SocketAddr>> = (0..ports).map(|p| (p % 3 != 2).then_some(peer)).collect();
    driver.set_ports(&peers);
    let counters = UdpCounters::default();
    let mut seqs = vec![d.u32(); ports];
    let mut now = START;
    for _ in 0..DATAGRAMS_MAX {
        if d.is_empty() {
            break;
        }
        now = advance(d, now);
        let port = d.below(ports + 1) as PortId;
        let p = (port as usize).min(ports - 1);
        seqs[p] = match d.u8() % 8 {
            0 => d.u32(),
            1 => seqs[p].wrapping_sub(d.below(4) as u32),
            _ => seqs[p].wrapping_add(1 + d.below(2) as u32),
        };
        let bytes = datagram(d, now, seqs[p]);
        walk(&bytes);
        driver.receive_datagram(&mut node, now, port, &bytes, &counters);
        crate::targets::switch::check(&node);
    }
}
