//! Cutting a client's byte stream into requests, as Redis does: a buffer starting with `*` holds a
//! RESP2 multibulk request (an array of bulk strings: what every client library sends), anything
//! else an inline request (a line of words: what telnet sends).
//!
//! The `redis-protocol` crate decodes each bulk string. It recurses into nested arrays with no
//! depth limit (`*1\r\n` repeated overflows the stack), so it is never handed an array: the
//! request's own `*N` line is read here, and every element must start with `$` before the crate
//! sees it, which is also the only shape Redis accepts.

use bytes::Bytes;
use redis_protocol::resp2::decode::decode_range;
use redis_protocol::resp2::types::RangeFrame;

/// Bounds on one request, checked before anything is allocated for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameLimits {
    /// Most arguments in one request (the `N` of `*N`).
    pub args_max: usize,
    /// Longest inline request, and longest `*N` line, in bytes.
    pub line_bytes_max: usize,
}

/// Malformed input. The text is Redis's (after `ERR `); the connection closes after the reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    #[error("Protocol error: too big inline request")]
    InlineTooBig,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("Protocol error: too big mbulk count string")]
    CountLineTooBig,
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedBulk(char),
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A request (complete or not) is larger than `ServeConfig::request_bytes_max`.
    #[error("Protocol error: request over {0} bytes")]
    RequestTooLarge(usize),
}

/// One request decoded from the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The command name and its arguments; empty for an empty line or `*0`, which Redis skips.
    pub args: Vec<Bytes>,
    /// Bytes of the buffer it took.
    pub len_bytes: usize,
}

/// Decodes the request at the start of `buf`: `Ok(None)` while it is incomplete.
pub(crate) fn decode_request(buf: &[u8], limits: FrameLimits) -> Result<Option<Request>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => decode_multibulk(buf, limits),
        Some(_) => decode_inline(buf, limits),
    }
}

fn decode_inline(buf: &[u8], limits: FrameLimits) -> Result<Option<Request>, ProtocolError> {
    let scanned = &buf[..buf.len().min(limits.line_bytes_max + 1)];
    let Some(newline) = scanned.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limits.line_bytes_max {
            Err(ProtocolError::InlineTooBig)
        } else {
            Ok(None)
        };
    };
    if newline > limits.line_bytes_max {
        return Err(ProtocolError::InlineTooBig);
    }
    let line = buf[..newline].strip_suffix(b"\r").unwrap_or(&buf[..newline]);
    // Shell-style words: quotes and backslashes as in Redis's inline format, plus `#` comments.
    let words = shlex::bytes::split(line).ok_or(ProtocolError::UnbalancedQuotes)?;
    let args = words.into_iter().map(Bytes::from).collect();
    Ok(Some(Request {
        args,
        len_bytes: newline + 1,
    }))
}

fn decode_multibulk(buf: &[u8], limits: FrameLimits) -> Result<Option<Request>, ProtocolError> {
    let Some((count, mut position)) = decode_count_line(buf, limits)? else {
        return Ok(None);
    };
    // Capped: the count is the client's word, the allocation grows only with what arrives.
    let mut args = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let Some((arg, len_bytes)) = decode_bulk(&buf[position..])? else {
            return Ok(None);
        };
        args.push(arg);
        position += len_bytes;
    }
    Ok(Some(Request {
        args,
        len_bytes: position,
    }))
}

