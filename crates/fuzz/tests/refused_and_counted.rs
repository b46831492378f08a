//! Every class of bad input a running node reads (issue 42): a datagram, each kind of 1Pipe
//! frame, a control message, a log record; and a topology file, which only a starting process
//! reads. Each is refused with a typed error and, where it reaches a running node, counted
//! in a counter that node's status shows.

use onepipe::control_msg::{CONTROL_TAG, ControlMsg};
use onepipe::control_node::{ControllerNode, Mgmt, RouteCache, mgmt_port};
use onepipe::file_store::FileStore;
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId, Route, Topology, TopologyError};
use onepipe_fuzz::corpus;
use onepipe_fuzz::fixture::{self, START};
use onepipe_fuzz::targets::endpoint;
use onepipe_proto::controller::store::{Event, MemoryStore, Record, Store, StoreError};
use onepipe_proto::controller::{ControllerConfig, Input, Member};
use onepipe_proto::switch::SwitchNode;
use onepipe_runtime::udp::auth::Auth;
use onepipe_runtime::udp::datagram::{HEADER_LEN, Header, Packer, control, parse_header};
use onepipe_runtime::udp::{UdpConfig, UdpCounters, UdpDriver};
use onepipe_wire::Timestamp48;
use onepipe_wire::packet::{Opcode, Packet, ParseError, Repr, flags};
use onepipe_wire::protocol::ONEPIPE;

fn switch(id: usize) -> SwitchNode {
    fixture::switch_node(id)
}

/// What a switch node drops as bad input: its program's malformed frames and the pipeline's
/// frames of no protocol it runs (`onepipe inspect` shows their sum).
fn switch_malformed(node: &SwitchNode) -> u64 {
    node.program(ONEPIPE).expect("1Pipe").counters().malformed + node.counters().unknown_protocol
}

/// A valid frame of each kind, then damaged in the way that kind can be: each is a
/// `ParseError`.
fn bad_frames() -> Vec<(Vec<u8>, ParseError)> {
    let ts = Timestamp48::new(1_000);
    let beacon = Repr::beacon(ts, ts, 0);
    let data = Repr {
        opcode: Opcode::Data,
        src: 1,
        dst: 0,
        payload_len: 4,
        ..beacon
    };
    let with = |repr: Repr, edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = repr.to_vec();
        edit(&mut f);
        f
    };
    let mut out = vec![
        (vec![0x21; 10], ParseError::Truncated),
        (with(data, &|f| f[0] = 0x31), ParseError::BadVersion),
        (with(data, &|f| f[0] = 0x29), ParseError::UnknownOpcode),
        (with(data, &|f| f[1] |= 0x80), ParseError::UnknownFlags),
        (with(data, &|f| f[43] = 0), ParseError::BadFragment),
    ];
    // Beacon and NAK with a payload, an ACK whose payload is not one, a prepare recalling with
    // message bytes, a data packet with the ACK flag.
    out.push((
        with(
            Repr {
                payload_len: 2,
                ..beacon
            },
            &|_| {},
        ),
        ParseError::UnexpectedPayload,
    ));
    out.push((
        with(
            Repr {
                opcode: Opcode::Nak,
                payload_len: 1,
                ..data
            },
            &|_| {},
        ),
        ParseError::UnexpectedPayload,
    ));
    out.push((
        with(
            Repr {
                opcode: Opcode::Ack,
                payload_len: 15,
                ..data
            },
            &|_| {},
        ),
        ParseError::UnexpectedPayload,
    ));
    out.push((
        with(
            Repr {
                opcode: Opcode::Prepare,
                ..data
            },
            &|f| f[1] |= flags::RECALL,
        ),
        ParseError::UnexpectedPayload,
    ));
    out.push((with(data, &|f| f[1] |= flags::ACK), ParseError::UnexpectedPayload));
    out
}

