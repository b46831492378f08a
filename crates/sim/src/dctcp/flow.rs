//! One long-lived DCTCP flow (Alizadeh et al., SIGCOMM 2010): a window-based sender that never
//! runs out of data, ACK-clocked, and the receiver's cumulative ACKs echoing each frame's ECN
//! mark. Windows and sequence numbers count whole frames.
//!
//! Section 3.1 of the DCTCP paper: the sender keeps `alpha`, an estimate of the fraction of
//! its frames marked, updated once per window of data as `alpha <- (1 - g) alpha + g F`, and a
//! window that saw marks shrinks to `cwnd (1 - alpha / 2)`. Otherwise the window grows as TCP's
//! does: by a frame per frame acknowledged in slow start, by one frame per window after. Loss
//! (three duplicate ACKs or a timeout) goes back to the first unacknowledged frame (go-back-N:
//! the receiver keeps no out-of-order frames), halving the window, or to one frame on a timeout.

use super::DctcpConfig;
use onepipe_wire::{Duration, Instant};

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FlowCounters {
    pub frames_sent: u64,
    pub frames_acked: u64,
    /// Frames acknowledged with an ECN echo.
    pub frames_marked: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// Windows that saw marks, and so shrank.
    pub window_cuts: u64,
}

#[derive(Clone, Debug)]
pub struct Sender {
    pub dst: u32,
    /// First frame not acknowledged, and the next to send.
    snd_una: u64,
    snd_nxt: u64,
    /// The most frames ever sent (retransmissions go below it).
    snd_max: u64,
    cwnd_frames: f64,
    ssthresh_frames: f64,
    alpha: f64,
    /// The observation window ends when this frame is acknowledged.
    window_end: u64,
    acked_in_window: u64,
    marked_in_window: u64,
    dup_acks: u32,
    /// When the oldest unacknowledged frame times out.
    rto_at: Option<Instant>,
    start_at: Instant,
    /// The start timer has fired: from then on the node's link asks for frames.
    started: bool,
    pub counters: FlowCounters,
}

/// Duplicate ACKs that trigger a retransmission (TCP's fast retransmit).
const DUP_ACKS_FOR_LOSS: u32 = 3;

impl Sender {
    pub fn new(dst: u32, start_at: Instant, config: &DctcpConfig) -> Sender {
        Sender {
            dst,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd_frames: config.initial_window_frames.max(1) as f64,
            ssthresh_frames: config.window_frames_max as f64,
            // DCTCP starts from alpha = 1: the first marks halve the window, as TCP would.
            alpha: 1.0,
            window_end: 0,
            acked_in_window: 0,
            marked_in_window: 0,
            dup_acks: 0,
            rto_at: None,
            start_at,
            started: false,
            counters: FlowCounters::default(),
        }
    }

