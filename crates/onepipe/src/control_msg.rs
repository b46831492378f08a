//! The management plane's one message type, [`ControlMsg`], and its codec for a runtime whose
//! management plane is a network (the simulator's and udp's management links): a tag byte,
//! then the message as JSON.
//!
//! Control messages are rare (a registration per process, a few per failure), so a
//! self-describing encoding costs nothing measurable and keeps captures readable. Routing
//! tables do not travel: the controller names the links out of use and each switch builds its
//! own tables avoiding them.

use onepipe_fabric::PortId;
use onepipe_proto::controller::{Failure, Input, LostRecall, Member, Output, PacketBytes, instant_ns};
use onepipe_proto::mgmt_outbox::{Keep, Queued};
use onepipe_wire::Instant;
use serde::{Deserialize, Serialize};

/// First byte of every control frame; a frame without it is not one of ours.
pub const CONTROL_TAG: u8 = 0xC7;

/// Every message of the management plane, whatever carries it: channels between threads (the
/// inproc runtime) or frames on management links (the simulator, udp). Nodes speak to the
/// controller with [`ControlMsg::Input`]; everything else goes from the controller to the one
/// member it names ([`ControlMsg::order`]), or to all ([`ControlMsg::Hello`],
/// [`ControlMsg::Avoid`], [`ControlMsg::PathsChanged`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlMsg {
    /// A member to the controller.
    Input(Input),
    /// The controller (re)started: a member says again what it said before (a process
    /// registers, a switch repeats its link-down reports), since what it sent while no
    /// controller listened was lost. Repeats change nothing at a controller that heard them.
    Hello,
    /// To a process (Broadcast, paper 5.2): `failures` happened; answer with
    /// [`Input::Completed`] for `epoch`.
    Announce { epoch: u64, failures: Vec<Failure> },
    /// To a switch (Resume): stop waiting for these inputs.
    RemoveInputs(Vec<PortId>),
    /// To a switch: stop taking frames on this input and report it.
    CutInput(PortId),
    /// To a switch: these `(switch, port)` link ends are out of use; route around them. Each
    /// switch builds its own tables (`control_node::RouteCache`): tables do not travel.
    Avoid(Vec<(usize, u16)>),
    /// To a process: the switches now route around failed links; retransmit what timed out
    /// on them without waiting out the backed-off timer.
    PathsChanged,
    /// To a process: its registration arrived; it stops repeating it. `failures`: every
    /// process declared failed and not recovered so far (see `Output::Registered`).
    Registered { failures: Vec<Failure> },
    /// To a process (Receiver Recovery, control/recovery.rs): it was declared failed at `ts`.
    OwnFailure {
        #[serde(with = "instant_ns")]
        ts: Instant,
        incarnation: u64,
    },
    /// To a recovering process: recalls it could not take while failed.
    LostRecalls {
        incarnation: u64,
        recalls: Vec<LostRecall>,
    },
    /// To a recovering process: what it needs to deliver or discard its buffer and rejoin.
    Recovery {
        incarnation: u64,
        #[serde(with = "instant_ns")]
        ts: Instant,
        failures: Vec<Failure>,
        failed_now: Vec<Failure>,
        recalls: u32,
        recalls_truncated: bool,
    },
    /// To a process: `process` rejoined as its `incarnation`-th.
    Rejoined { process: u32, incarnation: u64 },
    /// To a switch: take these inputs back.
    Readmit(Vec<PortId>),
    /// To a process: a packet the controller forwards (paper 5.2); answer forward `id` with
    /// [`Input::Forwarded`].
    Forward { id: u64, packet: PacketBytes },
}

