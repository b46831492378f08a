//! Typed replies and their RESP2 encoding (by the `redis-protocol` crate).

use bytes::{Bytes, BytesMut};
use redis_protocol::bytes_utils::Str;
use redis_protocol::resp2::encode::extend_encode;
use redis_protocol::resp2::types::BytesFrame;

/// A successful reply to one command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// A simple string (`+PONG`); must not contain CR or LF.
    Status(String),
    /// A nil bulk string (`$-1`): a missing key, a `SET NX` that did not set.
    Nil,
    /// A bulk string.
    Bulk(Bytes),
    /// An integer (`:3`).
    Integer(i64),
    /// An array of replies.
    Array(Vec<Reply>),
}

impl Reply {
    /// The reply of a `CAS`/`CASNX`/`CAD` that swapped: `[1]`.
    pub fn cas_swapped() -> Reply {
        Reply::Array(vec![Reply::Integer(1)])
    }

    /// The reply of one that did not: `[0, current]`, `current` nil when the key is absent.
    pub fn cas_failed(current: Option<Bytes>) -> Reply {
        Reply::Array(vec![Reply::Integer(0), Reply::from(current)])
    }

    /// Appends the RESP2 encoding of this reply to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        encode_frame(&self.to_frame(), out);
    }

    fn to_frame(&self) -> BytesFrame {
        match self {
            Reply::Ok => BytesFrame::SimpleString(Bytes::from_static(b"OK")),
            Reply::Status(text) => BytesFrame::SimpleString(Bytes::from(one_line(text))),
            Reply::Nil => BytesFrame::Null,
            Reply::Bulk(bytes) => BytesFrame::BulkString(bytes.clone()),
            Reply::Integer(value) => BytesFrame::Integer(*value),
            Reply::Array(items) => BytesFrame::Array(items.iter().map(Reply::to_frame).collect()),
        }
    }
}

impl From<Option<Bytes>> for Reply {
    /// A value or nil.
    fn from(value: Option<Bytes>) -> Reply {
        value.map_or(Reply::Nil, Reply::Bulk)
    }
}

/// Appends a Redis error reply (`-ERR ...`); `line` starts with the error code.
pub(crate) fn encode_error(line: &str, out: &mut BytesMut) {
    encode_frame(&BytesFrame::Error(Str::from(one_line(line))), out);
}

/// Appends an array whose elements are replies or Redis error lines (`EXEC`'s answer).
pub(crate) fn encode_results(items: &[Result<Reply, String>], out: &mut BytesMut) {
    let frames = items
        .iter()
        .map(|item| match item {
            Ok(reply) => reply.to_frame(),
            Err(line) => BytesFrame::Error(Str::from(one_line(line))),
        })
        .collect();
    encode_frame(&BytesFrame::Array(frames), out);
}

fn encode_frame(frame: &BytesFrame, out: &mut BytesMut) {
    // The crate fails only on a buffer too small, and `extend_encode` grows the buffer first.
    extend_encode(out, frame, false).expect("encoding into a growing buffer");
}

/// Simple strings and errors end at the first line break: a CR or LF inside would split the frame.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(&mut out);
        out.to_vec()
    }

    #[test]
    fn golden_bytes() {
        assert_eq!(encoded(&Reply::Ok), b"+OK\r\n");
        assert_eq!(encoded(&Reply::Status("PONG".into())), b"+PONG\r\n");
        assert_eq!(encoded(&Reply::Nil), b"$-1\r\n");
        assert_eq!(
            encoded(&Reply::Bulk(Bytes::from_static(b"a\r\nb"))),
            b"$4\r\na\r\nb\r\n"
        );
        assert_eq!(encoded(&Reply::Integer(-3)), b":-3\r\n");
        assert_eq!(encoded(&Reply::cas_swapped()), b"*1\r\n:1\r\n");
        assert_eq!(encoded(&Reply::cas_failed(None)), b"*2\r\n:0\r\n$-1\r\n");
        assert_eq!(
            encoded(&Reply::cas_failed(Some(Bytes::from_static(b"x")))),
            b"*2\r\n:0\r\n$1\r\nx\r\n"
        );
        assert_eq!(encoded(&Reply::Array(vec![])), b"*0\r\n");
    }

    #[test]
    fn errors_and_statuses_stay_on_one_line() {
        let mut out = BytesMut::new();
        encode_error("ERR a\r\nb", &mut out);
        assert_eq!(&out[..], b"-ERR a  b\r\n");
        assert_eq!(encoded(&Reply::Status("x\ny".into())), b"+x y\r\n");
    }

    #[test]
    fn an_array_of_results_golden_bytes() {
        let mut out = BytesMut::new();
        encode_results(
            &[Ok(Reply::Integer(1)), Err("ERR x\ny".into()), Ok(Reply::Nil)],
            &mut out,
        );
        assert_eq!(&out[..], b"*3\r\n:1\r\n-ERR x y\r\n$-1\r\n");
        out.clear();
        encode_results(&[], &mut out);
        assert_eq!(&out[..], b"*0\r\n");
    }
}
