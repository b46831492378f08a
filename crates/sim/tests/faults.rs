//! Runs the simulator's campaigns once failed on, each pinned as an explicit configuration
//! (campaign draws may change; these must keep passing). Each names the bug it found.

use onepipe_fabric::Topology;
use onepipe_sim::traffic::Pattern;
use onepipe_sim::{ClockStep, Failure, SimConfig, run};
use onepipe_wire::Duration;

fn ns(v: u64) -> Duration {
    Duration::from_nanos(v)
}

fn check(config: SimConfig) {
    let r = run(&config, &mut |_, _| {}).unwrap_or_else(|e| panic!("seed={}: {e}", config.seed));
    assert_eq!(r.violations, 0, "seed={}: {:?}", config.seed, r.examples);
    assert!(
        r.liveness_messages > 0,
        "seed={}: liveness must be checked",
        config.seed
    );
}

/// Campaign seed 21: a link that fails and heals never rejoined best-effort aggregation (the
/// live links kept the output barrier ahead of it), so everything it carried arrived late.
/// Fixed by freezing the output while a link joins (paper 4.2).
#[test]
fn healed_link_rejoins_best_effort() {
    check(SimConfig {
        seed: 21,
        topology: Topology::preset("leaf-spine:2,1,2").unwrap(),
        processes_per_host: 2,
        drift_ppb_max: 100_000,
        gap: ns(40_000),
        message_bytes_min: 8,
        message_bytes_max: 8,
        send_for: ns(409_000),
        drain: ns(300_000),
        failures: vec!["link:leaf0-spine0@137000ns+47000ns".parse::<Failure>().unwrap()],
        ..SimConfig::default()
    });
}

/// Campaign seed 35: with reliable delivery, a switch that timed a link out also dropped it
/// from the commit barrier; prepares still in flight on it then arrived below the commit
/// barrier and were never delivered. Only the controller may do that (paper 5.2).
#[test]
fn reliable_delivery_stalls_then_resumes_across_a_link_failure() {
    check(SimConfig {
        seed: 35,
        topology: Topology::preset("leaf-spine:2,1,2").unwrap(),
        processes_per_host: 2,
        skew_mean: ns(5_000),
        drift_ppb_max: 100_000,
        gap: ns(11_000),
        message_bytes_min: 200,
        message_bytes_max: 200,
        send_for: ns(466_000),
        drain: ns(3_000_000),
        reliable: true,
        loss: 0.03,
        faults_for: Some(ns(233_000)),
        failures: vec!["link:leaf1-spine0@105000ns+46000ns".parse().unwrap()],
        ..SimConfig::default()
    });
}

/// Campaign seed 4: the same for a switch that stops and comes back (its own timers then
/// declared every input dead at once).
#[test]
fn reliable_delivery_survives_a_switch_pause() {
    check(SimConfig {
        seed: 4,
        topology: Topology::preset("single:5").unwrap(),
        processes_per_host: 2,
        drift_ppb_max: 100_000,
        pattern: Pattern::Random { fanout: 8 },
        gap: ns(33_000),
        message_bytes_min: 8,
        message_bytes_max: 5008,
        send_for: ns(400_000),
        drain: ns(3_000_000),
        reliable: true,
        loss: 0.03,
        faults_for: Some(ns(106_500)),
        failures: vec!["switch:leaf0@84000ns+61000ns".parse().unwrap()],
        ..SimConfig::default()
    });
}

/// Campaign seed 47: a duplicating link made best effort deliver a message twice (both copies
/// entered the reorder buffer) and report copies of fragments as lost messages.
#[test]
fn duplicated_frames_are_delivered_once() {
    check(SimConfig {
        seed: 47,
        topology: Topology::preset("leaf-spine:4,3,2").unwrap(),
        processes_per_host: 2,
        skew_mean: ns(5_000),
        gap: ns(37_000),
        message_bytes_min: 8,
        message_bytes_max: 5008,
        send_for: ns(431_000),
        drain: ns(300_000),
        loss: 0.01,
        duplicate: 0.01,
        faults_for: Some(ns(215_500)),
        ..SimConfig::default()
    });
}

