//! A switch's virtual links (paper 3.3 and 4): each port's link split into K virtual links, each
//! reserved by at most one message at a time.
//!
//! Per virtual link the paper keeps a reserved bit and the outgoing virtual link it is mapped
//! to. We keep the same, plus what makes a release or a cleanup safe in software: whose
//! reservation it is (sender, message, the receiver's nonce), so that a stray or forged release
//! cannot free another message's link, and when the switch clears it if nobody released it
//! (paper 4: "this virtual link must be unreserved at time delta_cosy").

use onepipe_fabric::PortId;
use onepipe_wire::Instant;

/// The message a reservation is for: its sender, its id, and the receiver's nonce for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub sender: u32,
    pub msg: u32,
    pub nonce: u32,
}

impl Owner {
    pub fn of(repr: &onepipe_wire::cosy::Repr) -> Owner {
        Owner {
            sender: repr.sender,
            msg: repr.msg,
            nonce: repr.nonce,
        }
    }
}

/// Who holds a virtual link, and where its data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub owner: Owner,
    /// The port the rsvp came in by: where the message's data leaves.
    pub out_port: PortId,
    /// Cleared by the switch at this time if not released before.
    pub expires_at: Instant,
}

/// Every port's K virtual links.
#[derive(Clone, Debug)]
pub struct VirtualLinks {
    k: u8,
    /// `ports * k` entries: port p's virtual link v at `p * k + v`.
    links: Vec<Option<Reservation>>,
    /// Per port: reserved virtual links now, and the most ever at once.
    reserved: Vec<u8>,
    peak_reserved: Vec<u8>,
    /// The earliest `expires_at` of any reservation.
    next_expiry: Option<Instant>,
}

impl VirtualLinks {
    pub fn new(ports: usize, k: u8) -> VirtualLinks {
        assert!(k >= 1, "at least one virtual link per link");
        VirtualLinks {
            k,
            links: vec![None; ports * k as usize],
            reserved: vec![0; ports],
            peak_reserved: vec![0; ports],
            next_expiry: None,
        }
    }

    pub fn k(&self) -> u8 {
        self.k
    }

    pub fn ports(&self) -> usize {
        self.reserved.len()
    }

    fn index(&self, port: PortId, vl: u8) -> Option<usize> {
        ((port as usize) < self.ports() && vl < self.k).then(|| port as usize * self.k as usize + vl as usize)
    }

    pub fn get(&self, port: PortId, vl: u8) -> Option<&Reservation> {
        self.index(port, vl).and_then(|i| self.links[i].as_ref())
    }

