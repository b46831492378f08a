//! The Redis-protocol (RESP2) server: one thread accepts, one thread per connection, blocking I/O.
//!
//! Each connection reads what has arrived, cuts every complete request out of it, runs the store
//! commands among them with one [`Store::execute`] per batch, and writes all the replies with one
//! write: a pipelining client gets its batch served in one round. Requests between `MULTI` and
//! `EXEC` are queued ([`crate::multi`]) and `EXEC` ends its batch: the batch's plain commands run,
//! then the transaction ([`Store::transaction`]), then the next batch, so replies keep the
//! requests' order.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::admin::{self, AdminAnswer, AdminContext};
use crate::command::Command;
use crate::multi::{Control, Multi, QueueLimits, Queued};
use crate::reply::{Reply, encode_error, encode_results};
use crate::resp::{FrameLimits, ProtocolError, decode_request};
use crate::store::{Store, StoreInfo};

/// The server's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeConfig {
    /// Open connections at most; one more is answered `-ERR max number of clients reached` and closed.
    pub connections_max: usize,
    /// Largest request, in bytes, complete or not: a larger one is a protocol error (the connection
    /// closes). Also the most a connection buffers, plus one read.
    pub request_bytes_max: usize,
    /// Most requests answered per round (one `execute`); a longer pipeline is served in several.
    /// Also the most requests one `MULTI` queues (a transaction also holds `request_bytes_max`
    /// bytes of requests at most); one more is an error that aborts the transaction.
    pub batch_commands_max: usize,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            connections_max: 1024,
            request_bytes_max: 1024 * 1024,
            batch_commands_max: 1024,
        }
    }
}

/// Most arguments in one request, as in Redis.
const ARGS_MAX: usize = 1024 * 1024;
/// Longest inline request or `*N` line, as in Redis.
const LINE_BYTES_MAX: usize = 64 * 1024;
/// Bytes asked of the socket per read.
const READ_BYTES: usize = 16 * 1024;
/// An input buffer that grew past this for one large request is given back once empty.
const INPUT_KEPT_BYTES_MAX: usize = 64 * 1024;

/// Starts serving `store` on `listener` and returns at once: a thread accepts, and each
/// connection gets a thread of its own, until [`ServerHandle::shutdown`] (dropping every handle
/// leaves the server running until the process ends). Fails on a zero limit in `config`.
pub fn serve(listener: TcpListener, store: Arc<dyn Store>, config: ServeConfig) -> io::Result<ServerHandle> {
    if config.connections_max == 0 || config.request_bytes_max == 0 || config.batch_commands_max == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "every ServeConfig limit must be at least 1",
        ));
    }
    let local_addr = listener.local_addr()?;
    listener.set_nonblocking(false)?;
    let info = store.describe();
    let shared = Arc::new(Shared {
        store,
        info,
        config,
        stopping: AtomicBool::new(false),
        registry: Mutex::new(Registry {
            next_id: 0,
            open: HashMap::new(),
        }),
    });
    let accepting = Arc::clone(&shared);
    let accept_thread = thread::Builder::new()
        .name("kv-accept".into())
        .spawn(move || accept_loop(&listener, &accepting))?;
    Ok(ServerHandle {
        inner: Arc::new(HandleInner {
            local_addr,
            shared,
            accept_thread: Mutex::new(Some(accept_thread)),
            stopped: Mutex::new(false),
            stopped_changed: Condvar::new(),
        }),
    })
}

/// Stops and watches a running server; clones control the same server.
#[derive(Clone)]
pub struct ServerHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Mutex<Option<JoinHandle<()>>>,
    stopped: Mutex<bool>,
    stopped_changed: Condvar,
}

impl ServerHandle {
    /// The address the server listens on (the port chosen for a listener bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Open connections now.
    pub fn connections(&self) -> usize {
        self.inner.shared.registry().open.len()
    }

