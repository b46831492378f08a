//! One test per limit: a topology past it is refused with an error naming the limit, before
//! anything is built for it (a count of four billion would otherwise abort on allocation).

use super::*;
use crate::{Topology, Wiring, WiringError};

fn too_large<T: std::fmt::Debug>(t: Result<T, TopologyError>) -> (String, u64, u64) {
    match t {
        Err(TopologyError::TooLarge { what, count, max }) => (what, count, max),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn a_file_with_four_billion_hosts_is_refused_not_allocated() {
    let text = "[[switch]]\nname = \"tor\"\nhosts = 4000000000\n";
    let (what, count, max) = too_large(Topology::from_toml(text));
    assert!(what.contains("hosts"), "{what}");
    assert_eq!((count, max), (4_000_000_000, HOSTS_MAX as u64));
    let message = Topology::from_toml(text).unwrap_err().to_string();
    assert!(message.contains("limit of 1048576"), "{message}");
}

#[test]
fn hosts_summed_over_switches_and_listed_hosts_are_limited() {
    let mut text = String::new();
    for i in 0..17 {
        text += &format!("[[switch]]\nname = \"t{i}\"\nhosts = 65535\n");
    }
    let (what, count, _) = too_large(Topology::from_toml(&text));
    assert_eq!((what.as_str(), count), ("hosts", 17 * 65_535));
}

#[test]
fn hosts_under_one_switch_are_limited_by_its_ports() {
    let text = "[[switch]]\nname = \"tor\"\nhosts = 70000\n";
    let (what, count, max) = too_large(Topology::from_toml(text));
    assert!(what.contains("under switch `tor`"), "{what}");
    assert_eq!((count, max), (70_000, 65_535));
}

#[test]
fn switches_and_links_of_a_file_are_limited() {
    let switches = "[[switch]]\nname = \"s\"\n".repeat(SWITCHES_MAX + 1);
    assert_eq!(too_large(Topology::from_toml(&switches)).0, "switches");
    // Links as `validate` sees them (a file of a million links parses for seconds).
    let mut t = Topology::leaf_spine(1, 1, 1).unwrap();
    t.links = vec![t.links[0].clone(); LINKS_MAX + 1];
    assert_eq!(too_large(t.validate()).0, "links");
}

#[test]
fn delays_and_names_are_limited() {
    let default = "link_delay_ns = 10000000001\n[[switch]]\nname = \"a\"\nhosts = 1\n";
    assert_eq!(too_large(Topology::from_toml(default)).0, "link_delay_ns");
    let host =
        "[[switch]]\nname = \"a\"\n[[host]]\nname = \"h\"\nswitch = \"a\"\ndelay_ns = 18446744073709551615\n";
    assert!(too_large(Topology::from_toml(host)).0.contains("host `h`"));
    let link = "[[link]]\nbetween = [\"a\", \"b\"]\ndelay_ns = 20000000000\n";
    assert!(too_large(Topology::from_toml(link)).0.contains("link a-b"));
    let name = format!(
        "[[switch]]\nname = \"{}\"\nhosts = 1\n",
        "x".repeat(NAME_BYTES_MAX + 1)
    );
    assert!(too_large(Topology::from_toml(&name)).0.contains("name"));
    // At the limits, accepted.
    let fine = format!(
        "link_delay_ns = {DELAY_NS_MAX}\n[[switch]]\nname = \"{}\"\nhosts = 1\n",
        "x".repeat(NAME_BYTES_MAX)
    );
    assert!(Topology::from_toml(&fine).is_ok());
}

#[test]
fn a_file_larger_than_the_limit_is_not_read() {
    let dir = std::env::temp_dir().join(format!("onepipe-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.toml");
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(FILE_BYTES_MAX + 1).unwrap();
    let (what, ..) = too_large(Topology::from_file(&path));
    assert!(what.contains("bytes"), "{what}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Presets multiply their arguments: each product is checked before a switch is made, with
/// arithmetic that cannot overflow.
#[test]
fn presets_past_a_limit_are_refused_before_they_are_built() {
    assert_eq!(too_large(Topology::preset("single:4000000000")).0, "hosts");
    assert_eq!(too_large(Topology::preset("leaf-spine:70000,1,1")).0, "switches");
    assert_eq!(too_large(Topology::preset("leaf-spine:2000,1000,1")).0, "links");
    let huge = usize::MAX;
    assert_eq!(
        too_large(Topology::three_layer(huge, huge, huge, huge, huge)).0,
        "switches"
    );
    assert_eq!(too_large(Topology::three_layer(1, 2, 1, 1, 1 << 20)).0, "hosts");
    assert_eq!(too_large(Topology::preset("fat-tree:1000")).0, "switches");
    assert_eq!(too_large(Topology::fat_tree(usize::MAX - 1)).0, "switches");
    assert!(Topology::preset("fat-tree:16").is_ok());
}

#[test]
fn processes_per_host_and_processes_are_limited_before_wiring() {
    let one = Topology::single_switch(1).unwrap();
    assert_eq!(
        Wiring::new(one.clone(), PROCESSES_PER_HOST_MAX + 1).unwrap_err(),
        WiringError::TooManyProcessesPerHost(PROCESSES_PER_HOST_MAX + 1)
    );
    assert!(Wiring::new(one, PROCESSES_PER_HOST_MAX).is_ok());
    let many = Topology::leaf_spine(17, 1, 61).unwrap();
    assert_eq!(
        Wiring::new(many, 1024).unwrap_err(),
        WiringError::TooManyProcesses(17 * 61 * 1024)
    );
    // Ports of a ToR: 64 hosts of 1024 processes are 65,536 ports, one too many.
    let rack = Topology::single_switch(64).unwrap();
    assert!(matches!(
        Wiring::new(rack, 1024).unwrap_err(),
        WiringError::TooManyPorts { ports: 65_536, .. }
    ));
}

/// fat-tree:K has K³/2 links: 128 is the largest accepted (docs/topology.md).
#[test]
fn the_largest_fat_tree_is_128() {
    assert_eq!(128usize.pow(3) / 2, LINKS_MAX);
    assert_eq!(too_large(Topology::fat_tree(130)).0, "links");
}
