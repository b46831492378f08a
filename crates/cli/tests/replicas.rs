//! `onepipe controller` as a replica on etcd, on its own: bad settings are refused with a
//! message, and (with a live etcd, ONEPIPE_ETCD=http://HOST:PORT, as for crates/etcd's live
//! tests) a leader that loses its lease stops at once, exits with an error, and the standby
//! takes over. The failover in the middle of a recovery, with traffic, is in udp_failure.rs.

#![allow(clippy::disallowed_methods)] // drives real processes in real time

mod common;

use onepipe_etcd::gateway::RangeRequest;
use onepipe_etcd::testing::{TestEtcd, write_user_file};
use onepipe_etcd::{Client, Connect, Keys};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One switch with two hosts and a controller (`table` added to its table), on addresses of
/// their own; the topology's name, and so its keys in etcd, are this run's.
fn write_topology(dir: &Path, port: u16, table: &str) -> PathBuf {
    let net = format!("127.63.{}", 1 + std::process::id() % 250);
    let file = format!(
        "name = \"replicas-{}-{port}\"\n[[switch]]\nname = \"tor\"\naddr = \"{net}.1:{port}\"\n\
         [[host]]\nname = \"h0\"\nswitch = \"tor\"\naddr = \"{net}.10:{port}\"\n\
         [[host]]\nname = \"h1\"\nswitch = \"tor\"\naddr = \"{net}.11:{port}\"\n\
         [controller]\naddr = \"{net}.100:{port}\"\n{table}",
        std::process::id()
    );
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("replicas-{port}.toml"));
    std::fs::write(&path, file).unwrap();
    path
}

fn temp_dir(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("onepipe-replicas-{}-{test}", std::process::id()))
}

/// Runs `onepipe ARGS`, which must fail (exit code 2) within `limit`: its stderr.
fn refused(args: &[&str], limit: Duration) -> String {
    let started = Instant::now();
    let out = common::onepipe().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "onepipe {args:?}: {stderr}");
    assert!(
        started.elapsed() < limit,
        "onepipe {args:?} took {:?}",
        started.elapsed()
    );
    stderr
}

