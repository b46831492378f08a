//! The service host driven by hand: its REQUESTs are read, run on a [`MemStore`] as the log
//! would order them, and answered with REPLYs, with a virtual clock.

use super::*;
use crate::replicated::{Envelope, encode_reply};
use crate::{Bytes, MemStore};
use onepipe_fabric::Node;
use onepipe_paxos::{Deployment, Placement, Proposer, Tuning};
use onepipe_wire::paxos::{Addr, Message, MsgType};
use onepipe_wire::{Duration, Instant};
use std::sync::mpsc::{Receiver, channel};

const PARTITIONS: u16 = 4;

fn host(slots: u32) -> (ServiceHost, Arc<Mailbox>) {
    host_of(slots, PARTITIONS)
}

fn host_of(slots: u32, partitions: u16) -> (ServiceHost, Arc<Mailbox>) {
    let tuning = Tuning {
        partitions,
        tries_max: 3,
        ..Tuning::default()
    };
    let d = Deployment::testbed(Placement::InNetwork, 1, tuning);
    let mailbox = Arc::new(Mailbox::default());
    let config = ServiceConfig {
        process: 0,
        partitions,
        slots,
        first_request: 1_000,
        log_value_bytes_max: 256,
    };
    let h = ServiceHost::new(Proposer::new(d.proposer_config(0)), mailbox.clone(), config);
    (h, mailbox)
}

fn submit(mailbox: &Mailbox, batch: Vec<Command>) -> Receiver<Results> {
    let (tx, rx) = channel();
    mailbox.push(batch, tx);
    rx
}

/// Every frame the host sends now.
fn sent(h: &mut ServiceHost, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9000];
    while let Some(n) = h.poll_transmit(now, 0, &mut buf) {
        out.push(buf[..n].to_vec());
    }
    h.invariants();
    out
}

/// Runs each request on `store` and answers it as replica 0 would.
fn answer(h: &mut ServiceHost, store: &MemStore, frames: &[Vec<u8>], now: Instant) -> Vec<Envelope> {
    frames.iter().map(|f| answer_one(h, store, f, now).0).collect()
}

/// Runs one request on `store`, answers it; the request and its result.
fn answer_one(
    h: &mut ServiceHost,
    store: &MemStore,
    frame: &[u8],
    now: Instant,
) -> (Envelope, Result<Reply, StoreError>) {
    let m = Message::parse(frame).unwrap();
    assert_eq!(m.msgtype, MsgType::Request);
    let e = Envelope::decode(m.value).unwrap();
    assert_eq!((e.client, e.request), (m.b, m.a));
    let result = store.execute(std::slice::from_ref(&e.command)).remove(0);
    let reply = encode_reply(&result);
    let mut frame = Message {
        a: m.a,
        b: m.b,
        value: &reply,
        ..Message::new(MsgType::Reply, m.pid, Addr::Process(1), m.from)
    }
    .to_vec();
    h.handle_frame(now, 0, &mut frame, onepipe_fabric::Route::Consume);
    h.invariants();
    (e, result)
}

fn set(k: &str, v: &str) -> Command {
    Command::Set {
        key: Bytes::from(k.to_string()),
        value: Bytes::from(v.to_string()),
        condition: crate::SetCondition::Always,
    }
}

fn get(k: &str) -> Command {
    Command::Get {
        key: Bytes::from(k.to_string()),
    }
}

#[test]
fn a_pipeline_goes_into_the_log_one_command_after_another() {
    let (mut h, mailbox) = host(8);
    let store = MemStore::default();
    let now = Instant::from_nanos(1_000_000);
    let rx = submit(&mailbox, vec![set("a", "1"), get("a"), set("a", "2"), get("a")]);
    let mut order = Vec::new();
    for _ in 0..4 {
        let frames = sent(&mut h, now);
        assert_eq!(frames.len(), 1, "one command of a batch in flight at a time");
        order.extend(answer(&mut h, &store, &frames, now));
    }
    assert!(sent(&mut h, now).is_empty());
    let results = rx.try_recv().unwrap();
    let want: Results = vec![
        Ok(Reply::Ok),
        Ok(Reply::Bulk(Bytes::from("1"))),
        Ok(Reply::Ok),
        Ok(Reply::Bulk(Bytes::from("2"))),
    ];
    assert_eq!(results, want);
    let requests: Vec<u64> = order.iter().map(|e| e.request).collect();
    assert!(requests.windows(2).all(|w| w[0] < w[1]), "{requests:?}");
    assert!(requests.iter().all(|&r| r >= 1_000), "from first_request on");
}