    /// Stops accepting, closes every connection and waits for their threads (a store call under
    /// way finishes first). Calling it again, from any clone, does nothing.
    pub fn shutdown(&self) {
        let inner = &self.inner;
        if inner.shared.stopping.swap(true, Ordering::SeqCst) {
            self.wait();
            return;
        }
        wake_accept(inner.local_addr);
        if let Some(accept_thread) = lock(&inner.accept_thread).take() {
            let _ = accept_thread.join();
        }
        // The accept thread has ended, so nothing joins the registry after this.
        let open = std::mem::take(&mut inner.shared.registry().open);
        for connection in open.values() {
            let _ = connection.stream.shutdown(Shutdown::Both);
        }
        for (_, connection) in open {
            let _ = connection.thread.join();
        }
        *lock(&inner.stopped) = true;
        inner.stopped_changed.notify_all();
    }

    /// Blocks until the server has been shut down (by another clone of the handle).
    pub fn wait(&self) {
        let mut stopped = lock(&self.inner.stopped);
        while !*stopped {
            stopped = self
                .inner
                .stopped_changed
                .wait(stopped)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("local_addr", &self.inner.local_addr)
            .finish_non_exhaustive()
    }
}

struct Shared {
    store: Arc<dyn Store>,
    /// The store's limits, read once at start.
    info: StoreInfo,
    config: ServeConfig,
    stopping: AtomicBool,
    registry: Mutex<Registry>,
}

/// The open connections, so that shutdown can close them and join their threads.
struct Registry {
    next_id: u64,
    open: HashMap<u64, OpenConnection>,
}

struct OpenConnection {
    /// A clone of the connection's socket, to shut it down from outside.
    stream: TcpStream,
    thread: JoinHandle<()>,
}

impl Shared {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        lock(&self.registry)
    }

    fn queue_limits(&self) -> QueueLimits {
        QueueLimits {
            commands_max: self.config.batch_commands_max,
            bytes_max: self.config.request_bytes_max,
        }
    }

    fn frame_limits(&self) -> FrameLimits {
        FrameLimits {
            args_max: ARGS_MAX,
            line_bytes_max: LINE_BYTES_MAX.min(self.config.request_bytes_max),
        }
    }
}

/// Every lock here guards plain bookkeeping that stays valid if a holder panicked.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Unblocks the accept thread's `accept` by connecting to the listener.
fn wake_accept(local_addr: SocketAddr) {
    let mut target = local_addr;
    if target.ip().is_unspecified() {
        let loopback = if target.is_ipv4() {
            [127, 0, 0, 1].into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        };
        target.set_ip(loopback);
    }
    let _ = TcpStream::connect_timeout(&target, Duration::from_secs(1));
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for incoming in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match incoming {
            Ok(stream) => admit(shared, stream),
            // Out of file descriptors or memory: give the open connections time to end rather
            // than spin on an accept that fails at once.
            Err(error) if is_resource_exhaustion(&error) => {
                #[allow(clippy::disallowed_methods)]
                thread::sleep(Duration::from_millis(10));
            }
            // A connection reset before it was accepted, and the like: that client's problem.
            Err(_) => {}
        }
    }
}

fn is_resource_exhaustion(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::OutOfMemory) || matches!(error.raw_os_error(), Some(23 | 24 | 105))
}

/// Starts a connection's thread, or refuses it when `connections_max` are open.
fn admit(shared: &Arc<Shared>, stream: TcpStream) {
    let mut registry = shared.registry();
    if registry.open.len() >= shared.config.connections_max {
        drop(registry);
        refuse(stream, "ERR max number of clients reached");
        return;
    }
    let Ok(outside) = stream.try_clone() else {
        return;
    };
    let id = registry.next_id;
    registry.next_id += 1;
    let serving = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name(format!("kv-conn-{id}"))
        .spawn(move || {
            // Leaves the registry however the connection ends, a panicking store included.
            let _registered = Registered { shared: &serving, id };
            serve_connection(stream, &serving);
        });
    match spawned {
        Ok(thread) => {
            registry.open.insert(
                id,
                OpenConnection {
                    stream: outside,
                    thread,
                },
            );
        }
        Err(_) => {
            drop(registry);
            refuse(outside, "ERR cannot start a thread for this connection");
        }
    }
}

struct Registered<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.shared.registry().open.remove(&self.id);
    }
}

fn refuse(mut stream: TcpStream, error_line: &str) {
    let mut out = BytesMut::new();
    encode_error(error_line, &mut out);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(&out);
}

