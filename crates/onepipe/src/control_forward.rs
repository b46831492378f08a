//! A process's side of controller forwarding (paper 5.2) on its management channel: it hands
//! the controller what its endpoint wants forwarded, and answers each packet forwarded to it.
//! The endpoint does the work (endpoint_forward.rs); this only carries the packets.

use crate::control::ControlPort;
use crate::controller::forward::FORWARD_PACKET_BYTES_MAX;
use crate::controller::{Input, Member, PacketBytes};
use crate::endpoint::Endpoint;
use onepipe_wire::Instant;

/// Forward requests one exchange hands over at most: the endpoint keeps the rest for the next
/// (it queues a bounded number anyway; this bounds a step).
const REQUESTS_PER_EXCHANGE_MAX: usize = 64;

impl ControlPort {
    /// The controller forwarded `packet` as forward `id`: the endpoint takes it, and the answer
    /// carries the ACK it owes, if any. Every forward is answered, even one the endpoint could
    /// not use: only silence makes the controller declare a process failed.
    pub(crate) fn answer_forward(
        &mut self,
        now: Instant,
        endpoint: &mut Endpoint,
        id: u64,
        packet: &PacketBytes,
    ) {
        let Member::Process(me) = self.member else {
            return;
        };
        let mut buf = [0u8; FORWARD_PACKET_BYTES_MAX];
        let ack = match endpoint.handle_forwarded(now, &packet.0, &mut buf) {
            Ok(Some(len)) => Some(PacketBytes(buf[..len].to_vec())),
            // Malformed or not for us: counted by the endpoint.
            Ok(None) | Err(_) => None,
        };
        self.send(Input::Forwarded { process: me, id, ack });
    }

    /// Asks the controller to forward what the endpoint could not get acknowledged.
    pub(crate) fn request_forwards(&mut self, endpoint: &mut Endpoint) {
        let Member::Process(me) = self.member else {
            return;
        };
        let mut buf = [0u8; FORWARD_PACKET_BYTES_MAX];
        for _ in 0..REQUESTS_PER_EXCHANGE_MAX {
            let Some((to, len)) = endpoint.poll_forward(&mut buf) else {
                return;
            };
            self.send(Input::Forward {
                from: me,
                to,
                packet: PacketBytes(buf[..len].to_vec()),
            });
        }
    }
}
