//! cosy's applications (paper 003, section 6): programs that use the bound delta, known at
//! submission, to decide something a network without a bound cannot.
//!
//! [`detector`] (6.3) declares a host crashed when a zero-byte probe has no rsvp by its
//! deadline; [`storage`] (6.1) lets a storage client sleep until the bound of its reads instead
//! of polling, and measures what a CPU-bound job sharing its core gains.
//!
//! Both run in the simulator on the same fabric, switch program and host library as
//! [`super::sim`]: the application's hosts are [`AppHost`]s, every other host a
//! [`WorkloadHost`] sending the Poisson background of [`CosySimConfig`] (none at load 0).

pub mod detector;
pub mod storage;

use super::nodes::{Progress, Workload, WorkloadHost};
use super::sim::{CosySimConfig, switch_config};
use onepipe_cosy::{CosyHost, CosySwitch, HostConfig, Timing};
use onepipe_fabric::{Either, Hints, Node, PortId, Route, Wiring, routing};
use onepipe_sim::{Engine, Role};
use onepipe_wire::{Duration, Instant};
use serde::Serialize;
use std::sync::Arc;

/// Virtual time at which an application run starts (as [`super::sim`]'s runs).
pub const START: Instant = Instant::from_nanos(1_000_000);

/// What an application does with its host: called after every input the host takes, it
/// takes the host's completions and deliveries and submits what is due by `now`.
pub trait App: Send {
    fn step(&mut self, now: Instant, host: &mut CosyHost);
    /// When the application next has something to do by itself.
    fn poll_timeout(&self) -> Option<Instant>;
}

/// A host running an application instead of the background workload.
pub struct AppHost<A> {
    pub host: CosyHost,
    pub app: A,
}

impl<A: App> Node for AppHost<A> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        self.host.classify(now, port, frame)
    }

    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        self.host.handle_frame(now, port, frame, route);
        self.app.step(now, &mut self.host);
    }

    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        self.host.poll_transmit(now, port, buf)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [self.host.poll_timeout(), self.app.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        // The application first (a probe due now goes out now), then the host's deadlines,
        // then the application again for the completions they posted.
        self.app.step(now, &mut self.host);
        self.host.handle_timeout(now);
        self.app.step(now, &mut self.host);
    }
}

impl<A: App> Hints for AppHost<A> {
    fn wants_transmit(&self) -> bool {
        self.host.wants_transmit()
    }

    fn priority(&self, frame: &[u8]) -> u8 {
        self.host.priority(frame)
    }
}

/// A switch, a background host, or an application's host.
pub type AppNode<A> = Either<CosySwitch, Either<WorkloadHost, AppHost<A>>>;

/// An application run's engine and what the application needs to know of the fabric.
pub struct AppSim<A: App> {
    pub engine: Engine<AppNode<A>>,
    pub wiring: Wiring,
    pub timing: Timing,
}

