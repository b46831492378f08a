//! NetChain's demo run, short: closed-loop clients on the inproc runtime, a switch killed in
//! the middle, and every acknowledged write still in the store afterwards (issue 43: "kill a
//! switch in the middle of traffic without losing an acknowledged write").

use indicatif::ProgressBar;
use onepipe_bench::netchain::NetchainReport;
use onepipe_bench::netchain::{NetchainDemoConfig, run};
use onepipe_netchain::Event;
use onepipe_wire::Duration;

/// The run's history is linearizable, and no acknowledged write is missing from the final state.
fn assert_correct(r: &NetchainReport, what: &str) {
    assert_eq!(r.acknowledged_writes_lost, Some(0), "{what}");
    let l = r
        .linearizability
        .as_ref()
        .expect("recorded whole")
        .as_ref()
        .expect("well formed");
    assert!(l.ok(), "{what}: {l}");
    assert_eq!(l.operations, r.history.len() as u64);
}

fn short() -> NetchainDemoConfig {
    NetchainDemoConfig {
        keys: 500,
        clients: 16,
        write_ratio: 0.3,
        duration: Duration::from_millis(600),
        agent_timeout: Duration::from_millis(5),
        ..NetchainDemoConfig::default()
    }
}

#[test]
fn clients_read_and_write_through_the_chains() {
    let r = run(&short(), &ProgressBar::hidden()).unwrap();
    assert!(r.ops > 100, "{} operations", r.ops);
    assert!(!r.read_latency_ns.is_empty() && !r.write_latency_ns.is_empty());
    assert_eq!(r.refused, 0);
    assert_correct(&r, "plain");
    assert!(r.history.len() as u64 >= r.ops);
}

/// Each non-ToR switch in turn: the middle of some chains, the head of others, the tail of
/// others (paper 5: failover, then recovery one virtual group at a time).
#[test]
fn a_switch_killed_mid_run_loses_no_acknowledged_write() {
    for switch in 1..=3u16 {
        let c = NetchainDemoConfig {
            failure: Some((switch, Duration::from_millis(200))),
            ..short()
        };
        let r = run(&c, &ProgressBar::hidden()).unwrap();
        assert_correct(&r, &format!("switch {switch} killed"));
        assert!(r.failover().is_some(), "switch {switch}: failed over");
        assert!(
            r.events
                .iter()
                .any(|e| matches!(e, Event::Recovered { switch: s, .. } if *s == switch)),
            "switch {switch}: recovered: {:?}",
            r.events
        );
        assert_eq!(r.refused, 0);
    }
}

#[test]
fn lossy_links_cost_retries_not_writes() {
    let c = NetchainDemoConfig {
        loss: 0.01,
        ..short()
    };
    let r = run(&c, &ProgressBar::hidden()).unwrap();
    assert!(
        r.retries > 0,
        "1% loss on every link makes some attempts time out"
    );
    assert_eq!(r.acknowledged_writes_lost, Some(0));
}

/// The same run over the udp runtime: every node its own socket.
#[test]
fn the_udp_runtime_runs_the_same_nodes() {
    use onepipe_bench::netchain::fabric::NetchainRuntime;
    let c = NetchainDemoConfig {
        runtime: NetchainRuntime::Udp,
        failure: Some((1, Duration::from_millis(200))),
        agent_timeout: Duration::from_millis(20),
        ..short()
    };
    let r = run(&c, &ProgressBar::hidden()).unwrap();
    assert!(r.ops > 100, "{} operations", r.ops);
    assert!(r.failover().is_some());
    assert_correct(&r, "udp, switch 1 killed");
}
