//! Hop-by-hop credit flow control for one udp link: what PFC is to the paper's RoCE testbed.
//! Without it a saturated fabric loses most datagrams in full socket buffers; with it a sender
//! waits until the next hop has room, so the fabric is lossless on one machine and the baselines
//! (which never retransmit) can run over it.
//!
//! Credits count datagrams. The receiver of a link grants up to `limit`, the first sequence
//! number its sender may not send yet: the first datagram it has not finished handing to its
//! node, plus its window. A datagram is finished when every frame in it has been handled; frames
//! whose output port is full wait in the link's inbox, so a blocked switch stops granting and
//! its upstream stops sending, hop by hop back to the hosts. The limit rides on every datagram
//! of the reverse link, or in a credit datagram of its own when the reverse link is quiet.
//!
//! Credits themselves are never flow-controlled, and the receiver keeps reading its socket while
//! blocked (it must see credits to unblock). Routing is up-down, so buffer waits cannot form a
//! cycle (the classic PFC deadlock).
//!
//! Loss (across machines, or a peer that restarts) can leave a sender waiting for credit that
//! will not come: after [`PROBE_AFTER`] without a new limit it sends one datagram anyway, whose
//! arrival tells the receiver where the sender is. A receiver accepts at most
//! `2 * window` datagrams into the inbox; more (a peer that ignores credits) are dropped and
//! counted as overrun.

use super::datagram::seq_before;
use onepipe_wire::{Duration, Instant};
use std::collections::VecDeque;

/// Datagrams a sender may have outstanding before its peer has told it anything.
pub const INITIAL_WINDOW: u32 = 4;
/// A blocked sender that has heard no new limit for this long sends one datagram anyway, and
/// waits twice as long before each further probe while the limit stays put, up to
/// [`PROBE_AFTER_MAX`]. A probe goes past the limit: into a receiver that is only slow, it
/// takes a place in an inbox that holds two windows, and once probes fill it they are lost.
/// Probing every 20 ms, 100 KB best-effort broadcasts over udp (32 processes, links blocked
/// for hundreds of milliseconds) lost 9-27 datagrams per 0.5 s run that way; none since.
pub const PROBE_AFTER: Duration = Duration::from_millis(20);
pub const PROBE_AFTER_MAX: Duration = Duration::from_millis(640);
/// A limit this far past the next sequence number cannot be meant for this sender.
const LIMIT_DISTANCE_MAX: u32 = 1 << 24;
/// A limit answers this run's datagrams if it lies past the first of them and at most this
/// far past the next (a receiver grants its window past what it took: at most 16 datagrams
/// in the udp driver, so a stale limit of an earlier run passes only by a 2^-24 chance).
const ANSWER_SLACK: u32 = 256;

/// The sending half of a link.
#[derive(Clone, Debug)]
pub struct SendWindow {
    /// The number of this run's first datagram.
    first_seq: u32,
    next_seq: u32,
    limit: u32,
    /// When the limit last moved, or a probe went; `None` before the first datagram.
    limit_moved_at: Option<Instant>,
    /// Probes sent since the limit last moved.
    probes: u32,
    /// Datagrams allowed past the limit for now ([`SendWindow::set_overdraft`]).
    overdraft: u32,
}

impl SendWindow {
    /// Starts numbering at `initial_seq` (random per start, so a restart is recognised).
    pub fn new(initial_seq: u32) -> SendWindow {
        SendWindow {
            first_seq: initial_seq,
            next_seq: initial_seq,
            limit: initial_seq.wrapping_add(INITIAL_WINDOW),
            limit_moved_at: None,
            probes: 0,
            overdraft: 0,
        }
    }

    /// Whether the next datagram may go now.
    pub fn is_open(&self) -> bool {
        seq_before(self.next_seq, self.limit.wrapping_add(self.overdraft))
    }

    /// Lets up to `datagrams` go past the limit until set back to 0: the few frames that
    /// close a host's visit in promise mode (`Node::end_visit`), which would otherwise wait
    /// behind the window for the host's next visit with their promise.
    pub fn set_overdraft(&mut self, datagrams: u32) {
        self.overdraft = datagrams;
    }

    /// Whether a blocked link should send one datagram past its limit (credit lost).
    pub fn should_probe(&self, now: Instant) -> bool {
        let wait = PROBE_AFTER
            .saturating_mul(1 << self.probes.min(16))
            .min(PROBE_AFTER_MAX);
        !self.is_open()
            && self
                .limit_moved_at
                .is_some_and(|t| now.saturating_since(t) >= wait)
    }

