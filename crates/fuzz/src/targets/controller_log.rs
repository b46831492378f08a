//! The controller's log as a restarted controller replays it: the file log's bytes
//! (`onepipe::file_store::FileStore::load`, one JSON record per line, a torn last line cut
//! off) and the records it yields replayed into a controller (`ControllerNode::open`, through
//! `Service::open` in crates/proto/src/controller/store.rs), which then runs its timers and
//! sends what it must. The input is the file's bytes, or (mode 1) records made up from the
//! input, with inputs naming members that do and do not exist and times in any order.

use super::{STEPS_MAX, tick};
use crate::fixture::{self, START};
use crate::frames::Draw;
use crate::targets::control;
use onepipe::control_msg::ControlMsg;
use onepipe::control_node::ControllerNode;
use onepipe::file_store::FileStore;
use onepipe_fabric::node::FRAME_MAX;
use onepipe_fabric::{Node, PortId};
use onepipe_proto::controller::ControllerConfig;
use onepipe_proto::controller::store::{Event, MemoryStore, Record, Store};

use onepipe_wire::Duration;
use std::path::PathBuf;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let bytes = match mode % 2 {
        0 => rest.to_vec(),
        _ => lines(&records(&mut Draw::new(rest))),
    };
    replay(&bytes);
}

/// Records drawn from the input: inputs and ticks at times near the start, or anywhere.
pub fn records(d: &mut Draw) -> Vec<Record> {
    let mut now = START;
    (0..d.below(32))
        .map(|_| {
            now = d.time_near(now);
            Record {
                at_ns: now.as_nanos(),
                event: if d.u8() % 4 == 0 {
                    Event::Tick
                } else {
                    Event::Input(control::input(d, now))
                },
            }
        })
        .collect()
}

/// The file log's format: one JSON record per line.
pub fn lines(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend(serde_json::to_vec(r).expect("records serialize"));
        out.push(b'\n');
    }
    out
}

/// A file of this process's own for the log's bytes: the file log reads a path.
fn log_path() -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let thread =
        format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    dir.join(format!("onepipe-fuzz-log-{}-{thread}.jsonl", std::process::id()))
}

/// Loads `bytes` as the file log, replays what loads into a controller, and runs it a while.
fn replay(bytes: &[u8]) {
    let path = log_path();
    std::fs::write(&path, bytes).expect("the fuzz log file is writable");
    let loaded = FileStore::open(&path).and_then(|mut f| f.load());
    let _ = std::fs::remove_file(&path);
    let Ok(records) = loaded else {
        return;
    };
    let fabric = fixture::fabric();
    // The restarted controller's clock reads a little after the start; the log's times are
    // what its writer's clock read, before or (a clock that stepped back) after that.
    let now = START + Duration::from_secs(1);
    let store = MemoryStore { records, writes: 0 };
    let Ok(mut node) = ControllerNode::open(&fabric.wiring, ControllerConfig::default(), store, now) else {
        return;
    };
    node.controller().invariants();
    let nodes = (fabric.wiring.switch_count() + fabric.wiring.process_count()) as PortId;
    let mut buf = vec![0u8; FRAME_MAX];
    let mut at = now;
    for step in 0..STEPS_MAX / 16 {
        for port in 0..nodes {
            for _ in 0..64 {
                let Some(len) = node.poll_transmit(at, port, &mut buf) else {
                    break;
                };
                ControlMsg::decode(&buf[..len]).expect("the controller's frames decode");
            }
        }
        let due = node.poll_timeout().unwrap_or(at).min(at + Duration::from_secs(1));
        at = at.max(due) + Duration::from_micros(step as u64);
        tick(&mut node, at);
        node.controller().invariants();
    }
}
