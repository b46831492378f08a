//! `MULTI` / `EXEC` / `DISCARD` for one connection, as Redis answers them: a sans-IO state the
//! server feeds each request to and that says what to answer (docs/redis.md, "Transactions").
//!
//! Between `MULTI` and `EXEC` nothing runs: each request that parses is answered `+QUEUED` and
//! kept; one that does not (unknown command, wrong arity, bad integer, oversize key) is answered
//! with its error and dooms the transaction, whose `EXEC` then answers `EXECABORT` and runs
//! nothing. Server commands (`PING`, `ECHO`, `INFO`...) are answered when queued and their replies
//! kept for `EXEC`'s array: they do not touch the store, so when they run does not matter to it.

use bytes::Bytes;

use crate::command::Command;
use crate::reply::Reply;

/// The bounds of one transaction's queue, so that a connection's memory stays bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLimits {
    /// Most requests queued between `MULTI` and `EXEC`.
    pub commands_max: usize,
    /// Most bytes of requests queued, counted as they came over the wire.
    pub bytes_max: usize,
}

/// One queued request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Queued {
    /// A store command, run by `EXEC` with the others in one [`Store::transaction`](crate::Store).
    Store(Command),
    /// A server command's reply, computed when it was queued.
    Reply(Reply),
}

/// What to answer to a transaction control command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control {
    Reply(Reply),
    /// A Redis error line (`ERR ...`, `EXECABORT ...`).
    Error(String),
    /// `EXEC` of a transaction with no error: run these, in order, as one transaction, and answer
    /// the array of their replies.
    Exec(Vec<Queued>),
}

/// A connection's transaction state.
#[derive(Debug, Default)]
pub(crate) struct Multi {
    /// `Some` between `MULTI` and `EXEC` or `DISCARD`.
    queue: Option<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Empty once `dirty`: nothing of a doomed transaction is kept.
    entries: Vec<Queued>,
    bytes: usize,
    /// A request failed while queueing: `EXEC` will refuse.
    dirty: bool,
}

const QUEUED: &str = "QUEUED";
const EXEC_ABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

impl Multi {
    /// Between `MULTI` and `EXEC`/`DISCARD`: requests other than the control commands are queued.
    pub fn is_queueing(&self) -> bool {
        self.queue.is_some()
    }

    /// Answers `MULTI`, `EXEC`, `DISCARD`, `WATCH` and `UNWATCH`; `None` for any other request.
    pub fn control(&mut self, args: &[Bytes]) -> Option<Control> {
        let name = args.first()?.to_ascii_uppercase();
        let has_arguments = args.len() > 1;
        let answer = match name.as_slice() {
            b"MULTI" | b"EXEC" | b"DISCARD" if has_arguments => {
                let name = String::from_utf8_lossy(&name).to_ascii_lowercase();
                Control::Error(self.fail(format!("ERR wrong number of arguments for '{name}' command")))
            }
            b"MULTI" if self.is_queueing() => {
                // As in Redis: refused, and the transaction goes on unharmed.
                Control::Error("ERR MULTI calls can not be nested".into())
            }
            b"MULTI" => {
                self.queue = Some(Queue::default());
                Control::Reply(Reply::Ok)
            }
            b"EXEC" => match self.queue.take() {
                None => Control::Error("ERR EXEC without MULTI".into()),
                Some(queue) if queue.dirty => Control::Error(EXEC_ABORT.into()),
                Some(queue) => Control::Exec(queue.entries),
            },
            b"DISCARD" => match self.queue.take() {
                None => Control::Error("ERR DISCARD without MULTI".into()),
                Some(_) => Control::Reply(Reply::Ok),
            },
            // As in Redis: refused, and the transaction goes on unharmed.
            b"WATCH" if self.is_queueing() => Control::Error("ERR WATCH inside MULTI is not allowed".into()),
            // Transactions here need no optimistic locking: a store runs them atomically.
            b"WATCH" | b"UNWATCH" => {
                let name = String::from_utf8_lossy(&name).into_owned();
                Control::Error(self.fail(format!("ERR {name} is not supported")))
            }
            _ => return None,
        };
        Some(answer)
    }

