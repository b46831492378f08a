//! A P4 budget: the resources a switch program may use and stay implementable on a
//! programmable switching chip (an RMT pipeline such as Tofino), what each program declares of
//! them, and a check of one against the other (docs/p4-budget.md).
//!
//! A chip processes each packet in one pass through a fixed number of match-action stages.
//! State lives in register arrays of fixed size, each in one stage, and one packet reaches
//! one entry of an array once (one read-modify-write by its stateful ALU). There is no loop:
//! a packet cannot visit every port's register, and a later stage cannot write back into an
//! earlier one. The parser extracts a bounded header. The software switches go past this
//! model in places; a program says where in its [`ProgramBudget::beyond`], and [`check`] lists
//! every excess, so the docs' claims are tested rather than asserted.

/// The limits of a chip. [`ChipBudget::TOFINO`] is the target the papers built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChipBudget {
    /// Match-action stages a packet passes through.
    pub stages: u32,
    /// Register arrays (stateful ALUs) one stage holds.
    pub register_arrays_per_stage: u32,
    /// Bits of register memory in one stage.
    pub register_bits_per_stage: u64,
    /// Bits of one register entry, what one access reads and writes.
    pub entry_bits: u32,
    /// Accesses one packet makes to one register array.
    pub accesses_per_array: u32,
    /// Bytes of headers the parser extracts from a packet.
    pub header_bytes: u32,
}

impl ChipBudget {
    /// Tofino-like limits, each from a source:
    /// - 12 stages: NetChain (paper 002, section 6) assumes "k=12" stages. 1Pipe's paper
    ///   (000, section 6.2.1) counts 16 ingress stages; we take the smaller.
    /// - 128-bit entries: NetChain's "each stage can read or write a few bytes (n)", n = 16.
    /// - 8 Mbit of registers per stage: NetChain's prototype allocates "64K 16-byte slots in
    ///   each stage" (section 7).
    /// - 4 register arrays per stage: the four stateful ALUs per stage commonly reported for
    ///   Tofino (not in our papers; an assumption, and the one limit we could not source).
    /// - one access per array per packet: each stage's stateful ALU serves a packet once
    ///   (thesis 004, section 7: "Each stage of the pipeline can only execute a single ALU
    ///   instruction per field").
    /// - 512 header bytes: RMT's 4 Kb packet header vector (Bosshart et al., SIGCOMM 2013),
    ///   which holds the parsed headers and metadata.
    pub const TOFINO: ChipBudget = ChipBudget {
        stages: 12,
        register_arrays_per_stage: 4,
        register_bits_per_stage: 64 * 1024 * 128,
        entry_bits: 128,
        accesses_per_array: 1,
        header_bytes: 512,
    };
}

impl Default for ChipBudget {
    fn default() -> ChipBudget {
        ChipBudget::TOFINO
    }
}

/// One register array a program keeps: fixed entries of fixed width, in one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterArray {
    pub name: &'static str,
    /// Arrays that together hold one structure spread over stages (the levels of a tree, the
    /// 16-byte pieces of a value) share a name and differ in part; 0 for a lone array.
    pub part: u32,
    /// The stage it sits in, from 0. Arrays a packet reads in order sit in increasing stages.
    pub stage: u32,
    pub entries: u64,
    pub entry_bits: u32,
    /// Accesses (read-modify-writes) one packet makes to it, at most.
    pub accesses: u32,
}

impl RegisterArray {
    pub fn bits(&self) -> u64 {
        self.entries.saturating_mul(u64::from(self.entry_bits))
    }
}

/// Per-packet work no single pass of a pipeline does, named by what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Beyond {
    /// A loop over state (every port, every slot of a range, every reservation).
    LoopOverState(&'static str),
    /// Packets the switch makes or holds in queues of its own and sends later (a chip
    /// rewrites the packet in hand; it can clone, not buffer).
    QueuedPackets(&'static str),
    /// A write that depends on a value computed in a later stage: a chip would recirculate
    /// the packet (a second pass, at a cost in throughput) or leave it to the control plane.
    SecondPass(&'static str),
}

/// What a switch program declares it uses, per switch (sizes follow its configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramBudget {
    pub program: &'static str,
    /// Stages the program needs: at least one past its last array's.
    pub stages: u32,
    pub arrays: Vec<RegisterArray>,
    /// The largest header the program parses (and rewrites) in one packet.
    pub header_bytes: u32,
    /// Packets the program copies to several ports: within a chip's means (the traffic
    /// manager's multicast; each copy passes the egress stages once), so no excess.
    pub multicast: Vec<&'static str>,
    /// Work the program leaves to the switch's control plane (its CPU, or the chip's packet
    /// generator for periodic packets): timers, scans, reports. Not per packet, so no excess.
    pub control_plane: Vec<&'static str>,
    pub beyond: Vec<Beyond>,
}

impl ProgramBudget {
    /// The arrays (parts) of one name.
    pub fn arrays_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a RegisterArray> + 'a {
        self.arrays.iter().filter(move |a| a.name == name)
    }
}

