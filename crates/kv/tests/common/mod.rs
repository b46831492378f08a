//! A server on 127.0.0.1:0 for the tests, and raw-socket helpers.
#![allow(dead_code)] // Each test file uses a part.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use onepipe_kv::{MemStore, ServeConfig, ServerHandle, Store, serve};

/// A server over `store` on a free loopback port; shut down when the returned guard drops.
pub struct TestServer {
    pub handle: ServerHandle,
}

impl TestServer {
    pub fn start(store: Arc<dyn Store>, config: ServeConfig) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        TestServer {
            handle: serve(listener, store, config).expect("start the server"),
        }
    }

    pub fn memory() -> TestServer {
        TestServer::start(Arc::new(MemStore::new()), ServeConfig::default())
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.handle.local_addr())
    }

    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("a redis URL");
        let connection = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect");
        connection
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        connection
    }

    /// A plain socket, with a read timeout so that a test fails rather than hangs.
    pub fn raw(&self) -> TcpStream {
        let stream = TcpStream::connect(self.handle.local_addr()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("set a read timeout");
        stream
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// Sends `bytes` and reads until the server closes the connection: everything it answered.
pub fn send_and_read_to_close(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    // The server may close before it has read everything (after a protocol error): later writes
    // then fail, which is what such a client gets.
    let _ = stream.write_all(bytes);
    read_to_close(stream)
}

pub fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return answer,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            // A reset after the server closed with our bytes unread counts as closed.
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return answer,
            Err(error) => panic!("reading until the server closes: {error} (so far {answer:?})"),
        }
    }
}

/// Sends `bytes` and reads exactly `expected.len()` bytes of answer.
pub fn exchange(stream: &mut TcpStream, bytes: &[u8], expected: &[u8]) {
    stream.write_all(bytes).expect("send");
    let mut answer = vec![0u8; expected.len()];
    stream.read_exact(&mut answer).expect("read the answer");
    assert_eq!(
        String::from_utf8_lossy(&answer),
        String::from_utf8_lossy(expected)
    );
}

/// Waits, at most 30 s, until the server counts `count` connections (their threads notice a
/// close when they next read).
pub fn wait_for_connections(server: &TestServer, count: usize) {
    for _ in 0..30_000 {
        if server.handle.connections() == count {
            return;
        }
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!(
        "{} connections open, waited for {count}",
        server.handle.connections()
    );
}
