//! 1Pipe frames (crates/wire): `Packet::new_checked`, `Repr::parse`, the piggybacked ACK and
//! the ACK payload, then parse -> emit -> parse gives the same header and bytes back.

use crate::frames::{self, Draw, Peers};
use onepipe_wire::ack::{self, AckPayload};
use onepipe_wire::packet::{Opcode, Packet, Repr};
use onepipe_wire::protocol::protocol_of;
use onepipe_wire::{ACK_PAYLOAD_LEN, Instant};

pub fn run(data: &[u8]) {
    check(data);
    // The same bytes as a recipe for a frame that is mostly well formed: reaches the checks
    // behind the header's first fields more often than raw bytes do.
    let mut d = Draw::new(data);
    let now = Instant::from_nanos(d.u64());
    let f = frames::frame(
        &mut d,
        now,
        Peers {
            processes: 8,
            links: 8,
        },
    );
    check(&f);
}

/// Everything a receiver reads of a frame, and the round trip of what parses.
fn check(bytes: &[u8]) {
    let _ = protocol_of(bytes);
    let Ok(packet) = Packet::new_checked(bytes) else {
        return;
    };
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let payload = packet.payload();
    assert_eq!(payload.len(), repr.payload_len as usize);
    if repr.ack {
        let (_, _, rest) =
            ack::split_piggyback(payload, repr.sack).expect("parse checked the piggyback's room");
        assert_eq!(rest.len(), payload.len() - ack::piggyback_len(repr.sack));
    }
    if repr.opcode == Opcode::Ack {
        let a = AckPayload::parse(payload).expect("parse checked the ACK payload's length");
        let mut again = [0u8; ACK_PAYLOAD_LEN];
        a.emit(&mut again);
        assert_eq!(&again[..], payload);
    }
    let mut out = vec![0u8; repr.buffer_len()];
    let mut p = Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(payload);
    assert_eq!(
        &out[..],
        &bytes[..repr.buffer_len()],
        "emit(parse(bytes)) differs"
    );
    let again = Repr::parse(&Packet::new_checked(&out[..]).expect("emitted frame checks"))
        .expect("emitted frame parses");
    assert_eq!(again, repr);
}
