//! A diskless partition through the storage seam, on a real broker state
//! (the embedded coordinator and the filesystem store under a temporary log
//! directory): offsets from the coordinator, idempotent retries, reads,
//! ListOffsets, DeleteRecords, refusals, and a reopen that finds every
//! acknowledged batch.

use {
    crate::{
        broker::Broker,
        config::{BrokerConfig, RawSettings},
        handlers::admin::create_topic_now,
        partition::{Isolation, OffsetQuery, PartitionStorage, Read, ReadRequest, StorageError},
    },
    assert2::check,
    bytes::Bytes,
    kafka_protocol::records::{Record, RecordBatchDecoder, TimestampType},
    std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration},
};

fn config(dir: &Path) -> BrokerConfig {
    let mut raw = RawSettings::default();
    raw.set("log.dirs", &dir.display().to_string(), "test");
    raw.set("log.cleaner.enable", "false", "test");
    raw.set("diskless.commit.interval.ms", "5", "test");
    BrokerConfig::from_raw(&raw).unwrap()
}

/// A batch of `n` records; `producer` is (id, epoch, first sequence) of an
/// idempotent producer; `ts` the first record's timestamp.
fn batch(n: i64, ts: i64, producer: Option<(i64, i16, i32)>, transactional: bool) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.map_or(-1, |p| p.0),
            producer_epoch: producer.map_or(-1, |p| p.1),
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: producer.map_or(-1, |p| p.2 + i32::try_from(i).unwrap()),
            timestamp: ts + i,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{ts}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    crate::coordinator::state_topic::encode_v2_batch(&records).unwrap()
}

fn decode(records: &Bytes) -> Vec<Record> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    while !buf.is_empty() {
        out.extend(RecordBatchDecoder::decode(&mut buf).unwrap().records);
    }
    out
}

async fn open(dir: &Path) -> Arc<Broker> {
    let config = config(dir);
    Arc::new(
        crate::blocking::run(move || Broker::open(config))
            .await
            .unwrap()
            .unwrap(),
    )
}

async fn append(p: &Arc<dyn PartitionStorage>, records: Bytes) -> krabka_log::AppendInfo {
    tokio::time::timeout(Duration::from_secs(60), p.append(records))
        .await
        .expect("committed within the deadline")
        .unwrap()
        .unwrap()
}

async fn read(p: &Arc<dyn PartitionStorage>, offset: i64) -> Result<Bytes, StorageError> {
    let target = Arc::clone(p);
    let request = ReadRequest {
        offset,
        max_bytes: 1 << 20,
        min_one_batch: true,
        isolation: Isolation::ReadUncommitted,
        // Asked for, and ignored: a diskless read answers bytes.
        zero_copy: true,
    };
    let records = match crate::blocking::run(move || target.read(&request)).await?? {
        Read::Ready(r) => r.records,
        Read::Later(future) => future.await?.records,
    };
    Ok(records
        .in_memory()
        .cloned()
        .expect("a diskless read answers bytes"))
}

async fn offset_of(p: &Arc<dyn PartitionStorage>, query: OffsetQuery) -> Option<i64> {
    p.list_offset(query, Isolation::ReadUncommitted)
        .await
        .unwrap()
        .map(|t| t.offset)
}

