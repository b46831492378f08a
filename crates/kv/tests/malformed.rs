//! Bad input over a raw socket, the connection bound and shutdown: each ends in an error reply or
//! a close, and the server keeps serving the others.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;

use common::{TestServer, exchange, read_to_close, send_and_read_to_close, wait_for_connections};
use onepipe_kv::{MemStore, ServeConfig};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The server still answers a fresh client.
fn still_serves(server: &TestServer) {
    exchange(&mut server.raw(), b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
}

#[test]
fn garbage_gets_a_protocol_error_and_a_close() {
    let server = TestServer::memory();
    let cases: [(&[u8], &str); 4] = [
        (b"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n:12\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"),
        (b"*1\r\n$-7\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (
            b"set k \"unclosed\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, answer) in cases {
        assert_eq!(
            text(&send_and_read_to_close(&mut server.raw(), input)),
            answer,
            "{}",
            text(input)
        );
    }
    still_serves(&server);
}

#[test]
fn requests_before_the_garbage_are_answered() {
    let server = TestServer::memory();
    let answer = send_and_read_to_close(
        &mut server.raw(),
        b"*1\r\n$4\r\nPING\r\nPING\r\n*x\r\n*1\r\n$4\r\nPING\r\n",
    );
    assert_eq!(
        text(&answer),
        "+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"
    );
}

#[test]
fn random_bytes_never_take_the_server_down() {
    let server = TestServer::memory();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..50 {
        let mut input = Vec::new();
        for _ in 0..200 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            input.push(b"*$\r\n0123-x :+"[(state % 13) as usize]);
        }
        let mut stream = server.raw();
        let _ = stream.write_all(&input);
        // Close our side: the server answers what it can and closes, or waits for more and then
        // sees the end of the stream.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        read_to_close(&mut stream);
    }
    still_serves(&server);
}

#[test]
fn a_huge_bulk_length_is_refused_past_the_request_bound() {
    let config = ServeConfig {
        request_bytes_max: 4096,
        ..ServeConfig::default()
    };
    let server = TestServer::start(Arc::new(MemStore::new()), config);
    let mut stream = server.raw();
    let mut input = b"*2\r\n$3\r\nGET\r\n$999999999\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'a', 8192));
    assert_eq!(
        text(&send_and_read_to_close(&mut stream, &input)),
        "-ERR Protocol error: request over 4096 bytes\r\n"
    );
    still_serves(&server);
}

#[test]
fn a_complete_request_over_the_bound_is_refused() {
    let config = ServeConfig {
        request_bytes_max: 64,
        ..ServeConfig::default()
    };
    let server = TestServer::start(Arc::new(MemStore::new()), config);
    let value = "v".repeat(100);
    let input = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{value}\r\n", value.len());
    let answer = send_and_read_to_close(&mut server.raw(), input.as_bytes());
    assert_eq!(text(&answer), "-ERR Protocol error: request over 64 bytes\r\n");
}

#[test]
fn deeply_nested_arrays_are_refused() {
    let server = TestServer::memory();
    let input = b"*1\r\n".repeat(200_000);
    let answer = send_and_read_to_close(&mut server.raw(), &input);
    assert_eq!(text(&answer), "-ERR Protocol error: expected '$', got '*'\r\n");
    still_serves(&server);
}

#[test]
fn a_half_request_then_close_is_forgotten() {
    let server = TestServer::memory();
    for _ in 0..10 {
        let mut stream = server.raw();
        stream
            .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nab")
            .unwrap();
        drop(stream);
    }
    let mut stream = server.raw();
    exchange(&mut stream, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"$-1\r\n");
    // The half requests' connections end: only this one stays.
    wait_for_connections(&server, 1);
}

#[test]
fn inline_commands_and_quit() {
    let server = TestServer::memory();
    let mut stream = server.raw();
    exchange(&mut stream, b"PING\r\n", b"+PONG\r\n");
    exchange(&mut stream, b"SET greeting \"hello world\"\r\n", b"+OK\r\n");
    exchange(&mut stream, b"GET greeting\n", b"$11\r\nhello world\r\n");
    assert_eq!(
        text(&send_and_read_to_close(&mut stream, b"QUIT\r\nPING\r\n")),
        "+OK\r\n"
    );
}

#[test]
fn connections_over_the_bound_are_refused() {
    let config = ServeConfig {
        connections_max: 2,
        ..ServeConfig::default()
    };
    let server = TestServer::start(Arc::new(MemStore::new()), config);
    let mut first = server.raw();
    let mut second = server.raw();
    exchange(&mut first, b"PING\r\n", b"+PONG\r\n");
    exchange(&mut second, b"PING\r\n", b"+PONG\r\n");
    let mut third = server.raw();
    assert_eq!(
        text(&read_to_close(&mut third)),
        "-ERR max number of clients reached\r\n"
    );
    exchange(&mut first, b"PING\r\n", b"+PONG\r\n");
    drop(second);
    wait_for_connections(&server, 1);
    exchange(&mut server.raw(), b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn shutdown_closes_every_connection_and_the_listener() {
    let server = TestServer::memory();
    let address = server.handle.local_addr();
    let mut streams: Vec<TcpStream> = (0..5).map(|_| server.raw()).collect();
    for stream in &mut streams {
        exchange(stream, b"PING\r\n", b"+PONG\r\n");
    }
    let clone = server.handle.clone();
    server.handle.shutdown();
    assert_eq!(server.handle.connections(), 0);
    clone.wait();
    clone.shutdown();
    for stream in &mut streams {
        assert_eq!(read_to_close(stream), b"");
    }
    match TcpStream::connect(address) {
        Err(_) => {}
        Ok(mut late) => assert_eq!(read_to_close(&mut late), b"", "nobody serves after shutdown"),
    }
}
