//! The management plane's messages as frames, for a runtime whose management plane is a
//! network (the simulator's management links): a tag byte, then the message as JSON.
//!
//! Control messages are rare (a registration per process, a few per failure), so a
//! self-describing encoding costs nothing measurable and keeps captures readable. Routing
//! tables do not travel: the controller names the links out of use and each switch builds its
//! own tables avoiding them.

use crate::control::Command;
use onepipe_proto::controller::{Failure, Input, LostRecall, PacketBytes};
use onepipe_wire::Instant;
use serde::{Deserialize, Serialize};

/// First byte of every control frame; a frame without it is not one of ours.
pub const CONTROL_TAG: u8 = 0xC7;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControlMsg {
    /// A member to the controller.
    Input(Input),
    /// The controller to a process: failures, each `(process, failure timestamp ns)`.
    Announce {
        epoch: u64,
        failures: Vec<(u32, u64)>,
    },
    /// The controller to a switch: Resume, stop waiting for these inputs.
    RemoveInputs(Vec<u16>),
    /// The controller to a switch: stop taking frames on this input and report it.
    CutInput(u16),
    /// The controller to a switch: these `(switch, port)` link ends are out of use; route
    /// around them.
    Avoid(Vec<(usize, u16)>),
    /// The controller to a process: paths changed (see [`Command::PathsChanged`]).
    PathsChanged,
    /// The controller to a process: its registration arrived, and the failures so far, each
    /// `(process, failure timestamp ns)` (see [`Command::Registered`]).
    Registered {
        failures: Vec<(u32, u64)>,
    },
    /// The controller (re)started: a member says again what it said before (a process
    /// registers, a switch repeats its link-down reports), since what it sent while no
    /// controller listened was lost. Repeats change nothing at a controller that heard them.
    Hello,
    /// The controller to a process: a packet it forwards (paper 5.2); answer forward `id`
    /// with [`Input::Forwarded`].
    Forward {
        id: u64,
        packet: PacketBytes,
    },
    /// Receiver Recovery (paper 5.2), the controller to a process: see [`Command`]'s variants
    /// of these names. Timestamps in ns; a recall is `(sender, ts ns, message id)`.
    OwnFailure {
        ts_ns: u64,
        incarnation: u64,
    },
    LostRecalls {
        incarnation: u64,
        recalls: Vec<(u32, u64, u64)>,
    },
    Recovery {
        incarnation: u64,
        ts_ns: u64,
        failures: Vec<(u32, u64)>,
        failed_now: Vec<(u32, u64)>,
        recalls: u32,
        recalls_truncated: bool,
    },
    Rejoined {
        process: u32,
        incarnation: u64,
    },
    /// The controller to a switch: take these inputs back.
    Readmit(Vec<u16>),
}

fn failures_ns(failures: &[Failure]) -> Vec<(u32, u64)> {
    failures.iter().map(|f| (f.process, f.ts.as_nanos())).collect()
}