/// The `*N\r\n` line: `N` and the bytes it took. `*0` and `*-1` give `N = 0`, as Redis skips them.
fn decode_count_line(buf: &[u8], limits: FrameLimits) -> Result<Option<(usize, usize)>, ProtocolError> {
    let scanned = &buf[..buf.len().min(limits.line_bytes_max + 2)];
    let Some(end) = scanned.windows(2).position(|pair| pair == b"\r\n") else {
        return if buf.len() > limits.line_bytes_max {
            Err(ProtocolError::CountLineTooBig)
        } else {
            Ok(None)
        };
    };
    let count: i64 = std::str::from_utf8(&buf[1..end])
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(ProtocolError::InvalidMultibulkLength)?;
    if count > limits.args_max as i64 {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    Ok(Some((count.max(0) as usize, end + 2)))
}

/// One `$len\r\n...\r\n` element: its bytes and the bytes it took.
fn decode_bulk(buf: &[u8]) -> Result<Option<(Bytes, usize)>, ProtocolError> {
    match buf.first() {
        None => return Ok(None),
        Some(b'$') => {}
        Some(&other) => return Err(ProtocolError::ExpectedBulk(char::from(other))),
    }
    match decode_range(buf) {
        Ok(None) => Ok(None),
        Ok(Some((RangeFrame::BulkString((start, end)), len_bytes))) => {
            Ok(Some((Bytes::copy_from_slice(&buf[start..end]), len_bytes)))
        }
        // `$-1` (a nil) is no argument; a length that is not a number fails in the crate.
        Ok(Some(_)) | Err(_) => Err(ProtocolError::InvalidBulkLength),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    const LIMITS: FrameLimits = FrameLimits {
        args_max: 8,
        line_bytes_max: 32,
    };

    fn decode(buf: &[u8]) -> Result<Option<(Vec<String>, usize)>, ProtocolError> {
        decode_request(buf, LIMITS).map(|request| {
            request.map(|r| {
                let words = r
                    .args
                    .iter()
                    .map(|a| String::from_utf8(a.to_vec()).unwrap())
                    .collect();
                (words, r.len_bytes)
            })
        })
    }

    #[test]
    fn a_multibulk_request_and_what_follows_it() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        assert_eq!(decode(buf), Ok(Some((words(&["GET", "k"]), 20))));
        assert_eq!(decode(&buf[20..]), Ok(Some((words(&["PING"]), 14))));
    }

    #[test]
    fn every_prefix_of_a_request_is_incomplete() {
        let buf = b"*2\r\n$3\r\nSET\r\n$0\r\n\r\n";
        for end in 0..buf.len() {
            assert_eq!(decode(&buf[..end]), Ok(None), "prefix of {end} bytes");
        }
        assert_eq!(decode(buf), Ok(Some((words(&["SET", ""]), buf.len()))));
    }

    #[test]
    fn inline_requests_split_like_a_shell() {
        assert_eq!(decode(b"PING\r\n"), Ok(Some((words(&["PING"]), 6))));
        assert_eq!(
            decode(b"set k \"a b\"\n"),
            Ok(Some((words(&["set", "k", "a b"]), 12)))
        );
        assert_eq!(decode(b"\r\n"), Ok(Some((words(&[]), 2))));
        assert_eq!(decode(b"GET k #c\n"), Ok(Some((words(&["GET", "k"]), 9))));
        assert_eq!(decode(b"PING"), Ok(None));
        assert_eq!(decode(b"set k \"a\n"), Err(ProtocolError::UnbalancedQuotes));
    }

    #[test]
    fn empty_arrays_are_skipped() {
        assert_eq!(decode(b"*0\r\n"), Ok(Some((words(&[]), 4))));
        assert_eq!(decode(b"*-1\r\n"), Ok(Some((words(&[]), 5))));
    }

    #[test]
    fn malformed_requests_are_refused_with_redis_messages() {
        let cases: [(&[u8], ProtocolError); 7] = [
            (b"*x\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*9\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*1\r\n*1\r\n*1\r\n", ProtocolError::ExpectedBulk('*')),
            (b"*1\r\n:1\r\n", ProtocolError::ExpectedBulk(':')),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$abc\r\n", ProtocolError::InvalidBulkLength),
            (&[b'x'; 40], ProtocolError::InlineTooBig),
        ];
        for (buf, error) in cases {
            assert_eq!(
                decode(buf),
                Err(error.clone()),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
        }
        let mut long_count = b"*".to_vec();
        long_count.extend([b'1'; 40]);
        assert_eq!(decode(&long_count), Err(ProtocolError::CountLineTooBig));
        assert_eq!(
            ProtocolError::ExpectedBulk('*').to_string(),
            "Protocol error: expected '$', got '*'"
        );
    }

    #[test]
    fn deep_nesting_is_refused_without_recursing() {
        let buf = b"*1\r\n".repeat(1_000_000);
        assert_eq!(decode(&buf), Err(ProtocolError::ExpectedBulk('*')));
    }

    #[test]
    fn a_huge_bulk_length_waits_for_data_without_allocating_it() {
        assert_eq!(decode(b"*1\r\n$999999999999\r\nabc"), Ok(None));
    }

    #[test]
    fn no_input_panics() {
        // Every short byte string over an alphabet of RESP's special bytes.
        let alphabet = b"*$:-+\r\n01a ";
        let mut buf = Vec::new();
        for seed in 0u64..20_000 {
            buf.clear();
            let mut state = seed;
            for _ in 0..(seed % 16) {
                buf.push(alphabet[(state % alphabet.len() as u64) as usize]);
                state /= alphabet.len() as u64;
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
            }
            let _ = decode_request(&buf, LIMITS);
        }
    }
}
