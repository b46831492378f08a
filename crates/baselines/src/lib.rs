//! Total-order broadcast baselines that 1Pipe is compared with (paper section 7.2, Fig. 8):
//! host sequencer, switch sequencer, token passing and Lamport-timestamp exchange, each as
//! [`onepipe_fabric::Node`] state machines that any runtime (inproc, udp, sim) can drive.
