//! Algorithms 1 and 2 of paper 002, step by step, on NetChain's testbed (s0..s3; processes
//! 0..3 under s0, process 0 the controller).

use crate::testing::{CONTROLLER, Net, query};
use onepipe_wire::netchain::{GROUP_ALL, Opcode, RuleKind, Status};

const KEY: &[u8] = b"lock:a";
const CHAIN: [u16; 3] = [0, 1, 2];
const READ_CHAIN: [u16; 3] = [2, 1, 0];
const GROUP: u16 = 7;

/// The controller installs `KEY` on `chain`'s switches.
fn install(net: &mut Net, chain: &[u16]) {
    for &s in chain {
        net.send(
            CONTROLLER,
            query(Opcode::Install, CONTROLLER, 1, &[s], KEY, None, None, GROUP),
        );
    }
    net.run();
    let acks = net.replies(CONTROLLER);
    assert_eq!(acks.len(), chain.len());
    assert!(acks.iter().all(|a| a.0 == Opcode::Install && a.1 == Status::Ok));
}

fn write(net: &mut Net, client: u32, request: u64, value: &[u8]) -> (Status, Option<Vec<u8>>) {
    net.send(
        client,
        query(
            Opcode::Write,
            client,
            request,
            &CHAIN,
            KEY,
            Some(value),
            None,
            GROUP,
        ),
    );
    net.run();
    one_reply(net, client, request)
}

fn read(net: &mut Net, client: u32, request: u64) -> (Status, Option<Vec<u8>>) {
    net.send(
        client,
        query(Opcode::Read, client, request, &READ_CHAIN, KEY, None, None, GROUP),
    );
    net.run();
    one_reply(net, client, request)
}

fn one_reply(net: &mut Net, client: u32, request: u64) -> (Status, Option<Vec<u8>>) {
    let replies = net.replies(client);
    assert_eq!(replies.len(), 1, "one answer: {replies:?}");
    assert_eq!(replies[0].3, request);
    (replies[0].1, replies[0].2.clone())
}

fn stored(net: &Net, s: usize) -> (Option<Vec<u8>>, u64) {
    let key = crate::Key::new(KEY).unwrap();
    let store = net.switches[s].store();
    let slot = store.read(store.slot_of(&key).expect("installed"));
    (slot.value.map(<[u8]>::to_vec), slot.version)
}

/// Algorithm 2 by hand: switch `failed` goes down; every other switch routes around it and its
/// `neighbours` skip it.
fn fail_over(net: &mut Net, failed: u16, neighbours: &[u16]) {
    net.down[failed as usize] = true;
    for s in (0..4).filter(|&s| s != failed) {
        net.rule(s, RuleKind::RouteAround, GROUP_ALL, failed, 0, 1);
    }
    for &n in neighbours {
        net.rule(n, RuleKind::Skip, GROUP_ALL, failed, 0, 0);
    }
}

/// Algorithm 1: the head gives the version, every replica stores it, the tail answers; the
/// tail serves reads.
#[test]
fn a_write_goes_head_to_tail_and_a_read_is_served_by_the_tail() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    assert_eq!(
        read(&mut net, 1, 10),
        (Status::Ok, None),
        "installed keys start absent"
    );
    assert_eq!(write(&mut net, 1, 11, b"v1"), (Status::Ok, None));
    for s in CHAIN {
        assert_eq!(stored(&net, s as usize), (Some(b"v1".to_vec()), 1), "switch {s}");
    }
    assert_eq!(write(&mut net, 2, 12, b"v2").0, Status::Ok);
    assert_eq!(
        stored(&net, 2),
        (Some(b"v2".to_vec()), 2),
        "versions count writes"
    );
    assert_eq!(read(&mut net, 1, 13), (Status::Ok, Some(b"v2".to_vec())));
    assert_eq!(net.switches[2].counters().reads, 2);
    assert_eq!(net.switches[0].counters().reads, 0, "only the tail reads");
    assert_eq!(net.switches[3].store().len(), 0, "s3 holds nothing");
}

