//! A process's side of controller forwarding (paper 5.2) on its management channel: it hands
//! the controller what its endpoint wants forwarded, and answers each packet forwarded to it.
//! The endpoint does the work (endpoint_forward.rs); this only carries the packets.

use crate::control::ControlPort;
use onepipe_proto::controller::forward::FORWARD_PACKET_BYTES_MAX;
use onepipe_proto::controller::{Input, Member, PacketBytes};
use onepipe_proto::endpoint::Endpoint;
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

#[cfg(test)]
mod tests {
    use crate::control::ControlPort;
    use crate::control::Manage;
    use crate::control_node::{ControllerNode, Mgmt, RouteCache, mgmt_port};
    use onepipe_fabric::node::FRAME_MAX;
    use onepipe_fabric::{Hints, Node, PortId, Route, Topology, Wiring};
    use onepipe_proto::controller::{ControllerConfig, Member};
    use onepipe_proto::endpoint::{Endpoint, EndpointConfig};
    use onepipe_wire::{Duration, Instant};

    /// An endpoint as a node, with nothing else (the runtimes wrap it with an application).
    struct Host(Endpoint);

    impl Node for Host {
        fn classify(&self, _now: Instant, _port: PortId, _frame: &[u8]) -> Route {
            Route::Consume
        }
        fn handle_frame(&mut self, now: Instant, _port: PortId, frame: &mut [u8], _route: Route) {
            let _ = self.0.handle_frame(now, frame);
        }
        fn poll_transmit(&mut self, now: Instant, _port: PortId, buf: &mut [u8]) -> Option<usize> {
            self.0.poll_transmit(now, buf)
        }
        fn poll_timeout(&self) -> Option<Instant> {
            Some(self.0.poll_timeout())
        }
        fn handle_timeout(&mut self, now: Instant) {
            self.0.handle_timeout(now);
        }
    }

    impl Hints for Host {}

    impl Manage for Host {
        fn exchange(&mut self, now: Instant, port: &mut ControlPort) {
            port.exchange_endpoint(now, &mut self.0);
        }
    }

    /// The management plane as the simulator and the udp runtime run it (control frames on
    /// management ports, [`ControllerNode`]), with a fabric that loses everything: a prepare
    /// reaches its receiver through the controller only, and its ACK comes back the same way.
    #[test]
    fn a_prepare_and_its_ack_travel_the_management_links_when_the_fabric_loses_them() {
        let wiring = Wiring::new(Topology::single_switch(2).unwrap(), 1).unwrap();
        let start = Instant::from_nanos(1_000_000);
        let mut controller = ControllerNode::new(&wiring, ControllerConfig::default(), start);
        let routes = RouteCache::shared(&wiring);
        let mut hosts: Vec<Mgmt<Host>> = (0..2u32)
            .map(|p| {
                let tor_port = wiring.processes[p as usize].tor_port;
                let ep = Endpoint::new(EndpointConfig::new(p, 2, tor_port), start);
                let node = wiring.node_of_process(p);
                let mgmt = mgmt_port(&wiring, node);
                Mgmt::managed(Host(ep), Member::Process(p), mgmt, routes.clone())
            })
            .collect();
        let nodes: Vec<usize> = (0..2).map(|p| wiring.node_of_process(p)).collect();
        let mut buf = vec![0u8; FRAME_MAX];
        let mut now = start;
        hosts[0].node.0.send_reliable(now, &[(1, b"m")]).unwrap();
        let give_up = start + Duration::from_millis(100);
        // Until the ACK is back and the sender has answered for it.
        while !hosts[0].node.0.reliable_sender().is_idle() || controller.controller().forwards_pending() > 0 {
            assert!(now < give_up, "the ACK never came back");
            now += Duration::from_micros(10);
            for (h, &node) in hosts.iter_mut().zip(&nodes) {
                h.handle_timeout(now);
                // The fabric loses every frame.
                while h.poll_transmit(now, 0, &mut buf).is_some() {}
                let mgmt = mgmt_port(&wiring, node);
                while let Some(len) = h.poll_transmit(now, mgmt, &mut buf) {
                    controller.handle_frame(now, node as PortId, &mut buf[..len], Route::Consume);
                }
            }
            if controller.poll_timeout().is_some_and(|t| t <= now) {
                controller.handle_timeout(now);
            }
            for (h, &node) in hosts.iter_mut().zip(&nodes) {
                let mgmt = mgmt_port(&wiring, node);
                while let Some(len) = controller.poll_transmit(now, node as PortId, &mut buf) {
                    h.handle_frame(now, mgmt, &mut buf[..len], Route::Consume);
                }
            }
        }
        let (s, r) = (&hosts[0].node.0, &hosts[1].node.0);
        assert_eq!(r.prepared().len(), 1, "M is in the receiver's buffer");
        assert!(s.reliable_sender().counters().forwards_requested >= 1);
        assert_eq!(
            r.counters().forwarded_received,
            1,
            "asked once, before the ACK came"
        );
        assert_eq!(s.counters().forwarded_received, 1);
        let c = controller.controller().counters();
        assert_eq!((c.forwards.forwarded, c.forwards.answered), (2, 2));
        assert!(controller.controller().failures().is_empty());
        assert_eq!(controller.timeline.refused, 0);
        assert!(hosts.iter().all(|h| h.counters().malformed == 0));
    }
}
