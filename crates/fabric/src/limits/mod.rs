//! The limits of a topology and of its wiring (docs/topology.md), checked before anything is
//! allocated for them: a file or a preset naming more is refused with
//! [`TopologyError::TooLarge`] (or a [`crate::WiringError`]), never an allocation that aborts.

use crate::topology::TopologyError;

// Each is far above what one machine simulates (fat-tree:64 has 5,120 switches, 65,536
// hosts, 131,072 links) and keeps a topology's tables within some hundreds of MB.

/// Switches of one topology.
pub const SWITCHES_MAX: usize = 1 << 16;
/// Hosts of one topology.
pub const HOSTS_MAX: usize = 1 << 20;
/// Links between switches of one topology.
pub const LINKS_MAX: usize = 1 << 20;
/// One-way delay of a link, ns (10 s: more is a typo, and it keeps times far from overflow).
pub const DELAY_NS_MAX: u64 = 10_000_000_000;
/// Bytes of a switch's or host's name.
pub const NAME_BYTES_MAX: usize = 256;
/// Bytes of a topology file.
pub const FILE_BYTES_MAX: u64 = 64 << 20;

/// Processes on one host: each takes a port of its ToR and, over udp, a port of the host.
pub const PROCESSES_PER_HOST_MAX: u32 = 1024;
/// Processes of one wiring (hosts times processes per host).
pub const PROCESSES_MAX: usize = 1 << 20;

/// Refuses `count` of `what` above `max`; counts are products of preset arguments, so they
/// are computed saturating in 128 bits.
pub(crate) fn limit(what: &str, count: u128, max: u64) -> Result<(), TopologyError> {
    if count <= u128::from(max) {
        return Ok(());
    }
    Err(TopologyError::TooLarge {
        what: what.to_string(),
        count: u64::try_from(count).unwrap_or(u64::MAX),
        max,
    })
}

/// Refuses a topology of more switches, hosts or links than the limits, before it is built.
pub(crate) fn limit_counts(switches: u128, hosts: u128, links: u128) -> Result<(), TopologyError> {
    limit("switches", switches, SWITCHES_MAX as u64)?;
    limit("hosts", hosts, HOSTS_MAX as u64)?;
    limit("links", links, LINKS_MAX as u64)
}

pub(crate) fn limit_name(name: &str) -> Result<(), TopologyError> {
    let what = format!(
        "bytes in the name `{}...`",
        name.chars().take(16).collect::<String>()
    );
    limit(&what, name.len() as u128, NAME_BYTES_MAX as u64)
}

pub(crate) fn limit_delay(what: &str, delay_ns: Option<u64>) -> Result<(), TopologyError> {
    limit(what, u128::from(delay_ns.unwrap_or(0)), DELAY_NS_MAX)
}

/// `a * b` in 128 bits, saturating (preset arguments are `usize`).
pub(crate) fn mul(a: usize, b: usize) -> u128 {
    (a as u128).saturating_mul(b as u128)
}

#[cfg(test)]
mod tests;
