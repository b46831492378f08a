//! The bound delta a host promises at submission, and the due times it derives from it
//! (paper Theorem 3.5 and section 4; docs/cosy.md, "The bound").
//!
//! A message of s bytes goes through four one-way trips and two waits:
//!
//! ```text
//! submit -> request -> [receiver holds it <= hold] -> rsvp -> data at B/K ... -> complete -> complete
//!           hRTT/2 + d_ctl                            hRTT/2 + d_ctl  s K/B   hRTT/2 + d_data  hRTT/2 + d_ctl
//! ```
//!
//! so delta(s) = hold + 2 hRTT + s K / B' + d_data + 3 d_ctl + processing, where
//! - d_data = #H (#H + 1) (K - 1) / 2 x p / B is Lemma 3.3's queueing delay of a data packet,
//!   plus #H p / B for the control packets served before it (Lemma 3.3 counts data only);
//! - d_ctl is that of a control packet: with priority classes a control packet waits at most
//!   for the packet being serialized at each hop (#H p / B), without them as long as data;
//! - B' = B x `pace_share`: senders pace slightly under B/K per slot, so that the control
//!   packets sharing a fully reserved link do not build a queue that never drains;
//! - processing is the hosts' own time, measured (runtimes) or modelled (simulator).
//!
//! Theorem 3.5's delta_cosy = 2 hRTT + s K / B + d_data is the same without the hold (the
//! paper's delta^E, which it adds in the proof but never defines), the control queueing, the
//! headroom and the processing.

use crate::theory::{LemmaBound, lemma_3_3};
use onepipe_wire::Duration;
use onepipe_wire::cosy::HEADER_LEN;

#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Virtual links per link, and slots per host.
    pub k: u8,
    /// B: the bandwidth of every link.
    pub link_bits_per_s: u64,
    /// p: the largest frame, header included; data frames carry `frame_bytes_max - HEADER_LEN`.
    pub frame_bytes_max: usize,
    /// The unloaded round trip of one `frame_bytes_max` packet between the two hosts farthest
    /// apart (the paper's hRTT).
    pub hrtt: Duration,
    /// #H: switches on the longest path.
    pub hops: u32,
    /// delta^E: how long a receiver holds a request for a slot before rejecting it.
    pub hold: Duration,
    /// The hosts' processing over a message's whole exchange.
    pub processing: Duration,
    /// Whether the fabric serves failure and control packets before data.
    pub control_priority: bool,
    /// Fraction of B/K a slot paces at (at most 1).
    pub pace_share: f64,
}

impl Default for Timing {
    /// The paper's simulation (section 5.3): 100 Gbps, hRTT 5.5 us, two tiers, K = 4.
    fn default() -> Timing {
        Timing {
            k: 4,
            link_bits_per_s: 100_000_000_000,
            frame_bytes_max: 1500,
            hrtt: Duration::from_nanos(5_500),
            hops: 3,
            hold: Duration::from_micros(2),
            processing: Duration::from_micros(1),
            control_priority: true,
            pace_share: 0.99,
        }
    }
}

/// Why a timing cannot bound anything.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TimingError {
    #[error("K must be 1 to 16, not {0}")]
    K(u8),
    #[error("the link bandwidth must be positive")]
    Bandwidth,
    #[error("frames of {0} bytes leave no room for data after the {HEADER_LEN}-byte header")]
    Frame(usize),
    #[error("the pace share must be in (0, 1], not {0}")]
    PaceShare(f64),
    #[error("a path has 1 to 8 switches, not {0}")]
    Hops(u32),
}

