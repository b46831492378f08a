//! A whole 1Pipe system in this process, each process an [`Application`] running inside the
//! runtime's workers (no thread per process), with a controller for failures: what an
//! application library needs to run its servers and clients on the inproc runtime.
//!
//! The applications get the endpoint itself ([`Application::drain`], [`Application::refill`]),
//! so they send and receive without a queue in between; [`Embedded::stop`] hands them back for
//! their final state.

#![allow(clippy::disallowed_methods)] // the controller thread and the clock run on real time

use crate::control::ControlPlane;
use crate::host::Application;
use crate::system::{self, Member, SystemConfig, SystemError};
use onepipe_fabric::{Either, Topology, Wiring, WiringError};
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::endpoint::EndpointConfig;
use onepipe_proto::hash::SplitMix;
use onepipe_proto::switch::SwitchConfig;
use onepipe_runtime::inproc::{Clock, InprocConfig, Runtime};
use onepipe_wire::packet::HEADER_LEN;
use onepipe_wire::{Duration, Instant};

/// How an embedded system is built.
#[derive(Clone, Debug)]
pub struct EmbedOptions {
    pub topology: Topology,
    pub processes_per_host: u32,
    pub beacon_interval: Duration,
    /// `false`: endpoints deliver on arrival (an unordered baseline on the same fabric).
    pub ordering: bool,
    /// Run a controller, so that a crashed process is detected and announced (paper 5.2).
    pub controller: bool,
    /// Clock offsets of the processes are drawn in `[-skew, skew]`.
    pub skew: Duration,
    pub seed: u64,
    pub workers: usize,
    /// Input links silent this many beacon intervals are removed.
    pub dead_after_intervals: u32,
    pub message_bytes_max: usize,
    /// Best-effort send buffer per endpoint, in packets (the reliable one is 4 times larger).
    pub send_buffer_packets: usize,
}

impl Default for EmbedOptions {
    fn default() -> EmbedOptions {
        EmbedOptions {
            topology: Topology::paper_testbed(),
            processes_per_host: 1,
            beacon_interval: Duration::from_micros(50),
            ordering: true,
            controller: true,
            skew: Duration::ZERO,
            seed: 1,
            workers: InprocConfig::default().workers,
            // 250 ms, as `api::Options`: a worker on a shared core can be descheduled for
            // tens of milliseconds, and a link removed meanwhile turned a store's reliable
            // sends into failures for the rest of its run (docs/notes/2026-11-28-txkv.md).
            dead_after_intervals: 5_000,
            message_bytes_max: 1 << 20,
            send_buffer_packets: 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Wiring(#[from] WiringError),
    #[error(transparent)]
    System(#[from] SystemError),
    #[error("{apps} applications for {processes} processes: give one per process")]
    AppCount { apps: usize, processes: usize },
    #[error("the controller did not start: {0}")]
    Controller(std::io::Error),
}

/// How many processes a system of `options` has (the applications `Embedded::start` wants).
pub fn process_count(options: &EmbedOptions) -> Result<u32, EmbedError> {
    Ok(Wiring::new(options.topology.clone(), options.processes_per_host)?.process_count() as u32)
}

/// A running embedded system. Dropping it stops everything.
pub struct Embedded<A: Application> {
    runtime: Option<Runtime<Member<A>>>,
    // Dropped after the runtime: the controller outlives the nodes it talks to.
    _control: Option<ControlPlane>,
    wiring: Wiring,
    clock: Clock,
}

impl<A: Application> Embedded<A> {
    /// Starts the fabric of `options.topology` with `apps[p]` as process `p`.
    pub fn start(options: &EmbedOptions, apps: Vec<A>) -> Result<Embedded<A>, EmbedError> {
        let wiring = Wiring::new(options.topology.clone(), options.processes_per_host)?;
        let count = wiring.process_count();
        if apps.len() != count {
            return Err(EmbedError::AppCount {
                apps: apps.len(),
                processes: count,
            });
        }
        let clock = Clock::new(Instant::from_nanos(1_000_000_000));
        let mut rng = SplitMix::new(options.seed);
        let offsets: Vec<i64> = (0..count)
            .map(|_| rng.symmetric(options.skew.as_nanos()))
            .collect();
        let config = system_config(options, count as u32);
        let (control, ports) = if options.controller {
            let controller = ControllerConfig {
                // A failure's reports come within a few beacon intervals of each other.
                settle: options.beacon_interval.saturating_mul(20),
                ..ControllerConfig::default()
            };
            let (plane, ports) =
                ControlPlane::start(&wiring, controller, clock).map_err(EmbedError::Controller)?;
            (Some(plane), Some(ports))
        } else {
            (None, None)
        };
        let runtime = system::start_managed(&wiring, &config, apps, &offsets, clock, ports)?;
        Ok(Embedded {
            runtime: Some(runtime),
            _control: control,
            wiring,
            clock,
        })
    }

    /// The shared clock the runtime runs on (what `now` means in the applications).
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    pub fn process_count(&self) -> u32 {
        self.wiring.process_count() as u32
    }

    /// Crashes process `p` (fault injection): it never runs again and frames to it are lost;
    /// the controller detects it and announces it to the others. False if there is no such
    /// process.
    pub fn crash_process(&self, p: u32) -> bool {
        if p >= self.process_count() {
            return false;
        }
        let node = self.wiring.node_of_process(p);
        self.runtime.as_ref().is_some_and(|rt| rt.crash(node))
    }

    /// Stops the system and hands the applications back, in process order.
    pub fn stop(mut self) -> Vec<A> {
        let runtime = self.runtime.take().expect("a running system has its runtime");
        runtime
            .stop()
            .into_iter()
            .filter_map(|member| match member.node {
                Either::Right(host) => Some(host.app),
                Either::Left(_) => None,
            })
            .collect()
    }
}

impl<A: Application> Drop for Embedded<A> {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.stop();
        }
    }
}

fn system_config(options: &EmbedOptions, count: u32) -> SystemConfig {
    let mut endpoint = EndpointConfig::new(0, count, 0);
    endpoint.beacon_interval = options.beacon_interval;
    endpoint.ordering = options.ordering;
    endpoint.message_bytes_max = options.message_bytes_max;
    let packets_per_message = options
        .message_bytes_max
        .div_ceil(endpoint.mtu_bytes - HEADER_LEN)
        .max(1);
    endpoint.send_buffer_packets_max = options.send_buffer_packets.max(packets_per_message);
    endpoint.reliable.send_buffer_packets_max = 4 * endpoint.send_buffer_packets_max;
    endpoint.fit_recv_window_to(options.message_bytes_max);
    SystemConfig {
        switch: SwitchConfig {
            beacon_interval: options.beacon_interval,
            dead_after_intervals: options.dead_after_intervals.max(1),
            ecmp_seed: options.seed,
            promise_lead: Duration::ZERO,
            time_ahead_max: onepipe_proto::plausible::TIME_AHEAD_MAX,
            incarnation: onepipe_proto::Incarnation::Chip,
        },
        endpoint,
        inproc: InprocConfig {
            workers: options.workers.max(1),
            // Small rings keep queueing delay low under saturation (the demo's setting).
            link_capacity_bytes: 2048,
            frame_max_bytes: 1500,
            ..InprocConfig::default()
        },
        link_delay: Duration::ZERO,
    }
}
