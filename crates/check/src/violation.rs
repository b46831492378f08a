//! Violations reported by the checks.

use std::fmt;

use serde::Serialize;

use crate::log::{MsgId, ProcessId};

/// The guarantee a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    TotalOrder,
    Fifo,
    Causality,
    NoDuplicates,
    NoCreation,
    NoLoss,
    Atomicity,
}

impl Rule {
    /// The snake_case name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Rule::TotalOrder => "total_order",
            Rule::Fifo => "fifo",
            Rule::Causality => "causality",
            Rule::NoDuplicates => "no_duplicates",
            Rule::NoCreation => "no_creation",
            Rule::NoLoss => "no_loss",
            Rule::Atomicity => "atomicity",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken guarantee, located at an event of one process's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The process whose log holds the offending event.
    pub process: ProcessId,
    /// 0-based index into that process's `events` (not a line number: blank lines are skipped).
    pub index: usize,
    pub kind: ViolationKind,
}

impl Violation {
    pub fn rule(&self) -> Rule {
        self.kind.rule()
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] process {} event #{}: {}",
            self.rule(),
            self.process,
            self.index,
            self.kind
        )
    }
}

/// What is wrong; `prev_index`/`first_index`/`delivered_index` point into the same process's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ViolationKind {
    /// total_order: the delivery key `(ts_ns, src)` is below the previous delivery's key.
    OutOfOrder {
        ts_ns: u64,
        src: ProcessId,
        msg_id: MsgId,
        prev_index: usize,
        prev_ts_ns: u64,
        prev_src: ProcessId,
        prev_msg_id: MsgId,
    },
    /// total_order: two different messages carry the same key `(ts_ns, src)`, so the global key
    /// does not order them and receivers could disagree.
    TiedKey {
        ts_ns: u64,
        src: ProcessId,
        msg_id: MsgId,
        prev_index: usize,
        prev_msg_id: MsgId,
    },
    /// total_order: destinations of one scattering (same sender and `msg_id`) got different
    /// timestamps, so receivers would order that message differently.
    ScatterTsMismatch {
        dst: ProcessId,
        msg_id: MsgId,
        ts_ns: u64,
        first_index: usize,
        first_ts_ns: u64,
    },
    /// fifo: `src` sent this message to us as its `send_rank`-th message (0-based) to us, but a
    /// later-sent one was delivered before it.
    FifoReorder {
        src: ProcessId,
        msg_id: MsgId,
        send_rank: u64,
        prev_index: usize,
        prev_msg_id: MsgId,
        prev_send_rank: u64,
    },
    /// causality: a send timestamp is not above a timestamp already delivered by this process.
    SendNotAfterDelivery {
        dst: ProcessId,
        msg_id: MsgId,
        ts_ns: u64,
        delivered_index: usize,
        delivered_ts_ns: u64,
    },
    /// causality: this process's send timestamps went backwards.
    SendTsDecreased {
        dst: ProcessId,
        msg_id: MsgId,
        ts_ns: u64,
        prev_index: usize,
        prev_ts_ns: u64,
    },
    /// no_duplicates: `(src, msg_id)` was already delivered at `first_index`.
    Duplicate {
        src: ProcessId,
        msg_id: MsgId,
        first_index: usize,
    },
    /// no_creation: delivered from a process that has no log.
    NoSenderLog { src: ProcessId, msg_id: MsgId },
    /// no_creation: `src`'s log has no send of `msg_id` to this process.
    NoMatchingSend {
        src: ProcessId,
        msg_id: MsgId,
        ts_ns: u64,
    },
    /// no_creation: the delivered timestamp differs from the one `src` sent with.
    TsMismatch {
        src: ProcessId,
        msg_id: MsgId,
        ts_ns: u64,
        sent_ts_ns: u64,
    },
    /// no_loss: this send (the violation's process is the sender) was delivered by `dst`
    /// `deliveries` times instead of exactly once.
    NotDeliveredOnce {
        dst: ProcessId,
        msg_id: MsgId,
        deliveries: u32,
    },
    /// atomicity: this scattering (the violation's process is the sender) was delivered by
    /// `delivered` of its `receivers` correct receivers: neither all nor none.
    PartlyDelivered {
        msg_id: MsgId,
        receivers: u32,
        delivered: u32,
    },
}

