use super::*;
use onepipe_fabric::Hints;

#[test]
fn a_link_takes_the_smaller_of_the_configured_and_the_path_datagram() {
    // 1500-byte Ethernet between machines under the 8972 jumbo default.
    assert_eq!(port_datagram_bytes(8_972, Some(1_472)), 1_472);
    // Loopback (65536-byte MTU) carries more than configured.
    assert_eq!(port_datagram_bytes(8_972, Some(65_508)), 8_972);
    // The kernel cannot say: as configured.
    assert_eq!(port_datagram_bytes(8_972, None), 8_972);
    // A path claiming less than IPv6's minimum is taken at that.
    assert_eq!(port_datagram_bytes(8_972, Some(500)), PATH_DATAGRAM_BYTES_MIN);
    // Cutting an already cut link again never grows it.
    assert_eq!(port_datagram_bytes(1_472, Some(1_252)), 1_252);
}

/// A host that always has data and closes each visit with one frame.
struct Closing {
    closing: bool,
}

const DATA: u8 = 0xda;
const CLOSE: u8 = 0xc1;
const BYTES: usize = 4_000;

impl Node for Closing {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, _: &mut [u8], _: Route) {}
    fn poll_transmit(&mut self, _: Instant, _: PortId, buf: &mut [u8]) -> Option<usize> {
        let fill = if std::mem::take(&mut self.closing) {
            CLOSE
        } else {
            DATA
        };
        buf[..BYTES].fill(fill);
        Some(BYTES)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for Closing {
    fn wants_transmit(&self) -> bool {
        true
    }
    fn end_visit(&mut self, _: Instant) -> usize {
        self.closing = true;
        1
    }
}

/// A datagram from a neighbour whose frame is longer than any frame a node takes
/// (FRAME_MAX, the driver's buffer) is counted as malformed and dropped; the frames before
/// it are handed on. It used to index past the buffer and end the process (found by the
/// `datagram` fuzz target; crates/fuzz/regressions/datagram).
#[test]
fn a_frame_longer_than_a_node_takes_is_counted_not_a_crash() {
    let config = UdpConfig {
        auth: Auth::Off,
        ..UdpConfig::default()
    };
    let mut d = UdpDriver::bind_addr("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    d.set_ports(&[None]);
    let counters = UdpCounters::default();
    let mut node = Closing { closing: false };
    let mut packer = Packer::new(DATAGRAM_BYTES_LIMIT);
    packer.push(&[1; 64]);
    packer.push(&vec![2; FRAME_MAX + 1]);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let header = datagram::Header {
        epoch: now_ns,
        peer_epoch: 0,
        sent_at_ns: now_ns,
        seq: Some(7),
        limit: None,
    };
    let datagram = packer.seal(&header, &Auth::Off, d.local_addr().unwrap()).to_vec();
    let now = Instant::from_nanos(1_000_000_000);
    d.receive_datagram(&mut node, now, 0, &datagram, &counters);
    let seen = counters.snapshot();
    assert_eq!((seen.datagrams_in, seen.frames_in, seen.malformed), (1, 1, 1));
    // A port the driver does not have is a stranger's.
    d.receive_datagram(&mut node, now, 1, &datagram, &counters);
    assert_eq!(counters.snapshot().unknown_source, 1);
}

/// Under load a link's window is spent when a visit ends; the frames that close it (a
/// host's promise) still leave then, up to CLOSING_OVERDRAFT_DATAGRAMS past the window in
/// all, and nothing else does until credit comes.
#[test]
fn the_frames_closing_a_visit_leave_past_a_spent_window() {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_nonblocking(true).unwrap();
    let mut d = UdpDriver::bind_addr("127.0.0.1:0".parse().unwrap(), &UdpConfig::default()).unwrap();
    d.set_ports(&[Some(peer.local_addr().unwrap())]);
    let clock = Clock::new(Instant::from_nanos(1_000_000_000));
    let counters = UdpCounters::default();
    let mut node = Closing { closing: false };
    let received = |peer: &UdpSocket| {
        let mut buf = vec![0u8; 65_536];
        let mut datagrams = Vec::new();
        while let Ok(n) = peer.recv(&mut buf) {
            datagrams.push(buf[..n].to_vec());
        }
        datagrams
    };
    let mut bufs = RecvBufs::new();
    d.pass(&mut node, &clock, &counters, &mut bufs);
    let first = received(&peer);
    let window = link::INITIAL_WINDOW as usize;
    assert!(
        (window + 1..=window + CLOSING_OVERDRAFT_DATAGRAMS as usize).contains(&first.len()),
        "{} datagrams for a window of {window}",
        first.len()
    );
    let closes = |g: &[u8]| g.windows(BYTES).any(|w| w.iter().all(|&b| b == CLOSE));
    assert!(
        closes(first.last().unwrap()),
        "the last datagram carries the closing frame"
    );
    assert!(!first[..first.len() - 1].iter().any(|g| closes(g)));
    // No credit comes: later visits close within the same overdraft, then send nothing.
    let mut total = first.len();
    for _ in 0..4 {
        d.pass(&mut node, &clock, &counters, &mut bufs);
        total += received(&peer).len();
    }
    // A stall of the test past PROBE_AFTER lets a probe go too (counted as one).
    let probes = counters.probes.load(Ordering::Relaxed) as usize;
    assert_eq!(total, window + CLOSING_OVERDRAFT_DATAGRAMS as usize + probes);
}

#[test]
fn the_kernel_reports_the_loopback_path_and_a_loopback_link_is_not_cut() {
    let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let path = path_datagram_bytes(peer).expect("loopback has a route and an MTU");
    assert!(path >= PATH_DATAGRAM_BYTES_MIN, "loopback path of {path} bytes");
    let config = UdpConfig::default();
    let mut d = UdpDriver::bind_addr("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    d.set_ports(&[Some(peer), None]);
    let limited = d.path_limited_ports();
    if path >= config.datagram_bytes_max {
        assert!(limited.is_empty(), "{limited:?}");
    } else {
        assert_eq!(limited, vec![(0, peer, path)]);
    }
}
