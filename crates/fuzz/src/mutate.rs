//! The stable harness's mutations: bit flips, byte overwrites and arithmetic, inserts,
//! deletes, duplicated ranges, splices with another corpus input, truncation, and
//! interesting integers (0, -1, boundaries) written at the 1Pipe header's field offsets and
//! the datagram header's, or anywhere. Seeded: one seed gives one sequence of inputs.

use crate::frames::HEADER_FIELD_OFFSETS;

/// Offsets of the udp datagram header's fields, past a target's mode byte or not.
const DATAGRAM_FIELD_OFFSETS: [usize; 6] = [2, 3, 4, 5, 8, 9];

const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    (1 << 48) - 1,
    i64::MAX as u64,
    u64::MAX,
];

pub struct Mutator {
    rng: fastrand::Rng,
    /// Inputs grow no longer than this.
    pub len_max: usize,
}

impl Mutator {
    pub fn new(seed: u64, len_max: usize) -> Mutator {
        Mutator {
            rng: fastrand::Rng::with_seed(seed),
            len_max,
        }
    }

    /// A number below `n`, from the mutator's own sequence.
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.usize(..n.max(1))
    }

    /// One to four mutations of `input`; `corpus` gives the splices their other half.
    pub fn mutate(&mut self, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
        for _ in 0..self.rng.usize(1..=4) {
            self.once(input, corpus);
        }
        input.truncate(self.len_max);
    }

    fn offset(&mut self, len: usize) -> usize {
        match self.rng.u8(..4) {
            0 => HEADER_FIELD_OFFSETS[self.rng.usize(..HEADER_FIELD_OFFSETS.len())] + self.rng.usize(..2),
            1 => DATAGRAM_FIELD_OFFSETS[self.rng.usize(..DATAGRAM_FIELD_OFFSETS.len())],
            _ => self.rng.usize(..len.max(1)),
        }
    }

    fn once(&mut self, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
        let rng = &mut self.rng;
        if input.is_empty() {
            input.push(rng.u8(..));
            return;
        }
        let len = input.len();
        match rng.u8(..10) {
            0 => input[rng.usize(..len)] ^= 1 << rng.u8(..8),
            1 => input[rng.usize(..len)] = rng.u8(..),
            2 => {
                let at = rng.usize(..=len);
                let bytes: Vec<u8> = (0..rng.usize(1..=8)).map(|_| rng.u8(..)).collect();
                input.splice(at..at, bytes);
            }
            3 => {
                let at = rng.usize(..len);
                let end = (at + rng.usize(1..=16)).min(len);
                input.drain(at..end);
            }
            4 => {
                let at = rng.usize(..len);
                let end = (at + rng.usize(1..=32)).min(len);
                let part = input[at..end].to_vec();
                let to = rng.usize(..=len);
                input.splice(to..to, part);
            }
            5 => {
                let other = &corpus[rng.usize(..corpus.len())];
                if !other.is_empty() {
                    let from = rng.usize(..other.len());
                    let end = (from + rng.usize(1..=64)).min(other.len());
                    let at = rng.usize(..=len);
                    input.truncate(at);
                    input.extend_from_slice(&other[from..end]);
                }
            }
            6 => {
                let value = INTERESTING[rng.usize(..INTERESTING.len())];
                let width = [1, 2, 4, 6, 8][rng.usize(..5)];
                let big_endian = rng.bool();
                let at = self.offset(len);
                let bytes = if big_endian {
                    value.to_be_bytes()[8 - width..].to_vec()
                } else {
                    value.to_le_bytes()[..width].to_vec()
                };
                for (i, b) in bytes.into_iter().enumerate() {
                    if let Some(x) = input.get_mut(at + i) {
                        *x = b;
                    }
                }
            }
            7 => {
                let at = rng.usize(..len);
                let delta = rng.u8(1..=16);
                input[at] = if rng.bool() {
                    input[at].wrapping_add(delta)
                } else {
                    input[at].wrapping_sub(delta)
                };
            }
            8 => input.truncate(rng.usize(..len)),
            _ => {
                let (a, b) = (rng.usize(..len), rng.usize(..len));
                input.swap(a, b);
            }
        }
    }
}
