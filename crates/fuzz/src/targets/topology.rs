//! Topology files (crates/fabric): `Topology::from_toml`, then what every command does with
//! a topology it accepted: the wiring of processes to ports, the routing tables, and a switch
//! built on them. The input is TOML text, or (mode 1) a recipe for a TOML file made of the
//! format's own tables and keys, with names that do and do not exist and counts small and
//! huge, so that a fuzzer reaches the checks behind the syntax.

use crate::fixture::{self, START};
use crate::frames::Draw;
use onepipe_fabric::{Topology, Wiring, routing};
use onepipe_proto::switch::Switch;
use std::fmt::Write;

/// Topologies larger than this are parsed and validated but not wired and routed, so that one
/// input stays fast (the wiring is linear in the hosts, routing quadratic in the switches).
const HOSTS_WIRED_MAX: usize = 256;
const SWITCHES_WIRED_MAX: usize = 64;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = match mode % 2 {
        0 => String::from_utf8_lossy(rest).into_owned(),
        _ => recipe(&mut Draw::new(rest)),
    };
    check(&text);
}

/// Parses `text`; wires, routes and builds the switches of what parses.
pub fn check(text: &str) {
    let Ok(t) = Topology::from_toml(text) else {
        return;
    };
    if t.hosts.len() > HOSTS_WIRED_MAX || t.switches.len() > SWITCHES_WIRED_MAX {
        return;
    }
    for processes_per_host in [1, 3] {
        let Ok(wiring) = Wiring::new(t.clone(), processes_per_host) else {
            continue;
        };
        let Ok(tables) = routing::build(&wiring) else {
            continue;
        };
        for (s, routes) in tables.into_iter().enumerate() {
            Switch::new(s, &wiring, routes, fixture::switch_config(), START).invariants();
        }
    }
}

const NAMES: [&str; 8] = ["tor0", "tor1", "spine0", "spine1", "core", "tor0-h0", "h", ""];

fn name(d: &mut Draw) -> &'static str {
    NAMES[d.below(NAMES.len())]
}

fn addr(d: &mut Draw) -> &'static str {
    ["127.0.0.1:47000", "[::1]:9", "10.0.0.1", "x:1", "127.0.0.1:99999"][d.below(5)]
}

/// A TOML topology drawn from the input, line by line.
fn recipe(d: &mut Draw) -> String {
    let mut t = String::new();
    if d.bool() {
        let _ = writeln!(t, "name = \"fuzz\"\nlink_delay_ns = {}", d.number(1000));
    }
    for _ in 0..d.below(6) {
        let _ = writeln!(t, "[[switch]]\nname = \"{}\"", name(d));
        if d.bool() {
            let _ = writeln!(t, "hosts = {}", d.number(4) as i64);
        }
        if d.u8() % 4 == 0 {
            let _ = writeln!(t, "layer = {}", d.number(4) % 300);
        }
        if d.u8() % 4 == 0 {
            let _ = writeln!(t, "addr = \"{}\"", addr(d));
        }
    }
    for _ in 0..d.below(4) {
        let _ = writeln!(t, "[[host]]\nname = \"{}\"\nswitch = \"{}\"", name(d), name(d));
        if d.bool() {
            let _ = writeln!(t, "delay_ns = {}", d.number(1000) as i64);
        }
    }
    for _ in 0..d.below(6) {
        let _ = writeln!(t, "[[link]]\nbetween = [\"{}\", \"{}\"]", name(d), name(d));
    }
    if d.u8() % 4 == 0 {
        let _ = writeln!(
            t,
            "[controller]\nreplicas = {}\netcd = \"{}\"\naddr = \"{}\"",
            d.number(4) as i64,
            ["http://127.0.0.1:2379", "http://", "ftp://x"][d.below(3)],
            addr(d)
        );
    }
    t
}
