//! The runtimes a NetChain run can use, behind one face: inproc (nodes on worker threads,
//! frames through rings) or udp (every node its own socket on loopback, real datagrams,
//! `onepipe_runtime::udp::local`). A switch is killed by its [`Killable`] wrapper, which works
//! the same on both: from then on it swallows every frame and sends nothing (fail-stop).

use onepipe_fabric::{Hints, Node, PortId, Route, Wiring};
use onepipe_runtime::inproc::{Clock, InprocConfig, LinkFaults, Runtime};
use onepipe_runtime::udp::local::LocalFabric;
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which runtime drives the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetchainRuntime {
    Inproc,
    Udp,
}

impl std::str::FromStr for NetchainRuntime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "inproc" => Ok(NetchainRuntime::Inproc),
            "udp" => Ok(NetchainRuntime::Udp),
            other => Err(format!("runtime `{other}`: expected inproc or udp")),
        }
    }
}

/// A node that can be killed (fail-stop) while the runtime runs.
pub struct Killable<N> {
    pub inner: N,
    dead: Arc<AtomicBool>,
}

impl<N> Killable<N> {
    pub fn new(inner: N) -> (Killable<N>, Arc<AtomicBool>) {
        let dead = Arc::new(AtomicBool::new(false));
        (
            Killable {
                inner,
                dead: dead.clone(),
            },
            dead,
        )
    }

    fn dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }
}

impl<N: Node> Node for Killable<N> {
    fn classify(&self, now: Instant, port: PortId, frame: &[u8]) -> Route {
        if self.dead() {
            Route::Drop
        } else {
            self.inner.classify(now, port, frame)
        }
    }
    fn handle_frame(&mut self, now: Instant, port: PortId, frame: &mut [u8], route: Route) {
        if !self.dead() {
            self.inner.handle_frame(now, port, frame, route);
        }
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if self.dead() {
            None
        } else {
            self.inner.poll_transmit(now, port, buf)
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        if self.dead() {
            None
        } else {
            self.inner.poll_timeout()
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        if !self.dead() {
            self.inner.handle_timeout(now);
        }
    }
}

impl<N: Hints> Hints for Killable<N> {
    fn wants_transmit(&self) -> bool {
        !self.dead() && self.inner.wants_transmit()
    }
    fn priority(&self, frame: &[u8]) -> u8 {
        self.inner.priority(frame)
    }
}

/// A fabric running on one of the runtimes.
pub enum Running<N: Node + 'static> {
    Inproc(Runtime<N>),
    Udp(LocalFabric<N>),
}

impl<N: Node + 'static> Running<N> {
    /// Starts `nodes` (switches first, then processes, as `wiring` numbers them) on
    /// `threads` threads; `loss` applies to every link (inproc only: the udp runtime's links
    /// are lossless by credits).
    pub fn start(
        runtime: NetchainRuntime,
        wiring: &Wiring,
        nodes: Vec<N>,
        threads: usize,
        loss: f64,
        seed: u64,
        clock: Clock,
    ) -> Result<Running<N>, String> {
        match runtime {
            NetchainRuntime::Inproc => {
                let config = InprocConfig {
                    workers: threads,
                    faults: LinkFaults {
                        loss,
                        seed,
                        ..LinkFaults::default()
                    },
                    ..InprocConfig::default()
                };
                Runtime::start(nodes, &wiring.directed_links(Duration::ZERO), &[], &config, clock)
                    .map(Running::Inproc)
                    .map_err(|e| e.to_string())
            }
            NetchainRuntime::Udp => {
                if loss > 0.0 {
                    return Err("--loss needs the inproc runtime (udp links are lossless by credits)".into());
                }
                let udp = crate::runtimes::udp_config(8_972, threads, 16, false)?;
                LocalFabric::start(wiring, nodes, &udp, clock)
                    .map(Running::Udp)
                    .map_err(|e| e.to_string())
            }
        }
    }

    pub fn stop(self) -> Vec<N> {
        match self {
            Running::Inproc(r) => r.stop(),
            Running::Udp(f) => f.stop(),
        }
    }
}
