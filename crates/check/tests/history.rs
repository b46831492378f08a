//! The history format: writing, reading back, and every way a line can be wrong.

mod common;

use common::{Workload, build};
use onepipe_check::{
    HistoryError, HistoryReader, HistoryRecord, OpKind, Outcome, ReadError, RecordError, check_history,
    read_history, read_history_file, write_record,
};
use proptest::prelude::*;

fn read_error(text: &str) -> (u64, RecordError) {
    match read_history(text.as_bytes()) {
        Err(ReadError::Record { line, error }) => (line, error),
        other => panic!("expected a record error for {text:?}, got {other:?}"),
    }
}

const WRITE: &str = r#"{"client":3,"op":"write","key":"k17","value":"v1","expect":null,"outcome":"ok","call_ns":120,"return_ns":450}"#;

#[test]
fn writes_the_documented_line() {
    let record = HistoryRecord {
        client: 3,
        op: OpKind::Write,
        key: "k17".to_owned(),
        value: Some("v1".to_owned()),
        expect: None,
        outcome: Outcome::Ok,
        call_ns: 120,
        return_ns: 450,
        txn: None,
        ts: None,
    };
    let mut text = Vec::new();
    write_record(&mut text, &record).unwrap();
    assert_eq!(String::from_utf8(text).unwrap(), format!("{WRITE}\n"));
    assert_eq!(record.to_string(), WRITE);
    assert_eq!(serde_json::from_str::<HistoryRecord>(WRITE).unwrap(), record);
}

#[test]
fn writes_txn_and_ts_last_and_only_when_set() {
    let mut record: HistoryRecord = serde_json::from_str(WRITE).unwrap();
    assert_eq!((record.txn, record.ts), (None, None));
    record.txn = Some(7);
    record.ts = Some(99);
    let line = record.to_string();
    assert_eq!(
        line,
        format!("{},\"txn\":7,\"ts\":99}}", &WRITE[..WRITE.len() - 1])
    );
    assert_eq!(read_history(line.as_bytes()).unwrap(), [record]);
}

#[test]
fn operations_of_one_transaction_share_their_interval() {
    let op = |txn, key: &str| HistoryRecord {
        key: key.to_owned(),
        txn,
        ..serde_json::from_str(WRITE).unwrap()
    };
    check_history(&[op(Some(1), "a"), op(Some(1), "b"), op(Some(2), "c")])
        .expect_err("transaction 2 overlaps transaction 1");
    check_history(&[op(Some(1), "a"), op(Some(1), "b")]).unwrap();
    assert!(matches!(
        check_history(&[op(None, "a"), op(None, "b")]),
        Err(HistoryError::ClientOverlap {
            client: 3,
            first: 0,
            second: 1
        })
    ));
}

#[test]
fn reads_omitted_nulls_crlf_blank_lines_and_extra_fields() {
    let text = format!(
        "\n{WRITE}\r\n   \n{}\n{}",
        r#"{"client":4,"op":"read","key":"k17","outcome":"ok","call_ns":1,"return_ns":1,"session":9}"#,
        r#"{"client":5,"op":"cas","key":"k","value":"b","expect":"a","outcome":"fail","call_ns":2,"return_ns":3}"#,
    );
    let records = read_history(text.as_bytes()).unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!((records[1].op, records[1].value.as_deref()), (OpKind::Read, None));
    assert_eq!(records[2].expect.as_deref(), Some("a"));
    assert_eq!(records[2].outcome, Outcome::Fail);
}

#[test]
fn names_the_line_of_each_problem() {
    let (line, error) = read_error(&format!("{WRITE}\n\n{{\"client\":"));
    assert_eq!(line, 3);
    assert!(matches!(error, RecordError::Json(_)), "{error}");
    let missing = r#"{"client":1,"op":"read","key":"k","outcome":"ok","call_ns":1}"#;
    assert!(matches!(
        read_error(missing),
        (1, RecordError::MissingField("return_ns"))
    ));
    let null_client = r#"{"client":null,"op":"read","key":"k","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(
        read_error(null_client),
        (1, RecordError::MissingField("client"))
    ));
    let unknown_op = r#"{"client":1,"op":"append","key":"k","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(read_error(unknown_op), (1, RecordError::UnknownOp(op)) if op == "append"));
    let unknown_outcome = r#"{"client":1,"op":"read","key":"k","outcome":"maybe","call_ns":1,"return_ns":2}"#;
    assert!(matches!(read_error(unknown_outcome), (1, RecordError::UnknownOutcome(o)) if o == "maybe"));
    let backwards = r#"{"client":1,"op":"read","key":"k","outcome":"ok","call_ns":5,"return_ns":2}"#;
    assert!(matches!(
        read_error(backwards),
        (
            1,
            RecordError::ReturnBeforeCall {
                call_ns: 5,
                return_ns: 2
            }
        )
    ));
    let negative = r#"{"client":-1,"op":"read","key":"k","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(read_error(negative), (1, RecordError::Json(_))));
    let no_value = r#"{"client":1,"op":"write","key":"k","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(
        read_error(no_value),
        (1, RecordError::MissingValue(OpKind::Write))
    ));
    let delete_value =
        r#"{"client":1,"op":"delete","key":"k","value":"x","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(
        read_error(delete_value),
        (1, RecordError::UnexpectedValue(OpKind::Delete))
    ));
    let read_expect =
        r#"{"client":1,"op":"read","key":"k","expect":"x","outcome":"ok","call_ns":1,"return_ns":2}"#;
    assert!(matches!(
        read_error(read_expect),
        (1, RecordError::UnexpectedExpect(OpKind::Read))
    ));
    assert!(matches!(read_error("[1,2,3]"), (1, RecordError::Json(_))));
    assert!(matches!(read_error("\u{feff}{}"), (1, RecordError::Json(_))));
}

