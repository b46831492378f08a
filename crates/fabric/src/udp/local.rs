//! A whole topology over UDP inside one OS process: a socket per node, and a thread per node
//! or a few threads that share them ([`UdpConfig::threads`]), for `onepipe demo --runtime
//! udp` and the benchmarks (real deployments run `onepipe up`).
//!
//! Each node gets the loopback address of the default plan but a port the kernel picks, so
//! fabrics started side by side (tests, benchmarks) never collide. Any [`Node`] runs here:
//! 1Pipe's switches and endpoints, or the baselines.

#![allow(clippy::disallowed_methods)] // threads live here

use super::plan::{AddressPlan, PlanError};
use super::{Idle, Pass, UdpConfig, UdpCounters, UdpDriver, UdpError, park, port_peers};
use crate::inproc::Clock;
use crate::node::Node;
use crate::wiring::Wiring;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
    threads: Vec<std::thread::JoinHandle<Vec<Member<N>>>>,
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
    pub credit_datagrams: u64,
    pub probes: u64,
}

impl<N: Node + 'static> LocalFabric<N> {
    /// Starts `nodes` (one per runtime node of `wiring`: switches first, then processes).
    pub fn start(wiring: &Wiring, nodes: Vec<N>, udp: &UdpConfig, clock: Clock) -> Result<Self, LocalError> {
        let expected = wiring.switch_count() + wiring.process_count();
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
            let local = SocketAddr::new(plan.node(n).ip(), 0);
            let d = UdpDriver::bind_addr(local, udp)?;
            bound.push(d.local_addr().map_err(UdpError::Io)?);
            drivers.push(d);
        }
        let peers = port_peers(wiring, |n| bound[n]);
        let mut fabric = LocalFabric {
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            counters: Vec::with_capacity(nodes.len()),
        };
        let thread_count = udp.threads.unwrap_or(nodes.len()).clamp(1, nodes.len().max(1));
        let mut groups: Vec<Vec<Member<N>>> = (0..thread_count).map(|_| Vec::new()).collect();
        for (index, ((node, mut driver), ports)) in nodes.into_iter().zip(drivers).zip(peers).enumerate() {
            driver.set_ports(&ports);
            let counters = Arc::new(UdpCounters::default());
            fabric.counters.push(counters.clone());
            // Dealt round robin: switches come first in the wiring, so that each thread gets
            // its share of them.
            groups[index % thread_count].push(Member {
                index,
                node,
                driver,
                counters,
            });
        }
        for mut group in groups {
            let stop = fabric.stop.clone();
            let spawned = std::thread::Builder::new()
                .name("onepipe-udp-node".into())
                .spawn(move || {
                    match group.as_mut_slice() {
                        [one] => one.driver.run(&mut one.node, &clock, &stop, &one.counters),
                        many => run_shared(many, &clock, &stop),
                    }
                    group
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
            t.credit_datagrams += c.credits_out;
            t.probes += c.probes;
        }
        t
    }

    /// Stops every node and hands them back, in the order they were given.
    pub fn stop(self) -> Vec<N> {
        self.stop.store(true, Ordering::Relaxed);
        let mut members: Vec<Member<N>> = self
            .threads
            .into_iter()
            .flat_map(|t| t.join().expect("a node thread panicked"))
            .collect();
        members.sort_by_key(|m| m.index);
        members.into_iter().map(|m| m.node).collect()
    }
}

/// A node with its socket, on whichever thread runs it.
struct Member<N> {
    /// Its place in the wiring's order.
    index: usize,
    node: N,
    driver: UdpDriver,
    counters: Arc<UdpCounters>,
}

/// Runs several nodes on one thread, a pass of each in turn, until `stop` is set. The thread
/// parks (as a lone node's would) only once none of them has anything to do, until a datagram
/// reaches any of their sockets or the earliest of their timers.
fn run_shared<N: Node>(members: &mut [Member<N>], clock: &Clock, stop: &AtomicBool) {
    let Some(policy) = members.first().map(|m| m.driver.config().idle) else {
        return;
    };
    let mut idle = Idle::default();
    while !stop.load(Ordering::Relaxed) {
        let mut all = Pass {
            worked: false,
            received: false,
        };
        for m in members.iter_mut() {
            let p = m.driver.pass(&mut m.node, clock, &m.counters);
            all.worked |= p.worked;
            all.received |= p.received;
        }
        if idle.after_pass(all.received, all.worked, policy) {
            let sockets: Vec<&std::net::UdpSocket> = members.iter().map(|m| m.driver.socket()).collect();
            let timeout = members.iter().filter_map(|m| m.node.poll_timeout()).min();
            park(&sockets, timeout, clock);
        }
    }
}
