//! Checks a history file: `cargo run --release -p onepipe-check --example check_history -- FILE`.
//! Prints the report, then one JSON line with the verdict and the time taken.

use std::path::PathBuf;
use std::process::ExitCode;

use onepipe_check::{Verdict, check_linearizable, read_history_file};

#[allow(clippy::disallowed_methods)] // measures its own wall-clock time
fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: check_history FILE");
        return ExitCode::from(2);
    };
    let start = std::time::Instant::now();
    let records = match read_history_file(&path) {
        Ok(records) => records,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let read_s = start.elapsed().as_secs_f64();
    let start = std::time::Instant::now();
    let report = match check_linearizable(&records) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let check_s = start.elapsed().as_secs_f64();
    print!("{report}");
    println!(
        "{{\"verdict\":\"{}\",\"operations\":{},\"keys\":{},\"steps\":{},\"read_s\":{read_s:.3},\"check_s\":{check_s:.3}}}",
        report.verdict, report.operations, report.keys, report.steps
    );
    if report.verdict == Verdict::Linearizable {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
