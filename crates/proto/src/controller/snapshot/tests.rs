//! Log compaction: a snapshot and the records after it replay to the controller that the whole
//! log replays to, and inputs that change nothing are not logged.

use super::super::store::{self, Event, MemoryStore, Record, Service, StoreError};
use super::super::*;
use crate::controller::test_util::{self, outputs, packet, t};
use onepipe_fabric::{Topology, Wiring};
use onepipe_wire::packet::Opcode;
use proptest::prelude::*;

/// Two leaves of two processes under two spines.
fn wiring() -> Wiring {
    Wiring::new(Topology::leaf_spine(2, 2, 2).unwrap(), 1).unwrap()
}

fn fresh(w: &Wiring) -> Controller {
    test_util::unregistered(w, Duration::from_millis(5), Duration::from_millis(100))
}

/// An input built from three draws, mostly valid for `w` and `c`'s state (a recovery names
/// the process's incarnation), so that histories reach failures, recoveries and forwards.
fn input(w: &Wiring, c: &Controller, kind: u8, a: u32, b: u32) -> Input {
    let processes = w.process_count() as u32;
    let (p, q) = (a % processes, b % processes);
    let s = a as usize % w.switch_count();
    let port = (b as usize % w.switch_ports[s].len()) as u16;
    let last_commit_ns = t(u64::from(b % 50)).as_nanos();
    match kind % 12 {
        0 | 1 => Input::Register { process: p },
        2 => Input::LinkDown {
            member: Member::Switch(s),
            port,
            last_commit_ns,
        },
        3 => Input::LinkDown {
            member: Member::Process(p),
            port: 0,
            last_commit_ns,
        },
        4 => Input::Completed {
            process: p,
            epoch: u64::from(b % 3),
        },
        5 => Input::Heard {
            member: Member::Switch(s),
            port,
        },
        6 => Input::Recover {
            process: p,
            incarnation: c.incarnation(p),
        },
        7 => Input::Rejoin {
            process: p,
            incarnation: c.incarnation(p),
        },
        8 => Input::RecallLost {
            process: p,
            lost: vec![(q, 1_000 + u64::from(b), u64::from(b))],
        },
        9 => Input::Forward {
            from: p,
            to: q,
            packet: packet(Opcode::Prepare, p, q, b % 5, b % 2 == 0),
        },
        11 => Input::Implausible {
            member: Member::Switch(s),
            port,
            ahead_ns: u64::from(b),
            refused: u64::from(a % 7),
        },
        _ => Input::Forwarded {
            process: p,
            id: u64::from(b % 4),
            ack: (b % 2 == 0).then(|| packet(Opcode::Ack, p, q, 1, false)),
        },
    }
}

/// Runs the timers of `s` that are due at `now`.
fn tick(s: &mut Service<MemoryStore>, now: Instant) {
    for _ in 0..8 {
        if s.poll_timeout().is_none_or(|at| at > now) {
            return;
        }
        s.handle_timeout(now).unwrap();
    }
}

fn through_json(records: &[Record]) -> Vec<Record> {
    serde_json::from_slice(&serde_json::to_vec(records).unwrap()).unwrap()
}

fn replayed(w: &Wiring, records: &[Record]) -> Controller {
    let mut c = fresh(w);
    store::replay(&mut c, through_json(records)).unwrap();
    c
}

