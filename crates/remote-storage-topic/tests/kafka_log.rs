//! The Kafka-backed metadata log against the real `krabka` broker.
//!
//! Each test starts its own broker on a free 127.0.0.1 port with a temporary
//! data directory and stops it at the end. The binary comes from
//! `KRABKA_BIN` (set by the test command) or `target/release/krabka`; when
//! neither exists the tests say so on stderr and return without asserting.

use {
    assert2::{assert, check},
    bytes::Bytes,
    futures_util::StreamExt,
    krabka_client::{Client, ClientConfig},
    krabka_remote_storage::{
        RemoteLogMetadataManager, RemoteLogSegmentDetails, RemoteLogSegmentId,
        RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState,
        TopicIdPartition,
    },
    krabka_remote_storage_topic::{
        KafkaMetadataEventLog, KafkaMetadataEventLogConfig, KeyedEvent, MetadataEventLog,
        MetadataEventRecord, MetadataEventStream, MetadataLogError, PartitionStart,
        REMOTE_LOG_METADATA_TOPIC, TopicBasedRemoteLogMetadataManager, TopicBasedRlmmConfig,
    },
    krabka_test_support::KrabkaProcess,
    std::{
        collections::BTreeMap,
        sync::Arc,
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

    /// Kills the broker and starts it again on the same port and data.
    async fn restart(&mut self) {
        self.0.crash_and_restart().await;
    }

    fn config(&self) -> KafkaMetadataEventLogConfig {
        KafkaMetadataEventLogConfig::new(vec![self.addr().to_owned()])
    }
}

async fn next(stream: &mut MetadataEventStream) -> MetadataEventRecord {
    tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("a record within the test's patience")
        .expect("the stream is still open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_log_creates_the_topic_publishes_subscribes_reads_ranges_and_survives_a_restart() {
    let Some(mut broker) = Broker::start().await else {
        return;
    };
    let log = KafkaMetadataEventLog::connect(broker.config())
        .await
        .unwrap();
    check!(log.partition_count() == 50);
    let client = Client::connect(&[broker.addr()], ClientConfig::default())
        .await
        .unwrap();
    let topic = client.topic(REMOTE_LOG_METADATA_TOPIC).await.unwrap();
    check!(topic.partitions.len() == 50);
    // A second connect finds the topic instead of creating it.
    let again = KafkaMetadataEventLog::connect(broker.config())
        .await
        .unwrap();
    check!(again.partition_count() == 50);

    check!(log.publish(3, Bytes::from_static(b"a")).await.unwrap() == 0);
    check!(log.publish(3, Bytes::from_static(b"b")).await.unwrap() == 1);
    let offsets = log
        .publish_keyed_group(vec![
            KeyedEvent {
                partition: 3,
                key: Bytes::from_static(b"k"),
                event: Some(Bytes::from_static(b"c")),
            },
            KeyedEvent {
                partition: 4,
                key: Bytes::from_static(b"k"),
                event: None,
            },
            KeyedEvent {
                partition: 3,
                key: Bytes::from_static(b"j"),
                event: Some(Bytes::from_static(b"d")),
            },
        ])
        .await
        .unwrap();
    check!(offsets == vec![2, 0, 3]);
    assert!(let Err(MetadataLogError::PartitionOutOfRange { .. }) = log.publish(50, Bytes::new()).await);

    let ends = log.high_water_marks().await.unwrap();
    check!(ends.len() == 50);
    check!((ends[3], ends[4], ends[0]) == (4, 1, 0));
    check!(log.low_water_marks().await.unwrap() == vec![0; 50]);

    let (mut stream, handle) = log.subscribe(vec![PartitionStart::new(3, 1)]);
    let payloads: Vec<_> = [
        next(&mut stream).await,
        next(&mut stream).await,
        next(&mut stream).await,
    ]
    .into_iter()
    .map(|record| (record.offset, record.payload))
    .collect();
    check!(
        payloads
            == vec![
                (1, Bytes::from_static(b"b")),
                (2, Bytes::from_static(b"c")),
                (3, Bytes::from_static(b"d"))
            ]
    );
    handle.add(PartitionStart::new(4, 0));
    let tombstone = next(&mut stream).await;
    check!((tombstone.partition, tombstone.offset, tombstone.tombstone) == (4, 0, true));
    check!(tombstone.key == Some(Bytes::from_static(b"k")));

    let mut visited = Vec::new();
    log.visit_range(3, 1, 3, &mut |record| {
        visited.push(record.offset);
        Ok(())
    })
    .await
    .unwrap();
    check!(visited == vec![1, 2]);
    let short = log.visit_range(3, 0, 10, &mut |_| Ok(())).await;
    assert!(let Err(MetadataLogError::RangeShort { partition: 3, .. }) = short);

    // The broker goes away and comes back; writes retry and the
    // subscription resumes where it was.
    broker.restart().await;
    check!(log.publish(3, Bytes::from_static(b"e")).await.unwrap() == 4);
    let resumed = next(&mut stream).await;
    check!(
        (resumed.partition, resumed.offset, resumed.payload) == (3, 4, Bytes::from_static(b"e"))
    );
    log.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_works_over_the_kafka_log() {
    let Some(broker) = Broker::start().await else {
        return;
    };
    let mut config = broker.config();
    config.partitions = 5;
    let log: Arc<dyn MetadataEventLog> =
        Arc::new(KafkaMetadataEventLog::connect(config).await.unwrap());
    let rlmm = TopicBasedRemoteLogMetadataManager::new(
        Arc::clone(&log),
        tokio::runtime::Handle::current(),
        TopicBasedRlmmConfig::default(),
    );
    let orders = TopicIdPartition::new(uuid::Uuid::from_u128(0xCA), "orders", 7);
    rlmm.on_partition_leadership_changes(std::slice::from_ref(&orders), &[])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !rlmm.is_ready(&orders) {
        assert!(Instant::now() < deadline, "the manager never became ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let id = RemoteLogSegmentId::new(orders.clone(), uuid::Uuid::from_u128(0xFE));
    let details = RemoteLogSegmentDetails::new(
        4096,
        RemoteLogSegmentState::CopySegmentStarted,
        BTreeMap::from([(krabka_ids::LeaderEpoch(0), 0)]),
    );
    let segment = RemoteLogSegmentMetadata::new(id.clone(), 0, 99, 100, 42, 123, details).unwrap();
    rlmm.add_remote_log_segment_metadata(segment.clone())
        .unwrap();
    rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate::new(
        id,
        456,
        None,
        RemoteLogSegmentState::CopySegmentFinished,
        42,
    ))
    .unwrap();
    let found = rlmm
        .remote_log_segment_metadata(&orders, krabka_ids::LeaderEpoch(0), 50)
        .unwrap()
        .unwrap();
    check!(found.state() == RemoteLogSegmentState::CopySegmentFinished);
    // Both events sit in the partition Kafka's partitioner picks.
    let ends = log.high_water_marks().await.unwrap();
    let home = usize::try_from(rlmm.metadata_partition(&orders)).unwrap();
    check!(ends[home] == 2);
    check!(ends.iter().sum::<i64>() == 2);
    rlmm.close().unwrap();
}