impl Timing {
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.k == 0 || self.k > onepipe_wire::cosy::VIRTUAL_LINKS_MAX {
            return Err(TimingError::K(self.k));
        }
        if self.link_bits_per_s == 0 {
            return Err(TimingError::Bandwidth);
        }
        if self.frame_bytes_max <= HEADER_LEN || self.frame_bytes_max > onepipe_fabric::node::FRAME_MAX {
            return Err(TimingError::Frame(self.frame_bytes_max));
        }
        if !(self.pace_share > 0.0 && self.pace_share <= 1.0) {
            return Err(TimingError::PaceShare(self.pace_share));
        }
        if !(1..=onepipe_wire::cosy::HOPS_MAX as u32).contains(&self.hops) {
            return Err(TimingError::Hops(self.hops));
        }
        Ok(())
    }

    /// Payload bytes a data frame carries.
    pub fn payload_bytes_max(&self) -> usize {
        self.frame_bytes_max - HEADER_LEN
    }

    /// Data frames of a message of `bytes`.
    pub fn frames(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.payload_bytes_max())
    }

    /// Time a frame of `frame_bytes` takes on a link at full rate.
    pub fn wire_time(&self, frame_bytes: usize) -> Duration {
        Duration::from_nanos(bits_time_ns(frame_bytes as u64 * 8, self.link_bits_per_s as f64))
    }

    /// The rate of a message on `slots` slots: slots x B/K x `pace_share`.
    fn rate_bits_per_s(&self, slots: u8) -> f64 {
        self.link_bits_per_s as f64 * self.pace_share * slots.clamp(1, self.k) as f64 / self.k as f64
    }

    /// The gap a message on `slots` slots leaves between the starts of two frames, the first
    /// of `frame_bytes`.
    pub fn pace_gap(&self, frame_bytes: usize, slots: u8) -> Duration {
        Duration::from_nanos(bits_time_ns(frame_bytes as u64 * 8, self.rate_bits_per_s(slots)))
    }

    /// s K / (slots B'): how long a message of `bytes` (its frames and headers) takes to send
    /// on `slots` slots.
    pub fn send_time(&self, bytes: usize, slots: u8) -> Duration {
        let frames = self.frames(bytes);
        let wire_bytes = bytes + frames * HEADER_LEN;
        Duration::from_nanos(bits_time_ns(wire_bytes as u64 * 8, self.rate_bits_per_s(slots)))
    }

    /// Lemma 3.3 for this fabric.
    pub fn lemma(&self) -> LemmaBound {
        lemma_3_3(
            self.hops,
            self.k as u32,
            self.frame_bytes_max as u64,
            self.link_bits_per_s,
        )
    }

    /// Lemma 3.3: the most a data packet waits in queues over its whole path.
    pub fn data_queueing(&self) -> Duration {
        self.lemma().queueing_delay_max
    }

    /// Lemma 3.3's largest transient queue at a switch port: #H (K - 1) p bytes.
    pub fn queue_bytes_max(&self) -> u64 {
        self.lemma().queue_bytes_max
    }

    /// The most data a switch port may hold: Lemma 3.3's #H (K - 1) p, plus one frame per hop
    /// for the data held back while control packets go first (see
    /// [`Timing::control_interference`]).
    pub fn data_queue_bytes_bound(&self) -> u64 {
        self.queue_bytes_max() + self.hops as u64 * self.frame_bytes_max as u64
    }

    /// The most a control packet waits in queues over its whole path.
    pub fn control_queueing(&self) -> Duration {
        if self.control_priority {
            Duration::from_nanos(self.hops as u64 * self.wire_time(self.frame_bytes_max).as_nanos())
        } else {
            self.data_queueing()
        }
    }

    /// What control packets, served first, may add to a data packet's wait over its path:
    /// at most a full frame's time per hop (a control frame is 72 bytes: about 20 of them
    /// per hop ahead of one data frame). Lemma 3.3 counts data packets only.
    pub fn control_interference(&self) -> Duration {
        Duration::from_nanos(self.hops as u64 * self.wire_time(self.frame_bytes_max).as_nanos())
    }

    /// One way, queues included, for a data packet.
    fn data_leg(&self) -> Duration {
        Duration::from_nanos(self.hrtt.as_nanos() / 2) + self.data_queueing() + self.control_interference()
    }

    /// One way, queues included, for a control packet.
    fn control_leg(&self) -> Duration {
        Duration::from_nanos(self.hrtt.as_nanos() / 2) + self.control_queueing()
    }

    /// delta(s): the bound promised at submission for a message of `bytes`, which the worst
    /// case of one slot sets.
    pub fn delta(&self, bytes: usize) -> Duration {
        self.hold + self.after_rsvp(bytes, 1) + self.control_leg() + self.control_leg()
    }

    /// From the rsvp reaching the sender to the receiver's complete reaching it, for a message
    /// on `slots` slots: what the sender checks before it starts sending.
    pub fn after_rsvp(&self, bytes: usize, slots: u8) -> Duration {
        self.send_time(bytes, slots) + self.data_leg() + self.control_leg() + self.processing
    }

    /// How long before its completion's bound a message is delivered at the latest: the
    /// receiver's complete on its way back (one control leg) and the host's processing.
    pub fn delivery_slack(&self) -> Duration {
        self.control_leg() + self.processing
    }

    /// From a receiver's rsvp to the first data frame (or complete) it expects: the rsvp to
    /// the sender, the first frame back.
    pub fn first_data_due(&self) -> Duration {
        self.control_leg() + self.data_leg() + self.processing
    }

    /// From one data frame of `frame_bytes` to the next of the same message (on `slots`
    /// slots) at the receiver: the gap, plus what queues can add to one frame and not to the
    /// other.
    pub fn next_data_due(&self, frame_bytes: usize, slots: u8) -> Duration {
        self.pace_gap(frame_bytes, slots)
            + self.data_queueing()
            + self.control_interference()
            + self.processing
    }
}

