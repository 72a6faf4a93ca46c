//! Throughput and latency of the cluster stores against a real PostgreSQL:
//! fenced coordinator-state writes (what an offset commit will cost a
//! coordinator shard), producer-id block allocation (an `InitProducerId`
//! that takes a fresh block every time: the worst case), lease renewal,
//! and the diskless batch coordinator: object commits (each writer one
//! broker committing its objects in order), batch lookups for fetches, and
//! the cleaner (dead objects deleted from a local directory and forgotten).
//!
//! ```sh
//! cargo run --release -p krabka-cluster --example store_bench -- \
//!     postgresql://postgres@127.0.0.1:5433/bench 10 8
//! ```
//!
//! Arguments: the URL of a fresh database (the schema is created; the
//! shards it leases for 10 minutes are fixed, so a second run needs another
//! database), seconds per measurement, concurrent writers.

use {
    bytes::Bytes,
    krabka_cluster::{
        BrokerRegistration, Cluster, DatabaseConfig, LeaseTiming, ShardId, ShardKind,
        state::StateRecord,
    },
    krabka_ids::BrokerId,
    krabka_remote_storage::diskless::{
        BatchCoordinator, CommitBatch, DisklessPartition, DisklessStore, FindBatches, ObjectCache,
        ObjectCommit, ObjectKey, clean_once,
    },
    std::{
        sync::Arc,
        time::{Duration, Instant},
    },
};

struct Figures {
    ops: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Figures {
    fn print(&mut self, what: &str) {
        self.latencies.sort_unstable();
        let at = |q: f64| {
            let i = ((self.latencies.len() as f64 - 1.0) * q).round() as usize;
            self.latencies.get(i).copied().unwrap_or_default()
        };
        println!(
            "{what:<44} {:>9.0} ops/s   p50 {:>7.2} ms   p99 {:>7.2} ms",
            self.ops as f64 / self.elapsed.as_secs_f64(),
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3,
        );
    }
}

async fn measure<F, Fut>(seconds: u64, writers: usize, op: F) -> Figures
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let op = Arc::clone(&op);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = 0;
            while Instant::now() < deadline {
                let t = Instant::now();
                op(w, i).await;
                latencies.push(t.elapsed());
                i += 1;
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.expect("writer"));
    }
    Figures {
        ops: latencies.len(),
        elapsed: started.elapsed(),
        latencies,
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .expect("usage: store_bench URL [SECONDS] [WRITERS]");
    let seconds: u64 = args.next().map_or(10, |s| s.parse().expect("seconds"));
    let writers: usize = args.next().map_or(8, |s| s.parse().expect("writers"));
    let mut config = DatabaseConfig::new(url);
    config.pool_size = writers.max(1);
    let cluster = Arc::new(Cluster::connect(&config).await.expect("connect"));
    let timing = LeaseTiming {
        duration: Duration::from_secs(600),
        ..LeaseTiming::default()
    };
    let broker = cluster
        .register_broker(
            &BrokerRegistration {
                node: BrokerId(1000 + std::process::id() as i32 % 1000),
                rack: None,
                listeners: "PLAINTEXT://bench:0".into(),
                incarnation: uuid::Uuid::new_v4(),
            },
            &timing,
        )
        .await
        .expect("register");
    let mut leases = Vec::new();
    for w in 0..writers {
        let shard = ShardId::new(ShardKind::ConsumerOffsets, 10_000 + w as i32);
        leases.push(
            cluster
                .acquire_shard(&broker, shard, &timing)
                .await
                .expect("acquire")
                .expect("a fresh shard is free"),
        );
    }
    let leases = Arc::new(leases);
    println!("{writers} concurrent writers, {seconds} s each");

    let (c, l) = (Arc::clone(&cluster), Arc::clone(&leases));
    measure(seconds, writers, move |w, i| {
        let (c, l) = (Arc::clone(&c), Arc::clone(&l));
        async move {
            let record = StateRecord {
                key: format!("group-{w}/topic/{}", i % 64).into_bytes(),
                value: Some(i.to_be_bytes().to_vec()),
            };
            c.write_state(&l[w], &[record]).await.expect("write");
        }
    })
    .await
    .print("fenced state write (1 offset commit)");

    let (c, l) = (Arc::clone(&cluster), Arc::clone(&leases));
    measure(seconds, writers, move |w, i| {
        let (c, l) = (Arc::clone(&c), Arc::clone(&l));
        async move {
            let records: Vec<StateRecord> = (0..10)
                .map(|p| StateRecord {
                    key: format!("group-{w}/topic/{p}").into_bytes(),
                    value: Some(i.to_be_bytes().to_vec()),
                })
                .collect();
            c.write_state(&l[w], &records).await.expect("write");
        }
    })
    .await
    .print("fenced state write (10 offsets in one commit)");

    let c = Arc::clone(&cluster);
    measure(seconds, writers, move |_, _| {
        let c = Arc::clone(&c);
        async move {
            c.allocate_producer_ids(&broker, 1).await.expect("allocate");
        }
    })
    .await
    .print("producer-id block of 1 (InitProducerId, worst)");

    let (c, l) = (Arc::clone(&cluster), Arc::clone(&leases));
    measure(seconds, 1, move |_, _| {
        let (c, l) = (Arc::clone(&c), Arc::clone(&l));
        async move {
            c.renew(&broker, &l, &timing).await.expect("renew");
        }
    })
    .await
    .print(&format!("renewal (broker + {writers} shards, 1 caller)"));

    diskless(&cluster, seconds, writers).await;
}

