//! Each check on a passing and a failing log set.

use onepipe_check::{
    Event, MAX_EXAMPLES, ProcessLog, Rule, Violation, ViolationKind, check_all, check_causality, check_fifo,
    check_no_creation, check_no_duplicates, check_no_loss, check_total_order,
};

fn s(ts_ns: u64, dst: u32, msg_id: u64) -> Event {
    Event::Send { ts_ns, dst, msg_id }
}

fn d(ts_ns: u64, src: u32, msg_id: u64) -> Event {
    Event::Deliver { ts_ns, src, msg_id }
}

fn log(process: u32, events: Vec<Event>) -> ProcessLog {
    ProcessLog { process, events }
}

/// Processes 1 and 2 broadcast to 3 and 4, which deliver in (ts, src) order; 4 lost 2:1.
fn good() -> Vec<ProcessLog> {
    vec![
        log(1, vec![s(10, 3, 0), s(10, 4, 0), s(30, 3, 1), s(30, 4, 1)]),
        log(2, vec![s(10, 3, 0), s(10, 4, 0), s(20, 3, 1), s(20, 4, 1)]),
        log(
            3,
            vec![d(10, 1, 0), d(10, 2, 0), d(20, 2, 1), d(30, 1, 1), s(31, 4, 0)],
        ),
        log(4, vec![d(10, 1, 0), d(10, 2, 0), d(30, 1, 1), d(31, 3, 0)]),
    ]
}

fn kinds(vs: &[Violation]) -> Vec<&ViolationKind> {
    vs.iter().map(|v| &v.kind).collect()
}

#[test]
fn good_execution_passes_everything_but_no_loss() {
    let logs = good();
    let report = check_all(&logs);
    assert!(report.ok(), "{report}");
    let json = serde_json::to_string(&report.checks()).unwrap();
    assert_eq!(
        json,
        r#"{"total_order":true,"fifo":true,"causality":true,"no_duplicates":true,"no_creation":true}"#
    );
    // 4 never delivered 2:1.
    let lost = check_no_loss(&logs);
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].process, lost[0].index), (2, 3));
    assert_eq!(
        lost[0].kind,
        ViolationKind::NotDeliveredOnce {
            dst: 4,
            msg_id: 1,
            deliveries: 0
        }
    );
}

#[test]
fn total_order_flags_decreasing_key() {
    let mut logs = good();
    logs[2].events.swap(1, 2); // 3 delivers 2:1 (ts 20) before 2:0 (ts 10).
    let vs = check_total_order(&logs);
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert_eq!(
        (vs[0].process, vs[0].index, vs[0].rule()),
        (3, 2, Rule::TotalOrder)
    );
    assert!(matches!(
        vs[0].kind,
        ViolationKind::OutOfOrder {
            ts_ns: 10,
            src: 2,
            prev_ts_ns: 20,
            ..
        }
    ));
    assert!(!check_all(&logs).checks().total_order);
}

#[test]
fn total_order_breaks_ts_ties_by_src() {
    let mut logs = good();
    logs[2].events.swap(0, 1); // Same ts 10, but src 2 before src 1.
    let vs = check_total_order(&logs);
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert!(matches!(
        vs[0].kind,
        ViolationKind::OutOfOrder {
            src: 1,
            prev_src: 2,
            ..
        }
    ));
}

#[test]
fn total_order_flags_tied_key_but_leaves_adjacent_duplicate_to_no_duplicates() {
    let tied = vec![
        log(1, vec![s(5, 2, 0), s(5, 2, 1)]),
        log(2, vec![d(5, 1, 0), d(5, 1, 1)]),
    ];
    let vs = check_total_order(&tied);
    assert_eq!(
        kinds(&vs),
        [&ViolationKind::TiedKey {
            ts_ns: 5,
            src: 1,
            msg_id: 1,
            prev_index: 0,
            prev_msg_id: 0
        }]
    );

    let dup = vec![log(1, vec![s(5, 2, 0)]), log(2, vec![d(5, 1, 0), d(5, 1, 0)])];
    assert!(check_total_order(&dup).is_empty());
    assert_eq!(check_no_duplicates(&dup).len(), 1);
}

#[test]
fn total_order_flags_scattering_with_two_timestamps() {
    // 1 sends msg 0 to 2 with ts 1 and to 3 with ts 3; 2 and 3 would disagree on 0 vs 4:0.
    let logs = vec![
        log(1, vec![s(1, 2, 0), s(3, 3, 0)]),
        log(2, vec![d(1, 1, 0), d(2, 4, 0)]),
        log(3, vec![d(2, 4, 0), d(3, 1, 0)]),
        log(4, vec![s(2, 2, 0), s(2, 3, 0)]),
    ];
    let vs = check_total_order(&logs);
    assert_eq!((vs.len(), vs[0].process, vs[0].index), (1, 1, 1), "{vs:?}");
    assert!(matches!(
        vs[0].kind,
        ViolationKind::ScatterTsMismatch {
            dst: 3,
            first_ts_ns: 1,
            ts_ns: 3,
            ..
        }
    ));
}

