//! Host sequencer (paper 7.2, "centralized sequencer at host NIC"): one designated process
//! numbers every broadcast.
//!
//! Packet flow: a sender sends its broadcast once, as a `Request`, to the sequencer process;
//! the sequencer gives it the next global sequence number and sends one `Data` copy to every
//! other process (the sender included); every process delivers strictly in sequence order.
//! The sequencer is also an ordinary process: its own broadcasts are numbered on the spot with
//! no network hop. It delivers its own copy of a message when the last copy to the others has
//! left, as if it were its own destination at the end of the fan-out: this keeps its window
//! closed like everybody's (a copy delivered at numbering time would free the window at once
//! and let the sequencer flood its own output).
//!
//! What bounds throughput: every message crosses the sequencer's one link N-1 times (and its
//! CPU, where the runtime charges per frame), whatever N is, and takes a detour through it.
//!
//! The sequencer's output holds each numbered message once, expanded into copies as its port
//! takes them. It holds at most about N x window messages (a sender's next request waits for
//! its own copy, and copies leave in number order); a request beyond the configured capacity
//! is dropped and counted (`sequencer_overflow`).

use crate::frame::{FrameKind, Header};
use crate::host::Core;
use crate::out::{Dest, Item};
use crate::reorder::{Pending, SeqReorder};
use crate::workload::Offer;
use onepipe_wire::Instant;

/// The first global sequence number.
pub const FIRST_SEQ: u64 = 1;

#[derive(Debug)]
pub struct HostSeq {
    sequencer: u32,
    reorder: SeqReorder,
    /// Sequencer only: the next number to give.
    next_seq: u64,
    /// Sequencer only: highest message id numbered per origin, to refuse duplicated requests
    /// (requests of one sender arrive in order over its one path).
    last_stamped: Vec<Option<u64>>,
}

impl HostSeq {
    pub fn new(core: &Core, sequencer: u32, reorder_capacity: usize) -> HostSeq {
        HostSeq {
            sequencer,
            reorder: SeqReorder::new(FIRST_SEQ, reorder_capacity),
            next_seq: FIRST_SEQ,
            last_stamped: if core.me == sequencer {
                vec![None; core.n as usize]
            } else {
                Vec::new()
            },
        }
    }

    /// Returns whether the broadcast was taken.
    pub fn on_offer(&mut self, core: &mut Core, offer: Offer) -> bool {
        if core.me == self.sequencer {
            let m = Pending {
                origin: core.me,
                msg_id: offer.msg_id,
                sent_ns: offer.sent.as_nanos(),
            };
            return self.stamp(core, m, core.payload_len);
        }
        let request = core.item(FrameKind::Request, Dest::One(self.sequencer), 0, &offer);
        if core.out.push(request).is_err() {
            // Cannot happen while the queue holds a window of requests; counted if it does.
            core.stats.sequencer_overflow += 1;
            core.lost_own(offer.msg_id);
            return false;
        }
        true
    }

    /// Sequencer: the last copy of a numbered message left; take its own copy.
    pub fn on_copies_sent(&mut self, core: &mut Core, now: Instant, item: &Item) {
        if item.kind == FrameKind::Data && core.me == self.sequencer {
            let m = Pending {
                origin: item.origin,
                msg_id: item.msg_id,
                sent_ns: item.sent_ns,
            };
            core.accept_numbered(now, &mut self.reorder, item.seq, m);
        }
    }

    /// Returns whether the frame belongs to this protocol.
    pub fn on_frame(&mut self, core: &mut Core, now: Instant, h: &Header) -> bool {
        let m = Pending {
            origin: h.origin,
            msg_id: h.msg_id,
            sent_ns: h.sent_ns,
        };
        match h.kind {
            FrameKind::Request if core.me == self.sequencer && h.origin < core.n => {
                self.stamp(core, m, h.payload_len);
                true
            }
            FrameKind::Data => {
                core.accept_numbered(now, &mut self.reorder, h.seq, m);
                true
            }
            _ => false,
        }
    }

    /// Numbers a message and queues its copies; returns whether it was numbered.
    fn stamp(&mut self, core: &mut Core, m: Pending, payload_len: u16) -> bool {
        let last = &mut self.last_stamped[m.origin as usize];
        if last.is_some_and(|l| m.msg_id <= l) {
            core.stats.duplicates += 1;
            return false;
        }
        let item = Item {
            kind: FrameKind::Data,
            dest: Dest::Others,
            origin: m.origin,
            seq: self.next_seq,
            msg_id: m.msg_id,
            sent_ns: m.sent_ns,
            payload_len,
        };
        if core.out.push(item).is_err() {
            core.stats.sequencer_overflow += 1;
            if m.origin == core.me {
                core.lost_own(m.msg_id);
            }
            return false;
        }
        *last = Some(m.msg_id);
        self.next_seq += 1;
        core.stats.stamped += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Host, Protocol};
    use crate::test_util::{drain, feed};
    use crate::workload::Schedule;
    use onepipe_check::Event;

    const N: u32 = 3;