    /// The unreserved virtual links of `port`.
    pub fn free_on(&self, port: PortId) -> impl Iterator<Item = u8> + '_ {
        let k = self.k;
        (0..k).filter(move |&vl| self.index(port, vl).is_some_and(|i| self.links[i].is_none()))
    }

    pub fn free_count(&self, port: PortId) -> usize {
        match self.reserved.get(port as usize) {
            Some(&r) => (self.k - r) as usize,
            None => 0,
        }
    }

    /// Reserves a free virtual link; false if it is taken or does not exist.
    pub fn reserve(&mut self, port: PortId, vl: u8, r: Reservation) -> bool {
        let Some(i) = self.index(port, vl) else {
            return false;
        };
        if self.links[i].is_some() {
            return false;
        }
        self.links[i] = Some(r);
        let p = port as usize;
        self.reserved[p] += 1;
        self.peak_reserved[p] = self.peak_reserved[p].max(self.reserved[p]);
        self.next_expiry = Some(self.next_expiry.map_or(r.expires_at, |t| t.min(r.expires_at)));
        true
    }

    /// Frees a virtual link held by `owner`; returns the reservation, or `None` (and nothing
    /// changes) if it is free or held by another message.
    pub fn release(&mut self, port: PortId, vl: u8, owner: Owner) -> Option<Reservation> {
        let i = self.index(port, vl)?;
        let r = self.links[i].filter(|r| r.owner == owner)?;
        self.links[i] = None;
        self.reserved[port as usize] -= 1;
        if self.next_expiry == Some(r.expires_at) {
            self.next_expiry = self.earliest_expiry();
        }
        Some(r)
    }

    /// The reservation, if `owner` holds every virtual link of `vls` (a bit each) on `port`
    /// and `vls` names at least one.
    pub fn held_by(&self, port: PortId, vls: u16, owner: Owner) -> Option<Reservation> {
        if vls == 0 || (vls as u32) >> self.k != 0 {
            return None;
        }
        let mut held = None;
        for vl in (0..self.k).filter(|v| vls >> v & 1 == 1) {
            held = Some(*self.get(port, vl).filter(|r| r.owner == owner)?);
        }
        held
    }

    /// Frees the virtual links of `port` that `owner` holds and whose bit is not in `keep`;
    /// returns how many.
    pub fn release_all_but(&mut self, port: PortId, keep: u16, owner: Owner) -> u64 {
        let k = self.k;
        (0..k)
            .filter(|v| keep >> v & 1 == 0)
            .filter(|&v| self.release(port, v, owner).is_some())
            .count() as u64
    }

    pub fn next_expiry(&self) -> Option<Instant> {
        self.next_expiry
    }

    /// Clears every reservation that expired by `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> u64 {
        if self.next_expiry.is_none_or(|t| t > now) {
            return 0;
        }
        let mut cleared = 0;
        for (i, slot) in self.links.iter_mut().enumerate() {
            if slot.is_some_and(|r| r.expires_at <= now) {
                *slot = None;
                self.reserved[i / self.k as usize] -= 1;
                cleared += 1;
            }
        }
        self.next_expiry = self.earliest_expiry();
        cleared
    }

    fn earliest_expiry(&self) -> Option<Instant> {
        self.links.iter().flatten().map(|r| r.expires_at).min()
    }

    /// Reservations now, over every port.
    pub fn reserved_total(&self) -> usize {
        self.reserved.iter().map(|&r| r as usize).sum()
    }

    /// Per port, the most virtual links ever reserved at once.
    pub fn peak_reserved(&self) -> &[u8] {
        &self.peak_reserved
    }

    /// The table agrees with its counts, no port has more than K reservations, and the cached
    /// earliest expiry is the earliest.
    pub fn check(&self) {
        for (p, &count) in self.reserved.iter().enumerate() {
            let k = self.k as usize;
            let held = self.links[p * k..(p + 1) * k].iter().flatten().count();
            assert_eq!(held, count as usize, "port {p}: count {count}, table {held}");
            assert!(count <= self.k && self.peak_reserved[p] <= self.k);
        }
        assert_eq!(self.next_expiry, self.earliest_expiry());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(msg: u32, nonce: u32) -> Owner {
        Owner {
            sender: 1,
            msg,
            nonce,
        }
    }

    fn res(msg: u32, at_ns: u64) -> Reservation {
        Reservation {
            owner: owner(msg, 7),
            out_port: 0,
            expires_at: Instant::from_nanos(at_ns),
        }
    }

    #[test]
    fn a_virtual_link_is_held_by_one_message_at_a_time() {
        let mut v = VirtualLinks::new(2, 2);
        assert!(v.reserve(1, 0, res(1, 100)));
        assert!(!v.reserve(1, 0, res(2, 100)), "taken");
        assert!(!v.reserve(1, 2, res(2, 100)), "no such virtual link");
        assert!(!v.reserve(5, 0, res(2, 100)), "no such port");
        assert_eq!(v.free_on(1).collect::<Vec<_>>(), vec![1]);
        assert_eq!(v.free_count(1), 1);
        v.check();
    }

    #[test]
    fn only_its_holder_releases_a_link() {
        let mut v = VirtualLinks::new(1, 1);
        v.reserve(0, 0, res(1, 100));
        assert_eq!(v.release(0, 0, owner(2, 7)), None, "another message");
        assert_eq!(v.release(0, 0, owner(1, 8)), None, "another nonce");
        assert!(v.release(0, 0, owner(1, 7)).is_some());
        assert_eq!(v.release(0, 0, owner(1, 7)), None, "released twice");
        assert_eq!(v.reserved_total(), 0);
        assert_eq!(v.peak_reserved(), &[1]);
        v.check();
    }

    #[test]
    fn a_message_may_hold_several_links_and_keep_some() {
        let mut v = VirtualLinks::new(1, 4);
        for vl in [0, 2, 3] {
            v.reserve(0, vl, res(1, 100));
        }
        v.reserve(0, 1, res(2, 100));
        assert!(v.held_by(0, 0b1101, owner(1, 7)).is_some());
        assert!(v.held_by(0, 0b0011, owner(1, 7)).is_none(), "link 1 is another's");
        assert!(v.held_by(0, 0, owner(1, 7)).is_none(), "no link named");
        assert!(v.held_by(0, 0b1_0000, owner(1, 7)).is_none(), "no link 4");
        assert_eq!(v.release_all_but(0, 0b0001, owner(1, 7)), 2, "keeps link 0");
        assert_eq!(v.reserved_total(), 2);
        v.check();
    }

    #[test]
    fn unreleased_links_expire_at_their_time() {
        let mut v = VirtualLinks::new(1, 3);
        v.reserve(0, 0, res(1, 100));
        v.reserve(0, 1, res(2, 50));
        assert_eq!(v.next_expiry(), Some(Instant::from_nanos(50)));
        assert_eq!(v.expire(Instant::from_nanos(49)), 0);
        assert_eq!(v.expire(Instant::from_nanos(50)), 1);
        assert_eq!(v.next_expiry(), Some(Instant::from_nanos(100)));
        v.release(0, 0, owner(1, 7));
        assert_eq!(v.next_expiry(), None);
        v.check();
    }
}
