//! What a udp node counts, shared with the threads that report it (`onepipe inspect`).

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Without a tag where the fabric requires one, or under a key this node does not hold.
    pub unauthenticated: AtomicU64,
    /// With a tag that does not match: forged, damaged, or sent to another address.
    pub bad_tag: AtomicU64,
    /// Authentic but of an earlier run of their sender, or meant for an earlier run of this
    /// node: replays, or datagrams that outlived a restart.
    pub stale_epoch: AtomicU64,
    /// Arrived after a later datagram of their link: dropped to keep the link FIFO.
    pub reordered: AtomicU64,
    /// Datagrams missing from a link's sequence (lost in the network or a socket buffer).
    pub lost: AtomicU64,
    /// Frames dropped because the socket would not take their datagram.
    pub send_dropped_frames: AtomicU64,
    /// Datagrams refused as larger than their path's MTU, after which the link's datagrams
    /// were cut to the path (links start at the path's size; this counts later shrinking).
    pub path_mtu_cuts: AtomicU64,
    /// Datagrams dropped because their link's inbox was full: the peer sent past its credit
    /// (or restarted while we held its datagrams).
    pub overrun: AtomicU64,
    /// Peers seen to restart (a datagram of a later epoch): their links started over.
    pub resyncs: AtomicU64,
    /// Datagrams of a restarted peer's earlier run that were waiting in its link's inbox,
    /// dropped when it restarted.
    pub restart_dropped: AtomicU64,
    /// Times a frame had to wait because its output link had no credit (backpressure).
    pub blocked_frames: AtomicU64,
    /// Frames forwarded after waiting in their link's inbox, offered to the node to mark with
    /// a congestion signal (ECN, for DCTCP).
    pub ecn_marked: AtomicU64,
    /// Credit datagrams sent and received (credits riding on data are not counted).
    pub credits_out: AtomicU64,
    pub credits_in: AtomicU64,
    /// Datagrams that only tell a peer this node's epoch (it named an earlier run).
    pub announcements_out: AtomicU64,
    /// Key files read again after they changed, and changed ones that could not be read (the
    /// keys in use are kept).
    pub key_reloads: AtomicU64,
    pub key_reload_errors: AtomicU64,
    /// Datagrams sent past the limit because no credit came for a while (lost credit).
    pub probes: AtomicU64,
    /// Frames a node forwarded or originated on a port with no neighbour, or a cut link.
    pub no_link_frames: AtomicU64,
    /// Datagrams that arrived on a link cut by fault injection ([`LinkCuts`]).
    pub cut_datagrams: AtomicU64,
    /// Frames forwarded toward a neighbour the node declared gone ([`Node::peer_gone`]):
    /// dropped rather than held for credit that will not come.
    pub peer_gone_frames: AtomicU64,
    /// Datagrams dropped, and datagrams with one bit flipped, by fault injection
    /// ([`super::inject`]).
    pub injected_losses: AtomicU64,
    pub injected_corruptions: AtomicU64,
}

impl UdpCounters {
    pub(super) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters' values now, as plain numbers.
    pub fn snapshot(&self) -> UdpSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        UdpSnapshot {
            datagrams_in: l(&self.datagrams_in),
            datagrams_out: l(&self.datagrams_out),
            frames_in: l(&self.frames_in),
            frames_out: l(&self.frames_out),
            unknown_source: l(&self.unknown_source),
            malformed: l(&self.malformed),
            unauthenticated: l(&self.unauthenticated),
            bad_tag: l(&self.bad_tag),
            stale_epoch: l(&self.stale_epoch),
            reordered: l(&self.reordered),
            lost: l(&self.lost),
            send_dropped_frames: l(&self.send_dropped_frames),
            path_mtu_cuts: l(&self.path_mtu_cuts),
            no_link_frames: l(&self.no_link_frames),
            peer_gone_frames: l(&self.peer_gone_frames),
            cut_datagrams: l(&self.cut_datagrams),
            overrun: l(&self.overrun),
            resyncs: l(&self.resyncs),
            restart_dropped: l(&self.restart_dropped),
            blocked_frames: l(&self.blocked_frames),
            ecn_marked: l(&self.ecn_marked),
            credits_out: l(&self.credits_out),
            credits_in: l(&self.credits_in),
            announcements_out: l(&self.announcements_out),
            key_reloads: l(&self.key_reloads),
            key_reload_errors: l(&self.key_reload_errors),
            probes: l(&self.probes),
            injected_losses: l(&self.injected_losses),
            injected_corruptions: l(&self.injected_corruptions),
        }
    }
}

/// [`UdpCounters`] read at one moment (field by field; each is exact, together nearly so).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UdpSnapshot {
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub unknown_source: u64,
    pub malformed: u64,
    #[serde(default)]
    pub unauthenticated: u64,
    #[serde(default)]
    pub bad_tag: u64,
    #[serde(default)]
    pub stale_epoch: u64,
    pub reordered: u64,
    pub lost: u64,
    pub send_dropped_frames: u64,
    #[serde(default)]
    pub path_mtu_cuts: u64,
    pub no_link_frames: u64,
    #[serde(default)]
    pub peer_gone_frames: u64,
    #[serde(default)]
    pub cut_datagrams: u64,
    pub overrun: u64,
    pub resyncs: u64,
    #[serde(default)]
    pub restart_dropped: u64,
    pub blocked_frames: u64,
    #[serde(default)]
    pub ecn_marked: u64,
    pub credits_out: u64,
    pub credits_in: u64,
    #[serde(default)]
    pub announcements_out: u64,
    #[serde(default)]
    pub key_reloads: u64,
    #[serde(default)]
    pub key_reload_errors: u64,
    pub probes: u64,
    #[serde(default)]
    pub injected_losses: u64,
    #[serde(default)]
    pub injected_corruptions: u64,
}
