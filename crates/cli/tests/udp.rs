//! A topology as separate OS processes over loopback UDP: `onepipe up` starts its switches,
//! application processes join through the library, the checker verifies what they delivered,
//! and `onepipe down` leaves no process behind.

#![allow(clippy::disallowed_methods)] // waits on real time

mod common;

use common::KillOnDrop;

use onepipe::udp::{UdpOptions, join};
use onepipe_check::{Event, ProcessLog, check_all, check_no_loss};
use onepipe_fabric::Topology;
use onepipe_wire::Duration;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Two racks under a spine, two hosts each, on addresses no other test uses.
fn write_topology(dir: &std::path::Path) -> std::path::PathBuf {
    let net = format!("127.60.{}", 1 + std::process::id() % 250);
    let mut file = String::from("name = \"two-racks\"\n");
    for (i, s) in ["tor0", "tor1", "spine"].iter().enumerate() {
        file += &format!("[[switch]]\nname = \"{s}\"\naddr = \"{net}.{}:7100\"\n", 1 + i);
    }
    for h in 0..4 {
        let tor = if h < 2 { "tor0" } else { "tor1" };
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"{tor}\"\naddr = \"{net}.{}:7100\"\n",
            10 + h
        );
    }
    file += "[[link]]\nbetween = [\"tor0\", \"spine\"]\n[[link]]\nbetween = [\"tor1\", \"spine\"]\n";
    let path = dir.join("two-racks.toml");
    std::fs::write(&path, file).unwrap();
    path
}

enum Step {
    Sent(u64),
    Delivered { ts: u64, src: u32, id: u64 },
}

