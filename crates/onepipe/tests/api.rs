//! The paper's Table 1 API over the inproc runtime: both services end to end from application
//! threads, and API misuse as typed errors.

use onepipe::SendError;
use onepipe::api::{OnePipe, Options};
use onepipe_fabric::Topology;
use std::time::Duration;

fn start() -> OnePipe {
    let options = Options {
        topology: Topology::leaf_spine(2, 2, 2).unwrap(),
        workers: 2,
        ..Options::default()
    };
    OnePipe::start(options).unwrap()
}

/// Every process broadcasts `rounds` scatterings with the chosen service; returns what each
/// delivered, in order.
fn exchange(reliable: bool, rounds: usize) -> Vec<Vec<(u64, u32, u64)>> {
    let mut system = start();
    let count = system.process_count() as u32;
    let threads: Vec<_> = (0..count)
        .map(|id| {
            let mut p = system.take_process(id).unwrap();
            std::thread::spawn(move || {
                let everyone: Vec<u32> = (0..count).collect();
                for i in 0..rounds {
                    let text = format!("{id}/{i}");
                    let scatter: Vec<(u32, &[u8])> = everyone.iter().map(|&d| (d, text.as_bytes())).collect();
                    loop {
                        let sent = if reliable {
                            p.send_reliable(&scatter)
                        } else {
                            p.send_unreliable(&scatter)
                        };
                        match sent {
                            Ok(_) => break,
                            Err(SendError::BufferFull { .. }) => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                let mut got = Vec::new();
                while got.len() < rounds * count as usize {
                    let d = if reliable {
                        p.recv_reliable_timeout(Duration::from_secs(10))
                    } else {
                        p.recv_timeout(Duration::from_secs(10))
                    };
                    let Some(d) = d else { break };
                    got.push((d.ts.as_nanos(), d.src, d.msg_id));
                }
                got
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn reliable_broadcast_is_delivered_completely_and_in_one_order() {
    let rounds = 50;
    let orders = exchange(true, rounds);
    for o in &orders {
        assert_eq!(o.len(), rounds * orders.len(), "every reliable message arrives");
        assert!(
            o.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
            "(ts, src) order"
        );
    }
    assert!(orders.windows(2).all(|w| w[0] == w[1]), "all receivers agree");
}

#[test]
fn best_effort_broadcast_receivers_agree() {
    let orders = exchange(false, 50);
    assert!(orders.windows(2).all(|w| w[0] == w[1]), "all receivers agree");
    assert!(!orders[0].is_empty());
}

#[test]
fn misuse_is_a_typed_error() {
    let mut system = start();
    let mut p = system.take_process(0).unwrap();
    assert_eq!(p.send_reliable(&[]), Err(SendError::EmptyScattering));
    assert_eq!(
        p.send_reliable(&[(99, b"x")]),
        Err(SendError::UnknownDestination(99))
    );
    let huge = vec![0u8; 2 << 20];
    assert!(matches!(
        p.send_unreliable(&[(1, &huge)]),
        Err(SendError::MessageTooLarge { .. })
    ));
    assert!(system.take_process(0).is_err(), "a handle is taken once");
}
