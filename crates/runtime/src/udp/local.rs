//! A whole topology over UDP inside one OS process: a socket per node, and a thread per node
//! or a few threads that share them ([`UdpConfig::threads`]), for `onepipe demo --runtime
//! udp` and the benchmarks (real deployments run `onepipe up`).
//!
//! Each node gets the loopback address of the default plan but a port the kernel picks, so
//! fabrics started side by side (tests, benchmarks) never collide. Any [`Node`] runs here:
//! 1Pipe's switches and endpoints, or the baselines.

#![allow(clippy::disallowed_methods)] // threads live here

use super::plan::{AddressPlan, PlanError};
use super::{
    Idle, IdlePolicy, Pass, RecvBufs, UdpConfig, UdpCounters, UdpDriver, UdpError, park, port_peers_of,
};
use crate::inproc::Clock;
use onepipe_fabric::node::Node;
use onepipe_fabric::wiring::{DirectedLink, Wiring};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("{nodes} nodes for a wiring of {expected}")]
    NodeCount { nodes: usize, expected: usize },
}

pub struct LocalFabric<N> {
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Every node, in the wiring's order; a thread runs a node while it holds its lock.
    members: Arc<Vec<Mutex<Member<N>>>>,
    stop: Arc<AtomicBool>,
    counters: Vec<Arc<UdpCounters>>,
}

/// Sums of every node's [`UdpCounters`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UdpTotals {
    pub datagrams_out: u64,
    pub frames_out: u64,
    pub lost_datagrams: u64,
    pub reordered_datagrams: u64,
    /// Frames dropped at a sender (a socket that refused, or no link).
    pub dropped_frames: u64,
    /// Frames dropped at a switch because the neighbour they were for is gone.
    pub peer_gone_frames: u64,
    /// Datagrams dropped at a receiver whose inbox was full.
    pub overrun_datagrams: u64,
    /// Times a frame waited for credit on its output link.
    pub blocked_frames: u64,
    /// Frames forwarded after waiting in an inbox, marked as congested.
    pub ecn_marked: u64,
    pub credit_datagrams: u64,
    pub probes: u64,
}