impl ViolationKind {
    pub fn rule(&self) -> Rule {
        use ViolationKind as K;
        match self {
            K::OutOfOrder { .. } | K::TiedKey { .. } | K::ScatterTsMismatch { .. } => Rule::TotalOrder,
            K::FifoReorder { .. } => Rule::Fifo,
            K::SendNotAfterDelivery { .. } | K::SendTsDecreased { .. } => Rule::Causality,
            K::Duplicate { .. } => Rule::NoDuplicates,
            K::NoSenderLog { .. } | K::NoMatchingSend { .. } | K::TsMismatch { .. } => Rule::NoCreation,
            K::NotDeliveredOnce { .. } => Rule::NoLoss,
            K::PartlyDelivered { .. } => Rule::Atomicity,
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ViolationKind as K;
        match *self {
            K::OutOfOrder {
                ts_ns,
                src,
                msg_id,
                prev_index,
                prev_ts_ns,
                prev_src,
                prev_msg_id,
            } => write!(
                f,
                "delivered {src}:{msg_id} with key (ts {ts_ns} ns, src {src}) after #{prev_index} \
                 {prev_src}:{prev_msg_id} with larger key (ts {prev_ts_ns} ns, src {prev_src})"
            ),
            K::TiedKey {
                ts_ns,
                src,
                msg_id,
                prev_index,
                prev_msg_id,
            } => write!(
                f,
                "delivered {src}:{msg_id} with the same key (ts {ts_ns} ns, src {src}) as \
                 #{prev_index} {src}:{prev_msg_id}; keys must be strictly increasing"
            ),
            K::ScatterTsMismatch {
                dst,
                msg_id,
                ts_ns,
                first_index,
                first_ts_ns,
            } => write!(
                f,
                "sent msg {msg_id} to {dst} with ts {ts_ns} ns, but #{first_index} sent the same \
                 msg with ts {first_ts_ns} ns"
            ),
            K::FifoReorder {
                src,
                msg_id,
                send_rank,
                prev_index,
                prev_msg_id,
                prev_send_rank,
            } => write!(
                f,
                "delivered {src}:{msg_id} (sent to us as #{send_rank}) after #{prev_index} \
                 {src}:{prev_msg_id} (sent to us later, as #{prev_send_rank})"
            ),
            K::SendNotAfterDelivery {
                dst,
                msg_id,
                ts_ns,
                delivered_index,
                delivered_ts_ns,
            } => write!(
                f,
                "sent msg {msg_id} to {dst} with ts {ts_ns} ns, expected > {delivered_ts_ns} ns \
                 delivered earlier at #{delivered_index}"
            ),
            K::SendTsDecreased {
                dst,
                msg_id,
                ts_ns,
                prev_index,
                prev_ts_ns,
            } => write!(
                f,
                "sent msg {msg_id} to {dst} with ts {ts_ns} ns, below ts {prev_ts_ns} ns of the \
                 send at #{prev_index}"
            ),
            K::Duplicate {
                src,
                msg_id,
                first_index,
            } => {
                write!(f, "delivered {src}:{msg_id} again (first at #{first_index})")
            }
            K::NoSenderLog { src, msg_id } => {
                write!(f, "delivered {src}:{msg_id}, but process {src} has no log")
            }
            K::NoMatchingSend { src, msg_id, ts_ns } => write!(
                f,
                "delivered {src}:{msg_id} (ts {ts_ns} ns), but {src} never sent msg {msg_id} to us"
            ),
            K::TsMismatch {
                src,
                msg_id,
                ts_ns,
                sent_ts_ns,
            } => write!(
                f,
                "delivered {src}:{msg_id} with ts {ts_ns} ns, but it was sent with ts {sent_ts_ns} ns"
            ),
            K::NotDeliveredOnce {
                dst,
                msg_id,
                deliveries,
            } => write!(
                f,
                "sent msg {msg_id} to {dst}, which delivered it {deliveries} times, expected exactly once"
            ),
            K::PartlyDelivered {
                msg_id,
                receivers,
                delivered,
            } => write!(
                f,
                "scattering {msg_id} was delivered by {delivered} of its {receivers} correct receivers, \
                 expected all or none"
            ),
        }
    }
}
