//! A host's background flows: its senders, each to a random other host, the receivers of the
//! flows towards it, and the ACKs it owes. Senders take turns on the link, and ACKs go first
//! (they are small and clock every other host's flows).

use super::DctcpConfig;
use super::flow::{FlowCounters, Receiver, Sender};
use super::frame::{self, Repr};
use onepipe_fabric::hash::{SplitMix, mix64};
use onepipe_wire::Instant;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostFlowCounters {
    pub data_frames_received: u64,
    pub acks_dropped: u64,
    pub frames_refused: u64,
}

pub struct Flows {
    process: u32,
    config: DctcpConfig,
    senders: Vec<Sender>,
    /// By (source process, flow index).
    receivers: BTreeMap<(u32, u16), Receiver>,
    acks: VecDeque<Repr>,
    /// The sender whose turn it is.
    turn: usize,
    pub counters: HostFlowCounters,
}

impl Flows {
    /// `config.flows_per_host` flows from `process`, each to a process other than itself
    /// drawn from `seed` (none if it is alone), starting at `start_at`.
    pub fn new(process: u32, processes: u32, config: &DctcpConfig, seed: u64, start_at: Instant) -> Flows {
        let mut rng = SplitMix::new(mix64(seed ^ 0xdc7c_9000 ^ process as u64));
        let count = if processes > 1 {
            config.flows_per_host.min(super::FLOWS_PER_HOST_MAX)
        } else {
            0
        };
        let dsts: Vec<u32> = (0..count)
            .map(|_| {
                let other = (rng.next_u64() % (processes as u64 - 1)) as u32;
                if other >= process { other + 1 } else { other }
            })
            .collect();
        Flows::to(process, &dsts, config, start_at)
    }

    /// A flow from `process` to each of `dsts` (at most [`super::FLOWS_PER_HOST_MAX`];
    /// `process` itself is left out), starting at `start_at`.
    pub fn to(process: u32, dsts: &[u32], config: &DctcpConfig, start_at: Instant) -> Flows {
        let senders = dsts
            .iter()
            .filter(|&&d| d != process)
            .take(super::FLOWS_PER_HOST_MAX as usize)
            .map(|&dst| Sender::new(dst, start_at, config))
            .collect();
        Flows {
            process,
            config: config.clone(),
            senders,
            receivers: BTreeMap::new(),
            acks: VecDeque::new(),
            turn: 0,
            counters: HostFlowCounters::default(),
        }
    }

    pub fn senders(&self) -> &[Sender] {
        &self.senders
    }

    /// Every sender's counters, summed.
    pub fn sent(&self) -> FlowCounters {
        let mut sum = FlowCounters::default();
        for s in &self.senders {
            let c = &s.counters;
            sum.frames_sent += c.frames_sent;
            sum.frames_acked += c.frames_acked;
            sum.frames_marked += c.frames_marked;
            sum.retransmits += c.retransmits;
            sum.timeouts += c.timeouts;
            sum.window_cuts += c.window_cuts;
        }
        sum
    }

