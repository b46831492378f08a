//! Every input a fuzz target crashed on, kept under `regressions/TARGET/` and named after the
//! bug it found, runs through its target again: none may panic. Each was fixed where it
//! crashed (docs/fuzzing.md lists them).

use std::path::Path;

#[test]
fn every_saved_crash_runs_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut ran = 0;
    for t in onepipe_fuzz::TARGETS {
        let dir = root.join(t.name);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let path = e.expect("a directory entry").path();
            let input = std::fs::read(&path).expect("a saved input");
            (t.run)(&input);
            ran += 1;
        }
    }
    assert!(ran >= 4, "the saved crashes are there ({ran} ran)");
}

/// The seed corpora run clean too: the harness starts from them.
#[test]
fn every_seed_runs_clean() {
    for t in onepipe_fuzz::TARGETS {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{} has seeds", t.name);
        for s in &seeds {
            (t.run)(s);
        }
    }
}
