//! 1Pipe over real UDP sockets on loopback: a switch on a thread and processes that join it,
//! each with its own socket, as separate OS processes would (the CLI's integration test runs
//! them as processes).

#![allow(clippy::disallowed_methods)] // waits on real time

use onepipe::udp::{UdpOptions, join, run_switch, run_switch_reporting};
use onepipe_fabric::Topology;
use onepipe_runtime::udp::UdpCounters;
use onepipe_wire::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A one-switch topology on addresses of its own (`tag` keeps tests apart, and the tests that
/// write their own topology take 3 and 4; the process id
/// keeps concurrent test runs apart).
fn topology(tag: u8, hosts: usize) -> Topology {
    let net = format!("127.{}.{}", 40 + tag, 1 + std::process::id() % 250);
    let mut file = format!("[[switch]]\nname = \"tor\"\naddr = \"{net}.1:7000\"\n");
    for h in 0..hosts {
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"tor\"\naddr = \"{net}.{}:7000\"\n",
            10 + h
        );
    }
    Topology::from_toml(&file).unwrap()
}

fn options(topology: Topology) -> UdpOptions {
    let mut o = UdpOptions::new(topology);
    o.beacon_interval = Duration::from_micros(200);
    o
}

#[test]
fn processes_over_udp_deliver_one_total_order() {
    const PROCESSES: usize = 3;
    const BROADCASTS: u64 = 200;
    let opts = options(topology(0, PROCESSES));
    let stop = Arc::new(AtomicBool::new(false));
    let switch_counters = Arc::new(UdpCounters::default());
    let switch = {
        let (opts, stop, counters) = (opts.clone(), stop.clone(), switch_counters.clone());
        std::thread::spawn(move || run_switch(&opts, "tor", &stop, &counters))
    };
    // Best effort loses what is sent to a switch that has not bound its socket yet, or to a
    // process its switch has not heard: `join` returns once the switch has heard the process,
    // so nothing is sent before then (the switch thread may start late on two busy cores).
    let mut procs: Vec<_> = (0..PROCESSES as u32).map(|p| join(&opts, p).unwrap().0).collect();
    let all: Vec<u32> = (0..PROCESSES as u32).collect();
    let mut sent = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen: Vec<Vec<(u32, u64)>> = vec![Vec::new(); PROCESSES];
    let total = BROADCASTS as usize * PROCESSES;
    while seen.iter().any(|s| s.len() < total) && std::time::Instant::now() < deadline {
        if sent < BROADCASTS {
            for p in procs.iter_mut() {
                let payload = sent.to_le_bytes();
                let scatter: Vec<(u32, &[u8])> = all.iter().map(|&d| (d, &payload[..])).collect();
                p.send_unreliable(&scatter).unwrap();
            }
            sent += 1;
        }
        for (i, p) in procs.iter_mut().enumerate() {
            while let Some(d) = p.recv() {
                seen[i].push((d.src, d.msg_id));
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    drop(procs);
    stop.store(true, Ordering::Relaxed);
    let counters = switch.join().unwrap().unwrap();
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.len(), total, "process {i} delivered {} of {total}", s.len());
        assert_eq!(s, &seen[0], "process {i} disagrees with process 0 on the order");
    }
    assert!(counters.forwarded >= total as u64 * PROCESSES as u64);
}

#[test]
fn strangers_are_dropped_and_counted_and_unknown_names_are_errors() {
    let opts = options(topology(1, 2));
    assert!(matches!(
        run_switch(&opts, "nope", &AtomicBool::new(false), &UdpCounters::default()),
        Err(onepipe::udp::UdpSystemError::UnknownSwitch { .. })
    ));
    assert!(matches!(
        join(&opts, 2),
        Err(onepipe::udp::UdpSystemError::UnknownProcess { process: 2, count: 2 })
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let switch = {
        let (opts, stop, counters) = (opts.clone(), stop.clone(), counters.clone());
        std::thread::spawn(move || run_switch(&opts, "tor", &stop, &counters))
    };
    let addr = opts.topology.switches[0].addr.unwrap();
    let stranger = std::net::UdpSocket::bind((addr.ip(), 0)).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counters.unknown_source.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
        stranger
            .send_to(b"OP\x01\x00\x00\x00\x00\x00garbage", addr)
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    switch.join().unwrap().unwrap();
    assert!(counters.unknown_source.load(Ordering::Relaxed) > 0);
    assert_eq!(
        counters.frames_in.load(Ordering::Relaxed),
        0,
        "nothing of the stranger's was taken"
    );
}

/// A joined process whose switch goes away says so (`check_fabric`) instead of waiting on in
/// silence; while the switch runs, its beacons keep the process's fabric live even with no
/// traffic at all.
#[test]
fn a_process_whose_switch_stops_reports_the_fabric_lost() {
    let mut opts = options(topology(2, 2));
    // 500 x 200 us = 100 ms: threads of a test run on two shared cores can stall for tens of
    // milliseconds (20 ms was exceeded once while the other tests of this file ran).
    opts.dead_after_intervals = 500;
    let stop = Arc::new(AtomicBool::new(false));
    let switch = {
        let (opts, stop) = (opts.clone(), stop.clone());
        std::thread::spawn(move || run_switch(&opts, "tor", &stop, &UdpCounters::default()))
    };
    let (me, _) = join(&opts, 0).unwrap();
    let limit = std::time::Duration::from_millis(100);
    // Idle, but live: at least half a second of checks that all pass.
    let live_until = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while std::time::Instant::now() < live_until {
        assert_eq!(me.check_fabric(), Ok(()), "silent for {:?}", me.fabric_silence());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    stop.store(true, Ordering::Relaxed);
    switch.join().unwrap().unwrap();
    std::thread::sleep(limit * 3);
    let lost = me.check_fabric().unwrap_err();
    assert!(lost.silent > limit && lost.limit == limit, "{lost:?}");
    assert!(lost.to_string().contains("switch or its link is down"), "{lost}");
}

/// The datagram a neighbour holding the fabric's key would send to `to`: `frames` after a
/// header numbered `seq`, of a run that started at epoch 1 and sent now.
fn datagram(opts: &UdpOptions, to: std::net::SocketAddr, seq: u32, frames: &[&[u8]]) -> Vec<u8> {
    let mut p = onepipe_runtime::udp::datagram::Packer::new(9000);
    for f in frames {
        p.push(f);
    }
    let header = onepipe_runtime::udp::datagram::Header {
        epoch: 1,
        peer_epoch: 0,
        sent_at_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        seq: Some(seq),
        limit: None,
    };
    p.seal(&header, &opts.udp.auth, to).to_vec()
}

/// The control messages in a datagram from the switch to `at` (none in a credit).
fn control_messages(
    opts: &UdpOptions,
    at: std::net::SocketAddr,
    d: &[u8],
) -> Vec<onepipe::control_msg::ControlMsg> {
    use onepipe_runtime::udp::datagram::{HEADER_LEN, frame_at, open};
    let mut out = Vec::new();
    let Ok((_, d)) = open(d, &opts.udp.auth, at) else {
        return out;
    };
    let mut at = HEADER_LEN;
    while let Ok(Some((range, next))) = frame_at(d, at) {
        out.extend(onepipe::control_msg::ControlMsg::decode(&d[range]).ok());
        at = next;
    }
    out
}

/// With a controller in the topology, a switch takes orders on its management port from the
/// controller's address only. A control frame from a stranger is dropped as from a stranger;
/// one from a fabric neighbour is a malformed fabric frame; garbage from the controller's
/// address is counted; and a real order from there is obeyed and answered there.
#[test]
fn control_frames_count_only_from_the_controller() {
    use onepipe::control_msg::ControlMsg;
    use onepipe_proto::controller::{Input, Member};
    let net = format!("127.{}.{}", 40 + 3, 1 + std::process::id() % 250);
    let file = format!(
        "[[switch]]\nname = \"tor\"\naddr = \"{net}.1:7000\"\n\
         [[host]]\nname = \"h0\"\nswitch = \"tor\"\naddr = \"{net}.10:7000\"\n\
         [[host]]\nname = \"h1\"\nswitch = \"tor\"\naddr = \"{net}.11:7000\"\n\
         [controller]\naddr = \"{net}.100:7000\"\n"
    );
    let opts = options(Topology::from_toml(&file).unwrap());
    let switch_addr: std::net::SocketAddr = format!("{net}.1:7000").parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let status = Arc::new(std::sync::Mutex::new(None));
    let switch = {
        let (opts, stop, counters, status) = (opts.clone(), stop.clone(), counters.clone(), status.clone());
        std::thread::spawn(move || {
            onepipe::udp::run_switch_reporting(&opts, "tor", &stop, &counters, &mut |s| {
                *status.lock().unwrap() = Some(s.clone());
                Vec::new()
            })
        })
    };
    let mut buf = [0u8; 256];
    let cut_0 = {
        let len = ControlMsg::CutInput(0).encode(&mut buf).unwrap();
        buf[..len].to_vec()
    };
    // A stranger, and process 0's address (a fabric neighbour) sending an order.
    let stranger = std::net::UdpSocket::bind(format!("{net}.50:0")).unwrap();
    let neighbour = std::net::UdpSocket::bind(format!("{net}.10:7000")).unwrap();
    let controller = std::net::UdpSocket::bind(format!("{net}.100:7000")).unwrap();
    controller
        .set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let garbage = [onepipe::control_msg::CONTROL_TAG, b'{', b'x'];
    let not_ours = ControlMsg::Input(Input::Register { process: 0 });
    let len = not_ours.encode(&mut buf).unwrap();
    let mut seq = 1_000;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let malformed = || {
        let s = status.lock().unwrap();
        s.as_ref().map_or((0, 0), |s: &onepipe::udp::SwitchStatus| {
            (s.unknown_protocol, s.control_malformed)
        })
    };
    while (counters.unknown_source.load(Ordering::Relaxed) == 0 || malformed().0 == 0 || malformed().1 < 2)
        && std::time::Instant::now() < deadline
    {
        let signed = |frames: &[&[u8]]| datagram(&opts, switch_addr, seq, frames);
        stranger.send_to(&signed(&[&cut_0]), switch_addr).unwrap();
        neighbour.send_to(&signed(&[&cut_0]), switch_addr).unwrap();
        controller
            .send_to(&signed(&[&garbage, &buf[..len]]), switch_addr)
            .unwrap();
        seq += 1;
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(counters.unknown_source.load(Ordering::Relaxed) > 0);
    let (no_protocol, control_malformed) = malformed();
    assert!(
        no_protocol > 0,
        "the neighbour's order was no fabric protocol's frame (docs/wire.md, \"Protocols\")"
    );
    assert!(
        control_malformed >= 2,
        "garbage and a misdirected input on the management port"
    );
    // Only the controller's order makes the switch cut an input and report it, to the
    // controller's address: had the neighbour's order to cut port 0 been taken, its report
    // would be waiting here too.
    let mut reports = Vec::new();
    let cut_1 = {
        let len = ControlMsg::CutInput(1).encode(&mut buf).unwrap();
        buf[..len].to_vec()
    };
    controller
        .send_to(&datagram(&opts, switch_addr, seq, &[&cut_1]), switch_addr)
        .unwrap();
    let mut d = [0u8; 65_536];
    let controller_addr = controller.local_addr().unwrap();
    while reports.is_empty() && std::time::Instant::now() < deadline {
        if let Ok((n, _)) = controller.recv_from(&mut d) {
            reports.extend(control_messages(&opts, controller_addr, &d[..n]));
        }
    }
    assert_eq!(
        reports,
        vec![ControlMsg::Input(Input::LinkDown {
            member: Member::Switch(0),
            port: 1,
            last_commit_ns: 0,
        })]
    );
    stop.store(true, Ordering::Relaxed);
    switch.join().unwrap().unwrap();
}

/// Fault injection in our own links (a socket cannot fail one link): once the status reader
/// asks a running switch to cut its link to process 0, the switch sends that process nothing
/// more (its beacons stop), and what the process sends is counted as arriving on a cut link,
/// not taken. The link to process 1 carries on.
#[test]
fn a_cut_link_is_dead_both_ways_and_the_others_carry_on() {
    let net = format!("127.{}.{}", 40 + 4, 1 + std::process::id() % 250);
    let file = format!(
        "[[switch]]\nname = \"tor\"\naddr = \"{net}.1:7000\"\n\
         [[host]]\nname = \"h0\"\nswitch = \"tor\"\naddr = \"{net}.10:7000\"\n\
         [[host]]\nname = \"h1\"\nswitch = \"tor\"\naddr = \"{net}.11:7000\"\n"
    );
    let opts = options(Topology::from_toml(&file).unwrap());
    let switch_addr: std::net::SocketAddr = format!("{net}.1:7000").parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let cut = Arc::new(AtomicBool::new(false));
    let switch = {
        let (opts, stop, counters, cut) = (opts.clone(), stop.clone(), counters.clone(), cut.clone());
        std::thread::spawn(move || {
            onepipe::udp::run_switch_reporting(&opts, "tor", &stop, &counters, &mut |_| match cut
                .load(Ordering::Relaxed)
            {
                true => vec![format!("{}0", onepipe::udp::PROCESS_PEER)],
                false => Vec::new(),
            })
        })
    };
    let hosts: Vec<std::net::UdpSocket> = (0..2)
        .map(|h| {
            let s = std::net::UdpSocket::bind(format!("{net}.{}:7000", 10 + h)).unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_millis(20)))
                .unwrap();
            s
        })
        .collect();
    let mut d = [0u8; 65_536];
    // Datagrams each host got from the switch in `for_ms`.
    let mut heard = |for_ms: u64| -> [u32; 2] {
        let mut got = [0; 2];
        let until = std::time::Instant::now() + std::time::Duration::from_millis(for_ms);
        while std::time::Instant::now() < until {
            for (h, s) in hosts.iter().enumerate() {
                while let Ok((_, from)) = s.recv_from(&mut d) {
                    got[h] += (from == switch_addr) as u32;
                }
            }
        }
        got
    };
    let before = heard(300);
    assert!(
        before.iter().all(|&n| n > 0),
        "both hosts hear beacons: {before:?}"
    );
    cut.store(true, Ordering::Relaxed);
    // The switch takes the request at its next status report (every 200 ms).
    let _ = heard(500);
    // These hosts never grant credit: past its first window the switch reaches them only with
    // probes, which back off to one per 640 ms (`PROBE_AFTER_MAX`), so listen longer than that.
    let after = heard(800);
    assert_eq!(after[0], 0, "the cut link still carries datagrams: {after:?}");
    assert!(after[1] > 0, "the other link stopped too: {after:?}");
    let seq = 7;
    hosts[0]
        .send_to(&datagram(&opts, switch_addr, seq, &[]), switch_addr)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while counters.cut_datagrams.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(counters.cut_datagrams.load(Ordering::Relaxed), 1);
    assert_eq!(counters.unknown_source.load(Ordering::Relaxed), 0);
    stop.store(true, Ordering::Relaxed);
    switch.join().unwrap().unwrap();
}

/// Joining a fabric whose switch does not run fails with a clear error instead of handing out
/// a process whose messages go nowhere.
#[test]
fn joining_a_fabric_that_is_not_up_is_an_error() {
    let mut opts = options(topology(5, 2));
    opts.join_timeout = Duration::from_millis(100);
    match join(&opts, 1) {
        Err(e @ onepipe::udp::UdpSystemError::NoAnswer { process: 1, .. }) => {
            assert!(e.to_string().contains("did not answer within 100 ms"), "{e}")
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("joined a fabric that is not there"),
    }
}

/// A process that joins after its switch declared its link dead (never heard) is sent to as
/// soon as `join` returns: the switch has heard it by then. Found by the CLI's integration
/// test, where the first broadcast to a process that had just joined was dropped as sent to a
/// gone peer.
#[test]
fn what_is_sent_to_a_process_as_soon_as_it_joined_arrives() {
    let mut opts = options(topology(6, 2));
    // 100 ms: longer than a test thread stalls on two shared cores, short enough to wait out.
    opts.dead_after_intervals = 500;
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let dead_links = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let switch = {
        let (opts, stop, counters, dead) = (opts.clone(), stop.clone(), counters.clone(), dead_links.clone());
        std::thread::spawn(move || {
            let mut report = |s: &onepipe::udp::SwitchStatus| {
                dead.store(
                    s.inputs.iter().filter(|l| l.state == "dead").count(),
                    Ordering::Relaxed,
                );
                Vec::new()
            };
            run_switch_reporting(&opts, "tor", &stop, &counters, &mut report)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while dead_links.load(Ordering::Relaxed) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        dead_links.load(Ordering::Relaxed),
        2,
        "both process links dead before the joins"
    );
    let (mut sender, _) = join(&opts, 0).unwrap();
    let (mut receiver, _) = join(&opts, 1).unwrap();
    sender.send_unreliable(&[(1, b"first".as_slice())]).unwrap();
    let got = receiver.recv_timeout(std::time::Duration::from_secs(5));
    drop((sender, receiver));
    stop.store(true, Ordering::Relaxed);
    switch.join().unwrap().unwrap();
    assert_eq!(
        got.map(|d| d.payload),
        Some(b"first".to_vec()),
        "gone-peer drops {}",
        counters.peer_gone_frames.load(Ordering::Relaxed)
    );
}
