//! What a running switch reports about itself (`onepipe switch` writes it, `onepipe inspect`
//! reads it): per input link, how far its barrier lags the switch's clock and how long it has
//! been silent; the switch's and its socket's counters. [`holding_back`] reads a fabric's
//! reports and names the link that holds delivery back.

use crate::switch::{InputState, Switch};
use onepipe_fabric::udp::{UdpCounters, UdpSnapshot};
use onepipe_wire::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkStatus {
    pub port: u16,
    /// `process P`, or the neighbour switch's name.
    pub peer: String,
    /// `live`, `dead` (removed from the best-effort barrier) or `joining`.
    pub state: String,
    /// The switch's clock minus the input's best-effort barrier; `None` while that is zero
    /// (never heard, or heard only from a neighbour that has no clock behind it yet).
    pub barrier_lag_us: Option<f64>,
    pub commit_lag_us: Option<f64>,
    /// Anything was ever heard on the link (its peer runs).
    #[serde(default)]
    pub heard: bool,
    /// Since anything was last heard on the link.
    pub silent_us: f64,
    /// Process links only: how far the process's clock runs ahead of the switch's, less the
    /// least one-way delay seen in the last second or two (`InputRegister::clock_ahead_ns`).
    #[serde(default)]
    pub clock_ahead_us: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchStatus {
    pub node: String,
    /// When the report was made, on the switch's clock (ns since the Unix epoch).
    pub at_ns: u64,
    pub forwarded: u64,
    pub beacons_sent: u64,
    pub beacons_received: u64,
    pub malformed: u64,
    /// Frames on the management port that were not control messages for this switch.
    #[serde(default)]
    pub control_malformed: u64,
    pub links_removed: u64,
    pub socket: UdpSnapshot,
    pub inputs: Vec<LinkStatus>,
    /// The live input with the lowest barrier: the one holding this switch back.
    pub lagging_port: Option<u16>,
    /// Which clock the switch reads: its machine's boot id (see [`Skew`]); empty if unknown.
    #[serde(default)]
    pub clock_id: String,
}

/// How [`SwitchStatus::of`]'s `peers` name a process behind a port (`process P`).
pub const PROCESS_PEER: &str = "process ";

/// The clock skew between processes as the switches measure it.
///
/// Each switch estimates how far each of its processes' clocks runs ahead of its own
/// (`clock_ahead_us`). Switches that read one clock (one machine: the same `clock_id`) are
/// compared as one, so processes behind different switches there are compared too. Switches on
/// different machines are not: their clocks are not measured against each other.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skew {
    /// The largest spread (max - min of `clock_ahead_us` over live process links) among the
    /// switches of one clock.
    pub spread_us: f64,
    /// Those switches: one, or all that share a machine's clock.
    pub switches: Vec<String>,
    /// The processes with the clock furthest behind and furthest ahead, and their switches.
    pub behind: String,
    pub behind_at: String,
    pub ahead: String,
    pub ahead_at: String,
}

/// The measured skew between processes, if two or more live ones are heard on one clock.
pub fn skew(statuses: &[SwitchStatus]) -> Option<Skew> {
    // Switches that do not say which clock they read stand alone.
    let clock_of = |s: &SwitchStatus| match s.clock_id.is_empty() {
        true => format!("switch {}", s.node),
        false => s.clock_id.clone(),
    };
    let mut clocks: Vec<String> = statuses.iter().map(clock_of).collect();
    clocks.sort();
    clocks.dedup();
    clocks
        .iter()
        .filter_map(|clock| {
            let on_clock = statuses.iter().filter(|s| clock_of(s) == *clock);
            let known: Vec<(&str, &str, f64)> = on_clock
                .clone()
                .flat_map(|s| {
                    s.inputs
                        .iter()
                        .filter(|l| l.state == "live")
                        .filter_map(|l| Some((s.node.as_str(), l.peer.as_str(), l.clock_ahead_us?)))
                })
                .collect();
            let min = known.iter().min_by(|a, b| a.2.total_cmp(&b.2))?;
            let max = known.iter().max_by(|a, b| a.2.total_cmp(&b.2))?;
            (known.len() >= 2).then(|| Skew {
                spread_us: max.2 - min.2,
                switches: on_clock.map(|s| s.node.clone()).collect(),
                behind: min.1.to_string(),
                behind_at: min.0.to_string(),
                ahead: max.1.to_string(),
                ahead_at: max.0.to_string(),
            })
        })
        .max_by(|a, b| a.spread_us.total_cmp(&b.spread_us))
}

fn lag_us(now: Instant, barrier: Instant) -> Option<f64> {
    (barrier != Instant::ZERO).then(|| now.saturating_since(barrier).as_nanos() as f64 / 1e3)
}