/// Drives one history through a service that never compacts and one that compacts every
/// `every` records, checking as it goes that an input said to change nothing changes nothing.
fn drive(steps: &[(u8, u32, u32, u8)], every: u64) -> (Service<MemoryStore>, Service<MemoryStore>, Instant) {
    let w = wiring();
    let open = |after| {
        Service::open(fresh(&w), MemoryStore::default(), t(0))
            .unwrap()
            .compact_after_records(after)
    };
    let (mut full, mut compacted) = (open(u64::MAX), open(every));
    let mut now = t(0);
    for &(kind, a, b, ms) in steps {
        now += Duration::from_millis(u64::from(ms % 20));
        tick(&mut full, now);
        tick(&mut compacted, now);
        let input = input(&w, full.controller(), kind, a, b);
        let before = full.controller().snapshot();
        let noop = full.controller().is_noop(&input);
        let result = full.handle_input(now, input.clone()).is_ok();
        if noop {
            assert!(result);
            assert_eq!(
                full.controller().snapshot(),
                before,
                "{input:?} changed the state"
            );
        }
        assert_eq!(compacted.handle_input(now, input).is_ok(), result);
        let said: Vec<Output> = std::iter::from_fn(|| full.poll_event()).collect();
        let said_too: Vec<Output> = std::iter::from_fn(|| compacted.poll_event()).collect();
        assert_eq!(said, said_too, "compacting changed what the controller said");
    }
    (full, compacted, now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// replay(full log) == replay(compacted log) == the controller that wrote them, through
    /// JSON as the file and etcd logs keep records; and a controller opened on either takes
    /// over the same way.
    #[test]
    fn replaying_a_compacted_log_gives_the_same_controller(
        steps in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u32>(), any::<u8>()), 1..150),
        every in 1u64..12,
    ) {
        let w = wiring();
        let (full, compacted, now) = drive(&steps, every);
        let live = full.controller().snapshot();
        prop_assert_eq!(&compacted.controller().snapshot(), &live);
        let full_log = &full.store().records;
        let compacted_log = &compacted.store().records;
        prop_assert!(compacted_log.len() as u64 <= every.max(1) + 1, "{} records", compacted_log.len());
        prop_assert!(!full_log.iter().any(|r| matches!(r.event, Event::Snapshot(_))));
        if full_log.len() as u64 > every {
            prop_assert!(compacted.log_counters().compactions > 0);
        }
        prop_assert_eq!(&replayed(&w, full_log).snapshot(), &live);
        prop_assert_eq!(&replayed(&w, compacted_log).snapshot(), &live);

        let open = |records: &[Record]| {
            let store = MemoryStore { records: through_json(records), ..MemoryStore::default() };
            Service::open(fresh(&w), store, now).unwrap()
        };
        let (mut a, mut b) = (open(full_log), open(compacted_log));
        prop_assert_eq!(a.controller().snapshot(), b.controller().snapshot());
        let (said_a, said_b): (Vec<Output>, Vec<Output>) = (
            std::iter::from_fn(|| a.poll_event()).collect(),
            std::iter::from_fn(|| b.poll_event()).collect(),
        );
        prop_assert_eq!(said_a, said_b);
    }
}

/// Processes repeat their registration until it is confirmed and on every Hello: a repeat is
/// answered again but not written (each write is a synced one in the file log). A repeat from
/// a process declared failed is news (it is back) and is written.
#[test]
fn a_repeated_registration_is_answered_but_not_written() {
    let w = wiring();
    let mut s = Service::open(fresh(&w), MemoryStore::default(), t(0)).unwrap();
    let register = Input::Register { process: 1 };
    s.handle_input(t(1), register.clone()).unwrap();
    assert_eq!(s.store().writes, 1);
    for k in 2..10 {
        s.handle_input(t(k), register.clone()).unwrap();
    }
    assert_eq!(s.store().writes, 1, "repeats are not written");
    assert_eq!(s.log_counters().unchanged, 8);
    let answers = std::iter::from_fn(|| s.poll_event())
        .filter(|o| matches!(o, Output::Registered { to: 1, .. }))
        .count();
    assert_eq!(answers, 9, "every registration is answered");
    s.handle_input(t(10), Input::Register { process: 2 }).unwrap();
    assert_eq!(s.store().writes, 2, "a first registration is written");
}

/// The log never holds more than the bound past a snapshot, however long the run.
#[test]
fn the_log_is_compacted_once_it_passes_its_bound() {
    let w = wiring();
    let mut s = Service::open(fresh(&w), MemoryStore::default(), t(0))
        .unwrap()
        .compact_after_records(10);
    for k in 0..100u64 {
        let report = Input::LinkDown {
            member: Member::Switch(0),
            port: 0,
            last_commit_ns: t(k).as_nanos(),
        };
        s.handle_input(t(k), report).unwrap();
        assert!(
            s.store().records.len() <= 10,
            "{} records",
            s.store().records.len()
        );
    }
    assert_eq!(s.log_counters().compactions, 10);
    assert!(matches!(s.store().records[0].event, Event::Snapshot(_)));
}

/// A snapshot is read from a file that may be damaged or belong to another topology: one
/// that does not fit the graph is refused with the record's position, never a panic.
#[test]
fn a_snapshot_of_another_topology_is_refused() {
    let big = Wiring::new(Topology::leaf_spine(3, 2, 2).unwrap(), 1).unwrap();
    let mut c = test_util::registered(&big, Duration::from_millis(5), Duration::from_millis(100));
    c.handle_input(t(1), Input::Register { process: 5 }).unwrap();
    outputs(&mut c);
    let record = Record {
        at_ns: 5,
        event: Event::Snapshot(Box::new(c.snapshot())),
    };
    let store = MemoryStore {
        records: vec![record],
        ..MemoryStore::default()
    };
    let err = Service::open(fresh(&wiring()), store, t(2)).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { line: 1, .. }), "{err}");
    // The same snapshot fits its own topology.
    let mut again = test_util::unregistered(&big, Duration::from_millis(5), Duration::from_millis(100));
    again.restore(c.snapshot()).unwrap();
    assert_eq!(again.snapshot(), c.snapshot());
}
