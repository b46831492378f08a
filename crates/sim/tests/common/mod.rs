//! What several simulator test files share.

use onepipe_sim::{SimConfig, SimReport, run};

/// Runs `c` and checks that it broke nothing: no violation, every ordering check, liveness and
/// atomicity.
pub fn run_clean(c: &SimConfig) -> SimReport {
    let r = run(c, &mut |_, _| {}).unwrap_or_else(|e| panic!("seed={}: {e}", c.seed));
    assert_eq!(r.violations, 0, "seed={}: {:?}", r.seed, r.examples);
    let k = &r.checks;
    assert!(k.total_order && k.fifo && k.causality && k.no_duplicates && k.no_creation);
    assert!(k.liveness && k.atomicity, "{k:?}");
    r
}
