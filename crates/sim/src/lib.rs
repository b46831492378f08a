//! A deterministic discrete-event simulator: the same switch and endpoint state machines as the
//! runtimes, driven in virtual nanoseconds, so that a seed reproduces a run exactly.