/// Links that reorder frames (paper 4.1's non-FIFO path): best effort drops what arrives below
/// the barrier and reports each drop to its sender (NAK, send failure) without breaking order;
/// reliable loses nothing.
#[test]
fn reordering_links_cost_best_effort_late_drops_and_reliable_nothing() {
    let base = SimConfig {
        seed: 9,
        reorder: 0.05,
        faults_for: Some(ns(300_000)),
        ..SimConfig::default()
    };
    let r = run(&base, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    assert!(r.engine.reordered > 1000 && r.late_drops > 10, "{r:?}");
    assert_eq!(
        r.send_failures, r.late_drops,
        "every late drop is reported to its sender"
    );
    assert_eq!(r.delivered + r.late_drops, r.scatterings_sent * 32);
    check(SimConfig {
        reliable: true,
        ..base
    });
}

/// A failure with the controller, in a run whose faults (loss, duplication) hit the
/// management links too: every correct process recovers and atomicity holds.
fn check_recovered(config: SimConfig) {
    let r = run(&config, &mut |_, _| {}).unwrap_or_else(|e| panic!("seed={}: {e}", config.seed));
    assert_eq!(r.violations, 0, "seed={}: {:?}", config.seed, r.examples);
    assert!(r.checks.atomicity);
    let f = r.failure.expect("a controller run");
    assert_eq!(f.stalled_processes, 0, "seed={}: {f:?}", config.seed);
}

fn with_controller(seed: u64, topology: &str, fail: &str) -> SimConfig {
    SimConfig {
        seed,
        topology: Topology::preset(topology).unwrap(),
        reliable: true,
        controller: true,
        drain: ns(3_000_000),
        failures: vec![fail.parse::<Failure>().unwrap()],
        ..SimConfig::default()
    }
}

/// Campaign seed 9000980: the ToR's link-down report was lost on its management link and
/// made only once, so the controller never heard of the failed host and every commit barrier
/// stalled. Switches now repeat a report until the controller acts on it.
#[test]
fn a_lost_link_down_report_is_made_again() {
    check_recovered(SimConfig {
        processes_per_host: 2,
        skew_mean: ns(0),
        drift_ppb_max: 10_000,
        gap: ns(10_000),
        send_for: ns(264_000),
        loss: 0.03,
        reorder: 0.001,
        faults_for: Some(ns(132_000)),
        ..with_controller(9_000_980, "leaf-spine:4,3,2", "host:4@82000ns")
    });
}

/// Campaign seeds 9004885 and 9007391: a Resume was lost; the switch kept the failed link in
/// its commit lane and every barrier behind it stalled. A switch that reports a resumed input
/// again gets its Resume again.
#[test]
fn a_lost_resume_is_sent_again() {
    check_recovered(SimConfig {
        skew_mean: ns(0),
        drift_ppb_max: 100_000,
        pattern: Pattern::Random { fanout: 2 },
        gap: ns(28_000),
        message_bytes_max: 1564,
        send_for: ns(461_000),
        loss: 0.03,
        duplicate: 0.001,
        faults_for: Some(ns(230_500)),
        ..with_controller(9_004_885, "leaf-spine:4,3,2", "switch:spine2@126000ns")
    });
    check_recovered(SimConfig {
        processes_per_host: 2,
        gap: ns(39_000),
        message_bytes_min: 8,
        message_bytes_max: 108,
        send_for: ns(576_000),
        loss: 0.03,
        duplicate: 0.01,
        faults_for: Some(ns(288_000)),
        ..with_controller(9_007_391, "three-layer:2,2,2,2,2", "switch:core1@147000ns")
    });
}

/// Campaign seed 9021109: a process's registration was lost, so the controller did not tell
/// it of a failure; it delivered the failed process's messages that every other receiver
/// discarded. A process now registers again until the controller confirms.
#[test]
fn a_lost_registration_is_sent_again() {
    check_recovered(SimConfig {
        processes_per_host: 2,
        drift_ppb_max: 100_000,
        pattern: Pattern::Random { fanout: 8 },
        gap: ns(5_000),
        message_bytes_min: 200,
        message_bytes_max: 1700,
        send_for: ns(210_000),
        loss: 0.03,
        duplicate: 0.01,
        faults_for: Some(ns(105_000)),
        ..with_controller(9_021_109, "single:5", "host:7@72000ns")
    });
}

/// Campaign seed 20021077: a process whose registration came late (its first lost) was not
/// told of the failure decided meanwhile, nor waited for, and delivered a message of the
/// failed process that every other receiver discarded. A process registering during a
/// recovery is now announced to and waited for.
#[test]
fn a_process_registering_during_a_recovery_takes_part_in_it() {
    check_recovered(SimConfig {
        processes_per_host: 2,
        skew_mean: ns(0),
        drift_ppb_max: 10_000,
        gap: ns(32_000),
        message_bytes_min: 200,
        message_bytes_max: 200,
        send_for: ns(445_000),
        loss: 0.03,
        duplicate: 0.001,
        faults_for: Some(ns(222_500)),
        ..with_controller(20_021_077, "three-layer:2,2,2,1,3", "host:4@20000ns")
    });
}

/// Only the processes behind the failed host are declared failed.
fn check_declared(config: SimConfig, expected: &[u32]) {
    let r = run(&config, &mut |_, _| {}).unwrap_or_else(|e| panic!("seed={}: {e}", config.seed));
    assert_eq!(r.violations, 0, "seed={}: {:?}", config.seed, r.examples);
    let f = r.failure.expect("a controller run");
    let failed: Vec<u32> = f.failed_processes.iter().map(|&(p, _)| p).collect();
    assert_eq!(failed, expected, "seed={}: {f:?}", config.seed);
}

/// Campaign seeds 30002001 and 30009670 (3% loss on every link, management links included):
/// a correct process's announcement or its answer was lost, and the process was declared
/// failed at the answer timeout with the failed host (processes 0, 2 and 10; 5 and 6). An
/// unanswered announcement is now sent again every quarter of the answer timeout.
#[test]
fn a_lost_announcement_or_answer_does_not_fail_a_correct_process() {
    check_declared(
        SimConfig {
            processes_per_host: 2,
            drift_ppb_max: 10_000,
            pattern: Pattern::Incast { target: 6 },
            gap: ns(13_000),
            message_bytes_min: 64,
            message_bytes_max: 64,
            send_for: ns(401_000),
            loss: 0.03,
            duplicate: 0.001,
            faults_for: Some(ns(200_500)),
            ..with_controller(30_002_001, "three-layer:2,2,2,2,2", "host:2@46000ns")
        },
        &[2],
    );
    check_declared(
        SimConfig {
            skew_mean: ns(0),
            drift_ppb_max: 10_000,
            pattern: Pattern::Incast { target: 0 },
            gap: ns(36_000),
            message_bytes_min: 200,
            message_bytes_max: 200,
            send_for: ns(391_000),
            loss: 0.03,
            reorder: 0.001,
            faults_for: Some(ns(195_500)),
            ..with_controller(30_009_670, "leaf-spine:3,2,3", "host:6@64000ns")
        },
        &[6],
    );
}

/// Fails listing each failing seed of `report` with its problems and replay command.
fn assert_no_failing_seeds(report: &onepipe_sim::campaign::CampaignReport) {
    let failing: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.violations > 0)
        .map(|r| format!("seed={} {:?}\n  {}", r.seed, r.problems, r.replay))
        .collect();
    assert!(failing.is_empty(), "{}", failing.join("\n"));
}

