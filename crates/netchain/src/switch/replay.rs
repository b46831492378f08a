//! Duplicate writes at the head. A network may deliver a client's write twice (UDP does); the
//! head would then give the copy a version of its own, and the value would come back after
//! later writes had replaced it. So each switch keeps, per process, the requests it has seen
//! sequenced lately: a sliding window over request ids (the anti-replay window of IPsec,
//! RFC 4303 3.4.3), the highest id and a bit for each of the 63 below it. The head drops an
//! unsequenced write whose request is in the window or older; replicas mark the writes they
//! store, so that one of them that becomes the head after a failover knows them too.
//!
//! Request ids grow per process (the agent numbers its attempts), and a new incarnation of a
//! process starts above the last one's (its first id comes from the clock). Past the paper's
//! P4 switch: a register pair per process.

/// Ids this far below the highest are still told apart.
const WINDOW: u64 = 64;

#[derive(Clone, Copy, Debug, Default)]
struct Window {
    highest: u64,
    /// Bit `d`: request `highest - d` was seen.
    seen: u64,
}

pub struct Replay {
    windows: Vec<Window>,
}

impl Replay {
    pub fn new(processes: usize) -> Replay {
        Replay {
            windows: vec![Window::default(); processes],
        }
    }

    /// Marks `request` of `process` seen; `false` if it was seen before, is too old to tell,
    /// or the process does not exist.
    pub fn check_and_mark(&mut self, process: u32, request: u64) -> bool {
        let Some(w) = self.windows.get_mut(process as usize) else {
            return false;
        };
        if w.seen == 0 || request > w.highest {
            let shift = request.saturating_sub(w.highest);
            w.seen = if w.seen == 0 || shift >= WINDOW {
                0
            } else {
                w.seen << shift
            };
            w.seen |= 1;
            w.highest = request;
            return true;
        }
        let d = w.highest - request;
        if d >= WINDOW || w.seen & (1 << d) != 0 {
            return false;
        }
        w.seen |= 1 << d;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_passes_once_in_any_order_within_the_window() {
        let mut r = Replay::new(2);
        assert!(r.check_and_mark(0, 100));
        assert!(!r.check_and_mark(0, 100), "a duplicate");
        assert!(r.check_and_mark(0, 98), "older, unseen: reordered");
        assert!(!r.check_and_mark(0, 98));
        assert!(r.check_and_mark(0, 150));
        assert!(r.check_and_mark(0, 99), "still inside the window");
        assert!(!r.check_and_mark(0, 100), "remembered after the shift");
        assert!(!r.check_and_mark(0, 150 - WINDOW), "too old to tell: refused");
        assert!(r.check_and_mark(1, 5), "another process has its own window");
        assert!(!r.check_and_mark(2, 1), "no such process");
        assert!(r.check_and_mark(0, 1_000_000), "a jump clears the window");
        assert!(!r.check_and_mark(0, 150));
    }
}