/// Paper Fig. 5: UDP may reorder two writes between chain switches; versions restore the order,
/// and the older write arriving second is dropped (Algorithm 1, line 8).
#[test]
fn a_reordered_older_write_is_dropped_by_the_replica() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    net.send(
        1,
        query(Opcode::Write, 1, 1, &CHAIN, KEY, Some(b"old"), None, GROUP),
    );
    net.send(
        2,
        query(Opcode::Write, 2, 2, &CHAIN, KEY, Some(b"new"), None, GROUP),
    );
    // Both reach the head, which sequences them; their frames toward s1 are then swapped.
    net.step();
    net.step();
    let mut transmit = Vec::new();
    let mut buf = vec![0u8; 9216];
    for port in 0..net.wiring.switch_ports[0].len() as u16 {
        while let Some(len) = onepipe_fabric::Node::poll_transmit(
            &mut net.switches[0],
            onepipe_wire::Instant::ZERO,
            port,
            &mut buf,
        ) {
            transmit.push((port, buf[..len].to_vec()));
        }
    }
    assert_eq!(transmit.len(), 2);
    transmit.reverse();
    for (port, frame) in transmit {
        let onepipe_fabric::Peer::Switch { switch, port } = net.wiring.switch_ports[0][port as usize].peer
        else {
            panic!("toward s1")
        };
        net.in_flight.push_back((switch, port, frame));
    }
    net.run();
    assert_eq!(stored(&net, 0), (Some(b"new".to_vec()), 2));
    assert_eq!(
        stored(&net, 2),
        (Some(b"new".to_vec()), 2),
        "the tail agrees with the head"
    );
    assert_eq!(net.switches[1].counters().stale_writes, 1);
    assert_eq!(net.replies(2).len(), 1, "the newer write is answered");
    assert_eq!(
        net.replies(1).len(),
        0,
        "the older one is not: its client times out"
    );
}

/// Compare-and-swap: the head decides; a failed compare still travels the chain and answers
/// with the value it found.
#[test]
fn compare_and_swap_succeeds_once_and_reports_the_value_it_found() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    let cas = |expect: Option<&[u8]>, new: Option<&[u8]>, request| {
        query(Opcode::Cas, 1, request, &CHAIN, KEY, new, expect, GROUP)
    };
    net.send(1, cas(None, Some(b"owner1"), 1));
    net.run();
    assert_eq!(net.replies(1)[0].1, Status::Ok, "acquired: the key was absent");
    net.send(1, cas(None, Some(b"owner2"), 2));
    net.run();
    let r = net.replies(1);
    assert_eq!(
        (r[0].1, r[0].2.clone()),
        (Status::CasFailed, Some(b"owner1".to_vec()))
    );
    assert_eq!(
        stored(&net, 2),
        (Some(b"owner1".to_vec()), 2),
        "a failed compare is a write of the same value"
    );
    net.send(1, cas(Some(b"owner1"), None, 3));
    net.run();
    assert_eq!(
        net.replies(1)[0].1,
        Status::Ok,
        "released by its owner: compare-and-delete"
    );
    assert_eq!(stored(&net, 1).0, None);
}

/// A key no switch holds is a typed answer from the head, never a silent loss; so is a value
/// larger than a slot.
#[test]
fn unknown_keys_and_oversize_values_are_answered_with_their_error() {
    let mut net = Net::testbed();
    assert_eq!(write(&mut net, 1, 1, b"v").0, Status::UnknownKey);
    assert_eq!(read(&mut net, 1, 2), (Status::UnknownKey, None));
    install(&mut net, &CHAIN);
    assert_eq!(write(&mut net, 1, 3, &[7u8; 17]).0, Status::ValueTooLarge);
    assert_eq!(stored(&net, 0), (None, 0), "nothing changed");
}

