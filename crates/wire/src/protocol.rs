//! Which protocol a frame belongs to: the high nibble of its first byte (docs/wire.md,
//! "Protocols"). A software switch hands each frame to the program of its protocol
//! (`onepipe_fabric::pipeline`), so that several in-network systems share one fabric.
//!
//! 1Pipe's header (crate::packet) puts its version there; the nibble values are assigned so
//! that 1Pipe's versions and the other systems' protocols never collide.

/// A protocol number, 0 to 15.
pub type Protocol = u8;

/// 1Pipe, header version 2 ([`crate::packet::VERSION`]). Values 1 (1Pipe's retired version 1)
/// and 3 to 7 (its future versions) are reserved for it too.
pub const ONEPIPE: Protocol = crate::packet::VERSION;
/// NetChain's chain-replicated key-value store in the switches (reserved).
pub const NETCHAIN: Protocol = 8;
/// In-network Paxos: coordinator and acceptors in the switches (reserved).
pub const PAXOS: Protocol = 9;
/// cosy's reservations on virtual links (reserved).
pub const COSY: Protocol = 10;
/// For tests and experiments; never assigned to a system.
pub const EXPERIMENTAL: Protocol = 15;
/// Protocol numbers fit in a nibble.
pub const PROTOCOLS: usize = 16;

// 1Pipe keeps 1 to 7 for its header versions.
const _: () = assert!(ONEPIPE >= 1 && ONEPIPE < NETCHAIN);

/// The protocol of `frame`; `None` for an empty frame. Never panics.
pub fn protocol_of(frame: &[u8]) -> Option<Protocol> {
    frame.first().map(|b| b >> 4)
}

/// The first byte of a frame of `protocol` whose low nibble (the protocol's own: an opcode) is
/// `low`.
pub fn first_byte(protocol: Protocol, low: u8) -> u8 {
    debug_assert!((protocol as usize) < PROTOCOLS && low < 16);
    (protocol << 4) | (low & 0x0f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Packet, Repr};
    use crate::time::Timestamp48;

    /// A 1Pipe frame names protocol ONEPIPE, whatever its opcode.
    #[test]
    fn a_onepipe_frame_is_of_protocol_onepipe() {
        let t = Timestamp48::new(7);
        let beacon = Repr::beacon(t, t, 0).to_vec();
        assert_eq!(protocol_of(&beacon), Some(ONEPIPE));
        assert_eq!(Packet::new_checked(&beacon[..]).unwrap().version(), ONEPIPE);
        assert_eq!(protocol_of(&[]), None);
        assert_eq!(protocol_of(&[first_byte(EXPERIMENTAL, 3)]), Some(EXPERIMENTAL));
    }

    #[test]
    fn protocol_numbers_are_distinct_and_fit_a_nibble() {
        let all = [ONEPIPE, NETCHAIN, PAXOS, COSY, EXPERIMENTAL];
        for (i, a) in all.iter().enumerate() {
            assert!((*a as usize) < PROTOCOLS);
            assert!(all[i + 1..].iter().all(|b| b != a));
        }
    }
}