impl<A: App> AppSim<A> {
    /// Builds the fabric of `config` with `apps` on their processes and the background
    /// workload (`config.load`, from [`START`] for `config.duration`) on every other one.
    /// `config.load` may be 0: no background. The applications send messages of
    /// `app_message_bytes_max` at most (the switches clear a crashed sender's reservations
    /// after the largest bound).
    pub fn new(
        config: &CosySimConfig,
        apps: Vec<(u32, A)>,
        app_message_bytes_max: usize,
    ) -> Result<AppSim<A>, String> {
        let timing = config.timing();
        timing.validate().map_err(|e| e.to_string())?;
        if !(0.0..=1.0).contains(&config.load) {
            return Err(format!("load {} is not in [0, 1]", config.load));
        }
        let wiring = config.fabric.wiring()?;
        let routes = routing::build(&wiring).map_err(|e| e.to_string())?;
        let processes = wiring.process_count() as u32;
        let largest = config.message_bytes.max(app_message_bytes_max);
        let switches = switch_config(&timing, timing.delta(largest), config.seed);
        let background_end = if config.load > 0.0 {
            START + config.duration
        } else {
            START
        };
        let workload = Workload {
            message_bytes: config.message_bytes,
            mean_gap: Workload::mean_gap_for(config.load, config.message_bytes, timing.link_bits_per_s),
            start: START,
            end: background_end,
            processes,
        };
        let mut nodes: Vec<(AppNode<A>, Role)> = routes
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    Either::Left(CosySwitch::new(i, &wiring, r, switches.clone())),
                    Role::Switch,
                )
            })
            .collect();
        let mut apps: Vec<(u32, Option<A>)> = apps.into_iter().map(|(p, a)| (p, Some(a))).collect();
        let progress = Arc::new(Progress::default());
        for p in 0..processes {
            let mut host_config = HostConfig::new(p, processes, timing.clone());
            host_config.seed = config.seed ^ (p as u64) << 20;
            host_config.message_bytes_max = host_config.message_bytes_max.max(config.message_bytes);
            let host = CosyHost::new(host_config).map_err(|e| e.to_string())?;
            let app = apps.iter_mut().find(|(q, _)| *q == p).and_then(|(_, a)| a.take());
            let node = match app {
                Some(app) => Either::Right(AppHost { host, app }),
                None => {
                    let seed = config.seed.wrapping_mul(0x9e37_79b9) ^ p as u64;
                    // Background hosts keep no message log: the application's numbers matter.
                    Either::Left(WorkloadHost::new(
                        host,
                        workload.clone(),
                        seed,
                        0,
                        progress.clone(),
                    ))
                }
            };
            nodes.push((Either::Right(node), Role::Host));
        }
        if let Some((p, _)) = apps.iter().find(|(_, a)| a.is_some()) {
            return Err(format!(
                "process {p}: there are {processes} processes (or it has two applications)"
            ));
        }
        let model = config.fabric.model();
        let links = wiring.directed_links(config.fabric.link_delay);
        let engine = Engine::new(nodes, &links, model, config.seed, START).map_err(|e| e.to_string())?;
        Ok(AppSim {
            engine,
            wiring,
            timing,
        })
    }

    /// The application on process `p`, if it has one.
    pub fn app(&self, p: u32) -> Option<&A> {
        match self.engine.node(self.wiring.node_of_process(p)) {
            Either::Right(Either::Right(h)) => Some(&h.app),
            _ => None,
        }
    }

    /// Checks every switch's and host's invariants (they assert).
    pub fn invariants(&self) {
        for node in self.engine.nodes() {
            match node {
                Either::Left(s) => s.invariants(),
                Either::Right(Either::Left(h)) => h.host.invariants(),
                Either::Right(Either::Right(h)) => h.host.invariants(),
            }
        }
    }
}

/// Percentiles of a sample, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Quantiles {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Quantiles {
    /// Of durations in nanoseconds (sorted here); zeros for an empty sample.
    pub fn of_ns(samples_ns: &mut [u64]) -> Quantiles {
        samples_ns.sort_unstable();
        let at = |q: f64| -> f64 {
            if samples_ns.is_empty() {
                return 0.0;
            }
            // Nearest rank: the smallest sample with at least q of the sample at or below it.
            let rank = ((q * samples_ns.len() as f64).ceil() as usize).clamp(1, samples_ns.len());
            samples_ns[rank - 1] as f64 / 1e3
        };
        Quantiles {
            count: samples_ns.len(),
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
            max: at(1.0),
        }
    }
}

/// Microseconds of a duration, for reports.
pub fn us(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::Quantiles;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let mut s: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let q = Quantiles::of_ns(&mut s);
        assert_eq!(
            (q.count, q.p50, q.p99, q.p999, q.max),
            (1000, 500.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(Quantiles::of_ns(&mut []), Quantiles::default());
        let q = Quantiles::of_ns(&mut [3000]);
        assert_eq!((q.p50, q.max), (3.0, 3.0));
    }
}
