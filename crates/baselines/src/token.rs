//! Token passing (paper 7.2, "token", its reference 86): a token circulates among the processes
//! in a ring 0, 1, ..., N-1, 0, ... carrying the next global sequence number; only its holder
//! sends.
//!
//! Packet flow: broadcasts wait in the sender until it holds the token; the holder numbers up to
//! `token_batch` of them with consecutive numbers, sends each as a `Data` copy to every other
//! process (its own copy goes straight into its reorder buffer), then sends the `Token` to the
//! next process, behind those copies on its link. A holder with nothing to send passes the token
//! on at once. Every process delivers in sequence order.
//!
//! What bounds throughput: one sender at a time, so the system sends at most one process's
//! link rate, whatever N is, and a message waits on average half a token round (N hops).
//!
//! Details that keep runs finite and logs clean:
//! - Process 0 holds the token at the start and keeps it until `send_from` (nothing to send
//!   before; passing it around idle would only spin).
//! - Once sending has stopped, a token that has passed N holders in a row idle (all after
//!   `send_until`) parks where it is: no process has anything left to send.
//! - The token counts its hops; a copy with a count this process has already seen is a
//!   duplicate (a duplicating link) and is ignored, or the number would be given twice.

use crate::frame::{FrameKind, Header};
use crate::host::Core;
use crate::host_seq::FIRST_SEQ;
use crate::out::{Dest, Item};
use crate::reorder::{Pending, SeqReorder};
use crate::workload::Offer;
use onepipe_wire::Instant;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held {
    next_seq: u64,
    hops: u64,
    /// Holders in a row that passed it idle after sending stopped, this one excluded.
    idle_run: u32,
}

#[derive(Debug)]
pub struct Token {
    held: Option<Held>,
    parked: bool,
    /// `act` has run at or after `send_from`: the holder no longer waits for time.
    started: bool,
    /// Broadcasts waiting for the token (at most a window of them).
    waiting: VecDeque<Offer>,
    batch: usize,
    reorder: SeqReorder,
    /// Highest hop count of a token accepted here.
    hops_seen: Option<u64>,
    send_from: Instant,
    send_until: Instant,
}

impl Token {
    pub fn new(core: &Core, batch: usize, reorder_capacity: usize) -> Token {
        let sched = *core.workload.schedule();
        Token {
            held: (core.me == 0).then_some(Held {
                next_seq: FIRST_SEQ,
                hops: 0,
                idle_run: 0,
            }),
            parked: false,
            started: false,
            waiting: VecDeque::new(),
            batch: batch.max(1),
            reorder: SeqReorder::new(FIRST_SEQ, reorder_capacity),
            hops_seen: None,
            send_from: sched.send_from,
            send_until: sched.send_until,
        }
    }

    pub fn holds_token(&self) -> bool {
        self.held.is_some()
    }

    /// Always takes the broadcast: at most a window of them wait.
    pub fn on_offer(&mut self, offer: Offer) -> bool {
        self.waiting.push_back(offer);
        true
    }

    /// Returns whether the frame belongs to this protocol.
    pub fn on_frame(&mut self, core: &mut Core, now: Instant, h: &Header) -> bool {
        match h.kind {
            FrameKind::Data => {
                let m = Pending {
                    origin: h.origin,
                    msg_id: h.msg_id,
                    sent_ns: h.sent_ns,
                };
                core.accept_numbered(now, &mut self.reorder, h.seq, m);
            }
            FrameKind::Token => {
                if self.held.is_some() || self.hops_seen.is_some_and(|s| h.msg_id <= s) {
                    core.stats.duplicates += 1;
                    return true;
                }
                self.hops_seen = Some(h.msg_id);
                self.held = Some(Held {
                    next_seq: h.seq,
                    hops: h.msg_id,
                    idle_run: h.origin,
                });
                // The holder acts when next asked for frames or woken (`act`).
            }
            _ => return false,
        }
        true
    }