#[test]
fn every_kind_of_bad_frame_is_an_error_and_counted_at_a_switch_and_a_host() {
    let frames = bad_frames();
    let mut seen: Vec<ParseError> = Vec::new();
    let mut sw = switch(0);
    let mut host = endpoint::host(0);
    for (i, (frame, error)) in frames.iter().enumerate() {
        let parsed = Packet::new_checked(&frame[..]).and_then(|p| Repr::parse(&p));
        assert_eq!(parsed, Err(*error), "frame {i}");
        seen.push(*error);
        let mut f = frame.clone();
        let route = sw.classify(START, 0, &f);
        assert_eq!(route, Route::Drop, "a switch forwards no bad frame (frame {i})");
        sw.handle_frame(START, 0, &mut f, route);
        assert_eq!(
            switch_malformed(&sw),
            i as u64 + 1,
            "counted at the switch (frame {i})"
        );
        host.handle_frame(START, 0, &mut frame.clone(), Route::Consume);
        assert_eq!(
            host.endpoint.counters().malformed,
            i as u64 + 1,
            "counted at the host (frame {i})"
        );
    }
    for e in ParseError::ALL {
        assert!(seen.contains(&e), "{e} is tested");
    }
    // The golden invalid vectors too, each its own error.
    let golden_invalid = corpus::golden()
        .into_iter()
        .filter(|v| Packet::new_checked(&v[..]).and_then(|p| Repr::parse(&p)).is_err());
    let before = (switch_malformed(&sw), host.endpoint.counters().malformed);
    let mut n = 0;
    for v in golden_invalid {
        let mut f = v.clone();
        let route = sw.classify(START, 1, &f);
        sw.handle_frame(START, 1, &mut f, route);
        host.handle_frame(START, 0, &mut v.clone(), Route::Consume);
        n += 1;
    }
    assert!(n >= 10);
    assert_eq!(
        (switch_malformed(&sw), host.endpoint.counters().malformed),
        (before.0 + n, before.1 + n)
    );
}

#[test]
#[allow(clippy::disallowed_methods)] // the driver checks a sender's run against the system clock
fn bad_datagrams_are_errors_and_counted_by_the_udp_driver() {
    let mut sw = switch(0);
    // Unauthenticated, so that what is refused here is refused for its framing (the tags'
    // refusals: the driver's and the datagram codec's own tests).
    let config = UdpConfig {
        auth: Auth::Off,
        ..UdpConfig::default()
    };
    let mut d = UdpDriver::bind_addr("127.0.0.1:0".parse().unwrap(), &config).unwrap();
    d.set_ports(&[None, None, None, None]);
    let to = d.local_addr().unwrap();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let header = |seq: Option<u32>, limit: Option<u32>| Header {
        epoch: now_ns,
        peer_epoch: 0,
        sent_at_ns: now_ns,
        seq,
        limit,
    };
    let counters = UdpCounters::default();
    let good = Repr::beacon(Timestamp48::new(5), Timestamp48::new(5), 0).to_vec();
    let sealed = |seq: u32, frames: &[&[u8]]| {
        let mut p = Packer::new(onepipe_runtime::udp::DATAGRAM_BYTES_LIMIT);
        for f in frames {
            p.push(f);
        }
        p.seal(&header(Some(seq), None), &Auth::Off, to).to_vec()
    };
    let mut bad: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"OP".to_vec(),
        {
            let mut x = sealed(1, &[&good]);
            x[0] = b'X';
            x
        },
        {
            let mut x = sealed(2, &[&good]);
            x[2] = 9;
            x
        },
        {
            let mut x = sealed(3, &[&good]);
            x[3] |= 0x40;
            x
        },
        {
            let (buf, len) = control(&header(None, Some(5)), &Auth::Off, to);
            let mut x = buf[..len].to_vec();
            x.push(0);
            x
        },
    ];
    for x in &bad {
        assert!(parse_header(x).is_err());
    }
    // Headers that parse, frames that do not: running past the end, empty, too long.
    let mut cut = sealed(10, &[&good]);
    cut.pop();
    let mut empty = sealed(11, &[]);
    empty.extend_from_slice(&[0, 0]);
    let long = sealed(12, &[&vec![0x21; FRAME_MAX + 1]]);
    for x in [&cut, &empty, &long] {
        assert!(parse_header(x).is_ok() && x.len() > HEADER_LEN);
    }
    bad.extend([cut, empty, long]);
    for x in &bad {
        d.receive_datagram(&mut sw, START, 0, x, &counters);
    }
    let c = counters.snapshot();
    assert_eq!(c.malformed, bad.len() as u64);
    assert_eq!(c.frames_in, 0, "no bad datagram hands a frame on");
}

/// The control frames a node's management port refuses: not decodable, and decodable but
/// not for it.
fn garbage_control_frames() -> Vec<Vec<u8>> {
    let mut input = vec![0u8; FRAME_MAX];
    let len = ControlMsg::Input(Input::Register { process: 0 })
        .encode(&mut input)
        .unwrap();
    input.truncate(len);
    vec![
        Vec::new(),
        vec![0x21, b'{'],
        vec![CONTROL_TAG, b'{'],
        vec![CONTROL_TAG],
        input,
    ]
}

fn deliver<N: Node>(node: &mut N, port: PortId, msg: &ControlMsg) {
    let mut buf = vec![0u8; FRAME_MAX];
    let len = msg.encode(&mut buf).unwrap();
    let mut f = buf[..len].to_vec();
    let route = node.classify(START, port, &f);
    node.handle_frame(START, port, &mut f, route);
}

