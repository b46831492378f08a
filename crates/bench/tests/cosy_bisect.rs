//! The sustainable-load search (`onepipe sim cosy-tradeoff`): against a known threshold it
//! brackets it within 2^-steps, never calls a failing load sustained, and stops at load 1
//! when load 1 passes.

use onepipe_bench::cosy::bisect::bisect;
use proptest::prelude::*;

proptest! {
    #[test]
    fn a_monotone_threshold_is_bracketed_within_the_resolution(threshold in 0.0f64..1.0, steps in 0u32..12) {
        let mut tried = Vec::new();
        let found = bisect(steps, |load| {
            tried.push(load);
            Ok((load <= threshold, load))
        })
        .unwrap();
        prop_assert_eq!(tried[0], 1.0);
        prop_assert_eq!(tried.len(), steps as usize + 1);
        prop_assert!(found.passed <= threshold);
        let failed = found.failed.expect("load 1 is above the threshold");
        prop_assert!(failed > threshold);
        prop_assert!(failed - found.passed <= 0.5f64.powi(steps as i32) + 1e-12);
        prop_assert_eq!(found.best, (found.passed > 0.0).then_some(found.passed));
    }
}

#[test]
fn load_one_passing_ends_the_search() {
    let mut calls = 0;
    let found = bisect(6, |_| {
        calls += 1;
        Ok((true, ()))
    })
    .unwrap();
    assert_eq!((found.passed, found.failed, calls), (1.0, None, 1));
}

#[test]
fn nothing_passing_reports_zero_and_the_smallest_failure() {
    let found = bisect(4, |_| Ok((false, ()))).unwrap();
    assert_eq!(found.passed, 0.0);
    assert_eq!(found.failed, Some(1.0 / 16.0));
    assert!(found.best.is_none());
}

#[test]
fn an_error_stops_the_search() {
    let r = bisect(4, |load| {
        if load < 0.5 {
            Err("boom".to_string())
        } else {
            Ok((false, ()))
        }
    });
    assert_eq!(r.unwrap_err(), "boom");
}
