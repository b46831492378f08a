//! Checks of cosy runs (paper 003, *partial communication synchrony*): did every message get its
//! flag within the bound delta promised at submission, and did the network keep the invariants
//! that bound rests on (section 3.3): at most K reservations per link, no data outside a
//! reservation, never more than a link's capacity, queues within Lemma 3.3's bound.
//!
//! Every cosy run writes a per-message log, CSV with a header line ([`record`]; docs/logs.md,
//! "cosy message logs"), one line per message with the flag its sender's completion queue got
//! and when, on the sender's own clock. [`check_bound`] judges those lines against delta. The
//! network's invariants come from counters the run keeps per link ([`LinkUse`]) and the deepest
//! queue it saw; [`check_link_capacity`] and [`check_queue_bound`] judge them.
//!
//! Like the rest of this crate, nothing here knows the code that produced the log.

mod bound;
mod link;
pub mod record;

pub use bound::{BoundReport, BoundViolation, check_bound};
pub use link::{LinkReport, LinkUse, LinkViolation, QueueReport, check_link_capacity, check_queue_bound};
pub use record::{
    Flag, HEADER, LogReader, MessageRecord, ReadError, RecordError, parse_record, read_log, read_log_file,
    write_header, write_record,
};