#[test]
fn batches_of_different_connections_run_side_by_side_within_the_slots() {
    let (mut h, mailbox) = host(2);
    let store = MemStore::default();
    let now = Instant::from_nanos(1_000_000);
    let rxs: Vec<_> = (0..3)
        .map(|i| submit(&mailbox, vec![set(&format!("k{i}"), "v")]))
        .collect();
    let frames = sent(&mut h, now);
    assert_eq!(frames.len(), 2, "two slots, two requests in flight");
    let clients: Vec<u64> = answer(&mut h, &store, &frames, now)
        .iter()
        .map(|e| e.client)
        .collect();
    assert_ne!(
        clients[0], clients[1],
        "each in-flight command has its own client id"
    );
    let frames = sent(&mut h, now);
    assert_eq!(frames.len(), 1, "the third got a slot when one freed");
    answer(&mut h, &store, &frames, now);
    for rx in rxs {
        assert_eq!(rx.try_recv().unwrap(), vec![Ok(Reply::Ok)]);
    }
    assert_eq!(h.batches_in_progress(), 0);
}

#[test]
fn crossslot_and_oversized_commands_are_answered_without_proposing() {
    let (mut h, mailbox) = host(4);
    let now = Instant::from_nanos(1_000_000);
    // Two keys in different partitions.
    let keys: Vec<Bytes> = (0..64)
        .map(|i| Bytes::from(format!("key{i}")))
        .collect::<Vec<_>>();
    let a = keys[0].clone();
    let b = keys
        .iter()
        .find(|k| {
            crate::replicated::partition_of(k, PARTITIONS) != crate::replicated::partition_of(&a, PARTITIONS)
        })
        .unwrap()
        .clone();
    let rx = submit(
        &mailbox,
        vec![Command::MGet { keys: vec![a, b] }, set("big", &"x".repeat(300))],
    );
    assert!(sent(&mut h, now).is_empty(), "nothing proposed");
    let results = rx.try_recv().unwrap();
    assert_eq!(results[0], Err(StoreError::CrossSlot));
    assert!(
        matches!(results[1], Err(StoreError::ValueTooLarge { max_bytes: 256, .. })),
        "{results:?}"
    );
    assert_eq!(h.counters().refused, 2);
}

#[test]
fn a_request_given_up_is_unknown_and_the_rest_of_its_pipeline_is_not_proposed() {
    let (mut h, mailbox) = host(4);
    let mut now = Instant::from_nanos(1_000_000);
    let rx = submit(&mailbox, vec![set("a", "1"), get("a"), set("b", "2")]);
    let rx_read = submit(&mailbox, vec![get("z")]);
    let mut sends = sent(&mut h, now).len();
    while let Some(t) = h.poll_timeout() {
        now = t.max(now) + Duration::from_nanos(1);
        h.handle_timeout(now);
        sends += sent(&mut h, now).len();
    }
    assert_eq!(
        sends,
        2 * 3,
        "each first command tried tries_max times, nothing else sent"
    );
    let results = rx.try_recv().unwrap();
    assert!(
        matches!(results[0], Err(StoreError::OutcomeUnknown(_))),
        "{results:?}"
    );
    assert!(matches!(results[1], Err(StoreError::Unavailable(_))));
    assert!(matches!(results[2], Err(StoreError::Unavailable(_))));
    let read = rx_read.try_recv().unwrap();
    assert!(
        matches!(read[0], Err(StoreError::Unavailable(_))),
        "a read that got no answer changed nothing"
    );
    assert_eq!(h.counters().gave_up, 2);
}

#[test]
fn a_late_reply_to_a_request_given_up_is_ignored() {
    let (mut h, mailbox) = host(1);
    let store = MemStore::default();
    let mut now = Instant::from_nanos(1_000_000);
    let _rx = submit(&mailbox, vec![set("a", "1")]);
    let first = sent(&mut h, now);
    while let Some(t) = h.poll_timeout() {
        now = t.max(now) + Duration::from_nanos(1);
        h.handle_timeout(now);
        sent(&mut h, now);
    }
    let rx = submit(&mailbox, vec![get("a")]);
    let second = sent(&mut h, now);
    answer(&mut h, &store, &first, now);
    assert!(
        rx.try_recv().is_err(),
        "the old request's reply does not answer the new one"
    );
    answer(&mut h, &store, &second, now);
    // The late SET was decided before the GET (here): the GET sees it.
    assert_eq!(rx.try_recv().unwrap(), vec![Ok(Reply::Bulk(Bytes::from("1")))]);
}

