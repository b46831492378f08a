//! `onepipe netchain serve`'s store driven by a Redis client library (issue 43: "the RESP front
//! driven by a Redis client crate in a test"), and by redis-benchmark when it is installed.

use onepipe_bench::netchain::serve::{NetchainServeConfig, Serving, start};
use std::net::TcpListener;

fn serving() -> Serving {
    start(
        &NetchainServeConfig::default(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    )
    .unwrap()
}

fn connect(s: &Serving) -> redis::Connection {
    let addr = s.server.local_addr();
    redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn redis_commands_reach_the_chains() {
    let s = serving();
    let mut c = connect(&s);
    let get =
        |c: &mut redis::Connection, k: &str| -> Option<String> { redis::cmd("GET").arg(k).query(c).unwrap() };
    assert_eq!(get(&mut c, "never"), None, "a key never set is absent");
    let ok: String = redis::cmd("SET").arg("k1").arg("v1").query(&mut c).unwrap();
    assert_eq!(ok, "OK", "the first SET installs the key through the controller");
    assert_eq!(get(&mut c, "k1").as_deref(), Some("v1"));
    let _: () = redis::cmd("SET").arg("k1").arg("v2").query(&mut c).unwrap();
    assert_eq!(get(&mut c, "k1").as_deref(), Some("v2"));
    let nx: Option<String> = redis::cmd("SET")
        .arg("k1")
        .arg("v3")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(nx, None, "SET NX on a key with a value");
    let nx: Option<String> = redis::cmd("SET")
        .arg("k2")
        .arg("v")
        .arg("NX")
        .query(&mut c)
        .unwrap();
    assert_eq!(nx.as_deref(), Some("OK"));
    let values: Vec<Option<String>> = redis::cmd("MGET").arg(&["k1", "k2", "k3"]).query(&mut c).unwrap();
    assert_eq!(values, vec![Some("v2".into()), Some("v".into()), None]);
    let deleted: i64 = redis::cmd("DEL").arg(&["k1", "k2", "k3"]).query(&mut c).unwrap();
    assert_eq!(deleted, 2, "the keys that had values");
    assert_eq!(get(&mut c, "k1"), None);
    let swapped: Vec<redis::Value> = redis::cmd("CAS")
        .arg("k1")
        .arg("x")
        .arg("y")
        .query(&mut c)
        .unwrap();
    assert_eq!(swapped, vec![redis::Value::Int(0), redis::Value::Nil]);
    let too_long = redis::cmd("SET")
        .arg("seventeen-bytes!!")
        .arg("v")
        .query::<()>(&mut c);
    assert!(too_long.is_err(), "keys are at most 16 bytes");
    s.stop();
}

/// Paper 8.5: locks on compare-and-swap; of many clients racing for one lock, exactly one wins,
/// and only the owner releases it.
#[test]
fn a_lock_has_one_owner_at_a_time() {
    let s = serving();
    let winners: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let mut c = connect(&s);
                scope.spawn(move || {
                    let r: Vec<redis::Value> = redis::cmd("CASNX")
                        .arg("lock:a")
                        .arg(format!("owner{i}"))
                        .query(&mut c)
                        .unwrap();
                    r[0] == redis::Value::Int(1)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(winners.iter().filter(|&&w| w).count(), 1, "{winners:?}");
    let owner = format!("owner{}", winners.iter().position(|&w| w).unwrap());
    let mut c = connect(&s);
    let wrong: Vec<redis::Value> = redis::cmd("CAD")
        .arg("lock:a")
        .arg("intruder")
        .query(&mut c)
        .unwrap();
    assert_eq!(wrong[0], redis::Value::Int(0), "only the owner releases");
    let released: Vec<redis::Value> = redis::cmd("CAD").arg("lock:a").arg(&owner).query(&mut c).unwrap();
    assert_eq!(released, vec![redis::Value::Int(1)]);
    s.stop();
}

/// Debian's redis-benchmark against NetChain, unchanged (run when installed; required when
/// `ONEPIPE_REQUIRE_REDIS_TOOLS=1`, as CI sets it).
#[test]
fn redis_benchmark_sets_and_gets_through_netchain() {
    if !onepipe_kv::redis_tools::tools_present("redis_benchmark_sets_and_gets_through_netchain") {
        return;
    }
    let s = serving();
    onepipe_kv::redis_tools::benchmark_set_get(s.server.local_addr(), 5000);
    let mut c = connect(&s);
    let value: Option<String> = redis::cmd("GET").arg("key:__rand_int__").query(&mut c).unwrap();
    assert_eq!(
        value.map(|v| v.len()),
        Some(3),
        "redis-benchmark's SETs wrote its 3-byte value"
    );
    s.stop();
}

/// `onepipe netchain serve --topology T` over a NetChain whose switches and controller run on
/// their own (here threads with their own sockets, as `netchain up` runs processes): the
/// server's agents join as processes of the topology.
#[test]
fn the_server_joins_a_netchain_started_elsewhere() {
    use onepipe_bench::netchain::processes::{Deployment, run_controller, run_switch};
    use onepipe_bench::netchain::serve::start_joined;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let net = format!("127.62.{}", 1 + std::process::id() % 250);
    let mut toml = String::from("name = \"netchain-joined-test\"\n");
    for (i, s) in ["s0", "s1", "s2", "s3"].iter().enumerate() {
        toml += &format!("[[switch]]\nname = \"{s}\"\naddr = \"{net}.{}:7300\"\n", 1 + i);
    }
    for h in 0..5 {
        toml += &format!(
            "[[host]]\nname = \"h{h}\"\nswitch = \"s0\"\naddr = \"{net}.{}:7300\"\n",
            10 + h
        );
    }
    for (a, b) in [("s0", "s1"), ("s0", "s3"), ("s1", "s2"), ("s3", "s2")] {
        toml += &format!("[[link]]\nbetween = [\"{a}\", \"{b}\"]\n");
    }
    let topology = onepipe_fabric::Topology::from_toml(&toml).unwrap();
    let auth = onepipe_runtime::udp::auth::Auth::generate().unwrap();
    let d = Arc::new(Deployment::new(topology, auth).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for name in ["s0", "s1", "s2", "s3"] {
        let (d, stop) = (d.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            run_switch(&d, name, &stop).unwrap();
        }));
    }
    let (dc, stopc) = (d.clone(), stop.clone());
    threads.push(std::thread::spawn(move || run_controller(&dc, &stopc).unwrap()));
    let serving = start_joined(
        &d,
        &[0, 1],
        &NetchainServeConfig::default(),
        TcpListener::bind("127.0.0.1:0").unwrap(),
    )
    .unwrap();
    let mut c = connect(&serving);
    for i in 0..20 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(format!("v{i}"))
            .query(&mut c)
            .unwrap();
    }
    for i in 0..20 {
        let v: Option<String> = redis::cmd("GET").arg(format!("k{i}")).query(&mut c).unwrap();
        assert_eq!(v, Some(format!("v{i}")));
    }
    assert!(
        start_joined(
            &d,
            &[4],
            &NetchainServeConfig::default(),
            TcpListener::bind("127.0.0.1:0").unwrap()
        )
        .is_err(),
        "process 4 is the controller's"
    );
    serving.stop();
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
}