fn bits_time_ns(bits: u64, bits_per_s: f64) -> u64 {
    (bits as f64 * 1e9 / bits_per_s).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lemma_3_3_at_the_papers_example() {
        // Section 3.4: 100 Gbps, 1.5 KB packets, K = 4, five switches: 5.4 us.
        let t = Timing {
            hops: 5,
            ..Timing::default()
        };
        assert_eq!(t.data_queueing(), Duration::from_nanos(45 * 120));
        assert_eq!(t.queue_bytes_max(), 5 * 3 * 1500);
    }

    #[test]
    fn delta_is_the_sum_of_its_legs() {
        let t = Timing::default();
        let s = 128 * 1024;
        let legs = t.hold
            + t.hrtt
            + t.hrtt
            + t.send_time(s, 1)
            + t.data_queueing()
            + t.control_interference()
            + t.control_queueing()
            + t.control_queueing()
            + t.control_queueing()
            + t.processing;
        let diff = legs.as_nanos().abs_diff(t.delta(s).as_nanos());
        assert!(diff <= 2, "halves of hRTT round: {diff}");
        // Theorem 3.5's delta_cosy is below ours: ours adds the hold, control queueing,
        // headroom and processing.
        let theorem = 2 * t.hrtt.as_nanos()
            + (s as u64 * 8 * 4 * 1_000_000_000) / 100_000_000_000
            + t.data_queueing().as_nanos();
        assert!(t.delta(s).as_nanos() > theorem);
    }

    #[test]
    fn a_slot_paces_at_its_share_of_b_over_k() {
        let t = Timing::default();
        // 1500 B at 100 Gbps / 4 x 0.99 = 484.8 ns.
        assert_eq!(t.pace_gap(1500, 1), Duration::from_nanos(485));
        assert_eq!(
            t.pace_gap(1500, 4),
            Duration::from_nanos(122),
            "four slots: B x 0.99"
        );
        assert_eq!(t.pace_gap(1500, 9), t.pace_gap(1500, 4), "never above K slots");
        assert!(t.send_time(100_000, 2) < t.send_time(100_000, 1));
        assert_eq!(t.frames(0), 0);
        assert_eq!(t.frames(1428), 1);
        assert_eq!(t.frames(1429), 2);
    }

    #[test]
    fn nonsense_timings_are_refused() {
        let ok = Timing::default();
        assert!(ok.validate().is_ok());
        for bad in [
            Timing { k: 0, ..ok.clone() },
            Timing { k: 17, ..ok.clone() },
            Timing {
                link_bits_per_s: 0,
                ..ok.clone()
            },
            Timing {
                frame_bytes_max: HEADER_LEN,
                ..ok.clone()
            },
            Timing {
                pace_share: 1.5,
                ..ok.clone()
            },
            Timing {
                hops: 0,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
