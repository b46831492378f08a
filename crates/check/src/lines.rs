//! Reading a text log line by line in bounded memory: what every reader of a line format here
//! (histories, cosy message logs) shares.

use std::io::{self, BufRead, Read};

/// Why a line could not be read.
#[derive(Debug)]
pub(crate) enum LineError {
    Io { line: u64, error: io::Error },
    TooLong { line: u64, bytes_max: usize },
}

pub(crate) struct BoundedLines<R> {
    reader: R,
    /// Lines read so far (the 1-based number of the last one).
    line: u64,
    pub(crate) line_bytes_max: usize,
    pub(crate) buf: Vec<u8>,
}

impl<R: BufRead> BoundedLines<R> {
    pub(crate) fn new(reader: R, line_bytes_max: usize) -> Self {
        BoundedLines {
            reader,
            line: 0,
            line_bytes_max,
            buf: Vec::new(),
        }
    }

    /// The number of lines read so far.
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// Reads the next line into `buf`, without its line ending; `Ok(false)` at the end.
    pub(crate) fn next_line(&mut self) -> Result<bool, LineError> {
        self.buf.clear();
        // One byte past the limit for the newline of a line exactly at the limit.
        let limit = self.line_bytes_max as u64 + 1;
        let line = self.line + 1;
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|error| LineError::Io { line, error })?;
        if read == 0 {
            return Ok(false);
        }
        self.line = line;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if self.buf.len() > self.line_bytes_max {
            return Err(LineError::TooLong {
                line,
                bytes_max: self.line_bytes_max,
            });
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(true)
    }
}