    pub fn cwnd_frames(&self) -> f64 {
        self.cwnd_frames
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Frames in flight.
    fn in_flight(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// Whether the window has room for a frame at `now`.
    pub fn can_send(&self, now: Instant, config: &DctcpConfig) -> bool {
        let window = (self.cwnd_frames as u64).clamp(1, config.window_frames_max.max(1) as u64);
        now >= self.start_at && self.in_flight() < window
    }

    /// The next frame's sequence number; the caller sends it.
    pub fn next_frame(&mut self, now: Instant, config: &DctcpConfig) -> u64 {
        debug_assert!(self.can_send(now, config));
        let seq = self.snd_nxt;
        if seq < self.snd_max {
            self.counters.retransmits += 1;
        }
        self.snd_nxt += 1;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        self.counters.frames_sent += 1;
        if self.rto_at.is_none() {
            self.rto_at = Some(now + config.rto);
        }
        seq
    }

    /// An ACK: `next` is the next frame the receiver expects; `ece` whether the frame it
    /// answers was marked.
    pub fn handle_ack(&mut self, now: Instant, next: u64, ece: bool, config: &DctcpConfig) {
        if next > self.snd_max || next < self.snd_una {
            return; // stale, or names frames never sent
        }
        if next == self.snd_una {
            self.duplicate_ack(config);
            return;
        }
        let newly = next - self.snd_una;
        self.snd_una = next;
        self.snd_nxt = self.snd_nxt.max(next);
        self.dup_acks = 0;
        self.counters.frames_acked += newly;
        self.acked_in_window += newly;
        if ece {
            self.counters.frames_marked += newly;
            self.marked_in_window += newly;
        } else if self.cwnd_frames < self.ssthresh_frames {
            self.cwnd_frames += newly as f64;
        } else {
            self.cwnd_frames += newly as f64 / self.cwnd_frames;
        }
        self.cwnd_frames = self.cwnd_frames.min(config.window_frames_max as f64);
        if self.snd_una >= self.window_end {
            self.end_window(config);
        }
        self.rto_at = (self.snd_una < self.snd_nxt).then(|| now + config.rto);
    }

    /// Once per window of data: alpha follows the fraction marked, and a window with marks
    /// shrinks by alpha / 2 (DCTCP section 3.1).
    fn end_window(&mut self, config: &DctcpConfig) {
        let fraction = self.marked_in_window as f64 / self.acked_in_window.max(1) as f64;
        self.alpha = (1.0 - config.g) * self.alpha + config.g * fraction;
        if self.marked_in_window > 0 {
            self.cwnd_frames = (self.cwnd_frames * (1.0 - self.alpha / 2.0)).max(1.0);
            self.ssthresh_frames = self.cwnd_frames;
            self.counters.window_cuts += 1;
        }
        self.acked_in_window = 0;
        self.marked_in_window = 0;
        self.window_end = self.snd_nxt;
        debug_assert!((0.0..=1.0).contains(&self.alpha));
    }

    fn duplicate_ack(&mut self, _config: &DctcpConfig) {
        if self.in_flight() == 0 {
            return;
        }
        self.dup_acks += 1;
        if self.dup_acks == DUP_ACKS_FOR_LOSS {
            self.cwnd_frames = (self.cwnd_frames / 2.0).max(1.0);
            self.ssthresh_frames = self.cwnd_frames;
            self.go_back();
        }
    }

    fn go_back(&mut self) {
        self.snd_nxt = self.snd_una;
        self.window_end = self.snd_max;
        self.acked_in_window = 0;
        self.marked_in_window = 0;
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.rto_at {
            Some(t) => Some(t),
            // Once: a timer that stayed due until the link had room would fire forever.
            None if !self.started => Some(self.start_at),
            None => None,
        }
    }

    pub fn handle_timeout(&mut self, now: Instant, config: &DctcpConfig) {
        self.started |= now >= self.start_at;
        let Some(at) = self.rto_at else {
            return;
        };
        if now < at {
            return;
        }
        self.counters.timeouts += 1;
        self.ssthresh_frames = (self.cwnd_frames / 2.0).max(2.0);
        self.cwnd_frames = 1.0;
        self.dup_acks = 0;
        self.go_back();
        self.rto_at = Some(now + config.rto.saturating_mul(2));
    }

    pub fn invariants(&self) {
        assert!(self.snd_una <= self.snd_nxt && self.snd_nxt <= self.snd_max);
        assert!(self.cwnd_frames >= 1.0 && self.cwnd_frames.is_finite());
        assert!((0.0..=1.0).contains(&self.alpha));
        assert!(self.marked_in_window <= self.acked_in_window);
    }
}

/// The receiving end of a flow: in-order frames only, each answered by a cumulative ACK that
/// echoes its mark (an ACK per frame, so the echo is exact, DCTCP section 3.1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Receiver {
    next: u64,
}

impl Receiver {
    /// A data frame arrived: the ACK to send (next expected, ECN echo).
    pub fn handle_data(&mut self, seq: u64, ce: bool) -> (u64, bool) {
        if seq == self.next {
            self.next += 1;
        }
        (self.next, ce)
    }
}

/// The timeout of a flow whose round trip is tens of microseconds, well above any queue a
/// marking threshold lets build (TCP's 200 ms minimum is for WANs).
pub const RTO_DEFAULT: Duration = Duration::from_micros(500);

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DctcpConfig {
        DctcpConfig {
            flows_per_host: 1,
            initial_window_frames: 4,
            ..DctcpConfig::default()
        }
    }