#[test]
fn bad_etcd_settings_are_refused_with_a_message() {
    let dir = temp_dir("bad");
    let plain = write_topology(&dir, 7401, "");
    let plain = plain.to_str().unwrap();
    let quick = Duration::from_secs(10);
    let e = refused(
        &["controller", "--topology", plain, "--etcd", "localhost:2379"],
        quick,
    );
    assert!(e.contains("expected http://HOST:PORT"), "{e}");
    // Nothing listens on port 1: refused at once, not a standby waiting forever.
    let e = refused(
        &["controller", "--topology", plain, "--etcd", "http://127.0.0.1:1"],
        quick,
    );
    assert!(
        e.contains("cannot join the election") && e.contains("unreachable"),
        "{e}"
    );
    let e = refused(&["controller", "--topology", plain, "--replica", "r0"], quick);
    assert!(e.contains("--replica needs etcd"), "{e}");
    let e = refused(
        &[
            "controller",
            "--topology",
            plain,
            "--etcd",
            "http://127.0.0.1:1",
            "--lease-ttl-secs",
            "0",
        ],
        quick,
    );
    assert!(e.contains("--lease-ttl-secs") && e.contains("1..=3600"), "{e}");
    let with_etcd = write_topology(&dir, 7402, "etcd = \"http://127.0.0.1:1\"\nreplicas = 2\n");
    let with_etcd = with_etcd.to_str().unwrap();
    let e = refused(&["controller", "--topology", with_etcd, "--log", "/tmp/x"], quick);
    assert!(e.contains("drop --log"), "{e}");
    let e = refused(&["up", with_etcd], quick);
    assert!(e.contains("cannot use etcd") && e.contains("unreachable"), "{e}");
    let no_etcd = write_topology(&dir, 7403, "replicas = 2\n");
    let e = refused(&["up", no_etcd.to_str().unwrap()], quick);
    assert!(e.contains("replicas = 2 needs etcd"), "{e}");
    assert!(common::processes_naming(&dir.display().to_string()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file of `mode` in `dir`.
fn file_of_mode(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// The files that secure etcd (docs/udp.md, "Securing etcd") are read before any call, from
/// the flags, the environment or the topology, and each one that is wrong is refused naming it.
#[test]
fn bad_etcd_credentials_and_tls_files_are_refused_naming_the_file() {
    let dir = temp_dir("secured");
    let plain = write_topology(&dir, 7406, "");
    let plain = plain.to_str().unwrap();
    let quick = Duration::from_secs(10);
    let open = file_of_mode(&dir, "open-user", "user = \"u\"\npassword = \"p\"\n", 0o644);
    let open = open.to_str().unwrap();
    let controller = |more: &[&str]| {
        let mut args = vec!["controller", "--topology", plain, "--replica", "r0"];
        args.extend_from_slice(more);
        refused(&args, quick)
    };
    let e = controller(&["--etcd", "http://127.0.0.1:1", "--etcd-user-file", open]);
    assert!(e.contains(open) && e.contains("chmod 600"), "{e}");
    let e = controller(&["--etcd", "http://127.0.0.1:1", "--etcd-ca-file", open]);
    assert!(e.contains("need an https:// endpoint"), "{e}");
    let missing = dir.join("missing-ca.pem");
    let missing = missing.to_str().unwrap();
    let e = controller(&["--etcd", "https://127.0.0.1:1", "--etcd-ca-file", missing]);
    assert!(e.contains("CA file") && e.contains(missing), "{e}");
    let e = controller(&["--etcd", "https://127.0.0.1:1", "--etcd-cert-file", missing]);
    assert!(e.contains("--etcd-key-file"), "{e}");
    let e = controller(&["--etcd-user-file", open]);
    assert!(e.contains("need etcd"), "{e}");
    // The environment names the credentials file when no flag does.
    let out = common::onepipe()
        .args(["controller", "--topology", plain, "--etcd", "http://127.0.0.1:1"])
        .env(onepipe_etcd::USER_FILE_ENV, open)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains(open) && e.contains("chmod 600"), "{e}");
    // The topology names it, relative to the topology file; `up` reads it before it starts
    // anything.
    let table = "etcd = \"http://127.0.0.1:1\"\nreplicas = 2\netcd_user_file = \"open-user\"\n";
    let with_file = write_topology(&dir, 7407, table);
    let e = refused(&["up", with_file.to_str().unwrap()], quick);
    assert!(e.contains(open) && e.contains("credentials file"), "{e}");
    let e = refused(&["up", plain, "--etcd-user-file", open], quick);
    assert!(e.contains("need etcd"), "{e}");
    assert!(common::processes_naming(&dir.display().to_string()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A replica process and every line it printed.
struct Replica {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    fn start(file: &Path, url: &str, name: &str) -> Replica {
        let mut child = common::onepipe()
            .args(["controller", "--topology"])
            .arg(file)
            .args(["--etcd", url, "--replica", name, "--lease-ttl-secs", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        for from in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let into = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(from).lines().map_while(Result::ok) {
                    into.lock().unwrap().push(line);
                }
            });
        }
        Replica { child, lines }
    }

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits until a line contains `text`; when.
    fn wait_for(&self, text: &str, limit: Duration) -> Instant {
        let started = Instant::now();
        while !self.output().contains(text) {
            assert!(started.elapsed() < limit, "no `{text}` in:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(5));
        }
        Instant::now()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs etcd: .ci/run starts one; or ONEPIPE_ETCD=http://127.0.0.1:2379 cargo test -p onepipe-cli --test replicas -- --ignored"]
fn a_leader_that_loses_its_lease_stops_at_once_and_the_standby_takes_over() {
    let url = std::env::var("ONEPIPE_ETCD").expect("set ONEPIPE_ETCD=http://HOST:PORT");
    let dir = temp_dir("lease");
    let file = write_topology(&dir, 7404, "");
    let name = onepipe_fabric::Topology::from_file(&file).unwrap().name;
    let prefix = format!("/onepipe/{name}/controller");
    let client = Client::new(&Connect::new(&url), Duration::from_secs(2)).unwrap();

    let a = Replica::start(&file, &url, "a");
    a.wait_for("controller of", Duration::from_secs(10));
    let mut b = Replica::start(&file, &url, "b");
    b.wait_for("replica b: standing by (a leads)", Duration::from_secs(10));
    // b stands by without touching the controller's address, which a holds: binding it would
    // have failed and ended b.
    std::thread::sleep(Duration::from_millis(500));
    assert!(b.child.try_wait().unwrap().is_none(), "{}", b.output());

    // etcd drops a's lease (as if it had expired): a stops acting and exits with an error
    // within a renewal interval (a third of the TTL), and b takes over.
    let leader = client
        .range(&RangeRequest::key(&Keys::new(&prefix).leader()))
        .unwrap();
    let lease = leader.kvs[0].lease.0;
    let revoked = Instant::now();
    client.revoke(lease).unwrap();
    let mut a = a;
    let status = loop {
        if let Some(s) = a.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            revoked.elapsed() < Duration::from_secs(3),
            "a still runs: {}",
            a.output()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let stopped_after = revoked.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(status.code(), Some(2), "{}", a.output());
    assert!(
        a.output().contains("replica a stopped acting as the controller"),
        "{}",
        a.output()
    );
    let took_over = b.wait_for("replica b: leads", Duration::from_secs(10));
    b.wait_for("controller of", Duration::from_secs(10));
    eprintln!(
        "a stopped {stopped_after:?} after its lease was revoked; b led {:?} after",
        took_over - revoked
    );
    assert!(stopped_after < Duration::from_millis(1_500), "{stopped_after:?}");

    // Stopped, b resigns: the leader key goes with its lease.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(b.child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = b.child.wait().unwrap();
    assert!(status.success(), "{}", b.output());
    assert!(b.output().contains("replica b: resigned"), "{}", b.output());
    assert_eq!(onepipe_etcd::group::leader(&client, &prefix).unwrap(), None);
    onepipe_etcd::group::delete_log(&client, &prefix).unwrap();
    assert!(common::processes_naming(&dir.display().to_string()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `onepipe controller` on an etcd with authentication on (one of the test's own,
/// docs/udp.md "Securing etcd"): refused without credentials, it leads with the credentials
/// file the topology names.
#[test]
#[ignore = "needs etcd on PATH: .ci/run installs it; or cargo test -p onepipe-cli --test replicas -- --ignored"]
fn a_replica_with_the_topologys_credentials_leads_on_an_etcd_with_authentication_on() {
    let dir = temp_dir("auth");
    std::fs::create_dir_all(&dir).unwrap();
    let mut etcd = TestEtcd::start(&dir, "http", &[]).unwrap();
    etcd.wait_until_up(&Client::new(&etcd.connect(), Duration::from_secs(2)).unwrap())
        .unwrap();
    etcd.enable_auth("onepipe", "a password", "/onepipe/").unwrap();
    let url = etcd.endpoint().to_string();
    write_user_file(&dir.join("user.toml"), "onepipe", "a password").unwrap();

    let bare = write_topology(&dir, 7408, &format!("etcd = \"{url}\"\n"));
    let e = refused(
        &[
            "controller",
            "--topology",
            bare.to_str().unwrap(),
            "--replica",
            "a",
        ],
        Duration::from_secs(10),
    );
    assert!(
        e.contains("no credentials") && e.contains("user name is empty"),
        "{e}"
    );

    let table = format!("etcd = \"{url}\"\netcd_user_file = \"user.toml\"\n");
    let file = write_topology(&dir, 7409, &table);
    let a = Replica::start(&file, &url, "a");
    a.wait_for("replica a: leads", Duration::from_secs(10));
    a.wait_for("controller of", Duration::from_secs(10));
    drop(a);
    drop(etcd);
    assert!(common::processes_naming(&dir.display().to_string()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