impl<N: Node + 'static> LocalFabric<N> {
    /// Starts `nodes` (one per runtime node of `wiring`: switches first, then processes).
    pub fn start(wiring: &Wiring, nodes: Vec<N>, udp: &UdpConfig, clock: Clock) -> Result<Self, LocalError> {
        let links = wiring.directed_links(onepipe_wire::Duration::ZERO);
        LocalFabric::start_linked(wiring, nodes, &links, udp, clock)
    }

    /// Starts `nodes` joined by `links`: the runtime nodes of `wiring`, then any more that
    /// `links` name (host representatives), each on a loopback address of their own.
    pub fn start_linked(
        wiring: &Wiring,
        nodes: Vec<N>,
        links: &[DirectedLink],
        udp: &UdpConfig,
        clock: Clock,
    ) -> Result<Self, LocalError> {
        let wired = wiring.switch_count() + wiring.process_count();
        let linked = links.iter().map(|l| l.from.0.max(l.to.0) + 1).max().unwrap_or(0);
        let expected = wired.max(linked);
        if nodes.len() != expected {
            return Err(LocalError::NodeCount {
                nodes: nodes.len(),
                expected,
            });
        }
        let plan = AddressPlan::new(wiring)?;
        let mut drivers = Vec::with_capacity(nodes.len());
        let mut bound = Vec::with_capacity(nodes.len());
        for n in 0..nodes.len() {
            let ip = match n.checked_sub(wired) {
                None => plan.node(n).ip(),
                Some(extra) => super::plan::extra_node(extra)?.ip(),
            };
            let local = SocketAddr::new(ip, 0);
            let d = UdpDriver::bind_addr(local, udp)?;
            bound.push(d.local_addr().map_err(UdpError::Io)?);
            drivers.push(d);
        }
        let peers = port_peers_of(links, nodes.len(), |n| bound[n]);
        let thread_count = udp.threads.unwrap_or(nodes.len()).clamp(1, nodes.len().max(1));
        let shared = thread_count < nodes.len();
        // Shared threads park on every node's socket: copies of them, since a node's own
        // socket is out of reach while another thread runs it.
        let park_sockets: Arc<[UdpSocket]> = match shared {
            true => drivers
                .iter()
                .map(|d| d.socket().try_clone())
                .collect::<Result<_, _>>()
                .map_err(UdpError::Io)?,
            false => Arc::new([]),
        };
        let mut counters = Vec::with_capacity(nodes.len());
        let mut members = Vec::with_capacity(nodes.len());
        for ((node, mut driver), ports) in nodes.into_iter().zip(drivers).zip(peers) {
            driver.set_ports(&ports);
            let c = Arc::new(UdpCounters::default());
            counters.push(c.clone());
            members.push(Mutex::new(Member {
                node,
                driver,
                counters: c,
            }));
        }
        let mut fabric = LocalFabric {
            threads: Vec::new(),
            members: Arc::new(members),
            stop: Arc::new(AtomicBool::new(false)),
            counters,
        };
        let idle = udp.idle;
        let schedule: Arc<[usize]> = shared_schedule(wiring.switch_count(), expected).into();
        let cursor = Arc::new(AtomicUsize::new(0));
        for t in 0..thread_count {
            let (stop, members, sockets) =
                (fabric.stop.clone(), fabric.members.clone(), park_sockets.clone());
            let (schedule, cursor) = (schedule.clone(), cursor.clone());
            let spawned = std::thread::Builder::new()
                .name("onepipe-udp-node".into())
                .spawn(move || match shared {
                    true => run_shared(&members, &schedule, &cursor, &sockets, idle, &clock, &stop),
                    false => {
                        let mut guard = members[t].lock().expect("nothing else runs this node");
                        let one = &mut *guard;
                        one.driver.run(&mut one.node, &clock, &stop, &one.counters)
                    }
                });
            match spawned {
                Ok(thread) => fabric.threads.push(thread),
                Err(e) => {
                    // The nodes already running stop with the half-built fabric.
                    fabric.stop();
                    return Err(UdpError::Io(e).into());
                }
            }
        }
        Ok(fabric)
    }

    pub fn totals(&self) -> UdpTotals {
        let mut t = UdpTotals::default();
        for c in self.counters.iter().map(|c| c.snapshot()) {
            t.datagrams_out += c.datagrams_out;
            t.frames_out += c.frames_out;
            t.lost_datagrams += c.lost;
            t.reordered_datagrams += c.reordered;
            t.dropped_frames += c.send_dropped_frames + c.no_link_frames;
            t.peer_gone_frames += c.peer_gone_frames;
            t.overrun_datagrams += c.overrun;
            t.blocked_frames += c.blocked_frames;
            t.ecn_marked += c.ecn_marked;
            t.credit_datagrams += c.credits_out;
            t.probes += c.probes;
        }
        t
    }

    /// Stops every node and hands them back, in the order they were given.
    pub fn stop(self) -> Vec<N> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("a node thread panicked");
        }
        let Ok(members) = Arc::try_unwrap(self.members) else {
            unreachable!("every thread holding the nodes has ended")
        };
        members
            .into_iter()
            .map(|m| m.into_inner().expect("a node thread panicked").node)
            .collect()
    }
}

/// A node with its socket, on whichever thread runs it.
struct Member<N> {
    node: N,
    driver: UdpDriver,
    counters: Arc<UdpCounters>,
}

/// Hosts visited between two visits of the switches in [`shared_schedule`].
const HOSTS_BETWEEN_SWITCH_VISITS: usize = 8;

