//! The search for a maximum sustainable load: bisection over the load, kept apart from the
//! simulator so that it can be tested against a known threshold.

/// What [`bisect`] found: the largest load that passed (0 if none did) with what its probe
/// returned, and the smallest that failed (`None`: load 1 passed).
#[derive(Clone, Debug, PartialEq)]
pub struct Bisection<T> {
    pub passed: f64,
    pub failed: Option<f64>,
    pub best: Option<T>,
}

/// Probes load 1, then, if it failed, halves [largest passed, smallest failed] `steps` times.
/// `try_load` says whether a load passes.
pub fn bisect<T>(
    steps: u32,
    mut try_load: impl FnMut(f64) -> Result<(bool, T), String>,
) -> Result<Bisection<T>, String> {
    let mut found = Bisection {
        passed: 0.0,
        failed: None,
        best: None,
    };
    for step in 0..=steps {
        let load = match found.failed {
            None if step == 0 => 1.0,
            None => break,
            Some(hi) => (found.passed + hi) / 2.0,
        };
        let (passed, value) = try_load(load)?;
        if passed {
            found.passed = load;
            found.best = Some(value);
        } else {
            found.failed = Some(load);
        }
    }
    Ok(found)
}
