//! When `onepipe up` may say the fabric is up: every switch it started has reported, so its
//! socket is bound, and has heard every neighbour switch, so barriers can cross the fabric.
//! Before that a datagram to a switch not yet bound is lost (found by the udp integration
//! test: the first broadcast of each process vanished when processes joined as soon as `up`
//! printed its banner).

use crate::status::{PROCESS_PEER, SwitchStatus};
use std::path::Path;

/// How long `up` waits for its switches to become ready before it gives up.
pub const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Why a switch is not ready yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotReady {
    /// No status report yet: still starting.
    NotReporting(String),
    /// Reporting, but nothing heard from these neighbour switches.
    Deaf { switch: String, neighbours: Vec<String> },
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotReady::NotReporting(s) => write!(f, "switch {s} has not reported"),
            NotReady::Deaf { switch, neighbours } => {
                write!(
                    f,
                    "switch {switch} has heard nothing from {}",
                    neighbours.join(", ")
                )
            }
        }
    }
}

/// The first of `switches` that is not ready, judged by the reports in `status_dir`.
pub fn first_not_ready(status_dir: &Path, switches: &[String]) -> Option<NotReady> {
    switches.iter().find_map(|name| {
        let status = std::fs::read(status_dir.join(format!("{name}.json")))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<SwitchStatus>(&bytes).ok());
        match status {
            None => Some(NotReady::NotReporting(name.clone())),
            Some(s) => deaf_to(&s),
        }
    })
}

/// Neighbour switches `s` has never heard (process links may stay silent: processes join
/// when they like).
fn deaf_to(s: &SwitchStatus) -> Option<NotReady> {
    let neighbours: Vec<String> = s
        .inputs
        .iter()
        .filter(|l| !l.peer.starts_with(PROCESS_PEER) && !l.heard)
        .map(|l| l.peer.clone())
        .collect();
    (!neighbours.is_empty()).then(|| NotReady::Deaf {
        switch: s.node.clone(),
        neighbours,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::LinkStatus;

    fn link(peer: &str, heard: bool) -> LinkStatus {
        LinkStatus {
            port: 0,
            peer: peer.into(),
            state: "live".into(),
            barrier_lag_us: heard.then_some(10.0),
            commit_lag_us: heard.then_some(10.0),
            heard,
            silent_us: 0.0,
            clock_ahead_us: None,
            from_below: false,
        }
    }

    fn status(node: &str, inputs: Vec<LinkStatus>) -> SwitchStatus {
        SwitchStatus {
            node: node.into(),
            inputs,
            ..Default::default()
        }
    }

    #[test]
    fn a_switch_is_ready_once_it_reports_and_hears_every_neighbour_switch() {
        let dir = std::env::temp_dir().join(format!("onepipe-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = ["tor0".to_string(), "spine".to_string()];
        let write = |s: &SwitchStatus| {
            std::fs::write(
                dir.join(format!("{}.json", s.node)),
                serde_json::to_vec(s).unwrap(),
            )
            .unwrap()
        };
        assert_eq!(
            first_not_ready(&dir, &names),
            Some(NotReady::NotReporting("tor0".into()))
        );
        // A silent process does not hold the fabric back; a silent switch does.
        write(&status(
            "tor0",
            vec![link("process 0", false), link("spine", false)],
        ));
        write(&status("spine", vec![link("tor0", true)]));
        let deaf = first_not_ready(&dir, &names).unwrap();
        assert_eq!(deaf.to_string(), "switch tor0 has heard nothing from spine");
        write(&status(
            "tor0",
            vec![link("process 0", false), link("spine", true)],
        ));
        assert_eq!(first_not_ready(&dir, &names), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
