//! Controller forwarding (paper 5.2): "If a network failure affects connectivity between S and
//! R, the Commit phase in 2PC and the Recall step in failure handling may stall because S
//! repeatedly retransmits a message but cannot receive ACK from R. In this case, S asks
//! controller to forward the message to R, and waits for ACK from the controller."
//!
//! The controller relays packets without looking inside beyond a sanity check: S's prepare (or
//! recall) goes to R over R's management link ([`Output::Forward`]); R answers
//! ([`Input::Forwarded`]) with the ACK it would have sent over the fabric, which goes back to S
//! the same way, and S answers that. Every hop must be answered within
//! [`ControllerConfig::forward_timeout`]: "if a process does not respond controller within
//! timeout, it is considered as failed". A forwarded recall nobody took is recorded as
//! undeliverable for its receiver, for when it recovers.
//!
//! The packets are in the input log like everything else, so a restarted controller rebuilds
//! the forwards in progress and the undeliverable recalls, and resends the forwards.

use super::{Controller, ControllerConfig, ControllerError, Output};
use onepipe_wire::packet::{Opcode, Packet, Repr};
use onepipe_wire::{Duration, Instant};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Largest packet the controller forwards. A control frame carries it in hex, so that bounds the
/// frame under the fabric's `FRAME_MAX` (9216); endpoints' packets are one MTU (1500 by
/// default), and an endpoint with a larger MTU does not ask.
pub const FORWARD_PACKET_BYTES_MAX: usize = 4000;

/// Forwards waiting for an answer at once; more are dropped and counted (the sender asks again
/// on a later retransmission).
pub const FORWARDS_MAX: usize = 1024;

/// Undeliverable recalls kept per receiver; more are counted, not kept.
pub const UNDELIVERABLE_RECALLS_MAX: usize = 4096;

/// A packet carried through the controller: hex in JSON (half the size of a list of numbers).
#[derive(Clone, PartialEq, Eq)]
pub struct PacketBytes(pub Vec<u8>);

impl std::fmt::Debug for PacketBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PacketBytes({} bytes)", self.0.len())
    }
}

impl Serialize for PacketBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let text: String = self
            .0
            .iter()
            .flat_map(|&b| [HEX[(b >> 4) as usize] as char, HEX[(b & 0xf) as usize] as char])
            .collect();
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for PacketBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PacketBytes, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let digit = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
        let bytes = text.as_bytes();
        if bytes.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd number of hex digits"));
        }
        bytes
            .chunks(2)
            .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect::<Option<Vec<u8>>>()
            .map(PacketBytes)
            .ok_or_else(|| serde::de::Error::custom("not a hex digit"))
    }
}

/// A recall the controller could not deliver (paper 5.2: "the undeliverable recall message is
/// recorded"): its receiver must discard the message when it recovers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndeliverableRecall {
    pub sender: u32,
    pub msg_id: u64,
    /// The recall packet as its sender built it (its `msg_ts` names the message).
    pub packet: PacketBytes,
}