impl ControlMsg {
    /// The message for a controller output, and the member it goes to.
    pub fn order(out: Output) -> (Member, ControlMsg) {
        let process = Member::Process;
        let switch = Member::Switch;
        match out {
            Output::Announce { to, epoch, failures } => {
                (process(to), ControlMsg::Announce { epoch, failures })
            }
            Output::RemoveInputs { switch: s, ports } => (switch(s), ControlMsg::RemoveInputs(ports)),
            Output::CutInput { switch: s, port } => (switch(s), ControlMsg::CutInput(port)),
            Output::OwnFailure { to, ts, incarnation } => {
                (process(to), ControlMsg::OwnFailure { ts, incarnation })
            }
            Output::LostRecalls {
                to,
                incarnation,
                recalls,
            } => (process(to), ControlMsg::LostRecalls { incarnation, recalls }),
            Output::Recovery {
                to,
                incarnation,
                ts,
                failures,
                failed_now,
                recalls,
                recalls_truncated,
            } => (
                process(to),
                ControlMsg::Recovery {
                    incarnation,
                    ts,
                    failures,
                    failed_now,
                    recalls,
                    recalls_truncated,
                },
            ),
            Output::Registered { to, failures } => (process(to), ControlMsg::Registered { failures }),
            Output::Readmit { switch: s, ports } => (switch(s), ControlMsg::Readmit(ports)),
            Output::Rejoined {
                to,
                process: p,
                incarnation,
            } => (
                process(to),
                ControlMsg::Rejoined {
                    process: p,
                    incarnation,
                },
            ),
            Output::Forward { to, id, packet } => (process(to), ControlMsg::Forward { id, packet }),
        }
    }
}

