//! A host without the fabric's key changes nothing (docs/udp.md, "Authentication"): over real
//! UDP sockets, an attacker bound to the address of a process that left replays that
//! process's datagrams from its earlier run, replays what the switch sent it, and forges
//! datagrams under a key of its own and without one, while two processes broadcast. They
//! deliver exactly what they sent, in one order, and the switch counts every drop.

#![allow(clippy::disallowed_methods)] // waits on real time

use onepipe::udp::{UdpOptions, join, run_switch};
use onepipe_fabric::Topology;
use onepipe_runtime::udp::UdpCounters;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::datagram::{Header, Packer};
use onepipe_runtime::udp::link::START_SKEW_MAX;
use onepipe_wire::packet::{Opcode, Repr};
use onepipe_wire::{Duration, Timestamp48};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const BROADCASTS: u64 = 200;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A datagram a stranger makes: `frames` under `auth` (its own key, or none), for `to`.
fn forged(auth: &Auth, to: SocketAddr, seq: u32, frames: &[&[u8]]) -> Vec<u8> {
    let mut p = Packer::new(9000);
    for f in frames {
        p.push(f);
    }
    let header = Header {
        epoch: now_ns(),
        peer_epoch: 0,
        sent_at_ns: now_ns(),
        seq: Some(seq),
        limit: Some(seq),
    };
    p.seal(&header, auth, to).to_vec()
}

/// What a forger would want the switch to take from process 2: a beacon that pins its
/// register far ahead, and a message in its name.
fn forged_frames() -> Vec<Vec<u8>> {
    let packet = |opcode, ts: u64, payload: &[u8]| {
        Repr {
            opcode,
            end_of_message: true,
            ecn: false,
            ack: false,
            sack: false,
            recall: false,
            msg_ts: Timestamp48::new(ts),
            barrier: Timestamp48::new(ts),
            commit_barrier: Timestamp48::new(ts),
            psn: 0,
            src: 2,
            dst: 0,
            msg_id: 7,
            frag_index: 0,
            frag_count: 1,
            link_id: 0,
            payload_len: payload.len() as u16,
        }
        .to_vec()
    };
    let ahead = now_ns() + 3_600_000_000_000;
    vec![
        packet(Opcode::Beacon, ahead, b""),
        packet(Opcode::Data, now_ns(), b"forged"),
    ]
}

/// Datagrams waiting on `socket` within `for_ms`.
fn capture(socket: &UdpSocket, for_ms: u64) -> Vec<Vec<u8>> {
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(10)))
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_millis(for_ms);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while std::time::Instant::now() < until {
        if let Ok(n) = socket.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
    }
    got
}

#[test]
fn forged_and_replayed_datagrams_change_nothing() {
    let net = format!("127.{}.{}", 40 + 8, 1 + std::process::id() % 250);
    let mut file = format!("[[switch]]\nname = \"tor\"\naddr = \"{net}.1:7000\"\n");
    for h in 0..3 {
        file += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"tor\"\naddr = \"{net}.{}:7000\"\n",
            10 + h
        );
    }
    let mut opts = UdpOptions::new(Topology::from_toml(&file).unwrap());
    opts.beacon_interval = Duration::from_micros(200);
    // 100 ms: process 2 is gone, and its link must time out for the others to deliver.
    opts.dead_after_intervals = 500;
    let switch_addr: SocketAddr = format!("{net}.1:7000").parse().unwrap();
    let p2_addr: SocketAddr = format!("{net}.12:7000").parse().unwrap();

    // An earlier run of process 2, while no switch runs: the attacker, on the switch's free
    // address, records what it sends (genuine, signed for the switch's address).
    let earlier_run = {
        let at_switch = UdpSocket::bind(switch_addr).unwrap();
        let mut quick = opts.clone();
        quick.join_timeout = Duration::ZERO;
        let (p2, _) = join(&quick, 2).unwrap();
        let got = capture(&at_switch, 100);
        drop(p2);
        got
    };
    assert!(!earlier_run.is_empty(), "process 2 sent nothing to record");
    // Old enough that no clock skew makes them look sent to the switch's coming run.
    std::thread::sleep(std::time::Duration::from_nanos(START_SKEW_MAX.as_nanos()) * 2);

    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(UdpCounters::default());
    let switch = {
        let (opts, stop, counters) = (opts.clone(), stop.clone(), counters.clone());
        std::thread::spawn(move || run_switch(&opts, "tor", &stop, &counters))
    };
    let mut procs: Vec<_> = (0..2).map(|p| join(&opts, p).unwrap().0).collect();
    // Process 2 left; the attacker takes its address and hears the switch's datagrams to it.
    let attacker = UdpSocket::bind(p2_addr).unwrap();
    let from_switch = capture(&attacker, 50);
    assert!(
        !from_switch.is_empty(),
        "the switch sent process 2 nothing to record"
    );
    let stranger_key = Auth::generate().unwrap();
    let frames = forged_frames();
    let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let attack = |round: u32| {
        for d in earlier_run.iter().chain(&from_switch) {
            attacker.send_to(d, switch_addr).unwrap();
        }
        for auth in [&stranger_key, &Auth::Off] {
            attacker
                .send_to(&forged(auth, switch_addr, round, &frames), switch_addr)
                .unwrap();
        }
    };

    let all = [0u32, 1];
    let mut seen: Vec<Vec<(u32, u64, Vec<u8>)>> = vec![Vec::new(); 2];
    let total = 2 * BROADCASTS as usize;
    let mut sent = 0;
    let mut round = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen.iter().any(|s| s.len() < total) && std::time::Instant::now() < deadline {
        if sent < BROADCASTS {
            for (i, p) in procs.iter_mut().enumerate() {
                let payload = (i as u64 * 1_000_000 + sent).to_le_bytes();
                let scatter: Vec<(u32, &[u8])> = all.iter().map(|&d| (d, &payload[..])).collect();
                p.send_unreliable(&scatter).unwrap();
            }
            sent += 1;
        }
        if sent % 10 == 0 {
            attack(round);
            round += 1;
        }
        for (i, p) in procs.iter_mut().enumerate() {
            while let Some(d) = p.recv() {
                seen[i].push((d.src, d.msg_id, d.payload));
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    drop(procs);
    stop.store(true, Ordering::Relaxed);
    let switch_counters = switch.join().unwrap().unwrap();
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.len(), total, "process {i} delivered {} of {total}", s.len());
        assert_eq!(s, &seen[0], "process {i} disagrees with process 0 on the order");
        assert!(
            s.iter().all(|(src, _, _)| *src < 2),
            "a message in process 2's name"
        );
    }
    let mut payloads: Vec<&Vec<u8>> = seen[0].iter().map(|(_, _, p)| p).collect();
    payloads.sort();
    payloads.dedup();
    assert_eq!(payloads.len(), total, "each message once");
    let c = counters.snapshot();
    assert!(round > 0);
    assert!(c.stale_epoch >= earlier_run.len() as u64, "{c:?}");
    assert!(c.bad_tag >= from_switch.len() as u64 + round as u64, "{c:?}");
    assert!(c.unauthenticated >= round as u64, "{c:?}");
    assert_eq!(c.resyncs, 0, "no restart was taken: {c:?}");
    assert_eq!(switch_counters.spoofed_source, 0);
}
