//! What a running switch reports about itself (`onepipe switch` writes it, `onepipe inspect`
//! reads it): per input link, how far its barrier lags the switch's clock and how long it has
//! been silent; the switch's and its socket's counters. [`holding_back`] reads a fabric's
//! reports and names the link that holds delivery back.

use onepipe_proto::switch::{Half, InputState, OnePipeProgram, SwitchNode};
use onepipe_runtime::udp::{UdpCounters, UdpSnapshot};
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
    /// How far the clock behind the link runs ahead of the switch's, less the least one-way
    /// delay seen in the last second or two (`InputRegister::clock_ahead_ns`). From a process:
    /// its clock. From a neighbour switch: the barrier it passes on, which from a ToR below is
    /// the clock of its slowest process (see [`skew`]).
    #[serde(default)]
    pub clock_ahead_us: Option<f64>,
    /// The link comes from below (a process, or a switch a layer down): its barrier counts in
    /// this switch's uplink half.
    #[serde(default)]
    pub from_below: bool,
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
    /// Frames of a protocol no program of the switch runs (docs/wire.md, "Protocols"), and
    /// empty ones.
    #[serde(default)]
    pub unknown_protocol: u64,
    /// Frames on the management port that were not control messages for this switch, and
    /// orders naming a port it does not have.
    #[serde(default)]
    pub control_malformed: u64,
    /// Packets in another process's name than their input port allows (dropped).
    #[serde(default)]
    pub spoofed_source: u64,
    pub links_removed: u64,
    /// Frames refused for a barrier implausibly far ahead of the switch's clock
    /// (docs/ordering.md, "Implausible time").
    #[serde(default)]
    pub barrier_implausible: u64,
    pub socket: UdpSnapshot,
    pub inputs: Vec<LinkStatus>,
    /// The live input with the lowest barrier: the one holding this switch back.
    pub lagging_port: Option<u16>,
    /// Which clock the switch reads: its machine's boot id (see [`Skew`]); empty if unknown.
    #[serde(default)]
    pub clock_id: String,
    /// The switch CPU that aggregates its barriers, if its data plane only forwards (paper
    /// 6.2.2): how far behind the beacons it takes are.
    #[serde(default)]
    pub cpu: Option<CpuReport>,
}

/// A switch CPU's queue of punted beacons ([`onepipe_proto::switch::CpuStatus`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// Beacons waiting for the CPU.
    pub backlog: usize,
    /// How long the last beacon taken waited, and the longest any waited, in us.
    pub lag_last_us: f64,
    pub lag_max_us: f64,
    /// Beacons dropped because the CPU's queue was full.
    pub overflow_drops: u64,
}

/// The switch CPU furthest behind: the one whose last beacon waited longest, if it waited
/// past `threshold`. (Overflow drops count since the start, a burst at startup included: they
/// are shown, not judged.)
pub fn lagging_cpu(statuses: &[SwitchStatus], threshold: Duration) -> Option<(&str, &CpuReport)> {
    let threshold_us = threshold.as_nanos() as f64 / 1e3;
    statuses
        .iter()
        .filter_map(|s| Some((s.node.as_str(), s.cpu.as_ref()?)))
        .filter(|(_, c)| c.lag_last_us > threshold_us)
        .max_by(|a, b| a.1.lag_last_us.total_cmp(&b.1.lag_last_us))
}

/// How [`SwitchStatus::of`]'s `peers` name a process behind a port (`process P`).
pub const PROCESS_PEER: &str = "process ";

/// The clock skew between processes as the switches measure it.
///
/// Each switch estimates how far each of its processes' clocks runs ahead of its own
/// (`clock_ahead_us`). Switches that read one clock (one machine: the same `clock_id`) are
/// compared as one, so processes behind different switches there are compared too. Switches on
/// different machines are compared through a link between them: a ToR passes up the barrier of
/// its slowest process, so a switch above it on another clock measures that process's clock
/// on its own, and the offset between the two clocks follows (see [`skew`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skew {
    /// The largest spread (max - min of `clock_ahead_us` over live process links) among the
    /// switches of clocks that could be compared.
    pub spread_us: f64,
    /// Those switches: one, or all on the clocks compared.
    pub switches: Vec<String>,
    /// The processes with the clock furthest behind and furthest ahead, and their switches.
    pub behind: String,
    pub behind_at: String,
    pub ahead: String,
    pub ahead_at: String,
    /// The clocks compared (machines' boot ids, or `switch NAME` for a switch that names none).
    pub clocks: Vec<String>,
    /// The links that joined two clocks, as `SWITCH<-TOR` (the switch that measured the ToR's
    /// slowest process on its own clock); empty when one clock was enough.
    pub bridges: Vec<String>,
}

