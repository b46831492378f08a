//! What the controller's unit tests share: a controller over a wiring (with every process
//! registered, or none), times in milliseconds from a fixed start, and its outputs drained.

use super::graph::Graph;
use super::{Controller, ControllerConfig, Failure, Input, Output};
use onepipe_fabric::Wiring;
use onepipe_wire::{Duration, Instant};

pub(crate) fn unregistered(w: &Wiring, settle: Duration, answer_timeout: Duration) -> Controller {
    Controller::new(
        Graph::new(w),
        ControllerConfig {
            settle,
            answer_timeout,
        },
    )
}

pub(crate) fn registered(w: &Wiring, settle: Duration, answer_timeout: Duration) -> Controller {
    let mut c = unregistered(w, settle, answer_timeout);
    for p in 0..w.process_count() as u32 {
        c.handle_input(t(0), Input::Register { process: p }).unwrap();
    }
    // Each registration is confirmed; the scenarios start after that.
    let confirmed = outputs(&mut c);
    assert_eq!(confirmed.len(), w.process_count(), "{confirmed:?}");
    assert!(confirmed.iter().all(|o| matches!(o, Output::Registered { .. })));
    c
}

/// `ms` milliseconds after the tests' start, one second into the clock.
pub(crate) fn t(ms: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
}

pub(crate) fn outputs(c: &mut Controller) -> Vec<Output> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

pub(crate) fn failure(process: u32, ts: Instant) -> Failure {
    Failure { process, ts }
}
