//! Where the reorder buffer keeps complete messages while they wait for the barrier: slots
//! reused, never reallocated, so that the buffer's queues move only 16-byte keys.
//!
//! A slot's fields are split by how they are read. A message waits about one pass of the
//! runtime over every node, long enough to leave the cache, and is then read once. Its id and
//! length sit in a dense array (24 bytes, under three to a cache line), and a payload of up to
//! 64 bytes fills exactly one cache-line-aligned line of its own: delivery misses on two lines
//! (three for the quarter of ids that straddle two), and storing the next message into a slot
//! freed by a delivery writes lines that the delivery has just read. (One 112-byte record per
//! slot, payload after the fields, straddled two or three lines on most stores of a 64-byte
//! message.)

/// Payloads up to this long are kept in their slot's line; longer ones in a buffer of their own.
pub const INLINE_BYTES: usize = 64;

#[derive(Clone, Copy, Debug, Default)]
pub struct Meta {
    pub msg_id: u64,
    /// Reliable: the PSN of its first packet (its packets have consecutive PSNs).
    pub first_psn: u32,
    pub len: u32,
    /// Packets the message came in (the reliable receiver's window counts packets).
    pub fragments: u16,
}

impl Meta {
    fn is_inline(&self) -> bool {
        self.len as usize <= INLINE_BYTES
    }
}

#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Line([u8; INLINE_BYTES]);

#[derive(Debug, Default)]
pub struct Slab {
    meta: Vec<Meta>,
    lines: Vec<Line>,
    /// Payloads longer than [`INLINE_BYTES`], by slot (buffers kept for reuse, unless
    /// [`Slab::take_payload`] hands them out).
    spill: Vec<Vec<u8>>,
    free: Vec<u32>,
}

impl Slab {
    /// Takes a free slot for a message of `meta.len` bytes and copies its `parts` in, in order
    /// (part by part: a byte iterator over a 100 KB message's fragments cost ~1 ms).
    pub fn store<'a>(&mut self, meta: Meta, parts: impl Iterator<Item = &'a [u8]>) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.meta.push(Meta::default());
                self.lines.push(Line([0; INLINE_BYTES]));
                self.spill.push(Vec::new());
                (self.meta.len() - 1) as u32
            }
        };
        let i = slot as usize;
        self.meta[i] = meta;
        if meta.is_inline() {
            let line = &mut self.lines[i].0;
            let mut at = 0;
            for part in parts {
                line[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        } else {
            let spill = &mut self.spill[i];
            spill.clear();
            spill.reserve(meta.len as usize);
            for part in parts {
                spill.extend_from_slice(part);
            }
        }
        slot
    }

    pub fn meta(&self, slot: u32) -> &Meta {
        &self.meta[slot as usize]
    }

    pub fn payload(&self, slot: u32) -> &[u8] {
        let m = &self.meta[slot as usize];
        if m.is_inline() {
            &self.lines[slot as usize].0[..m.len as usize]
        } else {
            &self.spill[slot as usize]
        }
    }

    /// The payload, owned (what was inline is copied out); the slot stays taken.
    pub fn take_payload(&mut self, slot: u32) -> Vec<u8> {
        let m = &self.meta[slot as usize];
        if m.is_inline() {
            self.lines[slot as usize].0[..m.len as usize].to_vec()
        } else {
            std::mem::take(&mut self.spill[slot as usize])
        }
    }

    pub fn free(&mut self, slot: u32) {
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_payloads_round_trip_and_slots_are_reused() {
        let mut s = Slab::default();
        let meta = |len: usize| Meta {
            msg_id: len as u64,
            len: len as u32,
            fragments: 1,
            ..Meta::default()
        };
        let short = s.store(meta(5), [&b"ab"[..], &b"cde"[..]].into_iter());
        let long_payload = vec![7u8; INLINE_BYTES + 1];
        let long = s.store(meta(long_payload.len()), std::iter::once(&long_payload[..]));
        let full = s.store(meta(INLINE_BYTES), std::iter::once(&[9u8; INLINE_BYTES][..]));
        assert_eq!(s.payload(short), b"abcde");
        assert_eq!(s.payload(long), &long_payload[..]);
        assert_eq!(s.payload(full), &[9u8; INLINE_BYTES][..]);
        assert_eq!(s.meta(long).msg_id, INLINE_BYTES as u64 + 1);
        assert_eq!(s.take_payload(long), long_payload);
        s.free(long);
        let again = s.store(meta(3), std::iter::once(&b"xyz"[..]));
        assert_eq!(again, long, "the freed slot is taken first");
        assert_eq!(s.payload(again), b"xyz");
        assert_eq!(std::mem::size_of::<Meta>(), 24);
    }
}