    /// Sends a batch and passes the token on, if this process holds it.
    pub fn act(&mut self, core: &mut Core, now: Instant) {
        let Some(mut held) = self.held else {
            return;
        };
        if self.parked || (self.waiting.is_empty() && now < self.send_from) {
            return;
        }
        self.started |= now >= self.send_from;
        // The output is empty when a token arrives (the last batch left ahead of the token), so
        // a batch and the token always fit; the check only matters for a forged token.
        let idle = self.waiting.is_empty();
        let k = self.batch.min(self.waiting.len());
        if core.out.room() < k + 1 {
            return; // keep the token until the whole batch and the token fit
        }
        for offer in self.waiting.drain(..k) {
            let seq = held.next_seq;
            held.next_seq += 1;
            if offer.record {
                core.record_send(seq, offer.msg_id);
            }
            let copy = core.item(FrameKind::Data, Dest::Others, seq, &offer);
            let pushed = core.out.push(copy);
            debug_assert!(pushed.is_ok(), "room was checked");
            let m = Pending {
                origin: core.me,
                msg_id: offer.msg_id,
                sent_ns: offer.sent.as_nanos(),
            };
            core.accept_numbered(now, &mut self.reorder, seq, m);
        }
        held.idle_run = if idle && now >= self.send_until {
            held.idle_run + 1
        } else {
            0
        };
        if held.idle_run >= core.n {
            self.held = Some(held);
            self.parked = true;
            return;
        }
        let token = Item {
            kind: FrameKind::Token,
            dest: Dest::One((core.me + 1) % core.n),
            origin: held.idle_run,
            seq: held.next_seq,
            msg_id: held.hops + 1,
            sent_ns: now.as_nanos(),
            payload_len: 0,
        };
        let pushed = core.out.push(token);
        debug_assert!(pushed.is_ok(), "room was kept for the token");
        self.held = None;
    }

