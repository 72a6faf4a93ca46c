//! End-to-end tests against the real `krabka` binary.
//!
//! Each test starts its own broker on a free 127.0.0.1 port with a temporary
//! data directory and stops it at the end. The binary comes from
//! `KRABKA_BIN` (set by the test command) or `target/release/krabka`; when
//! neither exists the tests say so on stderr and return without asserting.

use {
    assert2::check,
    bytes::Bytes,
    krabka_client::{
        Acks, Client, ClientConfig, Compression, Consumer, ConsumerConfig, IsolationLevel,
        NewTopic, OffsetSpec, PartitionFetch, Producer, ProducerConfig, ProducerRecord,
        TransactionalProducer,
    },
    krabka_test_support::KrabkaProcess,
    std::{
        collections::BTreeMap,
        time::{Duration, Instant},
    },
};

/// The broker under test, with this file's conveniences on top.
struct Broker(KrabkaProcess);

impl Broker {
    async fn start() -> Option<Self> {
        KrabkaProcess::start().await.map(Self)
    }

    fn addr(&self) -> &str {
        self.0.addr()
    }

    async fn crash_and_restart(&mut self) {
        self.0.crash_and_restart().await;
    }

    async fn client(&self) -> Client {
        Client::connect(&[self.addr()], ClientConfig::default())
            .await
            .unwrap()
    }

    async fn stop(self) {
        self.0.stop().await;
    }
}

