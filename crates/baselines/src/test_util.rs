//! Helpers for the host state machines' unit tests: hand a host a frame, take what it sends.

use crate::frame::Header;
use crate::host::Host;
use onepipe_fabric::Node;
use onepipe_wire::Instant;

/// Delivers frame `f` to `h` on port 0 at `now` ns.
pub fn feed(h: &mut Host, now: u64, mut f: Vec<u8>) {
    let now = Instant::from_nanos(now);
    let route = h.classify(now, 0, &f);
    h.handle_frame(now, 0, &mut f, route);
}

/// Everything `h` transmits at `now` ns, parsed.
pub fn drain(h: &mut Host, now: u64) -> Vec<Header> {
    let mut buf = vec![0u8; 256];
    std::iter::from_fn(|| {
        let len = h.poll_transmit(Instant::from_nanos(now), 0, &mut buf)?;
        Some(Header::parse(&buf[..len]).unwrap())
    })
    .collect()
}
