//! Runs compared in pairs: two configurations run next to each other, alternating which goes
//! first, and reported as one ratio per pair and their median. This machine's speed drifts by
//! tens of percent within a minute; a pair's two runs see nearly the same machine, and
//! alternating the order cancels a steady drift.

use serde::Serialize;

/// What one run measured, as far as a paired comparison needs.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub throughput_msgs_per_s: f64,
    pub latency_p50_us: f64,
}

/// What authenticating every datagram costs a system over udp (docs/udp.md,
/// "Authentication").
#[derive(Serialize, Clone, Debug)]
pub struct AuthCost {
    pub processes: usize,
    /// Throughput with authentication over without, one per pair, alternating which runs
    /// first.
    pub ratios: Vec<f64>,
    pub median: f64,
    /// p50 latency with over without, per pair.
    pub latency_p50_ratios: Vec<f64>,
    pub latency_p50_median: f64,
}

/// Runs `pairs` pairs of `run(authenticated)`, with authentication first in even pairs and
/// without first in odd ones, at `processes` (reported only).
pub fn auth_cost(
    pairs: usize,
    processes: usize,
    mut run: impl FnMut(bool) -> Result<Measured, String>,
) -> Result<AuthCost, String> {
    let mut ratios = Vec::with_capacity(pairs);
    let mut latency_p50_ratios = Vec::with_capacity(pairs);
    for k in 0..pairs {
        let (with, without) = if k % 2 == 0 {
            let w = run(true)?;
            (w, run(false)?)
        } else {
            let wo = run(false)?;
            (run(true)?, wo)
        };
        ratios.push(with.throughput_msgs_per_s / without.throughput_msgs_per_s.max(1.0));
        latency_p50_ratios.push(with.latency_p50_us / without.latency_p50_us.max(1e-9));
    }
    Ok(AuthCost {
        processes,
        median: median(&ratios),
        latency_p50_median: median(&latency_p50_ratios),
        ratios,
        latency_p50_ratios,
    })
}

/// The median of `values` (the mean of the two middle ones for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_alternate_which_goes_first_and_ratios_are_with_over_without() {
        let mut order = Vec::new();
        let cost = auth_cost(3, 4, |authenticated| {
            order.push(authenticated);
            Ok(Measured {
                throughput_msgs_per_s: if authenticated { 2.0 } else { 4.0 },
                latency_p50_us: if authenticated { 30.0 } else { 10.0 },
            })
        })
        .expect("runs succeed");
        assert_eq!(order, [true, false, false, true, true, false]);
        assert_eq!(cost.ratios, [0.5, 0.5, 0.5]);
        assert_eq!(cost.median, 0.5);
        assert_eq!(cost.latency_p50_ratios, [3.0, 3.0, 3.0]);
        assert_eq!(cost.latency_p50_median, 3.0);
        assert_eq!(cost.processes, 4);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn a_failed_run_ends_the_pairs() {
        let r = auth_cost(2, 2, |_| Err("no socket".to_string()));
        assert_eq!(r.unwrap_err(), "no socket");
    }
}