/// The order in which the shared threads take the nodes, over and over: every host once, in
/// wiring order, and the switches (the first `switches` nodes) before each run of
/// [`HOSTS_BETWEEN_SWITCH_VISITS`] hosts, since a switch carries every host's traffic.
///
/// One order for all the threads, each taking the next node from a shared cursor, keeps the
/// hosts' visits in one cycle. Over udp a host's promise (docs/ordering.md, "Promises") is
/// made at the end of its visit, and what it sends in its next visit is stamped at that
/// promise; a receiver delivers it on arrival only if every host, the receiver included, has
/// promised again since. In one cycle that holds by the time it arrives. When each thread
/// went round the nodes from its own starting point, taking whatever the other was not
/// running, a host was often visited twice between two visits of another: at 32 processes a
/// third of what a host received still waited for the barrier at the end of its visit, and
/// was read again from memory a pass later (docs/notes/2026-11-udp-log.md, "One cycle of
/// visits").
fn shared_schedule(switches: usize, nodes: usize) -> Vec<usize> {
    let hosts: Vec<usize> = (switches..nodes).collect();
    if hosts.is_empty() {
        return (0..switches).collect();
    }
    hosts
        .chunks(HOSTS_BETWEEN_SWITCH_VISITS)
        .flat_map(|run| (0..switches).chain(run.iter().copied()))
        .collect()
}

/// Runs passes of the nodes with a few other threads, until `stop` is set: the thread takes
/// the next node of `schedule` from `cursor`, shared by every thread, and runs a pass of it
/// unless another thread is running it. So no thread idles while another has a backlog, and
/// the nodes are visited in one order whatever the number of threads. The thread parks (as
/// a lone node's would) only once a round of `schedule` found nothing to do, until a
/// datagram reaches any socket or the earliest timer.
fn run_shared<N: Node>(
    members: &[Mutex<Member<N>>],
    schedule: &[usize],
    cursor: &AtomicUsize,
    sockets: &[UdpSocket],
    policy: IdlePolicy,
    clock: &Clock,
    stop: &AtomicBool,
) {
    let sockets: Vec<&UdpSocket> = sockets.iter().collect();
    let mut idle = Idle::default();
    let mut bufs = RecvBufs::new();
    while !stop.load(Ordering::Relaxed) {
        let mut all = Pass {
            worked: false,
            received: false,
        };
        for _ in 0..schedule.len() {
            let next = cursor.fetch_add(1, Ordering::Relaxed) % schedule.len();
            let mut guard = match members[schedule[next]].try_lock() {
                Ok(g) => g,
                // Another thread is on it (or died in it, and the fabric stops).
                Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => continue,
            };
            let m = &mut *guard;
            let p = m.driver.pass(&mut m.node, clock, &m.counters, &mut bufs);
            all.worked |= p.worked;
            all.received |= p.received;
        }
        if idle.after_pass(all.received, all.worked, policy) {
            // Waits for a node another thread is running: that thread is busy, and this one
            // has nothing to do but sleep.
            let timeout = members
                .iter()
                .filter_map(|m| m.lock().ok().and_then(|m| m.node.poll_timeout()))
                .min();
            park(&sockets, timeout, clock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_once_per_round_with_the_switches_before_each_run_of_hosts() {
        // 2 switches, 20 hosts: runs of 8, 8 and 4 hosts, each after both switches.
        let s = shared_schedule(2, 22);
        let run = |from: usize, to: usize| (from..to).collect::<Vec<_>>();
        let expected = [
            vec![0, 1],
            run(2, 10),
            vec![0, 1],
            run(10, 18),
            vec![0, 1],
            run(18, 22),
        ]
        .concat();
        assert_eq!(s, expected);
        assert_eq!(
            shared_schedule(1, 3),
            [0, 1, 2],
            "a small system: the switch once per round"
        );
        assert_eq!(shared_schedule(3, 3), [0, 1, 2], "switches only");
    }
}
