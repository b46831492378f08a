//! Whole transactions through clients, servers and a lossy, reordering network.

use proptest::prelude::*;

use super::*;

fn incr(key: &Bytes) -> Txn {
    Txn::new(vec![Op::IncrBy {
        key: key.clone(),
        delta: 1,
    }])
}

/// A random transaction of 1 to 4 operations over `keys`.
fn random_txn(rng: &mut SplitMix, keys: &[Bytes]) -> Txn {
    let n = 1 + rng.below(4) as usize;
    let ops = (0..n)
        .map(|_| {
            let key = keys[rng.below(keys.len() as u64) as usize].clone();
            match rng.below(6) {
                0..=2 => Op::Get { key },
                3 => Op::Put {
                    key,
                    value: Bytes::from(rng.below(100).to_string()),
                },
                4 => Op::Del { key },
                _ => Op::IncrBy {
                    key,
                    delta: rng.below(7) as i64 - 3,
                },
            }
        })
        .collect();
    Txn::new(ops)
}

fn op() -> impl Strategy<Value = Op> {
    let key = (0..5u8).prop_map(|k| Bytes::from(format!("k{k}")));
    prop_oneof![
        key.clone().prop_map(|key| Op::Get { key }),
        (key.clone(), 0..3u8).prop_map(|(key, v)| Op::Put {
            key,
            value: Bytes::from(if v == 2 { "a".to_string() } else { v.to_string() }),
        }),
        key.clone().prop_map(|key| Op::Del { key }),
        (key, -2..3i64).prop_map(|(key, delta)| Op::IncrBy { key, delta }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// One client, one transaction at a time: every result is what executing the transactions
    /// in submission order gives, lossy network or not, and the store ends as that execution.
    #[test]
    fn serial_transactions_give_the_expected_results(
        txns in proptest::collection::vec(proptest::collection::vec(op(), 1..5).prop_map(Txn::new), 1..12),
        seed in any::<u64>(),
        lossy in any::<bool>(),
    ) {
        let mut net = Net::new(Layout::new(2, 3).unwrap(), 1, seed);
        net.drop_per_mille = if lossy { 100 } else { 0 };
        net.queues = vec![txns.clone()];
        net.run();
        let mut model = ShardState::default();
        prop_assert_eq!(net.done.len(), txns.len());
        for (d, txn) in net.done.iter().zip(&txns) {
            prop_assert_eq!(&d.txn, txn);
            let expected: Vec<OpResult> = txn.ops.iter().map(|op| model.apply(op)).collect();
            match &d.completion.outcome {
                Outcome::Committed { results, .. } => prop_assert_eq!(results, &expected),
                other => prop_assert!(false, "{:?}", other),
            }
            prop_assert_eq!(d.completion.aborts, 0, "a lone client aborted");
            if !lossy {
                prop_assert_eq!(d.completion.attempts, 1);
            }
        }
        prop_assert_eq!(net.digest(), model.digest());
    }
}

/// Two clients increment one key 200 times each, concurrently: each increment commits once,
/// none is lost (the final value is 400 on every replica), and the results are 1 to 400.
#[test]
fn concurrent_increments_lose_no_update() {
    for (seed, drop_per_mille) in [(1, 0), (2, 0), (3, 50)] {
        let layout = Layout::new(2, 3).unwrap();
        let mut net = Net::new(layout, 2, seed);
        net.drop_per_mille = drop_per_mille;
        let n = b("n");
        net.watched = vec![n.clone()];
        net.queues = vec![vec![incr(&n); 200], vec![incr(&n); 200]];
        net.run();
        let mut seen: Vec<i64> = net
            .committed()
            .map(|(_, _, results)| match results[..] {
                [OpResult::Integer(v)] => v,
                ref other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seen.len(), 400, "seed={seed}: not every increment committed");
        seen.sort_unstable();
        assert_eq!(seen, (1..=400).collect::<Vec<i64>>(), "seed={seed}");
        for p in layout.replicas_of(layout.shard_of(&n)) {
            assert_eq!(net.servers[p as usize].version(&n), 400);
        }
        let aborts: u64 = net.done.iter().map(|d| u64::from(d.completion.aborts)).sum();
        let counted: u64 = net.clients.iter().map(|c| c.occ_counters().aborts).sum();
        assert_eq!(aborts, counted, "seed={seed}");
        assert!(aborts > 0, "seed={seed}: two clients on one key never conflicted");
        net.replay();
    }
}

/// Writers put one unique value in x and y (on two shards); readers read both: a committed
/// read never sees one write without the other.
#[test]
fn readers_never_see_half_a_write() {
    for (seed, drop_per_mille) in [(7, 0), (8, 0), (9, 50)] {
        let layout = Layout::new(2, 2).unwrap();
        let (x, y) = keys_on_two_shards(&layout);
        let mut net = Net::new(layout, 4, seed);
        net.drop_per_mille = drop_per_mille;
        net.watched = vec![x.clone(), y.clone()];
        let write = |w: usize, i: usize| {
            let value = Bytes::from(format!("{w}:{i}"));
            Txn::new(vec![
                Op::Put {
                    key: x.clone(),
                    value: value.clone(),
                },
                Op::Put {
                    key: y.clone(),
                    value,
                },
            ])
        };
        let read = Txn::new(vec![Op::Get { key: x.clone() }, Op::Get { key: y.clone() }]);
        net.queues = vec![
            (0..60).map(|i| write(0, i)).collect(),
            (0..60).map(|i| write(1, i)).collect(),
            vec![read.clone(); 100],
            vec![read; 100],
        ];
        net.run();
        let mut reads = 0;
        for (d, _, results) in net.committed() {
            if d.txn.is_read_only() {
                assert_eq!(results[0], results[1], "seed={seed}: a read saw half a write");
                reads += 1;
            }
        }
        assert!(reads > 150, "seed={seed}: only {reads} reads committed");
        net.replay();
    }
}

/// Random transactions from three clients over six keys: the committed ones replay in `ts`
/// order with the same results, and the store ends as the replay.
#[test]
fn random_transactions_are_serializable_at_their_ts() {
    for seed in 0..12u64 {
        let layout = Layout::new(3, 2).unwrap();
        let mut net = Net::new(layout, 3, seed);
        net.drop_per_mille = if seed % 3 == 0 { 80 } else { 0 };
        let keys: Vec<Bytes> = (0..6).map(|k| b(&format!("k{k}"))).collect();
        net.watched = keys.clone();
        let mut rng = SplitMix(seed ^ 0xabcd);
        net.queues = (0..3)
            .map(|_| (0..60).map(|_| random_txn(&mut rng, &keys)).collect())
            .collect();
        net.run();
        assert_eq!(net.done.len(), 180, "seed={seed}");
        assert_eq!(
            net.committed().count(),
            180,
            "seed={seed}: a transaction did not commit"
        );
        let model = net.replay();
        assert_eq!(
            net.digest(),
            model.digest(),
            "seed={seed}: the store is not the replay"
        );
    }
}

/// Same, with a window of several transactions per client.
#[test]
fn windows_of_transactions_stay_serializable() {
    for seed in 20..26u64 {
        let layout = Layout::new(2, 3).unwrap();
        let mut net = Net::new(layout, 2, seed).with_config(|c| c.window = 4);
        let keys: Vec<Bytes> = (0..4).map(|k| b(&format!("k{k}"))).collect();
        let mut rng = SplitMix(seed);
        net.queues = (0..2)
            .map(|_| (0..80).map(|_| random_txn(&mut rng, &keys)).collect())
            .collect();
        net.run();
        assert_eq!(net.committed().count(), 160, "seed={seed}");
        let model = net.replay();
        assert_eq!(net.digest(), model.digest(), "seed={seed}");
    }
}

/// A swarm: every seed draws a layout, clients, window, keys, loss and duplication; every
/// transaction commits, replays at its `ts`, and the store ends as the replay.
#[test]
fn a_swarm_of_layouts_losses_and_duplicates_stays_serializable() {
    for seed in 100..160u64 {
        let layout = Layout::new(1 + (seed % 3) as u32, 1 + (seed % 4) as u32).unwrap();
        let clients = 1 + (seed % 4) as usize;
        let mut net = Net::new(layout, clients, seed).with_config(|c| c.window = 1 + (seed % 3) as usize);
        net.drop_per_mille = (seed % 5) * 50;
        net.duplicate_per_mille = (seed % 7) * 30;
        let keys: Vec<Bytes> = (0..3 + seed % 4).map(|k| b(&format!("k{k}"))).collect();
        net.watched = keys.clone();
        let mut rng = SplitMix(seed ^ 0x5555);
        net.queues = (0..clients)
            .map(|_| (0..40).map(|_| random_txn(&mut rng, &keys)).collect())
            .collect();
        net.run();
        assert_eq!(net.done.len(), 40 * clients, "seed={seed}");
        let not_committed: Vec<&Outcome> = net
            .done
            .iter()
            .map(|d| &d.completion.outcome)
            .filter(|o| !matches!(o, Outcome::Committed { .. }))
            .collect();
        assert!(not_committed.is_empty(), "seed={seed}: {not_committed:?}");
        let model = net.replay();
        assert_eq!(net.digest(), model.digest(), "seed={seed}");
    }
}