/// The source check: a process speaks only for itself, and only the controller controls.
#[test]
fn spoofed_queries_and_control_from_clients_are_dropped_and_counted() {
    let mut net = Net::testbed();
    net.send(
        1,
        query(Opcode::Write, 2, 1, &CHAIN, KEY, Some(b"v"), None, GROUP),
    );
    net.send(1, query(Opcode::Install, 1, 2, &[0], KEY, None, None, GROUP));
    net.send(1, vec![0x8f, 1, 2, 3]);
    net.run();
    let c = *net.switches[0].counters();
    assert_eq!((c.spoofed, c.control_refused, c.malformed), (1, 1, 1));
    assert_eq!(net.switches[0].store().len(), 0);
    assert!(net.inbox.iter().all(Vec::is_empty));
}

/// Algorithm 2, a middle switch: its neighbours skip it, and the chain of two serves reads and
/// writes.
#[test]
fn failover_skips_a_failed_middle_switch() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    assert_eq!(write(&mut net, 1, 1, b"v1").0, Status::Ok);
    fail_over(&mut net, 1, &[0, 2]);
    assert_eq!(write(&mut net, 1, 2, b"v2").0, Status::Ok);
    assert_eq!(stored(&net, 2), (Some(b"v2".to_vec()), 2));
    assert_eq!(read(&mut net, 2, 3), (Status::Ok, Some(b"v2".to_vec())));
}

/// Algorithm 2, the tail: a write its predecessor stored is answered by the neighbour that
/// skips the tail (line 6), and reads go to the predecessor (their list is reversed).
#[test]
fn failover_of_the_tail_makes_its_predecessor_answer() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    fail_over(&mut net, 2, &[1, 3]);
    assert_eq!(write(&mut net, 1, 1, b"v1").0, Status::Ok);
    assert_eq!(stored(&net, 1), (Some(b"v1".to_vec()), 1));
    assert_eq!(read(&mut net, 1, 2), (Status::Ok, Some(b"v1".to_vec())));
    assert_eq!(
        net.switches[1].counters().reads,
        1,
        "the predecessor serves reads"
    );
}

/// Algorithm 2, the head: the next switch sees a write without a version and becomes the head.
#[test]
fn failover_of_the_head_makes_the_next_switch_sequence() {
    let mut net = Net::testbed();
    let chain = [1u16, 2, 3];
    for &s in &chain {
        net.send(
            CONTROLLER,
            query(Opcode::Install, CONTROLLER, 1, &[s], KEY, None, None, GROUP),
        );
    }
    net.run();
    net.replies(CONTROLLER);
    let send = |net: &mut Net, request, value: &[u8]| {
        net.send(
            1,
            query(Opcode::Write, 1, request, &chain, KEY, Some(value), None, GROUP),
        );
        net.run();
        net.replies(1)
    };
    assert_eq!(send(&mut net, 1, b"v1")[0].1, Status::Ok);
    fail_over(&mut net, 1, &[0, 2]);
    assert_eq!(send(&mut net, 2, b"v2")[0].1, Status::Ok);
    assert_eq!(
        stored(&net, 3),
        (Some(b"v2".to_vec()), 2),
        "s2 gave the next version"
    );
}

/// Algorithm 3 at the switches: phase 1 stops the group's writes at the failed switch's
/// neighbours (reads go on); phase 2 sends its queries to the new switch, whose state the
/// controller copied; the new switch is then part of the chain.
#[test]
fn recovery_rules_stop_then_redirect_a_group_to_the_new_switch() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    assert_eq!(write(&mut net, 1, 1, b"v1").0, Status::Ok);
    fail_over(&mut net, 1, &[0, 2]);
    for neighbour in [0, 2] {
        net.rule(neighbour, RuleKind::StopWrites, GROUP, 1, 0, 0);
    }
    net.send(
        1,
        query(Opcode::Write, 1, 2, &CHAIN, KEY, Some(b"lost"), None, GROUP),
    );
    net.run();
    assert!(
        net.replies(1).is_empty(),
        "phase 1: the group's writes are dropped"
    );
    assert_eq!(net.switches[0].counters().stopped, 1);
    assert_eq!(
        read(&mut net, 1, 3).1,
        Some(b"v1".to_vec()),
        "phase 1: reads are served"
    );
    // The controller copies the reference's (s2's) slot to s3.
    let (value, version) = stored(&net, 2);
    net.send(CONTROLLER, onepipe_wire_state_write(3, &value.unwrap(), version));
    net.run();
    assert_eq!(net.replies(CONTROLLER)[0].1, Status::Ok);
    for neighbour in [0, 2] {
        net.rule(neighbour, RuleKind::Replace, GROUP, 1, 3, 0);
    }
    assert_eq!(write(&mut net, 1, 4, b"v3").0, Status::Ok);
    // Version 3: the stopped write had its version from the head (its client never hears).
    assert_eq!(
        stored(&net, 3),
        (Some(b"v3".to_vec()), 3),
        "the new switch is in the chain"
    );
    assert_eq!(stored(&net, 2), (Some(b"v3".to_vec()), 3));
}

