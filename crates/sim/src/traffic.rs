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
    /// Only `from` sends, always to `to`: one stream for the receiver to reorder (Fig. 11).
    Pair { from: u32, to: u32 },
}

impl std::str::FromStr for Pattern {
    type Err = String;
    /// `broadcast`, `random:K`, `incast:P`, `pair:A-B`.
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
            "pair" => {
                let (from, to) = arg
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    .ok_or_else(|| format!("pattern `{s}`: expected pair:A-B, two process numbers"))?;
                Ok(Pattern::Pair { from, to })
            }
            _ => Err(format!(
                "unknown traffic pattern `{s}`; expected broadcast, random:K, incast:P or pair:A-B"
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
    /// One extra message, apart from the stream (the paper's 1 MB message, section 7.2).
    pub large: Option<LargeMessage>,
}

/// One message of `bytes` from process `from` to `to`, `at` after traffic starts, on top of
/// the regular traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeMessage {
    pub from: u32,
    pub to: u32,
    pub at: Duration,
    pub bytes: usize,
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
    /// When this process's [`LargeMessage`] is due, until drawn.
    large: Option<(Instant, LargeMessage)>,
    /// The last scattering drawn was the large message: `advance` leaves the stream's schedule.
    drew_large: bool,
}

impl Generator {
    pub fn new(me: u32, processes: u32, traffic: Traffic, seed: u64) -> Generator {
        let mut rng = SplitMix::new(seed ^ (me as u64 + 1).wrapping_mul(0xd134_2543_de82_ef95));
        let mut next_at = traffic.send_from + rng.exponential(traffic.gap);
        if matches!(traffic.pattern, Pattern::Pair { from, .. } if from != me) {
            next_at = traffic.send_until;
        }
        let large = traffic
            .large
            .filter(|l| l.from == me)
            .map(|l| (traffic.send_from + l.at, l));
        Generator {
            me,
            processes,
            traffic,
            rng,
            next_at,
            payload: Vec::new(),
            destinations: Vec::new(),
            excluded: Vec::new(),
            large,
            drew_large: false,
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
        let next = self.large.map_or(self.next_at, |(at, _)| at.min(self.next_at));
        (next < self.traffic.send_until).then_some(next)
    }

    /// The large message, if it is due at `now`.
    fn draw_large(&mut self, now: Instant) -> Option<(&[u32], &[u8])> {
        let (_, l) = self.large.take()?;
        self.drew_large = true;
        self.payload.clear();
        self.payload.extend_from_slice(&now.as_nanos().to_le_bytes());
        self.payload.resize(l.bytes.max(8), self.me as u8);
        self.destinations.clear();
        self.destinations.push(l.to);
        Some((&self.destinations, &self.payload))
    }

    /// Draws the next scattering due at `now`: destinations and a payload that starts with the
    /// send time. The caller sends it (or drops it if the buffer is full) and calls
    /// [`Generator::advance`].
    pub fn draw(&mut self, now: Instant) -> Option<(&[u32], &[u8])> {
        if self
            .large
            .is_some_and(|(at, _)| now >= at && now < self.traffic.send_until)
        {
            return self.draw_large(now);
        }
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
            Pattern::Pair { to, .. } => self.destinations.push(to % self.processes),
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
        if std::mem::take(&mut self.drew_large) {
            return;
        }
        let gap = self.rng.exponential(self.traffic.gap);
        self.next_at = (self.next_at + gap).max(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_parses_and_bad_pairs_are_refused() {
        assert_eq!("pair:0-1".parse(), Ok(Pattern::Pair { from: 0, to: 1 }));
        for bad in ["pair:0", "pair:a-1", "pair:", "pair:1-"] {
            assert!(bad.parse::<Pattern>().is_err(), "{bad}");
        }
    }

    fn traffic(pattern: Pattern, large: Option<LargeMessage>) -> Traffic {
        Traffic {
            pattern,
            gap: Duration::from_micros(1),
            message_bytes_min: 64,
            message_bytes_max: 64,
            reliable: false,
            send_from: Instant::from_nanos(1_000),
            send_until: Instant::from_nanos(100_000),
            measure_from: Instant::from_nanos(1_000),
            large,
        }
    }

    #[test]
    fn only_the_pairs_sender_sends() {
        let t = traffic(Pattern::Pair { from: 2, to: 0 }, None);
        assert!(Generator::new(1, 3, t.clone(), 7).next_at().is_none());
        let mut g = Generator::new(2, 3, t, 7);
        let at = g.next_at().expect("the sender sends");
        let (dsts, _) = g.draw(at).expect("due");
        assert_eq!(dsts, [0]);
    }

    #[test]
    fn the_large_message_goes_once_between_the_streams_messages() {
        let large = LargeMessage {
            from: 0,
            to: 1,
            at: Duration::from_micros(5),
            bytes: 1 << 20,
        };
        let mut g = Generator::new(0, 2, traffic(Pattern::Random { fanout: 1 }, Some(large)), 3);
        let (mut larges, mut small, mut now) = (0, 0, Instant::from_nanos(0));
        while let Some(at) = g.next_at() {
            now = now.max(at);
            let (dsts, payload) = g.draw(now).expect("due");
            if payload.len() == 1 << 20 {
                assert_eq!(dsts, [1]);
                assert!(now >= Instant::from_nanos(6_000));
                larges += 1;
            } else {
                small += 1;
            }
            g.advance(now);
        }
        assert_eq!(larges, 1);
        assert!(small > 50, "{small}");
        // Another process has no large message.
        let g = Generator::new(1, 2, traffic(Pattern::Random { fanout: 1 }, Some(large)), 3);
        assert!(g.large.is_none());
    }
}