impl SwitchStatus {
    /// The status of `switch` (named `node`, with `peers[port]` behind each port) at `now`.
    pub fn of(
        switch: &Switch,
        node: &str,
        peers: &[String],
        socket: &UdpCounters,
        now: Instant,
    ) -> SwitchStatus {
        let c = switch.counters();
        SwitchStatus {
            node: node.to_string(),
            at_ns: now.as_nanos(),
            forwarded: c.forwarded,
            beacons_sent: c.beacons_sent,
            beacons_received: c.beacons_received,
            malformed: c.malformed,
            control_malformed: 0,
            links_removed: c.links_removed,
            socket: socket.snapshot(),
            inputs: switch
                .inputs(now)
                .map(|r| LinkStatus {
                    port: r.port,
                    peer: peers.get(r.port as usize).cloned().unwrap_or_default(),
                    clock_ahead_us: peers
                        .get(r.port as usize)
                        .is_some_and(|p| p.starts_with(PROCESS_PEER))
                        .then_some(r.clock_ahead_ns)
                        .flatten()
                        .map(|ns| ns as f64 / 1e3),
                    state: match r.state {
                        InputState::Live => "live",
                        InputState::Dead => "dead",
                        InputState::Joining => "joining",
                    }
                    .into(),
                    barrier_lag_us: lag_us(now, r.barrier),
                    commit_lag_us: lag_us(now, r.commit_barrier),
                    heard: r.heard,
                    silent_us: now.saturating_since(r.last_heard).as_nanos() as f64 / 1e3,
                })
                .collect(),
            lagging_port: switch.lagging_input().map(|r| r.port),
            clock_id: String::new(),
        }
    }

    fn lagging(&self) -> Option<&LinkStatus> {
        let port = self.lagging_port?;
        self.inputs.iter().find(|l| l.port == port)
    }
}

/// The link that holds delivery back.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stall {
    pub switch: String,
    pub port: u16,
    pub peer: String,
    /// `None`: nothing was ever heard on it.
    pub barrier_lag_us: Option<f64>,
    /// The chase upstream came back to a switch it had passed: every switch on the way waits
    /// for another, so no live process feeds them (all process links removed, or none joined).
    pub circular: bool,
}

fn stalled(link: &LinkStatus, threshold_us: f64) -> bool {
    link.barrier_lag_us.is_none_or(|lag| lag > threshold_us)
}

