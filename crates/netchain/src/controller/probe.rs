//! Failure detection by heartbeat. The paper leaves detection to "existing techniques" (paper
//! 5): here the controller asks every live switch a no-op every `interval`, and fails a switch
//! that answers none of `misses_max` probes in a row (then Algorithm 2 and 3 follow). Fail-stop
//! is assumed, as in the paper: the bound must be far above how long a live switch can stay
//! silent (a descheduled process), or a live switch is failed.

use onepipe_wire::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeConfig {
    pub interval: Duration,
    pub misses_max: u32,
}

#[derive(Clone, Copy, Debug)]
struct Probe {
    /// The probe in flight, if any.
    request: Option<u64>,
    next_at: Instant,
    missed: u32,
}

pub(super) struct Probes {
    config: ProbeConfig,
    switches: Vec<Probe>,
}

/// What a due probe round asks of the controller.
pub(super) enum Due {
    /// Send a probe to the switch, with this request id.
    Send(u16),
    /// The switch missed too many: fail it.
    Fail(u16),
}

impl Probes {
    pub(super) fn new(config: ProbeConfig, switches: usize, now: Instant) -> Probes {
        assert!(config.misses_max >= 1 && config.interval > Duration::ZERO);
        let first = Probe {
            request: None,
            next_at: now,
            missed: 0,
        };
        Probes {
            config,
            switches: vec![first; switches],
        }
    }

    pub(super) fn next_at(&self) -> Option<Instant> {
        self.switches.iter().map(|p| p.next_at).min()
    }

    /// The probes due at `now` among switches not yet failed (`live`).
    pub(super) fn due(&mut self, now: Instant, live: impl Fn(u16) -> bool) -> Vec<Due> {
        let mut out = Vec::new();
        for (s, p) in self.switches.iter_mut().enumerate() {
            let s = s as u16;
            if !live(s) || p.next_at > now {
                continue;
            }
            if p.request.is_some() {
                p.missed += 1;
            }
            p.next_at = now + self.config.interval;
            if p.missed >= self.config.misses_max {
                p.next_at = Instant::MAX;
                out.push(Due::Fail(s));
            } else {
                out.push(Due::Send(s));
            }
        }
        out
    }

    pub(super) fn sent(&mut self, switch: u16, request: u64) {
        if let Some(p) = self.switches.get_mut(switch as usize) {
            p.request = Some(request);
        }
    }

    /// Whether `request` answers a probe (which then counts the switch alive).
    pub(super) fn answered(&mut self, request: u64) -> bool {
        match self.switches.iter_mut().find(|p| p.request == Some(request)) {
            Some(p) => {
                p.request = None;
                p.missed = 0;
                true
            }
            None => false,
        }
    }
}