    /// Queues a request of `len_bytes` (while queueing) and returns what to answer: `+QUEUED`,
    /// or an error when the queue is full, which dooms the transaction.
    pub fn push(&mut self, entry: Queued, len_bytes: usize, limits: QueueLimits) -> Result<Reply, String> {
        let queue = self.queue.as_mut().expect("push only while queueing");
        if queue.dirty {
            // Redis answers QUEUED after an error too; nothing of a doomed transaction is kept.
            return Ok(Reply::Status(QUEUED.into()));
        }
        let bytes = queue.bytes.saturating_add(len_bytes);
        if queue.entries.len() >= limits.commands_max {
            let line = format!(
                "ERR MULTI queue is full: at most {} commands",
                limits.commands_max
            );
            return Err(self.fail(line));
        }
        if bytes > limits.bytes_max {
            let line = format!("ERR MULTI queue is full: at most {} bytes", limits.bytes_max);
            return Err(self.fail(line));
        }
        queue.entries.push(entry);
        queue.bytes = bytes;
        assert!(queue.entries.len() <= limits.commands_max && queue.bytes <= limits.bytes_max);
        Ok(Reply::Status(QUEUED.into()))
    }

    /// Dooms the open transaction, if any (a request failed): returns `line`, the error to answer.
    pub fn fail(&mut self, line: String) -> String {
        if let Some(queue) = self.queue.as_mut() {
            queue.dirty = true;
            queue.entries = Vec::new();
            queue.bytes = 0;
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: QueueLimits = QueueLimits {
        commands_max: 3,
        bytes_max: 100,
    };

    fn control(multi: &mut Multi, words: &[&str]) -> Option<Control> {
        let args: Vec<Bytes> = words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        multi.control(&args)
    }

    fn error(text: &str) -> Option<Control> {
        Some(Control::Error(text.into()))
    }

    fn get(key: &str) -> Queued {
        Queued::Store(Command::Get {
            key: Bytes::copy_from_slice(key.as_bytes()),
        })
    }

    fn queued() -> Result<Reply, String> {
        Ok(Reply::Status(QUEUED.into()))
    }

    #[test]
    fn exec_and_discard_need_multi() {
        let mut multi = Multi::default();
        assert_eq!(control(&mut multi, &["exec"]), error("ERR EXEC without MULTI"));
        assert_eq!(
            control(&mut multi, &["DISCARD"]),
            error("ERR DISCARD without MULTI")
        );
        assert_eq!(control(&mut multi, &["GET", "k"]), None);
        assert!(!multi.is_queueing());
    }

    #[test]
    fn exec_hands_over_the_queue_in_order() {
        let mut multi = Multi::default();
        assert_eq!(control(&mut multi, &["MULTI"]), Some(Control::Reply(Reply::Ok)));
        assert!(multi.is_queueing());
        assert_eq!(multi.push(get("a"), 10, LIMITS), queued());
        assert_eq!(multi.push(Queued::Reply(Reply::Ok), 10, LIMITS), queued());
        assert_eq!(multi.push(get("b"), 10, LIMITS), queued());
        assert_eq!(
            control(&mut multi, &["EXEC"]),
            Some(Control::Exec(vec![get("a"), Queued::Reply(Reply::Ok), get("b")]))
        );
        assert!(!multi.is_queueing());
        assert_eq!(control(&mut multi, &["EXEC"]), error("ERR EXEC without MULTI"));
    }

    #[test]
    fn nested_multi_and_watch_inside_are_refused_without_harm() {
        let mut multi = Multi::default();
        control(&mut multi, &["MULTI"]);
        multi.push(get("a"), 1, LIMITS).unwrap();
        assert_eq!(
            control(&mut multi, &["multi"]),
            error("ERR MULTI calls can not be nested")
        );
        assert_eq!(
            control(&mut multi, &["WATCH", "k"]),
            error("ERR WATCH inside MULTI is not allowed")
        );
        assert_eq!(
            control(&mut multi, &["EXEC"]),
            Some(Control::Exec(vec![get("a")]))
        );
    }

    #[test]
    fn an_error_while_queueing_aborts_exec() {
        let mut multi = Multi::default();
        control(&mut multi, &["MULTI"]);
        multi.push(get("a"), 1, LIMITS).unwrap();
        assert_eq!(multi.fail("ERR bad".into()), "ERR bad");
        // Later requests are still answered QUEUED, as Redis does, and nothing is kept.
        assert_eq!(multi.push(get("b"), 1, LIMITS), queued());
        assert_eq!(control(&mut multi, &["EXEC"]), error(EXEC_ABORT));
        assert!(!multi.is_queueing());
        // The next transaction starts clean.
        control(&mut multi, &["MULTI"]);
        assert_eq!(control(&mut multi, &["EXEC"]), Some(Control::Exec(vec![])));
    }

    #[test]
    fn wrong_arity_of_a_control_command_inside_multi_aborts_exec() {
        let mut multi = Multi::default();
        control(&mut multi, &["MULTI"]);
        assert_eq!(
            control(&mut multi, &["EXEC", "now"]),
            error("ERR wrong number of arguments for 'exec' command")
        );
        assert!(multi.is_queueing());
        assert_eq!(control(&mut multi, &["EXEC"]), error(EXEC_ABORT));
        assert_eq!(
            control(&mut multi, &["MULTI", "x"]),
            error("ERR wrong number of arguments for 'multi' command")
        );
        assert!(!multi.is_queueing());
    }

    #[test]
    fn discard_drops_the_queue_even_when_doomed() {
        let mut multi = Multi::default();
        control(&mut multi, &["MULTI"]);
        multi.fail("ERR x".into());
        assert_eq!(control(&mut multi, &["DISCARD"]), Some(Control::Reply(Reply::Ok)));
        assert!(!multi.is_queueing());
    }

    #[test]
    fn watch_and_unwatch_are_not_supported() {
        let mut multi = Multi::default();
        assert_eq!(
            control(&mut multi, &["WATCH", "k"]),
            error("ERR WATCH is not supported")
        );
        assert_eq!(
            control(&mut multi, &["unwatch"]),
            error("ERR UNWATCH is not supported")
        );
        control(&mut multi, &["MULTI"]);
        assert_eq!(
            control(&mut multi, &["UNWATCH"]),
            error("ERR UNWATCH is not supported")
        );
        assert_eq!(control(&mut multi, &["EXEC"]), error(EXEC_ABORT));
    }

    #[test]
    fn a_full_queue_dooms_the_transaction() {
        let mut multi = Multi::default();
        control(&mut multi, &["MULTI"]);
        for _ in 0..LIMITS.commands_max {
            assert_eq!(multi.push(get("a"), 1, LIMITS), queued());
        }
        assert_eq!(
            multi.push(get("a"), 1, LIMITS),
            Err("ERR MULTI queue is full: at most 3 commands".into())
        );
        assert_eq!(control(&mut multi, &["EXEC"]), error(EXEC_ABORT));

        control(&mut multi, &["MULTI"]);
        assert_eq!(multi.push(get("a"), 60, LIMITS), queued());
        assert_eq!(
            multi.push(get("b"), 41, LIMITS),
            Err("ERR MULTI queue is full: at most 100 bytes".into())
        );
        assert_eq!(control(&mut multi, &["EXEC"]), error(EXEC_ABORT));

        control(&mut multi, &["MULTI"]);
        assert_eq!(multi.push(get("a"), 100, LIMITS), queued());
        assert_eq!(
            control(&mut multi, &["EXEC"]),
            Some(Control::Exec(vec![get("a")]))
        );
    }
}
