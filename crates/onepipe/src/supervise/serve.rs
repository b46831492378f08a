//! The controller of a udp fabric as `onepipe controller` runs it (docs/udp.md): the
//! management-plane controller over the topology's [controller] address, on a log, with a
//! line for the operator for each thing it does, its switches and ports named as the topology
//! names them.

use super::{Note, Say};
use crate::control_node::{ControlEvent, ControllerNode};
use crate::udp::{UdpOptions, run_controller};
use onepipe_fabric::{Peer, Wiring};
use onepipe_proto::controller::store::Store;
use onepipe_proto::controller::{ControllerConfig, Member};
use onepipe_runtime::udp::UdpCounters;
use onepipe_runtime::udp::plan::AddressPlan;
use std::sync::atomic::AtomicBool;

/// `t=SECONDS.MICROS` since the Unix epoch: the controller's clock is the system clock.
fn at(t: onepipe_wire::Instant) -> String {
    let ns = t.as_nanos();
    format!("t={}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

/// Names for what the controller's events number.
struct Names {
    wiring: Wiring,
}

impl Names {
    fn switch(&self, s: usize) -> String {
        self.wiring
            .topology
            .switches
            .get(s)
            .map_or(format!("switch {s}"), |x| x.name.clone())
    }

    /// What is behind `port` of `member`.
    fn peer(&self, member: Member, port: u16) -> String {
        match member {
            Member::Switch(s) => match self.wiring.switch_ports.get(s).and_then(|p| p.get(port as usize)) {
                Some(p) => match p.peer {
                    Peer::Process(p) => format!("process {p}"),
                    Peer::Switch { switch, .. } => self.switch(switch),
                },
                None => format!("port {port}"),
            },
            Member::Process(p) => self
                .wiring
                .processes
                .get(p as usize)
                .map_or(format!("port {port}"), |spec| self.switch(spec.tor)),
        }
    }

    fn member(&self, member: Member) -> String {
        match member {
            Member::Switch(s) => self.switch(s),
            Member::Process(p) => format!("process {p}"),
        }
    }

    fn describe(&self, e: &ControlEvent) -> String {
        match e {
            ControlEvent::Report {
                at: t,
                member,
                port,
                last_commit,
            } => format!(
                "{} report: {} lost its link from {} (last commit barrier {})",
                at(*t),
                self.member(*member),
                self.peer(*member, *port),
                at(*last_commit)
            ),
            ControlEvent::Declared {
                at: t,
                failures,
                announced_to,
            } => {
                let list: Vec<String> = failures
                    .iter()
                    .map(|f| format!("process {} (failure timestamp {})", f.process, at(f.ts)))
                    .collect();
                format!(
                    "{} declared failed: {}; announced to {announced_to} correct processes",
                    at(*t),
                    list.join(", ")
                )
            }
            ControlEvent::Rerouted { at: t, avoid } => {
                let ends: Vec<String> = avoid
                    .iter()
                    .map(|&(s, p)| format!("{}->{}", self.switch(s), self.peer(Member::Switch(s), p)))
                    .collect();
                format!("{} reroute: every switch avoids {}", at(*t), ends.join(", "))
            }
            ControlEvent::Resumed { at: t, switch, ports } => {
                let from: Vec<String> = ports
                    .iter()
                    .map(|&p| self.peer(Member::Switch(*switch), p))
                    .collect();
                format!(
                    "{} resume: {} stops waiting for {}",
                    at(*t),
                    self.switch(*switch),
                    from.join(", ")
                )
            }
            ControlEvent::Cut { at: t, switch, port } => format!(
                "{} cut: {} cuts its link from {}",
                at(*t),
                self.switch(*switch),
                self.peer(Member::Switch(*switch), *port)
            ),
            ControlEvent::Implausible {
                at: t,
                member,
                port,
                ahead_ns,
                refused,
            } => format!(
                "{} implausible time: {} refused {refused} frames from {} with barriers or timestamps up to {:.3} s ahead of its clock (a clock past the skew bound, or forged frames); nobody is declared failed for it",
                at(*t),
                self.member(*member),
                self.peer(*member, *port),
                *ahead_ns as f64 / 1e9
            ),
            ControlEvent::Refused { at: t, port, reason } => {
                format!("{} refused a frame on its port {port}: {reason}", at(*t))
            }
        }
    }
}

/// Runs the controller on `store` (described as `log`) until `stop`, saying what it does.
pub fn serve<S: Store + Send>(
    options: &UdpOptions,
    config: ControllerConfig,
    store: S,
    stop: &AtomicBool,
    log: &str,
    say: Say,
) -> Result<(), Box<dyn std::error::Error>> {
    let wiring = Wiring::new(options.topology.clone(), options.processes_per_host)?;
    let plan = AddressPlan::new(&wiring)?;
    let names = Names { wiring };
    let counters = UdpCounters::default();
    let mut started = false;
    let mut on_events = |c: &ControllerNode<S>, events: Vec<ControlEvent>| {
        if !std::mem::replace(&mut started, true) {
            say(Note::Out(format!(
                "controller of `{}` at {} for {} switches and {} processes; log {}{}",
                names.wiring.topology.name,
                plan.controller.map_or("?".into(), |a| a.to_string()),
                names.wiring.switch_count(),
                names.wiring.process_count(),
                log,
                replayed(c.controller()),
            )));
        }
        for e in &events {
            say(Note::Out(names.describe(e)));
        }
    };
    let c = run_controller(options, config, store, stop, &counters, &mut on_events)?;
    let k = c.controller().counters();
    let s = counters.snapshot();
    say(Note::Out(format!(
        "controller stopped: {} processes failed; {} reports ({} repeated), {} reports of implausible time ({} frames refused), {} inputs refused, {} late answers, {} processes silent; datagrams in {} out {}, from strangers {}, malformed {}",
        c.timeline.failures.len(),
        k.reports,
        k.duplicate_reports,
        k.implausible_reports,
        k.implausible_refused,
        c.timeline.refused,
        k.stale_completions,
        k.unanswered,
        s.datagrams_in,
        s.datagrams_out,
        s.unknown_source,
        s.malformed,
    )));
    Ok(())
}

/// What a controller found in its log, for its first line: nothing if the log was empty.
fn replayed(c: &onepipe_proto::controller::Controller) -> String {
    let failed: Vec<String> = c.failures().iter().map(|f| f.process.to_string()).collect();
    let mut found = Vec::new();
    if c.counters().reports > 0 {
        found.push(format!("{} reports", c.counters().reports));
    }
    if !failed.is_empty() {
        found.push(format!("processes {} failed", failed.join(", ")));
    }
    if c.recovering() {
        found.push("recovery in progress".into());
    }
    if found.is_empty() {
        String::new()
    } else {
        format!(" (replayed: {})", found.join(", "))
    }
}