    /// Takes the sequence number of a datagram about to leave.
    pub fn take_seq(&mut self, now: Instant) -> u32 {
        if !self.is_open() {
            // A probe: the next one waits twice as long.
            self.probes = self.probes.saturating_add(1);
            self.limit_moved_at = Some(now);
        } else if self.limit_moved_at.is_none() {
            // The first datagram starts the clock for a peer that never answers.
            self.limit_moved_at = Some(now);
        }
        let seq = self.next_seq;
        self.next_seq = seq.wrapping_add(1);
        seq
    }

    /// Gives back a sequence number taken for a datagram the socket would not take.
    pub fn untake_seq(&mut self) {
        self.next_seq = self.next_seq.wrapping_sub(1);
    }

    /// The peer restarted (a datagram of a new epoch, [`PeerRun::observe`]): it takes our next
    /// datagram whatever its number, so we may send as at a start, at once. Without this a
    /// sender blocked while the peer was down waited for its next probe, up to
    /// [`PROBE_AFTER_MAX`], and the restarted peer cannot grant credit before it has heard
    /// one (found over udp: a standby controller heard a process's answer that late).
    pub fn on_peer_restart(&mut self, now: Instant) {
        self.limit = self.next_seq.wrapping_add(INITIAL_WINDOW);
        self.limit_moved_at = Some(now);
        self.probes = 0;
    }

    /// The peer's latest limit. Limits only grow: an old one overtaken by a newer is ignored,
    /// and so is one far from this sender's numbering (granted to an earlier run of it).
    /// Returns whether the limit answers a datagram of this run: the peer has taken one.
    pub fn on_limit(&mut self, limit: u32, now: Instant) -> bool {
        let near = limit.wrapping_sub(self.next_seq) <= LIMIT_DISTANCE_MAX;
        if near && seq_before(self.limit, limit) {
            self.limit = limit;
            self.limit_moved_at = Some(now);
            self.probes = 0;
        }
        let past_first = limit.wrapping_sub(self.first_seq);
        past_first >= 1
            && past_first
                <= self
                    .next_seq
                    .wrapping_sub(self.first_seq)
                    .saturating_add(ANSWER_SLACK)
    }
}

/// How an arriving datagram fits its link's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// In order; `lost` datagrams before it never came.
    Take { lost: u32 },
    /// Older than one already taken: dropped to keep the link FIFO.
    Reordered,
    /// The inbox is full: the peer sent past its credit.
    Overrun,
}

/// Which run of its peer a link hears: the epoch of the latest datagram taken (see
/// `datagram`). Epochs are start times, so a later run of the peer has a larger one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerRun {
    /// 0 before the first datagram.
    epoch: u64,
}

/// How a datagram's sender epoch fits its link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFit {
    /// The run the link already hears.
    Same,
    /// The first datagram the link hears.
    First,
    /// A later run: the peer restarted, and the link starts over (a reported event).
    Restarted,
    /// An earlier run (a replay, or a datagram that outlived its sender): dropped.
    Old,
}

impl PeerRun {
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sorts a datagram of sender epoch `epoch` (authenticated, or the fabric runs without).
    pub fn observe(&mut self, epoch: u64) -> RunFit {
        let fit = match epoch.cmp(&self.epoch) {
            std::cmp::Ordering::Less => return RunFit::Old,
            std::cmp::Ordering::Equal => return RunFit::Same,
            std::cmp::Ordering::Greater if self.epoch == 0 => RunFit::First,
            std::cmp::Ordering::Greater => RunFit::Restarted,
        };
        self.epoch = epoch;
        fit
    }
}

/// How much earlier than a receiver's start (by the receiver's clock) a datagram may have
/// been sent by its sender's clock and still count as sent to this run: the clocks' skew
/// (synchronized by PTP or chrony across machines, one clock on one machine) with room.
pub const START_SKEW_MAX: Duration = Duration::from_millis(100);