#[test]
fn up_join_verify_down() {
    const BROADCASTS: u64 = 100;
    let dir = std::env::temp_dir().join(format!("onepipe-udp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = write_topology(&dir);
    let beacon = ["--beacon-interval-us", "200"];
    // tor1 runs as if on another machine whose clock is 3 ms ahead: inspect must then compare
    // rack 1 with rack 0 through the spine, which hears tor1 from below.
    let mut up = KillOnDrop(
        common::onepipe()
            .arg("up")
            .arg(&file)
            .args(beacon)
            .arg("--switch-clock-offset=tor1=3000")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(up.0.stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("stops them") {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "up exited: {banner}");
        banner += &line;
    }
    // Read to the end, so that nothing `up` and its switches say blocks them on a full pipe;
    // printed after `up` exits (shown when the test fails).
    let said = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        rest
    });
    // `up` prints its banner once every switch has reported: all of them run.
    let running = common::processes_naming(file.to_str().unwrap());
    assert_eq!(running.len(), 4, "up and three switches: {running:?}");

    let topology = Topology::from_file(&file).unwrap();
    let mut opts = UdpOptions::new(topology.clone());
    // The key `up` made for the topology (docs/udp.md, "Authentication").
    opts.udp.auth = onepipe::keys::fabric_auth(&topology, None, false).unwrap();
    opts.beacon_interval = Duration::from_micros(200);
    // The clocks of processes 2 and 3 (rack 1) run 5 ms ahead: skew to measure (1Pipe pays it
    // in latency only).
    const SKEW_US: f64 = 5_000.0;
    let procs: Vec<_> = (0..4)
        .map(|p| {
            let mut o = opts.clone();
            o.clock_offset_ns = if p >= 2 { (SKEW_US * 1e3) as i64 } else { 0 };
            join(&o, p).unwrap()
        })
        .collect();
    let sockets: Vec<_> = procs.iter().map(|(_, c)| c.clone()).collect();
    let mut procs: Vec<_> = procs.into_iter().map(|(p, _)| p).collect();
    let everyone: Vec<u32> = (0..4).collect();
    let mut steps: Vec<Vec<Step>> = (0..4).map(|_| Vec::new()).collect();
    let mut delivered = vec![0u64; 4];
    let mut sent = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while delivered.iter().any(|&d| d < 4 * BROADCASTS) && std::time::Instant::now() < deadline {
        for (p, proc_) in procs.iter_mut().enumerate() {
            if sent < BROADCASTS {
                let payload = sent.to_le_bytes();
                let scatter: Vec<(u32, &[u8])> = everyone.iter().map(|&d| (d, &payload[..])).collect();
                let id = proc_.send_unreliable(&scatter).unwrap();
                steps[p].push(Step::Sent(id));
            }
            while let Some(d) = proc_.recv() {
                delivered[p] += 1;
                steps[p].push(Step::Delivered {
                    ts: d.ts.as_nanos(),
                    src: d.src,
                    id: d.msg_id,
                });
            }
        }
        sent += 1;
        std::thread::sleep(std::time::Duration::from_micros(300));
    }
    // While the processes run, every switch reports and no barrier is stalled. Reports come
    // every 200 ms: wait for ones made well after the traffic, so that the switches have heard
    // beacons from idle processes. A busy process's frames carry the barrier of what waits in
    // its queue, below its clock: the clock estimates need moments with an empty queue.
    let unix_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let quiet_from_ns = unix_ns() + 300_000_000;
    let inspect = || {
        let out = common::onepipe()
            .args(["inspect", "--json", "--stall-ms", "1000"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let reported_traffic = |i: &serde_json::Value| {
        let s = i["switches"].as_array().unwrap();
        s.len() == 3
            && s.iter()
                .all(|s| s["forwarded"].as_u64().unwrap() > 0 && s["at_ns"].as_u64().unwrap() > quiet_from_ns)
    };
    let mut inspection = inspect();
    let waited = std::time::Instant::now();
    while !reported_traffic(&inspection) && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        inspection = inspect();
    }
    let switches = inspection["switches"].as_array().unwrap();
    assert!(reported_traffic(&inspection), "{inspection}");
    assert!(inspection["not_reporting"].as_array().unwrap().is_empty());
    assert!(inspection["holding_back"].is_null(), "{inspection}");
    let tor0 = switches.iter().find(|s| s["node"] == "tor0").unwrap();
    let process_links: Vec<_> = tor0["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["peer"].as_str().unwrap().starts_with("process"))
        .collect();
    assert_eq!(process_links.len(), 2, "{tor0}");
    assert!(
        process_links
            .iter()
            .all(|l| l["state"] == "live" && l["barrier_lag_us"].is_f64())
    );
    // Each rack agrees within itself; only comparing tor1's processes with tor0's shows the
    // skew, and tor1 reads another clock (3 ms ahead): the spine, on tor0's clock, measures
    // tor1's slowest process, which joins the clocks. The skew is the injected 5 ms between the
    // processes (not the switches' 3 ms), give or take the difference in least one-way delays:
    // tens of us on an idle machine, but up to a scheduler time slice (ms) where a debug
    // build's threads outnumber the cores.
    let skew = &inspection["skew"];
    assert_eq!(skew["behind_at"], "tor0", "{skew}");
    assert_eq!(skew["ahead_at"], "tor1", "{skew}");
    assert_eq!(skew["switches"].as_array().unwrap().len(), 3, "{skew}");
    assert_eq!(skew["clocks"].as_array().unwrap().len(), 2, "{skew}");
    assert_eq!(skew["bridges"], serde_json::json!(["spine<-tor1"]), "{skew}");
    let spread = skew["spread_us"].as_f64().unwrap();
    assert!(
        (SKEW_US - 1_500.0..SKEW_US + 1_500.0).contains(&spread),
        "{skew} {process_links:?}"
    );
    drop(procs);

    let down = common::onepipe().arg("down").arg(&file).output().unwrap();
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let status = up.0.wait().unwrap();
    eprintln!("up said after its banner:\n{}", said.join().unwrap());
    assert!(status.success(), "up exited with {status}");
    assert!(
        common::processes_naming(file.to_str().unwrap()).is_empty(),
        "processes left behind"
    );
    let status_dir = onepipe::supervise::status_dir(&file).unwrap();
    assert!(!status_dir.exists(), "{} left behind", status_dir.display());
    assert!(!onepipe::supervise::state_path(&file).unwrap().exists());

    // The checker's logs: a scattering's timestamp is the one its receivers delivered it at.
    let mut ts_of = HashMap::new();
    for s in steps.iter().flatten() {
        if let Step::Delivered { ts, src, id } = s {
            ts_of.insert((*src, *id), *ts);
        }
    }
    let logs: Vec<ProcessLog> = steps
        .iter()
        .enumerate()
        .map(|(p, steps)| {
            let mut events = Vec::new();
            for s in steps {
                match *s {
                    Step::Sent(id) => {
                        let ts_ns = ts_of.get(&(p as u32, id)).copied().unwrap_or(0);
                        events.extend(everyone.iter().map(|&dst| Event::Send {
                            ts_ns,
                            dst,
                            msg_id: id,
                        }));
                    }
                    Step::Delivered { ts, src, id } => events.push(Event::Deliver {
                        ts_ns: ts,
                        src,
                        msg_id: id,
                    }),
                }
            }
            ProcessLog {
                process: p as u32,
                events,
            }
        })
        .collect();
    let report = check_all(&logs);
    assert!(report.ok(), "{report:?}");
    let missing: Vec<Vec<(u32, u64)>> = (0..4)
        .map(|r| {
            let got: std::collections::HashSet<(u32, u64)> = steps[r]
                .iter()
                .filter_map(|s| match *s {
                    Step::Delivered { src, id, .. } => Some((src, id)),
                    Step::Sent(_) => None,
                })
                .collect();
            (0..4u32)
                .flat_map(|src| {
                    steps[src as usize].iter().filter_map(move |s| match *s {
                        Step::Sent(id) => Some((src, id)),
                        Step::Delivered { .. } => None,
                    })
                })
                .filter(|m| !got.contains(m))
                .collect()
        })
        .collect();
    assert_eq!(
        delivered,
        vec![4 * BROADCASTS; 4],
        "every broadcast reached everyone; missing (sender, id) per receiver {missing:?}; \
         processes' sockets {sockets:?}; switches {inspection}"
    );
    assert!(check_no_loss(&logs).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The verified demo runs over real sockets too: every node with a UDP socket of its own.
/// What arrives must be in one total order.
#[test]
fn demo_over_udp_sockets_passes_the_checks() {
    let v = common::run_json(
        &[
            "demo",
            "--runtime",
            "udp",
            "--topology",
            "single:4",
            "--seconds",
            "0.3",
            "--json",
        ],
        None,
    );
    assert!(v["delivered"].as_u64().unwrap() > 1000, "{v}");
    assert!(v["udp"]["datagrams_out"].as_u64().unwrap() > 0, "{v}");
    for check in ["total_order", "fifo", "causality", "no_duplicates", "no_creation"] {
        assert_eq!(v["checks"][check], true, "{check}: {v}");
    }
    let refused = common::onepipe()
        .args(["demo", "--runtime", "udp", "--loss", "0.1"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("inproc runtime"));
}

/// The demo's default topology over udp (32 processes and their switches on this machine's
/// cores) loses nothing. With a thread per node and the inproc runtime's 50 us beacons it once
/// delivered an eighth as much, and nodes waiting for a core went silent long enough for their
/// switches to declare busy links dead: late drops and send failures.
#[test]
fn demo_over_udp_on_the_default_topology_drops_nothing() {
    let v = common::run_json(&["demo", "--runtime", "udp", "--seconds", "0.5", "--json"], None);
    assert_eq!(v["processes"], 32, "{v}");
    assert!(v["delivered"].as_u64().unwrap() > 10_000, "{v}");
    for counter in ["late_drops", "incomplete_drops", "send_failures", "links_removed"] {
        assert_eq!(v[counter], 0, "{counter}: {v}");
    }
    for check in ["total_order", "fifo", "causality", "no_duplicates", "no_creation"] {
        assert_eq!(v["checks"][check], true, "{check}: {v}");
    }
}

/// Host delegation (paper 6.2.3) over udp: plain switches that only route, a representative
/// per switch on a socket of its own, and every check still holds with nothing dropped. The
/// representatives' links are what the switches' registers hear: their removals count.
#[test]
fn demo_over_udp_with_host_representatives_drops_nothing() {
    let v = common::run_json(
        &[
            "demo",
            "--runtime",
            "udp",
            "--incarnation",
            "host",
            "--seconds",
            "0.5",
            "--json",
        ],
        None,
    );
    assert!(v["delivered"].as_u64().unwrap() > 10_000, "{v}");
    for counter in ["late_drops", "incomplete_drops", "send_failures", "links_removed"] {
        assert_eq!(v[counter], 0, "{counter}: {v}");
    }
    for check in ["total_order", "fifo", "causality", "no_duplicates", "no_creation"] {
        assert_eq!(v["checks"][check], true, "{check}: {v}");
    }
}

/// Bulk reliable broadcasts over udp (100 KB, 32 processes) overload the fabric: a packet
/// can wait behind seconds of queued data. With the RTO capped at 20 ms whatever the round
/// trip (~27 ms), nearly every packet was sent twice, connections went without progress for
/// `give_up_after` (then 500 ms), and ~450 of ~3,800 messages were given up on live receivers
/// (`send_failures`, `no_loss` false). Congestion marks on frames that waited keep the queues
/// shorter (`ecn_marked`).
#[test]
fn bulk_reliable_broadcasts_over_udp_give_nothing_up() {
    let v = common::run_json(
        &[
            "demo",
            "--runtime",
            "udp",
            "--reliable",
            "--message-bytes",
            "100000",
            "--seconds",
            "0.5",
            "--no-baseline",
            "--json",
        ],
        None,
    );
    assert_eq!(v["send_failures"], 0, "{v}");
    assert_eq!(v["checks"]["no_loss"], true, "{v}");
    assert_eq!(v["delivered"], v["messages_sent"], "{v}");
    assert!(v["ecn_marked"].as_u64().unwrap() > 0, "{v}");
    // Probes of blocked links back off: probing every 20 ms overran inboxes (2-16 per run).
    assert_eq!(v["udp"]["overrun_datagrams"], 0, "{v}");
}

/// A switch CPU that falls behind (paper 6.2.2) is named by `onepipe inspect`: its last beacon
/// waited past the file's `switch_cpu_delay_us` by more than `--cpu-lag-us`. Reports as the
/// switches write them (`onepipe switch --status-file`), read from `--status-dir`.
#[test]
fn inspect_names_the_switch_cpu_that_falls_behind() {
    let dir = std::env::temp_dir().join(format!("onepipe-cpu-lag-{}", std::process::id()));
    let statuses = dir.join("status");
    std::fs::create_dir_all(&statuses).unwrap();
    let file = dir.join("t.toml");
    std::fs::write(
        &file,
        "switch_cpu_delay_us = 100\n[[switch]]\nname = \"tor0\"\nhosts = 2\n\
         [[switch]]\nname = \"tor1\"\nhosts = 2\n[[switch]]\nname = \"spine\"\n\
         [[link]]\nbetween = [\"tor0\", \"spine\"]\n[[link]]\nbetween = [\"tor1\", \"spine\"]\n",
    )
    .unwrap();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (node, lag_last_us) in [("tor0", 120.0), ("tor1", 900.0), ("spine", 1_400.0)] {
        let status = onepipe::status::SwitchStatus {
            node: node.into(),
            at_ns: now_ns,
            cpu: Some(onepipe::status::CpuReport {
                lag_last_us,
                ..Default::default()
            }),
            ..Default::default()
        };
        std::fs::write(
            statuses.join(format!("{node}.json")),
            serde_json::to_vec(&status).unwrap(),
        )
        .unwrap();
    }
    let inspect = |lag_us: &str| {
        let out = common::onepipe()
            .args(["inspect", "--json", "--cpu-lag-us", lag_us, "--status-dir"])
            .arg(&statuses)
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(inspect("1000")["lagging_cpu"]["switch"], "spine");
    // 1400 us is within 100 + 1500: nobody is behind.
    assert!(inspect("1500")["lagging_cpu"].is_null());
    std::fs::remove_dir_all(&dir).unwrap();
}
