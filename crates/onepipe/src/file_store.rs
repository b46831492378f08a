//! The controller's log in a file: the embedded default backend of
//! [`onepipe_proto::controller::store::Store`], one JSON record per line, appended and synced
//! before the controller acts on it.
//!
//! Compaction writes the snapshot to `<log>.compact`, syncs it, renames it over the log and
//! syncs the directory: a crash before the rename leaves the old log (and a stray
//! `<log>.compact`, removed at the next open), after it the new one; both replay to the same
//! controller.

use onepipe_proto::controller::store::{Record, Store, StoreError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// An append-only file of JSON lines.
pub struct FileStore {
    path: PathBuf,
    file: std::fs::File,
    /// A last line cut short (the previous controller stopped mid-write) that `load` skipped.
    pub torn_tail: bool,
}

impl FileStore {
    /// Opens `path` for appending, creating it if absent.
    pub fn open(path: &Path) -> Result<FileStore, StoreError> {
        // A compaction that stopped before its rename: the log itself is whole.
        match std::fs::remove_file(compact_path(path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(path, e)),
            _ => {}
        }
        Ok(FileStore {
            path: path.to_path_buf(),
            file: open_append(path)?,
            torn_tail: false,
        })
    }

    /// Writes `record` as the whole content of `<log>.compact`, synced.
    fn write_compacted(&self, record: &Record) -> Result<PathBuf, StoreError> {
        let tmp = compact_path(&self.path);
        let mut file = std::fs::File::create(&tmp).map_err(|e| io_error(&tmp, e))?;
        file.write_all(&line_of(record)).map_err(|e| io_error(&tmp, e))?;
        file.sync_all().map_err(|e| io_error(&tmp, e))?;
        Ok(tmp)
    }
}

fn open_append(path: &Path) -> Result<std::fs::File, StoreError> {
    std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| io_error(path, e))
}

/// Where a compaction writes the new log before renaming it over the old.
fn compact_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".compact");
    PathBuf::from(name)
}

fn line_of(record: &Record) -> Vec<u8> {
    let mut line = serde_json::to_vec(record).expect("records always serialize");
    line.push(b'\n');
    line
}

/// Makes a rename in `file`'s directory durable.
fn sync_dir(file: &Path) -> Result<(), StoreError> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

