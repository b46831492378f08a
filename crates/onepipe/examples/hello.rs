//! Four processes on a leaf-spine fabric each send scatterings to all the others from their
//! own threads; every receiver prints the order it delivered in, and the orders agree.
//!
//! Run: `cargo run --release -p onepipe --example hello`

#![allow(clippy::disallowed_methods)] // an application may sleep; only state machines may not

use onepipe::api::{OnePipe, Options};
use onepipe_fabric::Topology;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = Options {
        topology: Topology::leaf_spine(2, 2, 2)?,
        ..Options::default()
    };
    let mut system = OnePipe::start(options)?;
    let count = system.process_count() as u32;
    let mut threads = Vec::new();
    for id in 0..count {
        let mut p = system.take_process(id)?;
        threads.push(std::thread::spawn(move || {
            p.on_send_failure(|f| eprintln!("message {} to {} was not delivered", f.msg_id, f.dst));
            let everyone: Vec<u32> = (0..count).collect();
            for i in 0..3 {
                let text = format!("hello #{i} from {id}");
                let scatter: Vec<(u32, &[u8])> = everyone.iter().map(|&d| (d, text.as_bytes())).collect();
                // A full send queue is backpressure: wait and retry.
                while let Err(e) = p.send_unreliable(&scatter) {
                    eprintln!("process {id}: {e}");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let mut order = Vec::new();
            while order.len() < 3 * count as usize {
                match p.recv_timeout(Duration::from_secs(5)) {
                    Some(d) => order.push(format!(
                        "{}@{}",
                        String::from_utf8_lossy(&d.payload),
                        d.ts.as_nanos()
                    )),
                    None => break,
                }
            }
            (id, order, p.timestamp())
        }));
    }
    let mut orders = Vec::new();
    for t in threads {
        let (id, order, now) = t.join().expect("process thread");
        println!(
            "process {id} delivered {} messages (clock now {now}):",
            order.len()
        );
        for line in &order {
            println!("  {line}");
        }
        orders.push(order);
    }
    let agree = orders.windows(2).all(|w| w[0] == w[1]);
    println!("all receivers delivered the same sequence: {agree}");
    if !agree || orders[0].len() != 3 * count as usize {
        return Err("ordering or delivery failed".into());
    }
    Ok(())
}
