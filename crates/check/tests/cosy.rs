//! cosy's message logs (every way a line can be wrong) and the checks of a run: the bound
//! delta (paper 003, section 2) and the network invariants (section 3.3, Lemma 3.3).

use onepipe_check::cosy::{
    HEADER, LogReader, ReadError, RecordError, parse_record, write_header, write_record,
};
use onepipe_check::{
    BoundViolation, Flag, LinkUse, LinkViolation, MAX_EXAMPLES, MessageRecord, check_bound,
    check_link_capacity, check_queue_bound, read_log, read_log_file,
};
use proptest::prelude::*;

const COMPLETE: &str = "17,3,5,131072,1200,complete,36700";

fn record(msg_id: u64, flag: Flag, submit_ns: u64, flag_ns: u64) -> MessageRecord {
    MessageRecord {
        msg_id,
        src: 3,
        dst: 5,
        bytes: 131_072,
        submit_ns,
        flag,
        flag_ns,
    }
}

fn log_text(records: &[MessageRecord]) -> String {
    let mut text = Vec::new();
    write_header(&mut text).unwrap();
    for record in records {
        write_record(&mut text, record).unwrap();
    }
    String::from_utf8(text).unwrap()
}

fn line_error(line: &str) -> RecordError {
    parse_record(line.as_bytes()).expect_err(line)
}

fn read_error(text: &str) -> ReadError {
    read_log(text.as_bytes()).expect_err(text)
}

#[test]
fn writes_the_documented_lines() {
    let complete = record(17, Flag::Complete, 1_200, 36_700);
    assert_eq!(log_text(&[complete]), format!("{HEADER}\n{COMPLETE}\n"));
    assert_eq!(complete.to_string(), COMPLETE);
    assert_eq!(parse_record(COMPLETE.as_bytes()), Ok(complete));
    assert_eq!(HEADER, "msg_id,src,dst,bytes,submit_ns,flag,flag_ns");
}

#[test]
fn round_trips_every_flag() {
    let records = [
        record(1, Flag::Complete, 0, 10),
        record(2, Flag::Reject, 5, 5),
        record(u64::MAX, Flag::Failure, u64::MAX - 1, u64::MAX),
    ];
    assert_eq!(read_log(log_text(&records).as_bytes()).unwrap(), records);
    for flag in [Flag::Complete, Flag::Reject, Flag::Failure] {
        assert_eq!(Flag::from_name(flag.as_str()), Some(flag));
    }
    assert_eq!(Flag::from_name("Complete"), None);
}

#[test]
fn refuses_a_wrong_number_of_fields() {
    assert_eq!(
        line_error("17,3,5,131072,1200,complete"),
        RecordError::FieldCount { found: 6 }
    );
    assert_eq!(
        line_error(&format!("{COMPLETE},1")),
        RecordError::FieldCount { found: 8 }
    );
    assert_eq!(line_error(""), RecordError::FieldCount { found: 1 });
}

#[test]
fn names_the_bad_field() {
    let cases = [
        ("x,3,5,131072,1200,complete,36700", "msg_id", "x"),
        ("17,4294967296,5,131072,1200,complete,36700", "src", "4294967296"),
        ("17,3,-5,131072,1200,complete,36700", "dst", "-5"),
        ("17,3,5,+131072,1200,complete,36700", "bytes", "+131072"),
        ("17,3,5,131072, 1200,complete,36700", "submit_ns", " 1200"),
        ("17,3,5,131072,1200,complete,", "flag_ns", ""),
        (
            "17,3,5,131072,1200,complete,18446744073709551616",
            "flag_ns",
            "18446744073709551616",
        ),
    ];
    for (line, field, text) in cases {
        let expected = RecordError::BadNumber {
            field,
            text: text.to_owned(),
        };
        assert_eq!(line_error(line), expected, "{line}");
    }
}