/// How the controller's queue to a node treats each message (`onepipe_proto::mgmt_outbox`).
impl Queued for ControlMsg {
    fn keep(&self) -> Keep {
        match self {
            // Each names the whole state of its kind.
            ControlMsg::Hello => Keep::Latest(0),
            ControlMsg::Avoid(_) => Keep::Latest(1),
            ControlMsg::PathsChanged => Keep::Latest(2),
            ControlMsg::Registered { .. } => Keep::Latest(3),
            // Announcements are repeated until answered (then the process is declared
            // failed), cuts until reported, Resumes whenever the switch repeats its report,
            // and a process told of its own failure is told again when heard again.
            ControlMsg::Announce { .. }
            | ControlMsg::CutInput(_)
            | ControlMsg::RemoveInputs(_)
            | ControlMsg::OwnFailure { .. } => Keep::Repeated,
            ControlMsg::Input(_)
            | ControlMsg::LostRecalls { .. }
            | ControlMsg::Recovery { .. }
            | ControlMsg::Rejoined { .. }
            | ControlMsg::Readmit(_)
            | ControlMsg::Forward { .. } => Keep::Once,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlDecodeError {
    #[error("not a control frame (tag {0:#04x})")]
    Tag(u8),
    #[error("empty control frame")]
    Empty,
    #[error("control frame does not parse")]
    Body,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("control message of {len} bytes does not fit a frame of {room}")]
pub struct ControlEncodeError {
    pub len: usize,
    pub room: usize,
}

impl ControlMsg {
    /// Writes the frame into `buf`; returns its length.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, ControlEncodeError> {
        let body = serde_json::to_vec(self).expect("control messages always serialize");
        let len = body.len() + 1;
        if len > buf.len() {
            return Err(ControlEncodeError { len, room: buf.len() });
        }
        buf[0] = CONTROL_TAG;
        buf[1..len].copy_from_slice(&body);
        Ok(len)
    }

    /// Parses a frame; never panics.
    pub fn decode(frame: &[u8]) -> Result<ControlMsg, ControlDecodeError> {
        let (&tag, body) = frame.split_first().ok_or(ControlDecodeError::Empty)?;
        if tag != CONTROL_TAG {
            return Err(ControlDecodeError::Tag(tag));
        }
        serde_json::from_slice(body).map_err(|_| ControlDecodeError::Body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onepipe_proto::controller::Member;

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            ControlMsg::Input(Input::Register { process: 7 }),
            ControlMsg::Input(Input::LinkDown {
                member: Member::Switch(3),
                port: 2,
                last_commit_ns: 123_456_789,
            }),
            ControlMsg::Input(Input::Completed { process: 1, epoch: 4 }),
            ControlMsg::Announce {
                epoch: 2,
                failures: vec![(5, 1_000).into(), (6, 2_000).into()],
            },
            ControlMsg::RemoveInputs(vec![0, 9]),
            ControlMsg::CutInput(4),
            ControlMsg::Avoid(vec![(1, 2), (3, 0)]),
            ControlMsg::PathsChanged,
            ControlMsg::Registered {
                failures: vec![(2, 1_234).into()],
            },
            ControlMsg::Hello,
            ControlMsg::Input(Input::Implausible {
                member: Member::Switch(2),
                port: 1,
                ahead_ns: 86_400_000_000_000,
                refused: 12,
            }),
            ControlMsg::Input(Input::Heard {
                member: Member::Switch(1),
                port: 3,
            }),
            ControlMsg::Input(Input::RecallLost {
                process: 0,
                lost: vec![(2, 99, 7), (3, 100, 8)],
            }),
            ControlMsg::Input(Input::Recover {
                process: 2,
                incarnation: 1,
            }),
            ControlMsg::Input(Input::Rejoin {
                process: 2,
                incarnation: 1,
            }),
            ControlMsg::OwnFailure {
                ts: Instant::from_nanos(5),
                incarnation: 1,
            },
            ControlMsg::LostRecalls {
                incarnation: 1,
                recalls: vec![(0, 99, 7).into()],
            },
            ControlMsg::Recovery {
                incarnation: 1,
                ts: Instant::from_nanos(5),
                failures: vec![(3, 8).into()],
                failed_now: vec![],
                recalls: 1,
                recalls_truncated: false,
            },
            ControlMsg::Rejoined {
                process: 2,
                incarnation: 2,
            },
            ControlMsg::Readmit(vec![1]),
            ControlMsg::Input(Input::Forward {
                from: 0,
                to: 1,
                packet: PacketBytes(vec![0x00, 0x7f, 0xff, 0x10]),
            }),
            ControlMsg::Input(Input::Forwarded {
                process: 1,
                id: 9,
                ack: Some(PacketBytes(vec![0xab; 3])),
            }),
            ControlMsg::Input(Input::Forwarded {
                process: 1,
                id: 10,
                ack: None,
            }),
            ControlMsg::Forward {
                id: 9,
                packet: PacketBytes(vec![1, 2, 3]),
            },
        ];
        let mut buf = [0u8; 512];
        for m in msgs {
            let len = m.encode(&mut buf).unwrap();
            assert_eq!(buf[0], CONTROL_TAG);
            assert_eq!(ControlMsg::decode(&buf[..len]).unwrap(), m);
        }
    }

    /// Every controller output becomes the message for the member it names.
    #[test]
    fn outputs_go_to_the_member_they_name() {
        let failures = vec![Failure {
            process: 2,
            ts: Instant::from_nanos(77),
        }];
        let out = Output::Announce {
            to: 5,
            epoch: 3,
            failures: failures.clone(),
        };
        assert_eq!(
            ControlMsg::order(out),
            (Member::Process(5), ControlMsg::Announce { epoch: 3, failures })
        );
        let out = Output::RemoveInputs {
            switch: 4,
            ports: vec![1],
        };
        assert_eq!(
            ControlMsg::order(out),
            (Member::Switch(4), ControlMsg::RemoveInputs(vec![1]))
        );
    }

    /// Recalls go in parts of `RECALLS_PER_OUTPUT`, both ways; the largest part fits a frame.
    #[test]
    fn a_full_part_of_lost_recalls_fits_a_frame() {
        let most = vec![(u32::MAX, u64::MAX, u64::MAX); onepipe_proto::controller::RECALLS_PER_OUTPUT];
        let answer = ControlMsg::LostRecalls {
            incarnation: u64::MAX,
            recalls: most.iter().map(|&r| r.into()).collect(),
        };
        let report = ControlMsg::Input(Input::RecallLost {
            process: u32::MAX,
            lost: most,
        });
        for m in [answer, report] {
            let mut buf = vec![0u8; onepipe_fabric::node::FRAME_MAX];
            let len = m.encode(&mut buf).unwrap();
            assert_eq!(ControlMsg::decode(&buf[..len]).unwrap(), m);
        }
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert_eq!(ControlMsg::decode(&[]), Err(ControlDecodeError::Empty));
        assert_eq!(
            ControlMsg::decode(&[0x01, b'{']),
            Err(ControlDecodeError::Tag(0x01))
        );
        assert_eq!(
            ControlMsg::decode(&[CONTROL_TAG, b'{']),
            Err(ControlDecodeError::Body)
        );
        assert_eq!(ControlMsg::decode(&[CONTROL_TAG]), Err(ControlDecodeError::Body));
        let big = ControlMsg::RemoveInputs((0..100).collect());
        let mut small = [0u8; 16];
        assert!(big.encode(&mut small).is_err());
        // Packets travel as hex: anything else is refused.
        for body in [
            &br#"{"Forward":{"id":1,"packet":"0g"}}"#[..],
            br#"{"Forward":{"id":1,"packet":"abc"}}"#,
        ] {
            let mut frame = vec![CONTROL_TAG];
            frame.extend_from_slice(body);
            assert_eq!(ControlMsg::decode(&frame), Err(ControlDecodeError::Body));
        }
    }

    /// The largest packet the controller forwards fits a fabric frame as a control message, so
    /// encoding one never fails (the runtimes count on it).
    #[test]
    fn the_largest_forward_fits_a_frame() {
        let packet = PacketBytes(vec![
            0xff;
            onepipe_proto::controller::forward::FORWARD_PACKET_BYTES_MAX
        ]);
        let msgs = [
            ControlMsg::Input(Input::Forward {
                from: u32::MAX,
                to: u32::MAX,
                packet: packet.clone(),
            }),
            ControlMsg::Input(Input::Forwarded {
                process: u32::MAX,
                id: u64::MAX,
                ack: Some(packet.clone()),
            }),
            ControlMsg::Forward { id: u64::MAX, packet },
        ];
        let mut frame = vec![0u8; onepipe_fabric::node::FRAME_MAX];
        for m in msgs {
            let len = m.encode(&mut frame).unwrap();
            assert_eq!(ControlMsg::decode(&frame[..len]).unwrap(), m);
        }
    }

    /// The controller's queue to a node that takes nothing stays bounded: reroutes and
    /// registrations' answers keep only the latest, repeats merge, and a failure announcement
    /// still gets in when the queue is full of forwarded packets (the oldest makes room,
    /// counted); later copies of the announcement are merged, not piled up.
    #[test]
    fn a_node_that_takes_nothing_has_a_bounded_queue_and_still_gets_announcements() {
        use onepipe_proto::mgmt_outbox::{MGMT_QUEUED_MAX, MgmtQueue};
        let mut q = MgmtQueue::default();
        for k in 0..10 {
            q.push(ControlMsg::Avoid(vec![(k, 1)]));
            q.push(ControlMsg::PathsChanged);
            q.push(ControlMsg::Hello);
        }
        assert_eq!(q.len(), 3);
        for id in 0..(2 * MGMT_QUEUED_MAX) as u64 {
            q.push(ControlMsg::Forward {
                id,
                packet: PacketBytes(vec![1, 2, 3]),
            });
        }
        assert_eq!(q.len(), MGMT_QUEUED_MAX);
        let announce = ControlMsg::Announce {
            epoch: 0,
            failures: vec![(3, 1_000).into()],
        };
        for _ in 0..5 {
            q.push(announce.clone());
        }
        assert_eq!(q.len(), MGMT_QUEUED_MAX);
        assert_eq!(q.counters.dropped_once as usize, MGMT_QUEUED_MAX + 3 + 1);
        let all: Vec<ControlMsg> = std::iter::from_fn(|| q.pop()).collect();
        let latest = [
            ControlMsg::PathsChanged,
            ControlMsg::Hello,
            ControlMsg::Avoid(vec![(9, 1)]),
        ];
        assert_eq!(all[..3], latest, "the newest of each kind");
        assert_eq!(all.iter().filter(|m| **m == announce).count(), 1);
        assert_eq!(all.last(), Some(&announce));
    }
}
