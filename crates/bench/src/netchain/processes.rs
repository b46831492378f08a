//! NetChain as separate OS processes over UDP (`onepipe netchain up`): one process per switch,
//! one for the controller, and short-lived clients (`onepipe netchain get|put|...`) that join as
//! a process of the topology for one call. What they must agree on without talking (the wiring,
//! where each node listens, the placement ring, which process is the controller) follows from
//! the topology alone: [`Deployment`].

#![allow(clippy::disallowed_methods)] // processes read the system clock and wait on it

use super::nodes::{ControllerHost, Shared};
use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring};
use onepipe_netchain::controller::ProbeConfig;
use onepipe_netchain::switch::Counters;
use onepipe_netchain::{
    Agent, AgentConfig, Call, Completion, Controller, ControllerConfig, NetchainSwitch, Outcome, Refusal,
    Ring, SwitchConfig,
};
use onepipe_runtime::inproc::Clock;
use onepipe_runtime::udp::UdpCounters;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::plan::AddressPlan;
use onepipe_runtime::udp::{Links, UdpConfig, UdpDriver};
use onepipe_wire::{Duration, Instant};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Virtual nodes per switch on the ring every process computes.
pub const VNODES_PER_SWITCH: usize = 16;
/// Chains of three switches (f = 2), or as many as the topology has.
pub const CHAIN_LEN_MAX: usize = 3;
/// The controller probes every switch this often, and fails one that misses
/// [`PROBE_MISSES_MAX`] probes in a row: 200 ms of silence, far longer than a live switch
/// process stays descheduled on a loaded machine.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(50);
pub const PROBE_MISSES_MAX: u32 = 4;

pub struct Deployment {
    pub wiring: Arc<Wiring>,
    pub plan: AddressPlan,
    pub ring: Ring,
    /// The topology's last process runs the controller.
    pub controller: u32,
    pub udp: UdpConfig,
}

impl Deployment {
    pub fn new(topology: Topology, auth: Auth) -> Result<Deployment, String> {
        let wiring = Arc::new(Wiring::new(topology, 1).map_err(|e| e.to_string())?);
        if wiring.process_count() < 2 {
            return Err("NetChain needs two processes at least: a client and the controller".into());
        }
        let plan = AddressPlan::new(&wiring).map_err(|e| e.to_string())?;
        let switches: Vec<u16> = (0..wiring.switch_count() as u16).collect();
        let chain = CHAIN_LEN_MAX.min(switches.len());
        let ring = Ring::new(&switches, VNODES_PER_SWITCH, chain).map_err(|e| e.to_string())?;
        let controller = wiring.process_count() as u32 - 1;
        let udp = UdpConfig {
            auth,
            ..UdpConfig::default()
        };
        Ok(Deployment {
            wiring,
            plan,
            ring,
            controller,
            udp,
        })
    }

    /// A driver bound to runtime node `node`'s address, with its links.
    pub fn driver(&self, node: usize) -> Result<UdpDriver, String> {
        let links = Links::of(&self.wiring, &self.plan, node);
        UdpDriver::bind(&links, &self.udp).map_err(|e| format!("{}: {e}", links.local))
    }

    pub fn switch_index(&self, name: &str) -> Result<usize, String> {
        let t = &self.wiring.topology;
        t.switches
            .iter()
            .position(|s| s.name == name)
            .ok_or_else(|| format!("no switch `{name}` ({})", t.switch_names_hint()))
    }
}

/// Runs switch `name` until `stop`; its counters at the end.
pub fn run_switch(d: &Deployment, name: &str, stop: &AtomicBool) -> Result<Counters, String> {
    let index = d.switch_index(name)?;
    let config = SwitchConfig {
        controller: Some(d.controller),
        ..SwitchConfig::default()
    };
    let mut node = NetchainSwitch::new(index, d.wiring.clone(), config);
    let mut driver = d.driver(index)?;
    driver.run(
        &mut node,
        &Clock::from_system_time(),
        stop,
        &UdpCounters::default(),
    );
    Ok(*node.counters())
}

/// Runs the controller until `stop`, failing switches that stop answering its probes, and
/// printing what it does.
pub fn run_controller(d: &Deployment, stop: &AtomicBool) -> Result<(), String> {
    let config = ControllerConfig {
        probe: Some(ProbeConfig {
            interval: PROBE_INTERVAL,
            misses_max: PROBE_MISSES_MAX,
        }),
        ..ControllerConfig::new(d.controller)
    };
    let controller = Controller::new(config, d.wiring.clone(), d.ring.clone());
    let mut node = ControllerHost::new(controller, Vec::new(), None, Arc::new(Shared::default())).printing();
    let mut driver = d.driver(d.wiring.node_of_process(d.controller))?;
    driver.run(
        &mut node,
        &Clock::from_system_time(),
        stop,
        &UdpCounters::default(),
    );
    Ok(())
}

/// A client process for one call: stops its driver when the call completes.
struct OneCall {
    agent: Agent,
    call: Option<Call>,
    done: Arc<Mutex<Option<Completion>>>,
    stop: Arc<AtomicBool>,
}

impl Node for OneCall {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.agent.handle_frame(now, frame);
        self.finish();
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        if let Some(call) = self.call.take() {
            self.agent.submit(now, call).expect("one call fits");
        }
        self.agent.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.agent.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.agent.handle_timeout(now);
        self.finish();
    }
}

impl OneCall {
    fn finish(&mut self) {
        if let Some(c) = self.agent.poll_completion() {
            *self.done.lock().expect("done lock") = Some(c);
            self.stop.store(true, Ordering::Release);
        }
    }
}

impl Hints for OneCall {}

/// Makes `call` as process `process` of the deployment (whose address it binds), waiting for
/// every attempt; the completion says how it ended. A compare-and-swap from absent (a lock) on
/// a key no switch holds yet installs it through the controller first, as a `put` does.
pub fn call(d: &Deployment, process: u32, call: Call, timeout: Duration) -> Result<Completion, String> {
    let from_absent = matches!(
        &call,
        Call::Cas {
            expect: None,
            new: Some(_),
            ..
        }
    );
    let done = call_once(d, process, call.clone(), timeout)?;
    if !(from_absent && done.outcome == Outcome::Refused(Refusal::UnknownKey)) {
        return Ok(done);
    }
    let installed = call_once(d, process, Call::Install(*call.key()), timeout)?;
    match installed.outcome {
        Outcome::Ok(_) => call_once(d, process, call, timeout),
        _ => Ok(installed),
    }
}

fn call_once(d: &Deployment, process: u32, call: Call, timeout: Duration) -> Result<Completion, String> {
    if process == d.controller {
        return Err(format!("process {process} is the controller's"));
    }
    if process as usize >= d.wiring.process_count() {
        return Err(format!(
            "the topology has processes 0 to {}",
            d.wiring.process_count() - 1
        ));
    }
    let clock = Clock::from_system_time();
    let agent = Agent::new(
        AgentConfig {
            timeout,
            // Above every request an earlier run as this process made: the clock moved on.
            first_request: clock.now().as_nanos(),
            ..AgentConfig::new(process, d.controller)
        },
        d.ring.clone(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(None));
    let mut node = OneCall {
        agent,
        call: Some(call),
        done: done.clone(),
        stop: stop.clone(),
    };
    let mut driver = d.driver(d.wiring.node_of_process(process))?;
    driver.run(
        &mut node,
        &Clock::from_system_time(),
        &stop,
        &UdpCounters::default(),
    );
    let completion = done.lock().expect("done lock").take();
    completion.ok_or_else(|| "the call did not complete".to_string())
}
