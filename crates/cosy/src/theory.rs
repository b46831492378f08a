//! The paper's bounds as functions (paper 003, section 3 and Appendix A), so that a run can be
//! set up and judged against them: the latency bound delta a host promises at submission, and
//! the load it should sustain.
//!
//! Notation: hRTT is the unloaded round trip of one MTU packet, s the message size, B the
//! bandwidth of every link, K the virtual links per physical link, C the core (spine) switches,
//! #H the switches on the longest path, p the largest packet. The theorems assume a two-tier
//! full-bisection leaf-spine network with one bandwidth B everywhere.
//!
//! Times are rounded *up* to the nanosecond: a bound that errs errs on the safe side, and a
//! measured delay within it is within the exact bound plus less than a nanosecond per term.
//! Everything saturates instead of overflowing, and degenerate inputs (a zero bandwidth, size
//! or count) give the value the formula tends to, never a panic or a NaN: each function says
//! which.

use onepipe_wire::Duration;

const NANOS_PER_SECOND: u128 = 1_000_000_000;
const BITS_PER_BYTE: u128 = 8;

/// Time to send `bits_times_ns` / 1e9 bits at `link_bits_per_s`, rounded up: the product is
/// formed by the caller (already multiplied by 1e9) so that a formula with several factors is
/// rounded once. `None` (the product overflowed) and a zero bandwidth give [`Duration::MAX`].
fn send_time(bits_times_ns: Option<u128>, link_bits_per_s: u64) -> Duration {
    match (bits_times_ns, link_bits_per_s) {
        (Some(0), _) => Duration::ZERO,
        (None, _) | (Some(_), 0) => Duration::MAX,
        (Some(product), bits_per_s) => {
            let ns = product.div_ceil(u128::from(bits_per_s));
            Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
        }
    }
}

/// s/B: the time to send `message_bytes` at `link_bits_per_s`, rounded up to the nanosecond.
/// A zero bandwidth gives [`Duration::MAX`] (never sent), unless the message is empty.
pub fn transmission_time(message_bytes: u64, link_bits_per_s: u64) -> Duration {
    let product = u128::from(message_bytes) * BITS_PER_BYTE * NANOS_PER_SECOND;
    send_time(Some(product), link_bits_per_s)
}

/// Theorem 3.1, the least delta any design offering partial communication synchrony can
/// promise: `delta* = 2 hRTT + s/B` (one hRTT to be admitted, s/B to send, half an hRTT for the
/// last packet to arrive and half for the completion to come back).
pub fn delta_star(hrtt: Duration, message_bytes: u64, link_bits_per_s: u64) -> Duration {
    hrtt.saturating_mul(2) + transmission_time(message_bytes, link_bits_per_s)
}

/// Theorem 3.1's `alpha = hRTT / (s/B)`: how long admission takes next to sending the message.
/// Exact (not from the rounded [`transmission_time`]). An empty message gives infinity (it is
/// all overhead); a zero bandwidth with a non-empty message gives 0 (sending never ends).
pub fn alpha(hrtt: Duration, message_bytes: u64, link_bits_per_s: u64) -> f64 {
    if message_bytes == 0 {
        return f64::INFINITY;
    }
    // hRTT * B / (8 s 1e9): hRTT in ns, B in bits per second.
    let hrtt_ns = hrtt.as_nanos() as f64;
    let message_bits = message_bytes as f64 * BITS_PER_BYTE as f64;
    hrtt_ns * link_bits_per_s as f64 / (message_bits * NANOS_PER_SECOND as f64)
}

/// Theorem 3.1, the most load any such design sustains: `Theta* = 1 / (2 (1 + alpha))`. The 1/2
/// is the competitive ratio of an online maximal matching, the `1 + alpha` the hRTT a sender
/// waits, sending nothing, before it is admitted. In `[0, 1/2]`; 0 for an empty message.
pub fn theta_star(hrtt: Duration, message_bytes: u64, link_bits_per_s: u64) -> f64 {
    1.0 / (2.0 * (1.0 + alpha(hrtt, message_bytes, link_bits_per_s)))
}

/// Theorem 3.2, the expected load basic RSVP (one reservation per link, paper 3.2) sustains:
/// `E[Theta_RSVP] = (1 - 1/e) Theta*`, about 63% of the optimum. It is [`f`]`(1, C)` as C grows.
pub fn theta_rsvp(hrtt: Duration, message_bytes: u64, link_bits_per_s: u64) -> f64 {
    (1.0 - (-1.0f64).exp()) * theta_star(hrtt, message_bytes, link_bits_per_s)
}

