//! Throughput and latency of the cluster stores against a real PostgreSQL:
//! fenced coordinator-state writes (what an offset commit will cost a
//! coordinator shard), producer-id block allocation (an `InitProducerId`
//! that takes a fresh block every time: the worst case), and lease renewal.
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
    krabka_cluster::{
        BrokerRegistration, Cluster, DatabaseConfig, LeaseTiming, ShardId, ShardKind,
        state::StateRecord,
    },
    krabka_ids::BrokerId,
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
}
