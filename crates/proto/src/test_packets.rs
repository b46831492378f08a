//! Packet builders shared by the unit tests of the switch and the endpoint.

use onepipe_wire::Timestamp48;
use onepipe_wire::packet::{Opcode, Packet, Repr};

/// A packet with the given fields; `frag` is (index, count), end-of-message set on the last.
#[allow(clippy::too_many_arguments)]
pub fn packet(
    opcode: Opcode,
    src: u32,
    dst: u32,
    msg_id: u64,
    ts: u64,
    barrier: u64,
    frag: (u16, u16),
    payload: &[u8],
) -> Vec<u8> {
    let repr = Repr {
        opcode,
        end_of_message: frag.0 + 1 == frag.1,
        ecn: false,
        ack: false,
        sack: false,
        recall: false,
        msg_ts: Timestamp48::new(ts),
        barrier: Timestamp48::new(barrier),
        commit_barrier: Timestamp48::new(barrier),
        psn: 0,
        src,
        dst,
        msg_id,
        frag_index: frag.0,
        frag_count: frag.1,
        link_id: 0,
        payload_len: payload.len() as u16,
    };
    let mut buf = repr.to_vec();
    Packet::new_unchecked(&mut buf[..])
        .payload_mut()
        .copy_from_slice(payload);
    buf
}

/// A beacon carrying barrier `b`.
pub fn beacon(b: u64) -> Vec<u8> {
    Repr::beacon(Timestamp48::new(b), Timestamp48::new(b), 0).to_vec()
}
