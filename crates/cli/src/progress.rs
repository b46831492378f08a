//! The progress bars commands share: hidden under `--json`, so that stdout is the object alone.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of points (a benchmark's runs): `message [=====>    ] 3/12`.
pub fn points(hidden: bool) -> ProgressBar {
    styled(hidden, 1, "{msg:>36} [{bar:30}] {pos}/{len}")
}

/// A bar of percent of a run's measured window: `message [=====>    ]  42%`.
pub fn percent(hidden: bool) -> ProgressBar {
    styled(hidden, 100, "{msg:>16} [{bar:40}] {pos:>3}%")
}

fn styled(hidden: bool, len: u64, template: &str) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}
