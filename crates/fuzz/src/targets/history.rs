//! Client histories (docs/histories.md) read from a file: any bytes give records or a typed
//! error naming the line, never a panic; a record that parses prints back to a line that parses
//! to the same record; and the linearizability checker gives any parsed history a verdict or a
//! typed error.

use onepipe_check::{HistoryReader, LinearizabilityConfig, check_linearizable_with, parse_record};

pub fn run(data: &[u8]) {
    let mut records = Vec::new();
    for r in HistoryReader::new(data).with_line_bytes_max(4096) {
        match r {
            Ok(record) => {
                let line = record.to_string();
                let again = parse_record(line.as_bytes()).expect("a printed record parses");
                assert_eq!(again, record);
                records.push(record);
            }
            Err(_) => break,
        }
    }
    let config = LinearizabilityConfig {
        steps_per_key_max: 10_000,
        cache_bytes_per_key_max: 1 << 20,
    };
    let _ = check_linearizable_with(&records, &config);
}
