//! cosy runs (paper 003): a two-tier leaf-spine, Poisson all-to-all messages of one size at a
//! chosen load, every completion logged and judged against the bound delta promised at
//! submission, and the network's invariants (at most K reservations per link, no data outside a
//! reservation, no link above B, no switch queue above Lemma 3.3's bound) checked from counters.
//!
//! [`sim`] runs it in the deterministic simulator (rates, finite buffers and priority classes
//! modelled); [`demo`] on the inproc and udp runtimes, at a link rate low enough that the
//! machine's scheduling jitter is small against the bound.

pub mod apps;
pub mod bisect;
pub mod demo;
pub mod figures;
pub mod nodes;
pub mod report;
pub mod sim;
pub mod slowdown;

use nodes::{CosyNode, Progress, Workload, WorkloadHost};
use onepipe_cosy::{CosyHost, CosySwitch, HostConfig, Timing};
use onepipe_fabric::{Either, Topology, Wiring, routing};
use onepipe_wire::{Duration, Instant};
use std::sync::Arc;

/// A two-tier leaf-spine and its links.
#[derive(Clone, Debug, PartialEq)]
pub struct CosyFabric {
    pub leaves: usize,
    /// C: the core switches, each linked to every leaf (full bisection when it equals
    /// `hosts_per_leaf`).
    pub spines: usize,
    pub hosts_per_leaf: usize,
    /// B, every link.
    pub link_bits_per_s: u64,
    /// Propagation per link, and a switch's pipeline delay per frame.
    pub link_delay: Duration,
    pub switch_delay: Duration,
    /// p: the largest frame, header included.
    pub frame_bytes: usize,
    /// Bytes an output queue holds.
    pub buffer_bytes: usize,
}

impl CosyFabric {
    /// The paper's simulation (section 5.3): 144 hosts, 9 ToRs of 16, 16 spines (full
    /// bisection), 100 Gbps, 200 ns propagation, 450 ns switching, 32 MB buffers.
    pub fn paper() -> CosyFabric {
        CosyFabric {
            leaves: 9,
            spines: 16,
            hosts_per_leaf: 16,
            link_bits_per_s: 100_000_000_000,
            link_delay: Duration::from_nanos(200),
            switch_delay: Duration::from_nanos(450),
            frame_bytes: 1500,
            buffer_bytes: 32 << 20,
        }
    }

    /// The paper's testbed shape (section 5.2): 8 servers on a two-tier fabric; 4 leaves of 2
    /// hosts, 2 spines.
    pub fn testbed(link_bits_per_s: u64) -> CosyFabric {
        CosyFabric {
            leaves: 4,
            spines: 2,
            hosts_per_leaf: 2,
            link_bits_per_s,
            link_delay: Duration::from_nanos(200),
            switch_delay: Duration::from_nanos(450),
            frame_bytes: 1500,
            buffer_bytes: 4 << 20,
        }
    }

    pub fn hosts(&self) -> usize {
        self.leaves * self.hosts_per_leaf
    }

    pub fn topology(&self) -> Result<Topology, String> {
        Topology::leaf_spine(self.leaves, self.spines, self.hosts_per_leaf).map_err(|e| e.to_string())
    }

    pub fn wiring(&self) -> Result<Wiring, String> {
        Wiring::new(self.topology()?, 1).map_err(|e| e.to_string())
    }

    /// Switches on the longest path: a leaf, a spine, a leaf.
    pub fn path_switches(&self) -> u32 {
        if self.leaves > 1 { 3 } else { 1 }
    }

    /// The unloaded round trip of one full frame between hosts on two leaves, as the
    /// simulator models it (store and forward: each link serializes the whole frame).
    pub fn modelled_hrtt(&self) -> Duration {
        let links = self.path_switches() as u64 + 1;
        let wire_ns = (self.frame_bytes as u64 * 8 * 1_000_000_000).div_ceil(self.link_bits_per_s);
        let one_way = links * (self.link_delay.as_nanos() + wire_ns)
            + self.path_switches() as u64 * self.switch_delay.as_nanos();
        Duration::from_nanos(2 * one_way)
    }

    /// The simulator's model of this fabric: every link at B, finite buffers, no ECN.
    pub fn model(&self) -> onepipe_sim::Model {
        onepipe_sim::Model {
            link_bits_per_s: self.link_bits_per_s,
            fabric_link_bits_per_s: self.link_bits_per_s,
            queue_capacity_bytes: self.buffer_bytes,
            ecn_threshold_bytes: usize::MAX,
            switch_delay: self.switch_delay,
            ..onepipe_sim::Model::default()
        }
    }

    /// The hosts' timing on this fabric: #H counts the sender's NIC, where its K slots merge
    /// into one link, as the first hop of Lemma 3.3 (docs/cosy.md, "The bound").
    pub fn timing(
        &self,
        k: u8,
        hrtt: Duration,
        hold: Duration,
        processing: Duration,
        control_priority: bool,
    ) -> Timing {
        Timing {
            k,
            link_bits_per_s: self.link_bits_per_s,
            frame_bytes_max: self.frame_bytes,
            hrtt,
            hops: self.path_switches() + 1,
            hold,
            processing,
            control_priority,
            ..Timing::default()
        }
    }
}

/// What every node of a run is built from, on any runtime.
pub struct NodeSpec<'a> {
    pub timing: &'a Timing,
    pub workload: &'a Workload,
    pub seed: u64,
    /// Message records kept per host, at most.
    pub records_max: usize,
    /// Slots a receiver gives one message at most; `None`: the host library's default.
    pub slots_max: Option<u8>,
    /// A host that crashes at a time (fail-stop, on its own clock).
    pub crash: Option<(u32, Instant)>,
}

impl NodeSpec<'_> {
    /// The switches, then one workload host per process, as `wiring` numbers them.
    pub fn build(&self, wiring: &Wiring, progress: &Arc<Progress>) -> Result<Vec<CosyNode>, String> {
        let routes = routing::build(wiring).map_err(|e| e.to_string())?;
        let processes = wiring.process_count() as u32;
        let delta = self.timing.delta(self.workload.message_bytes);
        let switch = sim::switch_config(self.timing, delta, self.seed);
        let mut nodes: Vec<CosyNode> = routes
            .into_iter()
            .enumerate()
            .map(|(i, r)| Either::Left(CosySwitch::new(i, wiring, r, switch.clone())))
            .collect();
        for p in 0..processes {
            let mut config = HostConfig::new(p, processes, self.timing.clone());
            config.seed = self.seed ^ (p as u64) << 20;
            config.message_bytes_max = config.message_bytes_max.max(self.workload.message_bytes);
            if let Some(slots) = self.slots_max {
                config.slots_max = slots;
            }
            let host = CosyHost::new(config).map_err(|e| e.to_string())?;
            let seed = self.seed.wrapping_mul(0x9e37_79b9) ^ p as u64;
            let mut node = WorkloadHost::new(
                host,
                self.workload.clone(),
                seed,
                self.records_max,
                progress.clone(),
            );
            if let Some((_, at)) = self.crash.filter(|c| c.0 == p) {
                node = node.crashing_at(at);
            }
            nodes.push(Either::Right(node));
        }
        Ok(nodes)
    }
}
