//! Property test: shard leases and fenced writes in the real database behave
//! exactly as a reference model of the rules says, for any sequence of
//! acquisitions, renewals, releases, lapses and writes by three brokers.
//!
//! The reference is the rules in their plainest form: a shard is free or
//! held by one broker at one epoch; only a free or lapsed shard can be
//! acquired, which bumps the epoch; a renewal or a write succeeds only for
//! the current holder at its current epoch with the lease unexpired. Time is
//! not random here: a lapse is an explicit step (the expiry moved into the
//! past), so every case is deterministic.

mod support;

use {
    krabka_cluster::{
        BrokerLease, ClusterError, LeaseEpoch, ShardId, ShardKind, ShardLease,
        state::{StateRecord, StoredEntry},
    },
    proptest::{prelude::*, test_runner::TestRunner},
    support::{LONG, cluster, expire_shard, register},
};

const BROKERS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize),
    Renew(usize),
    Release(usize),
    Lapse,
    Write(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..BROKERS).prop_map(Op::Acquire),
        2 => (0..BROKERS).prop_map(Op::Renew),
        1 => (0..BROKERS).prop_map(Op::Release),
        2 => Just(Op::Lapse),
        4 => ((0..BROKERS), any::<u8>()).prop_map(|(b, v)| Op::Write(b, v)),
    ]
}

/// The rules, plainly.
#[derive(Debug, Default)]
struct Reference {
    owner: Option<usize>,
    epoch: i64,
    live: bool,
    value: Option<u8>,
}

impl Reference {
    fn holds(&self, broker: usize, lease: Option<&ShardLease>) -> bool {
        self.owner == Some(broker) && self.live && lease.is_some_and(|l| l.epoch.0 == self.epoch)
    }
}

#[test]
fn leases_and_fencing_follow_the_rules() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let Some((_db, cluster)) = rt.block_on(cluster()) else {
        return;
    };
    let brokers: Vec<BrokerLease> =
        rt.block_on(async { futures(BROKERS, |i| register(&cluster, i as i32 + 1)).await });
    let case = std::sync::atomic::AtomicI32::new(0);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    runner
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            // A shard of its own per case, so every case starts from a free shard.
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let shard = ShardId::new(ShardKind::ConsumerOffsets, n);
            rt.block_on(run_case(&cluster, &brokers, shard, &ops));
            Ok(())
        })
        .unwrap();
}

async fn futures<T, F: std::future::Future<Output = T>>(
    n: usize,
    f: impl Fn(usize) -> F,
) -> Vec<T> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(f(i).await);
    }
    out
}

async fn run_case(
    cluster: &krabka_cluster::Cluster,
    brokers: &[BrokerLease],
    shard: ShardId,
    ops: &[Op],
) {
    let mut model = Reference::default();
    // Each broker's latest granted lease (what it would present).
    let mut held: Vec<Option<ShardLease>> = vec![None; BROKERS];
    let mut highest = LeaseEpoch(0);
    for op in ops {
        match *op {
            Op::Acquire(b) => {
                let got = cluster
                    .acquire_shard(&brokers[b], shard, &LONG)
                    .await
                    .unwrap();
                if model.live {
                    assert_eq!(got, None, "{op:?} of a live lease must fail");
                } else {
                    let lease =
                        got.unwrap_or_else(|| panic!("{op:?} of a free shard must succeed"));
                    model.epoch += 1;
                    model.owner = Some(b);
                    model.live = true;
                    assert_eq!(lease.epoch, LeaseEpoch(model.epoch));
                    assert!(lease.epoch > highest, "epochs only grow");
                    highest = lease.epoch;
                    held[b] = Some(lease);
                }
            }
            Op::Renew(b) => {
                let mine: Vec<ShardLease> = held[b].into_iter().collect();
                let renewal = cluster.renew(&brokers[b], &mine, &LONG).await.unwrap();
                assert!(renewal.registered);
                let expect = model.holds(b, held[b].as_ref());
                assert_eq!(renewal.shards == mine && !mine.is_empty(), expect, "{op:?}");
            }
            Op::Release(b) => {
                let Some(lease) = held[b] else { continue };
                let released = cluster.release_shard(&lease).await.unwrap();
                let expect = model.owner == Some(b) && model.epoch == lease.epoch.0;
                assert_eq!(released, expect, "{op:?}");
                if released {
                    model.owner = None;
                    model.live = false;
                }
            }
            Op::Lapse => {
                if let Some(lease) = held.iter().flatten().next() {
                    expire_shard(cluster, lease).await;
                    model.live = false;
                }
            }
            Op::Write(b, v) => {
                let Some(lease) = held[b] else { continue };
                let record = StateRecord {
                    key: b"k".to_vec(),
                    value: Some(vec![v]),
                };
                let result = cluster.write_state(&lease, &[record]).await;
                if model.holds(b, Some(&lease)) {
                    result.unwrap_or_else(|e| panic!("{op:?} by the holder failed: {e}"));
                    model.value = Some(v);
                } else {
                    assert!(
                        matches!(result, Err(ClusterError::Fenced(_))),
                        "{op:?} with {lease:?} must be fenced, got {result:?} (model {model:?})"
                    );
                }
            }
        }
    }
    let stored: Vec<(Vec<u8>, Vec<u8>)> = cluster
        .read_state(shard)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e {
            StoredEntry::Committed { key, value, .. } => Some((key, value)),
            StoredEntry::Pending { .. } => None,
        })
        .collect();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .value
        .map(|v| (b"k".to_vec(), vec![v]))
        .into_iter()
        .collect();
    assert_eq!(stored, expected, "only the holders' writes are stored");
}