/// Creates topic `name` of `partitions` with `diskless.enable=true` and
/// `configs`.
async fn create_diskless(
    broker: &Arc<Broker>,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    let b = Arc::clone(broker);
    let name = name.to_owned();
    let mut all = BTreeMap::from([("diskless.enable".to_owned(), "true".to_owned())]);
    all.extend(
        configs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    crate::blocking::run(move || create_topic_now(&b, &name, partitions, all, None))
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_fetch_offsets_and_a_reopen_on_the_embedded_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path()).await;
    create_diskless(&broker, "d", 2, &[]).await;
    check!(broker.partitions.get("d", 0).is_none(), "no local log");
    let p = broker.partitions.storage("d", 0).unwrap();
    let t0 = 1_700_000_000_000;

    let a = append(&p, batch(5, t0, None, false)).await;
    check!((a.first_offset, a.last_offset) == (0, 4));
    let b1 = append(&p, batch(3, t0 + 100, Some((7, 0, 0)), false)).await;
    check!((b1.first_offset, b1.last_offset, b1.duplicate) == (5, 7, false));
    // The idempotent producer's retry: its original offsets, nothing added.
    let again = append(&p, batch(3, t0 + 100, Some((7, 0, 0)), false)).await;
    check!((again.first_offset, again.duplicate) == (5, true));
    let c = append(&p, batch(2, t0 + 200, Some((7, 0, 3)), false)).await;
    check!(c.first_offset == 8);
    // A sequence gap and a transactional batch are refused as Kafka does.
    let gap = p
        .append(batch(1, t0, Some((7, 0, 9)), false))
        .await
        .unwrap();
    check!(gap.unwrap_err().kafka_error_code() == 45);
    let txn = p.append(batch(1, t0, Some((8, 0, 0)), true)).await.unwrap();
    check!(txn.unwrap_err().kafka_error_code() == 48);
    // Garbage is refused before it reaches the writer.
    let junk = p.append(Bytes::from_static(&[0; 70])).await.unwrap();
    check!(junk.is_err());

    let records = decode(&read(&p, 0).await.unwrap());
    let offsets: Vec<i64> = records.iter().map(|r| r.offset).collect();
    check!(offsets == (0..10).collect::<Vec<_>>(), "dense from 0");
    check!(records[5].value.as_deref() == Some(&b"v1700000000100-0"[..]));
    check!(
        decode(&read(&p, 6).await.unwrap())[0].offset == 5,
        "from the batch holding 6"
    );
    check!(
        read(&p, 10).await.unwrap().is_empty(),
        "at the high watermark"
    );
    check!(matches!(
        read(&p, 11).await,
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    check!(p.offsets().high_watermark == 10);

    check!(offset_of(&p, OffsetQuery::Latest).await == Some(10));
    check!(offset_of(&p, OffsetQuery::Earliest).await == Some(0));
    check!(offset_of(&p, OffsetQuery::EarliestLocal).await == Some(0));
    check!(offset_of(&p, OffsetQuery::LatestTiered).await == None);
    check!(offset_of(&p, OffsetQuery::EarliestPendingUpload).await == Some(0));
    check!(offset_of(&p, OffsetQuery::AtOrAfter(t0 + 101)).await == Some(6));
    check!(offset_of(&p, OffsetQuery::MaxTimestamp).await == Some(9));
    check!(offset_of(&p, OffsetQuery::AtOrAfter(t0 + 10_000)).await == None);

    check!(p.delete_records(6).await.unwrap() == 6);
    check!(offset_of(&p, OffsetQuery::Earliest).await == Some(6));
    check!(matches!(
        read(&p, 2).await,
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    check!(
        p.delete_records(11).await.is_err(),
        "past the high watermark"
    );

    let store = dir.path().join(crate::diskless::DEFAULT_STORE_DIR);
    let cluster_id = broker.registry.cluster_id();
    check!(
        std::fs::read_dir(store.join("diskless").join(cluster_id))
            .unwrap()
            .count()
            >= 3,
        "objects live in the cluster's directory"
    );

    // Reopened (the runtime stopped as at shutdown): everything is back.
    broker.partitions.diskless_started().unwrap().stop().await;
    drop(p);
    drop(broker);
    let broker = open(dir.path()).await;
    let p = broker.partitions.storage("d", 0).unwrap();
    check!(p.offsets().high_watermark == 10);
    check!(p.offsets().log_start == 6);
    let records = decode(&read(&p, 6).await.unwrap());
    check!(records.iter().map(|r| r.offset).collect::<Vec<_>>() == (5..10).collect::<Vec<_>>());
    // The producer's state survived too: its next sequence follows on.
    let d = append(&p, batch(1, t0 + 300, Some((7, 0, 5)), false)).await;
    check!(d.first_offset == 10);
    broker.partitions.diskless_started().unwrap().stop().await;
}

#[test]
fn invalid_combinations_are_refused() {
    let check_with = |pairs: &[(&str, &str)]| {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        super::validate_topic(&|n| map.get(n).cloned())
    };
    check!(check_with(&[("diskless.enable", "false"), ("cleanup.policy", "compact")]).is_ok());
    check!(check_with(&[("diskless.enable", "true"), ("cleanup.policy", "delete")]).is_ok());
    let compact = check_with(&[
        ("diskless.enable", "true"),
        ("cleanup.policy", "delete,compact"),
    ]);
    check!(compact.unwrap_err().contains("cleanup.policy=compact"));
    let tiered = check_with(&[
        ("diskless.enable", "true"),
        ("remote.storage.enable", "true"),
    ]);
    check!(tiered.unwrap_err().contains("remote.storage.enable"));
}

/// DescribeLogDirs sizes, DescribeProducers states, producer expiry and
/// the size metric of diskless partitions, through the handlers, on the
/// embedded coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_dirs_producers_expiry_and_metrics_see_diskless_partitions() {
    use kafka_protocol::{
        messages::{
            DescribeLogDirsRequest, DescribeProducersRequest, TopicName,
            describe_log_dirs_request::DescribableLogDirTopic,
            describe_producers_request::TopicRequest,
        },
        protocol::StrBytes,
    };
    crate::metrics::install();
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path()).await;
    let b = Arc::clone(&broker);
    crate::blocking::run(move || {
        create_topic_now(
            &b,
            "d",
            2,
            BTreeMap::from([("diskless.enable".to_owned(), "true".to_owned())]),
            None,
        )?;
        create_topic_now(&b, "c", 1, BTreeMap::new(), None)
    })
    .await
    .unwrap()
    .unwrap();
    let p0 = broker.partitions.storage("d", 0).unwrap();
    let p1 = broker.partitions.storage("d", 1).unwrap();
    let t0 = 1_700_000_000_000;
    let first = batch(3, t0, Some((7, 0, 0)), false);
    let second = batch(2, t0 + 50, Some((7, 0, 3)), false);
    let other = batch(4, t0, None, false);
    let expected0 = u64::try_from(first.len() + second.len()).unwrap();
    append(&p0, first).await;
    append(&p0, second).await;
    append(&p1, other.clone()).await;
    let c = broker.partitions.storage("c", 0).unwrap();
    append(&c, batch(1, t0, None, false)).await;

    // DescribeLogDirs: every partition under the one directory, a diskless
    // one with the bytes of its batches.
    let mut every = DescribeLogDirsRequest::default();
    every.topics = None; // null: every topic
    let all = crate::handlers::admin::handle_describe_log_dirs(&broker, &every).await;
    check!(all.results.len() == 1);
    let sizes: BTreeMap<(String, i32), i64> = all.results[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.name.0.to_string(), p.partition_index), p.partition_size))
        })
        .collect();
    check!(sizes.get(&("d".to_owned(), 0)) == Some(&i64::try_from(expected0).unwrap()));
    check!(sizes.get(&("d".to_owned(), 1)) == Some(&i64::try_from(other.len()).unwrap()));
    check!(sizes.get(&("c".to_owned(), 0)).is_some_and(|s| *s > 0));
    // Asked for one diskless partition, only it.
    let mut wanted = DescribableLogDirTopic::default();
    wanted.topic = TopicName(StrBytes::from_static_str("d"));
    wanted.partitions = vec![1];
    let mut one = DescribeLogDirsRequest::default();
    one.topics = Some(vec![wanted]);
    let one = crate::handlers::admin::handle_describe_log_dirs(&broker, &one).await;
    let listed: Vec<_> = one.results[0]
        .topics
        .iter()
        .map(|t| (t.name.0.to_string(), t.partitions.len()))
        .collect();
    check!(listed == [("d".to_owned(), 1)]);

    // DescribeProducers: the coordinator's producer state, no transaction.
    let mut topic = TopicRequest::default();
    topic.name = TopicName(StrBytes::from_static_str("d"));
    topic.partition_indexes = vec![0, 1, 7];
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![topic];
    let described = crate::coordinator::txn::producers::describe_producers(&broker, &request).await;
    let partitions = &described.topics[0].partitions;
    check!(partitions.len() == 3);
    check!(partitions[0].error_code == 0);
    let states = &partitions[0].active_producers;
    check!(states.len() == 1);
    check!(states[0].producer_id.0 == 7);
    check!(states[0].producer_epoch == 0);
    check!(states[0].last_sequence == 4);
    check!(
        states[0].last_timestamp == t0 + 51,
        "the last batch's largest timestamp"
    );
    check!(states[0].coordinator_epoch == -1);
    check!(states[0].current_txn_start_offset == -1);
    check!(partitions[1].error_code == 0 && partitions[1].active_producers.is_empty());
    check!(partitions[2].error_code == 3, "UNKNOWN_TOPIC_OR_PARTITION");

    // Expiry: the producer's last batch is years old, so a day forgets it;
    // a later batch of its may start at any sequence.
    let runtime = broker.partitions.diskless_started().unwrap();
    runtime.expire_producers(86_400_000).await;
    let described = crate::coordinator::txn::producers::describe_producers(&broker, &request).await;
    check!(
        described.topics[0].partitions[0]
            .active_producers
            .is_empty()
    );
    let restarted = append(&p0, batch(1, t0 + 100, Some((7, 0, 40)), false)).await;
    check!(!restarted.duplicate);

    // The metrics: the diskless size beside the classic partition's.
    crate::metrics::refresh_diskless(&broker).await;
    crate::metrics::publish(&broker);
    let scrape = crate::metrics::render();
    let size_line = format!(
        "krabka_diskless_log_size_bytes{{topic=\"d\",partition=\"1\"}} {}\n",
        other.len()
    );
    check!(scrape.contains(&size_line), "{scrape}");
    check!(scrape.contains("krabka_partition_log_end_offset{topic=\"d\",partition=\"0\"} 6\n"));
    check!(
        !scrape.contains("krabka_diskless_log_size_bytes{topic=\"c\""),
        "a classic partition has no diskless size"
    );
    runtime.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_and_the_leader_epoch_are_rewritten_in_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path()).await;
    create_diskless(
        &broker,
        "lat",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .await;
    let p = broker.partitions.storage("lat", 0).unwrap();
    let sent = batch(3, 1_600_000_000_000, None, false);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let info = append(&p, sent.clone()).await;
    let appended_at = info.log_append_time.expect("the append time is answered");
    check!(appended_at >= before);
    let stored = read(&p, 0).await.unwrap();
    // As Kafka does: the batch's type and max timestamp (the records keep
    // their deltas), under a recomputed CRC that the header check verifies.
    let header = krabka_log::batch::check_batch(&stored).unwrap();
    check!(header.is_log_append_time());
    check!(header.max_timestamp == appended_at);
    let records = decode(&stored);
    check!(records.len() == 3);
    for r in &records {
        check!(r.timestamp_type == TimestampType::LogAppend);
        check!(r.partition_leader_epoch == crate::partition::LEADER_EPOCH.0);
    }
    // The request's own bytes were not touched: the rewrite is the object's.
    check!(decode(&sent)[0].timestamp_type == TimestampType::Creation);
    broker.partitions.diskless_started().unwrap().stop().await;
}
