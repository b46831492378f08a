//! The formulas of paper 003, section 3, against values worked by hand and the paper's own
//! examples.

use proptest::prelude::*;

use super::*;

const GBPS: u64 = 1_000_000_000;

/// Theorem 3.4's sum as written, all KC + 1 terms, each binomial probability in log space: an
/// independent computation for [`f`]'s shortcut.
fn f_direct(k: u32, c: u32) -> f64 {
    let trials = u64::from(k) * u64::from(c);
    let (p, q) = (1.0 / f64::from(c), 1.0 - 1.0 / f64::from(c));
    let mut ln_choose = 0.0f64;
    let mut admitted = 0.0;
    for i in 0..=trials {
        let ln_pmf = ln_choose + i as f64 * p.ln() + (trials - i) as f64 * q.ln();
        admitted += i.min(u64::from(k)) as f64 * ln_pmf.exp();
        ln_choose += ((trials - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    admitted / f64::from(k)
}

fn one_minus_one_over_e() -> f64 {
    1.0 - (-1.0f64).exp()
}

#[test]
fn theorem_3_1_delta_star_is_two_hrtt_plus_transmission() {
    // 128 KB at 10 Gbps: 131072 * 8 / 1e10 s = 104857.6 ns, rounded up.
    let hrtt = Duration::from_micros(5);
    assert_eq!(
        transmission_time(131_072, 10 * GBPS),
        Duration::from_nanos(104_858)
    );
    assert_eq!(
        delta_star(hrtt, 131_072, 10 * GBPS),
        Duration::from_nanos(10_000 + 104_858)
    );
    assert_eq!(delta_star(hrtt, 0, 10 * GBPS), Duration::from_micros(10));
    assert_eq!(delta_star(hrtt, 1, 0), Duration::MAX);
}

#[test]
fn theorem_3_1_theta_star_from_alpha() {
    // The simulation's setting (section 5): hRTT 5.5 us, 100 Gbps, so one BDP is 68750 bytes and
    // a message of one BDP has alpha = 1, Theta* = 1/4.
    let hrtt = Duration::from_nanos(5_500);
    assert!((alpha(hrtt, 68_750, 100 * GBPS) - 1.0).abs() < 1e-12);
    assert!((theta_star(hrtt, 68_750, 100 * GBPS) - 0.25).abs() < 1e-12);
    // A large message: alpha -> 0, Theta* -> 1/2 (the folklore matching bound).
    assert!((theta_star(hrtt, 1 << 40, 100 * GBPS) - 0.5).abs() < 1e-4);
    // Degenerate inputs stay numbers.
    assert_eq!(alpha(hrtt, 0, 100 * GBPS), f64::INFINITY);
    assert_eq!(theta_star(hrtt, 0, 100 * GBPS), 0.0);
    assert_eq!(theta_star(hrtt, 1, 0), 0.5);
    assert_eq!(theta_star(Duration::ZERO, 0, 0), 0.0);
}

#[test]
fn theorem_3_2_rsvp_keeps_one_minus_one_over_e() {
    let hrtt = Duration::from_nanos(5_500);
    let ratio = theta_rsvp(hrtt, 68_750, 100 * GBPS) / theta_star(hrtt, 68_750, 100 * GBPS);
    assert!((ratio - 0.632_120_558_828_557_7).abs() < 1e-12, "{ratio}");
}

/// Figure 2's curve (C = 32), as the digest reads it off the formula.
#[test]
fn theorem_3_4_f_for_32_core_switches() {
    for (k, expected) in [(1, 0.638), (2, 0.734), (4, 0.808), (8, 0.863), (16, 0.902)] {
        let value = f(k, 32);
        assert!(
            (value - expected).abs() < 0.001,
            "f({k}, 32) = {value}, not {expected}"
        );
    }
}

#[test]
fn theorem_3_4_f_agrees_with_the_sum_as_written() {
    for (k, c) in [
        (1, 2),
        (1, 32),
        (3, 7),
        (4, 32),
        (16, 32),
        (64, 32),
        (7, 1024),
        (64, 1024),
    ] {
        let (shortcut, direct) = (f(k, c), f_direct(k, c));
        assert!(
            (shortcut - direct).abs() < 1e-9,
            "f({k}, {c}): {shortcut} vs {direct}"
        );
    }
}

#[test]
fn theorem_3_4_f_of_one_tends_to_rsvp_as_c_grows() {
    // f(1, C) = 1 - (1 - 1/C)^C, which falls toward 1 - 1/e from above.
    let limit = one_minus_one_over_e();
    let mut previous = 1.0;
    for c in [2, 4, 8, 32, 128, 1024, 1 << 20] {
        let value = f(1, c);
        assert!(value > limit && value < previous, "f(1, {c}) = {value}");
        assert!((value - (1.0 - (1.0 - 1.0 / f64::from(c)).powi(c as i32))).abs() < 1e-9);
        previous = value;
    }
    assert!(f(1, 1024) - limit < 2e-4);
    assert!(f(1, 1 << 20) - limit < 1e-6);
}

#[test]
fn theorem_3_4_f_degenerate_counts() {
    assert_eq!(f(0, 32), 0.0);
    assert_eq!(f(4, 0), 0.0);
    assert_eq!(f(4, 1), 1.0);
    // Large K: no underflow of P(X = 0) = (1 - 1/C)^(KC) ~ e^-K, and f keeps rising toward 1.
    let (big, bigger) = (f(2_000, 32), f(20_000, 32));
    assert!(
        big.is_finite() && big > f(64, 32) && big < bigger && bigger < 1.0,
        "{big} {bigger}"
    );
}

#[test]
fn theorem_3_4_theta_cosy_is_f_times_theta_star() {
    let hrtt = Duration::from_nanos(5_500);
    let star = theta_star(hrtt, 131_072, 100 * GBPS);
    assert_eq!(theta_cosy(8, 32, hrtt, 131_072, 100 * GBPS), f(8, 32) * star);
}

#[test]
fn lemma_3_3_section_3_4_example() {
    // A five-switch fat-tree path, 100 Gbps, 1.5 KB packets, K = 4: 45 packet times of 120 ns.
    let bound = lemma_3_3(5, 4, 1_500, 100 * GBPS);
    assert_eq!(bound.queueing_delay_max, Duration::from_nanos(5_400));
    assert_eq!(bound.queue_bytes_max, 5 * 3 * 1_500);
}

#[test]
fn lemma_3_3_counts_hop_by_hop() {
    // Hop i queues at most i (K-1) packets: 1 + 2 + 3 times 7 packets, of 1 ms each at 12 Mbps.
    let bound = lemma_3_3(3, 8, 1_500, 12_000_000);
    assert_eq!(bound.queueing_delay_max, Duration::from_millis(6 * 7));
    assert_eq!(bound.queue_bytes_max, 3 * 7 * 1_500);
    // One virtual link per link: reservations never share a link, nothing queues.
    let rsvp = lemma_3_3(5, 1, 1_500, 100 * GBPS);
    assert_eq!(
        (rsvp.queue_bytes_max, rsvp.queueing_delay_max),
        (0, Duration::ZERO)
    );
    // Saturates instead of overflowing.
    let huge = lemma_3_3(u32::MAX, u32::MAX, u64::MAX, 1);
    assert_eq!(
        (huge.queue_bytes_max, huge.queueing_delay_max),
        (u64::MAX, Duration::MAX)
    );
    assert_eq!(lemma_3_3(5, 4, 1_500, 0).queueing_delay_max, Duration::MAX);
}

#[test]
fn lemma_3_3_k_star_section_3_4_example() {
    // 32 MB buffers, five switches, 1.5 KB packets: the paper's "K* ~ 4200".
    assert_eq!(k_star(32_000_000, 5, 1_500), 4_266);
    assert_eq!(k_star(7_499, 5, 1_500), 0);
    assert_eq!(k_star(1 << 20, 0, 1_500), u64::MAX);
    assert_eq!(k_star(1 << 20, 5, 0), u64::MAX);
    assert_eq!(k_star(u64::MAX, u32::MAX, u64::MAX), 0);
}

#[test]
fn theorem_3_5_delta_cosy() {
    // 128 KB on one virtual link of 100/4 Gbps: 41943.04 ns, rounded up; plus 2 hRTT and d^.
    let hrtt = Duration::from_nanos(5_500);
    let d_hat = lemma_3_3(3, 4, 1_500, 100 * GBPS).queueing_delay_max;
    assert_eq!(d_hat, Duration::from_nanos(2_160));
    assert_eq!(
        delta_cosy(hrtt, 131_072, 4, 100 * GBPS, d_hat),
        Duration::from_nanos(11_000 + 41_944 + 2_160)
    );
    // K = 1 and no queueing is basic RSVP's delta* exactly.
    assert_eq!(
        delta_cosy(hrtt, 131_072, 1, 100 * GBPS, Duration::ZERO),
        delta_star(hrtt, 131_072, 100 * GBPS)
    );
    assert_eq!(delta_cosy(hrtt, u64::MAX, u32::MAX, 1, d_hat), Duration::MAX);
}

proptest! {
    #[test]
    fn delta_cosy_is_never_below_delta_star(
        hrtt_ns in 0u64..1 << 40,
        message_bytes in any::<u64>(),
        k in 1u32..=4_096,
        link_bits_per_s in any::<u64>(),
        hops in 0u32..=8,
        packet_bytes in 0u64..=9_000,
    ) {
        let hrtt = Duration::from_nanos(hrtt_ns);
        let d_hat = lemma_3_3(hops, k, packet_bytes, link_bits_per_s).queueing_delay_max;
        let cosy = delta_cosy(hrtt, message_bytes, k, link_bits_per_s, d_hat);
        prop_assert!(cosy >= delta_star(hrtt, message_bytes, link_bits_per_s));
    }

    #[test]
    fn theta_cosy_is_never_above_theta_star(
        k in 0u32..=64,
        c in 0u32..=1_024,
        hrtt_ns in 0u64..1 << 40,
        message_bytes in any::<u64>(),
        link_bits_per_s in any::<u64>(),
    ) {
        let hrtt = Duration::from_nanos(hrtt_ns);
        let star = theta_star(hrtt, message_bytes, link_bits_per_s);
        let cosy = theta_cosy(k, c, hrtt, message_bytes, link_bits_per_s);
        prop_assert!((0.0..=0.5).contains(&star), "{star}");
        prop_assert!(cosy >= 0.0 && cosy <= star, "{cosy} > {star}");
        prop_assert!(theta_rsvp(hrtt, message_bytes, link_bits_per_s) <= star);
    }

    #[test]
    fn f_is_a_fraction_increasing_in_k(k in 1u32..64, c in 1u32..=1_024) {
        let (low, high) = (f(k, c), f(k + 1, c));
        prop_assert!(low > 0.0 && low <= 1.0, "f({}, {}) = {}", k, c, low);
        prop_assert!(high > 0.0 && high <= 1.0, "f({}, {}) = {}", k + 1, c, high);
        // Equal only with one core switch, where every K keeps all its balls.
        if c == 1 {
            prop_assert_eq!(low, high);
        } else {
            prop_assert!(low < high, "f({}, {}) = {} >= f({}, {}) = {}", k, c, low, k + 1, c, high);
        }
        prop_assert!(low >= one_minus_one_over_e() - 1e-12);
    }
}
