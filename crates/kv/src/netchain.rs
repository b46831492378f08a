//! NetChain behind the [`Store`] trait: the commands of a connection's batch become calls of a
//! NetChain client agent that runs as a process of the fabric ([`ServiceHost`], a node of
//! whichever runtime drives the fabric), and their outcomes become replies.
//!
//! | command | NetChain calls |
//! |---|---|
//! | `GET k` | a read (served by the tail) |
//! | `SET k v` | a write; if the key is not installed, an install through the controller, then the write |
//! | `SET k v NX`, `CASNX k v` | compare-and-swap from absent (installing first, as above) |
//! | `CAS k e v`, `CAD k e` | compare-and-swap, compare-and-delete |
//! | `DEL k ...` | a delete per key; the head says whether there was a value |
//! | `MGET k ...` | a read per key, not atomic across keys |
//!
//! `SET k v XX` and `DBSIZE` have no NetChain counterpart and are refused as unsupported.

use crate::{Bytes, Command, Reply, SetCondition, Store, StoreError, StoreInfo};
use onepipe_fabric::{Hints, Node, PortId, Route};
use onepipe_netchain::{Agent, Call, CallId, Key, KeyError, Outcome, Refusal};
use onepipe_wire::Instant;
use onepipe_wire::netchain::KEY_BYTES;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

type Results = Vec<Result<Reply, StoreError>>;

/// Requests from the connections' threads to one [`ServiceHost`].
#[derive(Default)]
pub struct Mailbox {
    requests: Mutex<VecDeque<(Vec<Command>, Sender<Results>)>>,
}

/// The store the RESP server calls: hands each batch to a service host, in turn, and waits.
pub struct NetchainStore {
    mailboxes: Vec<Arc<Mailbox>>,
    next: AtomicUsize,
    value_bytes_max: usize,
    /// Longest a batch waits for its answers (every attempt of every call, and installs).
    wait: std::time::Duration,
}

impl NetchainStore {
    pub fn new(
        mailboxes: Vec<Arc<Mailbox>>,
        value_bytes_max: usize,
        wait: std::time::Duration,
    ) -> NetchainStore {
        assert!(!mailboxes.is_empty());
        NetchainStore {
            mailboxes,
            next: AtomicUsize::new(0),
            value_bytes_max,
            wait,
        }
    }
}

impl Store for NetchainStore {
    fn execute(&self, batch: &[Command]) -> Results {
        let (tx, rx) = channel();
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.mailboxes.len();
        self.mailboxes[i]
            .requests
            .lock()
            .expect("mailbox lock")
            .push_back((batch.to_vec(), tx));
        match rx.recv_timeout(self.wait) {
            Ok(results) => results,
            Err(_) => batch
                .iter()
                .map(|_| {
                    Err(StoreError::OutcomeUnknown(format!(
                        "no answer from NetChain within {:?}: the command may or may not have taken effect",
                        self.wait
                    )))
                })
                .collect(),
        }
    }

    fn describe(&self) -> StoreInfo {
        StoreInfo {
            name: "netchain".into(),
            key_bytes_max: KEY_BYTES,
            value_bytes_max: self.value_bytes_max,
            fields: vec![
                ("netchain_service_hosts".into(), self.mailboxes.len().to_string()),
                ("netchain_consistency".into(), "linearizable per key".into()),
            ],
        }
    }
}

/// One command of a batch in progress.
struct InCommand {
    command: Command,
    /// Calls still out.
    remaining: usize,
    values: Vec<Option<Bytes>>,
    deleted: i64,
    /// An install has been done for it (an uninstalled key is installed once, then the call
    /// is made again).
    installed: bool,
    result: Option<Result<Reply, StoreError>>,
}

struct InBatch {
    commands: Vec<InCommand>,
    reply: Sender<Results>,
}

/// Which call of which command of which batch.
#[derive(Clone, Copy, Debug)]
struct Part {
    batch: u64,
    command: usize,
    part: usize,
    install: bool,
}

/// A process of the NetChain fabric serving a [`NetchainStore`]'s requests.
pub struct ServiceHost {
    agent: Agent,
    mailbox: Arc<Mailbox>,
    batches: HashMap<u64, InBatch>,
    next_batch: u64,
    calls: HashMap<CallId, Part>,
    /// Calls the agent had no room for yet.
    backlog: VecDeque<(Call, Part)>,
    attempts_max: u32,
}