#[test]
fn an_unknown_op_in_an_error_is_clipped() {
    let long = "x".repeat(10_000);
    let line = format!(r#"{{"client":1,"op":"{long}","key":"k","outcome":"ok","call_ns":1,"return_ns":2}}"#);
    match read_error(&line) {
        (1, RecordError::UnknownOp(op)) => assert!(op.len() <= 64, "{} bytes", op.len()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn refuses_a_line_longer_than_the_limit_and_stops() {
    let text = format!("{WRITE}\n{WRITE}\n{WRITE}\n");
    let mut reader = HistoryReader::new(text.as_bytes()).with_line_bytes_max(WRITE.len());
    assert_eq!(reader.by_ref().count(), 3, "a line exactly at the limit is fine");
    let long = format!("{WRITE}\n{} \n{WRITE}\n", WRITE);
    let mut reader = HistoryReader::new(long.as_bytes()).with_line_bytes_max(WRITE.len());
    assert!(reader.next().unwrap().is_ok());
    match reader.next() {
        Some(Err(ReadError::LineTooLong { line: 2, bytes_max })) => assert_eq!(bytes_max, WRITE.len()),
        other => panic!("expected a long line, got {other:?}"),
    }
    assert!(reader.next().is_none(), "the stream ends at the first error");
    // The last line, without a newline, is held to the same limit.
    let last = format!("{WRITE}x");
    let mut reader = HistoryReader::new(last.as_bytes()).with_line_bytes_max(WRITE.len());
    assert!(matches!(
        reader.next(),
        Some(Err(ReadError::LineTooLong { line: 1, .. }))
    ));
}

#[test]
fn a_missing_file_is_an_open_error() {
    let path = std::path::Path::new("/nonexistent/history.jsonl");
    assert!(matches!(read_history_file(path), Err(ReadError::Open { .. })));
}

#[test]
fn reads_a_file_it_wrote() {
    let records = build(
        &Workload {
            seed: 5,
            clients: 3,
            ops: 100,
            keys: 4,
            write_one_in: 3,
            unknown_one_in: 5,
            values: 8,
            cas: true,
            spread_ns: 10,
        }
        .specs(),
    );
    let path = std::env::temp_dir().join(format!("onepipe-history-{}.jsonl", std::process::id()));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for record in &records {
        write_record(&mut file, record).unwrap();
    }
    drop(file);
    let read = read_history_file(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read.unwrap(), records);
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,12}", "[a-z0-9]{1,4}", Just(String::new()), "\\PC{0,8}"]
}

fn record() -> impl Strategy<Value = HistoryRecord> {
    let op = prop_oneof![
        Just(OpKind::Read),
        Just(OpKind::Write),
        Just(OpKind::Insert),
        Just(OpKind::Cas),
        Just(OpKind::Delete)
    ];
    let outcome = prop_oneof![Just(Outcome::Ok), Just(Outcome::Fail), Just(Outcome::Unknown)];
    (
        any::<u64>(),
        op,
        text(),
        text(),
        prop::option::of(text()),
        outcome,
        any::<u64>(),
        any::<u64>(),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
    )
        .prop_map(
            |(client, op, key, value, expect, outcome, a, b, txn, ts)| HistoryRecord {
                client,
                op,
                key,
                value: (op != OpKind::Delete).then_some(value),
                expect: if op == OpKind::Cas { expect } else { None },
                outcome,
                call_ns: a.min(b),
                return_ns: a.max(b),
                txn,
                ts,
            },
        )
}

proptest! {
    #[test]
    fn write_then_read_gives_the_records_back(records in prop::collection::vec(record(), 0..20)) {
        let mut text = Vec::new();
        for record in &records {
            write_record(&mut text, record).unwrap();
        }
        prop_assert_eq!(read_history(text.as_slice()).unwrap(), records);
    }

    #[test]
    fn never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        for item in HistoryReader::new(bytes.as_slice()).with_line_bytes_max(64) {
            let _ = item;
        }
    }

    #[test]
    fn never_panics_on_damaged_lines(record in record(), cut in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut line = record.to_string().into_bytes();
        let at = cut.index(line.len());
        line[at] = byte;
        let _ = read_history(line.as_slice());
        line.truncate(at);
        let _ = read_history(line.as_slice());
    }
}
