//! What the simulated processes send: a seeded, open-loop (Poisson) or saturating stream of
//! scatterings in one of a few patterns, so that a campaign can draw the workload from a seed.

use onepipe_proto::hash::SplitMix;
use onepipe_wire::{Duration, Instant};

/// Who a scattering goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Every process, the sender included (paper Fig. 8).
    Broadcast,
    /// `fanout` distinct processes drawn at random (a scattering).
    Random { fanout: u32 },
    /// Everyone sends to one process (congestion at its ToR port).
    Incast { target: u32 },
}

impl std::str::FromStr for Pattern {
    type Err = String;
    /// `broadcast`, `random:K`, `incast:P`.
    fn from_str(s: &str) -> Result<Pattern, String> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        let number = |what: &str| {
            arg.parse::<u32>()
                .map_err(|_| format!("pattern `{s}`: {what} must be a whole number"))
        };
        match name {
            "broadcast" if arg.is_empty() => Ok(Pattern::Broadcast),
            "random" => Ok(Pattern::Random {
                fanout: number("the fanout")?,
            }),
            "incast" => Ok(Pattern::Incast {
                target: number("the target process")?,
            }),
            _ => Err(format!(
                "unknown traffic pattern `{s}`; expected broadcast, random:K or incast:P"
            )),
        }
    }
}

/// The traffic every process generates.
#[derive(Clone, Debug, PartialEq)]
pub struct Traffic {
    pub pattern: Pattern,
    /// Mean gap between a process's scatterings; zero sends whenever the send buffer has room.
    pub gap: Duration,
    /// Message sizes, drawn uniformly (at least 8 bytes: they carry the send time).
    pub message_bytes_min: usize,
    pub message_bytes_max: usize,
    pub reliable: bool,
    pub send_from: Instant,
    pub send_until: Instant,
    /// Start of the measuring window, `[measure_from, send_until)`.
    pub measure_from: Instant,
}

/// One process's generator.
pub struct Generator {
    me: u32,
    processes: u32,
    traffic: Traffic,
    rng: SplitMix,
    next_at: Instant,
    payload: Vec<u8>,
    destinations: Vec<u32>,
    /// Processes declared failed: left out of every scattering from now on.
    excluded: Vec<u32>,
}

impl Generator {
    pub fn new(me: u32, processes: u32, traffic: Traffic, seed: u64) -> Generator {
        let mut rng = SplitMix::new(seed ^ (me as u64 + 1).wrapping_mul(0xd134_2543_de82_ef95));
        let next_at = traffic.send_from + rng.exponential(traffic.gap);
        Generator {
            me,
            processes,
            traffic,
            rng,
            next_at,
            payload: Vec::new(),
            destinations: Vec::new(),
            excluded: Vec::new(),
        }
    }

    pub fn reliable(&self) -> bool {
        self.traffic.reliable
    }

    /// Whether `now` is within the measuring window (deliveries count for throughput).
    pub fn measuring(&self, now: Instant) -> bool {
        (self.traffic.measure_from..self.traffic.send_until).contains(&now)
    }

    /// Whether a message sent at `sent` counts for latency.
    pub fn measured(&self, sent: Instant) -> bool {
        sent >= self.traffic.measure_from
    }

    pub fn saturating(&self) -> bool {
        self.traffic.gap == Duration::ZERO
    }

    /// When the next scattering is due, if any is still to come.
    pub fn next_at(&self) -> Option<Instant> {
        (self.next_at < self.traffic.send_until).then_some(self.next_at)
    }

    /// Draws the next scattering due at `now`: destinations and a payload that starts with the
    /// send time. The caller sends it (or drops it if the buffer is full) and calls
    /// [`Generator::advance`].
    pub fn draw(&mut self, now: Instant) -> Option<(&[u32], &[u8])> {
        if now < self.next_at || now >= self.traffic.send_until {
            return None;
        }
        let t = &self.traffic;
        let span = (t.message_bytes_max - t.message_bytes_min) as u64 + 1;
        let len = t.message_bytes_min + (self.rng.next_u64() % span) as usize;
        self.payload.clear();
        self.payload.extend_from_slice(&now.as_nanos().to_le_bytes());
        self.payload.resize(len.max(8), self.me as u8);
        self.destinations.clear();
        match t.pattern {
            Pattern::Broadcast => self.destinations.extend(0..self.processes),
            Pattern::Incast { target } => self.destinations.push(target % self.processes),
            Pattern::Random { fanout } => {
                let k = fanout.clamp(1, self.processes);
                while self.destinations.len() < k as usize {
                    let d = (self.rng.next_u64() % self.processes as u64) as u32;
                    if !self.destinations.contains(&d) {
                        self.destinations.push(d);
                    }
                }
            }
        }
        let excluded = &self.excluded;
        self.destinations.retain(|d| !excluded.contains(d));
        Some((&self.destinations, &self.payload))
    }

    /// Leaves `process` out of every scattering drawn from now on.
    pub fn exclude(&mut self, process: u32) {
        if !self.excluded.contains(&process) {
            self.excluded.push(process);
        }
    }

    /// Schedules the next scattering (open loop: a stall does not cause a burst afterwards).
    pub fn advance(&mut self, now: Instant) {
        let gap = self.rng.exponential(self.traffic.gap);
        self.next_at = (self.next_at + gap).max(now);
    }
}
