//! `onepipe bench udp-limit`: what this machine's kernel carries over loopback UDP, the
//! physical limit the udp runtime is compared with (in the same run by `bench fig8 --runtime
//! udp`).
//!
//! One sender thread and one receiver thread, one datagram per syscall each way, for two
//! sizes: one message per datagram, and full datagrams (what packing many messages into one
//! datagram could carry at most).

#![allow(clippy::disallowed_methods)] // measures real time

use serde::Serialize;
use std::io;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Serialize, Clone, Debug)]
pub struct LimitReport {
    pub seconds: f64,
    pub message_bytes: usize,
    pub datagram_bytes: usize,
    /// Datagrams of `message_bytes` received per second by one receiver from one sender.
    pub datagrams_per_s: f64,
    /// Of those sent, the fraction the receiver never got (its socket buffer was full).
    pub datagram_loss: f64,
    /// Full datagrams received per second.
    pub packed_datagrams_per_s: f64,
    /// 1Pipe messages of `message_bytes` that fit one full datagram (header and framing
    /// included), and so the messages per second full datagrams carry at most.
    pub messages_per_datagram: usize,
    pub packed_msgs_per_s: f64,
}

/// One sender-receiver pair over loopback for `duration` with datagrams of `bytes`: received
/// per second and the fraction lost.
fn pair(duration: Duration, bytes: usize) -> io::Result<(f64, f64)> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    let to = rx.local_addr()?;
    rx.set_read_timeout(Some(Duration::from_millis(100)))?;
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            let mut got = 0u64;
            loop {
                match rx.recv(&mut buf) {
                    Ok(_) => got += 1,
                    Err(_) if done.load(Ordering::Relaxed) => return got,
                    Err(_) => {}
                }
            }
        })
    };
    let payload = vec![0x5au8; bytes];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < duration {
        for _ in 0..64 {
            if tx.send_to(&payload, to).is_ok() {
                sent += 1;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let got = receiver.join().expect("the receiver thread does not panic");
    let loss = 1.0 - got as f64 / sent.max(1) as f64;
    Ok((got as f64 / elapsed, loss.max(0.0)))
}

pub fn measure(duration: Duration, message_bytes: usize, datagram_bytes: usize) -> io::Result<LimitReport> {
    let (datagrams_per_s, datagram_loss) = pair(duration, message_bytes)?;
    let (packed_datagrams_per_s, _) = pair(duration, datagram_bytes)?;
    // As the udp runtime packs: a datagram header and room for its tag, then per message its
    // packet header and a 2-byte length.
    use onepipe_runtime::udp::datagram::{HEADER_LEN, TRAILER_LEN};
    let per_message = onepipe_wire::HEADER_LEN + message_bytes + 2;
    let messages_per_datagram = datagram_bytes.saturating_sub(HEADER_LEN + TRAILER_LEN) / per_message;
    Ok(LimitReport {
        seconds: duration.as_secs_f64(),
        message_bytes,
        datagram_bytes,
        datagrams_per_s,
        datagram_loss,
        packed_datagrams_per_s,
        messages_per_datagram,
        packed_msgs_per_s: packed_datagrams_per_s * messages_per_datagram as f64,
    })
}