    fn host(me: u32, sequencer: u32, schedule: Schedule) -> Host {
        // Every message recorded, whenever it was sent.
        let schedule = Schedule {
            record_until: Instant::MAX,
            ..schedule
        };
        let core = Core::new(me, N, 8, schedule, 4, 64, true);
        let p = HostSeq::new(&core, sequencer, 16);
        Host {
            core,
            protocol: Protocol::HostSeq(p),
        }
    }

    fn idle() -> Schedule {
        Schedule::saturated(Instant::ZERO, Instant::ZERO)
    }

    fn frame(h: Header) -> Vec<u8> {
        let mut buf = vec![0u8; h.frame_len()];
        h.emit(&mut buf);
        buf
    }

    fn data(dst: u32, seq: u64, origin: u32, msg_id: u64) -> Vec<u8> {
        frame(Header {
            kind: FrameKind::Data,
            src: 0,
            dst,
            origin,
            seq,
            msg_id,
            sent_ns: 10,
            payload_len: 8,
        })
    }

    #[test]
    fn receiver_delivers_in_sequence_order_despite_reordering() {
        let mut h = host(1, 0, Schedule::saturated(Instant::ZERO, Instant::from_nanos(1)));
        feed(&mut h, 100, data(1, 3, 2, 30));
        feed(&mut h, 100, data(1, 2, 0, 20));
        assert_eq!(h.stats().delivered, 0, "number 1 is missing");
        feed(&mut h, 100, data(1, 1, 2, 10));
        feed(&mut h, 100, data(1, 2, 0, 20)); // a duplicated copy
        let s = h.stats();
        assert_eq!((s.delivered, s.duplicates, s.reorder_peak), (3, 1, 3));
        let delivered: Vec<(u64, u32)> = s
            .events
            .iter()
            .map(|e| match *e {
                Event::Deliver { ts_ns, src, .. } => (ts_ns, src),
                Event::Send { .. } => panic!("no sends"),
            })
            .collect();
        assert_eq!(delivered, [(1, 2), (2, 0), (3, 2)]);
    }

    #[test]
    fn sender_requests_then_logs_its_send_when_its_copy_comes_back() {
        let mut h = host(
            1,
            0,
            Schedule::saturated(Instant::ZERO, Instant::from_nanos(1_000)),
        );
        let out = drain(&mut h, 0);
        assert_eq!(out.len(), 4, "a window of requests");
        assert!(
            out.iter()
                .all(|r| r.kind == FrameKind::Request && r.dst == 0 && r.origin == 1)
        );
        assert_eq!(h.stats().unconfirmed.len(), 4);
        feed(&mut h, 50, data(1, 1, 1, 0));
        let s = h.stats();
        assert_eq!(s.unconfirmed.len(), 3);
        assert_eq!(s.events.len(), N as usize + 1);
        assert!(matches!(
            s.events[0],
            Event::Send {
                ts_ns: 1,
                dst: 0,
                msg_id: 0
            }
        ));
        assert!(matches!(
            s.events[3],
            Event::Deliver {
                ts_ns: 1,
                src: 1,
                msg_id: 0
            }
        ));
        assert_eq!(drain(&mut h, 60).len(), 1, "one window slot freed");
    }

    #[test]
    fn sequencer_numbers_requests_and_copies_them_to_every_other_process() {
        let mut s = host(0, 0, idle());
        let request = |msg_id| {
            frame(Header {
                kind: FrameKind::Request,
                src: 2,
                dst: 0,
                origin: 2,
                seq: 0,
                msg_id,
                sent_ns: 5,
                payload_len: 8,
            })
        };
        feed(&mut s, 10, request(0));
        feed(&mut s, 11, request(1));
        feed(&mut s, 12, request(1)); // duplicated request: not numbered twice
        assert_eq!(
            s.stats().delivered,
            0,
            "the sequencer's copy waits for the fan-out"
        );
        let out = drain(&mut s, 20);
        let copies: Vec<(u32, u64, u64)> = out.iter().map(|h| (h.dst, h.seq, h.msg_id)).collect();
        assert_eq!(copies, [(1, 1, 0), (2, 1, 0), (1, 2, 1), (2, 2, 1)]);
        assert!(out.iter().all(|h| h.kind == FrameKind::Data && h.origin == 2));
        let st = s.stats();
        assert_eq!(
            (st.stamped, st.delivered, st.duplicates),
            (2, 2, 1),
            "own copies after the fan-out"
        );
    }

    #[test]
    fn malformed_and_misdirected_frames_are_counted() {
        let mut h = host(1, 0, idle());
        feed(&mut h, 1, vec![0xB1, 1, 2]);
        feed(&mut h, 1, data(2, 1, 0, 0));
        feed(&mut h, 1, {
            let mut f = data(1, 1, 0, 0);
            f[1] = FrameKind::Token as u8;
            f.truncate(crate::frame::HEADER_LEN);
            f[2..4].fill(0);
            f
        });
        let s = h.stats();
        assert_eq!((s.malformed, s.misdirected, s.delivered), (1, 2, 0));
    }
}