    fn send_all(s: &mut Sender, now: Instant, c: &DctcpConfig) -> Vec<u64> {
        let mut out = Vec::new();
        while s.can_send(now, c) {
            out.push(s.next_frame(now, c));
        }
        out
    }

    /// Slow start: every unmarked ACK opens the window by a frame.
    #[test]
    fn slow_start_doubles_the_window_per_round_trip() {
        let c = config();
        let mut s = Sender::new(1, Instant::ZERO, &c);
        let t = Instant::from_nanos(10);
        assert_eq!(send_all(&mut s, t, &c), vec![0, 1, 2, 3]);
        for next in 1..=4 {
            s.handle_ack(t, next, false, &c);
        }
        assert_eq!(s.cwnd_frames(), 8.0);
        assert_eq!(send_all(&mut s, t, &c).len(), 8);
        s.invariants();
    }

    /// DCTCP section 3.1: a fully marked window with alpha at 1 halves the window; alpha
    /// follows F with gain g; an unmarked window leaves the window to grow.
    #[test]
    fn a_marked_window_shrinks_by_half_alpha_and_alpha_follows_the_marked_fraction() {
        let c = config();
        let mut s = Sender::new(1, Instant::ZERO, &c);
        let t = Instant::from_nanos(10);
        send_all(&mut s, t, &c);
        // The first ACK ends the empty initial window (F = 0); the window is then frames 1-3.
        s.handle_ack(t, 1, false, &c);
        let alpha = 1.0 - c.g;
        assert!((s.alpha() - alpha).abs() < 1e-12);
        let before = s.cwnd_frames();
        for next in 2..=3 {
            s.handle_ack(t, next, true, &c);
            assert_eq!(s.cwnd_frames(), before, "a marked ACK does not open the window");
        }
        s.handle_ack(t, 4, true, &c);
        // The window (frames 1 to 3, all marked) has ended: F = 1.
        let alpha = (1.0 - c.g) * alpha + c.g * 1.0;
        assert!((s.alpha() - alpha).abs() < 1e-12, "{}", s.alpha());
        assert!((s.cwnd_frames() - before * (1.0 - alpha / 2.0)).abs() < 1e-9);
        assert_eq!(s.counters.window_cuts, 1);
        s.invariants();
    }

    #[test]
    fn three_duplicate_acks_go_back_and_a_timeout_restarts_from_one_frame() {
        let c = config();
        let mut s = Sender::new(1, Instant::ZERO, &c);
        let t = Instant::from_nanos(10);
        send_all(&mut s, t, &c);
        for _ in 0..3 {
            s.handle_ack(t, 0, false, &c);
        }
        assert_eq!(s.cwnd_frames(), 2.0);
        assert_eq!(send_all(&mut s, t, &c), vec![0, 1]);
        assert_eq!(s.counters.retransmits, 2);
        let rto = s.poll_timeout().unwrap();
        s.handle_timeout(rto, &c);
        assert_eq!((s.cwnd_frames(), s.counters.timeouts), (1.0, 1));
        assert_eq!(send_all(&mut s, rto, &c), vec![0]);
        s.invariants();
    }

    #[test]
    fn the_receiver_acknowledges_in_order_frames_and_echoes_marks() {
        let mut r = Receiver::default();
        assert_eq!(r.handle_data(0, false), (1, false));
        assert_eq!(r.handle_data(2, true), (1, true));
        assert_eq!(r.handle_data(1, false), (2, false));
    }
}