/// A program's state machine states its budget; a test checks the declaration against the
/// code paths where the program allows it (1Pipe's does, `crates/proto/src/switch/budget`).
pub trait Budgeted {
    fn budget(&self) -> ProgramBudget;
}

/// One way a program goes past a chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Excess {
    Stages {
        used: u32,
        max: u32,
    },
    ArraysInStage {
        stage: u32,
        arrays: u32,
        max: u32,
    },
    BitsInStage {
        stage: u32,
        bits: u64,
        max: u64,
    },
    EntryBits {
        array: &'static str,
        part: u32,
        bits: u32,
        max: u32,
    },
    Accesses {
        array: &'static str,
        part: u32,
        accesses: u32,
        max: u32,
    },
    HeaderBytes {
        bytes: u32,
        max: u32,
    },
    Beyond(Beyond),
}

/// Every excess of `program` over `chip`, in a fixed order (stages, then per stage, then per
/// array, then the header, then what the program declared beyond a pipeline); empty if it fits.
pub fn check(program: &ProgramBudget, chip: &ChipBudget) -> Vec<Excess> {
    let mut excesses = Vec::new();
    let last_stage = program.arrays.iter().map(|a| a.stage + 1).max().unwrap_or(0);
    let used = program.stages.max(last_stage);
    if used > chip.stages {
        excesses.push(Excess::Stages {
            used,
            max: chip.stages,
        });
    }
    for stage in 0..used {
        let arrays: Vec<&RegisterArray> = program.arrays.iter().filter(|a| a.stage == stage).collect();
        let count = arrays.len() as u32;
        if count > chip.register_arrays_per_stage {
            excesses.push(Excess::ArraysInStage {
                stage,
                arrays: count,
                max: chip.register_arrays_per_stage,
            });
        }
        let bits = arrays.iter().fold(0u64, |sum, a| sum.saturating_add(a.bits()));
        if bits > chip.register_bits_per_stage {
            excesses.push(Excess::BitsInStage {
                stage,
                bits,
                max: chip.register_bits_per_stage,
            });
        }
    }
    for a in &program.arrays {
        if a.entry_bits > chip.entry_bits {
            excesses.push(Excess::EntryBits {
                array: a.name,
                part: a.part,
                bits: a.entry_bits,
                max: chip.entry_bits,
            });
        }
        if a.accesses > chip.accesses_per_array {
            excesses.push(Excess::Accesses {
                array: a.name,
                part: a.part,
                accesses: a.accesses,
                max: chip.accesses_per_array,
            });
        }
    }
    if program.header_bytes > chip.header_bytes {
        excesses.push(Excess::HeaderBytes {
            bytes: program.header_bytes,
            max: chip.header_bytes,
        });
    }
    excesses.extend(program.beyond.iter().copied().map(Excess::Beyond));
    excesses
}

/// Stages a binary tree of minimums over `leaves` takes, one level per stage (paper 000,
/// section 6.2.1: "each stage can only compute the minimum of two barriers", so the minimum of
/// N inputs takes O(log N) stages; 5 for 32 ports).
pub fn tree_levels(leaves: u64) -> u32 {
    if leaves <= 1 {
        0
    } else {
        64 - (leaves - 1).leading_zeros()
    }
}

/// A value wider than one entry, split into `chip.entry_bits` pieces (NetChain's values over
/// several stages, paper 002 section 4.1), packed from `first_stage` as many to a stage as
/// its arrays and bits allow, at least one. Returns the arrays and the first stage after them.
pub fn pieces(
    name: &'static str,
    entries: u64,
    value_bits: u64,
    first_stage: u32,
    chip: &ChipBudget,
) -> (Vec<RegisterArray>, u32) {
    let width = u64::from(chip.entry_bits.max(1));
    let count = value_bits.div_ceil(width);
    let by_bits = chip.register_bits_per_stage / entries.saturating_mul(width).max(1);
    let per_stage = by_bits.min(u64::from(chip.register_arrays_per_stage)).max(1);
    let arrays: Vec<RegisterArray> = (0..count)
        .map(|part| RegisterArray {
            name,
            part: part as u32,
            stage: first_stage.saturating_add((part / per_stage) as u32),
            entries,
            entry_bits: width as u32,
            accesses: 1,
        })
        .collect();
    let next = arrays.last().map_or(first_stage, |a| a.stage + 1);
    (arrays, next)
}

#[cfg(test)]
mod tests;
