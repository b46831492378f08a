//! Reports of frames refused for time implausibly far ahead (docs/failures.md, "Implausible
//! time"): what the controller keeps of them, for its status.
//!
//! The controller records them and decides nothing. A refusal names a link, not a culprit: the
//! frames may have come from a correct sender whose clock is past the skew bound, or from a
//! forger that owns no link at all (a datagram from a stranger's address), and the receiver
//! that refused them is healthy. Declaring the process or switch behind the link failed would
//! let one forged datagram take a correct process out of the fabric, the very harm the bound
//! is there to prevent; the refusal itself already keeps the receiver's order intact.

use super::graph::End;
use super::{Controller, ControllerError, Member};
use onepipe_wire::Instant;
use std::collections::BTreeMap;

/// What the controller heard of one reporting end: a switch's input, or a process's link from
/// its ToR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImplausibleLink {
    pub member: Member,
    pub port: u16,
    /// Reports heard.
    pub reports: u64,
    /// Frames they said were refused.
    pub refused: u64,
    /// The furthest ahead of its receiver's clock a refused value was, in ns.
    pub ahead_ns_max: u64,
    /// When the last report came.
    #[serde(with = "super::instant_ns")]
    pub last_at: Instant,
}

/// Every reporting end, by (link, end): at most two per link of the graph, so bounded.
pub(super) type ImplausibleLinks = BTreeMap<(usize, usize), ImplausibleLink>;

impl Controller {
    /// `member` refused `refused` frames on its input at `port`, the furthest `ahead_ns` ahead
    /// of its clock: recorded and counted, nothing decided (see the module's comment).
    pub(super) fn on_implausible(
        &mut self,
        now: Instant,
        member: Member,
        port: u16,
        ahead_ns: u64,
        refused: u64,
    ) -> Result<(), ControllerError> {
        let (link, node) = self.link_of(member, port)?;
        let end = self.end_index(link, End { node, port });
        self.counters.implausible_reports += 1;
        self.counters.implausible_refused = self.counters.implausible_refused.saturating_add(refused);
        let record = self.implausible.entry((link, end)).or_insert(ImplausibleLink {
            member,
            port,
            reports: 0,
            refused: 0,
            ahead_ns_max: 0,
            last_at: now,
        });
        record.reports += 1;
        record.refused = record.refused.saturating_add(refused);
        record.ahead_ns_max = record.ahead_ns_max.max(ahead_ns);
        record.last_at = now;
        Ok(())
    }

    /// Every end that reported frames refused for implausible time, by link.
    pub fn implausible_links(&self) -> impl Iterator<Item = &ImplausibleLink> + '_ {
        self.implausible.values()
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{MemoryStore, Service};
    use super::super::test_util::{self, t};
    use super::super::{Input, Member};
    use onepipe_fabric::{Topology, Wiring};
    use onepipe_wire::Duration;

    fn report(member: Member, port: u16, ahead_ns: u64, refused: u64) -> Input {
        Input::Implausible {
            member,
            port,
            ahead_ns,
            refused,
        }
    }

    /// A report of refused frames is recorded per reporting end and counted, and changes no
    /// decision: nobody is declared failed, nothing is sent. One naming a port that does not
    /// exist is refused before the log. A controller replaying its log knows the same.
    #[test]
    fn reports_of_implausible_time_are_recorded_and_decide_nothing() {
        let w = Wiring::new(Topology::leaf_spine(2, 1, 2).unwrap(), 1).unwrap();
        let c = test_util::registered(&w, Duration::from_millis(5), Duration::from_millis(100));
        let mut service = Service::open(c, MemoryStore::default(), t(0)).unwrap();
        let _ = outputs_of(&mut service);
        let tor = w.processes[0].tor;
        let tor_port = w.processes[0].tor_port;
        service
            .handle_input(t(1), report(Member::Switch(tor), tor_port, 5_000_000_000, 3))
            .unwrap();
        service
            .handle_input(t(300), report(Member::Switch(tor), tor_port, 2_000_000_000, 1))
            .unwrap();
        service
            .handle_input(t(301), report(Member::Process(1), 0, 7_000_000_000, 1))
            .unwrap();
        assert!(
            service
                .handle_input(t(302), report(Member::Switch(tor), 99, 1, 1))
                .is_err()
        );
        assert!(service.poll_timeout().is_none_or(|at| at > t(10_000)));
        service.handle_timeout(t(10_000)).unwrap();
        assert_eq!(outputs_of(&mut service), vec![]);
        let c = service.controller();
        assert!(c.failures().is_empty() && !c.recovering());
        assert_eq!(
            (c.counters().implausible_reports, c.counters().implausible_refused),
            (3, 5)
        );
        let links: Vec<_> = c.implausible_links().copied().collect();
        assert_eq!(links.len(), 2);
        let at_tor = links.iter().find(|l| l.member == Member::Switch(tor)).unwrap();
        assert_eq!(
            (
                at_tor.port,
                at_tor.reports,
                at_tor.refused,
                at_tor.ahead_ns_max,
                at_tor.last_at
            ),
            (tor_port, 2, 4, 5_000_000_000, t(300))
        );
        c.invariants();
        let store = service.into_store();
        let fresh = test_util::unregistered(&w, Duration::from_millis(5), Duration::from_millis(100));
        let replayed = Service::open(fresh, store, t(20_000)).unwrap();
        let again: Vec<_> = replayed.controller().implausible_links().copied().collect();
        assert_eq!(again, links);
    }

    fn outputs_of(s: &mut Service<MemoryStore>) -> Vec<super::super::Output> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }
}
