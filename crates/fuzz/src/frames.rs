//! Drawing structured inputs from fuzz bytes: [`Draw`], which never fails (an exhausted
//! input draws zeros), and [`frame`], a 1Pipe frame that is well formed most of the time, so
//! that a fuzzer gets past parsing into the state machines, and damaged or raw the rest.

use arbitrary::Unstructured;
use onepipe_wire::ack::{self, AckPayload};
use onepipe_wire::packet::{HEADER_LEN, Opcode, Packet, Repr};
use onepipe_wire::{ACK_PAYLOAD_LEN, Instant, Timestamp48};

/// Offsets of the 1Pipe header's fields: where a damaging write hurts most.
pub const HEADER_FIELD_OFFSETS: [usize; 14] = [0, 1, 2, 8, 14, 20, 24, 28, 32, 40, 42, 44, 46, 48];

/// Infallible draws from fuzz bytes.
pub struct Draw<'a>(Unstructured<'a>);

impl<'a> Draw<'a> {
    pub fn new(data: &'a [u8]) -> Draw<'a> {
        Draw(Unstructured::new(data))
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        self.0.arbitrary().unwrap_or_default()
    }
    pub fn u16(&mut self) -> u16 {
        self.0.arbitrary().unwrap_or_default()
    }
    pub fn u32(&mut self) -> u32 {
        self.0.arbitrary().unwrap_or_default()
    }
    pub fn u64(&mut self) -> u64 {
        self.0.arbitrary().unwrap_or_default()
    }
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.u32() as usize) % n
    }
    /// Up to `max` bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max + 1);
        let len = len.min(self.0.len());
        self.0.bytes(len).map(<[u8]>::to_vec).unwrap_or_default()
    }
    /// A number that is small most of the time, at a boundary sometimes, anything else
    /// otherwise: identifiers, counts and sequence numbers as a peer might send them.
    pub fn number(&mut self, small: u64) -> u64 {
        match self.u8() % 8 {
            0 => self.u64(),
            1 => [0, 1, u32::MAX as u64, u64::MAX, u64::MAX / 2, (1 << 48) - 1][self.below(6)],
            _ => self.u64() % small.max(1),
        }
    }
    /// A time near `now`: mostly a little behind it (as an honest peer's barrier is), a
    /// little ahead sometimes, up to a millisecond ahead rarely (a barrier that far ahead
    /// makes later traffic late, which ends the interesting part of an input), or anywhere.
    pub fn time_near(&mut self, now: Instant) -> Instant {
        let ns = now.as_nanos();
        match self.u8() % 16 {
            0 => Instant::from_nanos(self.u64()),
            1 => Instant::from_nanos(ns.saturating_add(self.u32() as u64 % 1_000_000)),
            2..=4 => Instant::from_nanos(ns.saturating_add(self.u32() as u64 % 10_000)),
            _ => Instant::from_nanos(ns.saturating_sub(self.u32() as u64 % 1_000_000)),
        }
    }
    /// A wire timestamp near `now`, or any 48-bit value.
    pub fn wire_time(&mut self, now: Instant) -> Timestamp48 {
        match self.u8() % 8 {
            0 => Timestamp48::new(self.u64()),
            _ => self.time_near(now).to_wire(),
        }
    }
}

/// Who a frame may come from and go to, and the link ids its sender may stamp.
#[derive(Clone, Copy, Debug)]
pub struct Peers {
    pub processes: u32,
    pub links: u16,
}

/// A frame for a node that receives at `now`: well formed (3 in 4), well formed then damaged
/// at a header field, or raw bytes.
pub fn frame(d: &mut Draw, now: Instant, peers: Peers) -> Vec<u8> {
    match d.u8() % 8 {
        0 => d.bytes(HEADER_LEN + 32),
        1 => {
            let mut f = well_formed(d, now, peers);
            damage(d, &mut f);
            f
        }
        _ => well_formed(d, now, peers),
    }
}