/// Which link holds best-effort delivery back, if any barrier lags more than `threshold`.
///
/// A stalled link stalls every switch downstream of it, so the worst lag is followed upstream:
/// from a switch's lagging input to the neighbour behind it, as long as that neighbour's own
/// lagging input is stalled too. The link where the chase ends (a process, or a switch whose
/// inputs all flow) is the cause.
pub fn holding_back(statuses: &[SwitchStatus], threshold: Duration) -> Option<Stall> {
    let threshold_us = threshold.as_nanos() as f64 / 1e3;
    let worst = |l: &LinkStatus| l.barrier_lag_us.unwrap_or(f64::INFINITY);
    let mut at = statuses
        .iter()
        .filter_map(|s| Some((s, s.lagging()?)))
        .filter(|(_, l)| stalled(l, threshold_us))
        .max_by(|a, b| worst(a.1).total_cmp(&worst(b.1)))?;
    let mut seen = HashSet::new();
    seen.insert(at.0.node.as_str());
    let mut circular = false;
    while let Some(upstream) = statuses.iter().find(|s| s.node == at.1.peer)
        && let Some(link) = upstream.lagging().filter(|l| stalled(l, threshold_us))
    {
        if !seen.insert(upstream.node.as_str()) {
            circular = true;
            break;
        }
        at = (upstream, link);
    }
    Some(Stall {
        switch: at.0.node.clone(),
        port: at.1.port,
        peer: at.1.peer.clone(),
        barrier_lag_us: at.1.barrier_lag_us,
        circular,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(port: u16, peer: &str, lag: Option<f64>) -> LinkStatus {
        LinkStatus {
            port,
            peer: peer.into(),
            state: "live".into(),
            barrier_lag_us: lag,
            commit_lag_us: lag,
            heard: lag.is_some(),
            silent_us: 0.0,
            clock_ahead_us: None,
        }
    }

    fn switch(node: &str, inputs: Vec<LinkStatus>) -> SwitchStatus {
        let lagging_port = inputs
            .iter()
            .max_by(|a, b| {
                let w = |l: &LinkStatus| l.barrier_lag_us.unwrap_or(f64::INFINITY);
                w(a).total_cmp(&w(b))
            })
            .map(|l| l.port);
        SwitchStatus {
            node: node.into(),
            inputs,
            lagging_port,
            ..Default::default()
        }
    }

    #[test]
    fn the_stall_is_traced_to_the_link_it_starts_on() {
        // Process 1 went quiet: tor0 lags on it, the spine lags on tor0 (a little more, as it
        // reported later), tor1 lags on the spine.
        let fabric = [
            switch(
                "tor0",
                vec![
                    link(0, "process 0", Some(80.0)),
                    link(1, "process 1", Some(90_000.0)),
                    link(2, "spine", Some(70.0)),
                ],
            ),
            switch(
                "tor1",
                vec![link(0, "process 2", Some(60.0)), link(1, "spine", Some(95_000.0))],
            ),
            switch(
                "spine",
                vec![link(0, "tor0", Some(95_500.0)), link(1, "tor1", Some(50.0))],
            ),
        ];
        let stall = holding_back(&fabric, Duration::from_millis(10)).unwrap();
        assert_eq!(
            (stall.switch.as_str(), stall.peer.as_str()),
            ("tor0", "process 1")
        );
        assert!(!stall.circular);
        // Below the threshold nothing is named.
        assert_eq!(holding_back(&fabric, Duration::from_millis(100)), None);
    }

    #[test]
    fn skew_is_the_widest_spread_of_process_clocks_at_one_switch() {
        let clocked = |port, peer: &str, ahead: Option<f64>| LinkStatus {
            clock_ahead_us: ahead,
            ..link(port, peer, Some(10.0))
        };
        let mut dead = clocked(3, "process 9", Some(900.0));
        dead.state = "dead".into();
        let fabric = [
            switch(
                "tor0",
                vec![
                    clocked(0, "process 0", Some(2.0)),
                    clocked(1, "process 1", Some(-6.5)),
                    clocked(2, "spine", None),
                    dead,
                ],
            ),
            switch("tor1", vec![clocked(0, "process 2", Some(1.0))]),
        ];
        let k = skew(&fabric).unwrap();
        assert_eq!(k.spread_us, 8.5, "the dead link's stale clock is left out");
        assert_eq!(
            (k.switches, k.behind.as_str(), k.ahead.as_str()),
            (vec!["tor0".to_string()], "process 1", "process 0")
        );
        // One process per switch: nothing to compare.
        assert_eq!(skew(&fabric[1..]), None);
    }

    #[test]
    fn switches_on_one_clock_compare_processes_across_them() {
        let clocked = |port, peer: &str, ahead: f64| LinkStatus {
            clock_ahead_us: Some(ahead),
            ..link(port, peer, Some(10.0))
        };
        let on = |clock: &str, mut s: SwitchStatus| {
            s.clock_id = clock.into();
            s
        };
        // Each rack agrees within itself; rack 1 runs 5 ms ahead of rack 0.
        let rack0 = switch(
            "tor0",
            vec![clocked(0, "process 0", 1.0), clocked(1, "process 1", 2.0)],
        );
        let rack1 = switch(
            "tor1",
            vec![clocked(0, "process 2", 5_001.0), clocked(1, "process 3", 5_002.0)],
        );
        let k = skew(&[on("m", rack0.clone()), on("m", rack1.clone())]).unwrap();
        assert_eq!(k.spread_us, 5_001.0);
        assert_eq!(
            (
                k.behind.as_str(),
                k.behind_at.as_str(),
                k.ahead.as_str(),
                k.ahead_at.as_str()
            ),
            ("process 0", "tor0", "process 3", "tor1")
        );
        assert_eq!(k.switches, ["tor0", "tor1"]);
        // On two machines (or unknown ones) each rack is compared only within itself.
        for (a, b) in [("m", "n"), ("", "")] {
            let k = skew(&[on(a, rack0.clone()), on(b, rack1.clone())]).unwrap();
            assert_eq!(k.spread_us, 1.0, "{a:?} {b:?}");
        }
    }

    #[test]
    fn a_link_never_heard_is_the_worst_and_cycles_end_the_chase() {
        let fabric = [
            switch("a", vec![link(0, "b", Some(50_000.0))]),
            switch("b", vec![link(0, "a", Some(50_000.0))]),
        ];
        let stall = holding_back(&fabric, Duration::from_millis(1)).unwrap();
        assert!(["a", "b"].contains(&stall.switch.as_str()));
        assert!(stall.circular);
        let fabric = [switch(
            "tor",
            vec![link(0, "process 0", Some(10.0)), link(1, "process 1", None)],
        )];
        let stall = holding_back(&fabric, Duration::from_millis(1)).unwrap();
        assert_eq!((stall.port, stall.barrier_lag_us), (1, None));
    }
}