/// Partitions of the diskless topic the benchmark commits to.
const DISKLESS_PARTITIONS: i32 = 64;
/// Batches per object (each to another partition): an 8 MiB object of
/// 512 KiB batches.
const BATCHES_PER_OBJECT: i32 = 16;
/// Dead objects the cleaner measurement deletes.
const DEAD_OBJECTS: usize = 4000;

async fn diskless(cluster: &Arc<Cluster>, seconds: u64, writers: usize) {
    let coordinator = Arc::new(cluster.batch_coordinator());
    let topic = uuid::Uuid::new_v4();
    let partitions: Vec<_> = (0..DISKLESS_PARTITIONS)
        .map(|p| DisklessPartition::new(topic, p))
        .collect();
    coordinator
        .create_partitions(&partitions)
        .await
        .expect("create partitions");
    let object = move |w: usize, i: u64| {
        // Every writer touches every partition over time, as brokers do.
        let first = (w as i32 * 7 + i as i32 * BATCHES_PER_OBJECT) % DISKLESS_PARTITIONS;
        ObjectCommit {
            key: ObjectKey(format!("bench/{}", uuid::Uuid::new_v4())),
            uploader: BrokerId(w as i32),
            size: 8 << 20,
            batches: (0..BATCHES_PER_OBJECT)
                .map(|b| CommitBatch {
                    partition: DisklessPartition::new(topic, (first + b) % DISKLESS_PARTITIONS),
                    position: u64::from(b as u32) << 19,
                    size: 1 << 19,
                    offset_count: 512,
                    max_timestamp: 0,
                    producer: None,
                })
                .collect(),
        }
    };
    let c = Arc::clone(&coordinator);
    measure(seconds, writers, move |w, i| {
        let c = Arc::clone(&c);
        let commit = object(w, i);
        async move {
            let answers = c.commit_object(&commit).await.expect("commit");
            assert!(answers.iter().all(Result::is_ok), "every batch accepted");
        }
    })
    .await
    .print(&format!(
        "diskless object commit ({BATCHES_PER_OBJECT} batches)"
    ));

    let c = Arc::clone(&coordinator);
    measure(seconds, writers, move |w, i| {
        let c = Arc::clone(&c);
        let requests: Vec<_> = (0..8)
            .map(|p| FindBatches {
                partition: DisklessPartition::new(topic, (w as i32 * 8 + p) % DISKLESS_PARTITIONS),
                offset: (i % 64 * 512) as i64,
                max_bytes: 1 << 20,
            })
            .collect();
        async move {
            c.find_batches(&requests).await.expect("find");
        }
    })
    .await
    .print("diskless fetch lookup (8 partitions)");

    // The cleaner: dead objects in a local directory, deleted and forgotten.
    let dir = tempfile::tempdir().expect("temp dir");
    let store = DisklessStore::new(
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).expect("dir")),
        "",
        Arc::new(ObjectCache::new(0, 0)),
    );
    for _ in 0..DEAD_OBJECTS {
        let key = store.new_key();
        store
            .put(&key, Bytes::from_static(b"dead object"))
            .await
            .expect("put");
        coordinator
            .abandon_object(&key, BrokerId(0), 11)
            .await
            .expect("abandon");
    }
    let started = Instant::now();
    let mut deleted = 0;
    while deleted < DEAD_OBJECTS {
        let pass = clean_once(coordinator.as_ref(), &store, Duration::ZERO, i64::MAX)
            .await
            .expect("clean");
        assert!(pass.deleted > 0, "the cleaner makes progress");
        deleted += pass.deleted;
    }
    println!(
        "{:<44} {:>9.0} objects/s",
        "diskless cleaner (local directory)",
        deleted as f64 / started.elapsed().as_secs_f64()
    );
}