/// Whether a datagram that names the receiver's epoch as `peer_epoch` and was sent at
/// `sent_at_ns` is meant for the run `own` of the receiver: it names that run; or its sender
/// has not heard from the receiver yet (0) and sent it after the receiver started (less
/// [`START_SKEW_MAX`]). Without the second condition, datagrams captured while the receiver
/// was down, or from a sender's earlier run, could be replayed into a receiver that has not
/// heard the sender yet.
pub fn meant_for(own: u64, peer_epoch: u64, sent_at_ns: u64) -> bool {
    match peer_epoch {
        0 => sent_at_ns.saturating_add(START_SKEW_MAX.as_nanos()) >= own,
        named => named == own,
    }
}

/// What is left of a datagram whose frames could not all be handed on yet.
#[derive(Debug)]
pub struct Parked {
    pub seq: u32,
    pub datagram: Vec<u8>,
    /// Offset of the first frame not yet handled.
    pub at: usize,
}

/// The receiving half of a link.
#[derive(Debug)]
pub struct ReceiveWindow {
    /// The next sequence number expected; `None` before the first datagram.
    expected: Option<u32>,
    window: u32,
    /// Datagrams taken but not finished, oldest first.
    pub inbox: VecDeque<Parked>,
    /// The last limit the peer was told.
    reported: Option<u32>,
}

impl ReceiveWindow {
    pub fn new(window: u32) -> ReceiveWindow {
        ReceiveWindow {
            expected: None,
            window: window.max(1),
            inbox: VecDeque::new(),
            reported: None,
        }
    }

    pub fn window(&self) -> u32 {
        self.window
    }

    /// Sorts an arriving datagram; the caller hands its frames on (or parks them) if taken.
    pub fn arrive(&mut self, seq: u32) -> Arrival {
        let Some(expected) = self.expected else {
            self.expected = Some(seq.wrapping_add(1));
            return Arrival::Take { lost: 0 };
        };
        // Within one run of the peer (epochs tell runs apart, `PeerRun`) numbers only grow:
        // one below the expected is older than one taken.
        if seq_before(seq, expected) {
            return Arrival::Reordered;
        }
        if self.inbox.len() >= 2 * self.window as usize {
            return Arrival::Overrun;
        }
        self.expected = Some(seq.wrapping_add(1));
        Arrival::Take {
            lost: seq.wrapping_sub(expected),
        }
    }

    /// The peer restarted: the link starts over from its next datagram. Returns the datagrams
    /// of its earlier run that were taken but not finished, dropped now: their sender is gone,
    /// and the restarted one numbers (and is granted credit) afresh.
    pub fn restart(&mut self) -> usize {
        let dropped = self.inbox.len();
        self.inbox.clear();
        self.expected = None;
        self.reported = None;
        dropped
    }

    /// The credit to grant: the first unfinished datagram plus the window (`None` before the
    /// first datagram, when the peer's numbering is unknown).
    pub fn limit(&self) -> Option<u32> {
        let first_unfinished = self.inbox.front().map(|p| p.seq).or(self.expected)?;
        Some(first_unfinished.wrapping_add(self.window))
    }

    /// Whether a credit datagram should go now: a quarter window has been freed since the last
    /// report, or the peer has used all it was given (it is waiting) and anything was freed.
    pub fn credit_due(&self) -> bool {
        let (Some(limit), Some(expected)) = (self.limit(), self.expected) else {
            return false;
        };
        let Some(reported) = self.reported else {
            return true;
        };
        let freed = limit.wrapping_sub(reported);
        if freed == 0 || seq_before(limit, reported) {
            return false;
        }
        freed >= (self.window / 4).max(1) || !seq_before(expected, reported)
    }