#[test]
fn bad_control_frames_and_orders_naming_what_does_not_exist_are_counted() {
    let f = fixture::fabric();
    let routes = RouteCache::shared(&f.wiring);
    // A switch: undecodable frames and inputs are malformed; orders for ports it lacks refused.
    let mgmt = mgmt_port(&f.wiring, 0);
    let mut sw = Mgmt::managed(switch(0), Member::Switch(0), mgmt, routes.clone());
    for mut g in garbage_control_frames() {
        sw.handle_frame(START, mgmt, &mut g, Route::Consume);
    }
    deliver(&mut sw, mgmt, &ControlMsg::RemoveInputs(vec![99, 100]));
    deliver(&mut sw, mgmt, &ControlMsg::CutInput(99));
    deliver(&mut sw, mgmt, &ControlMsg::Readmit(vec![99]));
    let c = sw.counters();
    assert_eq!((c.malformed, c.refused), (5, 4));
    // A process: announcements naming a process that does not exist, or itself, are refused.
    let p = 0;
    let index = f.wiring.node_of_process(p);
    let mgmt = mgmt_port(&f.wiring, index);
    let mut host = Mgmt::managed(endpoint::host(p), Member::Process(p), mgmt, routes);
    for mut g in garbage_control_frames() {
        host.handle_frame(START, mgmt, &mut g, Route::Consume);
    }
    deliver(&mut host, mgmt, &ControlMsg::Avoid(vec![(0, 0)]));
    deliver(
        &mut host,
        mgmt,
        &ControlMsg::Announce {
            epoch: 1,
            failures: vec![(99, 5).into(), (p, 5).into()],
        },
    );
    deliver(
        &mut host,
        mgmt,
        &ControlMsg::Registered {
            failures: vec![(u32::MAX, 5).into()],
        },
    );
    let c = host.counters();
    assert_eq!((c.malformed, c.refused), (6, 3));
    // The controller: what is not an input, an input naming another member, and one naming a
    // port the switch does not have.
    let mut controller = ControllerNode::new(&f.wiring, ControllerConfig::default(), START);
    for mut g in garbage_control_frames().into_iter().take(4) {
        controller.handle_frame(START, 0, &mut g, Route::Consume);
    }
    deliver(&mut controller, 0, &ControlMsg::Hello);
    deliver(
        &mut controller,
        0,
        &ControlMsg::Input(Input::Register { process: 0 }),
    );
    deliver(
        &mut controller,
        0,
        &ControlMsg::Input(Input::Heard {
            member: Member::Switch(0),
            port: 99,
        }),
    );
    // Each is refused before the log or the controller sees it.
    assert_eq!(controller.timeline.refused, 7);
}

#[test]
fn bad_log_records_are_errors_or_counted_when_a_controller_replays_them() {
    let f = fixture::fabric();
    let dir = std::env::temp_dir().join(format!("onepipe-fuzz-log-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.jsonl");
    // A line that is not a record: the log is refused, naming the line.
    std::fs::write(&path, b"{\"at_ns\":1,\"event\":\"Tick\"}\n{\"at_ns\":\"x\"}\n").unwrap();
    let err = FileStore::open(&path).unwrap().load().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { line: 2, .. }), "{err}");
    // Records that parse but name members that do not exist: replayed, refused, counted.
    let records = vec![
        Record {
            at_ns: 1,
            event: Event::Input(Input::Register { process: 99 }),
        },
        Record {
            at_ns: 2,
            event: Event::Input(Input::LinkDown {
                member: Member::Switch(99),
                port: 0,
                last_commit_ns: 0,
            }),
        },
        Record {
            at_ns: u64::MAX,
            event: Event::Tick,
        },
    ];
    let text = onepipe_fuzz::targets::controller_log::lines(&records);
    std::fs::write(&path, text).unwrap();
    let loaded = FileStore::open(&path).unwrap().load().unwrap();
    assert_eq!(loaded, records);
    let mut store = MemoryStore {
        records: loaded,
        writes: 0,
    };
    assert_eq!(store.load().unwrap().len(), 3);
    let node = ControllerNode::open(&f.wiring, ControllerConfig::default(), store, START).unwrap();
    assert_eq!(node.controller().counters().unknown, 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_topology_files_are_errors() {
    for (text, check) in [
        ("[[switch]]\nname = \"a\"\nhosts = 18446744073709551615", "limit"),
        ("[[switch]]\nname = \"a\"\nhosts = -1", "invalid"),
        ("[[switch]]\nname = 3", "invalid"),
    ] {
        let e = Topology::from_toml(text).unwrap_err();
        assert!(
            matches!(e, TopologyError::TooLarge { .. } | TopologyError::Syntax(_)),
            "{e}"
        );
        assert!(e.to_string().contains(check), "{e}");
    }
}
