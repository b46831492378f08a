//! DCTCP congestion window (paper 6.1: "Congestion control follows DCTCP"; Alizadeh et al.,
//! SIGCOMM 2010), counted in packets.
//!
//! The receiver echoes how many packets arrived and how many carried the ECN mark; once per
//! window of data the sender updates `alpha`, the moving fraction of marked packets, and a
//! window that saw marks shrinks by `alpha / 2`, so a little congestion costs a little window.
//!
//! A sender keeps one [`Dctcp`] per connection and reads it on every ACK of every packet, so
//! it is kept small (28 bytes, in `f32`): the parameters all connections share live apart, in
//! [`DctcpParams`].

/// The window a timeout cut, kept to undo a spurious one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowBeforeTimeout {
    cwnd: f32,
    ssthresh: f32,
}

/// What every connection of a sender shares.
#[derive(Clone, Copy, Debug)]
pub struct DctcpParams {
    gain: f32,
    min: f32,
    max: f32,
}

impl DctcpParams {
    /// Windows between `min` (at least 1) and `max` packets; `gain` is DCTCP's g.
    pub fn new(min: u32, max: u32, gain: f64) -> DctcpParams {
        let min = min.max(1) as f32;
        DctcpParams {
            gain: gain as f32,
            min,
            max: (max as f32).max(min),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Dctcp {
    cwnd: f32,
    ssthresh: f32,
    alpha: f32,
    /// Packets acknowledged and of those marked, in the current window.
    acked: u32,
    marked: u32,
    /// The window ends when the cumulative ACK passes this PSN.
    window_end: u32,
    reduced_this_window: bool,
}

impl Dctcp {
    pub fn new(initial: u32, params: &DctcpParams) -> Dctcp {
        Dctcp {
            cwnd: (initial as f32).clamp(params.min, params.max),
            ssthresh: params.max,
            alpha: 1.0,
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
        self.alpha as f64
    }

    /// An ACK reported `received` packets of which `marked` carried ECN; `una` is the
    /// cumulative ACK after it and `next_psn` the next PSN to be assigned.
    pub fn on_ack(&mut self, p: &DctcpParams, received: u16, marked: u16, una: u32, next_psn: u32) {
        let marked = marked.min(received);
        self.acked = self.acked.saturating_add(received as u32);
        self.marked = self.marked.saturating_add(marked as u32);
        if marked > 0 {
            if !self.reduced_this_window {
                self.cwnd = (self.cwnd * (1.0 - self.alpha / 2.0)).max(p.min);
                self.ssthresh = self.cwnd;
                self.reduced_this_window = true;
            }
        } else if self.cwnd < self.ssthresh {
            self.cwnd += received as f32; // slow start
        } else {
            self.cwnd += received as f32 / self.cwnd; // one packet per window
        }
        self.cwnd = self.cwnd.clamp(p.min, p.max);
        if (una.wrapping_sub(self.window_end) as i32) >= 0 {
            if self.acked > 0 {
                let fraction = self.marked as f32 / self.acked as f32;
                self.alpha = (1.0 - p.gain) * self.alpha + p.gain * fraction;
            }
            self.acked = 0;
            self.marked = 0;
            self.window_end = next_psn;
            self.reduced_this_window = false;
        }
    }

    /// A retransmission timeout: the first of a connection's episode halves the window, as a
    /// loss found by fast retransmit would; a repeated one (`repeated`: the RTO had backed
    /// off already) starts again from the minimum, as RFC 5681 does for every timeout.
    /// Returns what it took, for [`Dctcp::undo_timeout`] should the timeout prove spurious.
    ///
    /// Why not the minimum at once: on shared cores most first timeouts are a descheduled
    /// worker, not loss, and a scattering waits until each of its messages fits its
    /// destination's window, so one connection at a window of one holds back the host's
    /// every broadcast until slow start is done. On the inproc testbed (32 processes,
    /// saturated) ~17,000 timeouts came in 2 s without loss, a third of them not undone
    /// because the second copy had left; at 1% loss per link reliable kept 0.69-0.83 of its
    /// loss-free throughput with halving against 0.60-0.68 (docs/reliable.md).
    pub fn on_timeout(&mut self, p: &DctcpParams, repeated: bool) -> WindowBeforeTimeout {
        let before = WindowBeforeTimeout {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
        };
        self.ssthresh = (self.cwnd / 2.0).max(p.min);
        self.cwnd = if repeated { p.min } else { self.ssthresh };
        before
    }

    /// The timeout that returned `before` lost nothing: the window it cut comes back (and
    /// what grew since stays).
    pub fn undo_timeout(&mut self, p: &DctcpParams, before: WindowBeforeTimeout) {
        self.cwnd = self.cwnd.max(before.cwnd).min(p.max);
        self.ssthresh = self.ssthresh.max(before.ssthresh);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_without_marks_and_shrinks_by_half_alpha_with_them() {
        let p = DctcpParams::new(1, 256, 1.0 / 16.0);
        let mut d = Dctcp::new(4, &p);
        d.on_ack(&p, 4, 0, 4, 8);
        assert_eq!(d.window(), 8, "slow start doubles per window");
        // Every packet marked for many windows: alpha tends to 1, the window halves.
        let mut una = 8;
        for _ in 0..200 {
            una += 8;
            d.on_ack(&p, 8, 8, una, una + 8);
        }
        assert!(d.alpha() > 0.99);
        assert_eq!(d.window(), 1, "floored at the minimum");
        // A lightly marked path: alpha small, the cut small.
        let mut e = Dctcp::new(100, &p);
        let mut una = 0;
        for i in 0..400 {
            una += 10;
            e.on_ack(&p, 10, u16::from(i % 50 == 0), una, una + 10);
        }
        assert!(e.alpha() < 0.2, "alpha {}", e.alpha());
        assert!(e.window() > 50, "window {}", e.window());
    }

    #[test]
    fn timeout_halves_then_restarts_from_the_minimum_and_an_undo_restores_the_window() {
        let p = DctcpParams::new(2, 256, 1.0 / 16.0);
        let mut d = Dctcp::new(32, &p);
        let first = d.on_timeout(&p, false);
        assert_eq!(d.window(), 16, "a first timeout halves");
        d.on_timeout(&p, true);
        assert_eq!(d.window(), 2, "a repeated one restarts from the minimum");
        d.on_ack(&p, 2, 0, 2, 4); // slow start to 4 meanwhile
        d.undo_timeout(&p, first);
        assert_eq!(d.window(), 32);
        let mut grown = Dctcp::new(4, &p);
        let before = grown.on_timeout(&p, true);
        for una in 0..20 {
            grown.on_ack(&p, 2, 0, una, una + 2);
        }
        grown.undo_timeout(&p, before);
        assert!(grown.window() > 4, "what grew since stays: {}", grown.window());
    }

    #[test]
    fn per_connection_state_stays_small() {
        // Read on every ACK of every packet: see the module docs.
        assert!(std::mem::size_of::<Dctcp>() <= 28);
    }
}
