//! `onepipe cut-link FILE A B`: fault injection over udp. A socket cannot fail one link of a
//! switch, so the switches of `onepipe up FILE` do it themselves: each reads a file of
//! neighbours to cut next to its status file, at every status report (200 ms), and from then
//! on sends nothing on that link and drops what arrives on it. Their neighbours time the link
//! out as they would a broken cable, and the controller (if any) reroutes or declares the
//! processes cut off failed (docs/udp.md, "Cutting a link").

use clap::Args;
use onepipe::supervise::{cut_file, status_dir};
use onepipe::udp::PROCESS_PEER;
use onepipe_fabric::{Peer, Topology, Wiring};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct CutLinkArgs {
    /// The topology file given to `onepipe up`
    topology: PathBuf,
    /// A switch of the topology
    a: String,
    /// A neighbour of A: a switch, or a host (every process on it is cut off from A)
    b: String,
    /// Processes per host, as given to `onepipe up`
    #[arg(long, default_value_t = 1, value_parser = crate::bounds::int::<u32>(1..=onepipe_fabric::limits::PROCESSES_PER_HOST_MAX as u64))]
    processes_per_host: u32,
}

pub fn run(args: CutLinkArgs) -> Result<ExitCode, String> {
    let topology = Topology::from_file(&args.topology).map_err(|e| e.to_string())?;
    let wiring = Wiring::new(topology, args.processes_per_host).map_err(|e| e.to_string())?;
    // (switch, the neighbour's name as that switch's status gives it) for each end to cut.
    let ends = ends(&wiring, &args.a, &args.b)?;
    let dir = status_dir(&args.topology).map_err(|e| e.to_string())?;
    if !dir.is_dir() {
        return Err(format!(
            "{} is not up: `onepipe up {}` first",
            args.topology.display(),
            args.topology.display()
        ));
    }
    for (switch, neighbour) in &ends {
        append(&cut_file(&dir, switch), neighbour)?;
    }
    eprintln!(
        "cut {} - {}: {} drop it at their next status report (within 200 ms)",
        args.a,
        args.b,
        ends.iter()
            .map(|(s, n)| format!("{s} (toward {n})"))
            .collect::<Vec<_>>()
            .join(" and ")
    );
    Ok(ExitCode::SUCCESS)
}

/// The switch ends of the link between `a` and `b`, each with the name it knows the other
/// by; an error names what is wrong.
fn ends(wiring: &Wiring, a: &str, b: &str) -> Result<Vec<(String, String)>, String> {
    let switches = &wiring.topology.switches;
    let index = |name: &str| switches.iter().position(|s| s.name == name);
    let Some(ai) = index(a) else {
        return Err(format!("{a} is not a switch of the topology"));
    };
    let peers = &wiring.switch_ports[ai];
    if let Some(bi) = index(b) {
        let adjacent = peers
            .iter()
            .any(|p| matches!(p.peer, Peer::Switch { switch, .. } if switch == bi));
        if !adjacent {
            return Err(format!("{a} and {b} are not linked"));
        }
        return Ok(vec![
            (a.to_string(), b.to_string()),
            (b.to_string(), a.to_string()),
        ]);
    }
    let Some(host) = wiring.topology.hosts.iter().position(|h| h.name == b) else {
        return Err(format!("{b} is neither a switch nor a host of the topology"));
    };
    let processes: Vec<(String, String)> = peers
        .iter()
        .filter_map(|p| match p.peer {
            Peer::Process(p) if wiring.processes[p as usize].host == host => {
                Some((a.to_string(), format!("{PROCESS_PEER}{p}")))
            }
            _ => None,
        })
        .collect();
    if processes.is_empty() {
        return Err(format!("host {b} does not hang under {a}"));
    }
    Ok(processes)
}

fn append(path: &Path, line: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    writeln!(f, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wiring() -> Wiring {
        let file = "[[switch]]\nname = \"tor0\"\n[[switch]]\nname = \"tor1\"\n\
                    [[switch]]\nname = \"spine0\"\n\
                    [[host]]\nname = \"h0\"\nswitch = \"tor0\"\n[[host]]\nname = \"h1\"\nswitch = \"tor1\"\n\
                    [[link]]\nbetween = [\"tor0\", \"spine0\"]\n\
                    [[link]]\nbetween = [\"tor1\", \"spine0\"]\n";
        Wiring::new(Topology::from_toml(file).unwrap(), 2).unwrap()
    }

    #[test]
    fn a_switch_link_is_cut_at_both_ends_and_a_host_link_for_each_process() {
        let w = wiring();
        let both = vec![("tor0".into(), "spine0".into()), ("spine0".into(), "tor0".into())];
        assert_eq!(ends(&w, "tor0", "spine0").unwrap(), both);
        let host = ends(&w, "tor1", "h1").unwrap();
        assert_eq!(
            host,
            vec![
                ("tor1".into(), "process 2".into()),
                ("tor1".into(), "process 3".into())
            ]
        );
    }

    #[test]
    fn what_is_not_a_link_is_refused_by_name() {
        let w = wiring();
        let err = |a, b| ends(&w, a, b).unwrap_err();
        assert!(err("tor0", "tor1").contains("not linked"));
        assert!(err("tor0", "h1").contains("does not hang under tor0"));
        assert!(err("nope", "tor1").contains("nope is not a switch"));
        assert!(err("tor0", "h9").contains("h9 is neither"));
    }
}
