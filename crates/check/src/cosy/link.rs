//! The network invariants cosy's bound rests on (paper 003, section 3.3 and Lemma 3.3): at most
//! K messages on a link at once, data only on a virtual link reserved for it, rates summing to
//! no more than the link's bandwidth, so queues stay transient and within q^ = #H (K-1) p.
//!
//! A run measures these per physical link (the switches' reservation tables and the emulated
//! links' counters) and hands the peaks over; the checks only compare them with their limits.

use std::fmt;

use serde::Serialize;

use crate::report::MAX_EXAMPLES;

/// What a run saw on one physical link (one direction).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkUse {
    /// Names the link in reports, e.g. `switch 3 port 2`.
    pub link: String,
    /// Most virtual links reserved at the same time.
    pub peak_reserved: u32,
    /// Frames along the path (data, completes, rejects going back) that arrived on a virtual
    /// link not reserved for their message.
    pub unreserved_frames: u64,
    /// The most bytes the link carried in one measurement window, over what its bandwidth
    /// carries in a window: above 1, data came faster than the link drains, so a queue grew
    /// that reservations should have prevented.
    pub peak_bytes_per_window_over_capacity: f64,
}

/// One link breaking one invariant.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LinkViolation {
    /// More than K reservations at once.
    OverReserved {
        link: String,
        peak_reserved: u32,
        k: u32,
    },
    /// Data outside any reservation of its own.
    UnreservedFrames { link: String, frames: u64 },
    /// A window carried more than the link's capacity (or the ratio is NaN, which proves
    /// nothing).
    OverCapacity { link: String, ratio: f64 },
}

/// What [`check_link_capacity`] found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkReport {
    /// Virtual links per physical link.
    pub k: u32,
    /// Links checked.
    pub links: u64,
    /// Every link within all three limits.
    pub held: bool,
    /// The busiest link (highest window ratio, a NaN ratio first); `None` without links.
    pub worst: Option<LinkUse>,
    /// Number of violations (a link may break several invariants).
    pub violations: u64,
    /// The first (at most [`MAX_EXAMPLES`]) violations, in the links' order.
    pub violators: Vec<LinkViolation>,
}

impl LinkReport {
    fn push(&mut self, violation: LinkViolation) {
        self.violations += 1;
        if self.violators.len() < MAX_EXAMPLES {
            self.violators.push(violation);
        }
    }
}

/// The ratio a link is ranked by: NaN counts as the worst, since it hides the real value.
fn load_rank(link: &LinkUse) -> f64 {
    let ratio = link.peak_bytes_per_window_over_capacity;
    if ratio.is_nan() { f64::INFINITY } else { ratio }
}

/// Holds iff every link had at most `k` reservations at once, no data arrived on a virtual
/// link not reserved for it, and no window carried more than the link's capacity (ratio <= 1).
pub fn check_link_capacity(links: &[LinkUse], k: u32) -> LinkReport {
    let mut report = LinkReport {
        k,
        links: links.len() as u64,
        held: true,
        worst: None,
        violations: 0,
        violators: Vec::new(),
    };
    for link in links {
        let name = || link.link.clone();
        if link.peak_reserved > k {
            report.push(LinkViolation::OverReserved {
                link: name(),
                peak_reserved: link.peak_reserved,
                k,
            });
        }
        if link.unreserved_frames > 0 {
            report.push(LinkViolation::UnreservedFrames {
                link: name(),
                frames: link.unreserved_frames,
            });
        }
        let ratio = link.peak_bytes_per_window_over_capacity;
        if ratio.is_nan() || ratio > 1.0 {
            report.push(LinkViolation::OverCapacity { link: name(), ratio });
        }
    }
    // Ties keep the first link, so the report is the same on every run.
    report.worst = links
        .iter()
        .reduce(|worst, link| {
            if load_rank(link) > load_rank(worst) {
                link
            } else {
                worst
            }
        })
        .cloned();
    report.held = report.violations == 0;
    report
}

/// Deepest queue against Lemma 3.3's q^ (`onepipe_cosy::theory::lemma_3_3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QueueReport {
    pub peak_bytes: u64,
    pub bound_bytes: u64,
    /// `peak_bytes <= bound_bytes`.
    pub held: bool,
}

/// Checks the deepest queue any port reached, `peak_queue_bytes`, against `bound_bytes`.
pub fn check_queue_bound(peak_queue_bytes: u64, bound_bytes: u64) -> QueueReport {
    QueueReport {
        peak_bytes: peak_queue_bytes,
        bound_bytes,
        held: peak_queue_bytes <= bound_bytes,
    }
}

impl fmt::Display for LinkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let busiest = self
            .worst
            .as_ref()
            .map_or(0.0, |link| link.peak_bytes_per_window_over_capacity);
        writeln!(
            f,
            "cosy links {}: {} links, K = {}, busiest window {:.3} of capacity, {} violations",
            if self.held { "held" } else { "BROKEN" },
            self.links,
            self.k,
            busiest,
            self.violations
        )?;
        for violation in &self.violators {
            writeln!(f, "  {violation:?}")?;
        }
        Ok(())
    }
}

impl fmt::Display for QueueReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cosy queue {}: peak {} bytes, bound {} bytes",
            if self.held { "held" } else { "BROKEN" },
            self.peak_bytes,
            self.bound_bytes
        )
    }
}