fn onepipe_wire_state_write(at: u16, value: &[u8], version: u64) -> Vec<u8> {
    use onepipe_wire::netchain::{Chain, Query, Repr};
    let mut key = [0u8; 16];
    key[..KEY.len()].copy_from_slice(KEY);
    let q = Query {
        opcode: Opcode::StateWrite,
        flags: 0,
        status: Status::Ok,
        sc: 1,
        process: CONTROLLER,
        request: 9,
        chain: Chain::new(&[at]).unwrap(),
        group: GROUP,
        version,
        key,
        value: Some(value),
        expect: None,
    };
    let mut frame = vec![0u8; Repr::Query(q).buffer_len()];
    Repr::Query(q).emit(&mut frame).unwrap();
    frame
}

/// A delete is a write of "absent"; its answer says whether there was a value to delete.
#[test]
fn a_delete_answers_whether_the_key_had_a_value() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    let delete = |net: &mut Net, request| {
        net.send(
            1,
            query(Opcode::Delete, 1, request, &CHAIN, KEY, None, None, GROUP),
        );
        net.run();
        one_reply(net, 1, request).0
    };
    assert_eq!(delete(&mut net, 1), Status::CasFailed, "absent already");
    assert_eq!(write(&mut net, 1, 2, b"v").0, Status::Ok);
    assert_eq!(delete(&mut net, 3), Status::Ok, "deleted a value");
    assert_eq!(stored(&net, 2), (None, 3));
    assert_eq!(read(&mut net, 1, 4), (Status::Ok, None));
}

/// Found by the `netchain` fuzz target: a state write at version u64::MAX made the head's next
/// version overflow. A key at the last version takes no more writes (a counted drop): no
/// switch of its chain stores a value the others do not.
#[test]
fn a_key_at_the_last_version_takes_no_more_writes() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    for s in CHAIN {
        net.send(CONTROLLER, onepipe_wire_state_write(s, b"top", u64::MAX));
    }
    net.run();
    net.replies(CONTROLLER);
    net.send(
        1,
        query(Opcode::Write, 1, 1, &CHAIN, KEY, Some(b"v"), None, GROUP),
    );
    net.run();
    assert!(
        net.replies(1).is_empty(),
        "no answer: the client's attempt times out"
    );
    assert_eq!(net.switches[0].counters().versions_exhausted, 1);
    for s in CHAIN {
        assert_eq!(
            stored(&net, s as usize),
            (Some(b"top".to_vec()), u64::MAX),
            "switch {s}"
        );
    }
}

/// A write the network delivers twice is sequenced once: the head knows its request (found in
/// the simulator with duplication on, where the copy, arriving after a later write, brought the
/// old value back).
#[test]
fn a_duplicated_write_is_applied_once() {
    let mut net = Net::testbed();
    install(&mut net, &CHAIN);
    let first = query(Opcode::Write, 1, 7, &CHAIN, KEY, Some(b"old"), None, GROUP);
    net.send(1, first.clone());
    net.run();
    assert_eq!(net.replies(1).len(), 1);
    assert_eq!(write(&mut net, 2, 8, b"new").0, Status::Ok);
    net.send(1, first);
    net.run();
    assert!(net.replies(1).is_empty(), "the copy is dropped");
    assert_eq!(net.switches[0].counters().duplicates, 1);
    assert_eq!(
        read(&mut net, 2, 9).1,
        Some(b"new".to_vec()),
        "the later write stands"
    );
}