/// One connection's state between reads.
struct Connection {
    stream: TcpStream,
    /// Bytes read and not yet cut into requests.
    input: Vec<u8>,
    output: BytesMut,
    client_name: Option<Bytes>,
    /// `MULTI` state: a transaction being queued. Dropped with the connection, unexecuted.
    multi: Multi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let mut connection = Connection {
        stream,
        input: Vec::new(),
        output: BytesMut::new(),
        client_name: None,
        multi: Multi::default(),
    };
    loop {
        match read_more(&mut connection) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let flow = serve_input(&mut connection, shared);
        if !connection.output.is_empty() {
            if connection.stream.write_all(&connection.output).is_err() {
                return;
            }
            connection.output.clear();
        }
        if flow == Flow::Close {
            let _ = connection.stream.shutdown(Shutdown::Write);
            return;
        }
    }
}

/// Appends what the socket has (waiting for something): the number of bytes, 0 at end of stream.
fn read_more(connection: &mut Connection) -> io::Result<usize> {
    if connection.input.is_empty() && connection.input.capacity() > INPUT_KEPT_BYTES_MAX {
        connection.input = Vec::new();
    }
    let filled = connection.input.len();
    connection.input.resize(filled + READ_BYTES, 0);
    let read = loop {
        match connection.stream.read(&mut connection.input[filled..]) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    connection.input.truncate(filled + *read.as_ref().unwrap_or(&0));
    read
}

/// Serves every complete request in the input, in batches, and keeps the incomplete tail.
fn serve_input(connection: &mut Connection, shared: &Shared) -> Flow {
    let mut consumed = 0;
    let flow = loop {
        let mut batch = Batch::default();
        let (flow, more) = cut_batch(connection, shared, &mut consumed, &mut batch);
        batch.run(shared, &mut connection.output);
        if flow == Flow::Close || !more {
            break flow;
        }
    };
    connection.input.drain(..consumed);
    flow
}

/// The requests of one round, in order, and the store commands among them.
#[derive(Default)]
struct Batch {
    answers: Vec<Answer>,
    commands: Vec<Command>,
}

enum Answer {
    Reply(Reply),
    /// A Redis error line (`ERR ...`).
    Error(String),
    /// The next result of the store.
    Store,
    /// `EXEC`: run the transaction after the batch's commands, and answer its array.
    Exec(Vec<Queued>),
}

impl Batch {
    fn run(self, shared: &Shared, output: &mut BytesMut) {
        let results = if self.commands.is_empty() {
            Vec::new()
        } else {
            shared.store.execute(&self.commands)
        };
        assert_eq!(
            results.len(),
            self.commands.len(),
            "Store::execute returns one result per command"
        );
        let mut results = results.into_iter();
        for answer in self.answers {
            match answer {
                Answer::Reply(reply) => reply.encode(output),
                Answer::Error(line) => encode_error(&line, output),
                Answer::Store => match results.next().expect("counted above") {
                    Ok(reply) => reply.encode(output),
                    Err(error) => encode_error(&error.to_redis_error(), output),
                },
                Answer::Exec(entries) => exec(shared, entries, output),
            }
        }
    }

    /// `EXEC` ends a batch: whatever follows must run after the transaction.
    fn ends_with_exec(&self) -> bool {
        matches!(self.answers.last(), Some(Answer::Exec(_)))
    }
}

/// Runs a transaction's store commands in one [`Store::transaction`] and answers `EXEC`: the array
/// of every queued request's reply, or the store's error when it refused the whole. A transaction
/// without store commands does not reach the store (there is nothing to make atomic).
fn exec(shared: &Shared, entries: Vec<Queued>, output: &mut BytesMut) {
    let mut commands = Vec::new();
    let mut replies = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            Queued::Store(command) => {
                commands.push(command);
                replies.push(None);
            }
            Queued::Reply(reply) => replies.push(Some(reply)),
        }
    }
    let results = if commands.is_empty() {
        Vec::new()
    } else {
        match shared.store.transaction(&commands) {
            Ok(results) => results,
            Err(error) => return encode_error(&error.to_redis_error(), output),
        }
    };
    assert_eq!(
        results.len(),
        commands.len(),
        "Store::transaction returns one result per command"
    );
    let mut results = results.into_iter();
    let items: Vec<Result<Reply, String>> = replies
        .into_iter()
        .map(|reply| match reply {
            Some(reply) => Ok(reply),
            None => results
                .next()
                .expect("counted above")
                .map_err(|error| error.to_redis_error()),
        })
        .collect();
    encode_results(&items, output);
}