#[test]
fn fifo_flags_reordered_pair_and_allows_gaps() {
    let sends = log(1, vec![s(1, 2, 0), s(2, 2, 1), s(3, 2, 2)]);
    let gap = vec![sends.clone(), log(2, vec![d(1, 1, 0), d(3, 1, 2)])];
    assert!(check_fifo(&gap).is_empty());

    let swapped = vec![sends, log(2, vec![d(1, 1, 0), d(3, 1, 2), d(2, 1, 1)])];
    let vs = check_fifo(&swapped);
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert_eq!((vs[0].process, vs[0].index, vs[0].rule()), (2, 2, Rule::Fifo));
    assert_eq!(
        vs[0].kind,
        ViolationKind::FifoReorder {
            src: 1,
            msg_id: 1,
            send_rank: 1,
            prev_index: 1,
            prev_msg_id: 2,
            prev_send_rank: 2
        }
    );
}

#[test]
fn fifo_uses_send_order_not_msg_id_or_ts() {
    // Sender logs msg 9 before msg 3 (to this dst); delivering 9 then 3 is FIFO.
    let logs = vec![
        log(1, vec![s(1, 2, 9), s(1, 3, 9), s(1, 2, 3)]),
        log(2, vec![d(1, 1, 9), d(1, 1, 3)]),
    ];
    assert!(check_fifo(&logs).is_empty());
    let logs = vec![logs[0].clone(), log(2, vec![d(1, 1, 3), d(1, 1, 9)])];
    assert_eq!(check_fifo(&logs).len(), 1);
}

#[test]
fn causality_requires_sends_after_delivered_timestamps() {
    let ok = vec![log(1, vec![d(10, 2, 0), s(11, 2, 0), d(5, 3, 0), s(11, 3, 1)])];
    assert!(check_causality(&ok).is_empty());

    let bad = vec![log(1, vec![d(10, 2, 0), d(4, 3, 0), s(10, 2, 0)])];
    let vs = check_causality(&bad);
    assert_eq!(vs.len(), 1, "{vs:?}");
    assert_eq!((vs[0].index, vs[0].rule()), (2, Rule::Causality));
    assert_eq!(
        vs[0].kind,
        ViolationKind::SendNotAfterDelivery {
            dst: 2,
            msg_id: 0,
            ts_ns: 10,
            delivered_index: 0,
            delivered_ts_ns: 10
        }
    );
}

#[test]
fn causality_requires_non_decreasing_send_timestamps() {
    let ok = vec![log(1, vec![s(3, 2, 0), s(3, 3, 0), s(4, 2, 1)])];
    assert!(check_causality(&ok).is_empty());
    let bad = vec![log(1, vec![s(3, 2, 0), s(2, 2, 1)])];
    let vs = check_causality(&bad);
    assert_eq!(
        kinds(&vs),
        [&ViolationKind::SendTsDecreased {
            dst: 2,
            msg_id: 1,
            ts_ns: 2,
            prev_index: 0,
            prev_ts_ns: 3
        }]
    );
}

#[test]
fn no_duplicates_flags_second_delivery() {
    assert!(check_no_duplicates(&good()).is_empty());
    let mut logs = good();
    logs[3].events.push(d(10, 2, 0));
    let vs = check_no_duplicates(&logs);
    assert_eq!(vs.len(), 1);
    assert_eq!((vs[0].process, vs[0].index), (4, 4));
    assert_eq!(
        vs[0].kind,
        ViolationKind::Duplicate {
            src: 2,
            msg_id: 0,
            first_index: 1
        }
    );
    // Same msg_id from different senders is two messages.
    let two = vec![
        log(1, vec![s(1, 3, 0)]),
        log(2, vec![s(1, 3, 0)]),
        log(3, vec![d(1, 1, 0), d(1, 2, 0)]),
    ];
    assert!(check_no_duplicates(&two).is_empty());
}

#[test]
fn no_creation_flags_unsent_wrong_ts_and_missing_sender() {
    assert!(check_no_creation(&good()).is_empty());
    let logs = vec![
        log(1, vec![s(5, 2, 0)]),
        log(2, vec![d(5, 1, 0), d(6, 1, 1), d(7, 9, 0)]),
        log(3, vec![d(5, 1, 0), d(6, 2, 0)]),
    ];
    let vs = check_no_creation(&logs);
    let found: Vec<_> = vs.iter().map(|v| (v.process, v.index, &v.kind)).collect();
    assert_eq!(
        found,
        [
            (
                2,
                1,
                &ViolationKind::NoMatchingSend {
                    src: 1,
                    msg_id: 1,
                    ts_ns: 6
                }
            ),
            (2, 2, &ViolationKind::NoSenderLog { src: 9, msg_id: 0 }),
            // 1 sent msg 0 to 2 only, not to 3.
            (
                3,
                0,
                &ViolationKind::NoMatchingSend {
                    src: 1,
                    msg_id: 0,
                    ts_ns: 5
                }
            ),
            (
                3,
                1,
                &ViolationKind::NoMatchingSend {
                    src: 2,
                    msg_id: 0,
                    ts_ns: 6
                }
            ),
        ]
    );
    let mut wrong_ts = good();
    wrong_ts[3].events[0] = d(11, 1, 0);
    let vs = check_no_creation(&wrong_ts);
    assert_eq!(
        kinds(&vs),
        [&ViolationKind::TsMismatch {
            src: 1,
            msg_id: 0,
            ts_ns: 11,
            sent_ts_ns: 10
        }]
    );
}

