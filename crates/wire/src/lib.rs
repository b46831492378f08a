//! Wire formats and time for onepipe.
//!
//! Two things every other crate agrees on live here: the nanosecond time types ([`Instant`],
//! [`Duration`], 48-bit wire timestamps with wraparound-safe comparison, paper section 6.1) and
//! the packet header ([`packet`]). Nothing in this crate allocates on the packet path, reads a
//! clock or panics on input bytes.

pub mod ack;
pub mod cosy;
pub mod netchain;
pub mod packet;
pub mod paxos;
pub mod protocol;
pub mod time;

pub use ack::{ACK_PAYLOAD_LEN, AckPayload, PIGGYBACK_LEN, PIGGYBACK_MAX_LEN, PIGGYBACK_SACK_LEN};
pub use packet::{HEADER_LEN, Opcode, Packet, ParseError, Repr};
pub use time::{Duration, Instant, Timestamp48};