#[test]
fn refuses_an_unknown_flag_and_keeps_the_error_small() {
    assert_eq!(
        line_error("17,3,5,131072,1200,done,36700"),
        RecordError::UnknownFlag("done".to_owned())
    );
    let long = "y".repeat(1_000);
    match line_error(&format!("17,3,5,131072,1200,{long},36700")) {
        RecordError::UnknownFlag(text) => assert_eq!(text.len(), 64),
        other => panic!("{other:?}"),
    }
    match parse_record(b"17,3,5,131072,1200,\xffcomplete,36700") {
        Err(RecordError::UnknownFlag(text)) => assert!(text.ends_with("complete")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn refuses_a_flag_before_its_submission() {
    assert_eq!(
        line_error("17,3,5,131072,1200,reject,1199"),
        RecordError::FlagBeforeSubmit {
            submit_ns: 1_200,
            flag_ns: 1_199
        }
    );
}

#[test]
fn needs_the_header_first() {
    assert!(matches!(read_error(""), ReadError::Header { line: 0 }));
    assert!(matches!(read_error("\n  \n"), ReadError::Header { line: 0 }));
    assert!(matches!(
        read_error(&format!("{COMPLETE}\n")),
        ReadError::Header { line: 1 }
    ));
    assert!(matches!(
        read_error(&format!("\n{COMPLETE}\n")),
        ReadError::Header { line: 2 }
    ));
    assert!(matches!(
        read_error("msg_id,src,dst\n"),
        ReadError::Header { line: 1 }
    ));
    assert_eq!(read_log(format!("{HEADER}\n").as_bytes()).unwrap(), []);
}

#[test]
fn skips_blank_lines_and_repeated_headers_and_takes_crlf() {
    // Two senders' logs concatenated, one written on Windows.
    let text = format!("{HEADER}\r\n{COMPLETE}\r\n\n{HEADER}\n18,4,5,8,0,failure,9");
    let records = read_log(text.as_bytes()).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].src, 4);
    assert_eq!(records[1].flag, Flag::Failure);
}

#[test]
fn reports_the_line_of_a_bad_record_and_stops() {
    let text = format!("{HEADER}\n{COMPLETE}\n\n18,3,5,8,0,later,9\n{COMPLETE}\n");
    match read_error(&text) {
        ReadError::Record { line, error } => {
            assert_eq!(line, 4);
            assert_eq!(error, RecordError::UnknownFlag("later".to_owned()));
        }
        other => panic!("{other:?}"),
    }
    let mut reader = LogReader::new(text.as_bytes());
    assert!(reader.next().unwrap().is_ok());
    assert!(reader.next().unwrap().is_err());
    assert!(reader.next().is_none());
    assert_eq!(reader.line(), 4);
}

#[test]
fn refuses_a_line_over_the_limit() {
    let text = format!("{HEADER}\n{COMPLETE}\n");
    let at_limit = LogReader::new(text.as_bytes()).with_line_bytes_max(HEADER.len());
    assert_eq!(at_limit.count(), 1);
    let mut reader = LogReader::new(text.as_bytes()).with_line_bytes_max(HEADER.len() - 1);
    match reader.next() {
        Some(Err(ReadError::LineTooLong { line: 1, bytes_max })) => assert_eq!(bytes_max, HEADER.len() - 1),
        other => panic!("{other:?}"),
    }
    let garbage = format!("{HEADER}\n{}", "7".repeat(1 << 20));
    assert!(matches!(
        read_error(&garbage),
        ReadError::LineTooLong { line: 2, .. }
    ));
}

#[test]
fn reads_a_file() {
    let path = std::env::temp_dir().join(format!("onepipe-check-cosy-{}.csv", std::process::id()));
    let records = [record(1, Flag::Complete, 0, 10), record(2, Flag::Reject, 3, 4)];
    std::fs::write(&path, log_text(&records)).unwrap();
    let read = read_log_file(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read.unwrap(), records);
    assert!(matches!(read_log_file(&path), Err(ReadError::Open { .. })));
}

#[test]
fn bound_holds_when_every_flag_is_within_delta() {
    let records = [
        record(1, Flag::Complete, 100, 900),
        record(2, Flag::Complete, 200, 1_200),
        record(3, Flag::Reject, 300, 350),
        record(4, Flag::Failure, 400, 1_400),
    ];
    let report = check_bound(&records, 1_000);
    assert!(report.held, "{report}");
    assert_eq!(
        (report.messages, report.completed, report.rejected, report.failed),
        (4, 2, 1, 1)
    );
    assert_eq!(report.max_completion_ns, 1_000);
    assert_eq!(report.max_flag_ns, 1_000);
    assert_eq!(report.max_completion_over_delta, 1.0);
    assert_eq!((report.violations, report.violators.len()), (0, 0));
    // The same run against a tighter bound: the completion at exactly 800 ns holds, the rest not.
    let tight = check_bound(&records, 800);
    assert!(!tight.held);
    assert_eq!(tight.violations, 2);
    assert_eq!(tight.max_completion_over_delta, 1.25);
}

#[test]
fn bound_breaks_on_a_late_flag_of_any_kind() {
    for flag in [Flag::Complete, Flag::Reject, Flag::Failure] {
        let records = [record(1, Flag::Complete, 0, 10), record(2, flag, 50, 151)];
        let report = check_bound(&records, 100);
        assert!(!report.held, "{flag:?}");
        assert_eq!(
            report.violators,
            [BoundViolation::Late {
                index: 1,
                src: 3,
                msg_id: 2,
                flag,
                latency_ns: 101
            }]
        );
        let max_completion_ns = if flag == Flag::Complete { 101 } else { 10 };
        assert_eq!(
            (report.max_completion_ns, report.max_flag_ns),
            (max_completion_ns, 101)
        );
    }
}

#[test]
fn bound_breaks_on_a_duplicate() {
    let mut other_sender = record(1, Flag::Complete, 0, 10);
    other_sender.src = 4;
    let records = [
        record(1, Flag::Complete, 0, 10),
        other_sender,
        record(2, Flag::Reject, 0, 10),
        record(1, Flag::Reject, 20, 30),
    ];
    let report = check_bound(&records, 100);
    assert!(!report.held);
    assert_eq!(
        report.violators,
        [BoundViolation::Duplicate {
            index: 3,
            first_index: 0,
            src: 3,
            msg_id: 1
        }]
    );
}

#[test]
fn bound_breaks_on_a_flag_before_its_submission() {
    let report = check_bound(&[record(1, Flag::Complete, 50, 10)], u64::MAX);
    assert!(!report.held);
    assert!(matches!(
        report.violators[..],
        [BoundViolation::FlagBeforeSubmit { index: 0, .. }]
    ));
    assert_eq!((report.completed, report.max_completion_ns), (1, 0));
}

#[test]
fn bound_keeps_the_first_violators_and_counts_all() {
    let records: Vec<_> = (0..100).map(|id| record(id, Flag::Failure, 0, 2)).collect();
    let report = check_bound(&records, 1);
    assert_eq!(report.violations, 100);
    assert_eq!(report.violators.len(), MAX_EXAMPLES);
    assert!(matches!(
        report.violators[0],
        BoundViolation::Late { msg_id: 0, .. }
    ));
}

#[test]
fn bound_degenerate_inputs() {
    let empty = check_bound(&[], 0);
    assert!(empty.held);
    assert_eq!((empty.messages, empty.max_completion_over_delta), (0, 0.0));
    let instant = check_bound(&[record(1, Flag::Complete, 5, 5)], 0);
    assert!(instant.held);
    assert_eq!(instant.max_completion_over_delta, 0.0);
    let late = check_bound(&[record(1, Flag::Complete, 5, 6)], 0);
    assert!(!late.held);
    assert_eq!(late.max_completion_over_delta, f64::INFINITY);
    let json = serde_json::to_value(&late).unwrap();
    assert_eq!(json["held"], false);
    assert_eq!(json["max_completion_over_delta"], serde_json::Value::Null);
    assert_eq!(json["violators"][0]["kind"], "late");
    assert_eq!(json["violators"][0]["flag"], "complete");
}

fn link(name: &str, peak_reserved: u32, unreserved_frames: u64, ratio: f64) -> LinkUse {
    LinkUse {
        link: name.to_owned(),
        peak_reserved,
        unreserved_frames,
        peak_bytes_per_window_over_capacity: ratio,
    }
}

#[test]
fn links_hold_at_their_limits() {
    let links = [
        link("s0p1", 4, 0, 0.5),
        link("s1p0", 3, 0, 1.0),
        link("s2p3", 0, 0, 0.0),
    ];
    let report = check_link_capacity(&links, 4);
    assert!(report.held, "{report}");
    assert_eq!((report.links, report.violations), (3, 0));
    assert_eq!(report.worst, Some(links[1].clone()));
}

#[test]
fn links_break_on_k_plus_one_reservations() {
    let report = check_link_capacity(&[link("s0p1", 4, 0, 0.5), link("s1p0", 5, 0, 0.5)], 4);
    assert!(!report.held);
    assert_eq!(
        report.violators,
        [LinkViolation::OverReserved {
            link: "s1p0".to_owned(),
            peak_reserved: 5,
            k: 4
        }]
    );
}

#[test]
fn links_break_on_unreserved_frames() {
    let report = check_link_capacity(&[link("s0p1", 1, 1_500, 0.1)], 4);
    assert!(!report.held);
    assert_eq!(
        report.violators,
        [LinkViolation::UnreservedFrames {
            link: "s0p1".to_owned(),
            frames: 1_500
        }]
    );
}

#[test]
fn links_break_over_capacity_and_on_nan() {
    let links = [
        link("a", 1, 0, 1.0001),
        link("b", 1, 0, f64::NAN),
        link("c", 1, 0, 2.0),
    ];
    let report = check_link_capacity(&links, 1);
    assert!(!report.held);
    assert_eq!(report.violations, 3);
    // A NaN hides the real load: it ranks as the busiest.
    assert_eq!(report.worst.as_ref().map(|l| l.link.as_str()), Some("b"));
}

#[test]
fn links_count_every_broken_invariant_and_keep_the_first() {
    let links: Vec<_> = (0..20).map(|i| link(&format!("l{i}"), 9, 1, 1.5)).collect();
    let report = check_link_capacity(&links, 8);
    assert_eq!(report.violations, 60);
    assert_eq!(report.violators.len(), MAX_EXAMPLES);
    assert!(matches!(&report.violators[0], LinkViolation::OverReserved { link, .. } if link == "l0"));
    let none = check_link_capacity(&[], 8);
    assert!(none.held && none.worst.is_none());
    assert_eq!(
        serde_json::to_value(&report).unwrap()["violators"][1]["kind"],
        "unreserved_frames"
    );
}

#[test]
fn queue_bound() {
    let at = check_queue_bound(22_500, 22_500);
    assert!(at.held);
    let over = check_queue_bound(22_501, 22_500);
    assert!(!over.held);
    assert_eq!((over.peak_bytes, over.bound_bytes), (22_501, 22_500));
    assert_eq!(serde_json::to_value(over).unwrap()["held"], false);
}

fn any_flag() -> impl Strategy<Value = Flag> {
    prop_oneof![Just(Flag::Complete), Just(Flag::Reject), Just(Flag::Failure)]
}

fn any_record() -> impl Strategy<Value = MessageRecord> {
    (
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any_flag(),
        any::<u64>(),
    )
        .prop_map(|(msg_id, src, dst, bytes, a, flag, b)| MessageRecord {
            msg_id,
            src,
            dst,
            bytes,
            submit_ns: a.min(b),
            flag,
            flag_ns: a.max(b),
        })
}

proptest! {
    #[test]
    fn parse_record_never_panics_on_strings(line in ".*") {
        let _ = parse_record(line.as_bytes());
    }

    #[test]
    fn parse_record_never_panics_on_near_misses(line in "[0-9,a-z+ -]{0,60}") {
        let _ = parse_record(line.as_bytes());
    }

    #[test]
    fn read_log_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut text = format!("{HEADER}\n").into_bytes();
        text.extend(bytes);
        let _ = read_log(&text[..]);
    }

    #[test]
    fn logs_round_trip(records in proptest::collection::vec(any_record(), 0..20)) {
        prop_assert_eq!(read_log(log_text(&records).as_bytes()).unwrap(), records);
    }
}