    /// A holder waits for `send_from` (before it, it keeps the token). Afterwards it acts when
    /// asked for frames, never on a timer that would stay due.
    pub fn wake_at(&self) -> Option<Instant> {
        (self.held.is_some() && !self.parked && !self.started).then_some(self.send_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{Host, Protocol};
    use crate::test_util::{drain, feed};
    use crate::workload::Schedule;
    use onepipe_check::Event;
    use onepipe_fabric::Node;

    fn host(me: u32, n: u32, schedule: Schedule, batch: usize) -> Host {
        // Every message recorded, whenever it was sent.
        let schedule = Schedule {
            record_until: Instant::MAX,
            ..schedule
        };
        let core = Core::new(me, n, 8, schedule, 4, batch + 1, false);
        let p = Token::new(&core, batch, 64);
        Host {
            core,
            protocol: Protocol::Token(p),
        }
    }

    fn token_frame(dst: u32, next_seq: u64, hops: u64) -> Vec<u8> {
        let h = Header {
            kind: FrameKind::Token,
            src: dst.wrapping_sub(1),
            dst,
            origin: 0,
            seq: next_seq,
            msg_id: hops,
            sent_ns: 0,
            payload_len: 0,
        };
        let mut f = vec![0; h.frame_len()];
        h.emit(&mut f);
        f
    }

    fn holds(h: &Host) -> bool {
        matches!(&h.protocol, Protocol::Token(t) if t.holds_token())
    }

    #[test]
    fn idle_holder_passes_the_token_on_at_once() {
        let sched = Schedule::saturated(Instant::ZERO, Instant::ZERO);
        let mut h = host(1, 3, sched, 2);
        assert!(!holds(&h));
        feed(&mut h, 5, token_frame(1, 40, 7));
        assert!(holds(&h));
        let out = drain(&mut h, 5);
        assert_eq!(out.len(), 1);
        let t = out[0];
        assert_eq!(
            (t.kind, t.dst, t.seq, t.msg_id, t.origin),
            (FrameKind::Token, 2, 40, 8, 1)
        );
        assert!(!holds(&h));
        // A duplicate of the token it already had is ignored.
        feed(&mut h, 6, token_frame(1, 40, 7));
        assert!(!holds(&h));
        assert_eq!(h.stats().duplicates, 1);
    }

    #[test]
    fn holder_numbers_a_batch_then_passes_the_token_behind_it() {
        let sched = Schedule::saturated(Instant::ZERO, Instant::from_nanos(1_000));
        let mut h = host(2, 3, sched, 2);
        assert!(drain(&mut h, 10).is_empty(), "no token, no sending");
        feed(&mut h, 20, token_frame(2, 5, 1));
        let out: Vec<(FrameKind, u32, u64)> =
            drain(&mut h, 20).iter().map(|f| (f.kind, f.dst, f.seq)).collect();
        use FrameKind::{Data, Token as T};
        assert_eq!(
            out,
            [(Data, 0, 5), (Data, 1, 5), (Data, 0, 6), (Data, 1, 6), (T, 0, 7)],
            "two of four waiting broadcasts, then the token to process 0"
        );
        let s = h.stats();
        assert_eq!(s.delivered, 0, "own copies wait for numbers 1..4");
        assert!(matches!(
            s.events[0],
            Event::Send {
                ts_ns: 5,
                dst: 0,
                msg_id: 0
            }
        ));
        assert_eq!(s.events.len(), 6);
    }

    #[test]
    fn process_zero_waits_for_send_from_and_the_token_parks_after_an_idle_round() {
        let sched = Schedule::saturated(Instant::from_nanos(100), Instant::from_nanos(200));
        let mut h = host(0, 2, sched, 4);
        assert!(holds(&h));
        assert_eq!(h.poll_timeout(), Some(Instant::from_nanos(100)));
        assert!(drain(&mut h, 50).is_empty());
        h.handle_timeout(Instant::from_nanos(100));
        let out = drain(&mut h, 100);
        assert_eq!(out.iter().filter(|f| f.kind == FrameKind::Data).count(), 4);
        assert_eq!(out.last().unwrap().kind, FrameKind::Token);
        assert_eq!(h.stats().delivered, 4, "own copies numbered 1..4");
        // After send_until, with one idle pass behind it: the four broadcasts offered while
        // the token was away go first, and the idle run starts again.
        let with_idle_run = |mut f: Vec<u8>| {
            f[12..16].copy_from_slice(&1u32.to_be_bytes());
            f
        };
        feed(&mut h, 300, with_idle_run(token_frame(0, 5, 5)));
        let t = *drain(&mut h, 300).last().unwrap();
        assert_eq!((t.kind, t.seq, t.origin), (FrameKind::Token, 9, 0));
        // Back after one more idle pass: a whole idle round, so it parks here.
        feed(&mut h, 400, with_idle_run(token_frame(0, 9, 7)));
        assert!(drain(&mut h, 400).is_empty(), "parked");
        assert!(holds(&h));
        assert_eq!(h.poll_timeout(), None);
    }

    #[test]
    fn a_forged_second_token_waits_for_room_instead_of_overflowing() {
        let sched = Schedule::saturated(Instant::ZERO, Instant::from_nanos(1_000));
        let mut h = host(1, 3, sched, 2);
        let now = Instant::from_nanos(10);
        feed(&mut h, 10, token_frame(1, 1, 1));
        let mut buf = vec![0u8; 256];
        // One frame out: the batch and the token are queued behind it.
        assert!(h.poll_transmit(now, 0, &mut buf).is_some());
        feed(&mut h, 11, token_frame(1, 50, 9));
        assert!(holds(&h), "a second token while the first batch is still leaving");
        let rest = drain(&mut h, 12);
        assert!(rest.iter().any(|f| f.kind == FrameKind::Token && f.seq == 3));
        assert!(rest.iter().any(|f| f.kind == FrameKind::Data && f.seq == 50));
    }
}