/// A clock offset measured across a link: values on clock `from` plus `us` are on clock `to`.
struct Bridge {
    from: usize,
    to: usize,
    us: f64,
    name: String,
}

/// The measured skew between processes, if two or more live ones are heard on clocks that can
/// be compared.
///
/// Clocks are joined by bridges: switch S, on clock H, hears ToR N, on clock G, from below.
/// N's uplink carries the minimum of its live processes' barriers, so S's `clock_ahead_us` for
/// N is N's slowest process measured on H, while N measured that process on G: the difference
/// is H's offset from G (give or take the difference in one-way delays, as everywhere here).
/// Where several links bridge two clocks, the median offset counts.
pub fn skew(statuses: &[SwitchStatus]) -> Option<Skew> {
    // Switches that do not say which clock they read stand alone.
    let clock_of = |s: &SwitchStatus| match s.clock_id.is_empty() {
        true => format!("switch {}", s.node),
        false => s.clock_id.clone(),
    };
    let mut clocks: Vec<String> = statuses.iter().map(clock_of).collect();
    clocks.sort();
    clocks.dedup();
    let clock_index = |s: &SwitchStatus| clocks.binary_search(&clock_of(s)).expect("listed");
    let processes = |s: &SwitchStatus| {
        s.inputs
            .iter()
            .filter(|l| l.state == "live" && l.peer.starts_with(PROCESS_PEER))
            .filter_map(|l| Some((l.peer.clone(), l.clock_ahead_us?)))
            .collect::<Vec<_>>()
    };
    let bridges: Vec<Bridge> = statuses
        .iter()
        .flat_map(|s| s.inputs.iter().map(move |l| (s, l)))
        .filter(|(_, l)| l.state == "live" && l.from_below)
        .filter_map(|(s, l)| {
            let tor = statuses.iter().find(|n| n.node == l.peer)?;
            let (from, to) = (clock_index(tor), clock_index(s));
            // Only a switch whose inputs from below are all processes passes up their minimum.
            let below_are_processes = tor
                .inputs
                .iter()
                .filter(|i| i.from_below)
                .all(|i| i.peer.starts_with(PROCESS_PEER));
            let slowest = processes(tor).into_iter().map(|p| p.1).min_by(f64::total_cmp)?;
            let ahead = l.clock_ahead_us?;
            (from != to && below_are_processes).then(|| Bridge {
                from,
                to,
                us: ahead - slowest,
                name: format!("{}<-{}", s.node, tor.node),
            })
        })
        .collect();
    // Each clock's component, and its offset to the component's first clock: a value on clock
    // c plus the offset is on that one.
    let mut placed: Vec<Option<(usize, f64)>> = vec![None; clocks.len()];
    let mut used: Vec<Vec<String>> = Vec::new();
    for root in 0..clocks.len() {
        if placed[root].is_some() {
            continue;
        }
        let id = used.len();
        used.push(Vec::new());
        placed[root] = Some((id, 0.0));
        let mut queue = vec![root];
        while let Some(c) = queue.pop() {
            let (_, at_c) = placed[c].expect("queued once placed");
            let unplaced: Vec<usize> = (0..clocks.len()).filter(|&o| placed[o].is_none()).collect();
            for other in unplaced {
                // c -> other: values on other plus `d` are on c.
                let mut d: Vec<f64> = bridges
                    .iter()
                    .filter_map(|b| match (b.from, b.to) {
                        (f, t) if f == other && t == c => Some(b.us),
                        (f, t) if f == c && t == other => Some(-b.us),
                        _ => None,
                    })
                    .collect();
                if d.is_empty() {
                    continue;
                }
                d.sort_by(f64::total_cmp);
                let median = d[d.len() / 2];
                placed[other] = Some((id, at_c + median));
                used[id].extend(
                    bridges
                        .iter()
                        .filter(|b| (b.from, b.to) == (other, c) || (b.from, b.to) == (c, other))
                        .map(|b| b.name.clone()),
                );
                queue.push(other);
            }
        }
    }
    (0..used.len())
        .filter_map(|id| {
            let members: Vec<&SwitchStatus> = statuses
                .iter()
                .filter(|s| placed[clock_index(s)].is_some_and(|p| p.0 == id))
                .collect();
            let known: Vec<(&str, String, f64)> = members
                .iter()
                .flat_map(|s| {
                    let (_, off) = placed[clock_index(s)].expect("every clock is placed");
                    processes(s)
                        .into_iter()
                        .map(move |(p, ahead)| (s.node.as_str(), p, ahead + off))
                })
                .collect();
            let min = known.iter().min_by(|a, b| a.2.total_cmp(&b.2))?;
            let max = known.iter().max_by(|a, b| a.2.total_cmp(&b.2))?;
            let mut bridges = used[id].clone();
            bridges.sort();
            (known.len() >= 2).then(|| Skew {
                spread_us: max.2 - min.2,
                switches: members.iter().map(|s| s.node.clone()).collect(),
                behind: min.1.clone(),
                behind_at: min.0.to_string(),
                ahead: max.1.clone(),
                ahead_at: max.0.to_string(),
                clocks: (0..clocks.len())
                    .filter(|&c| placed[c].is_some_and(|p| p.0 == id))
                    .map(|c| clocks[c].clone())
                    .collect(),
                bridges,
            })
        })
        .max_by(|a, b| a.spread_us.total_cmp(&b.spread_us))
}