fn failures_of(failures: Vec<(u32, u64)>) -> Vec<Failure> {
    failures
        .into_iter()
        .map(|(process, ts_ns)| Failure {
            process,
            ts: Instant::from_nanos(ts_ns),
        })
        .collect()
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
    /// The message for a command, or `None` for one that names tables (they do not travel:
    /// send [`ControlMsg::Avoid`]).
    pub fn from_command(command: &Command) -> Option<ControlMsg> {
        Some(match command {
            Command::Announce { epoch, failures } => ControlMsg::Announce {
                epoch: *epoch,
                failures: failures.iter().map(|f| (f.process, f.ts.as_nanos())).collect(),
            },
            Command::RemoveInputs(ports) => ControlMsg::RemoveInputs(ports.clone()),
            Command::CutInput(port) => ControlMsg::CutInput(*port),
            Command::PathsChanged => ControlMsg::PathsChanged,
            Command::Registered { failures } => ControlMsg::Registered {
                failures: failures_ns(failures),
            },
            Command::Forward { id, packet } => ControlMsg::Forward {
                id: *id,
                packet: packet.clone(),
            },
            Command::Routes(_) => return None,
            Command::OwnFailure { ts, incarnation } => ControlMsg::OwnFailure {
                ts_ns: ts.as_nanos(),
                incarnation: *incarnation,
            },
            Command::LostRecalls { incarnation, recalls } => ControlMsg::LostRecalls {
                incarnation: *incarnation,
                recalls: recalls
                    .iter()
                    .map(|r| (r.sender, r.ts.as_nanos(), r.msg_id))
                    .collect(),
            },
            Command::Recovery {
                incarnation,
                ts,
                failures,
                failed_now,
                recalls,
                recalls_truncated,
            } => ControlMsg::Recovery {
                incarnation: *incarnation,
                ts_ns: ts.as_nanos(),
                failures: failures_ns(failures),
                failed_now: failures_ns(failed_now),
                recalls: *recalls,
                recalls_truncated: *recalls_truncated,
            },
            Command::Rejoined { process, incarnation } => ControlMsg::Rejoined {
                process: *process,
                incarnation: *incarnation,
            },
            Command::Readmit(ports) => ControlMsg::Readmit(ports.clone()),
        })
    }

    /// The command a node acts on; `None` for inputs, and for [`ControlMsg::Avoid`] and
    /// [`ControlMsg::Hello`], which the runtime resolves first.
    pub fn into_command(self) -> Option<Command> {
        Some(match self {
            ControlMsg::Announce { epoch, failures } => Command::Announce {
                epoch,
                failures: failures
                    .into_iter()
                    .map(|(process, ts_ns)| Failure {
                        process,
                        ts: Instant::from_nanos(ts_ns),
                    })
                    .collect(),
            },
            ControlMsg::RemoveInputs(ports) => Command::RemoveInputs(ports),
            ControlMsg::CutInput(port) => Command::CutInput(port),
            ControlMsg::PathsChanged => Command::PathsChanged,
            ControlMsg::Registered { failures } => Command::Registered {
                failures: failures_of(failures),
            },
            ControlMsg::OwnFailure { ts_ns, incarnation } => Command::OwnFailure {
                ts: Instant::from_nanos(ts_ns),
                incarnation,
            },
            ControlMsg::LostRecalls { incarnation, recalls } => Command::LostRecalls {
                incarnation,
                recalls: recalls
                    .into_iter()
                    .map(|(sender, ts_ns, msg_id)| LostRecall {
                        sender,
                        ts: Instant::from_nanos(ts_ns),
                        msg_id,
                    })
                    .collect(),
            },
            ControlMsg::Recovery {
                incarnation,
                ts_ns,
                failures,
                failed_now,
                recalls,
                recalls_truncated,
            } => Command::Recovery {
                incarnation,
                ts: Instant::from_nanos(ts_ns),
                failures: failures_of(failures),
                failed_now: failures_of(failed_now),
                recalls,
                recalls_truncated,
            },
            ControlMsg::Rejoined { process, incarnation } => Command::Rejoined { process, incarnation },
            ControlMsg::Readmit(ports) => Command::Readmit(ports),
            ControlMsg::Forward { id, packet } => Command::Forward { id, packet },
            ControlMsg::Input(_) | ControlMsg::Avoid(_) | ControlMsg::Hello => return None,
        })
    }

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
                failures: vec![(5, 1_000), (6, 2_000)],
            },
            ControlMsg::RemoveInputs(vec![0, 9]),
            ControlMsg::CutInput(4),
            ControlMsg::Avoid(vec![(1, 2), (3, 0)]),
            ControlMsg::PathsChanged,
            ControlMsg::Registered {
                failures: vec![(2, 1_234)],
            },
            ControlMsg::Hello,
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
                ts_ns: 5,
                incarnation: 1,
            },
            ControlMsg::LostRecalls {
                incarnation: 1,
                recalls: vec![(0, 99, 7)],
            },
            ControlMsg::Recovery {
                incarnation: 1,
                ts_ns: 5,
                failures: vec![(3, 8)],
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

    #[test]
    fn commands_survive_the_trip() {
        let c = Command::Announce {
            epoch: 3,
            failures: vec![Failure {
                process: 2,
                ts: Instant::from_nanos(77),
            }],
        };
        let m = ControlMsg::from_command(&c).unwrap();
        match m.into_command().unwrap() {
            Command::Announce { epoch, failures } => {
                assert_eq!(epoch, 3);
                assert_eq!(failures[0].process, 2);
                assert_eq!(failures[0].ts, Instant::from_nanos(77));
            }
            other => panic!("{other:?}"),
        }
    }

    /// Recalls go in parts of `RECALLS_PER_OUTPUT`, both ways; the largest part fits a frame.
    #[test]
    fn a_full_part_of_lost_recalls_fits_a_frame() {
        let most = vec![(u32::MAX, u64::MAX, u64::MAX); onepipe_proto::controller::RECALLS_PER_OUTPUT];
        let answer = ControlMsg::LostRecalls {
            incarnation: u64::MAX,
            recalls: most.clone(),
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
}