/// A short swarm campaign: every seed draws its own fabric, traffic and faults.
#[test]
fn short_campaign_finds_no_violations() {
    let report = onepipe_sim::campaign::run_campaign(1, 24, 2, 1, &|_| {});
    assert_no_failing_seeds(&report);
    assert_eq!(report.runs.len(), 24);
}

/// Issue 42: several concurrent faults per seed. The seeds below draw two or more overlapping
/// faults (checked, so that a change of the draw cannot make this test vacuous).
#[test]
fn short_campaign_with_concurrent_faults_finds_no_violations() {
    let report = onepipe_sim::campaign::run_campaign(1, 24, 2, 4, &|_| {});
    assert_no_failing_seeds(&report);
    let concurrent = report.runs.iter().filter(|r| r.failures.len() >= 2).count();
    assert!(
        concurrent >= 3,
        "only {concurrent} of 24 seeds drew several faults"
    );
}

/// Issue 42: a rack whose only process died for good (no controller, best effort) leaves its
/// ToR's uplink half with no input. Until the half advanced on the switch's clock, the spine
/// waited on that rack for ever and the surviving process delivered nothing more, not even
/// its own broadcasts. Each broadcast reaches its sender, so deliveries can be no fewer than
/// the scatterings sent.
#[test]
fn a_rack_left_without_processes_does_not_hold_the_fabric_back() {
    let config = SimConfig {
        seed: 5,
        topology: Topology::preset("leaf-spine:2,1,1").unwrap(),
        send_for: ns(500_000),
        failures: vec!["host:1@20us".parse::<Failure>().unwrap()],
        ..SimConfig::default()
    };
    let r = run(&config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    assert!(r.scatterings_sent > 20, "{}", r.scatterings_sent);
    assert!(
        r.delivered >= r.scatterings_sent,
        "{} delivered of {} scatterings",
        r.delivered,
        r.scatterings_sent
    );
}

/// The configuration a campaign seed's `replay` command names (the flags campaigns print).
fn replay(command: &str) -> SimConfig {
    let mut config = SimConfig {
        reliable: false,
        ..SimConfig::default()
    };
    let mut words = command.split_whitespace().skip(2);
    let time = |v: &str| onepipe_sim::config::parse_time(v).unwrap();
    while let Some(flag) = words.next() {
        if flag == "--reliable" || flag == "--controller" {
            config.reliable = true;
            config.controller |= flag == "--controller";
            continue;
        }
        let v = words.next().unwrap();
        match flag {
            "--seed" => config.seed = v.parse().unwrap(),
            "--topology" => config.topology = Topology::preset(v).unwrap(),
            "--processes-per-host" => config.processes_per_host = v.parse().unwrap(),
            "--skew" => config.skew_mean = time(v),
            "--drift-ppm" => config.drift_ppb_max = v.parse::<u32>().unwrap() * 1_000,
            "--pattern" => config.pattern = v.parse::<Pattern>().unwrap(),
            "--gap" => config.gap = time(v),
            "--message-bytes" => config.message_bytes_min = v.parse().unwrap(),
            "--message-bytes-max" => config.message_bytes_max = v.parse().unwrap(),
            "--send" => config.send_for = time(v),
            "--drain" => config.drain = time(v),
            "--drain-max" => config.drain_max = time(v),
            "--loss" => config.loss = v.parse().unwrap(),
            "--dup" => config.duplicate = v.parse().unwrap(),
            "--reorder" => config.reorder = v.parse().unwrap(),
            "--faults-for" => config.faults_for = Some(time(v)),
            "--fail" => config.failures.push(v.parse::<Failure>().unwrap()),
            "--clock-step" => config.clock_steps.push(v.parse::<ClockStep>().unwrap()),
            "--time-ahead-max-ms" => config.time_ahead_max = Duration::from_millis(v.parse().unwrap()),
            _ => panic!("flag {flag} of a replay"),
        }
    }
    config
}

/// A replayed campaign seed with the controller and permanent faults: no violation, no
/// broken invariant (a panic fails the test), every correct process past the failures.
fn check_replay(command: &str) {
    let config = replay(command);
    assert!(config.controller && config.failures.len() >= 2, "{command}");
    check_recovered(config);
}

/// Campaign seeds 90111467 and 90117483 (several permanent failures): a recall takes its PSN
/// after the packets of newer scatterings, so its scattering could be done and retired while
/// the selectively acknowledged recall still waited in its connection for the cumulative ACK;
/// the slot went to a new scattering and the reliable sender's invariants found the entry
/// naming another message. A retired scattering's slot now stays taken until its last entry
/// leaves (crates/proto/src/reliable/tests_recall.rs).
#[test]
fn a_selectively_acknowledged_recall_outlives_its_retired_scattering() {
    check_replay(
        "onepipe sim --seed 90111467 --topology leaf-spine:4,3,2 --processes-per-host 2 --skew 0ns --drift-ppm 0 --pattern broadcast --gap 11000ns --message-bytes 8 --message-bytes-max 108 --send 273000ns --drain 3000000ns --drain-max 0ns --reliable --controller --fail switch:leaf0@117000ns --fail link:leaf2-spine2@99000ns --fail host:10@35000ns --fail host:8@39000ns",
    );
    check_replay(
        "onepipe sim --seed 90117483 --topology leaf-spine:3,2,3 --processes-per-host 2 --skew 0ns --drift-ppm 0 --pattern broadcast --gap 33000ns --message-bytes 8 --message-bytes-max 1508 --send 552000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0.01 --dup 0 --reorder 0.001 --faults-for 276000ns --fail host:8@112000ns --fail host:16@251000ns --fail switch:leaf1@144000ns --fail host:5@63000ns",
    );
}

/// Campaign seeds 90111865, 90112596, 90114169 and 90114946: links and switches failed so that two racks could
/// reach each other only through a valley (leaf, spine, leaf, spine, leaf), which carries
/// neither packets nor barriers. The controller judged by plain connectivity, failed nobody
/// and removed the dead links from the commit lanes, so one rack's commit barrier no longer
/// waited for the other's processes; when those failed later (or never), a scattering was
/// delivered by some correct receivers and discarded by the others. The controller now fails
/// the racks that cannot reach the rest up and down (controller/graph.rs,
/// `unreachable_uplinks`).
#[test]
fn racks_joined_only_through_a_valley_are_a_partition() {
    check_replay(
        "onepipe sim --seed 90111865 --topology leaf-spine:4,3,2 --processes-per-host 2 --skew 0ns --drift-ppm 10 --pattern random:6 --gap 30000ns --message-bytes 8 --message-bytes-max 108 --send 531000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0.03 --dup 0.001 --reorder 0 --faults-for 265500ns --fail link:leaf0-spine2@186000ns --fail switch:leaf3@27000ns --fail switch:spine2@52000ns",
    );
    check_replay(
        "onepipe sim --seed 90112596 --topology leaf-spine:3,2,3 --processes-per-host 2 --skew 0ns --drift-ppm 100 --pattern random:5 --gap 9000ns --message-bytes 200 --message-bytes-max 1700 --send 491000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0.01 --dup 0.01 --reorder 0.01 --faults-for 245500ns --fail link:leaf0-spine0@142000ns --fail link:leaf1-spine0@122000ns --fail link:leaf0-spine1@26000ns",
    );
    check_replay(
        "onepipe sim --seed 90114169 --topology leaf-spine:3,2,3 --processes-per-host 2 --skew 1000ns --drift-ppm 100 --pattern broadcast --gap 39000ns --message-bytes 8 --message-bytes-max 108 --send 588000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0 --dup 0.001 --reorder 0.01 --faults-for 294000ns --fail link:leaf2-spine0@285000ns --fail host:12@190000ns --fail link:leaf0-spine1@128000ns --fail link:leaf0-spine1@159000ns",
    );
    check_replay(
        "onepipe sim --seed 90114946 --topology three-layer:2,2,2,1,3 --processes-per-host 1 --skew 5000ns --drift-ppm 0 --pattern random:8 --gap 27000ns --message-bytes 200 --message-bytes-max 300 --send 503000ns --drain 3000000ns --drain-max 0ns --reliable --controller --fail link:spine1.0-core0@107000ns --fail link:tor1.0-spine1.1@128000ns --fail switch:spine0.0@109000ns",
    );
}

/// Campaign seed 90115774: a ToR died, then a host of the other rack. Nobody reports a dead
/// ToR's links to its own hosts, so its rack looked the larger side and the controller waited
/// for ever for the dead ToR to cut its uplink; the spine's repeated reports of that link
/// restarted the wait each time. A switch that does not carry out a cut within the answer
/// timeout is now failed with its links (crates/proto/src/controller/cuts.rs).
#[test]
fn a_dead_tor_that_cannot_carry_out_a_cut_is_failed_with_its_rack() {
    check_replay(
        "onepipe sim --seed 90115774 --topology leaf-spine:2,1,2 --processes-per-host 2 --skew 5000ns --drift-ppm 10 --pattern random:4 --gap 10000ns --message-bytes 8 --message-bytes-max 8 --send 347000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0.01 --dup 0.01 --reorder 0 --faults-for 173500ns --fail link:leaf1-spine0@152000ns --fail switch:leaf1@95000ns --fail host:3@100000ns",
    );
}

/// A spine or a core that crashes and starts again with none of its state is routed around,
/// then readmitted link by link as its neighbours hear it: nobody is declared failed, and
/// everything sent after it came back is delivered (liveness), with and without loss.
#[test]
fn a_restarted_spine_or_core_is_readmitted_and_nothing_is_lost() {
    for (topology, fail, loss) in [
        ("leaf-spine:2,2,2", "restart:spine0@100us+100us", 0.0),
        ("testbed", "restart:core0@100us+50us", 0.0),
        ("testbed", "restart:spine0.0@100us+50us", 0.01),
    ] {
        let mut config = with_controller(1, topology, fail);
        config.send_for = ns(600_000);
        config.loss = loss;
        config.faults_for = (loss > 0.0).then_some(ns(300_000));
        let r = run(&config, &mut |_, _| {}).unwrap();
        assert_eq!(r.violations, 0, "{fail}: {:?}", r.examples);
        assert!(r.checks.liveness && r.checks.no_loss, "{fail}");
        let f = r.failure.expect("a controller run");
        assert!(f.failed_processes.is_empty(), "{fail}: {f:?}");
        assert!(f.links_readmitted >= 2, "{fail}: {f:?}");
    }
}

/// A ToR that restarts after its rack was declared failed stays out: its hosts would come back
/// only through receiver recovery, never by a link healing under them.
#[test]
fn a_restarted_tor_whose_rack_failed_stays_out() {
    let mut config = with_controller(1, "leaf-spine:2,2,2", "restart:leaf0@100us+100us");
    config.send_for = ns(600_000);
    let r = run(&config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    let f = r.failure.expect("a controller run");
    assert_eq!(f.failed_processes.len(), 2, "{f:?}");
    assert_eq!(f.links_readmitted, 0, "{f:?}");
}

/// Campaign seed 90109074 (no controller): a host paused as its ToR crashed, and the ToR came
/// back with none of its state. The fresh ToR forgot the silent host as one that never joined
/// and let the commit barrier pass; the host came back with a scattering below it, which could
/// never complete, and every commit barrier stalled. A restarted switch holds the commit lane
/// for every input until it speaks (`Switch::restarted`).
#[test]
fn a_host_silent_across_its_tors_restart_holds_the_commit_lane() {
    let command = "onepipe sim --seed 90109074 --topology leaf-spine:2,1,2 --processes-per-host 1 --skew 300ns --drift-ppm 0 --pattern random:3 --gap 28000ns --message-bytes 64 --message-bytes-max 164 --send 405000ns --drain 3000000ns --drain-max 0ns --reliable --fail host:3@189000ns+90000ns --fail restart:leaf1@187000ns+22000ns";
    let config = replay(command);
    let r = run(&config, &mut |_, _| {}).unwrap();
    assert_eq!(r.violations, 0, "{:?}", r.examples);
    assert!(r.checks.liveness && r.checks.no_loss);
}

/// Campaign seed 90109845: a spine restarted while the core it links to was dead. The fresh
/// spine held its input from the dead core in its commit lane (a restarted switch holds every
/// input until it speaks) and reported it; the controller had decided that link while the spine
/// was down, with only the core's end to remove, and sent the spine no Resume, so every rack's
/// commit barrier stalled. A decided link's late report gets its Resume once no recovery is in
/// progress.
#[test]
fn a_restarted_spine_next_to_a_dead_core_is_told_to_drop_it() {
    let command = "onepipe sim --seed 90109845 --topology testbed --processes-per-host 2 --skew 5000ns --drift-ppm 10 --pattern random:4 --gap 17408ns --message-bytes 200 --message-bytes-max 1700 --send 264000ns --drain 3000000ns --drain-max 0ns --reliable --controller --fail switch:core1@105000ns --fail restart:spine0.0@37000ns+91000ns";
    let config = replay(command);
    check_recovered(config);
}

/// Campaign seeds 90114189 and 90116684: a ToR restarted between the decision that failed its
/// rack (its processes alive behind it) and the Resume. The spines heard it again and counted
/// its commit barrier, which passed the failure timestamp with its processes' messages before
/// every correct receiver had heard of the failure. A switch with a controller now holds a
/// reported input's commit register until the controller removes or readmits it
/// (`Switch::set_controlled`).
#[test]
fn a_tor_back_before_its_racks_resume_does_not_move_the_commit_lane() {
    check_replay(
        "onepipe sim --seed 90114189 --topology leaf-spine:4,3,2 --processes-per-host 2 --skew 0ns --drift-ppm 0 --pattern random:6 --gap 22000ns --message-bytes 64 --message-bytes-max 64 --send 363000ns --drain 3000000ns --drain-max 0ns --reliable --controller --fail host:5@67000ns --fail restart:leaf1@179000ns+63000ns",
    );
    check_replay(
        "onepipe sim --seed 90116684 --topology leaf-spine:4,3,2 --processes-per-host 2 --skew 0ns --drift-ppm 0 --pattern random:6 --gap 38000ns --message-bytes 8 --message-bytes-max 108 --send 268000ns --drain 3000000ns --drain-max 0ns --reliable --controller --fail host:7@52000ns --fail link:leaf1-spine0@110000ns --fail restart:leaf0@54000ns+82000ns",
    );
}

/// Campaign seeds 90112648 and 90117261: a spine restarted in a pod where a ToR or the other
/// spine then failed. Readmitted while it still held its input from the dead ToR in its commit
/// lane (nobody had told it to remove it: the link was decided while it was out), it joined its
/// neighbours' commit lanes as a new link that never caught up, and froze them for good. A
/// switch taken back is now told to remove its inputs on every link still down, and nothing
/// is readmitted while a recovery is in progress.
#[test]
fn a_readmitted_spine_drops_its_inputs_still_down() {
    check_replay(
        "onepipe sim --seed 90112648 --topology three-layer:2,2,2,1,3 --processes-per-host 2 --skew 0ns --drift-ppm 10 --pattern broadcast --gap 15000ns --message-bytes 64 --message-bytes-max 64 --send 322000ns --drain 3000000ns --drain-max 0ns --reliable --controller --loss 0.03 --dup 0.01 --reorder 0 --faults-for 161000ns --fail switch:spine0.0@161000ns --fail switch:core0@126000ns --fail link:spine1.0-core0@100000ns --fail restart:spine0.1@98000ns+79000ns",
    );
    check_replay(
        "onepipe sim --seed 90117261 --topology three-layer:2,2,2,2,2 --processes-per-host 2 --skew 20000ns --drift-ppm 0 --pattern broadcast --gap 9000ns --message-bytes 8 --message-bytes-max 108 --send 258000ns --drain 3155000ns --drain-max 0ns --reliable --controller --fail host:5@63000ns --fail link:tor1.0-spine1.0@37000ns --fail switch:tor0.1@105000ns --fail link:tor1.0-spine1.1@73000ns --fail restart:spine0.1@92000ns+98000ns --clock-step host:15@13000ns+75000ns",
    );
}

/// Campaign seed 90110662: the orders that took a restarted spine's inputs out (sent as it was
/// readmitted, for every link of it still down) crossed the orders readmitting those links on
/// a reordering management link, and a live input stayed out of its commit lane. Only inputs
/// from the side the controller cut off are taken out now.
#[test]
fn a_readmitted_spine_keeps_its_inputs_from_the_controllers_side() {
    check_replay(
        "onepipe sim --seed 90110662 --topology leaf-spine:4,3,2 --processes-per-host 2 --skew 1000ns --drift-ppm 0 --pattern random:4 --gap 29000ns --message-bytes 200 --message-bytes-max 300 --send 385000ns --drain 3522000ns --drain-max 0ns --reliable --controller --loss 0 --dup 0.01 --reorder 0.01 --faults-for 192500ns --fail host:4@52000ns --fail link:leaf3-spine0@184000ns --fail switch:spine1@179000ns --fail restart:spine2@34000ns+73000ns --clock-step host:13@111000ns-518000ns",
    );
}

/// Campaign seed 90123480: every ToR died, with a host. The controller declares a host behind a
/// dead ToR only once its announcement and then its cut go unanswered, two answer timeouts
/// (4 ms here), and the campaign's 3 ms drain ended the run with that host undeclared and
/// counted correct. Controller runs of the campaign now drain for 5 ms.
#[test]
fn every_tor_dead_is_declared_within_the_campaigns_drain() {
    check_replay(
        "onepipe sim --seed 90123480 --topology leaf-spine:2,1,2 --processes-per-host 2 --skew 5000ns --drift-ppm 100 --pattern random:8 --gap 24000ns --message-bytes 64 --message-bytes-max 164 --send 286000ns --drain 5000000ns --drain-max 0ns --reliable --controller --loss 0.001 --dup 0.01 --reorder 0.01 --faults-for 143000ns --fail host:4@99000ns --fail switch:leaf1@129000ns --fail switch:leaf0@122000ns",
    );
}
