//! What the controller's unit tests share: a controller over a wiring (with every process
//! registered, or none), times in milliseconds from a fixed start, and its outputs drained.

use super::graph::Graph;
use super::{Controller, ControllerConfig, Failure, Input, Output, PacketBytes};
use onepipe_fabric::Wiring;
use onepipe_wire::Timestamp48;
use onepipe_wire::packet::{Opcode, Packet, Repr};
use onepipe_wire::{Duration, Instant};

pub(crate) fn unregistered(w: &Wiring, settle: Duration, answer_timeout: Duration) -> Controller {
    Controller::new(
        Graph::new(w),
        ControllerConfig {
            settle,
            answer_timeout,
        },
    )
}

pub(crate) fn registered(w: &Wiring, settle: Duration, answer_timeout: Duration) -> Controller {
    let mut c = unregistered(w, settle, answer_timeout);
    for p in 0..w.process_count() as u32 {
        c.handle_input(t(0), Input::Register { process: p }).unwrap();
    }
    // Each registration is confirmed; the scenarios start after that.
    let confirmed = outputs(&mut c);
    assert_eq!(confirmed.len(), w.process_count(), "{confirmed:?}");
    assert!(confirmed.iter().all(|o| matches!(o, Output::Registered { .. })));
    c
}

/// `ms` milliseconds after the tests' start, one second into the clock.
pub(crate) fn t(ms: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
}

pub(crate) fn outputs(c: &mut Controller) -> Vec<Output> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

pub(crate) fn failure(process: u32, ts: Instant) -> Failure {
    Failure { process, ts }
}

/// A packet of `opcode` from `src` to `dst`, as a sender asks the controller to forward it (a
/// recall carries no payload).
pub(crate) fn packet(opcode: Opcode, src: u32, dst: u32, psn: u32, recall: bool) -> PacketBytes {
    let payload: &[u8] = if opcode == Opcode::Ack { &[0; 16] } else { b"m" };
    let repr = Repr {
        opcode,
        end_of_message: true,
        ecn: false,
        ack: false,
        sack: false,
        recall,
        msg_ts: Timestamp48::new(777),
        barrier: Timestamp48::default(),
        commit_barrier: Timestamp48::default(),
        psn,
        src,
        dst,
        msg_id: 40 + psn as u64,
        frag_index: 0,
        frag_count: 1,
        link_id: 0,
        payload_len: if recall { 0 } else { payload.len() as u16 },
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut p = Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut p);
    if !recall {
        p.payload_mut().copy_from_slice(payload);
    }
    PacketBytes(buf)
}