impl Store for FileStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        self.file
            .write_all(&line_of(record))
            .map_err(|e| io_error(&self.path, e))?;
        self.file.sync_data().map_err(|e| io_error(&self.path, e))
    }

    fn compact(&mut self, snapshot: &Record) -> Result<(), StoreError> {
        let tmp = self.write_compacted(snapshot)?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io_error(&self.path, e))?;
        sync_dir(&self.path)?;
        self.file = open_append(&self.path)?;
        Ok(())
    }

    fn load(&mut self) -> Result<Vec<Record>, StoreError> {
        let text = std::fs::read(&self.path).map_err(|e| io_error(&self.path, e))?;
        // Appends are whole lines, so only the last can be cut short, by a crash in the middle
        // of a write that was therefore never acted on: it is cut off, so that later appends
        // start a line of their own.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        if whole < text.len() {
            self.torn_tail = true;
            self.file
                .set_len(whole as u64)
                .map_err(|e| io_error(&self.path, e))?;
        }
        let mut records = Vec::new();
        for (i, line) in text[..whole].split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let record = serde_json::from_slice(line).map_err(|e| StoreError::Corrupt {
                path: self.path.display().to_string(),
                line: i + 1,
                reason: e.to_string(),
            })?;
            records.push(record);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_proto::controller::Input;
    use onepipe_proto::controller::store::{self, Event};

    fn records() -> Vec<Record> {
        (0..3)
            .map(|k| Record {
                at_ns: k,
                event: Event::Input(Input::Register { process: k as u32 }),
            })
            .collect()
    }

    /// A crash in the middle of an append leaves half a line: it was never acted on, so it is
    /// cut off and later appends start a line of their own. Damage anywhere else is refused
    /// rather than guessed at.
    #[test]
    fn the_file_log_survives_a_restart_and_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("onepipe-file-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut first = FileStore::open(&path).unwrap();
        for r in &records() {
            first.append(r).unwrap();
        }
        drop(first);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"at_ns":5,"event":{"Inp"#);
        std::fs::write(&path, &bytes).unwrap();

        let mut second = FileStore::open(&path).unwrap();
        assert_eq!(second.load().unwrap(), records());
        assert!(second.torn_tail);
        let tick = Record {
            at_ns: 9,
            event: Event::Tick,
        };
        second.append(&tick).unwrap();
        drop(second);
        let mut third = FileStore::open(&path).unwrap();
        let mut expected = records();
        expected.push(tick);
        assert_eq!(third.load().unwrap(), expected);
        assert!(!third.torn_tail);

        std::fs::write(&path, b"not json\n{}\n").unwrap();
        let err = FileStore::open(&path).unwrap().load().unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { line: 1, .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn temp_log(test: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("onepipe-file-store-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.jsonl");
        (dir, path)
    }

    fn controller() -> onepipe_proto::controller::Controller {
        use onepipe_fabric::{Topology, Wiring};
        let wiring = Wiring::new(Topology::leaf_spine(2, 1, 2).unwrap(), 1).unwrap();
        let graph = onepipe_proto::controller::graph::Graph::new(&wiring);
        onepipe_proto::controller::Controller::new(graph, Default::default())
    }

    fn at(ms: u64) -> onepipe_wire::Instant {
        onepipe_wire::Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
    }

    /// Compaction renames a synced new file over the log. Whatever a crash in the middle
    /// leaves replays to the controller that wrote it: a half-written or whole `.compact` file
    /// beside the old log (the crash came before the rename), the snapshot alone (after it),
    /// or the snapshot with a torn append behind it.
    #[test]
    fn a_compacted_file_log_and_a_crash_in_the_middle_of_compaction_replay() {
        use onepipe_proto::controller::Member;
        use onepipe_proto::controller::store::Service;
        let (dir, path) = temp_log("compact");
        let mut s = Service::open(controller(), FileStore::open(&path).unwrap(), at(0))
            .unwrap()
            .compact_after_records(4);
        for k in 0..4u32 {
            s.handle_input(at(1), Input::Register { process: k }).unwrap();
        }
        assert_eq!(s.log_counters().compactions, 1);
        let report = Input::LinkDown {
            member: Member::Switch(0),
            port: 0,
            last_commit_ns: at(1).as_nanos(),
        };
        s.handle_input(at(2), report).unwrap();
        let expected = s.controller().snapshot();
        let old_log = std::fs::read(&path).unwrap();
        assert_eq!(
            old_log.iter().filter(|&&b| b == b'\n').count(),
            2,
            "snapshot and one record"
        );
        drop(s);
        let replay = |path: &Path| {
            let mut c = controller();
            let records = FileStore::open(path).unwrap().load().unwrap();
            store::replay(&mut c, records).unwrap();
            c.snapshot()
        };
        assert_eq!(replay(&path), expected);

        // Crash before the rename: a torn or a whole new file beside the old log.
        let tmp = compact_path(&path);
        std::fs::write(&tmp, &old_log[..old_log.len() / 3]).unwrap();
        assert_eq!(replay(&path), expected);
        assert!(!tmp.exists(), "the stray file is removed");
        let whole = FileStore::open(&path).unwrap();
        let snapshot = Record {
            at_ns: at(2).as_nanos(),
            event: store::Event::Snapshot(Box::new(expected.clone())),
        };
        let tmp_written = whole.write_compacted(&snapshot).unwrap();
        assert_eq!(tmp_written, tmp);
        drop(whole);
        assert_eq!(replay(&path), expected);

        // Crash after the rename: the snapshot alone, then with a torn append behind it.
        let mut store = FileStore::open(&path).unwrap();
        store.compact(&snapshot).unwrap();
        drop(store);
        assert_eq!(replay(&path), expected);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"at_ns":5,"event":{"Inp"#);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(replay(&path), expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
