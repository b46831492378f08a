//! A Redis-protocol server over the in-memory store, for trying clients against the front:
//! `cargo run -p onepipe-kv --example memory_server -- [ADDRESS]` (default 127.0.0.1:6380),
//! then `redis-cli -p 6380`. Stops with Ctrl-C.

use std::net::TcpListener;
use std::sync::Arc;

use onepipe_kv::{MemStore, ServeConfig, serve};

fn main() {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:6380".to_string());
    let listener = match TcpListener::bind(&address) {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {address}: {error}");
            std::process::exit(1);
        }
    };
    let server = match serve(listener, Arc::new(MemStore::new()), ServeConfig::default()) {
        Ok(server) => server,
        Err(error) => {
            eprintln!("cannot start the server: {error}");
            std::process::exit(1);
        }
    };
    println!(
        "serving the memory store on {} (redis-cli -p {})",
        server.local_addr(),
        server.local_addr().port()
    );
    server.wait();
}
