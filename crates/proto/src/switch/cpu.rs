//! The switch-CPU incarnation (paper 6.2.2): the data plane forwards and stamps nothing, and
//! beacons are punted to the CPU. The CPU takes each one `delay` after it arrived, into the
//! same per-input registers a chip would keep, and sends beacons on every output each
//! interval, busy or idle, and on news (`Switch::propagate`).
//!
//! Why a beacon sent by the CPU still bounds its link: a data packet that arrived on input i
//! before i's beacon was forwarded at once, so it sits on its output link ahead of any beacon
//! the CPU sends after taking i's beacon; one that arrived after it carries a timestamp at or
//! above that beacon's barrier. Links and queues are FIFO. Taking a beacon late only lowers
//! what the CPU sends, never raises it.

use super::Switch;
use onepipe_fabric::Route;
use onepipe_wire::Instant;
use onepipe_wire::packet::Packet;
use std::collections::VecDeque;

/// Punted beacons the CPU holds per port: a CPU that falls further behind drops new ones on
/// that port (counted), and its links look slow, then dead. Per port, not shared: a runtime
/// that hands a switch its ports' frames in a fixed order (inproc's passes) would otherwise fill
/// a shared queue from the first ports every pass, and the last ones' links would die.
const PUNTED_PER_PORT_MAX: usize = 8;

/// A beacon waiting for the CPU.
#[derive(Clone, Copy, Debug)]
struct Punted {
    /// When the CPU takes it: arrival plus the CPU delay.
    due: Instant,
    arrived: Instant,
    port: usize,
    heard: [Instant; 2],
}

/// The CPU's queue of punted beacons. Its entries are due in arrival order (the delay is the
/// same for all), so the front is always the next one due.
#[derive(Clone, Debug, Default)]
pub(super) struct CpuAgent {
    queue: VecDeque<Punted>,
    /// Beacons waiting, per port.
    queued: Vec<u8>,
    /// The longest a beacon waited from arrival until the CPU took it, in ns.
    pub(super) lag_max_ns: u64,
    /// The lag of the last beacon taken, in ns.
    pub(super) lag_last_ns: u64,
    pub(super) overflow_drops: u64,
}

/// What the CPU agent shows of itself (`Switch::cpu_status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStatus {
    /// Beacons waiting for the CPU.
    pub backlog: usize,
    pub lag_last_ns: u64,
    pub lag_max_ns: u64,
    /// Beacons dropped because the CPU's queue was full.
    pub overflow_drops: u64,
}

impl CpuAgent {
    pub(super) fn new(ports: usize) -> CpuAgent {
        CpuAgent {
            queued: vec![0; ports],
            ..CpuAgent::default()
        }
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|p| p.due)
    }

    pub(super) fn invariants(&self) {
        assert!(
            self.queued.iter().all(|&q| q as usize <= PUNTED_PER_PORT_MAX),
            "the punt queue is bounded per port"
        );
        assert_eq!(
            self.queued.iter().map(|&q| q as usize).sum::<usize>(),
            self.queue.len(),
            "per-port counts match the queue"
        );
        assert!(
            self.queue
                .iter()
                .zip(self.queue.iter().skip(1))
                .all(|(a, b)| a.due <= b.due),
            "punted beacons are due in arrival order"
        );
    }
}

impl Switch {
    /// A frame through a data plane that only forwards: a beacon goes to the CPU, anything
    /// else out of its port as it is.
    pub(super) fn handle_forward_only(
        &mut self,
        now: Instant,
        port: usize,
        packet: &mut Packet<&mut [u8]>,
        route: Route,
    ) {
        match route {
            Route::Consume => self.punt(now, port, super::heard_barriers(packet, now)),
            Route::Forward(out) => {
                packet.set_link_id(self.ports[out as usize].peer_port);
                self.counters.forwarded += 1
            }
            Route::Drop if !self.source_matches(port as u16, packet.src()) => {
                self.counters.spoofed_source += 1
            }
            Route::Drop => self.counters.no_route += 1,
        }
    }

    fn punt(&mut self, now: Instant, port: usize, heard: [Instant; 2]) {
        let delay = self.config.incarnation.cpu_delay();
        let cpu = self.cpu.as_mut().expect("forward-only switches have a CPU agent");
        self.counters.beacons_received += 1;
        if cpu.queued[port] as usize >= PUNTED_PER_PORT_MAX {
            cpu.overflow_drops += 1;
            return;
        }
        cpu.queued[port] += 1;
        // Due in arrival order even if the delay changed: never before the one ahead.
        let due = cpu.queue.back().map_or(now + delay, |b| b.due.max(now + delay));
        cpu.queue.push_back(Punted {
            due,
            arrived: now,
            port,
            heard,
        });
    }

    /// The CPU takes every punted beacon due by `now`, then passes on what is news.
    pub(super) fn run_cpu(&mut self, now: Instant) {
        while let Some(cpu) = self.cpu.as_mut() {
            let Some(p) = cpu.queue.front().copied().filter(|p| p.due <= now) else {
                break;
            };
            cpu.queue.pop_front();
            cpu.queued[p.port] -= 1;
            let lag_ns = now.saturating_since(p.arrived).as_nanos();
            cpu.lag_last_ns = lag_ns;
            cpu.lag_max_ns = cpu.lag_max_ns.max(lag_ns);
            // A port cut while its beacon waited: the data plane would not have punted it.
            if !self.ports[p.port].cut {
                self.hear(now, p.port, p.heard);
            }
        }
        self.propagate();
    }

    /// The CPU agent's queue and lag; `None` on a chip.
    pub fn cpu_status(&self) -> Option<CpuStatus> {
        self.cpu.as_ref().map(|c| CpuStatus {
            backlog: c.queue.len(),
            lag_last_ns: c.lag_last_ns,
            lag_max_ns: c.lag_max_ns,
            overflow_drops: c.overflow_drops,
        })
    }
}
