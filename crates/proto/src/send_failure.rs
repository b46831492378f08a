//! A message of ours that was not delivered, and why (paper Table 1's send-failure callback).
//! Both services report them, the best-effort one from the endpoint (NAKs) and the reliable one
//! from its sender (retry budget, Recall), so they sit apart from both.

use onepipe_wire::Instant;

/// A message of ours that a receiver could not deliver (paper Table 1's send-failure callback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendFailure {
    /// The scattering's timestamp; `Instant::ZERO` for a reliable scattering aborted before it
    /// got one.
    pub ts: Instant,
    pub dst: u32,
    pub msg_id: u64,
    pub reason: FailureReason,
}

/// Why a message or scattering was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// Best effort: the receiver NAKed it (it arrived after the barrier passed it, lost a
    /// fragment, or found the buffer full).
    Nak,
    /// Reliable: the retry budget towards `dst` ran out (no controller decision).
    GaveUp,
    /// Reliable: the whole scattering was aborted because receiver `process` (its `dst`)
    /// failed before acknowledging its message (paper 5.2 Recall). None of its messages is
    /// delivered; one failure is reported per scattering.
    ReceiverFailed { process: u32 },
    /// Reliable: this process was declared failed (paper 5.2) at a timestamp at or below the
    /// scattering's (or before it had one): its receivers discarded it. Reported when the
    /// process recovers (`Endpoint::recover`), once per message.
    OwnFailure,
}