/// What forwarding did; none of it changes a decision except through the cuts it asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardCounters {
    /// Packets handed to a process (a sender's prepare or recall, or a receiver's ACK).
    pub forwarded: u64,
    /// The same packet asked for again while its forward waits for an answer.
    pub duplicates: u64,
    /// Asked for while [`FORWARDS_MAX`] forwards waited.
    pub dropped: u64,
    /// To or from a process already declared failed: its failure settles the packet.
    pub to_failed: u64,
    pub answered: u64,
    /// Answers naming no forward waiting for that process (late, repeated, forged), or with an
    /// ACK for someone else than the packet's sender.
    pub stale_answers: u64,
    /// Forwards not answered in time: their process is cut off and declared failed.
    pub unanswered: u64,
    pub undeliverable_recalls: u64,
    /// Undeliverable recalls beyond [`UNDELIVERABLE_RECALLS_MAX`] for one receiver.
    pub undeliverable_recalls_dropped: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Pending {
    /// Who asked (the packet's source), and who must answer.
    from: u32,
    to: u32,
    packet: PacketBytes,
    recall: bool,
    msg_id: u64,
    #[serde(with = "super::instant_ns")]
    sent_at: Instant,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Forwards {
    /// By id; ids grow with time, so the first entry is the oldest.
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
    undeliverable: BTreeMap<u32, Vec<UndeliverableRecall>>,
}

impl Forwards {
    /// Whether every process named exists and ids are unique (a snapshot read from a log).
    pub(super) fn check(&self, processes: usize) -> Result<(), String> {
        let p = |p: u32| (p as usize) < processes;
        let ok = self.pending.values().all(|f| p(f.from) && p(f.to))
            && self.pending.keys().all(|&id| id < self.next_id)
            && self.pending.len() <= FORWARDS_MAX
            && self.undeliverable.keys().all(|&q| p(q));
        if ok {
            Ok(())
        } else {
            Err("a forward names a process that does not exist".to_string())
        }
    }
}

impl ControllerConfig {
    /// How long a process has to answer a forwarded packet: half the answer timeout, so that
    /// a Recall stalled on a forward is settled (the receiver answers or is declared failed)
    /// before the announcement whose Recall it is goes unanswered.
    pub fn forward_timeout(&self) -> Duration {
        Duration::from_nanos(self.answer_timeout.as_nanos() / 2)
    }
}

/// Parses a forwarded packet: `opcode`, from `src`; `Err` names what is wrong.
fn parse(bytes: &[u8], opcode: Opcode, src: u32) -> Result<Repr, ControllerError> {
    if bytes.len() > FORWARD_PACKET_BYTES_MAX {
        return Err(ControllerError::BadForward("packet too large"));
    }
    let packet = Packet::new_checked(bytes).map_err(|_| ControllerError::BadForward("malformed"))?;
    let repr = Repr::parse(&packet).map_err(|_| ControllerError::BadForward("malformed"))?;
    if repr.opcode != opcode {
        return Err(ControllerError::BadForward("wrong opcode"));
    }
    if repr.src != src {
        return Err(ControllerError::BadForward("packet from another process"));
    }
    Ok(repr)
}

impl Controller {
    /// The recalls forwarded to `receiver` that it never answered, oldest first.
    pub fn undeliverable_recalls(&self, receiver: u32) -> &[UndeliverableRecall] {
        self.forwards
            .undeliverable
            .get(&receiver)
            .map_or(&[], |v| v.as_slice())
    }

    /// Forwards waiting for an answer.
    pub fn forwards_pending(&self) -> usize {
        self.forwards.pending.len()
    }

    /// A forward request is a prepare from `from` to `to`; an answer, if any, an ACK from
    /// `process`.
    pub(super) fn check_forward(&self, from: u32, to: u32, packet: &[u8]) -> Result<(), ControllerError> {
        let repr = parse(packet, Opcode::Prepare, from)?;
        if repr.dst != to || from == to {
            return Err(ControllerError::BadForward("packet for another process"));
        }
        Ok(())
    }

    pub(super) fn check_answer(
        &self,
        process: u32,
        ack: Option<&PacketBytes>,
    ) -> Result<(), ControllerError> {
        match ack {
            Some(a) => parse(&a.0, Opcode::Ack, process).map(|_| ()),
            None => Ok(()),
        }
    }

    /// `from` asks for `packet` (checked) to be forwarded to `to`.
    pub(super) fn on_forward(&mut self, now: Instant, from: u32, to: u32, packet: PacketBytes) {
        let repr = parse(&packet.0, Opcode::Prepare, from).expect("checked");
        self.forward(now, from, to, packet, repr.recall, repr.msg_id);
    }

    fn forward(&mut self, now: Instant, from: u32, to: u32, packet: PacketBytes, recall: bool, msg_id: u64) {
        let (f, counters) = (&mut self.forwards, &mut self.counters.forwards);
        if self.failed[from as usize].is_some() || self.failed[to as usize].is_some() {
            counters.to_failed += 1;
            return;
        }
        if f.pending.values().any(|p| p.to == to && p.packet == packet) {
            counters.duplicates += 1;
            return;
        }
        if f.pending.len() >= FORWARDS_MAX {
            counters.dropped += 1;
            return;
        }
        let id = f.next_id;
        f.next_id += 1;
        counters.forwarded += 1;
        self.outputs.push_back(Output::Forward {
            to,
            id,
            packet: packet.clone(),
        });
        f.pending.insert(
            id,
            Pending {
                from,
                to,
                packet,
                recall,
                msg_id,
                sent_at: now,
            },
        );
    }

    /// `process` took forward `id`, answering with `ack` (checked) for the packet's sender.
    pub(super) fn on_forwarded(&mut self, now: Instant, process: u32, id: u64, ack: Option<PacketBytes>) {
        let (f, counters) = (&mut self.forwards, &mut self.counters.forwards);
        let Some(p) = f.pending.get(&id).filter(|p| p.to == process) else {
            counters.stale_answers += 1;
            return;
        };
        let (sender, msg_id) = (p.from, p.msg_id);
        f.pending.remove(&id);
        counters.answered += 1;
        let Some(ack) = ack else { return };
        let repr = parse(&ack.0, Opcode::Ack, process).expect("checked");
        if repr.dst != sender {
            counters.stale_answers += 1;
            return;
        }
        // The ACK goes back the way the packet came, and must be answered in turn.
        self.forward(now, process, sender, ack, false, msg_id);
    }

    pub(super) fn forward_deadline(&self) -> Option<Instant> {
        let first = self.forwards.pending.values().map(|p| p.sent_at).min()?;
        Some(first + self.config.forward_timeout())
    }

    /// Paper 5.2: "If controller also cannot deliver the message, R will be announced as
    /// failed, and the undeliverable recall message is recorded. If controller receives ACK of
    /// a recall message but cannot forward it to S, S will be announced as failed."
    pub(super) fn forward_timeouts(&mut self, now: Instant) {
        let timeout = self.config.forward_timeout();
        let overdue: Vec<u64> = (self.forwards.pending.iter())
            .filter(|(_, p)| p.sent_at + timeout <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in overdue {
            let p = self.forwards.pending.remove(&id).expect("listed");
            let (f, counters) = (&mut self.forwards, &mut self.counters.forwards);
            counters.unanswered += 1;
            if p.recall {
                let kept = f.undeliverable.entry(p.to).or_default();
                if kept.len() < UNDELIVERABLE_RECALLS_MAX {
                    counters.undeliverable_recalls += 1;
                    kept.push(UndeliverableRecall {
                        sender: p.from,
                        msg_id: p.msg_id,
                        packet: p.packet,
                    });
                } else {
                    counters.undeliverable_recalls_dropped += 1;
                }
            }
            self.cut_process(now, p.to);
        }
    }

    /// A controller taking over sends the forwards in progress again, with a fresh deadline:
    /// their processes had no chance to answer a controller that was away.
    pub(super) fn resend_forwards(&mut self, now: Instant) {
        for (&id, p) in self.forwards.pending.iter_mut() {
            p.sent_at = now;
            self.outputs.push_back(Output::Forward {
                to: p.to,
                id,
                packet: p.packet.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests;
