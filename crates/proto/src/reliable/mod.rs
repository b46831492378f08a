//! Reliable 1Pipe (paper 5.1, 6.1): two-phase commit over the best-effort fabric.
//!
//! Prepare: every message goes to its receiver on a per (sender, receiver) connection with
//! packet sequence numbers, is acknowledged and, if lost, sent again ([`sender`],
//! [`receiver`]). Commit: each sender's commit barrier, the timestamp below which all its
//! messages are acknowledged, rides on every packet and beacon; switches aggregate it like the
//! best-effort barrier; a receiver delivers prepared messages below the commit barrier it hears,
//! in (timestamp, sender) order. Flow control gives each connection a receive window and DCTCP
//! a congestion window ([`dctcp`]); retransmission timeouts follow RFC 6298 ([`rtt`]).
//! Failure (paper 5.2): the sender aborts and recalls scatterings a failed receiver did not
//! acknowledge, with recall packets on the same connections (docs/reliable.md).

pub mod dctcp;
pub mod receiver;
pub mod rtt;
pub mod sender;

use onepipe_wire::Duration;

#[derive(Clone, Debug)]
pub struct ReliableConfig {
    /// Packets a receiver buffers for each sender (paper 6.1: provisioned on first contact);
    /// the send window never exceeds it.
    pub recv_window_packets: u32,
    pub initial_cwnd_packets: u32,
    pub max_cwnd_packets: u32,
    /// DCTCP's weight of the newest marked fraction in `alpha` (the DCTCP paper's g).
    pub dctcp_gain: f64,
    /// Retransmission timeout before the first RTT sample, its floor, and its cap (never
    /// below twice the smoothed RTT: see `RttEstimator::rto`).
    pub rto_initial: Duration,
    pub rto_min: Duration,
    pub rto_max: Duration,
    /// A message is given up and reported once one of its packets was retransmitted this many
    /// times and its connection has seen no acknowledgment progress for `give_up_after`. Long
    /// enough for an overloaded fabric: at 500 ms, 100 KB reliable broadcasts over udp (32
    /// processes) gave messages up on live receivers.
    pub retries_max: u32,
    pub give_up_after: Duration,
    /// With a controller (paper 5.2, Controller Forwarding): a packet retransmitted this many
    /// times without an ACK, on a connection without ACK progress for `forward_after`, is
    /// also handed to the controller to forward, and again after each further this many
    /// retransmissions. Fewer than `retries_max`, and `forward_after` well under
    /// `give_up_after`, so that forwarding comes before giving up; 0 never forwards.
    pub forward_after_retries: u32,
    pub forward_after: Duration,
    /// Reliable send buffer, in packets: waiting for window plus in flight.
    pub send_buffer_packets_max: usize,
    /// While this host has prepare packets to send, an ACK waits up to this long to ride on
    /// one going its way instead of taking a frame of its own. An idle host ACKs at once.
    pub ack_delay_max: Duration,
}

