//! DCTCP congestion window (paper 6.1: "Congestion control follows DCTCP"; Alizadeh et al.,
//! SIGCOMM 2010), counted in packets.
//!
//! The receiver echoes how many packets arrived and how many carried the ECN mark; once per
//! window of data the sender updates `alpha`, the moving fraction of marked packets, and a
//! window that saw marks shrinks by `alpha / 2`, so a little congestion costs a little window.

/// The window a timeout cut, kept to undo a spurious one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowBeforeTimeout {
    cwnd: f64,
    ssthresh: f64,
}

#[derive(Clone, Debug)]
pub struct Dctcp {
    cwnd: f64,
    ssthresh: f64,
    alpha: f64,
    gain: f64,
    min: f64,
    max: f64,
    acked: u64,
    marked: u64,
    /// The window ends when the cumulative ACK passes this PSN.
    window_end: u32,
    reduced_this_window: bool,
}

impl Dctcp {
    pub fn new(initial: u32, min: u32, max: u32, gain: f64) -> Dctcp {
        Dctcp {
            cwnd: initial as f64,
            ssthresh: max as f64,
            alpha: 1.0,
            gain,
            min: min.max(1) as f64,
            max: max as f64,
            acked: 0,
            marked: 0,
            window_end: 0,
            reduced_this_window: false,
        }
    }

    /// The window in whole packets, at least the minimum.
    pub fn window(&self) -> u32 {
        self.cwnd as u32
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// An ACK reported `received` packets of which `marked` carried ECN; `una` is the
    /// cumulative ACK after it and `next_psn` the next PSN to be assigned.
    pub fn on_ack(&mut self, received: u16, marked: u16, una: u32, next_psn: u32) {
        let (received, marked) = (received as u64, marked.min(received) as u64);
        self.acked += received;
        self.marked += marked;
        if marked > 0 {
            if !self.reduced_this_window {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(self.min);
                self.ssthresh = self.cwnd;
                self.reduced_this_window = true;
            }
        } else if self.cwnd < self.ssthresh {
            self.cwnd += received as f64; // slow start
        } else {
            self.cwnd += received as f64 / self.cwnd; // one packet per window
        }
        self.cwnd = self.cwnd.clamp(self.min, self.max);
        if (una.wrapping_sub(self.window_end) as i32) >= 0 {
            if self.acked > 0 {
                let fraction = self.marked as f64 / self.acked as f64;
                self.alpha = (1.0 - self.gain) * self.alpha + self.gain * fraction;
            }
            self.acked = 0;
            self.marked = 0;
            self.window_end = next_psn;
            self.reduced_this_window = false;
        }
    }

    /// A retransmission timeout: start again from the minimum. Returns what it took, for
    /// [`Dctcp::undo_timeout`] should the timeout prove spurious.
    pub fn on_timeout(&mut self) -> WindowBeforeTimeout {
        let before = WindowBeforeTimeout {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
        };
        self.ssthresh = (self.cwnd / 2.0).max(self.min);
        self.cwnd = self.min;
        before
    }

    /// The timeout that returned `before` lost nothing: the window it cut comes back (and
    /// what grew since stays).
    pub fn undo_timeout(&mut self, before: WindowBeforeTimeout) {
        self.cwnd = self.cwnd.max(before.cwnd).min(self.max);
        self.ssthresh = self.ssthresh.max(before.ssthresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_without_marks_and_shrinks_by_half_alpha_with_them() {
        let mut d = Dctcp::new(4, 1, 256, 1.0 / 16.0);
        d.on_ack(4, 0, 4, 8);
        assert_eq!(d.window(), 8, "slow start doubles per window");
        // Every packet marked for many windows: alpha tends to 1, the window halves.
        let mut una = 8;
        for _ in 0..200 {
            una += 8;
            d.on_ack(8, 8, una, una + 8);
        }
        assert!(d.alpha() > 0.99);
        assert_eq!(d.window(), 1, "floored at the minimum");
        // A lightly marked path: alpha small, the cut small.
        let mut e = Dctcp::new(100, 1, 256, 1.0 / 16.0);
        let mut una = 0;
        for i in 0..400 {
            una += 10;
            e.on_ack(10, u16::from(i % 50 == 0), una, una + 10);
        }
        assert!(e.alpha() < 0.2, "alpha {}", e.alpha());
        assert!(e.window() > 50, "window {}", e.window());
    }

    #[test]
    fn timeout_restarts_from_the_minimum_and_an_undo_restores_the_window() {
        let mut d = Dctcp::new(32, 2, 256, 1.0 / 16.0);
        let before = d.on_timeout();
        assert_eq!(d.window(), 2);
        d.on_ack(2, 0, 2, 4); // slow start to 4 meanwhile
        d.undo_timeout(before);
        assert_eq!(d.window(), 32);
        let mut grown = Dctcp::new(4, 2, 256, 1.0 / 16.0);
        let before = grown.on_timeout();
        for una in 0..20 {
            grown.on_ack(2, 0, una, una + 2);
        }
        grown.undo_timeout(before);
        assert!(grown.window() > 4, "what grew since stays: {}", grown.window());
    }
}