impl ServiceHost {
    pub fn new(agent: Agent, mailbox: Arc<Mailbox>, attempts_max: u32) -> ServiceHost {
        ServiceHost {
            agent,
            mailbox,
            batches: HashMap::new(),
            next_batch: 0,
            calls: HashMap::new(),
            backlog: VecDeque::new(),
            attempts_max,
        }
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    fn take_requests(&mut self, now: Instant) {
        let requests: Vec<_> = self
            .mailbox
            .requests
            .lock()
            .expect("mailbox lock")
            .drain(..)
            .collect();
        for (commands, reply) in requests {
            let id = self.next_batch;
            self.next_batch += 1;
            let mut batch = InBatch {
                commands: Vec::with_capacity(commands.len()),
                reply,
            };
            let mut calls = Vec::new();
            for (i, command) in commands.into_iter().enumerate() {
                let mut c = InCommand {
                    command,
                    remaining: 0,
                    values: Vec::new(),
                    deleted: 0,
                    installed: false,
                    result: None,
                };
                match first_calls(&c.command) {
                    Ok(list) => {
                        c.remaining = list.len();
                        c.values = vec![None; list.len()];
                        for (part, call) in list.into_iter().enumerate() {
                            let p = Part {
                                batch: id,
                                command: i,
                                part,
                                install: false,
                            };
                            calls.push((call, p));
                        }
                    }
                    Err(e) => c.result = Some(Err(e)),
                }
                batch.commands.push(c);
            }
            self.batches.insert(id, batch);
            for (call, part) in calls {
                self.submit(now, call, part);
            }
            self.finish_if_done(id);
        }
    }

    fn submit(&mut self, now: Instant, call: Call, part: Part) {
        match self.agent.submit(now, call.clone()) {
            Ok(id) => {
                self.calls.insert(id, part);
            }
            Err(_) => self.backlog.push_back((call, part)),
        }
    }

    fn drain(&mut self, now: Instant) {
        while let Some(a) = self.agent.poll_attempt() {
            let _ = a; // attempts matter to histories, not to replies
        }
        while let Some(done) = self.agent.poll_completion() {
            let Some(part) = self.calls.remove(&done.call) else {
                continue;
            };
            self.complete(now, part, done.outcome);
        }
        while let Some((call, part)) = self.backlog.pop_front() {
            match self.agent.submit(now, call.clone()) {
                Ok(id) => {
                    self.calls.insert(id, part);
                }
                Err(_) => {
                    self.backlog.push_front((call, part));
                    break;
                }
            }
        }
    }

    /// Takes one call's outcome into its command; a key not installed is installed, then the
    /// call is made again.
    fn complete(&mut self, now: Instant, part: Part, outcome: Outcome) {
        let attempts = self.attempts_max;
        let Some(batch) = self.batches.get_mut(&part.batch) else {
            return;
        };
        let c = &mut batch.commands[part.command];
        if part.install {
            match outcome {
                Outcome::Ok(_) => {
                    let call = first_calls(&c.command).expect("parsed before")[part.part].clone();
                    let again = Part {
                        install: false,
                        ..part
                    };
                    self.submit(now, call, again);
                }
                other => settle(c, part.part, &other, attempts),
            }
            self.finish_if_done(part.batch);
            return;
        }
        let needs_install = matches!(outcome, Outcome::Refused(Refusal::UnknownKey))
            && !c.installed
            && match &c.command {
                Command::Set { condition, .. } => *condition != SetCondition::IfPresent,
                Command::Cas {
                    expect: None,
                    new: Some(_),
                    ..
                } => true,
                _ => false,
            };
        if needs_install {
            c.installed = true;
            let key = *first_calls(&c.command).expect("parsed before")[part.part].key();
            self.submit(
                now,
                Call::Install(key),
                Part {
                    install: true,
                    ..part
                },
            );
            return;
        }
        settle(c, part.part, &outcome, attempts);
        self.finish_if_done(part.batch);
    }

    fn finish_if_done(&mut self, id: u64) {
        let done = self.batches[&id].commands.iter().all(|c| c.result.is_some());
        if done {
            let batch = self.batches.remove(&id).expect("present");
            let results = batch
                .commands
                .into_iter()
                .map(|c| c.result.expect("done"))
                .collect();
            // The connection may have given up waiting: nothing to do then.
            let _ = batch.reply.send(results);
        }
    }
}

fn key(bytes: &[u8]) -> Result<Key, StoreError> {
    Key::new(bytes).map_err(|e| match e {
        KeyError::TooLong(len) => StoreError::KeyTooLarge {
            len_bytes: len,
            max_bytes: KEY_BYTES,
        },
        KeyError::Empty | KeyError::TrailingZero => StoreError::Unsupported(format!("key: {e}")),
    })
}

/// The NetChain calls a command begins with, one per key.
fn first_calls(command: &Command) -> Result<Vec<Call>, StoreError> {
    let v = |b: &Bytes| b.to_vec();
    Ok(match command {
        Command::Get { key: k } => vec![Call::Read(key(k)?)],
        Command::MGet { keys } => keys
            .iter()
            .map(|k| key(k).map(Call::Read))
            .collect::<Result<_, _>>()?,
        Command::Set {
            key: k,
            value,
            condition: SetCondition::Always,
        } => vec![Call::Write(key(k)?, v(value))],
        Command::Set {
            key: k,
            value,
            condition: SetCondition::IfAbsent,
        } => vec![Call::Cas {
            key: key(k)?,
            expect: None,
            new: Some(v(value)),
        }],
        Command::Set { .. } => return Err(StoreError::Unsupported("SET ... XX".into())),
        Command::Del { keys } => keys
            .iter()
            .map(|k| key(k).map(Call::Delete))
            .collect::<Result<_, _>>()?,
        Command::Cas { key: k, expect, new } => vec![Call::Cas {
            key: key(k)?,
            expect: expect.as_ref().map(v),
            new: new.as_ref().map(v),
        }],
        Command::DbSize => return Err(StoreError::Unsupported("DBSIZE".into())),
        other => return Err(StoreError::Unsupported(other.name().into())),
    })
}

/// Folds one call's outcome into its command's result.
fn settle(c: &mut InCommand, part: usize, outcome: &Outcome, attempts: u32) {
    if c.result.is_some() {
        return;
    }
    c.remaining -= 1;
    let error = match outcome {
        Outcome::Unknown if matches!(c.command, Command::Get { .. } | Command::MGet { .. }) => Some(
            StoreError::Unavailable(format!("no answer after {attempts} attempts; nothing changed")),
        ),
        Outcome::Unknown => Some(StoreError::OutcomeUnknown(format!(
            "no answer after {attempts} attempts: the write may or may not have taken effect"
        ))),
        Outcome::Refused(Refusal::ValueTooLarge) => Some(StoreError::Unavailable(
            "the value is larger than a switch's slot".into(),
        )),
        Outcome::Refused(Refusal::TableFull) => {
            Some(StoreError::Unavailable("a switch's index table is full".into()))
        }
        _ => None,
    };
    if let Some(e) = error {
        c.result = Some(Err(e));
        return;
    }
    let found = |o: &Outcome| match o {
        Outcome::Ok(v) | Outcome::CasFailed(v) => v.clone().map(Bytes::from),
        _ => None,
    };
    match &c.command {
        Command::Get { .. } => c.result = Some(Ok(found(outcome).into())),
        Command::MGet { .. } => {
            c.values[part] = found(outcome);
            if c.remaining == 0 {
                let values = std::mem::take(&mut c.values);
                c.result = Some(Ok(Reply::Array(values.into_iter().map(Reply::from).collect())));
            }
        }
        Command::Set { .. } => {
            c.result = Some(Ok(match outcome {
                Outcome::Ok(_) => Reply::Ok,
                _ => Reply::Nil, // NX: the key had a value (or, uninstalled once more, none to set)
            }));
        }
        Command::Del { .. } => {
            c.deleted += matches!(outcome, Outcome::Ok(_)) as i64;
            if c.remaining == 0 {
                c.result = Some(Ok(Reply::Integer(c.deleted)));
            }
        }
        Command::Cas { .. } => {
            c.result = Some(Ok(match outcome {
                Outcome::Ok(_) => Reply::cas_swapped(),
                other => Reply::cas_failed(found(other)),
            }));
        }
        Command::DbSize => c.result = Some(Err(StoreError::Unsupported("DBSIZE".into()))),
        // `first_calls` refuses every other command before it is sent.
        other => c.result = Some(Err(StoreError::Unsupported(other.name().into()))),
    }
}

impl Node for ServiceHost {
    fn classify(&self, _: Instant, _: PortId, _: &[u8]) -> Route {
        Route::Consume
    }
    fn handle_frame(&mut self, now: Instant, _: PortId, frame: &mut [u8], _: Route) {
        self.agent.handle_frame(now, frame);
        self.drain(now);
    }
    fn poll_transmit(&mut self, now: Instant, port: PortId, buf: &mut [u8]) -> Option<usize> {
        if port != 0 {
            return None;
        }
        self.take_requests(now);
        self.drain(now);
        self.agent.poll_transmit(now, buf)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.agent.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.agent.handle_timeout(now);
        self.drain(now);
    }
}

impl Hints for ServiceHost {}