fn lag_us(now: Instant, barrier: Instant) -> Option<f64> {
    (barrier != Instant::ZERO).then(|| now.saturating_since(barrier).as_nanos() as f64 / 1e3)
}

impl SwitchStatus {
    /// The status of the switch `pipeline` (named `node`, with `peers[port]` behind each port) at
    /// `now`: its 1Pipe program's registers and counters, and what no program took.
    pub fn of(
        pipeline: &SwitchNode,
        node: &str,
        peers: &[String],
        socket: &UdpCounters,
        now: Instant,
    ) -> SwitchStatus {
        let switch = pipeline.onepipe();
        let c = switch.counters();
        let dropped = pipeline.counters();
        SwitchStatus {
            node: node.to_string(),
            at_ns: now.as_nanos(),
            forwarded: c.forwarded,
            beacons_sent: c.beacons_sent,
            beacons_received: c.beacons_received,
            malformed: c.malformed,
            unknown_protocol: dropped.unknown_protocol + dropped.empty,
            control_malformed: 0,
            spoofed_source: c.spoofed_source,
            links_removed: c.links_removed,
            barrier_implausible: c.barrier_implausible,
            socket: socket.snapshot(),
            inputs: switch
                .inputs(now)
                .map(|r| LinkStatus {
                    port: r.port,
                    peer: peers.get(r.port as usize).cloned().unwrap_or_default(),
                    clock_ahead_us: r.clock_ahead_ns.map(|ns| ns as f64 / 1e3),
                    from_below: r.half == Half::Up,
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
            cpu: switch.cpu_status().map(|c| CpuReport {
                backlog: c.backlog,
                lag_last_us: c.lag_last_ns as f64 / 1e3,
                lag_max_us: c.lag_max_ns as f64 / 1e3,
                overflow_drops: c.overflow_drops,
            }),
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

    /// Paper 6.2.2: a switch CPU that falls behind is named, the one furthest behind first;
    /// CPUs keeping up, and chips, are not.
    #[test]
    fn the_switch_cpu_furthest_behind_is_named() {
        let cpu = |node: &str, lag_last_us: f64, overflow_drops: u64| SwitchStatus {
            node: node.into(),
            cpu: Some(CpuReport {
                lag_last_us,
                overflow_drops,
                ..CpuReport::default()
            }),
            ..SwitchStatus::default()
        };
        let chip = SwitchStatus {
            node: "chip".into(),
            ..SwitchStatus::default()
        };
        let ms = Duration::from_millis(1);
        let keeping_up = [cpu("tor0", 5.0, 0), chip.clone()];
        assert!(lagging_cpu(&keeping_up, ms).is_none());
        let behind = [
            cpu("tor0", 5.0, 0),
            cpu("spine", 2_500.0, 0),
            cpu("tor1", 1_800.0, 0),
            chip,
        ];
        assert_eq!(lagging_cpu(&behind, ms).map(|(n, _)| n), Some("spine"));
        let dropped_once = [cpu("tor0", 5.0, 3)];
        assert!(lagging_cpu(&dropped_once, ms).is_none());
    }

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
            from_below: peer.starts_with(PROCESS_PEER),
        }
    }

    /// The clocks furthest behind and ahead, each with the switch that measured it.
    fn extremes(k: &Skew) -> (&str, &str, &str, &str) {
        (&k.behind, &k.behind_at, &k.ahead, &k.ahead_at)
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
        assert_eq!(extremes(&k), ("process 0", "tor0", "process 3", "tor1"));
        assert_eq!(k.switches, ["tor0", "tor1"]);
        // On two machines (or unknown ones) each rack is compared only within itself.
        for (a, b) in [("m", "n"), ("", "")] {
            let k = skew(&[on(a, rack0.clone()), on(b, rack1.clone())]).unwrap();
            assert_eq!(k.spread_us, 1.0, "{a:?} {b:?}");
        }
    }

    /// Two machines, as `onepipe up --switch-clock-offset` emulates them: the spine and tor0
    /// read clock "a", tor1 reads clock "b", 3 ms ahead of "a". Rack 1's processes run 5 ms
    /// ahead of rack 0's (on "a"), so tor1 sees them 2 ms ahead of itself; the spine, on "a",
    /// sees tor1's slowest process 5 ms ahead (plus a little delay).
    #[test]
    fn clocks_of_two_machines_are_compared_through_a_link_between_them() {
        let clocked = |port, peer: &str, ahead: f64, below: bool| LinkStatus {
            clock_ahead_us: Some(ahead),
            from_below: below,
            ..link(port, peer, Some(10.0))
        };
        let on = |clock: &str, mut s: SwitchStatus| {
            s.clock_id = clock.into();
            s
        };
        let tor0 = on(
            "a",
            switch(
                "tor0",
                vec![
                    clocked(0, "process 0", -10.0, true),
                    clocked(1, "process 1", -12.0, true),
                    clocked(2, "spine", -40.0, false),
                ],
            ),
        );
        let tor1 = on(
            "b",
            switch(
                "tor1",
                vec![
                    clocked(0, "process 2", 1_990.0, true),
                    clocked(1, "process 3", 1_995.0, true),
                    clocked(2, "spine", -3_040.0, false),
                ],
            ),
        );
        let spine = on(
            "a",
            switch(
                "spine",
                vec![clocked(0, "tor0", -14.0, true), clocked(1, "tor1", 4_988.0, true)],
            ),
        );
        let fabric = [tor0.clone(), tor1.clone(), spine.clone()];
        let k = skew(&fabric).unwrap();
        // tor1's clock is 4_988 - 1_990 = 2_998 us ahead: process 3 is 1_995 + 2_998 on "a".
        assert_eq!(k.spread_us, 4_993.0 - -12.0, "{k:?}");
        assert_eq!(extremes(&k), ("process 1", "tor0", "process 3", "tor1"));
        assert_eq!(k.clocks, ["a", "b"]);
        assert_eq!(k.bridges, ["spine<-tor1"]);
        assert_eq!(k.switches.len(), 3);
        // Without the spine nothing joins the clocks: each rack alone.
        let k = skew(&[tor0.clone(), tor1.clone()]).unwrap();
        assert_eq!((k.spread_us, k.clocks.len()), (5.0, 1));
        // A ToR heard from above is no bridge: what it passes down is not its processes' minimum.
        let mut turned = spine.clone();
        turned.inputs[1].from_below = false;
        let k = skew(&[tor0, tor1, turned]).unwrap();
        assert!(k.bridges.is_empty() && k.spread_us < 10.0, "{k:?}");
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
