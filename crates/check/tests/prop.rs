//! Random valid executions pass `check_all`; targeted mutations make the matching check fail.

use onepipe_check::{Event, OnlineChecker, ProcessLog, check_all, check_no_loss};
use proptest::prelude::*;
use proptest::sample::Index;

/// Per sender, per broadcast: (ts increment, destination bit mask, loss bit mask).
type Plan = Vec<Vec<(u64, u8, u8)>>;

fn plan() -> impl Strategy<Value = Plan> {
    (2usize..=5).prop_flat_map(|n| {
        let msg = (
            1u64..4,
            any::<u8>(),
            (any::<u8>(), any::<u8>()).prop_map(|(a, b)| a & b),
        );
        prop::collection::vec(prop::collection::vec(msg, 0..12), n)
    })
}

/// Builds logs where sender `p` scatters with strictly increasing timestamps and every receiver
/// delivers in `(ts, src)` order, skipping lost copies. Sends sort before deliveries of the same
/// timestamp, so every send is above all timestamps delivered before it (causality).
fn execute(plan: &Plan) -> Vec<ProcessLog> {
    // Sort key (ts_ns, 0 = send / 1 = deliver, dst or src) with the event.
    type Keyed = ((u64, u8, u32), Event);
    let n = plan.len();
    let mut keyed: Vec<Vec<Keyed>> = vec![Vec::new(); n];
    for (src, msgs) in plan.iter().enumerate() {
        let mut ts_ns = 0;
        for (k, &(step, dst_mask, loss_mask)) in msgs.iter().enumerate() {
            ts_ns += step;
            let msg_id = 1000 * src as u64 + k as u64;
            for dst in (0..n).filter(|&dst| dst != src && dst_mask & (1 << dst) != 0) {
                let send = Event::Send {
                    ts_ns,
                    dst: dst as u32,
                    msg_id,
                };
                keyed[src].push(((ts_ns, 0, dst as u32), send));
                if loss_mask & (1 << dst) == 0 {
                    let deliver = Event::Deliver {
                        ts_ns,
                        src: src as u32,
                        msg_id,
                    };
                    keyed[dst].push(((ts_ns, 1, src as u32), deliver));
                }
            }
        }
    }
    keyed
        .into_iter()
        .enumerate()
        .map(|(process, mut events)| {
            events.sort_unstable_by_key(|&(key, _)| key);
            ProcessLog {
                process: process as u32,
                events: events.into_iter().map(|(_, e)| e).collect(),
            }
        })
        .collect()
}

fn deliveries(log: &ProcessLog) -> Vec<usize> {
    (0..log.events.len())
        .filter(|&i| matches!(log.events[i], Event::Deliver { .. }))
        .collect()
}