impl Default for ReliableConfig {
    fn default() -> ReliableConfig {
        ReliableConfig {
            recv_window_packets: 256,
            initial_cwnd_packets: 64,
            max_cwnd_packets: 1024,
            dctcp_gain: 1.0 / 16.0,
            // The floor covers the millisecond scheduling stalls of software fabrics on shared
            // cores only partly; what it retransmits spuriously, PSNs suppress.
            rto_initial: Duration::from_millis(1),
            rto_min: Duration::from_micros(100),
            // Losses here are random, not congestion: a low cap keeps one unlucky packet
            // from holding the commit barrier (and so everyone's delivery) for long.
            rto_max: Duration::from_millis(20),
            retries_max: 8,
            give_up_after: Duration::from_millis(2_000),
            // Three losses in a row are past what loss on a working path explains; 50 ms past
            // the scheduling stalls of shared cores, and leaves the controller's default
            // forward timeout (250 ms) time to settle it before `give_up_after`.
            forward_after_retries: 3,
            forward_after: Duration::from_millis(50),
            send_buffer_packets_max: 8192,
            ack_delay_max: Duration::from_millis(2),
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_recall;

/// Connections by peer process, created on first contact (paper 6.1). A process talks to few
/// of the processes of a large system, so the connections themselves are not sized by the
/// process count (a connection per process of 32K, at every one of 32K simulated processes, is
/// gigabytes); only the peer-to-connection index is, and only in small systems.
pub(crate) struct Connections<C> {
    items: Vec<C>,
    index: PeerIndex,
    /// The peers in increasing order, for scans that must be deterministic (connections are
    /// never closed, so this only grows; kept rather than sorted per scan, which was a tenth of
    /// the simulator's time with 511 peers and a retransmission timer firing every few us).
    order: Vec<u32>,
    process_count: u32,
}

/// Systems up to this many processes index connections by a table of one `u32` per process
/// (4 KiB); larger ones hash. Several lookups per message go through it, and the table has no
/// hashing and no probing (measured at 32 processes: see docs/notes/2026-11-performance-log.md).
const DENSE_INDEX_PROCESSES_MAX: u32 = 1024;

/// Where `items` keeps each peer's connection.
enum PeerIndex {
    /// `table[peer]`, `u32::MAX` for none.
    Dense(Vec<u32>),
    Sparse(std::collections::HashMap<u32, u32, std::hash::BuildHasherDefault<PeerHasher>>),
}

impl PeerIndex {
    fn get(&self, peer: u32) -> Option<usize> {
        match self {
            PeerIndex::Dense(table) => match table.get(peer as usize) {
                Some(&i) if i != u32::MAX => Some(i as usize),
                _ => None,
            },
            PeerIndex::Sparse(map) => map.get(&peer).map(|&i| i as usize),
        }
    }

    fn insert(&mut self, peer: u32, item: u32) {
        match self {
            PeerIndex::Dense(table) => table[peer as usize] = item,
            PeerIndex::Sparse(map) => {
                map.insert(peer, item);
            }
        }
    }
}

impl<C> Connections<C> {
    pub(crate) fn new(process_count: u32) -> Connections<C> {
        let index = if process_count <= DENSE_INDEX_PROCESSES_MAX {
            PeerIndex::Dense(vec![u32::MAX; process_count as usize])
        } else {
            PeerIndex::Sparse(Default::default())
        };
        Connections {
            items: Vec::new(),
            index,
            order: Vec::new(),
            process_count,
        }
    }

    pub(crate) fn get(&self, peer: u32) -> Option<&C> {
        self.index.get(peer).map(|i| &self.items[i])
    }

    pub(crate) fn get_mut(&mut self, peer: u32) -> Option<&mut C> {
        self.index.get(peer).map(|i| &mut self.items[i])
    }

    /// The connection to `peer`, opened with `open` if new; `None` for a process that does
    /// not exist (a forged or corrupt id).
    pub(crate) fn get_or_open(&mut self, peer: u32, open: impl FnOnce() -> C) -> Option<&mut C> {
        if peer >= self.process_count {
            return None;
        }
        let i = match self.index.get(peer) {
            Some(i) => i,
            None => {
                let i = self.items.len();
                self.items.push(open());
                self.index.insert(peer, i as u32);
                let at = self.order.partition_point(|&p| p < peer);
                self.order.insert(at, peer);
                i
            }
        };
        Some(&mut self.items[i])
    }

    /// How many peers have a connection.
    pub(crate) fn peer_count(&self) -> usize {
        self.order.len()
    }

    /// The `i`th peer with a connection, in increasing order (deterministic whatever the
    /// table does).
    pub(crate) fn peer_at(&self, i: usize) -> u32 {
        self.order[i]
    }
}

/// Process ids are dense small integers chosen by the system, not by an attacker who could
/// pick colliding keys, so one multiply spreads them well enough and costs next to nothing on
/// the per-packet path. Deterministic, unlike the default hasher, which the simulator needs.
#[derive(Default)]
pub(crate) struct PeerHasher(u64);

impl std::hash::Hasher for PeerHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}