#[test]
fn no_loss_passes_when_everything_arrives_once_and_flags_duplicates() {
    let logs = vec![
        log(1, vec![s(1, 2, 0), s(1, 3, 0), s(2, 2, 1)]),
        log(2, vec![d(1, 1, 0), d(2, 1, 1)]),
    ];
    let vs = check_no_loss(&logs);
    // Process 3 has no log: its send is lost.
    assert_eq!(
        kinds(&vs),
        [&ViolationKind::NotDeliveredOnce {
            dst: 3,
            msg_id: 0,
            deliveries: 0
        }]
    );
    let logs = vec![
        log(1, vec![s(1, 2, 0), s(2, 2, 1)]),
        log(2, vec![d(1, 1, 0), d(2, 1, 1), d(2, 1, 1), d(9, 1, 7)]),
    ];
    let vs = check_no_loss(&logs);
    assert_eq!(
        (vs.len(), vs[0].process, vs[0].index, vs[0].rule()),
        (1, 1, 1, Rule::NoLoss)
    );
    assert_eq!(
        vs[0].kind,
        ViolationKind::NotDeliveredOnce {
            dst: 2,
            msg_id: 1,
            deliveries: 2
        }
    );
    assert!(check_no_loss(&[logs[0].clone(), log(2, vec![d(1, 1, 0), d(2, 1, 1)])]).is_empty());
}

#[test]
fn report_counts_all_but_keeps_first_examples() {
    let n = 25;
    let sends = (0..n).map(|i| s(i, 2, i)).collect();
    let delivers = (0..n).rev().map(|i| d(i, 1, i)).collect();
    let logs = vec![log(1, sends), log(2, delivers)];
    let report = check_all(&logs);
    assert!(!report.ok());
    assert_eq!(report.total_order.count, n - 1);
    assert_eq!(report.fifo.count, n - 1);
    assert_eq!(report.total_order.examples.len(), MAX_EXAMPLES);
    assert_eq!(report.total_order.examples[0].index, 1);
    let c = report.checks();
    assert!(!c.total_order && !c.fifo && c.causality && c.no_duplicates && c.no_creation);
    let text = report.to_string();
    assert!(
        text.contains("total_order: 24 violation(s)") && text.contains("... and 14 more"),
        "{text}"
    );
    assert!(text.contains("causality: ok"), "{text}");
    assert!(text.contains("[total_order] process 2 event #1:"), "{text}");
}

#[test]
fn matching_handles_long_gaps_and_far_reorders() {
    // 40 sends to 2; long runs of loss push matches past the short scan window.
    let sends = log(1, (0..40).map(|i| s(i, 2, i)).collect());
    let gappy = vec![sends.clone(), log(2, vec![d(0, 1, 0), d(39, 1, 39)])];
    assert!(check_all(&gappy).ok());
    let far = vec![
        sends.clone(),
        log(2, vec![d(0, 1, 0), d(39, 1, 39), d(5, 1, 5), d(6, 1, 6)]),
    ];
    let vs = check_fifo(&far);
    assert_eq!((vs.len(), vs[0].index), (1, 2), "{vs:?}");
    assert!(matches!(
        vs[0].kind,
        ViolationKind::FifoReorder {
            send_rank: 5,
            prev_send_rank: 39,
            ..
        }
    ));
    assert!(check_no_creation(&far).is_empty());
    let unsent = vec![sends, log(2, vec![d(0, 1, 0), d(99, 1, 99)])];
    assert_eq!(
        kinds(&check_no_creation(&unsent)),
        [&ViolationKind::NoMatchingSend {
            src: 1,
            msg_id: 99,
            ts_ns: 99
        }]
    );
}

#[test]
fn no_duplicates_does_not_rely_on_increasing_msg_ids() {
    // msg ids not increasing per sender, duplicate far from its first delivery and with another ts.
    let logs = vec![log(
        2,
        vec![d(1, 1, 7), d(2, 1, 3), d(3, 3, 1), d(4, 1, 5), d(9, 1, 7)],
    )];
    let vs = check_no_duplicates(&logs);
    assert_eq!(
        kinds(&vs),
        [&ViolationKind::Duplicate {
            src: 1,
            msg_id: 7,
            first_index: 0
        }]
    );
    let logs = vec![log(2, vec![d(1, 1, 7), d(2, 1, 3), d(3, 1, 5)])];
    assert!(check_no_duplicates(&logs).is_empty());
}