    /// A background frame for this host (data of a flow towards it, or an ACK of its own).
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        let Some(r) = Repr::parse(frame) else {
            self.counters.frames_refused += 1;
            return;
        };
        if r.dst != self.process {
            self.counters.frames_refused += 1;
            return;
        }
        if r.ack {
            match self.senders.get_mut(r.flow as usize) {
                Some(s) if s.dst == r.src => s.handle_ack(now, r.seq, r.ece, &self.config),
                _ => self.counters.frames_refused += 1,
            }
            return;
        }
        self.counters.data_frames_received += 1;
        let (next, ece) = self
            .receivers
            .entry((r.src, r.flow))
            .or_default()
            .handle_data(r.seq, r.ce);
        if self.acks.len() >= self.config.acks_queued_max {
            self.counters.acks_dropped += 1;
            return;
        }
        self.acks.push_back(Repr {
            ack: true,
            ce: false,
            ece,
            src: self.process,
            dst: r.src,
            flow: r.flow,
            seq: next,
        });
    }

    /// The next frame for the host's link: an owed ACK, else the next sender in turn with
    /// room in its window.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if let Some(ack) = self.acks.pop_front() {
            return ack.emit(buf, frame::ACK_BYTES);
        }
        let n = self.senders.len();
        for i in 0..n {
            let index = (self.turn + i) % n;
            let s = &mut self.senders[index];
            if !s.can_send(now, &self.config) {
                continue;
            }
            let seq = s.next_frame(now, &self.config);
            self.turn = (index + 1) % n;
            let data = Repr {
                ack: false,
                ce: false,
                ece: false,
                src: self.process,
                dst: s.dst,
                flow: index as u16,
                seq,
            };
            return data.emit(buf, self.config.frame_bytes);
        }
        None
    }

    /// Whether [`Flows::poll_transmit`] may give a frame (ignoring the flows' start time:
    /// `false` is exact, `true` may not be).
    pub fn may_transmit(&self) -> bool {
        !self.acks.is_empty() || !self.senders.is_empty()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.senders.iter().filter_map(Sender::poll_timeout).min()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        for s in &mut self.senders {
            s.handle_timeout(now, &self.config);
        }
    }

    pub fn invariants(&self) {
        assert!(self.acks.len() <= self.config.acks_queued_max);
        assert!(self.senders.iter().all(|s| s.dst != self.process));
        for s in &self.senders {
            s.invariants();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(src: u32, dst: u32, seq: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 100];
        let r = Repr {
            ack: false,
            ce: false,
            ece: false,
            src,
            dst,
            flow: 0,
            seq,
        };
        let len = r.emit(&mut buf, 100).unwrap();
        buf.truncate(len);
        buf
    }

    /// The ACK queue is bounded: an ACK that finds it full is dropped and counted, and the
    /// next (cumulative) one still says everything.
    #[test]
    fn a_full_ack_queue_drops_and_counts() {
        let config = DctcpConfig {
            acks_queued_max: 1,
            ..DctcpConfig::default()
        };
        let mut f = Flows::to(1, &[], &config, Instant::ZERO);
        let now = Instant::from_nanos(1);
        f.handle_frame(now, &data(0, 1, 0));
        f.handle_frame(now, &data(0, 1, 1));
        assert_eq!(f.counters.acks_dropped, 1);
        let mut buf = [0u8; 64];
        let len = f.poll_transmit(now, &mut buf).unwrap();
        assert_eq!(Repr::parse(&buf[..len]).unwrap().seq, 1);
        f.handle_frame(now, &data(0, 1, 2));
        let len = f.poll_transmit(now, &mut buf).unwrap();
        assert_eq!(Repr::parse(&buf[..len]).unwrap().seq, 3);
        f.handle_frame(now, &data(0, 2, 3));
        assert_eq!(f.counters.frames_refused, 1, "a frame for another host");
        f.invariants();
    }

    /// Destinations are other hosts, the same for a seed, and spread over the hosts.
    #[test]
    fn flows_go_to_random_other_hosts_fixed_by_the_seed() {
        let config = DctcpConfig {
            flows_per_host: 64,
            ..DctcpConfig::default()
        };
        let dsts = |seed| -> Vec<u32> {
            Flows::new(3, 8, &config, seed, Instant::ZERO)
                .senders()
                .iter()
                .map(|s| s.dst)
                .collect()
        };
        let a = dsts(1);
        assert_eq!(a.len(), 64);
        assert!(a.iter().all(|&d| d != 3 && d < 8));
        assert_eq!(a, dsts(1));
        assert_ne!(a, dsts(2));
        assert_eq!((0..8).filter(|h| a.contains(h)).count(), 7);
        assert!(Flows::new(0, 1, &config, 1, Instant::ZERO).senders().is_empty());
    }
}
