//! Log format: parsing, writing, reading a directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use onepipe_check::{Event, LineError, LogError, ProcessLog, parse_log, read_dir, write_event};

fn line_error(text: &str) -> (usize, LineError) {
    match parse_log(0, text) {
        Err(LogError::Line { line, error }) => (line, error),
        other => panic!("expected a line error for {text:?}, got {other:?}"),
    }
}

#[test]
fn parses_both_tags_and_skips_blank_lines() {
    let log = parse_log(7, "S,10,2,0\n\n  \r\nD,5,3,9\r\n").unwrap();
    assert_eq!(log.process, 7);
    assert_eq!(
        log.events,
        [
            Event::Send {
                ts_ns: 10,
                dst: 2,
                msg_id: 0
            },
            Event::Deliver {
                ts_ns: 5,
                src: 3,
                msg_id: 9
            }
        ]
    );
    assert_eq!(parse_log(1, "").unwrap().events, []);
}

#[test]
fn rejects_bad_tag() {
    assert_eq!(
        line_error("S,1,2,3\nX,1,2,3\n"),
        (2, LineError::BadTag("X".into()))
    );
    assert_eq!(line_error("s,1,2,3"), (1, LineError::BadTag("s".into())));
}

#[test]
fn rejects_wrong_field_count() {
    assert_eq!(line_error("D,1,2"), (1, LineError::FieldCount(3)));
    assert_eq!(line_error("\nS,1,2,3,4"), (2, LineError::FieldCount(5)));
    assert_eq!(line_error("S"), (1, LineError::FieldCount(1)));
}

#[test]
fn rejects_non_numbers() {
    let nan = |field, text: &str| LineError::NotANumber {
        field,
        text: text.into(),
    };
    assert_eq!(line_error("S,abc,2,3"), (1, nan("ts_ns", "abc")));
    assert_eq!(line_error("S,1,-2,3"), (1, nan("dst", "-2")));
    assert_eq!(line_error("D,1,+2,3"), (1, nan("src", "+2")));
    assert_eq!(line_error("D,1,2,"), (1, nan("msg_id", "")));
    // A process id must fit u32.
    assert_eq!(line_error("D,1,4294967296,3"), (1, nan("src", "4294967296")));
    let msg = LogError::Line {
        line: 4,
        error: nan("ts_ns", "x"),
    }
    .to_string();
    assert!(msg.contains("line 4") && msg.contains("ts_ns"), "{msg}");
}

#[test]
fn write_then_parse_round_trips() {
    let events = vec![
        Event::Send {
            ts_ns: u64::MAX,
            dst: u32::MAX,
            msg_id: 0,
        },
        Event::Deliver {
            ts_ns: 0,
            src: 0,
            msg_id: u64::MAX,
        },
        Event::Send {
            ts_ns: 123_456_789,
            dst: 3,
            msg_id: 42,
        },
    ];
    let mut buf = Vec::new();
    for e in &events {
        write_event(&mut buf, e).unwrap();
    }
    let text = String::from_utf8(buf).unwrap();
    assert_eq!(text.lines().nth(2), Some("S,123456789,3,42"));
    assert_eq!(parse_log(5, &text).unwrap(), ProcessLog { process: 5, events });
}

/// A fresh empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "onepipe-check-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn read_dir_reads_numbered_logs_sorted() {
    let dir = TempDir::new();
    dir.write("10.log", "D,5,2,0\n");
    dir.write("2.log", "S,5,10,0\n");
    dir.write("3.log", "");
    dir.write("notes.txt", "junk");
    dir.write("x.log", "junk");
    dir.write("4.log.bak", "junk");
    std::fs::create_dir(dir.0.join("5.log")).unwrap();
    let logs = read_dir(&dir.0).unwrap();
    let ids: Vec<_> = logs.iter().map(|l| l.process).collect();
    assert_eq!(ids, [2, 3, 10]);
    assert_eq!(
        logs[0].events,
        [Event::Send {
            ts_ns: 5,
            dst: 10,
            msg_id: 0
        }]
    );
    assert!(logs[1].events.is_empty());
    assert!(onepipe_check::check_all(&logs).ok());
}

#[test]
fn read_dir_names_the_unparseable_file() {
    let dir = TempDir::new();
    dir.write("1.log", "S,1,2,3\n");
    dir.write("2.log", "S,1,2,3\nD,oops,1,3\n");
    let err = read_dir(&dir.0).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, LogError::File { path, .. } if path.ends_with("2.log")),
        "{err:?}"
    );
    assert!(
        msg.contains("2.log") && msg.contains("line 2") && msg.contains("oops"),
        "{msg}"
    );
}

#[test]
fn read_dir_rejects_two_files_for_one_process() {
    let dir = TempDir::new();
    dir.write("1.log", "");
    dir.write("01.log", "");
    assert!(matches!(
        read_dir(&dir.0),
        Err(LogError::DuplicateProcess { process: 1, .. })
    ));
}

#[test]
fn read_dir_reports_missing_dir() {
    let dir = TempDir::new();
    let missing = dir.0.join("nope");
    let err = read_dir(&missing).unwrap_err();
    assert!(
        matches!(&err, LogError::Io { path, .. } if *path == missing),
        "{err:?}"
    );
}