fn src_of(e: &Event) -> u32 {
    match *e {
        Event::Deliver { src, .. } => src,
        Event::Send { .. } => unreachable!("only called on deliveries"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_execution_passes(plan in plan()) {
        let logs = execute(&plan);
        let report = check_all(&logs);
        prop_assert!(report.ok(), "{}", report);
        // Without losses, no_loss holds too.
        let lossless: Plan =
            plan.iter().map(|m| m.iter().map(|&(step, dst, _)| (step, dst, 0)).collect()).collect();
        prop_assert!(check_no_loss(&execute(&lossless)).is_empty());
    }

    #[test]
    fn swapping_two_deliveries_breaks_total_order(plan in plan(), p in any::<Index>(), a in any::<Index>(), b in any::<Index>()) {
        let mut logs = execute(&plan);
        let p = p.index(logs.len());
        let ds = deliveries(&logs[p]);
        prop_assume!(ds.len() >= 2);
        let (i, j) = (a.index(ds.len()), b.index(ds.len()));
        prop_assume!(i != j);
        logs[p].events.swap(ds[i], ds[j]);
        let checks = check_all(&logs).checks();
        prop_assert!(!checks.total_order);
        prop_assert!(checks.no_duplicates && checks.no_creation);
    }

    #[test]
    fn swapping_deliveries_from_one_sender_breaks_fifo(plan in plan(), pick in any::<Index>()) {
        let mut logs = execute(&plan);
        let mut pairs = Vec::new();
        for (p, log) in logs.iter().enumerate() {
            let ds = deliveries(log);
            for (x, &i) in ds.iter().enumerate() {
                for &j in &ds[x + 1..] {
                    if src_of(&log.events[i]) == src_of(&log.events[j]) {
                        pairs.push((p, i, j));
                    }
                }
            }
        }
        prop_assume!(!pairs.is_empty());
        let (p, i, j) = pairs[pick.index(pairs.len())];
        logs[p].events.swap(i, j);
        let checks = check_all(&logs).checks();
        prop_assert!(!checks.fifo && !checks.total_order);
    }

    #[test]
    fn duplicating_a_delivery_breaks_no_duplicates(plan in plan(), p in any::<Index>(), a in any::<Index>(), at in any::<Index>()) {
        let mut logs = execute(&plan);
        let p = p.index(logs.len());
        let ds = deliveries(&logs[p]);
        prop_assume!(!ds.is_empty());
        let i = ds[a.index(ds.len())];
        let copy = logs[p].events[i];
        let len = logs[p].events.len();
        let pos = i + 1 + at.index(len - i);
        logs[p].events.insert(pos, copy);
        let checks = check_all(&logs).checks();
        prop_assert!(!checks.no_duplicates);
        prop_assert!(!check_no_loss(&logs).is_empty());
    }

    #[test]
    fn altering_a_delivered_timestamp_breaks_no_creation(plan in plan(), p in any::<Index>(), a in any::<Index>()) {
        let mut logs = execute(&plan);
        let p = p.index(logs.len());
        let ds = deliveries(&logs[p]);
        prop_assume!(!ds.is_empty());
        if let Event::Deliver { ts_ns, .. } = &mut logs[p].events[ds[a.index(ds.len())]] {
            *ts_ns += 1;
        }
        prop_assert!(!check_all(&logs).checks().no_creation);
    }

    #[test]
    fn sending_at_a_delivered_timestamp_breaks_causality(plan in plan(), pick in any::<Index>()) {
        let mut logs = execute(&plan);
        // (process, send index, highest ts delivered before it)
        let mut sends = Vec::new();
        for (p, log) in logs.iter().enumerate() {
            let mut max = None;
            for (i, e) in log.events.iter().enumerate() {
                match *e {
                    Event::Deliver { ts_ns, .. } => max = max.max(Some(ts_ns)),
                    Event::Send { .. } => sends.extend(max.map(|m| (p, i, m))),
                }
            }
        }
        prop_assume!(!sends.is_empty());
        let (p, i, max) = sends[pick.index(sends.len())];
        if let Event::Send { ts_ns, .. } = &mut logs[p].events[i] {
            *ts_ns = max;
        }
        prop_assert!(!check_all(&logs).checks().causality);
    }

    /// The online checker, fed the logs in chunks interleaved at random (deliveries often
    /// before their sends), finds what the batch checks find, check by check, on valid runs and
    /// on each kind of damage.
    #[test]
    fn the_online_checker_counts_what_the_batch_checks_count(
        plan in plan(),
        damage in 0usize..6,
        p in any::<Index>(),
        a in any::<Index>(),
        b in any::<Index>(),
        feed in prop::collection::vec((any::<Index>(), 1usize..5), 1..64),
    ) {
        let mut logs = execute(&plan);
        let p = p.index(logs.len());
        let len = logs[p].events.len();
        let ds = deliveries(&logs[p]);
        match damage {
            1 if len >= 2 => logs[p].events.swap(a.index(len), b.index(len)),
            2 if !ds.is_empty() => {
                let copy = logs[p].events[ds[a.index(ds.len())]];
                logs[p].events.insert(b.index(len + 1), copy);
            }
            3 if len > 0 => {
                logs[p].events.remove(a.index(len));
            }
            4 if len > 0 => match &mut logs[p].events[a.index(len)] {
                Event::Send { ts_ns, .. } | Event::Deliver { ts_ns, .. } => *ts_ns += 1,
            },
            _ => {}
        }
        let mut online = OnlineChecker::new(logs.len() as u32, true);
        let mut next = vec![0usize; logs.len()];
        let mut turns = feed.iter().cycle();
        while next.iter().zip(&logs).any(|(&n, l)| n < l.events.len()) {
            let &(who, k) = turns.next().expect("cycles");
            // The drawn process, or the next one with events left.
            let q = (0..logs.len())
                .map(|i| (who.index(logs.len()) + i) % logs.len())
                .find(|&q| next[q] < logs[q].events.len())
                .expect("some log has events left");
            let end = (next[q] + k).min(logs[q].events.len());
            online.push(q as u32, &logs[q].events[next[q]..end]);
            next[q] = end;
        }
        online.finish();
        let batch = check_all(&logs);
        let r = online.report();
        let counts = |r: &onepipe_check::Report| {
            [r.total_order.count, r.fifo.count, r.causality.count, r.no_duplicates.count, r.no_creation.count]
        };
        prop_assert_eq!(counts(r), counts(&batch), "online:\n{}batch:\n{}", r, batch);
        prop_assert_eq!(online.no_loss().map(|c| c.count), Some(check_no_loss(&logs).len() as u64));
        prop_assert_eq!(online.stats().records_held, 0);
    }
}