    /// The limit to send now; records it as told.
    pub fn report(&mut self) -> Option<u32> {
        let limit = self.limit()?;
        self.reported = Some(limit);
        Some(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn an_overdraft_lets_a_few_datagrams_past_the_limit_without_probing() {
        let mut s = SendWindow::new(7);
        for _ in 0..INITIAL_WINDOW {
            s.take_seq(t(0));
        }
        assert!(!s.is_open());
        s.set_overdraft(2);
        for _ in 0..2 {
            assert!(s.is_open());
            s.take_seq(t(0));
        }
        assert!(!s.is_open(), "two past the limit, no more");
        assert_eq!(s.probes, 0, "not probes: the window's backoff is untouched");
        s.set_overdraft(0);
        // Credit for the window covers the overdrawn datagrams first.
        s.on_limit(7 + INITIAL_WINDOW + 2, t(1));
        assert!(!s.is_open());
        s.on_limit(7 + INITIAL_WINDOW + 3, t(1));
        assert!(s.is_open());
    }

    #[test]
    fn a_sender_stops_at_its_limit_and_goes_on_when_credit_comes() {
        let mut s = SendWindow::new(u32::MAX - 1);
        for _ in 0..INITIAL_WINDOW {
            assert!(s.is_open());
            s.take_seq(t(0));
        }
        assert!(!s.is_open());
        assert!(!s.should_probe(t(1)));
        s.on_limit((u32::MAX - 1).wrapping_add(INITIAL_WINDOW + 2), t(1)); // wraps past zero
        assert!(s.is_open());
        // An older limit arriving late changes nothing.
        s.on_limit(u32::MAX, t(2));
        s.take_seq(t(2));
        s.take_seq(t(2));
        assert!(!s.is_open());
    }

    #[test]
    fn a_sender_without_credit_probes_less_and_less_often_until_the_limit_moves() {
        let mut s = SendWindow::new(0);
        for _ in 0..INITIAL_WINDOW {
            s.take_seq(t(0));
        }
        let period = PROBE_AFTER.as_nanos() / 1_000_000;
        let max = PROBE_AFTER_MAX.as_nanos() / 1_000_000;
        assert!(!s.should_probe(t(period - 1)));
        assert!(s.should_probe(t(period)));
        s.take_seq(t(period));
        assert!(!s.should_probe(t(period + 1)));
        assert!(!s.should_probe(t(2 * period)), "the second waits twice as long");
        assert!(s.should_probe(t(3 * period)));
        s.take_seq(t(3 * period));
        assert!(!s.should_probe(t(6 * period)));
        assert!(s.should_probe(t(7 * period)));
        // Up to a bound.
        let mut at = 7 * period;
        for _ in 0..10 {
            s.take_seq(t(at));
            at += max;
        }
        assert!(s.should_probe(t(at)));
        // A limit that moves (though still closed here) starts the probes over.
        let sent = INITIAL_WINDOW + 2 + 10;
        s.on_limit(sent, t(at));
        assert!(!s.is_open());
        assert!(s.should_probe(t(at + period)));
    }

    #[test]
    fn a_sender_blocked_while_its_peer_was_down_sends_once_it_restarted() {
        let mut s = SendWindow::new(7);
        let mut at = 0;
        for _ in 0..INITIAL_WINDOW + 12 {
            s.take_seq(t(at)); // the window, then probes into the void
            at += PROBE_AFTER_MAX.as_nanos() / 1_000_000;
        }
        at -= 1;
        assert!(!s.is_open());
        assert!(!s.should_probe(t(at)), "probing at its slowest");
        s.on_peer_restart(t(at));
        for _ in 0..INITIAL_WINDOW {
            assert!(s.is_open());
            s.take_seq(t(at));
        }
        assert!(!s.is_open());
        // Its credit then counts from where this sender is, as at any start.
        assert!(s.on_limit(s.next_seq.wrapping_add(8), t(at + 1)));
        assert!(s.is_open());
    }

    #[test]
    fn the_limit_follows_the_first_unfinished_datagram() {
        let mut r = ReceiveWindow::new(8);
        assert_eq!(r.limit(), None);
        assert!(!r.credit_due());
        assert_eq!(r.arrive(100), Arrival::Take { lost: 0 });
        assert_eq!(r.limit(), Some(109));
        assert!(r.credit_due(), "the first limit is always news");
        assert_eq!(r.report(), Some(109));
        // 101 parks (its output is full); 102 and 103 queue behind it.
        for seq in 101..104 {
            assert_eq!(r.arrive(seq), Arrival::Take { lost: 0 });
            r.inbox.push_back(Parked {
                seq,
                datagram: Vec::new(),
                at: 0,
            });
        }
        assert_eq!(r.limit(), Some(109), "nothing finished past 100");
        assert!(!r.credit_due());
        r.inbox.pop_front();
        r.inbox.pop_front();
        assert_eq!(r.limit(), Some(111));
        assert!(r.credit_due(), "a quarter window freed");
        r.report();
        r.inbox.pop_front();
        assert_eq!(r.limit(), Some(112));
        assert!(!r.credit_due(), "one datagram is less than a quarter window");
    }

    #[test]
    fn a_sender_that_used_all_its_credit_hears_of_any_freed() {
        let mut r = ReceiveWindow::new(8);
        r.arrive(0);
        r.report(); // limit 9
        for seq in 1..9 {
            r.arrive(seq);
        }
        // All eight finished at once would be a quarter anyway; park the last seven.
        let mut r2 = ReceiveWindow::new(8);
        r2.arrive(0);
        r2.report();
        for seq in 1..9 {
            r2.arrive(seq);
            r2.inbox.push_back(Parked {
                seq,
                datagram: Vec::new(),
                at: 0,
            });
        }
        assert!(!r2.credit_due());
        r2.inbox.pop_front(); // one freed, and the peer is at its limit
        assert!(r2.credit_due());
        assert!(r.credit_due());
    }

    #[test]
    fn gaps_reordering_overrun_and_restarts() {
        let mut r = ReceiveWindow::new(2);
        r.arrive(10);
        assert_eq!(r.arrive(13), Arrival::Take { lost: 2 });
        assert_eq!(r.arrive(12), Arrival::Reordered);
        for seq in 14..18 {
            assert_eq!(r.arrive(seq), Arrival::Take { lost: 0 });
            r.inbox.push_back(Parked {
                seq,
                datagram: Vec::new(),
                at: 0,
            });
        }
        assert_eq!(r.arrive(18), Arrival::Overrun);
        assert_eq!(r.limit(), Some(16));
        // Within a run, however far behind: a replay or a late datagram, never a restart.
        assert_eq!(r.arrive(14), Arrival::Reordered);
        assert_eq!(r.arrive(17u32.wrapping_sub(200)), Arrival::Reordered);
        assert_eq!(r.arrive(17u32.wrapping_sub(1 << 30)), Arrival::Reordered);
        assert_eq!(r.inbox.len(), 4, "nothing was flushed");
        // The peer restarted (a new epoch): the link starts over from its first datagram.
        assert_eq!(r.restart(), 4);
        assert_eq!(r.limit(), None);
        assert_eq!(r.arrive(0x8000_0000), Arrival::Take { lost: 0 });
        assert_eq!(r.limit(), Some(0x8000_0003));
        assert!(r.credit_due());
    }

    #[test]
    fn epochs_tell_a_restart_from_a_replay_of_an_earlier_run() {
        let mut run = PeerRun::default();
        assert_eq!(run.observe(100), RunFit::First);
        assert_eq!(run.observe(100), RunFit::Same);
        assert_eq!(run.observe(99), RunFit::Old, "an earlier run");
        assert_eq!(run.epoch(), 100);
        assert_eq!(run.observe(200), RunFit::Restarted);
        assert_eq!(run.observe(100), RunFit::Old, "the run before the restart");
        assert_eq!(run.epoch(), 200);
        // Datagrams name the receiver's run, or none before the sender heard from it, when
        // they must have been sent since the receiver started (give or take the skew).
        let start = 1_000 * START_SKEW_MAX.as_nanos();
        assert!(meant_for(start, start, 0) && !meant_for(start, start - 1, 0));
        assert!(
            !meant_for(start, start + 1, u64::MAX),
            "another run, whenever sent"
        );
        assert!(meant_for(start, 0, start) && meant_for(start, 0, start - START_SKEW_MAX.as_nanos()));
        assert!(
            !meant_for(start, 0, start - START_SKEW_MAX.as_nanos() - 1),
            "sent before"
        );
    }

    #[test]
    fn a_limit_answers_only_once_the_peer_took_a_datagram_of_this_run() {
        let mut s = SendWindow::new(u32::MAX);
        // The peer's limit for an earlier run.
        assert!(!s.on_limit(0x4000_0000, t(0)));
        assert!(
            !s.on_limit(u32::MAX, t(0)),
            "a limit at our first datagram grants nothing taken"
        );
        s.take_seq(t(0)); // u32::MAX
        s.take_seq(t(0)); // 0
        // The peer took the first: it grants from the next one on, across the wrap.
        assert!(s.on_limit(u32::MAX.wrapping_add(1 + 8), t(1)));
        assert!(!s.on_limit(0x4000_0000, t(2)));
    }

    #[test]
    fn limits_granted_to_an_earlier_run_are_ignored() {
        let mut s = SendWindow::new(5);
        s.on_limit(0x9000_0000, t(1));
        assert_eq!(s.limit, 5 + INITIAL_WINDOW);
        s.on_limit(5 + 100, t(1));
        assert_eq!(s.limit, 105);
    }
}