async fn create(client: &Client, topic: &NewTopic) {
    client
        .create_topic(topic, Duration::from_secs(10))
        .await
        .unwrap();
    let partitions = topic.partitions;
    for _ in 0..100 {
        let meta = client.refresh_metadata(&[&topic.name]).await.unwrap();
        if (0..partitions).all(|p| meta.leader(&topic.name, p).is_ok()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} has no leaders", topic.name);
}

/// Reads `topic`/`partition` from 0 until `count` records arrived.
async fn read_all(
    client: &Client,
    topic: &str,
    partitions: i32,
    count: usize,
) -> BTreeMap<i32, Vec<krabka_client::ConsumerRecord>> {
    let mut consumer = Consumer::new(
        client.clone(),
        ConsumerConfig {
            max_wait: Duration::from_millis(100),
            ..Default::default()
        },
    );
    for p in 0..partitions {
        consumer.assign(topic, p, 0);
    }
    let mut out: BTreeMap<i32, Vec<_>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.values().map(Vec::len).sum::<usize>() < count {
        assert!(Instant::now() < deadline, "timed out reading {topic}");
        for fetched in consumer.poll().await.unwrap() {
            out.entry(fetched.partition)
                .or_default()
                .extend(fetched.records);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_metadata_and_offsets() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    let topic = NewTopic::new("admin-t", 3).config("retention.ms", "3600000");
    create(&client, &topic).await;
    let info = client.topic("admin-t").await.unwrap();
    check!(info.partitions.len() == 3);
    check!(info.id.is_some());
    let again = client
        .create_topic(&topic, Duration::from_secs(10))
        .await
        .unwrap_err();
    check!(again.code() == Some(36), "{again}");

    let records: Vec<ProducerRecord> = (0..5)
        .map(|i| ProducerRecord {
            value: Some(Bytes::from(format!("v{i}"))),
            timestamp: Some(1_000 + i),
            ..Default::default()
        })
        .collect();
    let results = client
        .produce(&[("admin-t", 1, records)], Acks::All, Compression::None)
        .await
        .unwrap();
    check!(results[0].as_ref().unwrap().base_offset == 0);
    let latest = client
        .list_offset(
            "admin-t",
            1,
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    check!(latest.offset == 5);
    let earliest = client
        .list_offset(
            "admin-t",
            1,
            OffsetSpec::Earliest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    check!(earliest.offset == 0);
    let by_time = client
        .list_offset(
            "admin-t",
            1,
            OffsetSpec::Timestamp(1_003),
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap();
    check!(by_time.offset == 3);

    let deleted = client
        .delete_topics(&["admin-t"], Duration::from_secs(10))
        .await
        .unwrap();
    check!(deleted[0].1.is_ok());
    let meta = client.refresh_metadata(&["admin-t"]).await.unwrap();
    check!(meta.topic("admin-t").is_err());
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_round_trip_with_keys_headers_and_nulls() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("rt", 4)).await;
    let producer = Producer::new(
        client.clone(),
        ProducerConfig {
            linger: Duration::from_millis(2),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    check!(producer.producer_identity().is_some());
    let total = 20_000usize;
    let record = |i: usize| {
        let mut r = ProducerRecord {
            key: (i % 7 != 0).then(|| Bytes::from(format!("key-{}", i % 100))),
            value: (i % 11 != 0).then(|| Bytes::from(format!("value-{i}-{}", "x".repeat(i % 50)))),
            ..Default::default()
        };
        if i % 3 == 0 {
            r = r
                .header("n", Some(Bytes::from(i.to_string())))
                .header("empty", None);
        }
        r
    };
    let mut futures = Vec::with_capacity(total);
    for i in 0..total {
        futures.push((i, producer.send("rt", None, record(i)).await.unwrap()));
    }
    producer.flush().await;
    let mut sent: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
    for (i, f) in futures {
        let meta = f.await.unwrap();
        sent.entry(meta.partition)
            .or_default()
            .push((meta.offset, i));
    }
    // Offsets per partition are 0..n in send order.
    for list in sent.values() {
        let offsets: Vec<i64> = list.iter().map(|(o, _)| *o).collect();
        check!(offsets == (0..i64::try_from(list.len()).unwrap()).collect::<Vec<_>>());
    }
    let read = read_all(&client, "rt", 4, total).await;
    for (partition, list) in &sent {
        let got = &read[partition];
        check!(got.len() == list.len());
        for ((offset, i), r) in list.iter().zip(got) {
            let want = record(*i);
            check!(r.offset == *offset);
            check!(r.key == want.key);
            check!(r.value == want.value);
            check!(r.headers == want.headers);
        }
    }
    // Keyed records follow Kafka's default partitioner.
    for list in sent.values() {
        for (_, i) in list {
            if let Some(key) = record(*i).key {
                let p = krabka_client::partitioner::partition_for_key(&key, 4);
                check!(sent[&p].iter().any(|(_, j)| j == i));
            }
        }
    }
    producer.close().await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_and_acks_level() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("codecs", 1)).await;
    let mut expected = Vec::new();
    for (codec, acks) in [
        (Compression::None, Acks::Leader),
        (Compression::Gzip, Acks::All),
        (Compression::Snappy, Acks::Leader),
        (Compression::Lz4, Acks::All),
        (Compression::Zstd, Acks::None),
    ] {
        let records: Vec<ProducerRecord> = (0..100)
            .map(|i| ProducerRecord::keyed(format!("{codec:?}-{i}"), format!("{i}").repeat(20)))
            .collect();
        expected.extend(records.iter().map(|r| (r.key.clone(), r.value.clone())));
        let results = client
            .produce(&[("codecs", 0, records)], acks, codec)
            .await
            .unwrap();
        check!(results[0].is_ok(), "{codec:?}: {:?}", results[0]);
    }
    let read = read_all(&client, "codecs", 1, expected.len()).await;
    let got: Vec<_> = read[&0]
        .iter()
        .map(|r| (r.key.clone(), r.value.clone()))
        .collect();
    check!(got == expected);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_past_the_end_is_offset_out_of_range() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("oor", 1)).await;
    client
        .produce(
            &[("oor", 0, vec![ProducerRecord::value("a")])],
            Acks::All,
            Compression::None,
        )
        .await
        .unwrap();
    let wanted = [PartitionFetch {
        topic: "oor".into(),
        partition: 0,
        offset: 100,
    }];
    let results = client
        .fetch(
            &wanted,
            &ConsumerConfig {
                max_wait: Duration::from_millis(10),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    check!(results[0].as_ref().unwrap_err().code() == Some(1));
    let unknown = client.topic("no-such-topic").await.unwrap_err();
    check!(unknown.code() == Some(3));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_abort_and_fencing() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    let connection = client.any_connection().await.unwrap();
    if connection
        .version(kafka_protocol::messages::ApiKey::EndTxn)
        .is_err()
    {
        eprintln!("the broker does not implement transactions yet; skipping");
        broker.stop().await;
        return;
    }
    create(&client, &NewTopic::new("txn", 1)).await;
    let mut first = TransactionalProducer::init(client.clone(), "role-a", Duration::from_secs(30))
        .await
        .unwrap();
    first.begin().unwrap();
    first
        .send("txn", 0, vec![ProducerRecord::value("aborted")])
        .await
        .unwrap();
    first.abort().await.unwrap();
    first.begin().unwrap();
    first
        .send("txn", 0, vec![ProducerRecord::value("committed")])
        .await
        .unwrap();
    first.commit().await.unwrap();
    // A second holder of the same id fences the first.
    let second = TransactionalProducer::init(client.clone(), "role-a", Duration::from_secs(30))
        .await
        .unwrap();
    check!(second.identity().epoch > first.identity().epoch);
    first.begin().unwrap();
    let fenced = first
        .send("txn", 0, vec![ProducerRecord::value("stale")])
        .await
        .unwrap_err();
    check!(fenced.is_fenced(), "{fenced}");
    let described = client.describe_transactions(&["role-a"]).await.unwrap();
    check!(described[0].producer == second.identity());

    let config = ConsumerConfig {
        isolation: IsolationLevel::ReadCommitted,
        max_wait: Duration::from_millis(100),
        ..Default::default()
    };
    let wanted = [PartitionFetch {
        topic: "txn".into(),
        partition: 0,
        offset: 0,
    }];
    let fetched = client
        .fetch(&wanted, &config)
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    let values: Vec<_> = fetched
        .records
        .iter()
        .map(|r| r.value.clone().unwrap())
        .collect();
    check!(values == vec![Bytes::from_static(b"committed")]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_survives_a_broker_crash() {
    let Some(mut broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("crash", 2)).await;
    let config = ProducerConfig {
        linger: Duration::from_millis(1),
        ..Default::default()
    };
    let producer = Producer::new(client.clone(), config).await.unwrap();
    let total = 6_000usize;
    let mut futures = Vec::with_capacity(total);
    for i in 0..total {
        if i == total / 2 {
            // Records are queued or in flight when the broker dies.
            broker.crash_and_restart().await;
        }
        let record = ProducerRecord::keyed(format!("k{}", i % 10), format!("value-{i}"));
        futures.push(producer.send("crash", None, record).await.unwrap());
        if i % 500 == 0 {
            tokio::task::yield_now().await;
        }
    }
    producer.flush().await;
    let mut failed = Vec::new();
    for (i, f) in futures.into_iter().enumerate() {
        if let Err(e) = f.await {
            failed.push((i, e));
        }
    }
    // Every record was retried until it was written...
    check!(failed.is_empty(), "{:?}", failed.first());
    // ...and is there exactly once.
    let read = read_all(&client, "crash", 2, total).await;
    let mut seen: BTreeMap<Bytes, usize> = BTreeMap::new();
    for r in read.values().flatten() {
        *seen.entry(r.value.clone().unwrap()).or_default() += 1;
    }
    check!(seen.len() == total);
    check!(seen.values().all(|&n| n == 1));
    producer.close().await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_compression_and_acks_levels() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("pc", 1)).await;
    let mut expected = Vec::new();
    for (compression, acks) in [
        (Compression::Zstd, Acks::Leader),
        (Compression::Lz4, Acks::None),
        (Compression::Gzip, Acks::All),
        (Compression::Snappy, Acks::Leader),
    ] {
        let config = ProducerConfig {
            acks,
            compression,
            idempotence: false,
            linger: Duration::from_millis(1),
            batch_size: 4096,
            ..Default::default()
        };
        let producer = Producer::new(client.clone(), config).await.unwrap();
        check!(producer.producer_identity().is_none());
        let mut futures = Vec::new();
        for i in 0..500 {
            let value = Bytes::from(format!("{compression:?}-{i}-{}", "z".repeat(i % 40)));
            expected.push(value.clone());
            let record = ProducerRecord {
                value: Some(value),
                ..Default::default()
            };
            futures.push(producer.send("pc", Some(0), record).await.unwrap());
        }
        producer.flush().await;
        for f in futures {
            let meta = f.await.unwrap();
            // acks=0 gets no offsets back.
            check!((acks == Acks::None) == (meta.offset == -1));
        }
        producer.close().await;
        check!(
            producer
                .send("pc", Some(0), ProducerRecord::value("late"))
                .await
                .is_err()
        );
    }
    let read = read_all(&client, "pc", 1, expected.len()).await;
    let got: Vec<Bytes> = read[&0].iter().map(|r| r.value.clone().unwrap()).collect();
    check!(got == expected);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_coordinator_lookup() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    let connection = client.any_connection().await.unwrap();
    if connection
        .version(kafka_protocol::messages::ApiKey::FindCoordinator)
        .is_err()
    {
        eprintln!("the broker does not implement FindCoordinator yet; skipping");
        broker.stop().await;
        return;
    }
    let mut coordinator = None;
    for _ in 0..100 {
        // COORDINATOR_NOT_AVAILABLE while __consumer_offsets is being created.
        match client
            .find_coordinator("bench-group", krabka_client::CoordinatorType::Group)
            .await
        {
            Ok(found) => {
                coordinator = Some(found);
                break;
            }
            Err(e) if e.is_retriable() => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e}"),
        }
    }
    let coordinator = coordinator.expect("a group coordinator");
    check!(coordinator.addr() == broker.addr());
    broker.stop().await;
}

/// Produce requests pipelined on one connection reach the log in the order
/// sent while the broker reads on, and a request read after them sees every
/// one of them (Kafka handles a connection's requests one by one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produce_requests_keep_their_order_and_later_requests_see_them() {
    use {
        kafka_protocol::messages::{
            ApiKey, ListOffsetsRequest, TopicName,
            list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        },
        krabka_client::{
            producer::{PartitionBatch, enqueue_produce},
            records::{BatchProducer, encode_batch},
        },
        std::sync::Arc,
    };
    let Some(broker) = Broker::start().await else {
        return;
    };
    let client = broker.client().await;
    create(&client, &NewTopic::new("pipelined", 2)).await;
    let connection = client.connection(broker.addr()).await.unwrap();
    let topic: Arc<str> = Arc::from("pipelined");
    const REQUESTS: i64 = 400;
    let mut answers = Vec::new();
    for i in 0..REQUESTS {
        let record = ProducerRecord::value(Bytes::from(format!("r{i}")));
        let batch = PartitionBatch {
            topic: Arc::clone(&topic),
            partition: i32::try_from(i % 2).unwrap(),
            batch: encode_batch(&[record], BatchProducer::NONE, Compression::None, 0).unwrap(),
        };
        let acks = if i % 3 == 0 { Acks::All } else { Acks::Leader };
        answers.push(
            enqueue_produce(&connection, &[batch], acks, Duration::from_secs(10), None).unwrap(),
        );
    }
    // Sent right behind the last produce, before any answer came back.
    let mut list = ListOffsetsRequest::default();
    list.replica_id = (-1).into();
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(kafka_protocol::protocol::StrBytes::from_static_str(
        "pipelined",
    ));
    for p in 0..2 {
        let mut q = ListOffsetsPartition::default();
        q.partition_index = p;
        q.timestamp = -1;
        t.partitions.push(q);
    }
    list.topics.push(t);
    let version = connection.version(ApiKey::ListOffsets).unwrap();
    let listed = connection.enqueue(&list, version, None).unwrap();

    for (i, answer) in answers.into_iter().enumerate() {
        let outcome = answer.await.unwrap().remove(0).unwrap();
        check!(
            outcome.base_offset == i64::try_from(i).unwrap() / 2,
            "request {i}"
        );
    }
    let listed = listed.await.unwrap();
    for p in &listed.topics[0].partitions {
        check!(p.error_code == 0);
        check!(p.offset == REQUESTS / 2, "partition {}", p.partition_index);
    }
    // Requests larger than what a connection reads ahead (4 MiB) still go
    // through, one at a time, in order, behind small ones.
    create(
        &client,
        &NewTopic::new("pipelined-large", 1).config("max.message.bytes", "8388608"),
    )
    .await;
    let large: Arc<str> = Arc::from("pipelined-large");
    let mut answers = Vec::new();
    for i in 0..6_i64 {
        let size = if i % 2 == 0 { 5 << 20 } else { 10 };
        let value = Bytes::from(vec![u8::try_from(i).unwrap(); size]);
        let batch = PartitionBatch {
            topic: Arc::clone(&large),
            partition: 0,
            batch: encode_batch(
                &[ProducerRecord::value(value)],
                BatchProducer::NONE,
                Compression::None,
                0,
            )
            .unwrap(),
        };
        answers.push(
            enqueue_produce(
                &connection,
                &[batch],
                Acks::Leader,
                Duration::from_secs(30),
                None,
            )
            .unwrap(),
        );
    }
    for (i, answer) in answers.into_iter().enumerate() {
        let outcome = answer.await.unwrap().remove(0).unwrap();
        check!(outcome.base_offset == i64::try_from(i).unwrap());
    }

    let read = read_all(&client, "pipelined", 2, usize::try_from(REQUESTS).unwrap()).await;
    for (p, records) in read {
        let values: Vec<String> = records
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        let sent: Vec<String> = (0..REQUESTS)
            .filter(|i| i % 2 == i64::from(p))
            .map(|i| format!("r{i}"))
            .collect();
        check!(values == sent, "partition {p}");
    }
    broker.stop().await;
}
