//! Faults a node injects into what it receives: loss and corruption of whole datagrams, for
//! tests of a real udp fabric on a machine without tc/netem. Applied where a datagram leaves
//! the socket, before anything reads it, so a corrupted datagram meets every check a damaged
//! one from the network would (header, authentication, framing).

use onepipe_fabric::hash::mix64;

/// Probabilities per received datagram; all zero (the default) injects nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InjectConfig {
    /// A datagram is dropped.
    pub loss: f64,
    /// One bit of a datagram, chosen uniformly, is flipped.
    pub corrupt: f64,
    /// Seeds the draws, so a run's faults can be told apart from another's.
    pub seed: u64,
}

impl InjectConfig {
    pub fn is_active(&self) -> bool {
        self.loss > 0.0 || self.corrupt > 0.0
    }
}

/// What happens to one received datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Fate {
    Keep,
    Drop,
    /// Flip bit `bit` (counted from the first byte's lowest bit).
    Flip {
        bit: usize,
    },
}

/// The draws of one node.
#[derive(Clone, Debug)]
pub struct Injector {
    config: InjectConfig,
    draws: u64,
}

impl Injector {
    pub fn new(config: InjectConfig) -> Injector {
        Injector { config, draws: 0 }
    }

    fn next_unit(&mut self) -> f64 {
        self.draws += 1;
        (mix64(self.config.seed ^ mix64(self.draws)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The fate of a datagram of `len` bytes.
    pub fn fate(&mut self, len: usize) -> Fate {
        if self.next_unit() < self.config.loss {
            return Fate::Drop;
        }
        if len > 0 && self.next_unit() < self.config.corrupt {
            let bit = (self.next_unit() * (len * 8) as f64) as usize;
            return Fate::Flip {
                bit: bit.min(len * 8 - 1),
            };
        }
        Fate::Keep
    }
}

/// Flips `bit` of `datagram`.
pub fn flip(datagram: &mut [u8], bit: usize) {
    datagram[bit / 8] ^= 1 << (bit % 8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_about_what_was_asked_and_draws_are_seeded() {
        let config = InjectConfig {
            loss: 0.1,
            corrupt: 0.2,
            seed: 7,
        };
        let fates: Vec<Fate> = {
            let mut i = Injector::new(config);
            (0..20_000).map(|_| i.fate(100)).collect()
        };
        let dropped = fates.iter().filter(|f| **f == Fate::Drop).count();
        let flipped = fates.iter().filter(|f| matches!(f, Fate::Flip { .. })).count();
        assert!((1_700..2_300).contains(&dropped), "{dropped}");
        // Corruption is drawn for what was not dropped: 0.9 x 0.2.
        assert!((3_200..4_000).contains(&flipped), "{flipped}");
        assert!(
            fates
                .iter()
                .all(|f| !matches!(f, Fate::Flip { bit } if *bit >= 800))
        );
        let mut again = Injector::new(config);
        assert!(fates.iter().all(|f| *f == again.fate(100)));
        let mut none = Injector::new(InjectConfig::default());
        assert!((0..1000).all(|_| none.fate(100) == Fate::Keep));
    }

    #[test]
    fn a_flip_changes_one_bit() {
        let mut d = [0u8; 4];
        flip(&mut d, 9);
        assert_eq!(d, [0, 2, 0, 0]);
    }
}