#[test]
fn the_store_announces_limits_that_fit_the_log() {
    let (k, v) = limits(1024);
    assert_eq!(k, 256);
    assert!(k + v + ENVELOPE_OVERHEAD_BYTES_MAX <= 1024);
    let e = Envelope {
        client: u64::MAX,
        request: u64::MAX,
        command: Command::Set {
            key: Bytes::from(vec![b'k'; k]),
            value: Bytes::from(vec![b'v'; v]),
            condition: crate::SetCondition::IfPresent,
        },
    };
    let mut bytes = Vec::new();
    e.encode(&mut bytes);
    assert!(bytes.len() <= 1024, "{}", bytes.len());
}

#[test]
fn a_store_without_its_host_answers_unknown() {
    let mailbox = Arc::new(Mailbox::default());
    let store = PaxosStore::new(vec![mailbox], 1, 1024, std::time::Duration::from_millis(5));
    let r = store.execute(&[set("a", "1")]);
    assert!(matches!(r[0], Err(StoreError::OutcomeUnknown(_))), "{r:?}");
    assert!(store.execute(&[]).is_empty());
    assert_eq!(store.describe().name, "paxos");
}

/// A command over a few keys, made unique by its batch and index (a second key no other
/// command names, or a value no other writes), so that the log tells whose it is.
fn unique_command(kind: u8, key: u8, b: usize, i: usize) -> Command {
    let key = Bytes::from(format!("k{key}"));
    let tag = Bytes::from(format!("b{b}i{i}"));
    match kind % 4 {
        0 => Command::Set {
            key,
            value: tag,
            condition: crate::SetCondition::Always,
        },
        1 => Command::MGet { keys: vec![key, tag] },
        2 => Command::Del { keys: vec![key, tag] },
        _ => Command::Cas {
            key,
            expect: None,
            new: Some(tag),
        },
    }
}

fn tag_of(command: &Command) -> String {
    let bytes = match command {
        Command::Set { value, .. } => value,
        Command::MGet { keys } | Command::Del { keys } => &keys[1],
        Command::Cas { new: Some(new), .. } => new,
        other => panic!("not a unique command: {other:?}"),
    };
    String::from_utf8(bytes.to_vec()).unwrap()
}

proptest::proptest! {
    /// Whatever order the log decides the requests in flight, each batch's commands enter the
    /// log in their order, each once, and each batch gets the results the log gave its
    /// commands.
    #[test]
    fn each_batch_gets_its_own_results_in_its_order(
        batches in proptest::collection::vec(
            proptest::collection::vec((0u8..4, 0u8..3), 1..6), 1..6),
        slots in 1u32..4,
        picks in proptest::collection::vec(0usize..64, 64),
    ) {
        let (mut h, mailbox) = host_of(slots, 1);
        let store = MemStore::default();
        let now = Instant::from_nanos(1_000_000);
        let mut rxs = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            let commands = batch
                .iter()
                .enumerate()
                .map(|(i, &(kind, key))| unique_command(kind, key, b, i))
                .collect();
            rxs.push(submit(&mailbox, commands));
        }
        let mut in_flight: Vec<Vec<u8>> = Vec::new();
        let mut log: Vec<(String, Result<Reply, StoreError>)> = Vec::new();
        let mut step = 0;
        loop {
            in_flight.extend(sent(&mut h, now));
            proptest::prop_assert!(in_flight.len() <= slots as usize);
            if in_flight.is_empty() {
                break;
            }
            let pick = picks[step % picks.len()] % in_flight.len();
            step += 1;
            let frame = in_flight.remove(pick);
            let (e, result) = answer_one(&mut h, &store, &frame, now);
            log.push((tag_of(&e.command), result));
        }
        let total: usize = batches.iter().map(Vec::len).sum();
        proptest::prop_assert_eq!(log.len(), total, "each command decided once");
        for (b, rx) in rxs.into_iter().enumerate() {
            let results = rx.try_recv().unwrap();
            let mut last = None;
            for (i, result) in results.into_iter().enumerate() {
                let tag = format!("b{b}i{i}");
                let at = log.iter().position(|(t, _)| *t == tag).unwrap();
                proptest::prop_assert!(last.is_none_or(|l| l < at), "batch {} out of order", b);
                last = Some(at);
                proptest::prop_assert_eq!(&result, &log[at].1);
            }
        }
        proptest::prop_assert_eq!(h.batches_in_progress(), 0);
    }
}
