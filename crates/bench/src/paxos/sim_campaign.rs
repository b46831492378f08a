//! A campaign of seeded Paxos runs: each seed draws the placement, partitions, clients, link
//! faults (loss, duplication, reordering) and one role that fails in the window (the
//! coordinator, an acceptor or a replica: the faults the thesis's protocol tolerates, f = 1), and
//! the run must pass agreement, validity and linearizability and answer some calls.

use super::Failure;
use super::sim::{PaxosSimConfig, placement_name, run_sim, sim_tuning};
use onepipe_fabric::hash::SplitMix;
use onepipe_paxos::Placement;
use onepipe_wire::Duration;
use serde::Serialize;

/// The measured window of a campaign run; the failure falls in its first half, so that a
/// coordinator's failover (a few retries) happens inside it.
const WINDOW: Duration = Duration::from_millis(20);

/// What one seed drew and how its run ended.
#[derive(Clone, Debug, Serialize)]
pub struct CampaignRun {
    pub seed: u64,
    pub placement: &'static str,
    pub partitions: u16,
    pub clients: usize,
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub failure: String,
    pub ok: u64,
    pub unknown: u64,
    pub failovers: u64,
    pub events: u64,
    pub trace_hash: String,
    pub agreement: Option<bool>,
    pub validity: Option<bool>,
    pub linearizable: Option<bool>,
    pub problem: Option<String>,
    pub passed: bool,
}

/// The configuration seed `seed` draws.
pub fn drawn(seed: u64) -> PaxosSimConfig {
    let mut rng = SplitMix::new(seed ^ 0x7a05_5eed);
    let mut pick = |n: u64| rng.next_u64() % n;
    let placement = if pick(2) == 0 {
        Placement::InNetwork
    } else {
        Placement::Software
    };
    let partitions = 1 + pick(3) as u16;
    let at = Duration::from_micros(500 + pick(WINDOW.as_nanos() / 2_000));
    let failure = match pick(3) {
        0 => Failure::Coordinator(at),
        1 => Failure::Acceptor(pick(3) as usize, at),
        _ => Failure::Replica(pick(3) as usize, at),
    };
    let percent = |p: u64, max: u64| (p % (max + 1)) as f64 / 1000.0;
    PaxosSimConfig {
        placement,
        clients: 2 + pick(15) as usize,
        keys: 10 + pick(90) as usize,
        write_ratio: 0.5,
        duration: WINDOW,
        tuning: sim_tuning(partitions),
        failure: Some(failure),
        loss: percent(pick(1000), 20),
        duplicate: percent(pick(1000), 20),
        reorder: percent(pick(1000), 50),
        reorder_delay: Duration::from_micros(1 + pick(20)),
        seed,
        ..PaxosSimConfig::default()
    }
}

pub fn failure_name(f: Option<Failure>) -> String {
    let us = |t: Duration| t.as_micros_f64().round() as u64;
    match f {
        None => "none".into(),
        Some(Failure::Coordinator(t)) => format!("coordinator@{}us", us(t)),
        Some(Failure::Acceptor(i, t)) => format!("acceptor:{i}@{}us", us(t)),
        Some(Failure::Replica(i, t)) => format!("replica:{i}@{}us", us(t)),
    }
}

/// Runs seed `seed`'s draw.
pub fn run_seed(seed: u64) -> Result<CampaignRun, String> {
    let c = drawn(seed);
    let r = run_sim(&c)?;
    let p = &r.report;
    let checks = &p.checks;
    let all_checked = [checks.agreement, checks.validity, checks.linearizable]
        .iter()
        .all(|c| *c == Some(true));
    Ok(CampaignRun {
        seed,
        placement: placement_name(c.placement),
        partitions: c.tuning.partitions,
        clients: c.clients,
        loss: c.loss,
        duplicate: c.duplicate,
        reorder: c.reorder,
        failure: failure_name(c.failure),
        ok: p.ok,
        unknown: p.unknown,
        failovers: p.failovers,
        events: r.stats.events,
        trace_hash: format!("{:016x}", r.stats.trace_hash),
        agreement: checks.agreement,
        validity: checks.validity,
        linearizable: checks.linearizable,
        problem: checks
            .problem
            .clone()
            .or_else(|| (p.ok == 0).then(|| "no call was answered".to_string())),
        passed: all_checked && checks.problem.is_none() && p.ok > 0,
    })
}
