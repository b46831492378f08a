//! `onepipe netchain up` runs every switch and the controller as processes of their own over
//! loopback UDP; `onepipe netchain put|get|cas|lock|unlock|del` join as a process for one call
//! each (issue 43: "read, write, compare-and-swap and lock keys ... from the command line").

#![allow(clippy::disallowed_methods)] // waits on real time

mod common;

/// NetChain's testbed on addresses no other test uses.
fn write_topology(dir: &std::path::Path) -> std::path::PathBuf {
    write_topology_at(dir, 7200)
}

fn write_topology_at(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let net = format!("127.61.{}", 1 + std::process::id() % 250);
    // A name per test: each gets its own key file, made by its own `up`.
    let mut file = format!("name = \"netchain-test-{port}\"\n");
    for (i, s) in ["s0", "s1", "s2", "s3"].iter().enumerate() {
        file += &format!("[[switch]]\nname = \"{s}\"\naddr = \"{net}.{}:{port}\"\n", 1 + i);
    }
    for h in 0..5 {
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"s0\"\naddr = \"{net}.{}:{port}\"\n",
            10 + h
        );
    }
    for (a, b) in [("s0", "s1"), ("s0", "s3"), ("s1", "s2"), ("s3", "s2")] {
        file += &format!("[[link]]\nbetween = [\"{a}\", \"{b}\"]\n");
    }
    let path = dir.join("netchain.toml");
    std::fs::write(&path, file).unwrap();
    path
}

/// `onepipe netchain up --topology FILE`, running.
struct Up;

impl Up {
    fn start(file: &std::path::Path) -> common::Watched {
        let mut cmd = common::onepipe();
        cmd.args(["netchain", "up", "--topology"]).arg(file);
        common::Watched::start(cmd, "Ctrl-C stops them")
    }
}

/// Runs `onepipe netchain WORDS --topology FILE`; its first line of output and exit code.
fn netchain(file: &std::path::Path, words: &[&str]) -> (String, i32) {
    let out = common::onepipe()
        .arg("netchain")
        .args(&words[..1])
        .arg("--topology")
        .arg(file)
        .args(&words[1..])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (stdout, out.status.code().unwrap_or(-1))
}

#[test]
fn up_then_put_get_cas_lock_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("onepipe-netchain-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = write_topology(&dir);
    let _up = Up::start(&file);
    assert_eq!(
        netchain(&file, &["get", "k"]),
        ("(absent)".into(), 0),
        "a key never written"
    );
    assert_eq!(netchain(&file, &["put", "k", "v1"]), ("OK".into(), 0));
    assert_eq!(netchain(&file, &["get", "k", "--process", "3"]), ("v1".into(), 0));
    assert_eq!(netchain(&file, &["cas", "k", "v1", "v2"]), ("OK".into(), 0));
    assert_eq!(
        netchain(&file, &["cas", "k", "v1", "v3"]),
        ("not swapped: the value is v2".into(), 1)
    );
    assert_eq!(netchain(&file, &["lock", "L", "alice"]), ("acquired".into(), 0));
    assert_eq!(
        netchain(&file, &["lock", "L", "bob", "--process", "1"]),
        ("held by alice".into(), 1)
    );
    assert_eq!(
        netchain(&file, &["unlock", "L", "bob"]),
        ("held by alice".into(), 1)
    );
    assert_eq!(netchain(&file, &["unlock", "L", "alice"]), ("released".into(), 0));
    assert_eq!(netchain(&file, &["del", "k"]), ("OK".into(), 0));
    assert_eq!(netchain(&file, &["del", "k"]), ("absent already".into(), 1));
    let (_, code) = netchain(&file, &["get", "k", "--process", "4"]);
    assert_ne!(code, 0, "process 4 is the controller's");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A switch process killed (SIGKILL) under `netchain up`: the controller's probes find it
/// silent, its neighbours skip it, recovery brings every chain back to three switches, and every
/// key written before keeps its value.
#[test]
fn a_killed_switch_process_is_failed_over_and_its_keys_survive() {
    let dir = std::env::temp_dir().join(format!("onepipe-netchain-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = write_topology_at(&dir, 7210);
    let mut up = Up::start(&file);
    for i in 0..8 {
        assert_eq!(
            netchain(&file, &["put", &format!("k{i}"), &format!("v{i}")]),
            ("OK".into(), 0)
        );
    }
    let needle = format!("--node s1 --topology {}", file.display());
    let s1 = common::processes_naming(&needle);
    assert_eq!(s1.len(), 1, "one s1 process: {s1:?}");
    std::process::Command::new("kill")
        .args(["-9", &s1[0].0.to_string()])
        .status()
        .unwrap();
    // Read through failover: an attempt may time out until the neighbours skip s1.
    for i in 0..8 {
        let (value, _) = netchain(&file, &["get", &format!("k{i}"), "--timeout-ms", "500"]);
        assert_eq!(value, format!("v{i}"), "key k{i} after s1 died");
    }
    up.wait_for("Recovered { switch: 1");
    assert!(up.log.contains("switch s1 exited"), "{}", up.log);
    for i in 0..8 {
        assert_eq!(
            netchain(&file, &["put", &format!("k{i}"), "w"]),
            ("OK".into(), 0),
            "after recovery"
        );
        assert_eq!(netchain(&file, &["get", &format!("k{i}")]), ("w".into(), 0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
