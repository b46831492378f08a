//! The controller's log in a file: the embedded default backend of
//! [`onepipe_proto::controller::store::Store`], one JSON record per line, appended and synced
//! before the controller acts on it.

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
        let file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        Ok(FileStore {
            path: path.to_path_buf(),
            file,
            torn_tail: false,
        })
    }
}

fn io_error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

impl Store for FileStore {
    fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).expect("records always serialize");
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| io_error(&self.path, e))?;
        self.file.sync_data().map_err(|e| io_error(&self.path, e))
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
    use onepipe_proto::controller::store::Event;

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
}
