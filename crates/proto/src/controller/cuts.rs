//! Cut requests that go unanswered.
//!
//! The controller asks a switch to cut an input when it needs that switch's last commit
//! barrier from the link (only the far side saw the link fail, or a process did not answer in
//! time). A management frame can be lost, so an unanswered request is sent again
//! [`super::ANNOUNCE_REPEATS_PER_TIMEOUT`] times within the answer timeout. A switch that answers none
//! of them within the timeout is taken for failed, as a process that does not answer is (paper
//! 5.2): every link of it goes down, and the decision goes on without it. Waiting on it would
//! wait for ever when it really is dead: a ToR that dies with its hosts is reported by its
//! neighbours, but nobody reports its links to its own hosts, so the controller may see its rack
//! as still whole and need the dead ToR's report on its uplink (found by a simulator campaign,
//! seed 90115774: a ToR died, then a host of the other rack; the dead ToR's rack looked the
//! larger side and the commit barriers stalled for good).

use super::Controller;
use onepipe_wire::Instant;

impl Controller {
    /// Cut requests past the answer timeout fail their switch; the others are sent again once
    /// a repeat interval has passed since they last went.
    pub(super) fn cut_timeouts(&mut self, now: Instant) {
        let timeout = self.config.answer_timeout;
        let overdue: Vec<usize> = self
            .cuts
            .iter()
            .filter(|&(_, &at)| at + timeout <= now)
            .map(|(&l, _)| l)
            .collect();
        for link in overdue {
            for node in self.unreported_switch_ends(link) {
                self.switch_unanswering(now, node);
            }
        }
        let repeat = self.announce_repeat_interval();
        let due: Vec<usize> = self
            .cuts_sent
            .iter()
            .filter(|&(_, &at)| at + repeat <= now)
            .map(|(&l, _)| l)
            .collect();
        for link in due {
            self.send_cut(now, link);
        }
    }

    /// The switches at `link`'s ends that have not reported it, failed ones aside.
    pub(super) fn unreported_switch_ends(&self, link: usize) -> Vec<usize> {
        let ends = self.graph.link(link).ends;
        ends.iter()
            .enumerate()
            .filter(|&(i, e)| e.node < self.graph.switch_count() && self.reports[link][i].is_none())
            .map(|(_, e)| e.node)
            .filter(|node| !self.switches_failed.contains(node))
            .collect()
    }

    /// `switch` did not carry out a cut in time: it is failed, and so is every link of it. The
    /// cuts asked of it are dropped; the next decision asks its neighbours instead, for the
    /// links it needs their reports of.
    fn switch_unanswering(&mut self, now: Instant, switch: usize) {
        if !self.switches_failed.insert(switch) {
            return;
        }
        self.counters.switches_unanswering += 1;
        for link in 0..self.graph.link_count() {
            if !self.graph.link(link).ends.iter().any(|e| e.node == switch) {
                continue;
            }
            self.cuts.remove(&link);
            self.cuts_sent.remove(&link);
            if !self.down[link] {
                self.down[link] = true;
                self.undecided.insert(link);
            }
        }
        self.decide_at = Some(self.decide_at.map_or(now, |t| t.min(now)));
    }
}