/// Theorem 3.4's factor, the fraction of Theta* cosy sustains in expectation with `k` virtual
/// links per physical link and `c` core switches:
///
/// ```text
/// f(K, C) = [ sum_{i=0}^{KC} min(i, K) C(KC, i) (1/C)^i (1 - 1/C)^(KC-i) ] / K
/// ```
///
/// that is E[min(X, K)] / K for X ~ Binomial(KC, 1/C), the balls a bin keeps when KC balls
/// fall into C bins of K places (Appendix A). Computed as `1 - sum_{i<K} (K-i)/K P(X = i)`
/// (the same sum, since E[min(X, K)] = K - E[(K - X)+]): K terms instead of KC + 1, each
/// probability from the previous one by the pmf's ratio in log space, so nothing overflows or
/// underflows for any K and C. O(K) time.
///
/// In `(0, 1]` and increasing in K for a fixed C. `c == 1` gives 1 (one spine, X = K always);
/// `k == 0` or `c == 0` give 0 (no virtual link or no core switch admits nothing).
pub fn f(k: u32, c: u32) -> f64 {
    if k == 0 || c == 0 {
        return 0.0;
    }
    if c == 1 {
        return 1.0;
    }
    let k_f64 = f64::from(k);
    let trials = k_f64 * f64::from(c);
    let miss = -1.0 / f64::from(c);
    // ln P(X = 0) = KC ln(1 - 1/C); ln of P(X = i+1) / P(X = i) = ln((KC - i) / ((i+1)(C-1))).
    let mut ln_pmf = trials * miss.ln_1p();
    let ln_per_success = -(f64::from(c) - 1.0).ln();
    let mut shortfall = 0.0;
    for i in 0..k {
        let i_f64 = f64::from(i);
        shortfall += (k_f64 - i_f64) / k_f64 * ln_pmf.exp();
        ln_pmf += (trials - i_f64).ln() - (i_f64 + 1.0).ln() + ln_per_success;
    }
    let fraction = 1.0 - shortfall;
    debug_assert!(fraction > 0.0 && fraction <= 1.0, "f({k}, {c}) = {fraction}");
    fraction
}

/// Theorem 3.4, the expected load cosy sustains: `E[Theta_cosy] = f(K, C) Theta*`.
pub fn theta_cosy(k: u32, c: u32, hrtt: Duration, message_bytes: u64, link_bits_per_s: u64) -> f64 {
    f(k, c) * theta_star(hrtt, message_bytes, link_bits_per_s)
}

/// Lemma 3.3's bounds on the queues that reservations leave: each switch sees at most K
/// messages per output port, each paced at B/K, so queues are transient and bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LemmaBound {
    /// `q^ = #H (K-1) p`: the most a port's queue holds at any switch.
    pub queue_bytes_max: u64,
    /// `d^ = #H (#H+1) (K-1)/2 * p/B`: the most a packet waits in queues along its path
    /// (hop i queues at most i (K-1) packets, drained at B), rounded up.
    pub queueing_delay_max: Duration,
}

/// Lemma 3.3 for a path of `hops` switches (#H), `k` virtual links per link, packets of at most
/// `packet_bytes` (p) and links of `link_bits_per_s` (B). Saturates on overflow; `k == 0` (no
/// reservation, no queue) gives zeros, a zero bandwidth an infinite delay if any queue forms.
///
/// Section 3.4's example: a five-switch fat-tree path, 100 Gbps, 1.5 KB packets and K = 4 give
/// d^ = 5.4 us.
pub fn lemma_3_3(hops: u32, k: u32, packet_bytes: u64, link_bits_per_s: u64) -> LemmaBound {
    let hops = u128::from(hops);
    let waiting = u128::from(k.saturating_sub(1));
    let queue_bytes_max = hops
        .checked_mul(waiting)
        .and_then(|packets| packets.checked_mul(u128::from(packet_bytes)))
        .map_or(u64::MAX, |bytes| u64::try_from(bytes).unwrap_or(u64::MAX));
    // #H (#H+1) (K-1) p 8 1e9 / 2, then / B: hops (hops + 1) is even, so halving it is exact.
    let product = (hops * (hops + 1) / 2)
        .checked_mul(waiting)
        .and_then(|packets| packets.checked_mul(u128::from(packet_bytes)))
        .and_then(|bytes| bytes.checked_mul(BITS_PER_BYTE * NANOS_PER_SECOND));
    LemmaBound {
        queue_bytes_max,
        queueing_delay_max: send_time(product, link_bits_per_s),
    }
}

/// Lemma 3.3's `K* = S^ / (#H p)`, rounded down: the most virtual links per link for which no
/// queue outgrows the smallest switch buffer `buffer_bytes_min`, hence no packet is dropped.
/// No switch or empty packets (`hops == 0` or `packet_bytes == 0`) bound nothing: `u64::MAX`.
pub fn k_star(buffer_bytes_min: u64, hops: u32, packet_bytes: u64) -> u64 {
    match u64::from(hops).checked_mul(packet_bytes) {
        Some(0) => u64::MAX,
        Some(path_bytes) => buffer_bytes_min / path_bytes,
        // #H p above u64::MAX exceeds any buffer.
        None => 0,
    }
}

/// Theorem 3.5, the bound cosy promises: `delta_cosy = 2 hRTT + s K / B + d^`, a message sent on
/// one virtual link of B/K. `d_hat` is Lemma 3.3's `queueing_delay_max`. The receiver-side wait
/// delta^E of the proof (Appendix A) is not in the theorem; a host that holds requests adds it.
pub fn delta_cosy(
    hrtt: Duration,
    message_bytes: u64,
    k: u32,
    link_bits_per_s: u64,
    d_hat: Duration,
) -> Duration {
    let product = (u128::from(message_bytes) * u128::from(k)).checked_mul(BITS_PER_BYTE * NANOS_PER_SECOND);
    hrtt.saturating_mul(2) + send_time(product, link_bits_per_s) + d_hat
}

#[cfg(test)]
mod tests;
