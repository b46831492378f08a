use super::*;

/// 16 processes on the testbed's shape (four per ToR): 8 servers, 8 clients.
fn small(system: System, distribution: Distribution) -> KvSimConfig {
    KvSimConfig {
        topology: Topology::three_layer(2, 2, 2, 2, 4).expect("valid topology"),
        shards: 8,
        system,
        distribution,
        workload: WorkloadConfig {
            keys: 1_000,
            ..WorkloadConfig::default()
        },
        warmup: Duration::from_micros(500),
        duration: Duration::from_millis(2),
        ..KvSimConfig::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    for system in System::ALL {
        let c = small(system, Distribution::Zipf(0.99));
        let (a, b) = (run_sim(&c).expect("run"), run_sim(&c).expect("run"));
        assert!(a.committed > 0, "{system:?}: nothing committed");
        assert_eq!(a.trace_hash, b.trace_hash, "{system:?}");
        assert_eq!(a.committed, b.committed, "{system:?}");
        assert_eq!(a.txn_per_s, b.txn_per_s, "{system:?}");
        assert_eq!(a.latency_us, b.latency_us, "{system:?}");
        let other = run_sim(&KvSimConfig { seed: 2, ..c }).expect("run");
        assert_ne!(
            a.trace_hash, other.trace_hash,
            "{system:?}: the seed changes nothing"
        );
    }
}

/// Paper 2.2 and 7.3.1: 1Pipe's and OCC's transactions are serializable, here in the simulator
/// under contention (a Zipf workload on a thousand keys, half the transactions writing).
/// Paper 2.2 and 7.3.1: 1Pipe's and OCC's transactions are serializable, here in the simulator
/// under contention (a Zipf workload on a thousand keys, half the transactions writing), over a
/// few seeds.
#[test]
fn one_pipe_and_occ_are_serializable_in_the_simulator() {
    for seed in 1..=3 {
        for system in [System::OnePipe, System::Occ] {
            let c = KvSimConfig {
                record_history: true,
                seed,
                ..small(system, Distribution::Zipf(0.99))
            };
            let r = run_sim(&c).expect("run");
            let run = format!("{system:?} seed={seed}");
            assert!(r.committed > 100, "{run}: {} committed", r.committed);
            assert!(r.history.len() as i64 >= r.committed, "{run}: history too short");
            assert_eq!(r.outstanding_at_end, 0, "{run}: the drain did not finish");
            assert_eq!(r.serializable, Some(true), "{run}: {:?}", r.serializability_note);
        }
    }
}

/// The check above can fail: the non-transactional store's history under the same contention
/// is not serializable for some seed.
#[test]
fn the_non_transactional_store_is_caught_by_the_check() {
    let caught = (1..=3).any(|seed| {
        let c = KvSimConfig {
            record_history: true,
            seed,
            ..small(System::NonTransactional, Distribution::Zipf(0.99))
        };
        let r = run_sim(&c).expect("run");
        assert_eq!(r.serializable, None, "only transactional systems are judged");
        !onepipe_check::check_serializable(&r.history).is_ok_and(|report| report.ok())
    });
    assert!(
        caught,
        "every non-transactional history passed the serializability check"
    );
}

#[test]
fn every_class_is_measured_and_processing_bounds_throughput() {
    let c = small(System::NonTransactional, Distribution::Uniform);
    let r = run_sim(&c).expect("run");
    for class in TxnClass::ALL {
        let l = r.class(class);
        assert!(l.committed > 0, "{class:?}: none committed");
        assert!(l.p50 <= l.p99, "{class:?}: {l:?}");
    }
    // Each client's transaction takes at least a frame sent and one received: its CPU bounds
    // its rate, so throughput is finite and below the clients' frame rate.
    let frames_per_s = 1e9 / c.frame_cost.as_nanos() as f64;
    assert!(r.txn_per_s > 0.0);
    assert!(
        r.txn_per_s < f64::from(r.clients) * frames_per_s / 2.0,
        "{}",
        r.txn_per_s
    );
    // A slower CPU lowers it.
    let slow = run_sim(&KvSimConfig {
        frame_cost: c.frame_cost.saturating_mul(4),
        ..c
    })
    .expect("run");
    assert!(
        slow.txn_per_s < r.txn_per_s * 0.5,
        "{} against {}",
        slow.txn_per_s,
        r.txn_per_s
    );
}

#[test]
fn bad_configurations_are_refused() {
    let c = small(System::OnePipe, Distribution::Uniform);
    let too_many = KvSimConfig {
        shards: 16,
        ..c.clone()
    };
    assert!(matches!(
        run_sim(&too_many),
        Err(KvSimError::TooFewProcesses { .. })
    ));
    let zipf = KvSimConfig {
        distribution: Distribution::Zipf(1.0),
        ..c.clone()
    };
    assert!(matches!(run_sim(&zipf), Err(KvSimError::ZipfConstant(_))));
    let window = KvSimConfig { window: 0, ..c };
    assert!(matches!(run_sim(&window), Err(KvSimError::NotPositive("window"))));
}
