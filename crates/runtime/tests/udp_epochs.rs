//! Runs of a peer over real sockets (docs/udp.md, "Authentication"): a node takes a peer's
//! datagrams in order within a run, drops replays of them, takes a later run as a restart it
//! counts (the link starts over), and drops the earlier run's datagrams from then on.

#![allow(clippy::disallowed_methods)] // waits on real time

use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::datagram::{Header, Packer};
use onepipe_runtime::udp::{UdpConfig, UdpCounters, UdpDriver};
use onepipe_wire::Instant;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Takes every frame and counts it.
struct Counting(Arc<AtomicU64>);

impl Node for Counting {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, _: Instant, _: PortId, _: &mut [u8], _: Route) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn poll_transmit(&mut self, _: Instant, _: PortId, _: &mut [u8]) -> Option<usize> {
        None
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
}

impl Hints for Counting {}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A datagram of the peer's run `epoch`, numbered `seq`, with one frame.
fn datagram(auth: &Auth, to: SocketAddr, epoch: u64, seq: u32) -> Vec<u8> {
    let mut p = Packer::new(1_500);
    p.push(b"frame");
    let header = Header {
        epoch,
        peer_epoch: 0,
        sent_at_ns: now_ns(),
        seq: Some(seq),
        limit: None,
    };
    p.seal(&header, auth, to).to_vec()
}

#[test]
fn a_restart_is_counted_and_the_earlier_run_is_dropped_for_good() {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let config = UdpConfig::default();
    let mut driver = UdpDriver::bind_addr("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    driver.set_ports(&[Some(peer.local_addr().unwrap())]);
    let to = driver.local_addr().unwrap();
    let (stop, counters, taken) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(UdpCounters::default()),
        Arc::new(AtomicU64::new(0)),
    );
    let running = {
        let (stop, counters, taken) = (stop.clone(), counters.clone(), taken.clone());
        std::thread::spawn(move || {
            let clock = Clock::from_system_time();
            driver.run(&mut Counting(taken), &clock, &stop, &counters)
        })
    };
    let wait_for = |what: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !what() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(what(), "{:?}", counters.snapshot());
    };
    let first_run = now_ns();
    let old = [100, 101].map(|seq| datagram(&config.auth, to, first_run, seq));
    for d in &old {
        peer.send_to(d, to).unwrap();
    }
    wait_for(&|| taken.load(Ordering::Relaxed) == 2);
    // Replayed within the run: older than what was taken.
    peer.send_to(&old[0], to).unwrap();
    wait_for(&|| counters.reordered.load(Ordering::Relaxed) == 1);
    // The peer restarts: a later epoch, numbering afresh (here from below the old numbers).
    let second_run = first_run + 1;
    peer.send_to(&datagram(&config.auth, to, second_run, 7), to)
        .unwrap();
    wait_for(&|| taken.load(Ordering::Relaxed) == 3);
    assert_eq!(counters.resyncs.load(Ordering::Relaxed), 1);
    // The earlier run is over for good, whatever its numbers.
    for seq in [102, 8, 1 << 31] {
        peer.send_to(&datagram(&config.auth, to, first_run, seq), to)
            .unwrap();
    }
    wait_for(&|| counters.stale_epoch.load(Ordering::Relaxed) == 3);
    peer.send_to(&datagram(&config.auth, to, second_run, 8), to)
        .unwrap();
    wait_for(&|| taken.load(Ordering::Relaxed) == 4);
    stop.store(true, Ordering::Relaxed);
    running.join().unwrap();
    let c = counters.snapshot();
    assert_eq!(
        (c.resyncs, c.stale_epoch, c.reordered, c.lost),
        (1, 3, 1, 0),
        "{c:?}"
    );
}
