//! A process's events and counters, handed out while a run goes on (`onepipe bench soak`).
//!
//! The demo keeps every event in its workload until the run stops, for the batch checkers;
//! a soak lasting half an hour cannot. With a stream attached, the workload moves its events
//! here at the end of every visit of its host, and publishes its endpoint's drop counters now
//! and then; the soak's driver takes the events away for the online checker
//! ([`onepipe_check::OnlineChecker`]) and reads the counters for its samples.

use onepipe_check::Event;
use onepipe_proto::endpoint::EndpointCounters;
use onepipe_wire::{Duration, Instant};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// How often a process publishes its counters (copying them on every visit would cost more
/// than the visit's own work at a light load).
const COUNTERS_PERIOD: Duration = Duration::from_millis(10);

/// A process's counters as last published.
#[derive(Clone, Debug, Default)]
pub struct LiveCounters {
    pub endpoint: EndpointCounters,
    /// Scatterings the endpoint reported failed (best effort: a receiver's NAK).
    pub send_failures: u64,
}

#[derive(Debug, Default)]
pub struct ProcessStream {
    events: Mutex<Vec<Event>>,
    counters: Mutex<LiveCounters>,
    published_at_ns: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking workload thread already fails the run; its data stays readable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ProcessStream {
    /// Called by the workload at the end of a visit: moves `events` out (keeping their
    /// allocation), and publishes the counters at most every [`COUNTERS_PERIOD`].
    pub fn publish(
        &self,
        now: Instant,
        events: &mut Vec<Event>,
        endpoint: &EndpointCounters,
        send_failures: u64,
    ) {
        if !events.is_empty() {
            lock(&self.events).append(events);
        }
        let last = self.published_at_ns.load(Ordering::Relaxed);
        if now.as_nanos().saturating_sub(last) >= COUNTERS_PERIOD.as_nanos() {
            self.published_at_ns.store(now.as_nanos(), Ordering::Relaxed);
            *lock(&self.counters) = LiveCounters {
                endpoint: endpoint.clone(),
                send_failures,
            };
        }
    }

    /// Swaps the events published since the last take into `into` (which should be empty: its
    /// allocation goes to the workload).
    pub fn take_events(&self, into: &mut Vec<Event>) {
        debug_assert!(into.is_empty());
        std::mem::swap(&mut *lock(&self.events), into);
    }

    pub fn counters(&self) -> LiveCounters {
        lock(&self.counters).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_move_through_in_order_and_counters_at_their_pace() {
        let s = ProcessStream::default();
        let mut counters = EndpointCounters {
            late: 3,
            ..EndpointCounters::default()
        };
        let mut events = vec![Event::Send {
            ts_ns: 1,
            dst: 0,
            msg_id: 0,
        }];
        s.publish(Instant::from_nanos(20_000_000), &mut events, &counters, 1);
        assert!(events.is_empty());
        events.push(Event::Deliver {
            ts_ns: 1,
            src: 0,
            msg_id: 0,
        });
        counters.late = 4;
        s.publish(Instant::from_nanos(21_000_000), &mut events, &counters, 2);
        let mut got = Vec::new();
        s.take_events(&mut got);
        assert_eq!(got.len(), 2);
        assert!(matches!(got[1], Event::Deliver { .. }));
        assert_eq!(
            (s.counters().endpoint.late, s.counters().send_failures),
            (3, 1),
            "1 ms later: not yet"
        );
        s.publish(Instant::from_nanos(30_000_000), &mut events, &counters, 2);
        assert_eq!(s.counters().endpoint.late, 4);
    }
}