/// A frame as a hostile network delivers it: mostly a well-formed `message` (fields drawn so
/// that they often name real keys, switches, processes), sometimes one damaged, sometimes raw
/// bytes.
pub fn hostile(d: &mut Draw, message: fn(&mut Draw) -> Vec<u8>) -> Vec<u8> {
    match d.u8() % 8 {
        0 => d.bytes(80),
        1 => {
            let mut f = message(d);
            damage(d, &mut f);
            f
        }
        _ => message(d),
    }
}

/// Overwrites a byte or two at a header field (or anywhere), or cuts the frame short.
pub fn damage(d: &mut Draw, f: &mut Vec<u8>) {
    if f.is_empty() {
        return;
    }
    match d.u8() % 4 {
        0 => f.truncate(d.below(f.len())),
        1 => {
            let at = d.below(f.len());
            f[at] = d.u8();
        }
        _ => {
            let at = HEADER_FIELD_OFFSETS[d.below(HEADER_FIELD_OFFSETS.len())];
            for (i, b) in [d.u8(), d.u8()].into_iter().enumerate() {
                if let Some(x) = f.get_mut(at + i) {
                    *x = b;
                }
            }
        }
    }
}

/// A frame that `Repr::parse` takes: every field drawn, the flags and payload kept consistent.
pub fn well_formed(d: &mut Draw, now: Instant, peers: Peers) -> Vec<u8> {
    let opcode = [
        Opcode::Data,
        Opcode::Beacon,
        Opcode::Nak,
        Opcode::Prepare,
        Opcode::Ack,
    ][d.below(5)];
    let frag_count = match d.u8() % 8 {
        0 => d.u16().max(1),
        1..=3 => 1 + d.below(4) as u16,
        _ => 1,
    };
    let frag_index = d.below(frag_count as usize) as u16;
    let prepare = opcode == Opcode::Prepare;
    let recall = prepare && frag_count == 1 && d.u8() % 8 == 0;
    let ack = prepare && (recall || d.bool());
    let sack = ack && d.bool();
    let barrier = d.wire_time(now);
    let mut payload = match opcode {
        Opcode::Beacon | Opcode::Nak => Vec::new(),
        Opcode::Ack => {
            let mut p = [0u8; ACK_PAYLOAD_LEN];
            ack_payload(d).emit(&mut p);
            p.to_vec()
        }
        Opcode::Data | Opcode::Prepare => {
            if recall {
                Vec::new()
            } else {
                d.bytes(64)
            }
        }
    };
    if ack {
        let mut piggy = vec![0u8; ack::piggyback_len(sack)];
        let mut a = ack_payload(d);
        if sack {
            a.sack = a.sack.max(1);
        } else {
            a.sack = 0;
        }
        let cumulative = d.number(64) as u32;
        ack::emit_piggyback(cumulative, &a, &mut piggy);
        piggy.extend_from_slice(&payload);
        payload = piggy;
    }
    let repr = Repr {
        opcode,
        end_of_message: frag_index + 1 == frag_count,
        ecn: d.u8() % 8 == 0,
        ack,
        sack,
        recall,
        msg_ts: if opcode == Opcode::Beacon {
            barrier
        } else {
            d.wire_time(now)
        },
        barrier,
        commit_barrier: d.wire_time(now),
        psn: d.number(64) as u32,
        src: d.number(peers.processes as u64 + 1) as u32,
        dst: d.number(peers.processes as u64 + 1) as u32,
        msg_id: d.number(16),
        frag_index,
        frag_count,
        link_id: d.number(peers.links as u64 + 1) as u16,
        payload_len: payload.len() as u16,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut p = Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(&payload);
    out
}

fn ack_payload(d: &mut Draw) -> AckPayload {
    AckPayload {
        sack: if d.bool() { 0 } else { d.u64() },
        window_packets: d.number(1024) as u32,
        received: d.number(64) as u16,
        ce_marked: d.number(64) as u16,
    }
}
