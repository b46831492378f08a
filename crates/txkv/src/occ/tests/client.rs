//! A client's aborts, give-ups and failures, forced by holding or losing chosen messages.

use super::*;
use crate::occ::codec::CommitStatus;

fn put(key: &str, value: &str) -> Txn {
    Txn::new(vec![Op::Put {
        key: b(key),
        value: b(value),
    }])
}

fn is_commit_reply(bytes: &[u8]) -> bool {
    matches!(OccMessage::decode(bytes), Ok(OccMessage::CommitReply(r)) if r.status != CommitStatus::Refused)
}

fn outcome(net: &Net, client: usize) -> &Completion {
    &net.done
        .iter()
        .find(|d| d.client == client)
        .expect("finished")
        .completion
}

/// Client 0 holds k's lock (its grant is kept from it); client 1's locks are refused until it
/// gives up after `aborts_max` aborts. Returns the network, client 1 finished.
fn refused_until_it_gives_up(aborts_max: u32) -> Net {
    let layout = Layout::new(1, 2).unwrap();
    let mut net = Net::new(layout, 2, 5).with_config(|c| c.aborts_max = aborts_max);
    let c0 = net.client_process(0);
    net.queues = vec![vec![put("k", "a")], vec![]];
    net.drop_where = Some(Box::new(move |_, dst, _| dst == c0));
    net.drain();
    assert!(net.servers[0].lock_owner(b"k").is_some());
    net.queues[1].push(put("k", "b"));
    // Client 0's timeouts come later than client 1's whole life.
    net.drain();
    while let Some(t) = net.clients[1].poll_timeout() {
        net.now_ns = net.now_ns.max(t);
        net.clients[1].handle_timeout(net.now_ns);
        net.drain();
    }
    net
}

/// Refused locks are aborts, each counted; too many fail the transaction; then client 0 commits.
#[test]
fn refused_locks_are_aborts_and_too_many_fail_the_transaction() {
    let mut net = refused_until_it_gives_up(3);
    let done = outcome(&net, 1);
    assert!(matches!(done.outcome, Outcome::Failed(_)), "{done:?}");
    assert_eq!(done.aborts, 3);
    let occ = net.clients[1].occ_counters();
    assert_eq!((occ.aborts, occ.lock_conflicts, occ.aborts_exhausted), (3, 3, 1));
    // It backed off at least half of each window (2 and 4 µs) between its three tries.
    assert!(done.return_ns - done.call_ns >= 1_000 + 2_000);
    net.drop_where = None;
    net.run();
    assert!(matches!(outcome(&net, 0).outcome, Outcome::Committed { .. }));
    assert_eq!(net.servers[1].version(b"k"), 1);
}

/// Fuzz finding: with `aborts_max` 0 the first abort tripped an invariant. It fails the
/// transaction after that one abort.
#[test]
fn no_aborts_allowed_fails_at_the_first() {
    let net = refused_until_it_gives_up(0);
    let done = outcome(&net, 1);
    assert!(matches!(done.outcome, Outcome::Failed(_)), "{done:?}");
    assert_eq!(done.aborts, 1);
}

/// A read that finds a key locked aborts and retries after the writer commits.
#[test]
fn a_read_of_a_locked_key_aborts_and_retries() {
    let layout = Layout::new(1, 1).unwrap();
    let mut net = Net::new(layout, 2, 6);
    let c0 = net.client_process(0);
    net.queues = vec![vec![put("k", "a")], vec![]];
    net.drop_where = Some(Box::new(move |_, dst, _| dst == c0));
    net.drain();
    net.queues[1].push(Txn::new(vec![Op::Get { key: b("k") }]));
    net.drain();
    assert_eq!(net.clients[1].occ_counters().read_conflicts, 1);
    net.drop_where = None;
    net.run();
    let read = outcome(&net, 1);
    assert!(read.aborts >= 1);
    match &read.outcome {
        Outcome::Committed { results, .. } => assert_eq!(results, &vec![OpResult::Value(Some(b("a")))]),
        other => panic!("{other:?}"),
    }
}

/// Commit answers all lost: the commit is sent `attempts_max` times and the outcome is
/// unknown (it was in fact applied, and its lock released).
#[test]
fn an_unanswered_commit_is_unknown() {
    let layout = Layout::new(2, 2).unwrap();
    let mut net = Net::new(layout, 1, 7).with_config(|c| c.attempts_max = 4);
    net.drop_where = Some(Box::new(|_, _, bytes| is_commit_reply(bytes)));
    net.queues = vec![vec![put("k", "a")]];
    net.run();
    let done = outcome(&net, 0);
    assert!(matches!(done.outcome, Outcome::Unknown(_)), "{done:?}");
    assert_eq!(
        done.attempts, 4,
        "one lock, then four commit sends: three resends"
    );
}

/// Everything lost: a read fails; a write's locks are released if they can be, and it fails.
#[test]
fn unanswered_reads_and_locks_fail() {
    let layout = Layout::new(2, 2).unwrap();
    let mut net = Net::new(layout, 1, 8).with_config(|c| c.attempts_max = 3);
    net.drop_per_mille = 1000;
    net.queues = vec![vec![Txn::new(vec![Op::Get { key: b("k") }]), put("k", "a")]];
    net.run();
    assert!(
        net.done
            .iter()
            .all(|d| matches!(d.completion.outcome, Outcome::Failed(_)))
    );
    assert_eq!(net.clients[0].occ_counters().locks_abandoned, 1);
    assert_eq!(net.clients[0].counters().failed, 2);
}

/// A backup that fails during a commit is no longer awaited; a failed primary fails the
/// transactions on its shard.
#[test]
fn failed_backups_are_left_out_and_failed_primaries_fail_transactions() {
    let layout = Layout::new(1, 3).unwrap();
    let mut net = Net::new(layout, 1, 9);
    net.drop_where = Some(Box::new(|_, dst, _| dst == 2));
    net.queues = vec![vec![put("k", "a")]];
    net.drain();
    assert!(net.done.is_empty(), "committed without replica 2");
    net.failed.push(2);
    net.clients[0].on_process_failure(net.now_ns, 2);
    net.run();
    assert!(matches!(outcome(&net, 0).outcome, Outcome::Committed { .. }));
    assert_eq!(net.servers[1].version(b"k"), 1);
    net.clients[0].on_process_failure(net.now_ns, 0);
    net.queues[0].push(put("k", "b"));
    net.run();
    assert!(matches!(net.done[1].completion.outcome, Outcome::Failed(_)));
}

/// A scattering the fabric reports undelivered is sent again at once, once.
#[test]
fn a_send_failure_sends_the_phase_again_at_once() {
    let layout = Layout::new(1, 1).unwrap();
    let mut c = OccClient::new(client_config(1, layout));
    c.submit(0, put("k", "a")).unwrap();
    let out = c.poll_send().unwrap();
    c.on_sent(&out, 42);
    c.on_send_failure(5, 42);
    let again = c.poll_send().expect("sent again");
    assert_eq!(again.scatter, out.scatter);
    assert_eq!((c.counters().send_failures, c.counters().retries), (1, 1));
    c.on_send_failure(6, 42);
    assert!(c.poll_send().is_none(), "one failure report, one resend");
    c.invariants();
}