/// Cuts requests from the input into `batch` until it is full, the input has no complete request
/// left, or the connection must close. Returns whether to close and whether input may remain.
fn cut_batch(
    connection: &mut Connection,
    shared: &Shared,
    consumed: &mut usize,
    batch: &mut Batch,
) -> (Flow, bool) {
    let request_bytes_max = shared.config.request_bytes_max;
    while batch.answers.len() < shared.config.batch_commands_max {
        let rest = &connection.input[*consumed..];
        let request = match decode_request(rest, shared.frame_limits()) {
            Ok(Some(request)) if request.len_bytes <= request_bytes_max => request,
            Ok(None) if rest.len() <= request_bytes_max => return (Flow::Continue, false),
            Ok(_) => {
                let error = ProtocolError::RequestTooLarge(request_bytes_max);
                batch.answers.push(Answer::Error(format!("ERR {error}")));
                return (Flow::Close, false);
            }
            Err(error) => {
                batch.answers.push(Answer::Error(format!("ERR {error}")));
                return (Flow::Close, false);
            }
        };
        *consumed += request.len_bytes;
        if request.args.is_empty() {
            continue;
        }
        if classify(&request.args, request.len_bytes, connection, shared, batch) == Flow::Close {
            return (Flow::Close, false);
        }
        if batch.ends_with_exec() {
            return (Flow::Continue, true);
        }
    }
    (Flow::Continue, true)
}

/// Adds one request's answer to the batch: a transaction control command, a request queued
/// inside `MULTI`, a store command, a server command, or an error.
fn classify(
    args: &[Bytes],
    len_bytes: usize,
    connection: &mut Connection,
    shared: &Shared,
    batch: &mut Batch,
) -> Flow {
    if let Some(control) = connection.multi.control(args) {
        batch.answers.push(match control {
            Control::Reply(reply) => Answer::Reply(reply),
            Control::Error(line) => Answer::Error(line),
            Control::Exec(entries) => Answer::Exec(entries),
        });
        return Flow::Continue;
    }
    let (answer, flow) = match Command::parse(args) {
        Some(parsed) => {
            let checked = parsed.map_err(|error| error.to_string()).and_then(|command| {
                match command.check_limits(&shared.info) {
                    Ok(()) => Ok(command),
                    Err(error) => Err(error.to_redis_error()),
                }
            });
            (checked.map(Queued::Store), Flow::Continue)
        }
        None => answer_admin(args, connection, shared),
    };
    let answer = match answer {
        Err(line) => Answer::Error(connection.multi.fail(line)),
        // QUIT inside MULTI closes at once, as in Redis: the queue goes with the connection.
        Ok(entry) if connection.multi.is_queueing() && flow == Flow::Continue => {
            match connection.multi.push(entry, len_bytes, shared.queue_limits()) {
                Ok(reply) => Answer::Reply(reply),
                Err(line) => Answer::Error(line),
            }
        }
        Ok(Queued::Store(command)) => {
            batch.commands.push(command);
            Answer::Store
        }
        Ok(Queued::Reply(reply)) => Answer::Reply(reply),
    };
    batch.answers.push(answer);
    flow
}

/// A server command's reply, or its error line (unknown commands included), and whether the
/// connection closes after it (`QUIT`).
fn answer_admin(
    args: &[Bytes],
    connection: &mut Connection,
    shared: &Shared,
) -> (Result<Queued, String>, Flow) {
    let describe = || shared.store.describe();
    let connections = || shared.registry().open.len();
    let context = AdminContext {
        connections: &connections,
        connections_max: shared.config.connections_max,
        describe: &describe,
        client_name: &mut connection.client_name,
    };
    match admin::answer(args, context) {
        Some(AdminAnswer::Reply(reply)) => (Ok(Queued::Reply(reply)), Flow::Continue),
        Some(AdminAnswer::Error(line)) => (Err(line), Flow::Continue),
        Some(AdminAnswer::Quit) => (Ok(Queued::Reply(Reply::Ok)), Flow::Close),
        None => (Err(admin::unknown_command(args)), Flow::Continue),
    }
}
